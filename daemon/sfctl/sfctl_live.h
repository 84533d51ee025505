/*
 * sfctl's live commands and their query-socket client. The commands talk to
 * a running sfd; sfctl_query.c owns the socket protocol, sfctl_live.c the
 * commands' output and the helpers they share. Exit codes come from sfctl.h.
 */
#ifndef SFCTL_LIVE_H
#define SFCTL_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sfctl_args.h"
#include "stagefrontier/limits.h"

enum sfctl_kind {
    SFCTL_Q_STATUS = 0,
    SFCTL_Q_JOBS,
    SFCTL_Q_REPORT,
    SFCTL_Q_RANKS,
    SFCTL_Q_RECORD,
    SFCTL_Q_PEERS,
    SFCTL_Q_BASELINE,
    SFCTL_Q_CAPTURE,
    SFCTL_Q_CAPTURES,
    SFCTL_Q_EVENTS
};

struct sfctl_request {
    enum sfctl_kind kind;
    const char *job_id;   /* NULL: none */
    int64_t window;       /* -1: latest */
    uint32_t limit;       /* 0: default */
    uint32_t format;      /* 0 JSON, 1 text */
    bool clear;           /* BASELINE: drop the pin */
    bool quiet_not_found; /* print nothing for "not found" (watch waiting) */
    /* CAPTURE: the ranks, or the latest window's suspects; steps 0: sfd's default */
    const uint32_t *ranks;
    uint32_t n_ranks;
    bool suspects;
    uint32_t steps;
};

/* The socket path in force: --socket, else $SF_QUERY_SOCKET, else the default. */
const char *sfctl_socket_path(void);
void sfctl_set_socket_path(const char *path);

/* Sends one request and collects the chunked answer. Returns an exit code of
 * sfctl.h; on SFCTL_EXIT_OK *ret_text (NUL-terminated, malloc'd) holds the
 * answer. On failure a clear message has been printed to stderr. */
int sfctl_query(const struct sfctl_request *req, char **ret_text, size_t *ret_len);
/* sfctl_query, then the answer decoded: on SFCTL_EXIT_OK *ret_json holds it
 * and *ret_text (malloc'd) the text it came as. An answer that is not JSON
 * is reported on stderr and gives SFCTL_EXIT_INTERNAL. */
int sfctl_ask(const struct sfctl_request *req, json_t **ret_json, char **ret_text);

/* The shape of the plain live commands: parse [--json] and, exactly when
 * takes_job, one JOB; send one query of the given kind, then print the
 * answer as it came (--json) or through show() (job NULL when the command
 * takes none). Returns an exit code of sfctl.h. */
int sfctl_show(int argc, char **argv, const char *usage, bool takes_job, enum sfctl_kind kind,
               int (*show)(json_t *answer, const char *job));

int sfctl_cmd_status(int argc, char **argv);
int sfctl_cmd_jobs(int argc, char **argv);
int sfctl_cmd_report(int argc, char **argv);
int sfctl_cmd_ranks(int argc, char **argv);
int sfctl_cmd_watch(int argc, char **argv);
int sfctl_cmd_record(int argc, char **argv);
int sfctl_cmd_baseline(int argc, char **argv);
int sfctl_cmd_capture(int argc, char **argv);
int sfctl_cmd_captures(int argc, char **argv);
int sfctl_cmd_events(int argc, char **argv);
/* One line for a live verdict object (docs/LIVE.md) into buf. */
void sfctl_verdict_line(json_t *v, char *buf, size_t len);
/* A field of an answer: an integer (0 when absent or not an integer), a
 * string ("-" when absent or not a string). */
long long sfctl_json_int(json_t *o, const char *key);
const char *sfctl_json_str(json_t *o, const char *key);
/* Seconds since the epoch as "2026-11-24 05:31:07Z" (UTC), "-" for null. */
void sfctl_format_time(json_t *seconds, char *buf, size_t len);

#endif

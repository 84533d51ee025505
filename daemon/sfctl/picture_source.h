/*
 * What `sfctl plot` and `sfctl export` share: their input (a live job's
 * recording over the query socket, or a replay file), the choice of windows,
 * and an output file that appears whole or not at all (temp file + rename).
 */
#ifndef SFCTL_PICTURE_SOURCE_H
#define SFCTL_PICTURE_SOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "replay.h"
#include "stagefrontier/limits.h"

/* The windows asked for: first..last by index (both -1: the latest full
 * window, that is the last one neither partial nor closed early, else the
 * last one). */
struct picture_select {
    int64_t first, last;
};

struct picture_source {
    const char *prog;  /* "sfctl plot" */
    const char *usage; /* the command's usage text */
    const char *file;  /* --file, or NULL for a live job */
    const char *job;   /* JOB, or NULL: the one job sfd has */
    char job_buf[SF_MAX_JOB_ID_LEN + 32];
    const char *out; /* -o OUT */
    char label[300]; /* names the input in messages */
    struct replay_input input;
    struct sfctl_report_opts report;
};

/* getopt_long entries both commands take: -o, --file and the replay options
 * (needs <getopt.h>). */
#define PICTURE_SOURCE_LONGOPTS                                                                    \
    {"output", required_argument, NULL, 'o'}, {"file", required_argument, NULL, 'f'},              \
        {"window-steps", required_argument, NULL, 'w'},                                            \
        {"warmup-steps", required_argument, NULL, 'u'}, {"tau", required_argument, NULL, 't'},     \
        {"gates", required_argument, NULL, 'g'}, {"baseline", required_argument, NULL, 'b'},       \
    {                                                                                              \
        "baseline-windows", required_argument, NULL, 'n'                                           \
    }

/* Takes one getopt result: 1 when it was one of those options, else 0. */
int picture_source_opt(struct picture_source *src, int c, const char *arg);
/* After getopt: JOB (or --file, not both), -o, the replay options. Returns
 * an exit code, with the usage printed on a bad command line. */
int picture_source_args(struct picture_source *src, int argc, char **argv, int optind_);
/* Prints "PROG: <fmt with arg>" and the usage; returns SFCTL_EXIT_USAGE. */
int picture_usage_error(const struct picture_source *src, const char *fmt, const char *arg);

/* Reads the input. Returns an exit code of sfctl.h (message printed). */
int picture_source_load(struct picture_source *src);
void picture_source_clear(struct picture_source *src);

/* Resolves the default selection to the latest full window. Returns an exit
 * code: 5 when the input has no window, or no window in the range asked. */
int picture_source_select(struct picture_source *src, struct picture_select *sel);

/* Walks the selected windows in order (the windows before them are computed
 * too: the straggler's persistence and the baseline depend on them). */
int picture_source_each(struct picture_source *src, const struct picture_select *sel,
                        sfctl_window_visit visit, void *user);

/* "N" or "A-B" into a selection; -EINVAL when malformed. */
int picture_parse_windows(const char *text, bool range_ok, struct picture_select *sel);

/* An output file written whole or not at all. */
struct picture_out {
    char *path, *tmp;
    FILE *f;
};

/* Creates the temp file beside path. Returns an exit code (1 and a message
 * naming path when it cannot be written). */
int picture_out_open(struct picture_out *o, const char *prog, const char *path);
/* Flushes, syncs and renames into place; on failure removes the temp file.
 * Returns an exit code. */
int picture_out_commit(struct picture_out *o, const char *prog);
/* Removes the temp file; accepts an unopened or committed one. */
void picture_out_abort(struct picture_out *o);

#endif

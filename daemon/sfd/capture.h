/*
 * Trace captures (docs/SFD.md, "Captures"): the per-job table of capture
 * requests and their per-rank outcomes, requests sent on a rank's ingest
 * connection, the replies, the automatic trigger with its cooldown and
 * budget, and the CAPTURE/CAPTURES answers. Never changes windows or reports.
 */
#ifndef SFD_CAPTURE_H
#define SFD_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "stagefrontier/limits.h"
#include "stagefrontier/live.h"

struct sfd;
struct sfd_job;
struct sfd_conn;
struct sfd_stored;
struct json_t;
struct Stagefrontier__CaptureReply;
struct sfd_peer_capture_request;
struct sfd_peer_capture_result;

#define SFD_CAPTURES_KEPT 32     /* captures listed per job, oldest dropped first */
#define SFD_AUTO_CAPTURE_MAX 100 /* bound of auto_capture_max (per day) */
/* In a cluster, a rank no node claims within this is not connected. */
#define SFD_CAPTURE_CLAIM_MS 5000

struct sfd_capture_ask {
    const uint32_t *ranks; /* NULL with suspects */
    uint32_t n_ranks;
    bool suspects;  /* the latest window's suspects plus a control rank */
    uint32_t steps; /* 0: auto_capture_steps */
    uid_t uid;      /* who asks (logged) */
};

/* The job's captures since sfd started, by trigger (0 operator, 1 auto):
 * started, and ended done or failed; the latest one's creation (Unix ms, 0
 * none). For the Prometheus export. */
struct sfd_capture_counts {
    uint64_t started[2], done[2], failed[2];
    int64_t last_created_ms;
};

/* Checks a reply's fields (pure): 0 or -EINVAL. */
int sfd_validate_capture_reply(const struct Stagefrontier__CaptureReply *r);
/* An operator's or user's capture: sends the requests, returns the id. */
int sfd_capture_ask(struct sfd_job *job, const struct sfd_capture_ask *ask, uint64_t *ret_id,
                    const char **ret_err);
/* A reply on a step-record connection; a reply sfd cannot match (unknown id,
 * another rank's, after the end) is a counted rejection. */
void sfd_capture_reply(struct sfd_conn *c, const struct Stagefrontier__CaptureReply *r);
/* A window's report was stored: the automatic trigger. */
void sfd_capture_consider(struct sfd_job *job, const struct sfd_stored *s);
/* A live verdict started (docs/LIVE.md): a straggler's rank and a healthy
 * control are captured at once, within the same cooldown and daily budget. */
void sfd_capture_consider_live(struct sfd_job *job, const sf_live_verdict *v);
/* In a cluster (docs/CLUSTER.md, "Captures"): a request from another node,
 * either a member's to this node as the root (from_root false) or the root's
 * to this member; and a rank's outcome likewise. A negative return (unknown
 * job, capture or rank, a duplicate id, a rank of another node, an outcome
 * after the end) is counted by the peer layer as a rejection. */
int sfd_capture_peer_request(struct sfd *d, uint32_t from, bool from_root,
                             const struct sfd_peer_capture_request *q);
int sfd_capture_peer_result(struct sfd *d, uint32_t from, bool from_root,
                            const struct sfd_peer_capture_result *r);
/* Times out requests without an answer (the liveness tick). */
void sfd_captures_tick(struct sfd *d);
/* The CAPTURES answer (newest last) and one capture's object. */
struct json_t *sfd_captures_json(const struct sfd_job *job);
struct json_t *sfd_capture_json(const struct sfd_job *job, uint64_t id);
void sfd_captures_counts(const struct sfd_job *job, struct sfd_capture_counts *ret);
void sfd_captures_free(struct sfd_job *job);

#endif

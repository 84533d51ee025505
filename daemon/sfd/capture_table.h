/*
 * The capture table's layout and the helpers the capture files share
 * (capture.c, capture_auto.c, capture_peer.c, capture_json.c). Private to
 * them: everything else goes through capture.h.
 */
#ifndef SFD_CAPTURE_TABLE_H
#define SFD_CAPTURE_TABLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "capture.h"
#include "stagefrontier/accounting.h"
#include "stagefrontier/limits.h"

enum target_state {
    T_REQUESTED, /* sent, no answer yet */
    T_ACCEPTED,  /* the client will capture from its next step */
    T_DONE,
    T_FAILED,        /* the client's handler or profiler failed */
    T_UNSUPPORTED,   /* the client has no capture handler */
    T_BUSY,          /* the client was capturing already */
    T_NOT_CONNECTED, /* no step-record connection of the rank on this node */
    T_UNDELIVERABLE, /* its socket refused the request */
    T_TIMED_OUT,     /* no outcome within capture_timeout_s */
};

/* The states' names in the answers and logs, indexed by enum target_state. */
extern const char *const sfd__capture_target_names[];

struct target {
    uint32_t rank;
    uint8_t state;
    bool control;                  /* the healthy control rank */
    uint32_t node;                 /* the cluster node hosting it, 0: none known */
    int64_t first_step, last_step; /* -1: unknown */
    int64_t started_at_ms, finished_at_ms;
    char *text; /* done: the trace path; else the reason; NULL: none */
};

/* Still waiting on its rank: asked, or started. */
static inline bool sfd__target_open(const struct target *t)
{
    return t->state == T_REQUESTED || t->state == T_ACCEPTED;
}

struct capture {
    uint64_t id;
    bool automatic;
    bool communication; /* for a collective that started late: record the collectives */
    int64_t window;     /* the window behind it, -1: none */
    uint32_t segment;
    uint32_t steps;
    uid_t uid;
    char reason[SF_MAX_CAPTURE_REASON + 1];
    int64_t created_at_ms; /* realtime */
    uint64_t created_mono_ms;
    bool ended; /* counted in the table's done or failed */
    uint32_t n;
    struct target t[SF_MAX_CAPTURE_RANKS];
};

struct sfd_job_captures {
    struct capture *c[SFD_CAPTURES_KEPT]; /* oldest first */
    uint32_t n;
    /* the automatic trigger */
    int64_t considered_index;    /* the last window looked at, so a replaced report */
    uint32_t considered_segment; /* of the same window is not counted twice */
    bool considered_any;
    uint32_t route_rank, route_run;         /* the fallback: a fixed routed leader */
    uint64_t last_auto_ms;                  /* monotonic; 0: never */
    uint64_t auto_ms[SFD_AUTO_CAPTURE_MAX]; /* the last day's, a ring */
    uint32_t n_auto, auto_head;
    uint64_t auto_fired, auto_suppressed_cooldown, auto_suppressed_budget;
    /* since sfd started, by trigger (0 operator, 1 auto), for the export */
    uint64_t started[2], done[2], failed[2];
    int64_t last_created_ms;
};

/* capture.c: the table and the lifecycle. */
struct sfd_job_captures *sfd__capture_table(struct sfd_job *job);
struct capture *sfd__capture_find(struct sfd_job_captures *tb, uint64_t id);
void sfd__capture_set_text(struct sfd_job *job, struct target *t, const char *text);
bool sfd__capture_running(const struct capture *k);
const char *sfd__capture_state(const struct capture *k);
void sfd__capture_settle(struct sfd_job *job, struct capture *k);
struct capture *sfd__capture_new(struct sfd_job *job, uint64_t id, uint32_t steps,
                                 const char *reason, uid_t uid, bool automatic,
                                 const struct sfd_stored *s);
void sfd__capture_add_target(struct capture *k, uint32_t rank, bool control);
void sfd__capture_note_started(struct sfd_job *job, const struct capture *k);
void sfd__capture_launch(struct sfd_job *job, struct capture *k);
void sfd__capture_ask_local(struct sfd_job *job, struct capture *k);

/* capture_auto.c: suspects and the control rank. */
uint32_t sfd__capture_window_suspects(const sf_report *r, uint32_t *out, uint32_t cap);
int64_t sfd__capture_control_rank(const struct sfd_job *job, const struct sfd_stored *s,
                                  const uint32_t *sus, uint32_t n_sus);

/* capture_peer.c: sharing with the other nodes. */
bool sfd__capture_shared(const struct sfd_job *job);
void sfd__capture_share_outcome(struct sfd_job *job, const struct capture *k,
                                const struct target *t, uint32_t except);
int sfd__capture_share_request(struct sfd_job *job, const struct capture *k);

#endif

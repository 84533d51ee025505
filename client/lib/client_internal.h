/*
 * Private state of one sf_client, shared by the files of libsfclient:
 * client.c (open/close/options), timing.c (hot path), ring.c (record ring),
 * batch.c (batch encoding and flush policy), schema_hash.c (stage schema).
 */
#ifndef SF_CLIENT_INTERNAL_H
#define SF_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <stagefrontier/client.h>
#include <stagefrontier/limits.h>

#include "cuda_events.h"
#include "side_beacon.h"
#include "transport.h"

#define SF__DEFAULT_BUFFER 4096u
#define SF__DEFAULT_BATCH 64u
#define SF__DEFAULT_FLUSH_MS 100
#define SF__EAGAIN_RETRY_NS (5 * INT64_C(1000000)) /* socket full: retry after 5 ms */
#define SF__MAX_PROBE_DEPTH 16
#define SF__GPU_NAME_MAX 64 /* a CUDA_VISIBLE_DEVICES entry sfd accepts */
/* Offsets a ring slot keeps per synchronizing stage: arrival, issue,
 * completion (each -1 when unmarked). */
#define SF__SYNC_MARKS 5

/* The public caps (client.h, a stable ABI) are the project's limits. */
_Static_assert(SF_CLIENT_MAX_STAGES == SF_MAX_STAGES, "client stage cap");
_Static_assert(SF_CLIENT_MAX_WORLD_SIZE == SF_MAX_RANKS, "client world-size cap");
_Static_assert(SF_CLIENT_MAX_JOB_ID_LEN == SF_MAX_JOB_ID_LEN, "client job-id length");
_Static_assert(SF_CLIENT_MAX_STAGES <= 256, "sync_slot holds a stage index in one byte");
_Static_assert(SF_CAPTURE_MAX_STEPS == SF_MAX_CAPTURE_STEPS, "client capture steps");
_Static_assert(SF_CAPTURE_PATH_MAX == SF_MAX_CAPTURE_PATH, "client trace path length");
_Static_assert(SF_CAPTURE_ERROR_MAX == SF_MAX_CAPTURE_ERROR, "client capture error length");
_Static_assert(SF_CLIENT_MAX_HEARTBEAT_MS == SF_MAX_HEARTBEAT_MS, "client heartbeat interval");
_Static_assert(SF_CLIENT_MAX_FLUSH_MS == SF_MAX_FLUSH_MS, "client flush interval");
#define SF_CLIENT_MAX_RESTART_COUNT SF_MAX_RESTART_COUNT

#define SF__FLAG_VIOLATION (1u << 0)
#define SF__FLAG_NON_MONOTONIC (1u << 1)

/* ---- schema_hash.c ---- */
struct sf__schema {
    uint32_t n; /* stages, residual last */
    char *names[SF_CLIENT_MAX_STAGES];
    char *groups[SF_CLIENT_MAX_STAGES]; /* effective groups */
    uint64_t forward_mask;              /* stages named model.fwd_loss_cpu_wall[@k] */
    uint64_t sync_mask;                 /* synchronizing stages (split by sfd at the arrival) */
    uint32_t n_sync;
    uint8_t sync_slot[SF_CLIENT_MAX_STAGES]; /* stage -> index among the synchronizing */
    uint32_t sync_ids[SF_CLIENT_MAX_STAGES]; /* [n_sync] their stage ids, ascending */
    uint64_t hash;                           /* of the split schema when sync_mask is set */
    char *storage;                           /* one allocation holding every string */
};
bool sf__stage_name_valid(const char *name);
uint64_t sf__schema_hash(uint32_t version, uint32_t n, const char *const *names,
                         const char *const *groups);
/* Builds the schema from the options (NULL names: defaults, expanded by
 * accumulation). -EINVAL, -ENOMEM. */
int sf__schema_build(struct sf__schema *ret, const char *const *names, const char *const *groups,
                     uint32_t n, uint32_t accumulation);
void sf__schema_free(struct sf__schema *s);
/* Marks synchronizing stages (a mask of stage ids, never the residual) and
 * rehashes the schema as sfd will split it. -EINVAL. */
int sf__schema_mark_sync(struct sf__schema *s, uint64_t sync_mask);

/* ---- ring.c ---- */
struct sf__record {
    int64_t step, wall_ns, overlap_ns;
    uint32_t violations, flags;
    struct sf__event_sample event; /* state 0: none */
};
struct sf__ring {
    uint32_t cap, n_stages; /* n_stages: the stride of one record's values */
    uint32_t head, count;   /* oldest at (head - count) mod cap */
    struct sf__record *recs;
    int64_t *durations; /* cap * n_stages */
};
int sf__ring_init(struct sf__ring *r, uint32_t cap, uint32_t n_stages);
void sf__ring_free(struct sf__ring *r);
/* The slot the next record goes to, or NULL when full. */
struct sf__record *sf__ring_reserve(struct sf__ring *r, int64_t **ret_durations);
void sf__ring_commit(struct sf__ring *r);
/* The i-th oldest queued record (i < count). */
struct sf__record *sf__ring_peek(const struct sf__ring *r, uint32_t i, int64_t **ret_durations);
void sf__ring_consume(struct sf__ring *r, uint32_t n);

/* ---- control.c: sfd's capture requests and the replies ---- */
#define SF__CONTROL_READS 4       /* control messages read per flush, at most */
#define SF__MAX_REPLIES 4         /* replies waiting for the next flush */
#define SF__CONTROL_MAX_BYTES 256 /* a ControlMessage is far smaller; larger is hostile */
#define SF__CONTROL_ARENA 1024    /* decoding memory, allocated at open */

enum sf__cap_state { SF__CAP_IDLE, SF__CAP_PENDING, SF__CAP_RUNNING };

struct sf__reply {
    uint64_t id;
    int state;                     /* STAGEFRONTIER__CAPTURE_REPLY__STATE__* */
    int64_t first_step, last_step; /* -1: not sent */
    int64_t started_at_ms, finished_at_ms;
    char text[SF_CAPTURE_PATH_MAX + 1]; /* DONE: the path; else the reason, or "" */
};

/* Bump allocator over a fixed buffer, so decoding never calls malloc. */
struct sf__arena {
    uint8_t *base;
    size_t cap, used;
};

struct sf__capture {
    sf_capture_handler fn;
    void *arg;
    sf_capture_request req;
    uint32_t steps_done;
    bool failed;
    int64_t started_at_ms;
    char out[SF_CAPTURE_PATH_MAX + 1];
    struct sf__reply replies[SF__MAX_REPLIES];
    uint32_t n_replies;
    uint64_t requested, done, failed_total, unsupported, busy, rejected, replies_lost;
    struct sf__arena arena;
    uint8_t *buf; /* receive and reply packing, SF__CONTROL_BUF */
};
#define SF__CONTROL_BUF (SF_CAPTURE_PATH_MAX + SF_CAPTURE_ERROR_MAX + 256)

/* Decodes and checks one ControlMessage (pure; the fuzz target's entry):
 * 0 with *ret filled, -EBADMSG (undecodable or unknown body), -ERANGE (a
 * field out of bounds). The arena is reset first. */
int sf__control_decode(const uint8_t *buf, size_t len, struct sf__arena *arena,
                       sf_capture_request *ret);
/* ---- heartbeat.c ---- */
struct sf__heartbeat;
int sf__heartbeat_start(sf_client *c, uint32_t interval_ms, struct sf__heartbeat **ret);
/* Stops and frees. In a fork child (the thread is not there) it only frees. */
void sf__heartbeat_stop(struct sf__heartbeat *h, bool in_child);
uint64_t sf__heartbeat_sent(const struct sf__heartbeat *h);

/* ---- the client ---- */
struct sf_client {
    bool inert; /* disabled, or inherited across fork */
    bool disabled;
    uint64_t fork_generation; /* sf__fork_generation at open */
    struct sf__schema schema;
    uint32_t n_stages;

    /* hot-path state */
    bool in_step, any_step;
    int64_t step, step_t0, last_now;
    int open_stage; /* -1: none */
    int64_t stage_t0;
    uint64_t nested_ignored; /* ids whose nested begin was refused */
    int64_t *cur;            /* [n_stages] durations of the open step */
    int64_t *cur_arrival;    /* [schema.n_sync] own work before the arrival, -1 none */
    int64_t *cur_issue;      /* [schema.n_sync] stage offset of the issue mark, -1 none */
    int64_t *issue_at;       /* [schema.n_sync] clock of the issue mark */
    /* [schema.n_sync] clock of the completion mark: written with relaxed
     * atomics by whichever thread runs the backend's completion callback. */
    int64_t *complete_at;
    /* [schema.n_sync] accumulated sync waits of the open step, the sync
     * points counted, and the clock of the open sync point's entry (-1:
     * none open). */
    int64_t *cur_wait, *cur_waits, *sync_enter_at;
    uint32_t sync_groups[SF_CLIENT_MAX_STAGES]; /* [schema.n_sync] enum sf_sync_group */
    bool any_sync_group;                        /* some group is not world: sent */
    uint32_t cur_violations, cur_flags;
    int64_t cur_extra_wall; /* waits charged ahead of this step */
    int64_t pending_step[SF_CLIENT_DATA_LOOKAHEAD];
    int64_t pending_ns[SF_CLIENT_DATA_LOOKAHEAD];
    uint32_t probe_depth;
    char probe_names[SF__MAX_PROBE_DEPTH][SF_CLIENT_MAX_NAME_LEN + 1];
    sf_cuda_channel *cuda;

    struct sf__ring ring;

    /* batching */
    uint32_t batch_records; /* effective, bounded by the datagram size */
    int64_t last_flush_ns, next_send_ns;
    int64_t flush_interval_ns; /* SF_FLUSH_MS: a partial batch waits at most this */
    uint8_t *sendbuf;          /* SF__MAX_DATAGRAM */
    uint8_t *hellobuf;         /* SF__MAX_DATAGRAM */
    Stagefrontier__StepRecord *pb_recs;
    Stagefrontier__StepRecord **pb_rec_ptrs;
    Stagefrontier__EventSample *pb_events;
    Stagefrontier__Arrival *pb_arrivals; /* [batch_records * n_sync] */
    Stagefrontier__Arrival **pb_arrival_ptrs;

    /* counters */
    uint64_t steps, records_sent, records_dropped, batches_sent, violations;
    bool drop_range_valid;
    int64_t drop_first, drop_last;

    /* identity, borrowed by the Hello */
    struct sf__hello_info hello;
    char job_id[SF_CLIENT_MAX_JOB_ID_LEN + 1];
    char role[SF_CLIENT_MAX_ROLE_LEN + 1];
    sf_parallel parallel; /* declared == 0: none */
    char host[256];
    char gpu[SF__GPU_NAME_MAX + 1]; /* "": not known */
    char run_id[SF_MAX_RUN_ID_LEN + 1];
    sf__transport tr;

    /* captures: cap_state is the one field the hot path reads */
    uint8_t cap_state;               /* enum sf__cap_state */
    struct sf__capture *cap;         /* allocated at open */
    struct sf__heartbeat *heartbeat; /* NULL: off */
};

/* ---- launch_id.c ---- */
/* The run id and restart count of this process's launch, from SF_RUN_ID,
 * torchrun, Slurm or MASTER_ADDR:MASTER_PORT ("" when none is set). */
void sf__launch_identity(char *run_id, size_t cap, uint32_t *restart_count);

/* ---- batch.c ---- */
/* Flush policy at step end: one batch at most, when full or due. */
void sf__batch_maybe_send(sf_client *c, int64_t now_ns);
/* Sends one batch of whatever is queued (reconnecting if due). */
int sf__batch_send_one(sf_client *c, int64_t now_ns);
/* Drops every queued record, counting them. */
void sf__batch_drop_all(sf_client *c);
/* Counts one record refused by a full ring. */
void sf__batch_note_drop(sf_client *c, int64_t step);
int sf__batch_alloc(sf_client *c);
void sf__batch_free(sf_client *c);

/* ---- control.c ---- */
int sf__control_alloc(sf_client *c);
void sf__control_free(sf_client *c);
/* At flush, connected: reads pending control messages without blocking and
 * sends queued replies. Never blocks; a reply that does not fit is kept. */
void sf__control_exchange(sf_client *c, int64_t now_ns);
/* Hot-path hooks, called only when cap_state != SF__CAP_IDLE. before_begin
 * always calls the handler: the caller rereads the clock after it. */
void sf__capture_before_begin(sf_client *c, int64_t step);
void sf__capture_after_end(sf_client *c);
/* sf_client_close: ends a running capture with what it has. */
void sf__capture_finish_early(sf_client *c);

/* ---- client.c ---- */
/* Turns a client inherited by a fork() child inert; returns true if it did. */
bool sf__fork_check(sf_client *c);

#endif

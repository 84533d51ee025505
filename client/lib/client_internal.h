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
#define SF__FLUSH_INTERVAL_NS (100 * INT64_C(1000000)) /* 100 ms */
#define SF__EAGAIN_RETRY_NS (5 * INT64_C(1000000))     /* socket full: retry after 5 ms */
#define SF__MAX_PROBE_DEPTH 16

/* The public caps (client.h, a stable ABI) are the project's limits. */
_Static_assert(SF_CLIENT_MAX_STAGES == SF_MAX_STAGES, "client stage cap");
_Static_assert(SF_CLIENT_MAX_WORLD_SIZE == SF_MAX_RANKS, "client world-size cap");
_Static_assert(SF_CLIENT_MAX_JOB_ID_LEN == SF_MAX_JOB_ID_LEN, "client job-id length");
_Static_assert(SF_CLIENT_MAX_STAGES <= 256, "sync_slot holds a stage index in one byte");

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
    uint8_t *sendbuf;  /* SF__MAX_DATAGRAM */
    uint8_t *hellobuf; /* SF__MAX_DATAGRAM */
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
    char host[256];
    sf__transport tr;
};

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

/* ---- client.c ---- */
/* Turns a client inherited by a fork() child inert; returns true if it did. */
bool sf__fork_check(sf_client *c);

#endif

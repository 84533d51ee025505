/*
 * Lock-free aggregation of NCCL collectives for one communicator: fixed pools
 * sized at init, atomics only on NCCL's threads, drop-and-count when a pool is
 * full. Cumulative counters are never reset; the flusher ships deltas, so it
 * never races with writers. Keys are split by step parity and remember their
 * latest step, so a flush that comes after a step change still ships each
 * step's collectives under their own step. No I/O here.
 */
#ifndef SF_NCCL_AGG_H
#define SF_NCCL_AGG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SF_NCCL_MAX_KEYS 256    /* NcclBatch carries at most 256 aggregates */
#define SF_NCCL_COLL_RING 4096  /* collectives whose kernel timing may be in flight */
#define SF_NCCL_CHILD_POOL 4096 /* kernel-channel events in flight */
#define SF_NCCL_PROBES 16       /* bounded search for a free slot */
#define SF_NCCL_NAME_LEN 32
#define SF_NCCL_ENQ_RING 1024 /* enqueue points: (step, stage) slots kept for the flusher */
#define SF_NCCL_ENQ_STAGES 8  /* synchronizing stages told apart within one step */

/* Handle kinds: the first byte of every handle we give NCCL. */
enum sf_nccl_kind { SF_NCCL_H_GROUP = 1, SF_NCCL_H_COLL, SF_NCCL_H_PROXY_OP, SF_NCCL_H_KERNEL_CH };

struct sf_nccl_key {
    _Atomic uint64_t hash;      /* 0: empty; claimed by CAS */
    _Atomic uint32_t published; /* the strings below are written */
    char collective[SF_NCCL_NAME_LEN + 1], datatype[SF_NCCL_NAME_LEN + 1];
    char algorithm[SF_NCCL_NAME_LEN + 1], protocol[SF_NCCL_NAME_LEN + 1];
    uint32_t size_bucket;
    int32_t stage;             /* enclosing stage id, -1 unknown */
    uint32_t epoch;            /* parity of the steps counted here */
    _Atomic int64_t last_step; /* latest step counted here */
    _Atomic uint64_t count, bytes, gpu_ns, timed;
};

struct sf_nccl_agg;

struct sf_nccl_tag {
    uint8_t kind;
    struct sf_nccl_agg *agg;
};

struct sf_nccl_coll {
    uint8_t kind;
    struct sf_nccl_agg *agg;
    uint32_t key;        /* index into keys, or UINT32_MAX */
    uint32_t n_channels; /* kernel channels that complete its timing */
    _Atomic uint32_t ch_pending, ch_done;
    _Atomic uint64_t t_min, t_max;
    /* The enqueue point this collective last wrote (enq_seq 0: none): its
     * kernel times go there if no later collective of that (step, stage)
     * has moved the slot since. */
    uint32_t enq_slot, enq_seq;
};

struct sf_nccl_kch {
    uint8_t kind;
    _Atomic uint32_t in_use;
    struct sf_nccl_coll *parent;
    uint64_t start, stop;
};

/* The enqueue point of one (step, synchronizing stage): the offset from the
 * stage's start at which its latest collective was enqueued, the stage's
 * start itself (CLOCK_MONOTONIC), and, once that collective's kernel
 * channels have all reported, its kernel's GPU start and end (GPU
 * globaltimer; 0: not yet, or never). tag packs step and stage (0: empty);
 * a writer bumps seq around its stores so the flusher can tell a torn read. */
struct sf_nccl_enq {
    _Atomic uint32_t seq; /* odd while a writer is inside */
    _Atomic uint64_t tag; /* (step << 7 | stage) + 1 */
    _Atomic int64_t offset_ns;
    _Atomic int64_t base_ns;
    _Atomic uint64_t gpu_start, gpu_end;
};

/* One consistent read of a slot. */
struct sf_nccl_enq_point {
    uint64_t tag;
    int64_t offset_ns, base_ns;
    uint64_t gpu_start, gpu_end; /* 0: no kernel times */
};

struct sf_nccl_agg {
    struct sf_nccl_tag group_tag, proxy_tag;
    _Atomic uint64_t coll_next;
    _Atomic uint64_t kch_next;
    _Atomic uint64_t groups;      /* top-level Group events seen to stop */
    _Atomic uint64_t dropped;     /* events dropped: a pool or the key table full */
    _Atomic uint64_t timing_lost; /* collectives whose kernel timing never completed */
    struct sf_nccl_key keys[SF_NCCL_MAX_KEYS];
    struct sf_nccl_enq enq[SF_NCCL_ENQ_RING];
    struct sf_nccl_coll colls[SF_NCCL_COLL_RING];
    struct sf_nccl_kch kchs[SF_NCCL_CHILD_POOL];
};

/* What a collective is, as read from an event descriptor. */
struct sf_nccl_coll_info {
    const char *func, *datatype, *algo, *proto;
    uint64_t count;
    uint32_t n_channels;
    int32_t stage;
    int64_t step;              /* the trainer's step at enqueue, >= 0 */
    bool enqueue_point;        /* enclosed by a synchronizing stage: */
    int64_t enqueue_offset_ns; /*   enqueued this long after its start, */
    int64_t enqueue_now_ns;    /*   at this CLOCK_MONOTONIC time */
};

void sf__nccl_agg_init(struct sf_nccl_agg *agg);
/* Element size of an NCCL datatype name ("ncclFloat32"), 0 when unknown. */
unsigned sf__nccl_type_size(const char *datatype);
/* floor(log2(bytes)), 0 for bytes <= 1. */
uint32_t sf__nccl_size_bucket(uint64_t bytes);

/* Counts the collective and returns its handle, or NULL when no slot was free
 * (the counts still land; only its kernel timing is dropped). */
struct sf_nccl_coll *sf__nccl_coll_start(struct sf_nccl_agg *agg,
                                         const struct sf_nccl_coll_info *ci);
/* A kernel channel under parent (NULL parent or a full pool: NULL, counted). */
struct sf_nccl_kch *sf__nccl_kch_start(struct sf_nccl_agg *agg, void *parent, uint64_t gpu_start);
void sf__nccl_kch_record_stop(struct sf_nccl_kch *k, uint64_t gpu_stop);
void sf__nccl_kch_stop(struct sf_nccl_kch *k);

/* The slot of (step, stage) and its tag; stage is 0..63. */
uint32_t sf__nccl_enq_slot(int64_t step, int32_t stage);
uint64_t sf__nccl_enq_tag(int64_t step, int32_t stage);
/* Reads a slot consistently: 0 and its tag and offset, or -EAGAIN while a
 * writer is inside (try at the next flush). */
int sf__nccl_enq_read(const struct sf_nccl_enq *e, uint64_t *ret_tag, int64_t *ret_offset);
/* The same, with the stage's start and the kernel times. */
int sf__nccl_enq_read_point(const struct sf_nccl_enq *e, struct sf_nccl_enq_point *ret);

/* A point's kernel times as shipped: ns after the stage's start on the
 * monotonic clock. */
struct sf_nccl_kernel_span {
    int64_t start_ns, end_ns;
};
/* Moves a point's GPU kernel times onto the monotonic clock: the GPU's
 * globaltimer follows the host's CLOCK_REALTIME, so a time minus
 * realtime_minus_mono is a monotonic time. False (ship no kernel times)
 * when the point has none or they are implausible: a start before the
 * enqueue or after now_mono by more than SF_NCCL_KERNEL_SLACK_NS, an end
 * before the start, or an offset beyond 2^42. A start within the slack
 * before the enqueue reads as the enqueue. Pure. */
#define SF_NCCL_KERNEL_SLACK_NS INT64_C(1000000)
bool sf__nccl_kernel_span(const struct sf_nccl_enq_point *p, int64_t realtime_minus_mono,
                          int64_t now_mono, struct sf_nccl_kernel_span *ret);

/* Whether p is one of agg's collective handles. */
bool sf__nccl_is_coll(const struct sf_nccl_agg *agg, const void *p);

#endif

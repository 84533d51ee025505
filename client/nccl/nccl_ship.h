/*
 * Shipping of the NCCL plugin's aggregates: a registry of live communicators,
 * one flusher thread per process that turns counter deltas into NcclBatch
 * datagrams on a channel-1 connection to the local sfd, and the step/stage
 * attribution. Runs only on its own thread or at init/finalize, never on
 * NCCL's event path.
 */
#ifndef SF_NCCL_SHIP_H
#define SF_NCCL_SHIP_H

#include <stdbool.h>
#include <stdint.h>

#include "ingest.pb-c.h"
#include "nccl_agg.h"

/* One key's counts not yet shipped, under the (stage, step) it last ran in. */
struct sf_nccl_pending {
    uint32_t key;
    int64_t step;
    const char *stage;
    uint64_t count, bytes, gpu_ns, timed;
};

/* The flusher's working set for one flush of one communicator: kept with the
 * communicator rather than in function statics, so no flush shares scratch
 * memory with another's and each communicator's is freed with it. */
struct sf_nccl_flush_scratch {
    struct sf_nccl_pending pend[SF_NCCL_MAX_KEYS];
    bool done[SF_NCCL_MAX_KEYS];
    Stagefrontier__NcclAggregate aggs[SF_NCCL_MAX_KEYS];
    Stagefrontier__NcclAggregate *aptr[SF_NCCL_MAX_KEYS];
    const struct sf_nccl_pending *used[SF_NCCL_MAX_KEYS];
};

struct sf_nccl_comm {
    struct sf_nccl_agg agg; /* first: handles point into it */
    uint64_t comm_hash;
    char name[129];
    uint32_t n_ranks, n_nodes;
    int rank;
    /* Owned by the flusher (under the registry lock): what was shipped. */
    struct {
        uint64_t count, bytes, gpu_ns, timed;
    } sent[SF_NCCL_MAX_KEYS];
    uint64_t dropped_sent;
    struct {
        uint64_t tag;
        int64_t offset_ns;
        uint64_t gpu_start;
    } enq_sent[SF_NCCL_ENQ_RING];
    uint64_t groups_at_flush;
    struct sf_nccl_flush_scratch scratch; /* the flusher's, under the registry lock */
    struct sf_nccl_comm *next;
};

/* The trainer's step now, >= 0: the published one, else the communicator's
 * top-level NCCL groups / SF_NCCL_GROUPS_PER_STEP. Lock-free. */
int64_t sf__nccl_step_now(const struct sf_nccl_agg *agg);

/* Registers a communicator (starting the flusher with the first) or, at
 * finalize, flushes it a last time and unregisters it (stopping the flusher
 * with the last). -errno on failure; the plugin then still counts. */
int sf__nccl_ship_register(struct sf_nccl_comm *comm);
void sf__nccl_ship_unregister(struct sf_nccl_comm *comm);

#endif

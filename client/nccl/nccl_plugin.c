/*
 * libnccl-profiler-stagefrontier.so: NCCL's profiler plugin interface, v5
 * (NCCL 2.28) and v4 (NCCL 2.27). It translates NCCL's events into the
 * lock-free aggregation of nccl_agg.c; it never blocks or allocates on an
 * event, and it never reads a Coll's stop as completion (it means enqueued).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_agg.h"
#include "nccl_beacon.h"
#include "nccl_profiler_abi.h"
#include "nccl_ship.h"
#include "transport.h"

#define SF_NCCL_EXPORT __attribute__((visibility("default")))

/* Events we need: Group (the step fallback), Coll and P2p (what ran),
 * ProxyOp (the nesting NCCL hangs kernel channels under), KernelCh (GPU
 * timestamps). ProxyStep is left off: it is per chunk and tells us nothing. */
#define SF_NCCL_ACTIVATION                                                                         \
    (SF_NCCL_EV_GROUP | SF_NCCL_EV_COLL | SF_NCCL_EV_P2P | SF_NCCL_EV_PROXY_OP |                   \
     SF_NCCL_EV_KERNEL_CH)

/* NCCL's logger levels and subsystem bits (nccl.h does not declare them). */
#define SF_NCCL_LOG_INFO 3
#define SF_NCCL_LOG_INIT 1UL

/* One INFO line through NCCL's own logger: only NCCL hands init a logger, so
 * the line in NCCL_DEBUG=INFO output proves NCCL itself loaded the plugin,
 * and says which interface version it chose (tests/gpu/run.sh checks it). */
static void log_init(sf_nccl_logger_t log, int version, const char *name, uint64_t hash,
                     int n_ranks, int rank)
{
    if (log)
        log(SF_NCCL_LOG_INFO, SF_NCCL_LOG_INIT, __FILE__, __LINE__,
            "stagefrontier profiler: init v%d comm %s hash 0x%016llx rank %d of %d", version,
            name ? name : "", (unsigned long long)hash, rank, n_ranks);
}

static ncclResult_t comm_init(void **context, int *mask, const char *name, uint64_t hash,
                              int n_nodes, int n_ranks, int rank)
{
    struct sf_nccl_comm *comm;

    if (!context || !mask)
        return ncclInvalidArgument;
    *context = NULL;
    *mask = 0;
    if (getenv("SF_DISABLE") && strcmp(getenv("SF_DISABLE"), "1") == 0)
        return ncclSuccess; /* inert: NCCL sends us no events */
    /* The pools are allocated here, once per communicator, never per event. */
    comm = calloc(1, sizeof *comm);
    if (!comm)
        return ncclSystemError;
    sf__nccl_agg_init(&comm->agg);
    comm->comm_hash = hash;
    if (name) {
        size_t n = strnlen(name, sizeof comm->name - 1);
        memcpy(comm->name, name, n);
    }
    comm->n_ranks = n_ranks > 0 ? (uint32_t)n_ranks : 0;
    comm->n_nodes = n_nodes > 0 ? (uint32_t)n_nodes : 0;
    comm->rank = rank;
    /* Without a daemon to ship to we still count: register failing is fine. */
    (void)sf__nccl_ship_register(comm);
    *context = comm;
    *mask = SF_NCCL_ACTIVATION;
    return ncclSuccess;
}

static ncclResult_t comm_finalize(void *context)
{
    struct sf_nccl_comm *comm = context;
    if (!comm)
        return ncclSuccess;
    sf__nccl_ship_unregister(comm);
    free(comm);
    return ncclSuccess;
}

/* Shared by both versions once the descriptor is read. */
static void *start_common(struct sf_nccl_comm *comm, uint64_t type, void *parent,
                          struct sf_nccl_coll_info *ci, uint64_t gpu_start)
{
    switch (type) {
    case SF_NCCL_EV_GROUP:
        return &comm->agg.group_tag;
    case SF_NCCL_EV_COLL:
    case SF_NCCL_EV_P2P:
        /* Step and stage as the trainer stands while NCCL enqueues; inside a
         * synchronizing stage, also when (the trainer's arrival fallback). */
        ci->enqueue_now_ns = sf__now_ns();
        ci->enqueue_point =
            sf__nccl_current_sync_point(&ci->stage, ci->enqueue_now_ns, &ci->enqueue_offset_ns);
        ci->step = sf__nccl_step_now(&comm->agg);
        return sf__nccl_coll_start(&comm->agg, ci);
    case SF_NCCL_EV_PROXY_OP:
        return &comm->agg.proxy_tag;
    case SF_NCCL_EV_KERNEL_CH:
        return sf__nccl_kch_start(&comm->agg, parent, gpu_start);
    default:
        return NULL;
    }
}

/* Every handle we give NCCL starts with its kind byte; reading it as a
 * uint8_t is valid whatever the handle's struct. */
static uint8_t kind_of(const void *handle)
{
    return *(const uint8_t *)handle;
}

static ncclResult_t stop_event(void *handle)
{
    if (!handle)
        return ncclSuccess;
    switch (kind_of(handle)) {
    case SF_NCCL_H_GROUP:
        atomic_fetch_add_explicit(&((struct sf_nccl_tag *)handle)->agg->groups, 1,
                                  memory_order_relaxed);
        break;
    case SF_NCCL_H_KERNEL_CH:
        sf__nccl_kch_stop(handle);
        break;
    default:
        /* Coll/P2p: enqueued, not completed. ProxyOp: nothing to add. */
        break;
    }
    return ncclSuccess;
}

static ncclResult_t record_state(void *handle, sf_nccl_event_state_t state,
                                 sf_nccl_state_args *args)
{
    if (handle && args && kind_of(handle) == SF_NCCL_H_KERNEL_CH &&
        state == SF_NCCL_STATE_KERNEL_CH_STOP)
        sf__nccl_kch_record_stop(handle, args->kernel_ch.gpu_timer);
    return ncclSuccess;
}

/* The v5 and v4 descriptors differ in layout, not in the fields read here:
 * one body, instantiated for each version's type. */
#define SF_NCCL_DEFINE_START(fn, descr_t)                                                          \
    static ncclResult_t fn(void *context, void **handle, descr_t *d)                               \
    {                                                                                              \
        struct sf_nccl_coll_info ci = {0};                                                         \
        uint64_t gpu_start = 0;                                                                    \
        if (!handle)                                                                               \
            return ncclInvalidArgument;                                                            \
        *handle = NULL;                                                                            \
        if (!context || !d)                                                                        \
            return ncclSuccess;                                                                    \
        if (d->type == SF_NCCL_EV_COLL) {                                                          \
            ci = (struct sf_nccl_coll_info){.func = d->coll.func,                                  \
                                            .datatype = d->coll.datatype,                          \
                                            .algo = d->coll.algo,                                  \
                                            .proto = d->coll.proto,                                \
                                            .count = d->coll.count,                                \
                                            .n_channels = d->coll.n_channels};                     \
        } else if (d->type == SF_NCCL_EV_P2P) {                                                    \
            ci = (struct sf_nccl_coll_info){.func = d->p2p.func,                                   \
                                            .datatype = d->p2p.datatype,                           \
                                            .count = d->p2p.count,                                 \
                                            .n_channels = d->p2p.n_channels};                      \
        } else if (d->type == SF_NCCL_EV_KERNEL_CH) {                                              \
            gpu_start = d->kernel_ch.gpu_timer_start;                                              \
        }                                                                                          \
        *handle = start_common(context, d->type, d->parent, &ci, gpu_start);                       \
        return ncclSuccess;                                                                        \
    }

/* ---- v5 ------------------------------------------------------------------- */

static ncclResult_t v5_init(void **context, uint64_t comm_id, int *mask, const char *name,
                            int n_nodes, int n_ranks, int rank, sf_nccl_logger_t log)
{
    log_init(log, 5, name, comm_id, n_ranks, rank);
    return comm_init(context, mask, name, comm_id, n_nodes, n_ranks, rank);
}

SF_NCCL_DEFINE_START(v5_start, sf_nccl_descr_v5)

SF_NCCL_EXPORT const sf_nccl_profiler_v5 ncclProfiler_v5 = {
    .name = "stagefrontier",
    .init = v5_init,
    .start_event = v5_start,
    .stop_event = stop_event,
    .record_event_state = record_state,
    .finalize = comm_finalize,
};

/* ---- v4 ------------------------------------------------------------------- */

static ncclResult_t v4_init(void **context, int *mask, const char *name, uint64_t comm_hash,
                            int n_nodes, int n_ranks, int rank, sf_nccl_logger_t log)
{
    log_init(log, 4, name, comm_hash, n_ranks, rank);
    return comm_init(context, mask, name, comm_hash, n_nodes, n_ranks, rank);
}

SF_NCCL_DEFINE_START(v4_start, sf_nccl_descr_v4)

SF_NCCL_EXPORT const sf_nccl_profiler_v4 ncclProfiler_v4 = {
    .name = "stagefrontier",
    .init = v4_init,
    .start_event = v4_start,
    .stop_event = stop_event,
    .record_event_state = record_state,
    .finalize = comm_finalize,
};

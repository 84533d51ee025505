/*
 * Flusher of the NCCL plugin: one thread per process that ships each live
 * communicator's counter deltas to the local sfd as NcclBatch datagrams over
 * the client transport (channel 1), attributed to the trainer's step and
 * enclosing stage (nccl_beacon.c). It owns the registry and the socket; it
 * never runs on NCCL's event path, and a slow or absent daemon only delays
 * shipping.
 */
#define _GNU_SOURCE
#include "nccl_ship.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_internal.h"
#include "ingest.pb-c.h"
#include "nccl_beacon.h"
#include "transport.h"
#include "strutil.h"

#define IDLE_FLUSH_NS (1000 * INT64_C(1000000))
#define BEACON_RETRY_NS (2000 * INT64_C(1000000))

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER;
static struct sf_nccl_comm *reg_head;
static pthread_t flusher;
static bool flusher_running, flusher_stop;

/* Flusher state, guarded by reg_lock. */
static struct {
    bool configured, can_ship, schema_from_beacon;
    int64_t period_ns;
    uint64_t groups_per_step;
    char job_id[129], host[256], run_id[SF_MAX_RUN_ID_LEN + 1];
    struct sf__schema schema;
    struct sf__hello_info hello;
    sf__transport tr;
    uint8_t hello_buf[SF__MAX_DATAGRAM];
    uint8_t out_buf[SF__MAX_DATAGRAM];
    int64_t last_step; /* step observed at the previous tick */
    int64_t last_ship_ns;
    int64_t beacon_retry_ns;
} st;

/* groups_per_step is written once, at the first init, before NCCL can send
 * that communicator any event; afterwards it is only read. */
int64_t sf__nccl_step_now(const struct sf_nccl_agg *agg)
{
    int64_t s = sf__nccl_beacon_step();
    uint64_t per = st.groups_per_step ? st.groups_per_step : 1;
    if (s >= 0)
        return s;
    /* No libsfclient in the process: count top-level NCCL groups. */
    return (int64_t)(atomic_load_explicit(&agg->groups, memory_order_relaxed) / per);
}

/* ---- configuration from the environment ---------------------------------- */

static long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *v = getenv(name);
    char *end;
    long x;
    if (!v || !*v)
        return dflt;
    errno = 0;
    x = strtol(v, &end, 10);
    return (errno || *end || x < lo || x > hi) ? dflt : x;
}

static const char *job_id_env(void)
{
    const char *names[] = {"SF_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"};
    for (size_t i = 0; i < 3; i++)
        if (getenv(names[i]) && *getenv(names[i]))
            return getenv(names[i]);
    return NULL;
}

static void configure(const struct sf_nccl_comm *first)
{
    const char *job = job_id_env(), *sock = getenv("SF_SOCKET");
    long rank = env_long("RANK", -1, 0, SF_MAX_RANKS - 1);
    long world = env_long("WORLD_SIZE", -1, 1, SF_MAX_RANKS);

    st.configured = true;
    st.period_ns = env_long("SF_NCCL_FLUSH_MS", 20, 1, 60000) * INT64_C(1000000);
    st.groups_per_step = (uint64_t)env_long("SF_NCCL_GROUPS_PER_STEP", 1, 1, 1 << 20);
    st.last_step = -1;
    if (rank < 0 || world < 0) { /* no launcher: the first communicator's view */
        rank = first->rank;
        world = first->n_ranks;
    }
    if (!job || strlen(job) >= sizeof st.job_id || rank < 0 || world < 1 || rank >= world)
        return; /* nowhere to ship: count only */
    memcpy(st.job_id, job, strlen(job) + 1);
    gethostname(st.host, sizeof st.host - 1);
    uint32_t restart_count;
    sf__launch_identity(st.run_id, sizeof st.run_id, &restart_count);
    st.hello = (struct sf__hello_info){
        .job_id = st.job_id,
        .rank = (uint32_t)rank,
        .world_size = (uint32_t)world,
        /* -1 (not sent) when unknown or beyond the job, which sfd refuses */
        .local_rank = (int32_t)env_long("LOCAL_RANK", -1, 0, world - 1),
        .host = st.host,
        .pid = (uint32_t)getpid(),
        .schema_version = SF_CLIENT_SCHEMA_VERSION,
        .accumulation = 1,
        .channel = SF__CHANNEL_NCCL,
        .window_steps = -1,
        .warmup_steps = -1, /* the step channel asks for those */
        .run_id = st.run_id,
        .restart_count = restart_count,
    };
    if (sf__transport_init(&st.tr, sock && *sock ? sock : SF_DEFAULT_INGEST_SOCKET, &st.hello,
                           st.hello_buf) < 0)
        return;
    st.can_ship = true;
}

/* The channel-1 Hello mirrors the trainer's schema, so sfd sees one shape
 * per job: the names libsfclient published, with the default group rule and
 * the accumulation their @k suffixes imply. Without libsfclient in the
 * process, the default six stages. Settled before the first connect. */
static bool hello_schema(void)
{
    struct sf_side_beacon *b = sf__nccl_beacon();
    const char *names[SF_MAX_STAGES];
    struct sf__schema s;
    uint32_t n = b ? atomic_load_explicit(&b->n_names, memory_order_acquire) : 0, acc = 1;

    if (st.schema.n && (st.schema_from_beacon || !b || n < 2))
        return true;
    if (n >= 2 && n <= SF_MAX_STAGES) {
        for (uint32_t i = 0; i < n; i++)
            names[i] = b->names[i];
        acc = sf_accumulation_of(names, n);
        if (sf__schema_build(&s, names, NULL, n, acc) == 0) {
            if (sf__schema_mark_sync(&s, b->sync_mask) == 0) {
                sf__schema_free(&st.schema);
                st.schema = s;
                st.schema_from_beacon = true;
            } else {
                sf__schema_free(&s);
            }
        }
    }
    if (!st.schema.n && sf__schema_build(&st.schema, NULL, NULL, 0, 1) < 0)
        return false;
    st.hello.n_stages = st.schema.n;
    st.hello.stage_names = st.schema.names;
    st.hello.stage_groups = st.schema.groups;
    st.hello.schema_hash = st.schema.hash;
    st.hello.sync_stages = st.schema.sync_ids;
    st.hello.n_sync_stages = st.schema.n_sync;
    st.hello.accumulation = st.schema_from_beacon ? acc : 1;
    return true;
}

static int connect_now(int64_t now)
{
    if (sf__transport_connected(&st.tr))
        return 0;
    if (!hello_schema())
        return -ENOMEM;
    return sf__transport_connect(&st.tr, now);
}

/* ---- flushing ------------------------------------------------------------ */

/* Reads what each key has to ship, once per flush: its step first, then the
 * counters (a key is counted after its step is raised), so a delta is never
 * shipped under a step older than the one its newest collective ran in. */
static size_t snapshot(const struct sf_nccl_comm *comm, struct sf_nccl_pending *out)
{
    size_t n = 0;
    for (uint32_t i = 0; i < SF_NCCL_MAX_KEYS; i++) {
        const struct sf_nccl_key *k = &comm->agg.keys[i];
        struct sf_nccl_pending *p = &out[n];
        if (!atomic_load_explicit(&k->published, memory_order_acquire))
            continue;
        p->key = i;
        p->step = atomic_load_explicit(&k->last_step, memory_order_acquire);
        p->count = atomic_load_explicit(&k->count, memory_order_relaxed) - comm->sent[i].count;
        p->bytes = atomic_load_explicit(&k->bytes, memory_order_relaxed) - comm->sent[i].bytes;
        p->gpu_ns = atomic_load_explicit(&k->gpu_ns, memory_order_relaxed) - comm->sent[i].gpu_ns;
        p->timed = atomic_load_explicit(&k->timed, memory_order_relaxed) - comm->sent[i].timed;
        p->stage = sf__nccl_stage_name(k->stage, k->collective);
        if (p->count || p->timed)
            n++;
    }
    return n;
}

/* Ships one NcclBatch: the pending keys of one (stage, step). Keys are marked
 * sent only when the datagram went out, so a full socket or an absent daemon
 * delays figures instead of losing them. With no key (drops only), an empty
 * batch carries the drops. */
static int ship_group(struct sf_nccl_comm *comm, const struct sf_nccl_pending *pend, size_t n_pend,
                      const char *stage, int64_t step, uint64_t dropped, bool *ret_dropped_sent,
                      int64_t now)
{
    Stagefrontier__NcclAggregate *aggs = comm->scratch.aggs;
    Stagefrontier__NcclAggregate **aptr = comm->scratch.aptr;
    const struct sf_nccl_pending **used = comm->scratch.used;
    Stagefrontier__NcclBatch b = STAGEFRONTIER__NCCL_BATCH__INIT;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    size_t n = 0;
    int r;

    for (size_t j = 0; j < n_pend; j++) {
        const struct sf_nccl_pending *p = &pend[j];
        const struct sf_nccl_key *k = &comm->agg.keys[p->key];
        if (p->step != step || strcmp(p->stage, stage))
            continue;
        stagefrontier__nccl_aggregate__init(&aggs[n]);
        aggs[n].collective = (char *)k->collective;
        aggs[n].datatype = (char *)k->datatype;
        aggs[n].algorithm = (char *)k->algorithm;
        aggs[n].protocol = (char *)k->protocol;
        aggs[n].has_size_bucket = aggs[n].has_count = aggs[n].has_bytes = 1;
        aggs[n].size_bucket = k->size_bucket;
        aggs[n].count = p->count;
        aggs[n].bytes = p->bytes;
        aggs[n].has_gpu_time_ns = aggs[n].has_timed_count = p->timed > 0;
        aggs[n].gpu_time_ns = p->gpu_ns;
        aggs[n].timed_count = p->timed;
        aptr[n] = &aggs[n];
        used[n++] = p;
    }
    if (n == 0 && *ret_dropped_sent)
        return 0;
    b.step = step;
    b.comm_name = comm->name;
    b.has_comm_hash = b.has_comm_ranks = b.has_comm_nodes = 1;
    b.comm_hash = comm->comm_hash;
    b.comm_ranks = comm->n_ranks;
    b.comm_nodes = comm->n_nodes;
    b.enclosing_stage = (char *)stage;
    b.n_aggregates = n;
    b.aggregates = aptr;
    if (!*ret_dropped_sent) {
        b.has_dropped_events = 1;
        b.dropped_events = dropped - comm->dropped_sent;
    }
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL;
    m.nccl = &b;
    r = sf__transport_send_message(&st.tr, &m, st.out_buf, sizeof st.out_buf, now);
    if (r < 0)
        return r;
    for (size_t j = 0; j < n; j++) {
        const struct sf_nccl_pending *p = used[j];
        comm->sent[p->key].count += p->count;
        comm->sent[p->key].bytes += p->bytes;
        comm->sent[p->key].gpu_ns += p->gpu_ns;
        comm->sent[p->key].timed += p->timed;
    }
    if (!*ret_dropped_sent) {
        comm->dropped_sent = dropped;
        *ret_dropped_sent = true;
    }
    return 0;
}

/* Ships one enqueue point: a batch with no aggregates that names the step,
 * the synchronizing stage and last_enqueue_ns, and its kernel's start and
 * end when NCCL gave them. */
static int ship_enqueue_point(const struct sf_nccl_comm *comm, int64_t step, const char *stage,
                              int64_t offset_ns, const struct sf_nccl_kernel_span *k, int64_t now)
{
    Stagefrontier__NcclBatch b = STAGEFRONTIER__NCCL_BATCH__INIT;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;

    b.step = step;
    b.comm_name = (char *)comm->name;
    b.has_comm_hash = b.has_comm_ranks = b.has_comm_nodes = 1;
    b.comm_hash = comm->comm_hash;
    b.comm_ranks = comm->n_ranks;
    b.comm_nodes = comm->n_nodes;
    b.enclosing_stage = (char *)stage;
    b.has_last_enqueue_ns = 1;
    b.last_enqueue_ns = (uint64_t)offset_ns;
    if (k) {
        b.has_kernel_start_ns = b.has_kernel_end_ns = 1;
        b.kernel_start_ns = (uint64_t)k->start_ns;
        b.kernel_end_ns = (uint64_t)k->end_ns;
    }
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL;
    m.nccl = &b;
    return sf__transport_send_message(&st.tr, &m, st.out_buf, sizeof st.out_buf, now);
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/* Enqueue points go out before the aggregates: sfd uses a point only for a
 * step record that arrives after it (docs/SIDE_EVIDENCE.md), and the trainer
 * ships its records in batches, so the earlier the better. A slot is shipped
 * again when a later collective of the same (step, stage) moved it, or when
 * its kernel times came in after it was shipped. */
static int flush_enqueue_points(struct sf_nccl_comm *comm, int64_t now)
{
    /* The realtime-to-monotonic offset, read once per tick around one
     * monotonic read: the GPU's globaltimer follows CLOCK_REALTIME. */
    int64_t m0 = clock_ns(CLOCK_MONOTONIC), rt = clock_ns(CLOCK_REALTIME);
    int64_t m1 = clock_ns(CLOCK_MONOTONIC);
    int64_t rt_minus_mono = rt - (m0 + (m1 - m0) / 2);
    for (uint32_t i = 0; i < SF_NCCL_ENQ_RING; i++) {
        struct sf_nccl_enq_point p;
        if (sf__nccl_enq_read_point(&comm->agg.enq[i], &p) < 0 || p.tag == 0 ||
            (p.tag == comm->enq_sent[i].tag && p.offset_ns == comm->enq_sent[i].offset_ns &&
             p.gpu_start == comm->enq_sent[i].gpu_start))
            continue;
        int32_t stage = (int32_t)((p.tag - 1) & 0x7f);
        int64_t step = (int64_t)((p.tag - 1) >> 7);
        /* "Now" read after the point, not at the tick's start: shipping the
         * ring can outlast the slack while the trainer goes on writing
         * kernel times, and a point judged to start in the future would
         * go out untimed and, its times unchanged, never again. */
        struct sf_nccl_kernel_span k;
        bool timed = sf__nccl_kernel_span(&p, rt_minus_mono, clock_ns(CLOCK_MONOTONIC), &k);
        int r = ship_enqueue_point(comm, step, sf__nccl_stage_name(stage, ""), p.offset_ns,
                                   timed ? &k : NULL, now);
        if (r < 0)
            return r;
        comm->enq_sent[i].tag = p.tag;
        comm->enq_sent[i].offset_ns = p.offset_ns;
        comm->enq_sent[i].gpu_start = p.gpu_start;
    }
    return 0;
}

/* One batch per (enclosing stage, step) that has something to ship. */
static void flush_comm(struct sf_nccl_comm *comm, int64_t now)
{
    struct sf_nccl_pending *pend = comm->scratch.pend;
    bool *done = comm->scratch.done;
    uint64_t dropped = atomic_load_explicit(&comm->agg.dropped, memory_order_relaxed);
    bool dropped_sent = dropped == comm->dropped_sent;
    size_t n;

    if (flush_enqueue_points(comm, now) < 0)
        return; /* try again at the next tick */
    n = snapshot(comm, pend);

    memset(done, 0, sizeof comm->scratch.done);
    for (size_t j = 0; j < n; j++) {
        if (done[j])
            continue;
        for (size_t i = j; i < n; i++)
            if (pend[i].step == pend[j].step && !strcmp(pend[i].stage, pend[j].stage))
                done[i] = true;
        if (ship_group(comm, pend, n, pend[j].stage, pend[j].step, dropped, &dropped_sent, now) < 0)
            return; /* try again at the next tick */
    }
    /* Drops with nothing else to ship (a full key table) still reach sfd. */
    if (!dropped_sent)
        ship_group(comm, pend, 0, "", sf__nccl_step_now(&comm->agg), dropped, &dropped_sent, now);
}

/* Called with reg_lock held. Every key ships under its own latest step, so
 * the cadence only decides batch sizes: a flush when the trainer's step moves
 * on, after an idle second, or at the end. Enqueue points ship every tick. */
static void flush_all(bool force)
{
    int64_t now = sf__now_ns(), step;

    if (!st.can_ship || !reg_head)
        return;
    if (!sf__nccl_beacon() && now >= st.beacon_retry_ns) {
        sf__nccl_beacon_lookup();
        st.beacon_retry_ns = now + BEACON_RETRY_NS;
    }
    step = sf__nccl_step_now(&reg_head->agg);
    if (st.last_step < 0)
        st.last_step = step;
    if (!force && step == st.last_step && now - st.last_ship_ns < IDLE_FLUSH_NS) {
        /* Enqueue points go out at every tick, not only at step changes: sfd
         * uses one only if it comes before its step record, and a trainer
         * with long steps ships each record as soon as its step ends. */
        if (connect_now(now) == 0)
            for (struct sf_nccl_comm *c = reg_head; c; c = c->next)
                flush_enqueue_points(c, now);
        return;
    }
    if (connect_now(now) < 0)
        goto out;
    for (struct sf_nccl_comm *c = reg_head; c; c = c->next)
        flush_comm(c, now);
out:
    st.last_ship_ns = now;
    st.last_step = step;
}

static void *flusher_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&reg_lock);
    while (!flusher_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += st.period_ns % 1000000000;
        ts.tv_sec += st.period_ns / 1000000000 + ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&reg_cond, &reg_lock, &ts);
        if (!flusher_stop)
            flush_all(false);
    }
    pthread_mutex_unlock(&reg_lock);
    return NULL;
}

/* Trainers often exit without destroying their communicators, so NCCL never
 * calls finalize: ship what the last tick left behind. Registered from this
 * object, so glibc also runs it if the plugin is unloaded first (by then no
 * communicator is left and it does nothing). */
static void exit_flush(void)
{
    int64_t now = sf__now_ns();
    pthread_mutex_lock(&reg_lock);
    if (st.can_ship && reg_head && connect_now(now) >= 0)
        for (struct sf_nccl_comm *c = reg_head; c; c = c->next)
            flush_comm(c, now);
    pthread_mutex_unlock(&reg_lock);
}

int sf__nccl_ship_register(struct sf_nccl_comm *comm)
{
    pthread_condattr_t ca;
    int r = 0;

    pthread_mutex_lock(&reg_lock);
    if (!st.configured) {
        sf__nccl_beacon_lookup();
        configure(comm);
        atexit(exit_flush);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_destroy(&reg_cond);
        pthread_cond_init(&reg_cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    comm->next = reg_head;
    reg_head = comm;
    if (st.can_ship && !flusher_running) {
        flusher_stop = false;
        r = -pthread_create(&flusher, NULL, flusher_main, NULL);
        flusher_running = r == 0;
    }
    pthread_mutex_unlock(&reg_lock);
    return r;
}

void sf__nccl_ship_unregister(struct sf_nccl_comm *comm)
{
    bool join = false;
    pthread_t t;

    pthread_mutex_lock(&reg_lock);
    /* A last flush so a communicator destroyed mid-window still reports. */
    if (st.can_ship && connect_now(sf__now_ns()) >= 0)
        flush_comm(comm, sf__now_ns());
    for (struct sf_nccl_comm **p = &reg_head; *p; p = &(*p)->next)
        if (*p == comm) {
            *p = comm->next;
            break;
        }
    if (!reg_head && flusher_running) {
        flusher_stop = true;
        pthread_cond_signal(&reg_cond);
        join = true;
        t = flusher;
        flusher_running = false;
        sf__transport_close(&st.tr);
    }
    pthread_mutex_unlock(&reg_lock);
    if (join)
        pthread_join(t, NULL);
}

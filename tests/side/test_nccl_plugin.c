/*
 * Harness for libnccl-profiler-stagefrontier.so: dlopens the built plugin,
 * finds ncclProfiler_v5 and ncclProfiler_v4, and drives them as NCCL does
 * (Group -> Coll -> ProxyOp -> ProxyStep, KernelCh with GPU timestamps),
 * with and without kernel timing and past pool exhaustion. A test-owned
 * SEQPACKET socket plays sfd: the decoded NcclBatch totals are asserted.
 * Mode "beacon" also exports a published step/stage beacon, as libsfclient
 * would; mode "fallback" leaves it unpublished.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "side_beacon.h"
#include "ingest.pb-c.h"
#include "nccl_profiler_abi.h"

#define SF_NCCL_KEYS 256               /* the plugin's key table */
#define ENQ_BEFORE_NS INT64_C(5000000) /* the synchronizing stage began this long ago */

/* Found by the plugin through dlsym on this executable (linked -rdynamic).
 * Its magic stays 0, so invalid, unless the mode is "beacon". */
__attribute__((visibility("default"))) struct sf_side_beacon sf_side_beacon;

static bool beacon_mode;
static char dir[64], sock_path[108];
static const sf_nccl_profiler_v5 *v5;
static const sf_nccl_profiler_v4 *v4;

/* ---- the fake sfd --------------------------------------------------------- */

#define MAX_ROWS 1024
struct row {
    char comm[129], stage[65], coll[33], dt[33], algo[33], proto[33];
    uint32_t bucket;
    uint64_t count, bytes, gpu_ns, timed;
};

static struct {
    int listen_fd;
    pthread_t thread;
    int hellos, hello_channel, batches, bad;
    uint32_t hello_rank, hello_world, hello_stages;
    char hello_last_stage[65];
    char hello_job[129];
    uint64_t dropped;
    int64_t min_step, max_step;
    /* comm-a's all-reduce count by batch step (steps 96..111), under lock:
     * the test waits on it to pace its steps against the plugin's flushes. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t ar_by_step[16];
    /* Enqueue points: how many, and whether all named step 103's fwd stage
     * with no aggregates; the latest offset. */
    int points, points_bad;
    uint64_t point_ns;
    /* Points with kernel times: how many, and the latest one's fields. */
    int kernel_points;
    uint64_t kernel_enq_ns, kernel_start_ns, kernel_end_ns;
    /* The same for comm-v4's points (the v4 interface). */
    int kernel_points_v4;
    uint64_t kernel_enq_v4, kernel_start_v4, kernel_end_v4;
    size_t n_rows;
    struct row rows[MAX_ROWS];
} srv;

static void add_batch(const Stagefrontier__NcclBatch *b)
{
    srv.batches++;
    if (b->step < srv.min_step)
        srv.min_step = b->step;
    if (b->step > srv.max_step)
        srv.max_step = b->step;
    if (b->has_dropped_events)
        srv.dropped += b->dropped_events;
    bool v4_point = b->has_last_enqueue_ns && b->comm_name && !strcmp(b->comm_name, "comm-v4");
    if (b->has_last_enqueue_ns) {
        srv.points_bad += b->step != 103 || b->n_aggregates != 0 || !b->enclosing_stage ||
                          strcmp(b->enclosing_stage, "model.fwd_loss_cpu_wall") != 0 ||
                          b->has_kernel_start_ns != b->has_kernel_end_ns;
        if (!v4_point) { /* comm-a's points, the latest last */
            srv.points++;
            srv.points_bad += b->last_enqueue_ns < srv.point_ns;
            srv.point_ns = b->last_enqueue_ns;
        }
        if (b->has_kernel_start_ns && v4_point) {
            srv.kernel_points_v4++;
            srv.kernel_enq_v4 = b->last_enqueue_ns;
            srv.kernel_start_v4 = b->kernel_start_ns;
            srv.kernel_end_v4 = b->kernel_end_ns;
        } else if (b->has_kernel_start_ns) {
            srv.kernel_points++;
            srv.kernel_enq_ns = b->last_enqueue_ns;
            srv.kernel_start_ns = b->kernel_start_ns;
            srv.kernel_end_ns = b->kernel_end_ns;
        }
    } else if (b->has_kernel_start_ns || b->has_kernel_end_ns) {
        srv.points_bad++; /* kernel times only ride on a point */
    }
    for (size_t i = 0; i < b->n_aggregates; i++) {
        const Stagefrontier__NcclAggregate *a = b->aggregates[i];
        struct row key = {.bucket = a->size_bucket};
        if (b->comm_name && !strcmp(b->comm_name, "comm-a") &&
            !strcmp(a->collective, "AllReduce") && b->step >= 96 && b->step < 112) {
            pthread_mutex_lock(&srv.lock);
            srv.ar_by_step[b->step - 96] += a->count;
            pthread_cond_broadcast(&srv.cond);
            pthread_mutex_unlock(&srv.lock);
        }
        size_t j;
        snprintf(key.comm, sizeof key.comm, "%s", b->comm_name ? b->comm_name : "");
        snprintf(key.stage, sizeof key.stage, "%s", b->enclosing_stage ? b->enclosing_stage : "");
        snprintf(key.coll, sizeof key.coll, "%s", a->collective);
        snprintf(key.dt, sizeof key.dt, "%s", a->datatype ? a->datatype : "");
        snprintf(key.algo, sizeof key.algo, "%s", a->algorithm ? a->algorithm : "");
        snprintf(key.proto, sizeof key.proto, "%s", a->protocol ? a->protocol : "");
        for (j = 0; j < srv.n_rows; j++) {
            struct row *r = &srv.rows[j];
            if (!strcmp(r->comm, key.comm) && !strcmp(r->stage, key.stage) &&
                !strcmp(r->coll, key.coll) && !strcmp(r->dt, key.dt) &&
                !strcmp(r->algo, key.algo) && !strcmp(r->proto, key.proto) &&
                r->bucket == key.bucket)
                break;
        }
        if (j == srv.n_rows) {
            if (srv.n_rows == MAX_ROWS) {
                srv.bad++;
                continue;
            }
            srv.rows[srv.n_rows++] = key;
        }
        srv.rows[j].count += a->count;
        srv.rows[j].bytes += a->bytes;
        srv.rows[j].gpu_ns += a->gpu_time_ns;
        srv.rows[j].timed += a->timed_count;
    }
}

/* Reads datagrams until the plugin closes its connection (after the last
 * communicator's finalize). A generous overall timeout only fails the test. */
static void *server_main(void *arg)
{
    static uint8_t buf[1 << 17];
    struct pollfd p = {.fd = srv.listen_fd, .events = POLLIN};
    int fd;
    (void)arg;
    if (poll(&p, 1, 60000) != 1 || (fd = accept(srv.listen_fd, NULL, NULL)) < 0) {
        srv.bad++;
        return NULL;
    }
    for (;;) {
        ssize_t n;
        Stagefrontier__ClientMessage *m;
        p = (struct pollfd){.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 60000) != 1) {
            srv.bad++;
            break;
        }
        n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            break;
        m = stagefrontier__client_message__unpack(NULL, (size_t)n, buf);
        if (!m) {
            srv.bad++;
            continue;
        }
        if (m->body_case == STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO) {
            srv.hellos++;
            srv.hello_channel = m->hello->has_channel ? (int)m->hello->channel : 0;
            srv.hello_rank = m->hello->rank;
            srv.hello_world = m->hello->world_size;
            srv.hello_stages = (uint32_t)m->hello->n_stage_names;
            if (m->hello->n_stage_names)
                snprintf(srv.hello_last_stage, sizeof srv.hello_last_stage, "%s",
                         m->hello->stage_names[m->hello->n_stage_names - 1]);
            snprintf(srv.hello_job, sizeof srv.hello_job, "%s", m->hello->job_id);
        } else if (m->body_case == STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL) {
            add_batch(m->nccl);
        } else {
            srv.bad++;
        }
        stagefrontier__client_message__free_unpacked(m, NULL);
    }
    close(fd);
    return NULL;
}

static const struct row *find_row(const char *comm, const char *stage, const char *coll,
                                  const char *algo, uint32_t bucket)
{
    for (size_t j = 0; j < srv.n_rows; j++) {
        const struct row *r = &srv.rows[j];
        if (!strcmp(r->comm, comm) && !strcmp(r->stage, stage) && !strcmp(r->coll, coll) &&
            !strcmp(r->algo, algo) && r->bucket == bucket)
            return r;
    }
    return NULL;
}

/* Waits until comm-a's all-reduces of step reached the fake sfd: the plugin
 * flushes when the trainer's step moves on. Only a timeout fails. */
static void wait_step_shipped(int64_t step, uint64_t expect)
{
    struct timespec deadline;
    int ok;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30;
    pthread_mutex_lock(&srv.lock);
    while (!(ok = srv.ar_by_step[step - 96] >= expect))
        if (pthread_cond_timedwait(&srv.cond, &srv.lock, &deadline) != 0)
            break;
    ok = srv.ar_by_step[step - 96] >= expect;
    pthread_mutex_unlock(&srv.lock);
    assert_true(ok);
}

/* ---- driving the plugin as NCCL does ------------------------------------- */

static void *start5(void *ctx, sf_nccl_descr_v5 *d)
{
    void *h = (void *)1; /* NCCL hands in garbage; the plugin must set it */
    assert_int_equal(v5->start_event(ctx, &h, d), ncclSuccess);
    return h;
}

static void stop(void *h)
{
    if (h)
        assert_int_equal(v5->stop_event(h), ncclSuccess);
}

/* One kernel channel under parent, from gpu_start to gpu_stop. */
static void kernel_channel5(void *ctx, void *parent, uint8_t ch, uint64_t t0, uint64_t t1)
{
    sf_nccl_descr_v5 d = {.type = SF_NCCL_EV_KERNEL_CH, .parent = parent};
    sf_nccl_state_args a = {.kernel_ch = {t1}};
    void *k;
    d.kernel_ch.channel = ch;
    d.kernel_ch.gpu_timer_start = t0;
    k = start5(ctx, &d);
    if (k)
        assert_int_equal(v5->record_event_state(k, SF_NCCL_STATE_KERNEL_CH_STOP, &a), ncclSuccess);
    stop(k);
}

/* Group -> Coll (stopped at enqueue) -> ProxyOp -> ProxyStep, then the
 * kernel channels report later, as the proxy thread sees them finish. */
static void collective5(void *ctx, const char *func, const char *dt, size_t count, const char *algo,
                        uint8_t n_channels, uint64_t t0, uint64_t span)
{
    sf_nccl_descr_v5 g = {.type = SF_NCCL_EV_GROUP};
    sf_nccl_descr_v5 c = {.type = SF_NCCL_EV_COLL};
    sf_nccl_descr_v5 op = {.type = SF_NCCL_EV_PROXY_OP};
    sf_nccl_descr_v5 ps = {.type = SF_NCCL_EV_PROXY_STEP};
    void *gh, *ch, *oh, *sh;

    gh = start5(ctx, &g);
    c.coll = (struct sf_nccl_coll_v5){.func = func,
                                      .count = count,
                                      .datatype = dt,
                                      .n_channels = n_channels,
                                      .algo = algo,
                                      .proto = "SIMPLE",
                                      .parent_group = gh};
    ch = start5(ctx, &c);
    stop(ch); /* enqueued: not complete, must not count GPU time */
    op.parent = ch;
    op.proxy_op.channel = 0;
    oh = start5(ctx, &op);
    ps.parent = oh;
    sh = start5(ctx, &ps);
    stop(sh);
    for (uint8_t k = 0; k < (span ? n_channels : 0); k++)
        kernel_channel5(ctx, ch, k, t0 + k, t0 + span - (n_channels - 1 - k));
    stop(oh);
    stop(gh);
}

static int64_t clock_read(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/* Host work of a known length, the clock being the workload. */
static void spin(int64_t ns)
{
    int64_t t0 = clock_read(CLOCK_MONOTONIC);
    while (clock_read(CLOCK_MONOTONIC) - t0 < ns)
        ;
}

#define KERNEL_LATE_NS INT64_C(3000000) /* the kernel starts this long after the enqueue */
#define KERNEL_SPAN_NS INT64_C(200000)
static uint64_t late_gpu_start, late_gpu_end;

/* A collective whose kernel starts KERNEL_LATE_NS after NCCL enqueued it
 * and runs KERNEL_SPAN_NS, stamped on the GPU's clock as a real one is:
 * the globaltimer, which follows CLOCK_REALTIME. The channel reports when
 * the kernel has ended, as NCCL's proxy thread does. */
static void late_collective5(void *ctx)
{
    sf_nccl_descr_v5 g = {.type = SF_NCCL_EV_GROUP};
    sf_nccl_descr_v5 c = {.type = SF_NCCL_EV_COLL};
    sf_nccl_descr_v5 op = {.type = SF_NCCL_EV_PROXY_OP};
    void *gh = start5(ctx, &g), *ch, *oh;
    c.coll = (struct sf_nccl_coll_v5){.func = "ReduceScatter",
                                      .count = 64,
                                      .datatype = "ncclFloat32",
                                      .n_channels = 1,
                                      .algo = "RING",
                                      .proto = "SIMPLE",
                                      .parent_group = gh};
    ch = start5(ctx, &c);
    stop(ch);
    op.parent = ch;
    oh = start5(ctx, &op);
    spin(KERNEL_LATE_NS);
    late_gpu_start = (uint64_t)clock_read(CLOCK_REALTIME);
    spin(KERNEL_SPAN_NS);
    late_gpu_end = (uint64_t)clock_read(CLOCK_REALTIME);
    kernel_channel5(ctx, ch, 0, late_gpu_start, late_gpu_end);
    stop(oh);
    stop(gh);
}

static uint64_t late_gpu_start4, late_gpu_end4;

/* The same through the v4 interface, where a Coll's parent is its Group. */
static void late_collective4(void *ctx)
{
    sf_nccl_descr_v4 g = {.type = SF_NCCL_EV_GROUP}, c = {.type = SF_NCCL_EV_COLL};
    sf_nccl_descr_v4 k = {.type = SF_NCCL_EV_KERNEL_CH};
    void *gh = NULL, *ch = NULL, *kh = NULL;
    assert_int_equal(v4->start_event(ctx, &gh, &g), ncclSuccess);
    c.parent = gh;
    c.coll = (struct sf_nccl_coll_v4){.func = "AllGather",
                                      .count = 64,
                                      .datatype = "ncclInt32",
                                      .n_channels = 1,
                                      .algo = "RING",
                                      .proto = "LL"};
    assert_int_equal(v4->start_event(ctx, &ch, &c), ncclSuccess);
    assert_int_equal(v4->stop_event(ch), ncclSuccess);
    spin(KERNEL_LATE_NS);
    late_gpu_start4 = (uint64_t)clock_read(CLOCK_REALTIME);
    spin(KERNEL_SPAN_NS);
    late_gpu_end4 = (uint64_t)clock_read(CLOCK_REALTIME);
    k.parent = ch;
    k.kernel_ch.gpu_timer_start = late_gpu_start4;
    assert_int_equal(v4->start_event(ctx, &kh, &k), ncclSuccess);
    assert_non_null(kh);
    sf_nccl_state_args sa = {.kernel_ch = {late_gpu_end4}};
    assert_int_equal(v4->record_event_state(kh, SF_NCCL_STATE_KERNEL_CH_STOP, &sa), ncclSuccess);
    assert_int_equal(v4->stop_event(kh), ncclSuccess);
    assert_int_equal(v4->stop_event(gh), ncclSuccess);
}

static void *init5(const char *name, uint64_t id)
{
    void *ctx = NULL;
    int mask = 0;
    assert_int_equal(v5->init(&ctx, id, &mask, name, 1, 2, 0, NULL), ncclSuccess);
    assert_non_null(ctx);
    assert_true(mask & SF_NCCL_EV_COLL);
    assert_true(mask & SF_NCCL_EV_KERNEL_CH);
    assert_true(mask & SF_NCCL_EV_PROXY_OP);
    return ctx;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_symbols(void **state)
{
    void *lib = *state;
    (void)state;
    assert_non_null(v5);
    assert_non_null(v4);
    assert_string_equal(v5->name, "stagefrontier");
    assert_null(dlsym(lib, "sf__nccl_coll_start")); /* only the two versioned symbols */
    assert_null(dlsym(lib, "sf_side_beacon"));
    assert_null(dlsym(lib, "sf_client_open"));
    assert_null(dlsym(lib, "ncclProfiler_v3"));
}

#define HELD 4096 /* the plugin's collective ring and kernel-channel pool */

/* Pools full: 4096 collectives each hold one kernel channel in flight, so
 * the ring has no free slot (10 collectives lose their timing handle) and the
 * channel pool is empty (5 channels dropped). Counts still land; once the
 * channels finish, timing resumes. */
static void exhaust_pools(void)
{
    static void *held[HELD], *colls[HELD];
    void *x = init5("comm-x", 0x77);
    sf_nccl_descr_v5 c = {.type = SF_NCCL_EV_COLL}, k = {.type = SF_NCCL_EV_KERNEL_CH};
    sf_nccl_state_args a = {.kernel_ch = {0}};
    void *extra;

    c.coll = (struct sf_nccl_coll_v5){.func = "AllReduce",
                                      .count = 1,
                                      .datatype = "ncclInt8",
                                      .n_channels = 1,
                                      .algo = "RING",
                                      .proto = "LL"};
    for (int i = 0; i < HELD; i++) {
        void *ch = start5(x, &c);
        assert_non_null(ch);
        stop(ch);
        colls[i] = ch;
        k.parent = ch;
        k.kernel_ch.gpu_timer_start = 100;
        held[i] = start5(x, &k);
        assert_non_null(held[i]);
    }
    for (int i = 0; i < 10; i++) {
        void *ch = start5(x, &c);
        assert_null(ch); /* dropped: every ring slot is in flight */
        k.parent = ch;
        assert_null(start5(x, &k)); /* no parent, nothing to time */
    }
    k.parent = colls[0];
    for (int i = 0; i < 5; i++)
        assert_null(start5(x, &k)); /* dropped: the channel pool is empty */
    for (int i = 0; i < HELD; i++) {
        a.kernel_ch.gpu_timer = 150;
        assert_int_equal(v5->record_event_state(held[i], SF_NCCL_STATE_KERNEL_CH_STOP, &a),
                         ncclSuccess);
        stop(held[i]);
    }
    extra = start5(x, &c);
    assert_non_null(extra); /* pools drained: back to normal */
    stop(extra);
    kernel_channel5(x, extra, 0, 1000, 1050);
    assert_int_equal(v5->finalize(x), ncclSuccess);
}

/* More distinct keys than the table holds: 44 of 300 dropped, counted. */
static void exhaust_keys(void)
{
    void *kc = init5("comm-k", 0x88);
    sf_nccl_descr_v5 c = {.type = SF_NCCL_EV_COLL};
    char algo[16];
    for (int i = 0; i < 300; i++) {
        snprintf(algo, sizeof algo, "A%d", i);
        c.coll = (struct sf_nccl_coll_v5){.func = "AllReduce",
                                          .count = 1,
                                          .datatype = "ncclInt8",
                                          .n_channels = 1,
                                          .algo = algo,
                                          .proto = "LL"};
        stop(start5(kc, &c));
    }
    assert_int_equal(v5->finalize(kc), ncclSuccess);
}

#define N_ALLREDUCE 40
#define SPAN_NS 250000u

static void test_drive_and_ship(void **state)
{
    void *a, *b, *c4 = NULL;
    int mask4 = 0;
    (void)state;

    a = init5("comm-a", 0xa11);
    b = init5("comm-b", 0xb22);
    assert_int_equal(v4->init(&c4, &mask4, "comm-v4", 0xc44, 2, 8, 3, NULL), ncclSuccess);
    assert_true(mask4 & SF_NCCL_EV_KERNEL_CH);

    if (beacon_mode)
        atomic_store(&sf_side_beacon.stage, 2);
    /* Kernel timing present: two channels, span SPAN_NS each. 1 Mi floats = 2^22 bytes.
     * With the beacon, steps 100..103 get 10 each. Two steps run back to back
     * before the test waits for their batches: a flush that comes after the
     * step moved on must still ship each step under its own index. */
    for (int i = 0; i < N_ALLREDUCE; i++) {
        if (beacon_mode && i % 10 == 0) {
            atomic_store(&sf_side_beacon.step, 100 + i / 10);
            if (i == 20) {
                wait_step_shipped(100, 10);
                wait_step_shipped(101, 10);
            }
        }
        collective5(a, "AllReduce", "ncclFloat32", 1u << 20, "RING", 2,
                    UINT64_C(1000000000) + (uint64_t)i * 1000000, SPAN_NS);
    }
    if (beacon_mode)
        atomic_store(&sf_side_beacon.stage, -1);
    /* Kernel timing absent: counted, no GPU time. 1000 bf16 = 2000 bytes, bucket 10. */
    for (int i = 0; i < 7; i++)
        collective5(a, "AllGather", "ncclBfloat16", 1000, "RING", 1, 0, 0);
    /* Point-to-point: a Send of 4096 bytes (bucket 12), timed by its channel. */
    {
        sf_nccl_descr_v5 g = {.type = SF_NCCL_EV_GROUP}, p2p = {.type = SF_NCCL_EV_P2P};
        void *gh = start5(a, &g), *ph;
        p2p.p2p = (struct sf_nccl_p2p_v5){.func = "Send",
                                          .datatype = "ncclInt8",
                                          .count = 4096,
                                          .peer = 1,
                                          .n_channels = 1,
                                          .parent_group = gh};
        ph = start5(a, &p2p);
        assert_non_null(ph);
        stop(ph);
        kernel_channel5(a, ph, 0, 7000, 7700);
        stop(gh);
    }
    /* Another communicator, and a channel that never reports: timing incomplete. */
    collective5(b, "AllReduce", "ncclFloat64", 3, "TREE", 4, 5000, 0);

    /* v4: the Coll's parent is the Group itself. */
    {
        sf_nccl_descr_v4 g = {.type = SF_NCCL_EV_GROUP}, c = {.type = SF_NCCL_EV_COLL};
        sf_nccl_descr_v4 k = {.type = SF_NCCL_EV_KERNEL_CH};
        sf_nccl_state_args sa = {.kernel_ch = {9000}};
        void *gh = NULL, *ch = NULL, *kh = NULL;
        assert_int_equal(v4->start_event(c4, &gh, &g), ncclSuccess);
        c.parent = gh;
        c.coll = (struct sf_nccl_coll_v4){.func = "ReduceScatter",
                                          .count = 256,
                                          .datatype = "ncclInt32",
                                          .n_channels = 1,
                                          .algo = "RING",
                                          .proto = "LL"};
        assert_int_equal(v4->start_event(c4, &ch, &c), ncclSuccess);
        assert_int_equal(v4->stop_event(ch), ncclSuccess);
        k.parent = ch;
        k.kernel_ch.gpu_timer_start = 1000;
        assert_int_equal(v4->start_event(c4, &kh, &k), ncclSuccess);
        assert_non_null(kh);
        assert_int_equal(v4->record_event_state(kh, SF_NCCL_STATE_KERNEL_CH_STOP, &sa),
                         ncclSuccess);
        assert_int_equal(v4->stop_event(kh), ncclSuccess);
        assert_int_equal(v4->stop_event(gh), ncclSuccess);
    }

    if (beacon_mode) {
        /* A synchronizing stage opened 5 ms ago: each collective's enqueue
         * point ships, the latest last. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        atomic_store(&sf_side_beacon.stage_start_ns,
                     now.tv_sec * INT64_C(1000000000) + now.tv_nsec - ENQ_BEFORE_NS);
        atomic_store(&sf_side_beacon.stage, 1);
        for (int i = 0; i < 3; i++)
            collective5(a, "Broadcast", "ncclInt8", 64, "RING", 1, 0, 0);
        /* The stage's last collective, whose kernel starts late. */
        late_collective5(a);
        late_collective4(c4);
        atomic_store(&sf_side_beacon.stage, -1);
    }
    exhaust_pools();
    exhaust_keys();
    assert_int_equal(v5->finalize(b), ncclSuccess);
    assert_int_equal(v4->finalize(c4), ncclSuccess);
    assert_int_equal(v5->finalize(a), ncclSuccess);
    assert_int_equal(pthread_join(srv.thread, NULL), 0);

    assert_int_equal(srv.bad, 0);
    assert_true(srv.hellos >= 1);
    assert_int_equal(srv.hello_channel, 1);
    assert_string_equal(srv.hello_job, "job-side");
    assert_int_equal(srv.hello_rank, 1);
    assert_int_equal(srv.hello_world, 4);
    /* The Hello mirrors the trainer's published schema, else the default one. */
    assert_int_equal(srv.hello_stages, beacon_mode ? 3 : 6);
    assert_string_equal(srv.hello_last_stage,
                        beacon_mode ? "my.custom_stage" : "step.other_cpu_wall");
    assert_int_equal(srv.dropped, 15 + 44);

    const char *ar_stage = beacon_mode ? "my.custom_stage" : "model.backward_cpu_wall";
    const struct row *r = find_row("comm-a", ar_stage, "AllReduce", "RING", 22);
    assert_non_null(r);
    assert_string_equal(r->dt, "ncclFloat32");
    assert_string_equal(r->proto, "SIMPLE");
    assert_int_equal(r->count, N_ALLREDUCE);
    assert_int_equal(r->bytes, (uint64_t)N_ALLREDUCE << 22);
    assert_int_equal(r->timed, N_ALLREDUCE);
    assert_int_equal(r->gpu_ns, (uint64_t)N_ALLREDUCE * SPAN_NS);

    r = find_row("comm-a", "", "AllGather", "RING", 10); /* unattributed: not an all-reduce */
    assert_non_null(r);
    assert_int_equal(r->count, 7);
    assert_int_equal(r->bytes, 7 * 2000);
    assert_int_equal(r->timed, 0);
    assert_int_equal(r->gpu_ns, 0);

    r = find_row("comm-a", "", "Send", "", 12); /* no algorithm for p2p */
    assert_non_null(r);
    assert_int_equal(r->count, 1);
    assert_int_equal(r->bytes, 4096);
    assert_int_equal(r->timed, 1);
    assert_int_equal(r->gpu_ns, 700);

    r = find_row("comm-b", "model.backward_cpu_wall", "AllReduce", "TREE", 4);
    assert_non_null(r);
    assert_int_equal(r->count, 1);
    assert_int_equal(r->bytes, 24);
    assert_int_equal(r->timed, 0);

    r = find_row("comm-v4", "", "ReduceScatter", "RING", 10);
    assert_non_null(r);
    assert_int_equal(r->count, 1);
    assert_int_equal(r->bytes, 1024);
    assert_int_equal(r->timed, 1);
    assert_int_equal(r->gpu_ns, 8000);

    r = find_row("comm-x", "model.backward_cpu_wall", "AllReduce", "RING", 0);
    assert_non_null(r);
    assert_int_equal(r->count, HELD + 10 + 1);
    assert_int_equal(r->timed, HELD + 1);
    assert_int_equal(r->gpu_ns, (uint64_t)HELD * 50 + 50);

    size_t keys_k = 0;
    uint64_t count_k = 0;
    for (size_t j = 0; j < srv.n_rows; j++)
        if (!strcmp(srv.rows[j].comm, "comm-k")) {
            keys_k++;
            count_k += srv.rows[j].count;
        }
    assert_int_equal(keys_k, SF_NCCL_KEYS);
    assert_int_equal(count_k, SF_NCCL_KEYS);

    if (beacon_mode) { /* every step's all-reduces under that step, exactly */
        for (int64_t st = 96; st < 112; st++)
            assert_int_equal(srv.ar_by_step[st - 96], st >= 100 && st <= 103 ? 10 : 0);
        assert_true(srv.min_step >= 99);
        assert_true(srv.max_step <= 103);
    }
    /* Enqueue points only from the synchronizing stage: none in the
     * non-synchronizing my.custom_stage, none without a beacon. */
    assert_int_equal(srv.points_bad, 0);
    if (beacon_mode) {
        assert_true(srv.points >= 1);
        assert_true(srv.point_ns >= ENQ_BEFORE_NS);
        assert_true(srv.point_ns < ENQ_BEFORE_NS + INT64_C(30000000000));
        /* The last collective's kernel, on the stage's clock: it started at
         * least KERNEL_LATE_NS after its enqueue, and ran exactly as long
         * as the GPU clock says. The collectives with kernel times of the
         * GPU clock's zero (the small stamps above) ship none. */
        assert_true(srv.kernel_points >= 1);
        assert_int_equal(srv.kernel_enq_ns, srv.point_ns);
        assert_true(srv.kernel_start_ns >= srv.kernel_enq_ns + (uint64_t)KERNEL_LATE_NS);
        assert_true(srv.kernel_start_ns < srv.kernel_enq_ns + INT64_C(30000000000));
        assert_int_equal(srv.kernel_end_ns - srv.kernel_start_ns, late_gpu_end - late_gpu_start);
        /* The same through v4. */
        assert_true(srv.kernel_points_v4 >= 1);
        assert_true(srv.kernel_start_v4 >= srv.kernel_enq_v4 + (uint64_t)KERNEL_LATE_NS);
        assert_true(srv.kernel_start_v4 < srv.kernel_enq_v4 + INT64_C(30000000000));
        assert_int_equal(srv.kernel_end_v4 - srv.kernel_start_v4, late_gpu_end4 - late_gpu_start4);
    } else {
        assert_int_equal(srv.points, 0);
        assert_int_equal(srv.kernel_points, 0);
        assert_int_equal(srv.kernel_points_v4, 0);
    }
}

/* The fake sfd's socket and environment; its thread starts only when
 * start_thread is set (the atexit test forks first: a child forked while the
 * thread is starting can inherit the allocator's lock held, and hang). */
static int setup_server_socket(bool start_thread)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    snprintf(dir, sizeof dir, "/tmp/sf-nccl-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(sock_path, sizeof sock_path, "%s/ingest.sock", dir);
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    srv.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (srv.listen_fd < 0 || bind(srv.listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(srv.listen_fd, 4) < 0)
        return -1;
    pthread_mutex_init(&srv.lock, NULL);
    pthread_cond_init(&srv.cond, NULL);
    srv.min_step = INT64_MAX;
    srv.max_step = INT64_MIN;
    if (start_thread && pthread_create(&srv.thread, NULL, server_main, NULL) != 0)
        return -1;
    setenv("SF_SOCKET", sock_path, 1);
    setenv("SF_JOB_ID", "job-side", 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("SF_NCCL_FLUSH_MS", "2", 1);
    return 0;
}

static int setup_server(void)
{
    return setup_server_socket(true);
}

static int setup(void **state)
{
    void *lib;

    if (setup_server() < 0)
        return -1;
    if (beacon_mode) {
        const char *names[] = {"data.next_wait", "model.fwd_loss_cpu_wall", "my.custom_stage"};
        for (int i = 0; i < 3; i++)
            snprintf(sf_side_beacon.names[i], sizeof sf_side_beacon.names[i], "%s", names[i]);
        sf_side_beacon.sync_mask = UINT64_C(1) << 1; /* forward synchronizing */
        atomic_store(&sf_side_beacon.n_names, 3);
        atomic_store(&sf_side_beacon.step, 99);
        atomic_store(&sf_side_beacon.stage, -1);
        sf_side_beacon.version = SF_SIDE_BEACON_VERSION;
        sf_side_beacon.magic = SF_SIDE_BEACON_MAGIC;
    }
    lib = dlopen(NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return -1;
    v5 = dlsym(lib, "ncclProfiler_v5");
    v4 = dlsym(lib, "ncclProfiler_v4");
    *state = lib;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    close(srv.listen_fd);
    unlink(sock_path);
    rmdir(dir);
    return 0;
}

/* SF_DISABLE=1: the plugin asks NCCL for no events, and calls that come
 * anyway (a NULL context) are answered with NULL handles. */
static void test_disabled(void **state)
{
    void *lib = dlopen(NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL), *ctx = (void *)1, *h = (void *)1;
    const sf_nccl_profiler_v5 *p;
    sf_nccl_descr_v5 c = {.type = SF_NCCL_EV_COLL};
    int mask = -1;
    (void)state;
    assert_non_null(lib);
    p = dlsym(lib, "ncclProfiler_v5");
    assert_non_null(p);
    setenv("SF_DISABLE", "1", 1);
    assert_int_equal(p->init(&ctx, 1, &mask, "off", 1, 1, 0, NULL), ncclSuccess);
    unsetenv("SF_DISABLE");
    assert_int_equal(mask, 0);
    assert_null(ctx);
    c.coll = (struct sf_nccl_coll_v5){.func = "AllReduce", .count = 1, .datatype = "ncclInt8"};
    assert_int_equal(p->start_event(ctx, &h, &c), ncclSuccess);
    assert_null(h);
    assert_int_equal(p->stop_event(NULL), ncclSuccess);
    assert_int_equal(p->finalize(ctx), ncclSuccess);
    dlclose(lib);
}

/* NCCL's logger, as the plugin sees it: the last INFO line it wrote. */
static char logged[256];
static int logged_level;

static void capture_log(int level, unsigned long flags, const char *file, int line, const char *fmt,
                        ...)
{
    va_list ap;
    (void)flags;
    (void)file;
    (void)line;
    logged_level = level;
    va_start(ap, fmt);
    vsnprintf(logged, sizeof logged, fmt, ap);
    va_end(ap);
}

/* init says through NCCL's logger which interface version NCCL chose: the
 * GPU check reads this line to prove NCCL itself loaded the plugin. */
static void test_init_logs_version(void **state)
{
    void *lib = dlopen(NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL), *ctx = NULL;
    const sf_nccl_profiler_v5 *p5;
    const sf_nccl_profiler_v4 *p4;
    int mask = 0;
    (void)state;
    assert_non_null(lib);
    p5 = dlsym(lib, "ncclProfiler_v5");
    p4 = dlsym(lib, "ncclProfiler_v4");
    assert_non_null(p5);
    assert_non_null(p4);
    assert_int_equal(p5->init(&ctx, 0x5, &mask, "log-v5", 1, 2, 1, capture_log), ncclSuccess);
    assert_int_equal(logged_level, 3);
    assert_string_equal(
        logged, "stagefrontier profiler: init v5 comm log-v5 hash 0x0000000000000005 rank 1 of 2");
    assert_int_equal(p5->finalize(ctx), ncclSuccess);
    ctx = NULL;
    assert_int_equal(p4->init(&ctx, &mask, "log-v4", 0x4, 1, 1, 0, capture_log), ncclSuccess);
    assert_string_equal(
        logged, "stagefrontier profiler: init v4 comm log-v4 hash 0x0000000000000004 rank 0 of 1");
    assert_int_equal(p4->finalize(ctx), ncclSuccess);
    dlclose(lib);
}

/* A trainer that exits without destroying its communicator: NCCL never
 * calls finalize, and the last collectives still reach sfd. The trainer is a
 * forked child; this process plays sfd. */
static void test_exit_without_finalize(void **state)
{
    pid_t pid;
    int status = -1;
    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *ctx;
        /* No flusher tick before exit: only the exit handler can ship. */
        setenv("SF_NCCL_FLUSH_MS", "60000", 1);
        v5 = dlsym(dlopen(NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL), "ncclProfiler_v5");
        if (!v5)
            _exit(3);
        ctx = init5("comm-exit", 0xe);
        for (int i = 0; i < 5; i++)
            collective5(ctx, "AllReduce", "ncclFloat32", 256, "RING", 1, 0, 0);
        exit(0); /* atexit handlers run; no finalize */
    }
    /* The child's connection waits in the listen backlog until then. */
    assert_int_equal(pthread_create(&srv.thread, NULL, server_main, NULL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(pthread_join(srv.thread, NULL), 0); /* EOF: the child is gone */
    assert_int_equal(srv.bad, 0);
    const struct row *r = find_row("comm-exit", "model.backward_cpu_wall", "AllReduce", "RING", 10);
    assert_non_null(r);
    assert_int_equal(r->count, 5);
}

static int setup_exit(void **state)
{
    (void)state;
    return setup_server_socket(false);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symbols),
        cmocka_unit_test(test_drive_and_ship),
    };
    const struct CMUnitTest disabled[] = {cmocka_unit_test(test_disabled),
                                          cmocka_unit_test(test_init_logs_version)};
    const struct CMUnitTest at_exit[] = {cmocka_unit_test(test_exit_without_finalize)};
    if (argc > 1 && strcmp(argv[1], "disabled") == 0)
        return cmocka_run_group_tests_name("nccl_plugin_disabled", disabled, NULL, NULL);
    if (argc > 1 && strcmp(argv[1], "atexit") == 0)
        return cmocka_run_group_tests_name("nccl_plugin_atexit", at_exit, setup_exit, teardown);
    beacon_mode = argc > 1 && strcmp(argv[1], "beacon") == 0;
    return cmocka_run_group_tests_name(beacon_mode ? "nccl_plugin_beacon" : "nccl_plugin_fallback",
                                       tests, setup, teardown);
}

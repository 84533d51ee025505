/*
 * Side-channel cost, measured side by side in one run:
 *  1. NCCL plugin event path: ns per collective (Group, Coll, ProxyOp and two
 *     kernel channels: 10 plugin calls), one thread and two threads sharing a
 *     communicator, against an empty call of the same shape; and one thread
 *     inside a synchronizing stage, where each collective also writes its
 *     enqueue point and, once its channels report, its kernel times;
 *  2. libsfclient steps with the CUDA-event channel off and on (fraction 1.0,
 *     and 0.05) against a CUDA runtime double, same process, same loop.
 * Each figure is the median of 7 rounds, the variants interleaved within a
 * round so that load on the machine hits them alike.
 * Usage: bench_side PLUGIN_SO FAKE_CUDART_SO [N]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nccl_profiler_abi.h"
#include "stagefrontier/client.h"

static const sf_nccl_profiler_v5 *v5;
static void *ctx;
static long n_iter = 2000000;

#define ROUNDS 7

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v)
{
    qsort(v, ROUNDS, sizeof *v, cmp_double);
    return v[ROUNDS / 2];
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *start(sf_nccl_descr_v5 *d)
{
    void *h = NULL;
    v5->start_event(ctx, &h, d);
    return h;
}

static void one_collective(uint64_t t)
{
    sf_nccl_descr_v5 g = {.type = SF_NCCL_EV_GROUP}, c = {.type = SF_NCCL_EV_COLL};
    sf_nccl_descr_v5 op = {.type = SF_NCCL_EV_PROXY_OP};
    void *gh = start(&g), *ch, *oh;
    c.coll = (struct sf_nccl_coll_v5){.func = "AllReduce",
                                      .count = 1u << 20,
                                      .datatype = "ncclFloat32",
                                      .n_channels = 2,
                                      .algo = "RING",
                                      .proto = "SIMPLE",
                                      .parent_group = gh};
    ch = start(&c);
    v5->stop_event(ch);
    op.parent = ch;
    oh = start(&op);
    for (uint8_t k = 0; k < 2; k++) {
        sf_nccl_descr_v5 kd = {.type = SF_NCCL_EV_KERNEL_CH, .parent = ch};
        sf_nccl_state_args a = {.kernel_ch = {t + 1000}};
        void *kh;
        kd.kernel_ch.gpu_timer_start = t + k;
        kh = start(&kd);
        v5->record_event_state(kh, SF_NCCL_STATE_KERNEL_CH_STOP, &a);
        v5->stop_event(kh);
    }
    v5->stop_event(oh);
    v5->stop_event(gh);
}

/* The same ten indirect calls into functions that do nothing. */
static ncclResult_t nop_start(void *c, void **h, sf_nccl_descr_v5 *d)
{
    (void)c;
    (void)d;
    *h = NULL;
    return ncclSuccess;
}
static ncclResult_t nop_stop(void *h)
{
    (void)h;
    return ncclSuccess;
}
static ncclResult_t nop_rec(void *h, sf_nccl_event_state_t s, sf_nccl_state_args *a)
{
    (void)h;
    (void)s;
    (void)a;
    return ncclSuccess;
}
static sf_nccl_profiler_v5 nop = {
    .start_event = nop_start, .stop_event = nop_stop, .record_event_state = nop_rec};

static void *worker(void *arg)
{
    long n = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++)
        one_collective((uint64_t)i * 4096);
    return NULL;
}

static double run_threads(int threads)
{
    pthread_t t[8];
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(n_iter / threads));
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    return (now_s() - t0) * 1e9 / (double)n_iter;
}

static double steps(sf_client *c, long n)
{
    int fwd = sf_stage_id(c, "model.fwd_loss_cpu_wall"),
        bwd = sf_stage_id(c, "model.backward_cpu_wall");
    double t0 = now_s();
    for (long t = 0; t < n; t++) {
        sf_step_begin(c, t);
        sf_stage_begin(c, fwd);
        sf_stage_end(c, fwd);
        sf_stage_begin(c, bwd);
        sf_stage_end(c, bwd);
        sf_step_end(c);
    }
    return (now_s() - t0) * 1e9 / (double)n;
}

/* A client whose backward is synchronizing, so that the plugin records
 * enqueue points while its backward stage is open. */
static sf_client *sync_client(void)
{
    static const char *const sync[] = {"model.backward_cpu_wall"};
    sf_client_options o;
    sf_client *c = NULL;
    sf_client_options_init(&o);
    o.socket_path = "/nonexistent/sf-bench.sock";
    o.job_id = "bench-sync";
    o.rank = 0;
    o.world_size = 1;
    o.local_rank = 0;
    o.sync_stages = sync;
    o.n_sync_stages = 1;
    return sf_client_open(&o, &c) == 0 ? c : NULL;
}

/* One thread's collectives inside the open synchronizing stage of step t. */
static double run_in_sync_stage(sf_client *c, int64_t t)
{
    int bwd = sf_stage_id(c, "model.backward_cpu_wall");
    sf_step_begin(c, t);
    sf_stage_begin(c, bwd);
    double ns = run_threads(1);
    sf_stage_end(c, bwd);
    sf_step_end(c);
    return ns;
}

static sf_client *client(double fraction)
{
    sf_client_options o;
    sf_client *c = NULL;
    sf_client_options_init(&o);
    o.socket_path = "/nonexistent/sf-bench.sock"; /* no daemon: drops are counted */
    o.job_id = "bench";
    o.rank = 0;
    o.world_size = 1;
    o.local_rank = 0;
    o.event_sample_fraction = fraction;
    return sf_client_open(&o, &c) == 0 ? c : NULL;
}

int main(int argc, char **argv)
{
    const sf_nccl_profiler_v5 *real;
    sf_client *off, *on, *sampled;
    int mask = 0;
    double nop_ns, one_ns, two_ns, sync_ns, off_ns, on_ns, s05_ns;
    long n_steps;

    if (argc < 3)
        return 2;
    if (argc > 3)
        n_iter = atol(argv[3]);
    sf_client *sc = sync_client(); /* published before the plugin looks */
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!sc || !lib || !(real = dlsym(lib, "ncclProfiler_v5")) ||
        real->init(&ctx, 1, &mask, "bench", 1, 1, 0, NULL) != ncclSuccess)
        return 1;
    double nop_v[ROUNDS], one_v[ROUNDS], two_v[ROUNDS], sync_v[ROUNDS], off_v[ROUNDS], on_v[ROUNDS],
        s05_v[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        v5 = &nop;
        nop_v[r] = run_threads(1);
        v5 = real;
        one_v[r] = run_threads(1);
        sync_v[r] = run_in_sync_stage(sc, r);
        two_v[r] = run_threads(2);
    }
    nop_ns = median(nop_v);
    one_ns = median(one_v);
    two_ns = median(two_v);
    sync_ns = median(sync_v);
    v5->finalize(ctx);
    sf_client_close(sc);
    printf("nccl plugin, per collective (10 calls):  no-op %.1f ns | plugin 1 thread %.1f ns"
           " | 2 threads sharing a communicator %.1f ns (aggregate)"
           " | 1 thread in a synchronizing stage %.1f ns\n",
           nop_ns, one_ns, two_ns, sync_ns);

    if (!dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL))
        return 1;
    off = client(0.0);
    on = client(1.0);
    sampled = client(0.05);
    if (!off || !on || !sampled)
        return 1;
    n_steps = n_iter / 4;
    for (int r = 0; r < ROUNDS; r++) {
        off_v[r] = steps(off, n_steps);
        on_v[r] = steps(on, n_steps);
        s05_v[r] = steps(sampled, n_steps);
    }
    off_ns = median(off_v);
    on_ns = median(on_v);
    s05_ns = median(s05_v);
    printf("libsfclient step (4 stage boundaries), CUDA-event channel: off %.1f ns | on, every"
           " step %.1f ns | on, 5%% of steps %.1f ns\n",
           off_ns, on_ns, s05_ns);
    sf_client_close(off);
    sf_client_close(on);
    sf_client_close(sampled);
    return 0;
}

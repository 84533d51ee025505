/*
 * A trainer process for the side-evidence integration test: times its steps
 * through libsfclient and, in the backward stage, drives the NCCL profiler
 * plugin exactly as NCCL would for a data-parallel all-reduce (Group -> Coll
 * -> ProxyOp, two kernel channels with GPU timestamps). Both reach the real
 * sfd: step records on channel 0, the plugin's aggregates on channel 1.
 * With SF_TEST_CUDART (a CUDA runtime double) and SF_EVENT_SAMPLE set, the
 * CUDA-event forward channel samples the forward stage too.
 * With MODE "sync" or "mark" backward is a synchronizing stage that spends
 * SPIN_NS of host work before its collectives: "sync" gives no explicit
 * arrival (sfd splits at the plugin's enqueue point), "mark" calls
 * sf_stage_arrive first thing in backward (the explicit mark must win). Both
 * close the plugin, then wait for a line on stdin before closing the client,
 * so the test can let the enqueue points reach sfd before the step records.
 * MODE "gpu" is "sync" with kernel channels stamped as a real GPU stamps
 * them (the globaltimer, which follows CLOCK_REALTIME) and reported once the
 * kernel has run, as NCCL's proxy thread reports them: each collective's
 * kernel starts SPIN_NS after its enqueue (the rank's GPU still busy, say)
 * and runs SPAN_NS.
 * Usage: sf_side_driver PLUGIN STEPS COLLECTIVES_PER_STEP SPAN_NS [MODE SPIN_NS]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_profiler_abi.h"
#include "stagefrontier/client.h"

static const sf_nccl_profiler_v5 *v5;

static void *start(void *ctx, sf_nccl_descr_v5 *d)
{
    void *h = NULL;
    return v5->start_event(ctx, &h, d) == ncclSuccess ? h : NULL;
}

static void stop(void *h)
{
    if (h)
        v5->stop_event(h);
}

static void all_reduce(void *ctx, uint64_t t0, uint64_t span)
{
    sf_nccl_descr_v5 g = {.type = SF_NCCL_EV_GROUP}, c = {.type = SF_NCCL_EV_COLL};
    sf_nccl_descr_v5 op = {.type = SF_NCCL_EV_PROXY_OP};
    void *gh = start(ctx, &g), *ch, *oh;
    c.coll = (struct sf_nccl_coll_v5){.func = "AllReduce",
                                      .count = 1u << 18,
                                      .datatype = "ncclBfloat16",
                                      .n_channels = 2,
                                      .algo = "RING",
                                      .proto = "SIMPLE",
                                      .parent_group = gh};
    ch = start(ctx, &c);
    stop(ch);
    op.parent = ch;
    oh = start(ctx, &op);
    for (uint8_t k = 0; k < 2; k++) {
        sf_nccl_descr_v5 kd = {.type = SF_NCCL_EV_KERNEL_CH, .parent = ch};
        sf_nccl_state_args a = {.kernel_ch = {t0 + span - (1 - k)}};
        void *kh;
        kd.kernel_ch.channel = k;
        kd.kernel_ch.gpu_timer_start = t0 + k;
        kh = start(ctx, &kd);
        if (kh)
            v5->record_event_state(kh, SF_NCCL_STATE_KERNEL_CH_STOP, &a);
        stop(kh);
    }
    stop(oh);
    stop(gh);
}

/* Host work of a known length: the clock is the workload, not a wait. */
static void spin(long ns)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ns);
}

static uint64_t realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* An all-reduce whose kernel starts late_ns after NCCL enqueued it and runs
 * span_ns on two channels, stamped on the GPU's clock. */
static void all_reduce_gpu(void *ctx, long late_ns, long span_ns)
{
    sf_nccl_descr_v5 g = {.type = SF_NCCL_EV_GROUP}, c = {.type = SF_NCCL_EV_COLL};
    sf_nccl_descr_v5 op = {.type = SF_NCCL_EV_PROXY_OP};
    void *gh = start(ctx, &g), *ch, *oh;
    c.coll = (struct sf_nccl_coll_v5){.func = "AllReduce",
                                      .count = 1u << 18,
                                      .datatype = "ncclBfloat16",
                                      .n_channels = 2,
                                      .algo = "RING",
                                      .proto = "SIMPLE",
                                      .parent_group = gh};
    ch = start(ctx, &c);
    stop(ch);
    op.parent = ch;
    oh = start(ctx, &op);
    spin(late_ns);
    uint64_t t0 = realtime_ns();
    spin(span_ns);
    uint64_t t1 = realtime_ns();
    for (uint8_t k = 0; k < 2; k++) {
        sf_nccl_descr_v5 kd = {.type = SF_NCCL_EV_KERNEL_CH, .parent = ch};
        sf_nccl_state_args a = {.kernel_ch = {t1 - k}};
        void *kh;
        kd.kernel_ch.channel = k;
        kd.kernel_ch.gpu_timer_start = t0 + k;
        kh = start(ctx, &kd);
        if (kh)
            v5->record_event_state(kh, SF_NCCL_STATE_KERNEL_CH_STOP, &a);
        stop(kh);
    }
    stop(oh);
    stop(gh);
}

static int open_client(const char *mode, sf_client **ret)
{
    static const char *const sync[] = {"model.backward_cpu_wall"};
    sf_client_options o;
    if (!mode)
        return sf_client_open_env(ret);
    sf_client_options_init(&o);
    o.sync_stages = sync;
    o.n_sync_stages = 1;
    return sf_client_open(&o, ret);
}

static int stage(sf_client *c, int id)
{
    return sf_stage_begin(c, id) < 0 || sf_stage_end(c, id) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    sf_client *c = NULL;
    void *lib, *ctx = NULL;
    int mask = 0, data, fwd, bwd, opt;
    long steps, per_step;
    unsigned long long span;

    const char *mode = argc == 7 ? argv[5] : NULL;
    long spin_ns = argc == 7 ? strtol(argv[6], NULL, 10) : 0;
    char line[16];

    if (argc != 5 &&
        (argc != 7 || (strcmp(mode, "sync") && strcmp(mode, "mark") && strcmp(mode, "gpu")))) {
        fprintf(stderr,
                "usage: %s PLUGIN STEPS COLLECTIVES_PER_STEP SPAN_NS [sync|mark|gpu SPIN_NS]\n",
                argv[0]);
        return 2;
    }
    steps = strtol(argv[2], NULL, 10);
    per_step = strtol(argv[3], NULL, 10);
    span = strtoull(argv[4], NULL, 10);
    /* A CUDA runtime the "framework" loaded before the client opens: the
     * test's runtime double, when SF_TEST_CUDART names it. */
    if (getenv("SF_TEST_CUDART") && !dlopen(getenv("SF_TEST_CUDART"), RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "runtime double: %s\n", dlerror());
        return 1;
    }
    if (open_client(mode, &c) < 0) {
        fprintf(stderr, "sf_client_open_env failed\n");
        return 1;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL); /* as NCCL loads it */
    if (!lib || !(v5 = dlsym(lib, "ncclProfiler_v5")) ||
        v5->init(&ctx, 0xdd9, &mask, "ddp-comm", 1, 1, 0, NULL) != ncclSuccess || !ctx) {
        fprintf(stderr, "plugin: %s\n", lib ? "init failed" : dlerror());
        return 1;
    }
    data = sf_stage_id(c, "data.next_wait");
    fwd = sf_stage_id(c, "model.fwd_loss_cpu_wall");
    bwd = sf_stage_id(c, "model.backward_cpu_wall");
    opt = sf_stage_id(c, "optim.step_cpu_wall");
    for (long t = 0; t < steps; t++) {
        if (sf_step_begin(c, t) < 0 || stage(c, data) < 0 || stage(c, fwd) < 0 ||
            sf_stage_begin(c, bwd) < 0)
            return 1;
        if (mode && !strcmp(mode, "mark") && sf_stage_arrive(c) < 0)
            return 1;
        bool gpu = mode && !strcmp(mode, "gpu");
        if (!gpu)
            spin(spin_ns);
        for (long k = 0; k < per_step; k++) {
            if (gpu)
                all_reduce_gpu(ctx, spin_ns, (long)span);
            else
                all_reduce(ctx, (uint64_t)(t * per_step + k) * 1000000u, span);
        }
        if (sf_stage_end(c, bwd) < 0 || stage(c, opt) < 0 || sf_step_end(c) < 0)
            return 1;
    }
    v5->finalize(ctx);
    if (mode) {
        /* The test answers once sfd holds every enqueue point. */
        printf("{\"finalized\": true}\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
            return 1;
    }
    sf_client_close(c);
    printf("{\"steps\": %ld, \"collectives\": %ld}\n", steps, steps * per_step);
    return 0;
}

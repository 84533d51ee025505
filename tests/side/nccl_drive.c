/*
 * A stand-in for NCCL inside a Python process: a small shared object, loaded
 * with ctypes, that dlopens the profiler plugin as NCCL does and issues
 * collectives through it (Group -> Coll -> ProxyOp, kernel channels with GPU
 * timestamps). Used by test_side_python.py; never part of the product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "nccl_profiler_abi.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int sf_test_nccl_open(const char *plugin, const char *comm_name);
EXPORT int sf_test_nccl_collective(const char *func, const char *datatype, unsigned long count,
                                   unsigned long long gpu_ns);
EXPORT int sf_test_nccl_close(void);

static const sf_nccl_profiler_v5 *v5;
static void *ctx;
static uint64_t clock_ns;

static void *start(sf_nccl_descr_v5 *d)
{
    void *h = NULL;
    return v5->start_event(ctx, &h, d) == ncclSuccess ? h : NULL;
}

static void stop(void *h)
{
    if (h)
        v5->stop_event(h);
}

int sf_test_nccl_open(const char *plugin, const char *comm_name)
{
    void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    int mask = 0;
    if (!lib || !(v5 = dlsym(lib, "ncclProfiler_v5")))
        return -1;
    return v5->init(&ctx, 0x5eed, &mask, comm_name, 1, 1, 0, NULL) == ncclSuccess && ctx ? 0 : -1;
}

/* One collective on one channel, gpu_ns long on the GPU clock. */
int sf_test_nccl_collective(const char *func, const char *datatype, unsigned long count,
                            unsigned long long gpu_ns)
{
    sf_nccl_descr_v5 g = {.type = SF_NCCL_EV_GROUP}, c = {.type = SF_NCCL_EV_COLL};
    sf_nccl_descr_v5 op = {.type = SF_NCCL_EV_PROXY_OP}, k = {.type = SF_NCCL_EV_KERNEL_CH};
    sf_nccl_state_args a;
    void *gh, *ch, *oh, *kh;

    if (!ctx)
        return -1;
    gh = start(&g);
    c.coll = (struct sf_nccl_coll_v5){.func = func,
                                      .count = count,
                                      .datatype = datatype,
                                      .n_channels = 1,
                                      .algo = "RING",
                                      .proto = "LL128",
                                      .parent_group = gh};
    ch = start(&c);
    stop(ch);
    op.parent = ch;
    oh = start(&op);
    k.parent = ch;
    k.kernel_ch.gpu_timer_start = clock_ns;
    clock_ns += gpu_ns;
    a.kernel_ch.gpu_timer = clock_ns;
    clock_ns += 1000;
    kh = start(&k);
    if (kh)
        v5->record_event_state(kh, SF_NCCL_STATE_KERNEL_CH_STOP, &a);
    stop(kh);
    stop(oh);
    stop(gh);
    return 0;
}

int sf_test_nccl_close(void)
{
    int r = ctx && v5->finalize(ctx) == ncclSuccess ? 0 : -1;
    ctx = NULL;
    return r;
}

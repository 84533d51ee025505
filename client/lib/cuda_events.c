/*
 * CUDA-event forward channel: binds to a CUDA runtime that the process has
 * already loaded (RTLD_NOLOAD, never a second runtime), records event pairs
 * around sampled forward regions on the legacy default stream and polls them
 * at later safe points. It must never synchronize, block or allocate per step.
 */
#define _GNU_SOURCE
#include "cuda_events.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Our own minimal view of the runtime ABI: cudaError_t is an int-sized enum,
 * events and streams are opaque pointers. We never link libcudart. */
typedef int sf_cuda_err;
typedef void *sf_cuda_event;
typedef void *sf_cuda_stream;

#define SF_CUDA_SUCCESS 0
#define SF_CUDA_ERR_NOT_READY 600
#define SF_CUDA_EVENT_DEFAULT 0u /* timing enabled: DisableTiming is off */

struct sf_cuda_api {
    sf_cuda_err (*event_create)(sf_cuda_event *, unsigned int);
    sf_cuda_err (*event_record)(sf_cuda_event, sf_cuda_stream);
    sf_cuda_err (*event_query)(sf_cuda_event);
    sf_cuda_err (*event_elapsed)(float *, sf_cuda_event, sf_cuda_event);
    sf_cuda_err (*event_destroy)(sf_cuda_event);
    sf_cuda_err (*get_device)(int *);
    sf_cuda_err (*get_device_count)(int *);
};

enum slot_state { SLOT_FREE = 0, SLOT_BEGUN, SLOT_PENDING };

struct sf_cuda_slot {
    sf_cuda_event start, end;
    int64_t step;
    int64_t cpu_ns;
    uint8_t state;
};

struct sf_cuda_channel {
    void *lib;
    struct sf_cuda_api api;
    bool all_steps;
    uint64_t threshold; /* step sampled iff hash(step) < threshold */
    bool pool_ready;    /* events are created once, on first use */
    bool pool_failed;
    int device; /* device the pool's events belong to */
    pid_t pid;  /* process that opened the channel */
    struct sf_cuda_slot slots[SF__CUDA_POOL_PAIRS];
    struct sf__cuda_stats stats;
};

/* Versioned sonames only: the unversioned name is a development symlink and
 * matching it could alias a runtime other than the one the framework uses. */
static const char *const cudart_sonames[] = {
    "libcudart.so.13",
    "libcudart.so.12",
    "libcudart.so.11.0",
};

static void *cudart_find_loaded(void)
{
    const char *override = getenv("SF_CUDART_SONAME");
    if (override && *override)
        return dlopen(override, RTLD_NOW | RTLD_NOLOAD);
    for (size_t i = 0; i < sizeof cudart_sonames / sizeof cudart_sonames[0]; i++) {
        void *h = dlopen(cudart_sonames[i], RTLD_NOW | RTLD_NOLOAD);
        if (h)
            return h;
    }
    return NULL;
}

/* dlsym returns void *; going through memcpy keeps the conversion to a
 * function pointer well defined under -Wpedantic. */
static bool bind_sym(void *lib, const char *name, void *fnptr_out)
{
    void *sym = dlsym(lib, name);
    if (!sym)
        return false;
    memcpy(fnptr_out, &sym, sizeof sym);
    return true;
}

static bool bind_api(void *lib, struct sf_cuda_api *api)
{
    return bind_sym(lib, "cudaEventCreateWithFlags", &api->event_create) &&
           bind_sym(lib, "cudaEventRecord", &api->event_record) &&
           bind_sym(lib, "cudaEventQuery", &api->event_query) &&
           bind_sym(lib, "cudaEventElapsedTime", &api->event_elapsed) &&
           bind_sym(lib, "cudaEventDestroy", &api->event_destroy) &&
           bind_sym(lib, "cudaGetDevice", &api->get_device) &&
           bind_sym(lib, "cudaGetDeviceCount", &api->get_device_count);
}

static uint64_t mix64(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

int sf__cuda_step_sampled(const sf_cuda_channel *ch, int64_t step)
{
    if (!ch || step < 0)
        return 0;
    return ch->all_steps || mix64((uint64_t)step) < ch->threshold;
}

/* fraction * 2^64 without libm; a product that rounds up to 2^64 would not
 * fit a uint64_t, so it saturates. */
static uint64_t fraction_threshold(double fraction)
{
    const double two64 = 18446744073709551616.0;
    double t = fraction * two64;
    return t >= two64 ? UINT64_MAX : (uint64_t)t;
}

int sf__cuda_channel_open(double sample_fraction, sf_cuda_channel **ret)
{
    sf_cuda_channel *ch = NULL;
    void *lib = NULL;
    int count = 0, r;

    if (!ret || isnan(sample_fraction) || sample_fraction < 0.0 || sample_fraction > 1.0)
        return -EINVAL;
    if (sample_fraction == 0.0)
        return -ENOTSUP;
    lib = cudart_find_loaded();
    if (!lib)
        return -ENOTSUP;
    ch = calloc(1, sizeof *ch);
    if (!ch) {
        r = -ENOMEM;
        goto fail;
    }
    if (!bind_api(lib, &ch->api) || ch->api.get_device_count(&count) != SF_CUDA_SUCCESS ||
        count <= 0) {
        r = -ENOTSUP;
        goto fail;
    }
    ch->lib = lib;
    ch->pid = getpid();
    ch->all_steps = sample_fraction >= 1.0;
    ch->threshold = fraction_threshold(sample_fraction);
    *ret = ch;
    return 0;
fail:
    free(ch);
    dlclose(lib);
    return r;
}

static void pool_destroy(sf_cuda_channel *ch)
{
    for (size_t i = 0; i < SF__CUDA_POOL_PAIRS; i++) {
        if (ch->slots[i].start)
            ch->api.event_destroy(ch->slots[i].start);
        if (ch->slots[i].end)
            ch->api.event_destroy(ch->slots[i].end);
        ch->slots[i] = (struct sf_cuda_slot){0};
    }
}

/* The pool is created once, at the first sampled forward, not at open: by
 * then the trainer has selected its device, so we neither create a CUDA
 * context on device 0 for every rank nor tie the events to the wrong device.
 * After that no event is ever created or destroyed until close. */
static bool pool_ensure(sf_cuda_channel *ch)
{
    if (ch->pool_ready)
        return true;
    if (ch->pool_failed)
        return false;
    if (ch->api.get_device(&ch->device) != SF_CUDA_SUCCESS)
        goto fail;
    for (size_t i = 0; i < SF__CUDA_POOL_PAIRS; i++) {
        struct sf_cuda_slot *s = &ch->slots[i];
        if (ch->api.event_create(&s->start, SF_CUDA_EVENT_DEFAULT) != SF_CUDA_SUCCESS ||
            ch->api.event_create(&s->end, SF_CUDA_EVENT_DEFAULT) != SF_CUDA_SUCCESS)
            goto fail;
    }
    ch->pool_ready = true;
    return true;
fail:
    pool_destroy(ch);
    ch->pool_failed = true;
    ch->stats.record_errors++;
    return false;
}

void sf__cuda_channel_close(sf_cuda_channel *ch)
{
    if (!ch)
        return;
    /* In a forked child the parent's CUDA state is unusable (calls may fail
     * or hang): leave the events and the handle alone, free only our memory. */
    if (ch->pid == getpid()) {
        /* Destroying an event whose work is still queued is legal: the
         * runtime releases it once the work completes. No synchronize. */
        pool_destroy(ch);
        dlclose(ch->lib);
    }
    free(ch);
}

static struct sf_cuda_slot *slot_of_step(sf_cuda_channel *ch, int64_t step)
{
    for (size_t i = 0; i < SF__CUDA_POOL_PAIRS; i++)
        if (ch->slots[i].state != SLOT_FREE && ch->slots[i].step == step)
            return &ch->slots[i];
    return NULL;
}

static struct sf_cuda_slot *slot_free(sf_cuda_channel *ch)
{
    for (size_t i = 0; i < SF__CUDA_POOL_PAIRS; i++)
        if (ch->slots[i].state == SLOT_FREE)
            return &ch->slots[i];
    return NULL;
}

/* Stream NULL through the non-_ptsz entry point is the legacy default stream,
 * which orders against every blocking stream of the device: the events bracket
 * all forward work the host enqueued in between, whatever stream it used,
 * unless the framework used non-blocking streams (documented as a scope
 * limit). */
void sf__cuda_forward_begin(sf_cuda_channel *ch, int64_t step)
{
    struct sf_cuda_slot *s;
    int dev = -1;

    if (!sf__cuda_step_sampled(ch, step) || slot_of_step(ch, step))
        return; /* only the first forward region of a step is sampled */
    if (!pool_ensure(ch))
        return;
    ch->stats.sampled++;
    s = slot_free(ch);
    if (!s) {
        ch->stats.skipped_pool_full++;
        return;
    }
    if (ch->api.get_device(&dev) != SF_CUDA_SUCCESS || dev != ch->device ||
        ch->api.event_record(s->start, NULL) != SF_CUDA_SUCCESS) {
        ch->stats.record_errors++;
        return;
    }
    s->step = step;
    s->cpu_ns = 0;
    s->state = SLOT_BEGUN;
}

void sf__cuda_forward_end(sf_cuda_channel *ch, int64_t step, int64_t cpu_ns)
{
    struct sf_cuda_slot *s;

    if (!sf__cuda_step_sampled(ch, step) || !ch->pool_ready)
        return;
    s = slot_of_step(ch, step);
    if (!s || s->state != SLOT_BEGUN)
        return;
    s->cpu_ns = cpu_ns > 0 ? cpu_ns : 0;
    if (ch->api.event_record(s->end, NULL) != SF_CUDA_SUCCESS) {
        ch->stats.record_errors++;
        s->state = SLOT_FREE;
        return;
    }
    s->state = SLOT_PENDING;
}

static bool overdue(const struct sf_cuda_slot *s, int64_t now_step)
{
    return now_step - s->step >= SF__CUDA_MAX_LAG_STEPS;
}

/* A begin without its end (an exception in forward) holds a slot; release it
 * once it can no longer be completed. It carries no CPU time to report. */
static void release_abandoned(sf_cuda_channel *ch, int64_t now_step)
{
    for (size_t i = 0; i < SF__CUDA_POOL_PAIRS; i++) {
        struct sf_cuda_slot *s = &ch->slots[i];
        if (s->state == SLOT_BEGUN && overdue(s, now_step))
            s->state = SLOT_FREE;
    }
}

static struct sf_cuda_slot *oldest_pending(sf_cuda_channel *ch)
{
    struct sf_cuda_slot *best = NULL;
    for (size_t i = 0; i < SF__CUDA_POOL_PAIRS; i++) {
        struct sf_cuda_slot *s = &ch->slots[i];
        if (s->state == SLOT_PENDING && (!best || s->step < best->step))
            best = s;
    }
    return best;
}

/* Work on one stream completes in order, so when the oldest pending sample is
 * neither ready nor overdue, no newer one can be resolved either: one query
 * per poll at most. */
int sf__cuda_poll(sf_cuda_channel *ch, int64_t now_step, struct sf__event_sample *ret)
{
    struct sf_cuda_slot *s;
    sf_cuda_err e;
    float ms = 0.0f;

    if (!ch || !ret || !ch->pool_ready)
        return 0;
    release_abandoned(ch, now_step);
    s = oldest_pending(ch);
    if (!s)
        return 0;
    e = ch->api.event_query(s->end);
    if (e == SF_CUDA_ERR_NOT_READY && !overdue(s, now_step))
        return 0;
    *ret = (struct sf__event_sample){
        .step = s->step, .state = SF__EVENT_MISSING, .cpu_ns = s->cpu_ns, .gpu_ns = 0};
    if (e == SF_CUDA_SUCCESS && ch->api.event_elapsed(&ms, s->start, s->end) == SF_CUDA_SUCCESS &&
        isfinite(ms) && ms >= 0.0f && ms < 1e9f) {
        ret->state = SF__EVENT_READY;
        ret->gpu_ns = (int64_t)((double)ms * 1e6 + 0.5);
        ch->stats.ready++;
    } else {
        ch->stats.missing++;
    }
    s->state = SLOT_FREE;
    return 1;
}

void sf__cuda_channel_stats(const sf_cuda_channel *ch, struct sf__cuda_stats *ret)
{
    if (!ch || !ret)
        return;
    *ret = ch->stats;
}

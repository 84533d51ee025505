/*
 * Test double of the CUDA runtime entry points the forward channel binds to,
 * built as a shared object whose soname is libcudart.so.13. Tests load it
 * RTLD_GLOBAL first, as a framework would, then run the real channel. Event
 * readiness counts queries, so "late" needs no clock. Never linked into
 * product code.
 */
#include <stdlib.h>

#include "fake_cudart.h"

#define EXPORT __attribute__((visibility("default")))
#define NOT_READY 600
#define INVALID_VALUE 1

struct fake_event {
    int queries;
    int recorded;
};

/* The runtime's entry points, as the channel under test calls them. */
EXPORT struct fake_cudart_ctl *fake_cudart_control(void);
EXPORT int cudaGetDeviceCount(int *count);
EXPORT int cudaGetDevice(int *dev);
EXPORT int cudaEventCreateWithFlags(void **ev, unsigned flags);
EXPORT int cudaEventDestroy(void *ev);
EXPORT int cudaEventRecord(void *ev, void *stream);
EXPORT int cudaEventQuery(void *ev);
EXPORT int cudaEventElapsedTime(float *ms, void *start, void *end);
EXPORT int cudaEventSynchronize(void *ev);
EXPORT int cudaDeviceSynchronize(void);

static struct fake_cudart_ctl ctl = {.device_count = 1, .elapsed_ms = 1.0f};

EXPORT struct fake_cudart_ctl *fake_cudart_control(void)
{
    return &ctl;
}

EXPORT int cudaGetDeviceCount(int *count)
{
    *count = ctl.device_count;
    return ctl.device_count > 0 ? 0 : 100;
}
EXPORT int cudaGetDevice(int *dev)
{
    *dev = ctl.device;
    return 0;
}

EXPORT int cudaEventCreateWithFlags(void **ev, unsigned flags)
{
    struct fake_event *e = calloc(1, sizeof *e);
    (void)flags;
    if (!e)
        return 2;
    *ev = e;
    ctl.created++;
    return 0;
}

EXPORT int cudaEventDestroy(void *ev)
{
    if (!ev)
        return INVALID_VALUE;
    free(ev);
    ctl.destroyed++;
    return 0;
}

EXPORT int cudaEventRecord(void *ev, void *stream)
{
    struct fake_event *e = ev;
    (void)stream;
    if (ctl.fail_record)
        return INVALID_VALUE;
    e->recorded = 1;
    e->queries = 0;
    ctl.records++;
    return 0;
}

EXPORT int cudaEventQuery(void *ev)
{
    struct fake_event *e = ev;
    ctl.queries++;
    if (ctl.not_ready_queries < 0)
        return NOT_READY;
    return e->queries++ < ctl.not_ready_queries ? NOT_READY : 0;
}

EXPORT int cudaEventElapsedTime(float *ms, void *start, void *end)
{
    (void)start;
    (void)end;
    ctl.elapsed_calls++;
    *ms = ctl.elapsed_ms;
    return 0;
}

/* Present so a test can prove the channel never calls it. */
EXPORT int cudaEventSynchronize(void *ev)
{
    (void)ev;
    ctl.syncs++;
    return 0;
}
EXPORT int cudaDeviceSynchronize(void)
{
    ctl.syncs++;
    return 0;
}

/*
 * From the CUDA-event channel to the forward_* labels: samples produced by the
 * real channel (against the runtime double) ride on sf_row event fields into
 * the accounting core, and the labels follow docs/SPEC.md section 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_events.h"
#include "fake_cudart.h"
#include "stagefrontier/accounting.h"

#define RANKS 2
#define STEPS 10
#define MS INT64_C(1000000)

static struct fake_cudart_ctl *ctl;

static int load_fake(void **state)
{
    fake_cudart_ctl_fn fn;
    void *lib = dlopen(FAKE_CUDART_PATH, RTLD_NOW | RTLD_GLOBAL);
    (void)state;
    if (!lib)
        return -1;
    *(void **)&fn = dlsym(lib, "fake_cudart_control");
    if (!fn)
        return -1;
    ctl = fn();
    return 0;
}

struct scenario {
    int64_t d[6]; /* rank 0's stage durations; rank 1 adds 2 ms to the largest */
    float gpu_ms; /* what every sampled forward takes on the device */
    int never_ready;
};

/* Runs the channel over every (step, rank), builds the rows, and returns the
 * report's labels. */
static uint32_t labels_for(const struct scenario *sc, double *ret_ratio)
{
    static int64_t durations[STEPS * RANKS][6];
    sf_row rows[STEPS * RANKS];
    sf_cuda_channel *ch = NULL;
    sf_schema schema;
    sf_gates gates;
    sf_window_meta meta = {
        .index = 0, .first_step = 0, .last_step = STEPS - 1, .world_size = RANKS};
    sf_report *rep = NULL;
    uint32_t labels;
    size_t big = 0;

    for (size_t s = 1; s < 6; s++)
        if (sc->d[s] > sc->d[big])
            big = s;
    ctl->not_ready_queries = sc->never_ready ? -1 : 0;
    ctl->elapsed_ms = sc->gpu_ms;
    assert_int_equal(sf__cuda_channel_open(1.0, &ch), 0);
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    sf_gates_default(&gates);
    for (int64_t t = 0; t < STEPS; t++) {
        for (uint32_t r = 0; r < RANKS; r++) {
            size_t i = (size_t)t * RANKS + r;
            struct sf__event_sample ev;
            int64_t now = t;
            memcpy(durations[i], sc->d, sizeof sc->d);
            if (r == 1)
                durations[i][big] += 2 * MS;
            sf__cuda_forward_begin(ch, t);
            sf__cuda_forward_end(ch, t, durations[i][1]);
            while (sf__cuda_poll(ch, now, &ev) == 0)
                assert_true(++now <= t + SF__CUDA_MAX_LAG_STEPS);
            assert_int_equal(ev.step, t);
            rows[i] = (sf_row){.step = t,
                               .rank = r,
                               .d = durations[i],
                               .event_state = ev.state,
                               .event_cpu_ns = ev.cpu_ns,
                               .event_gpu_ns = ev.gpu_ns};
        }
    }
    sf__cuda_channel_close(ch);
    assert_int_equal(sf_report_from_rows(&schema, &meta, rows, STEPS * RANKS, &gates, &rep), 0);
    labels = rep->labels;
    if (ret_ratio)
        *ret_ratio = rep->event_ratio;
    sf_report_free(rep);
    sf_schema_clear(&schema);
    return labels;
}

#define HAS(l, x) (((l) >> (x)) & 1u)

/* Forward dominates and the device time backs it: R >= 0.5. */
static void test_device_supported(void **state)
{
    struct scenario sc = {{1 * MS, 60 * MS, 10 * MS, 1 * MS, 2 * MS, 1 * MS}, 54.0f, 0};
    double ratio;
    uint32_t l = labels_for(&sc, &ratio);
    (void)state;
    assert_true(ratio >= 0.5);
    assert_true(HAS(l, SF_LABEL_FORWARD_DEVICE_SUPPORTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_HOST_OVERHEAD_SUSPECTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_EVENT_SCOPE_LIMITED));
    assert_false(HAS(l, SF_LABEL_FORWARD_SPILLOVER_SUSPECTED));
}

/* Forward dominates but the device is nearly idle in it: R < 0.25. */
static void test_host_overhead(void **state)
{
    struct scenario sc = {{1 * MS, 60 * MS, 10 * MS, 1 * MS, 2 * MS, 1 * MS}, 6.0f, 0};
    double ratio;
    uint32_t l = labels_for(&sc, &ratio);
    (void)state;
    assert_true(ratio < 0.25);
    assert_true(HAS(l, SF_LABEL_FORWARD_HOST_OVERHEAD_SUSPECTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_DEVICE_SUPPORTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_EVENT_SCOPE_LIMITED));
}

/* Every sample went MISSING: the ready ratio gate fails, scope_limited
 * suppresses the other forward labels. */
static void test_scope_limited(void **state)
{
    struct scenario sc = {{1 * MS, 60 * MS, 10 * MS, 1 * MS, 2 * MS, 1 * MS}, 54.0f, 1};
    uint32_t l = labels_for(&sc, NULL);
    (void)state;
    assert_true(HAS(l, SF_LABEL_FORWARD_EVENT_SCOPE_LIMITED));
    assert_false(HAS(l, SF_LABEL_FORWARD_DEVICE_SUPPORTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_HOST_OVERHEAD_SUSPECTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_SPILLOVER_SUSPECTED));
}

/* Backward leads, forward is outside the routing set, and the device is busy
 * through forward: forward work spills into what the host sees as backward. */
static void test_spillover(void **state)
{
    struct scenario sc = {{1 * MS, 5 * MS, 60 * MS, 1 * MS, 2 * MS, 1 * MS}, 4.0f, 0};
    double ratio;
    uint32_t l = labels_for(&sc, &ratio);
    (void)state;
    assert_true(ratio >= 0.5);
    assert_true(HAS(l, SF_LABEL_FORWARD_SPILLOVER_SUSPECTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_DEVICE_SUPPORTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_EVENT_SCOPE_LIMITED));
}

/* The same backward-led window with a host-bound forward: no spillover. */
static void test_no_spillover_when_device_idle(void **state)
{
    struct scenario sc = {{1 * MS, 5 * MS, 60 * MS, 1 * MS, 2 * MS, 1 * MS}, 0.5f, 0};
    uint32_t l = labels_for(&sc, NULL);
    (void)state;
    assert_false(HAS(l, SF_LABEL_FORWARD_SPILLOVER_SUSPECTED));
    assert_false(HAS(l, SF_LABEL_FORWARD_HOST_OVERHEAD_SUSPECTED));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_supported),
        cmocka_unit_test(test_host_overhead),
        cmocka_unit_test(test_scope_limited),
        cmocka_unit_test(test_spillover),
        cmocka_unit_test(test_no_spillover_when_device_idle),
    };
    return cmocka_run_group_tests_name("forward_labels", tests, load_fake, NULL);
}

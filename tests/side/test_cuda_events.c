/*
 * The real CUDA-event forward channel against a test double of the CUDA
 * runtime (fake_cudart.c, soname libcudart.so.13) loaded first with
 * RTLD_GLOBAL, as a framework would. Mode "nolib" runs in a process where no
 * runtime is loaded and proves the channel does not load one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cuda_events.h"
#include "fake_cudart.h"

static void *fake_lib;
static struct fake_cudart_ctl *ctl;

static void ctl_reset(void)
{
    uint64_t created = ctl->created, destroyed = ctl->destroyed;
    memset(ctl, 0, sizeof *ctl);
    ctl->device_count = 1;
    ctl->elapsed_ms = 1.0f;
    ctl->created = created; /* lifetime counters: leak checks use deltas */
    ctl->destroyed = destroyed;
}

static int load_fake(void **state)
{
    fake_cudart_ctl_fn fn;
    (void)state;
    fake_lib = dlopen(FAKE_CUDART_PATH, RTLD_NOW | RTLD_GLOBAL);
    if (!fake_lib)
        return -1;
    *(void **)&fn = dlsym(fake_lib, "fake_cudart_control");
    if (!fn)
        return -1;
    ctl = fn();
    return 0;
}

static int setup(void **state)
{
    (void)state;
    ctl_reset();
    return 0;
}

static sf_cuda_channel *open_all(void)
{
    sf_cuda_channel *ch = NULL;
    assert_int_equal(sf__cuda_channel_open(1.0, &ch), 0);
    assert_non_null(ch);
    return ch;
}

/* One sampled forward at step, then polls at now_step. */
static int forward_and_poll(sf_cuda_channel *ch, int64_t step, int64_t cpu_ns, int64_t now_step,
                            struct sf__event_sample *out)
{
    sf__cuda_forward_begin(ch, step);
    sf__cuda_forward_end(ch, step, cpu_ns);
    return sf__cuda_poll(ch, now_step, out);
}

static void test_ready(void **state)
{
    struct sf__event_sample s;
    sf_cuda_channel *ch = open_all();
    (void)state;
    ctl->elapsed_ms = 4.25f;
    assert_int_equal(forward_and_poll(ch, 7, 5000000, 7, &s), 1);
    assert_int_equal(s.step, 7);
    assert_int_equal(s.state, SF__EVENT_READY);
    assert_int_equal(s.cpu_ns, 5000000);
    assert_int_equal(s.gpu_ns, 4250000);
    assert_int_equal(sf__cuda_poll(ch, 7, &s), 0); /* nothing else due */
    assert_int_equal(ctl->records, 2);
    assert_int_equal(ctl->syncs, 0);
    sf__cuda_channel_close(ch);
}

static void test_late_then_ready(void **state)
{
    struct sf__event_sample s;
    sf_cuda_channel *ch = open_all();
    (void)state;
    ctl->not_ready_queries = 3;
    ctl->elapsed_ms = 2.0f;
    assert_int_equal(forward_and_poll(ch, 10, 3000000, 10, &s), 0);
    assert_int_equal(sf__cuda_poll(ch, 11, &s), 0);
    assert_int_equal(sf__cuda_poll(ch, 12, &s), 0);
    assert_int_equal(sf__cuda_poll(ch, 13, &s), 1);
    assert_int_equal(s.step, 10);
    assert_int_equal(s.state, SF__EVENT_READY);
    assert_int_equal(s.gpu_ns, 2000000);
    assert_int_equal(ctl->queries, 4);
    assert_int_equal(ctl->syncs, 0);
    sf__cuda_channel_close(ch);
}

static void test_missing(void **state)
{
    struct sf__event_sample s;
    struct sf__cuda_stats st;
    sf_cuda_channel *ch = open_all();
    (void)state;
    ctl->not_ready_queries = -1;
    assert_int_equal(forward_and_poll(ch, 0, 1000000, 0, &s), 0);
    for (int64_t now = 1; now < SF__CUDA_MAX_LAG_STEPS; now++)
        assert_int_equal(sf__cuda_poll(ch, now, &s), 0);
    assert_int_equal(sf__cuda_poll(ch, SF__CUDA_MAX_LAG_STEPS, &s), 1);
    assert_int_equal(s.step, 0);
    assert_int_equal(s.state, SF__EVENT_MISSING);
    assert_int_equal(s.cpu_ns, 1000000);
    assert_int_equal(s.gpu_ns, 0);
    assert_int_equal(ctl->elapsed_calls, 0);
    sf__cuda_channel_stats(ch, &st);
    assert_int_equal(st.missing, 1);
    assert_int_equal(st.ready, 0);
    sf__cuda_channel_close(ch);
}

static void test_record_failure_is_missing_not_fatal(void **state)
{
    struct sf__event_sample s;
    struct sf__cuda_stats st;
    sf_cuda_channel *ch = open_all();
    (void)state;
    ctl->fail_record = 1;
    assert_int_equal(forward_and_poll(ch, 3, 1000, 3, &s), 0);
    sf__cuda_channel_stats(ch, &st);
    assert_int_equal(st.record_errors, 1);
    ctl->fail_record = 0;
    assert_int_equal(forward_and_poll(ch, 4, 1000, 4, &s), 1);
    assert_int_equal(s.state, SF__EVENT_READY);
    sf__cuda_channel_close(ch);
}

static void test_no_device(void **state)
{
    sf_cuda_channel *ch = NULL;
    (void)state;
    ctl->device_count = 0;
    assert_int_equal(sf__cuda_channel_open(1.0, &ch), -ENOTSUP);
    assert_null(ch);
    assert_int_equal(ctl->created, ctl->destroyed);
}

/* A loaded object that lacks the runtime's entry points (libc here, named
 * through the override) is unavailable, not an error and not a crash. */
static void test_missing_symbol(void **state)
{
    sf_cuda_channel *ch = NULL;
    (void)state;
    setenv("SF_CUDART_SONAME", "libc.so.6", 1);
    assert_int_equal(sf__cuda_channel_open(1.0, &ch), -ENOTSUP);
    unsetenv("SF_CUDART_SONAME");
    assert_null(ch);
    assert_int_equal(sf__cuda_channel_open(1.0, &ch), 0); /* the real double still binds */
    sf__cuda_channel_close(ch);
}

static void test_bad_arguments(void **state)
{
    sf_cuda_channel *ch = NULL;
    (void)state;
    assert_int_equal(sf__cuda_channel_open(-0.1, &ch), -EINVAL);
    assert_int_equal(sf__cuda_channel_open(1.5, &ch), -EINVAL);
    assert_int_equal(sf__cuda_channel_open(NAN, &ch), -EINVAL);
    assert_int_equal(sf__cuda_channel_open(0.5, NULL), -EINVAL);
    assert_int_equal(sf__cuda_channel_open(0.0, &ch), -ENOTSUP);
    assert_null(ch);
    /* NULL channels are inert everywhere. */
    sf__cuda_forward_begin(NULL, 1);
    sf__cuda_forward_end(NULL, 1, 1);
    assert_int_equal(sf__cuda_poll(NULL, 1, &(struct sf__event_sample){0}), 0);
    sf__cuda_channel_close(NULL);
}

/* Sampling is a function of the step alone: two channels agree, the rate is
 * near the fraction, and an unsampled step records nothing. */
static void test_deterministic_sampling(void **state)
{
    sf_cuda_channel *a = NULL, *b = NULL;
    int hits = 0, unsampled = -1;
    (void)state;
    assert_int_equal(sf__cuda_channel_open(0.25, &a), 0);
    assert_int_equal(sf__cuda_channel_open(0.25, &b), 0);
    for (int64_t t = 0; t < 20000; t++) {
        int x = sf__cuda_step_sampled(a, t);
        assert_int_equal(x, sf__cuda_step_sampled(b, t));
        hits += x;
        if (!x && unsampled < 0)
            unsampled = (int)t;
    }
    assert_in_range(hits, 4500, 5500);
    sf__cuda_forward_begin(a, unsampled);
    sf__cuda_forward_end(a, unsampled, 100);
    assert_int_equal(ctl->records, 0);
    assert_int_equal(ctl->created, ctl->destroyed); /* no pool until a sampled forward */
    sf__cuda_channel_close(a);
    sf__cuda_channel_close(b);
}

/* A fixed pool: created once, never grown; a sampled step that finds every
 * pair in flight is skipped and counted, and close releases every event. */
static void test_pool_bounded(void **state)
{
    struct sf__event_sample s;
    struct sf__cuda_stats st;
    sf_cuda_channel *ch = open_all();
    uint64_t created0 = ctl->created, destroyed0 = ctl->destroyed;
    (void)state;
    ctl->not_ready_queries = -1;
    for (int64_t t = 0; t < SF__CUDA_POOL_PAIRS + 4; t++) {
        sf__cuda_forward_begin(ch, t);
        sf__cuda_forward_end(ch, t, 10);
    }
    assert_int_equal(ctl->created - created0, 2 * SF__CUDA_POOL_PAIRS);
    sf__cuda_channel_stats(ch, &st);
    assert_int_equal(st.skipped_pool_full, 4);
    /* All overdue: each poll hands back one MISSING, oldest first. */
    for (int64_t t = 0; t < SF__CUDA_POOL_PAIRS; t++) {
        assert_int_equal(sf__cuda_poll(ch, 1000, &s), 1);
        assert_int_equal(s.step, t);
        assert_int_equal(s.state, SF__EVENT_MISSING);
    }
    assert_int_equal(sf__cuda_poll(ch, 1000, &s), 0);
    assert_int_equal(ctl->created - created0, 2 * SF__CUDA_POOL_PAIRS);
    sf__cuda_channel_close(ch);
    assert_int_equal(ctl->destroyed - destroyed0, 2 * SF__CUDA_POOL_PAIRS);
}

/* A forward that began and never ended (an exception) frees its pair. */
static void test_abandoned_begin(void **state)
{
    struct sf__event_sample s;
    sf_cuda_channel *ch = open_all();
    (void)state;
    for (int64_t t = 0; t < SF__CUDA_POOL_PAIRS; t++)
        sf__cuda_forward_begin(ch, t);
    assert_int_equal(sf__cuda_poll(ch, 100, &s), 0); /* nothing to report */
    assert_int_equal(forward_and_poll(ch, 100, 5, 100, &s), 1);
    assert_int_equal(s.step, 100);
    sf__cuda_channel_close(ch);
}

/* A child forked with a live channel must not touch the parent's CUDA state
 * when it closes its copy: no event destroyed, no handle closed. */
static void test_close_in_forked_child(void **state)
{
    sf_cuda_channel *ch = open_all();
    struct sf__event_sample s;
    int status = -1;
    pid_t pid;
    (void)state;
    assert_int_equal(forward_and_poll(ch, 1, 10, 1, &s), 1); /* the pool exists */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint64_t destroyed = ctl->destroyed;
        sf__cuda_channel_close(ch);
        _exit(ctl->destroyed == destroyed ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    uint64_t destroyed = ctl->destroyed;
    sf__cuda_channel_close(ch); /* the parent's own close does */
    assert_int_equal(ctl->destroyed - destroyed, 2 * SF__CUDA_POOL_PAIRS);
}

/* ---- no runtime in the process -------------------------------------------- */

static int count_cudart(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "cudart"))
        ++*(int *)arg;
    return 0;
}

static void test_no_library(void **state)
{
    sf_cuda_channel *ch = NULL;
    int mapped = 0;
    (void)state;
    assert_int_equal(sf__cuda_channel_open(1.0, &ch), -ENOTSUP);
    assert_null(ch);
    dl_iterate_phdr(count_cudart, &mapped);
    assert_int_equal(mapped, 0);
}

/* The override names a runtime that exists on disk but is not loaded: still
 * unavailable, still nothing mapped. */
static void test_no_library_override(void **state)
{
    sf_cuda_channel *ch = NULL;
    int mapped = 0;
    (void)state;
    setenv("SF_CUDART_SONAME", FAKE_CUDART_PATH, 1);
    assert_int_equal(sf__cuda_channel_open(1.0, &ch), -ENOTSUP);
    unsetenv("SF_CUDART_SONAME");
    dl_iterate_phdr(count_cudart, &mapped);
    assert_int_equal(mapped, 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest nolib[] = {
        cmocka_unit_test(test_no_library),
        cmocka_unit_test(test_no_library_override),
    };
    const struct CMUnitTest loaded[] = {
        cmocka_unit_test_setup(test_ready, setup),
        cmocka_unit_test_setup(test_late_then_ready, setup),
        cmocka_unit_test_setup(test_missing, setup),
        cmocka_unit_test_setup(test_record_failure_is_missing_not_fatal, setup),
        cmocka_unit_test_setup(test_no_device, setup),
        cmocka_unit_test_setup(test_missing_symbol, setup),
        cmocka_unit_test_setup(test_bad_arguments, setup),
        cmocka_unit_test_setup(test_deterministic_sampling, setup),
        cmocka_unit_test_setup(test_pool_bounded, setup),
        cmocka_unit_test_setup(test_abandoned_begin, setup),
        cmocka_unit_test_setup(test_close_in_forked_child, setup),
    };
    if (argc > 1 && strcmp(argv[1], "nolib") == 0)
        return cmocka_run_group_tests_name("cuda_events_nolib", nolib, NULL, NULL);
    return cmocka_run_group_tests_name("cuda_events", loaded, load_fake, NULL);
}

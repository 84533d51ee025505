/*
 * Allocation-failure injection over sf_client_open: the N-th malloc/calloc
 * fails, for every N until open succeeds. Each failed open must return
 * -ENOMEM and leak nothing (LeakSanitizer checks at exit). Also checks that
 * the hot path and flushing allocate nothing at all after open.
 * Linked with -Wl,--wrap=malloc,--wrap=calloc over the client objects.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <stagefrontier/client.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);

static long alloc_count;
static long fail_at = -1; /* the 1-based allocation to fail, -1: none */
static int fail_all;

static int should_fail(void)
{
    alloc_count++;
    return fail_all || alloc_count == fail_at;
}

void *__wrap_malloc(size_t size)
{
    return should_fail() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : __real_calloc(n, size);
}

static sf_client_options opts(double fraction)
{
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "alloc";
    o.socket_path = "/nonexistent-stagefrontier-test/ingest.sock";
    o.rank = 0, o.world_size = 1, o.local_rank = 0;
    o.accumulation = 3;
    o.event_sample_fraction = fraction;
    return o;
}

static void fail_each_allocation(double fraction)
{
    sf_client_options o = opts(fraction);
    long n;
    for (n = 1; n < 1000; n++) {
        sf_client *c = (sf_client *)(uintptr_t)0x1;
        alloc_count = 0;
        fail_at = n;
        int r = sf_client_open(&o, &c);
        fail_at = -1;
        if (r == 0) {
            assert_true(alloc_count < n); /* succeeded only once nothing failed */
            sf_client_close(c);
            break;
        }
        assert_int_equal(r, -ENOMEM);
        assert_ptr_equal(c, (sf_client *)(uintptr_t)0x1);
    }
    assert_true(n > 2); /* open does allocate: the loop really injected failures */
    assert_true(n < 1000);
}

static void open_fails_cleanly(void **s)
{
    (void)s;
    fail_each_allocation(0.0);
}

static void open_with_event_channel_fails_cleanly(void **s)
{
    (void)s;
    fail_each_allocation(0.5);
}

static void hot_path_never_allocates(void **s)
{
    (void)s;
    sf_client_options o = opts(0.0);
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    alloc_count = 0;
    fail_all = 1;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(sf_step_begin(c, -1), 0);
        for (int st = 0; st < 11; st++) {
            assert_int_equal(sf_stage_begin(c, st), 0);
            assert_int_equal(sf_stage_end(c, st), 0);
        }
        assert_int_equal(sf_probe_begin(c, "p"), 0);
        assert_int_equal(sf_probe_end(c, "p"), 0);
        assert_int_equal(sf_step_end(c), 0);
    }
    assert_int_equal(sf_client_flush(c), 0);
    fail_all = 0;
    assert_int_equal(alloc_count, 0);
    sf_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(open_fails_cleanly),
        cmocka_unit_test(open_with_event_channel_fails_cleanly),
        cmocka_unit_test(hot_path_never_allocates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

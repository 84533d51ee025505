/*
 * The NCCL plugin's enqueue-point slots (client/nccl/nccl_agg.c), compiled
 * from source: a point lands in its (step, stage) slot and reads back whole,
 * and a writer that finds another writer inside the slot leaves it alone
 * instead of interleaving its stores with the other's; the last
 * collective's kernel times land in its point, and move onto the monotonic
 * clock only when they are plausible.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "nccl_agg.h"
#include "stagefrontier/limits.h"

static struct sf_nccl_coll_info point(int64_t step, int32_t stage, int64_t offset)
{
    return (struct sf_nccl_coll_info){.func = "AllReduce",
                                      .datatype = "ncclFloat32",
                                      .algo = "Ring",
                                      .proto = "Simple",
                                      .count = 1024,
                                      .n_channels = 2,
                                      .stage = stage,
                                      .step = step,
                                      .enqueue_point = true,
                                      .enqueue_offset_ns = offset};
}

static void point_lands_in_its_slot(void **state)
{
    struct sf_nccl_agg *agg = *state;
    struct sf_nccl_coll_info ci = point(7, 2, 12345);
    sf__nccl_coll_start(agg, &ci);
    const struct sf_nccl_enq *e = &agg->enq[sf__nccl_enq_slot(7, 2)];
    uint64_t tag;
    int64_t off;
    assert_int_equal(sf__nccl_enq_read(e, &tag, &off), 0);
    assert_int_equal(tag, sf__nccl_enq_tag(7, 2));
    assert_int_equal(off, 12345);
    assert_int_equal(atomic_load(&e->seq), 2);
    /* The later collective of the same stage replaces it. */
    ci = point(7, 2, 23456);
    sf__nccl_coll_start(agg, &ci);
    assert_int_equal(sf__nccl_enq_read(e, &tag, &off), 0);
    assert_int_equal(off, 23456);
    assert_int_equal(atomic_load(&e->seq), 4);
}

static void a_second_writer_leaves_a_busy_slot(void **state)
{
    struct sf_nccl_agg *agg = *state;
    struct sf_nccl_enq *e = &agg->enq[sf__nccl_enq_slot(9, 2)];
    /* Another thread is inside the slot: it has claimed it (seq odd) and
     * stored its offset, not yet its tag. */
    atomic_store(&e->seq, 1);
    atomic_store(&e->offset_ns, 500);
    struct sf_nccl_coll_info ci = point(9, 2, 999);
    sf__nccl_coll_start(agg, &ci);
    assert_int_equal(atomic_load(&e->seq), 1);
    assert_int_equal(atomic_load(&e->offset_ns), 500);
    assert_int_equal(atomic_load(&e->tag), 0);
    uint64_t tag;
    int64_t off;
    assert_int_equal(sf__nccl_enq_read(e, &tag, &off), -EAGAIN);
    /* Once that writer is done, the next point writes the slot again. */
    atomic_store(&e->tag, sf__nccl_enq_tag(9, 2));
    atomic_store(&e->seq, 2);
    assert_int_equal(sf__nccl_enq_read(e, &tag, &off), 0);
    assert_int_equal(off, 500);
    sf__nccl_coll_start(agg, &ci);
    assert_int_equal(sf__nccl_enq_read(e, &tag, &off), 0);
    assert_int_equal(off, 999);
}

/* Both channels of a collective report: its kernel spans their times. */
static void run_kernel(struct sf_nccl_agg *agg, struct sf_nccl_coll *c, uint64_t t0, uint64_t t1)
{
    struct sf_nccl_kch *a = sf__nccl_kch_start(agg, c, t0 + 5);
    struct sf_nccl_kch *b = sf__nccl_kch_start(agg, c, t0);
    assert_non_null(a);
    assert_non_null(b);
    sf__nccl_kch_record_stop(a, t1);
    sf__nccl_kch_record_stop(b, t1 - 5);
    sf__nccl_kch_stop(a);
    sf__nccl_kch_stop(b);
}

static void kernel_times_land_in_the_last_point(void **state)
{
    struct sf_nccl_agg *agg = *state;
    const struct sf_nccl_enq *e = &agg->enq[sf__nccl_enq_slot(11, 2)];
    struct sf_nccl_enq_point p;
    /* The stage opened at monotonic 1 000 000; two collectives enqueued. */
    struct sf_nccl_coll_info first = point(11, 2, 1000), last = point(11, 2, 4000);
    first.enqueue_now_ns = 1001000;
    last.enqueue_now_ns = 1004000;
    struct sf_nccl_coll *c1 = sf__nccl_coll_start(agg, &first);
    struct sf_nccl_coll *c2 = sf__nccl_coll_start(agg, &last);
    assert_non_null(c1);
    assert_non_null(c2);
    assert_int_equal(sf__nccl_enq_read_point(e, &p), 0);
    assert_int_equal(p.offset_ns, 4000);
    assert_int_equal(p.base_ns, 1000000);
    assert_int_equal(p.gpu_start, 0); /* no kernel yet: absent */
    /* The first collective's kernel is not the point's: left alone. */
    run_kernel(agg, c1, 7000, 8000);
    assert_int_equal(sf__nccl_enq_read_point(e, &p), 0);
    assert_int_equal(p.gpu_start, 0);
    run_kernel(agg, c2, 9000, 12000);
    assert_int_equal(sf__nccl_enq_read_point(e, &p), 0);
    assert_int_equal(p.gpu_start, 9000);
    assert_int_equal(p.gpu_end, 12000);
    assert_int_equal(p.offset_ns, 4000);
    assert_int_equal(p.tag, sf__nccl_enq_tag(11, 2));
    /* A later collective of the stage takes the point back to no kernel. */
    struct sf_nccl_coll_info later = point(11, 2, 6000);
    later.enqueue_now_ns = 1006000;
    assert_non_null(sf__nccl_coll_start(agg, &later));
    assert_int_equal(sf__nccl_enq_read_point(e, &p), 0);
    assert_int_equal(p.offset_ns, 6000);
    assert_int_equal(p.gpu_start, 0);
    assert_int_equal(p.gpu_end, 0);
}

static void kernel_span_moves_onto_the_monotonic_clock(void **state)
{
    (void)state;
    /* Stage start 1 000 000 (monotonic), enqueued 4000 after; the GPU
     * clock reads realtime, 500 000 000 ahead of monotonic. */
    const int64_t ahead = 500000000;
    struct sf_nccl_enq_point p = {.tag = 1, .offset_ns = 4000, .base_ns = 1000000};
    struct sf_nccl_kernel_span k;
    p.gpu_start = (uint64_t)(1000000 + 3004000 + ahead); /* 3 ms after the enqueue */
    p.gpu_end = p.gpu_start + 250000;
    assert_true(sf__nccl_kernel_span(&p, ahead, 5000000, &k));
    assert_int_equal(k.start_ns, 3004000);
    assert_int_equal(k.end_ns, 3254000);
    /* No kernel times: absent. */
    struct sf_nccl_enq_point none = p;
    none.gpu_start = none.gpu_end = 0;
    assert_false(sf__nccl_kernel_span(&none, ahead, 5000000, &k));
    /* A start in the future of the flush, beyond the slack: implausible. */
    assert_false(sf__nccl_kernel_span(&p, ahead, 4004000 - SF_NCCL_KERNEL_SLACK_NS - 1, &k));
    assert_true(sf__nccl_kernel_span(&p, ahead, 4004000 - SF_NCCL_KERNEL_SLACK_NS, &k));
    /* A start before the enqueue: within the slack it reads as the enqueue,
     * beyond it the clocks disagree and nothing is shipped. */
    struct sf_nccl_enq_point early = p;
    early.gpu_start = (uint64_t)(1000000 + 4000 - 300 + ahead);
    early.gpu_end = early.gpu_start + 1000;
    assert_true(sf__nccl_kernel_span(&early, ahead, 5000000, &k));
    assert_int_equal(k.start_ns, 4000);
    assert_int_equal(k.end_ns, 4700);
    early.gpu_start = (uint64_t)(1000000 + 4000 - SF_NCCL_KERNEL_SLACK_NS - 1 + ahead);
    assert_false(sf__nccl_kernel_span(&early, ahead, 5000000, &k));
    /* An end before its start, an end past any stage's bound, a clock
     * offset that would overflow. */
    struct sf_nccl_enq_point bad = p;
    bad.gpu_end = bad.gpu_start - 1;
    assert_false(sf__nccl_kernel_span(&bad, ahead, 5000000, &k));
    bad.gpu_end = bad.gpu_start + (uint64_t)SF_MAX_DURATION_NS;
    assert_false(sf__nccl_kernel_span(&bad, ahead, 5000000, &k));
    assert_false(sf__nccl_kernel_span(&p, INT64_MIN, 5000000, &k));
}

static int setup(void **state)
{
    struct sf_nccl_agg *agg = malloc(sizeof *agg);
    if (agg == NULL)
        return -1;
    sf__nccl_agg_init(agg);
    *state = agg;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(point_lands_in_its_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(a_second_writer_leaves_a_busy_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(kernel_times_land_in_the_last_point, setup, teardown),
        cmocka_unit_test(kernel_span_moves_onto_the_monotonic_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

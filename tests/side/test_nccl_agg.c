/*
 * The NCCL plugin's enqueue-point slots (client/nccl/nccl_agg.c), compiled
 * from source: a point lands in its (step, stage) slot and reads back whole,
 * and a writer that finds another writer inside the slot leaves it alone
 * instead of interleaving its stores with the other's.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "nccl_agg.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

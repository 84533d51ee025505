/*
 * The per-job table of NCCL enqueue points (daemon/sfd/enqueue_points.c)
 * with kernel starts: a new key, a replacement, a key that gains a kernel
 * start, and the fills that hand a record its arrival and its kernel start
 * per synchronizing stage, leaving the other stages alone.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "enqueue_points.h"

/* Six recorded stages, 2 (backward) and 4 synchronizing. */
static void sync_schema(sf_schema *s)
{
    static const char *names[6] = {"data.next_wait",          "model.fwd_loss_cpu_wall",
                                   "model.backward_cpu_wall", "optim.step_cpu_wall",
                                   "callbacks.cpu_wall",      "residual"};
    assert_int_equal(sf_schema_init_sync(s, 1, 6, names, NULL, 1, 1u << 2 | 1u << 4), 0);
}

static void notes_report_new_keys_and_kernel_starts(void **state)
{
    (void)state;
    struct sfd_enq_points *p = NULL;
    /* A point without a kernel start: a new key, not timed. */
    assert_int_equal(sfd_enq_note(&p, 3, 40, 2, 1000, -1), SFD_ENQ_NEW);
    assert_non_null(p);
    /* The same point again with its kernel start: timed now. */
    assert_int_equal(sfd_enq_note(&p, 3, 40, 2, 1000, 4000), SFD_ENQ_NEWLY_TIMED);
    /* Re-shipped once more, still timed: nothing new. */
    assert_int_equal(sfd_enq_note(&p, 3, 40, 2, 1000, 4000), 0);
    /* Another stage, rank or step is another key; timed at once. */
    assert_int_equal(sfd_enq_note(&p, 3, 40, 4, 50, 60), SFD_ENQ_NEW | SFD_ENQ_NEWLY_TIMED);
    assert_int_equal(sfd_enq_note(&p, 1, 40, 2, 900, 950), SFD_ENQ_NEW | SFD_ENQ_NEWLY_TIMED);
    sfd_enq_free(p);
}

static void fills_give_each_synchronizing_stage_its_own(void **state)
{
    (void)state;
    sf_schema s;
    sync_schema(&s);
    int stage2 = sfd_enq_sync_stage(&s, "model.backward_cpu_wall");
    int stage4 = sfd_enq_sync_stage(&s, "callbacks.cpu_wall");
    assert_int_equal(stage2, 2);
    assert_int_equal(stage4, 4);
    assert_int_equal(sfd_enq_sync_stage(&s, "optim.step_cpu_wall"), -1);
    struct sfd_enq_points *p = NULL;
    assert_true(sfd_enq_note(&p, 0, 7, 2, 1000, 3500) > 0);
    assert_true(sfd_enq_note(&p, 0, 7, 4, 200, -1) > 0); /* no kernel times */
    assert_true(sfd_enq_note(&p, 1, 7, 2, 1100, 1200) > 0);
    int64_t own[6], kernel[6];
    for (int i = 0; i < 6; i++)
        own[i] = kernel[i] = -1;
    sfd_enq_fill(p, &s, 0, 7, own);
    sfd_enq_fill_kernel(p, &s, 0, 7, kernel);
    assert_int_equal(own[2], 1000);
    assert_int_equal(own[4], 200);
    assert_int_equal(kernel[2], 3500);
    assert_int_equal(kernel[4], -1);
    for (int i = 0; i < 6; i++)
        if (i != 2 && i != 4)
            assert_true(own[i] == -1 && kernel[i] == -1);
    /* Another step of that rank has none. */
    for (int i = 0; i < 6; i++)
        kernel[i] = -1;
    sfd_enq_fill_kernel(p, &s, 0, 8, kernel);
    for (int i = 0; i < 6; i++)
        assert_int_equal(kernel[i], -1);
    /* A later point of a key without kernel times clears its start. */
    assert_int_equal(sfd_enq_note(&p, 0, 7, 2, 1500, -1), 0);
    sfd_enq_fill_kernel(p, &s, 0, 7, kernel);
    assert_int_equal(kernel[2], -1);
    /* No table: nothing filled. */
    sfd_enq_fill_kernel(NULL, &s, 0, 7, kernel);
    assert_int_equal(kernel[2], -1);
    sfd_enq_free(p);
    sf_schema_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(notes_report_new_keys_and_kernel_starts),
        cmocka_unit_test(fills_give_each_synchronizing_stage_its_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The timing contract, checked on the records the client queues: residual
 * and overlap, violations (counted, returned as -EINVAL, never fatal),
 * re-entry, data waits charged ahead, ring overflow, accumulation names.
 * Sending is held off so the ring keeps every record for inspection.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <stagefrontier/client.h>
#include "client_internal.h"

static sf_client *open_quiet(uint32_t buffer, uint32_t accumulation)
{
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "contract";
    o.socket_path = "/nonexistent-stagefrontier-test/ingest.sock";
    o.rank = 0, o.world_size = 1, o.local_rank = 0;
    o.buffer_records = buffer;
    o.accumulation = accumulation;
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    c->next_send_ns = INT64_MAX; /* keep records in the ring */
    return c;
}

static const struct sf__record *rec(sf_client *c, uint32_t i, int64_t **d)
{
    assert_true(i < c->ring.count);
    return sf__ring_peek(&c->ring, i, d);
}

static uint64_t violations(const sf_client *c)
{
    sf_client_stats st;
    assert_int_equal(sf_client_get_stats(c, &st), 0);
    return st.violations;
}

/* Burns CPU until the monotonic clock moved by at least ns. */
static void spin(int64_t ns)
{
    int64_t t0 = sf__now_ns();
    while (sf__now_ns() - t0 < ns)
        ;
}

static void residual_closes_the_step(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 1);
    assert_int_equal(sf_step_begin(c, -1), 0);
    assert_int_equal(sf_stage_begin(c, 1), 0);
    spin(200000);
    assert_int_equal(sf_stage_end(c, 1), 0);
    spin(200000); /* untimed: goes to the residual */
    assert_int_equal(sf_step_end(c), 0);
    int64_t *d;
    const struct sf__record *r = rec(c, 0, &d);
    assert_int_equal(r->step, 0);
    assert_true(d[1] >= 200000);
    assert_true(d[5] >= 200000);
    assert_int_equal(d[0] + d[1] + d[2] + d[3] + d[4] + d[5], r->wall_ns);
    assert_int_equal(r->overlap_ns, 0);
    assert_int_equal(r->violations, 0);
    sf_client_close(c);
}

static void overlap_when_explicit_exceeds_wall(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 1);
    assert_int_equal(sf_step_begin(c, 7), 0);
    /* A wait charged to the open step is taken as spent inside it; one
     * longer than the step itself is the overlap error. */
    assert_int_equal(sf_charge_data_wait(c, 7, 5000000000), 0);
    assert_int_equal(sf_step_end(c), 0);
    int64_t *d;
    const struct sf__record *r = rec(c, 0, &d);
    assert_int_equal(r->step, 7);
    assert_int_equal(d[0], 5000000000);
    assert_int_equal(d[5], 0);
    assert_true(r->wall_ns < 5000000000);
    assert_int_equal(r->overlap_ns, 5000000000 - r->wall_ns);
    sf_client_close(c);
}

static void reentry_adds(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 1);
    sf_step_begin(c, -1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sf_stage_begin(c, 2), 0);
        spin(100000);
        assert_int_equal(sf_stage_end(c, 2), 0);
    }
    sf_step_end(c);
    int64_t *d;
    rec(c, 0, &d);
    assert_true(d[2] >= 300000);
    assert_int_equal(violations(c), 0);
    sf_client_close(c);
}

static void misuse_is_counted(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 1);
    assert_int_equal(sf_stage_begin(c, 0), -EINVAL); /* outside a step */
    assert_int_equal(sf_step_end(c), -EINVAL);       /* no step */
    assert_int_equal(violations(c), 2);
    assert_int_equal(sf_step_begin(c, -1), 0);
    assert_int_equal(sf_stage_begin(c, 99), -EINVAL); /* unknown id */
    assert_int_equal(sf_stage_begin(c, -1), -EINVAL);
    assert_int_equal(sf_stage_begin(c, 5), -EINVAL); /* the residual is never timed */
    assert_int_equal(sf_stage_end(c, 3), -EINVAL);   /* end without begin */
    assert_int_equal(sf_stage_begin(c, 0), 0);
    assert_int_equal(sf_stage_begin(c, 1), -EINVAL); /* nested ordered stage */
    assert_int_equal(sf_stage_end(c, 1), -EINVAL);   /* its end: not counted twice */
    assert_int_equal(sf_stage_end(c, 0), 0);
    assert_int_equal(sf_step_end(c), 0);
    assert_int_equal(violations(c), 2 + 5);
    int64_t *d;
    const struct sf__record *r = rec(c, 0, &d);
    assert_int_equal(r->violations, 5);
    assert_true(r->flags & SF__FLAG_VIOLATION);
    assert_int_equal(d[1], 0); /* the refused stage took no time */
    sf_client_close(c);
}

static void step_begin_inside_step(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 1);
    assert_int_equal(sf_step_begin(c, 10), 0);
    assert_int_equal(sf_stage_begin(c, 0), 0);
    assert_int_equal(sf_step_begin(c, 11), -EINVAL); /* step 10 closed, 11 open */
    assert_int_equal(sf_step_end(c), 0);
    assert_int_equal(c->ring.count, 2);
    int64_t *d;
    assert_int_equal(rec(c, 0, &d)->step, 10);
    assert_int_equal(rec(c, 0, &d)->violations, 1);
    assert_int_equal(rec(c, 1, &d)->step, 11);
    assert_int_equal(rec(c, 1, &d)->violations, 0);
    sf_client_stats st;
    sf_client_get_stats(c, &st);
    assert_int_equal(st.steps, 2);
    sf_client_close(c);
}

static void stage_left_open_at_step_end(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 1);
    sf_step_begin(c, -1);
    assert_int_equal(sf_stage_begin(c, 4), 0);
    spin(100000);
    assert_int_equal(sf_step_end(c), -EINVAL);
    int64_t *d;
    const struct sf__record *r = rec(c, 0, &d);
    assert_true(d[4] >= 100000);
    assert_int_equal(r->violations, 1);
    sf_client_close(c);
}

static void data_wait_charged_ahead(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 1);
    assert_int_equal(sf_charge_data_wait(c, 0, 1000), 0); /* before any step */
    sf_step_begin(c, -1);
    assert_int_equal(sf_charge_data_wait(c, 2, 3000000), 0); /* a prefetch for step 2 */
    assert_int_equal(sf_charge_data_wait(c, 2 + SF_CLIENT_DATA_LOOKAHEAD, 1), -EINVAL);
    sf_step_end(c);
    assert_int_equal(sf_charge_data_wait(c, 0, 1), -EINVAL); /* step 0 is over */
    for (int i = 0; i < 2; i++) {
        sf_step_begin(c, -1);
        sf_step_end(c);
    }
    int64_t *d;
    const struct sf__record *r0 = rec(c, 0, &d);
    assert_int_equal(d[0], 1000);
    assert_true(r0->wall_ns >= 1000);
    assert_int_equal(r0->violations, 1);
    const struct sf__record *r1 = rec(c, 1, &d);
    assert_int_equal(d[0], 0);
    assert_int_equal(r1->violations, 0);
    const struct sf__record *r2 = rec(c, 2, &d);
    assert_int_equal(r2->step, 2);
    assert_int_equal(d[0], 3000000);
    assert_true(r2->wall_ns >= 3000000); /* the wait lengthens its step */
    assert_int_equal(r2->overlap_ns, 0);
    assert_int_equal(violations(c), 2);
    sf_client_close(c);
}

static void ring_overflow_drops_counted(void **s)
{
    (void)s;
    sf_client *c = open_quiet(4, 1);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(sf_step_begin(c, -1), 0);
        assert_int_equal(sf_step_end(c), 0);
    }
    sf_client_stats st;
    sf_client_get_stats(c, &st);
    assert_int_equal(st.steps, 10);
    assert_int_equal(st.records_dropped, 6);
    assert_int_equal(c->ring.count, 4);
    assert_true(c->drop_range_valid);
    assert_int_equal(c->drop_first, 4);
    assert_int_equal(c->drop_last, 9);
    sf_client_close(c);
}

static void accumulation_expands_defaults(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 2);
    assert_int_equal(sf_stage_count(c), 9);
    assert_int_equal(sf_stage_id(c, "data.next_wait@0"), 0);
    assert_int_equal(sf_stage_id(c, "model.fwd_loss_cpu_wall@0"), 1);
    assert_int_equal(sf_stage_id(c, "model.backward_cpu_wall@1"), 5);
    assert_int_equal(sf_stage_id(c, "callbacks.cpu_wall"), 6);
    assert_int_equal(sf_stage_id(c, "step.other_cpu_wall"), 8);
    assert_int_equal(sf_stage_id(c, "data.next_wait"), -ENOENT);
    assert_string_equal(c->schema.groups[3], "data.next_wait");
    assert_string_equal(c->schema.groups[7], "optim.step_cpu_wall");
    assert_int_equal(c->schema.forward_mask, (1u << 1) | (1u << 4));
    sf_client_close(c);
}

static void probes_nest_outside_prefix(void **s)
{
    (void)s;
    sf_client *c = open_quiet(16, 1);
    sf_step_begin(c, -1);
    assert_int_equal(sf_probe_begin(c, "outer"), 0);
    assert_int_equal(sf_probe_begin(c, "inner"), 0);
    assert_int_equal(sf_stage_begin(c, 0), 0); /* probes are no ordered stage */
    assert_int_equal(sf_stage_end(c, 0), 0);
    assert_int_equal(sf_probe_end(c, "outer"), -EINVAL); /* out of order */
    assert_int_equal(sf_probe_end(c, "inner"), 0);
    assert_int_equal(sf_probe_end(c, "outer"), 0);
    assert_int_equal(sf_probe_end(c, "outer"), -EINVAL); /* none open */
    sf_step_end(c);
    assert_int_equal(violations(c), 2);
    sf_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(residual_closes_the_step),
        cmocka_unit_test(overlap_when_explicit_exceeds_wall),
        cmocka_unit_test(reentry_adds),
        cmocka_unit_test(misuse_is_counted),
        cmocka_unit_test(step_begin_inside_step),
        cmocka_unit_test(stage_left_open_at_step_end),
        cmocka_unit_test(data_wait_charged_ahead),
        cmocka_unit_test(ring_overflow_drops_counted),
        cmocka_unit_test(accumulation_expands_defaults),
        cmocka_unit_test(probes_nest_outside_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

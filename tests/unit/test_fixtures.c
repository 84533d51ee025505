/*
 * Hand-checked windows with exact expected numbers: the displacement story,
 * sync wait, co-critical and tied stages, roles, residual and transient
 * spikes, plus the window-level rules (missing ranks, incomplete steps,
 * single rank, share floor, gradient accumulation).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "matrix.h"

#define MS INT64_C(1000000)

struct fixture {
    sf_schema schema;
    struct matrix m;
    sf_gates gates;
    sf_window_meta meta;
    sf_report *report;
};

static void fixture_init(struct fixture *f, uint32_t steps, uint32_t ranks, uint32_t stages,
                         const char *const *names)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(sf_schema_init(&f->schema, 1, stages, names, NULL, 1), 0);
    f->m = matrix_new(steps, ranks, stages);
    sf_gates_default(&f->gates);
    f->meta = meta_for(ranks);
}

/* Same durations (in ms) for one rank at every step. */
static void set_rank(struct fixture *f, uint32_t rank, const int64_t *ms)
{
    for (uint32_t t = 0; t < f->m.steps; t++)
        for (uint32_t k = 0; k < f->m.stages; k++)
            cell(&f->m, t, rank)[k] = ms[k] * MS;
}

static sf_report *compute(struct fixture *f, size_t n_rows)
{
    sf_report_free(f->report);
    f->report = NULL;
    assert_int_equal(
        sf_report_from_rows(&f->schema, &f->meta, f->m.rows, n_rows, &f->gates, &f->report), 0);
    return f->report;
}

static void fixture_clear(struct fixture *f)
{
    sf_report_free(f->report);
    matrix_free(&f->m);
    sf_schema_clear(&f->schema);
}

static bool has_label(const sf_report *r, enum sf_label l)
{
    return (r->labels >> l) & 1u;
}
static bool has_reason(const sf_report *r, enum sf_downgrade d)
{
    return (r->downgrades >> d) & 1u;
}

static const char *const three[] = {"data.next_wait", "model.backward_cpu_wall",
                                    "step.other_cpu_wall"};
static const char *const four[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                   "model.backward_cpu_wall", "step.other_cpu_wall"};

/* r0 = (3,1,1), r1 = r2 = (1,1,3): the frontier charges the data stage. */
static void displacement_example(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 1, 3, 3, three);
    set_rank(&f, 0, (int64_t[]){3, 1, 1});
    set_rank(&f, 1, (int64_t[]){1, 1, 3});
    set_rank(&f, 2, (int64_t[]){1, 1, 3});
    f.gates.residual_share_max = 1;
    sf_report *r = compute(&f, 3);
    assert_int_equal(r->stages[0].advance_ns, 3 * MS);
    assert_int_equal(r->stages[1].advance_ns, 1 * MS);
    assert_int_equal(r->stages[2].advance_ns, 1 * MS);
    assert_true(r->exposed_total_ns == 5 * MS);
    assert_int_equal(r->stages[0].max_ns + r->stages[1].max_ns + r->stages[2].max_ns, 7 * MS);
    assert_int_equal(r->stages[0].mean_ns, 5 * MS / 3);
    assert_int_equal(r->stages[1].mean_ns, 1 * MS);
    assert_int_equal(r->stages[2].mean_ns, 7 * MS / 3); /* the three sum to 5 ms, less rounding */
    assert_int_equal(r->stages[0].leader_rank, 0);
    assert_int_equal(r->routing_order[0], 0);
    fixture_clear(&f);
}

/* Rank 3's slow loader appears as backward wait on every other rank: the
 * frontier routes data, while per-stage max and mean both rank backward first. */
static void sync_wait_routes_data(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 10, 4, 4, four);
    for (uint32_t r = 0; r < 3; r++)
        set_rank(&f, r, (int64_t[]){1, 1, 11, 0});
    set_rank(&f, 3, (int64_t[]){10, 1, 2, 0});
    sf_report *r = compute(&f, 40);
    assert_int_equal(r->routing_order[0], 0);
    assert_int_equal(r->stages[0].advance_ns, 100 * MS);
    assert_int_equal(r->stages[2].advance_ns, 20 * MS);
    assert_true(r->stages[2].max_ns > r->stages[0].max_ns);
    assert_true(r->stages[2].mean_ns > r->stages[0].mean_ns);
    assert_int_equal(r->stages[0].leader_rank, 3);
    assert_int_equal(r->stages[0].leader_steps, 10);
    assert_int_equal(r->n_suspects, 1);
    assert_int_equal(r->suspects[0].rank, 3);
    assert_true(fabs(r->stages[0].share - 10.0 / 13.0) < 1e-12);
    /* Clipping rank 3's data cannot remove the others' backward wait, so no
     * gain: the dominant stage is unexplained without a model, co-critical. */
    assert_int_equal(r->stages[0].gain_cohort_median_ns, 0);
    assert_int_equal(r->stages[0].gain_rank_median_ns, 0);
    assert_false(has_label(r, SF_LABEL_DIRECT_EXPOSURE));
    assert_true(has_label(r, SF_LABEL_CO_CRITICAL));
    f.gates.model_fit = true; /* with a workload model: sync-wait dependent */
    r = compute(&f, 40);
    assert_true(has_label(r, SF_LABEL_SYNC_WAIT_DEPENDENT));
    assert_true(has_label(r, SF_LABEL_LIKELY_SYNC_WAIT)); /* advance 100 > mean 32.5 */
    fixture_clear(&f);
}

/* r0 = (2,1), r1 = (1,2): no clip removes anything, so the dominant data
 * stage is unexplained and the window is co-critical in {data, backward}. */
static void two_rank_co_critical(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 5, 2, 3, three);
    set_rank(&f, 0, (int64_t[]){2, 1, 0});
    set_rank(&f, 1, (int64_t[]){1, 2, 0});
    sf_report *r = compute(&f, 10);
    assert_true(has_label(r, SF_LABEL_CO_CRITICAL));
    assert_int_equal(r->n_co_critical, 2);
    assert_int_equal(r->co_critical[0], 0);
    assert_int_equal(r->co_critical[1], 1);
    assert_false(has_label(r, SF_LABEL_DIRECT_EXPOSURE));
    assert_int_equal(r->stages[0].gain_cohort_median_ns, 0);
    fixture_clear(&f);
}

static void two_stage_tie(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 4, 3, 3, three);
    for (uint32_t rk = 0; rk < 3; rk++)
        set_rank(&f, rk, (int64_t[]){5, 5, 0});
    sf_report *r = compute(&f, 12);
    assert_true(r->stages[0].share == 0.5 && r->stages[1].share == 0.5);
    assert_int_equal(r->routing_order[0], 0); /* ties in schema order */
    assert_int_equal(r->routing_order[1], 1);
    assert_int_equal(r->n_routing, 2);
    assert_true(has_label(r, SF_LABEL_CO_CRITICAL));
    assert_int_equal(r->stages[0].leader_rank, SF_NO_RANK); /* shared maxima: no unique leader */
    fixture_clear(&f);
}

static void roles_need_role_aware_reading(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 10, 4, 4, four);
    for (uint32_t rk = 0; rk < 3; rk++)
        set_rank(&f, rk, (int64_t[]){1, 1, 11, 0});
    set_rank(&f, 3, (int64_t[]){10, 1, 2, 0});
    for (size_t i = 0; i < 40; i++)
        f.m.rows[i].role = f.m.rows[i].rank == 3 ? "generator" : "trainer";
    sf_report *r = compute(&f, 40);
    assert_true(has_label(r, SF_LABEL_ROLE_AWARE_NEEDED));
    assert_false(has_label(r, SF_LABEL_DIRECT_EXPOSURE)); /* suppressed */
    assert_string_equal(r->rank_evidence[3].role, "generator");
    fixture_clear(&f);
}

static void residual_above_gate_limits_telemetry(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 10, 2, 4, four);
    set_rank(&f, 0, (int64_t[]){5, 2, 2, 2});
    set_rank(&f, 1, (int64_t[]){1, 2, 6, 2});
    sf_report *r = compute(&f, 20);
    assert_true(fabs(r->residual_share - 40.0 / 220.0) < 1e-12);
    assert_true(has_label(r, SF_LABEL_TELEMETRY_LIMITED));
    assert_true(has_reason(r, SF_DG_RESIDUAL_SHARE));
    assert_false(has_label(r, SF_LABEL_DIRECT_EXPOSURE));
    fixture_clear(&f);
}

/* Rank 2's loader spikes on 8 of 20 steps and nobody waits for it. */
static void transient_spike_is_direct_exposure(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 20, 4, 4, four);
    for (uint32_t t = 0; t < 20; t++)
        for (uint32_t rk = 0; rk < 4; rk++) {
            int64_t *d = cell(&f.m, t, rk);
            d[0] = (rk == 2 && t % 5 < 2 ? 30 : 1) * MS;
            d[1] = 2 * MS;
            d[2] = 3 * MS;
            d[3] = MS / 10;
        }
    sf_report *r = compute(&f, 80);
    assert_int_equal(r->stages[0].gain_rank_median_ns, 8 * 29 * MS);
    assert_int_equal(r->stages[0].leader_rank, 2);
    assert_int_equal(r->stages[0].leader_steps, 8);
    assert_int_equal(r->downgrades, 0);
    assert_true(has_label(r, SF_LABEL_DIRECT_EXPOSURE));
    assert_false(has_label(r, SF_LABEL_CO_CRITICAL));
    assert_int_equal(r->routing_order[0], 0);
    fixture_clear(&f);
}

static void missing_rank_and_incomplete_step(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 3, 3, 3, three);
    set_rank(&f, 0, (int64_t[]){3, 1, 0});
    set_rank(&f, 1, (int64_t[]){1, 1, 0});
    set_rank(&f, 2, (int64_t[]){1, 1, 0});
    f.meta.world_size = 4;         /* rank 3 never reported */
    sf_report *r = compute(&f, 8); /* the last step lacks rank 2 */
    assert_int_equal(r->missing_ranks, 1);
    assert_int_equal(r->incomplete_steps, 1);
    assert_int_equal(r->steps, 2);
    assert_true(has_reason(r, SF_DG_MISSING_RANKS));
    assert_true(has_reason(r, SF_DG_INCOMPLETE_STEPS));
    assert_true(r->exposed_total_ns == 8 * MS);
    fixture_clear(&f);
}

static void single_rank_and_share_floor(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 3, 1, 3, three);
    set_rank(&f, 0, (int64_t[]){3, 1, 0});
    sf_report *r = compute(&f, 3);
    assert_true(has_reason(r, SF_DG_SINGLE_RANK));
    assert_false(has_label(r, SF_LABEL_CO_CRITICAL));
    assert_int_equal(r->stages[0].leader_rank, SF_NO_RANK);
    assert_int_equal(r->n_routing, 2); /* 75 % < tau, then backward */
    f.gates.share_floor_s = 1.0;       /* 12 ms of exposure is below a 1 s floor */
    r = compute(&f, 3);
    assert_true(has_reason(r, SF_DG_BELOW_SHARE_FLOOR));
    assert_true(isnan(r->stages[0].share) && isnan(r->stages[0].gain));
    assert_int_equal(r->n_routing, 0);
    fixture_clear(&f);
}

static void accumulation_without_microsteps_is_ambiguous(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 2, 2, 3, three);
    sf_schema_clear(&f.schema);
    assert_int_equal(sf_schema_init(&f.schema, 1, 3, three, NULL, 4), 0);
    set_rank(&f, 0, (int64_t[]){3, 1, 0});
    set_rank(&f, 1, (int64_t[]){1, 2, 0});
    sf_report *r = compute(&f, 4);
    assert_true(has_label(r, SF_LABEL_GRADIENT_ACCUMULATION_AMBIGUOUS));
    fixture_clear(&f);
    sf_schema expanded;
    assert_int_equal(sf_schema_init_default(&expanded, 2), 0);
    assert_true(expanded.microstep_indexed);
    assert_int_equal(expanded.n_stages, 9);
    assert_int_equal(expanded.n_groups, 6);
    assert_string_equal(expanded.groups[3], "data.next_wait"); /* data.next_wait@1 */
    sf_schema_clear(&expanded);
}

/* Groups aggregate after the frontier: a group's advance is the sum of its
 * members' advances, and its gain clips every member. */
static void groups_sum_members(void **state)
{
    (void)state;
    const char *names[] = {"data.next_wait@0", "model.backward_cpu_wall@0", "data.next_wait@1",
                           "model.backward_cpu_wall@1", "step.other_cpu_wall"};
    sf_schema schema;
    assert_int_equal(sf_schema_init(&schema, 1, 5, names, NULL, 2), 0);
    struct matrix m = matrix_new(7, 3, 5);
    for (uint32_t t = 0; t < 7; t++)
        for (uint32_t rk = 0; rk < 3; rk++) {
            int64_t *d = cell(&m, t, rk);
            d[0] = (rk == 1 && t % 2 ? 9 : 1) * MS;
            d[1] = 2 * MS;
            d[2] = (rk == 1 && t % 2 ? 9 : 1) * MS;
            d[3] = 2 * MS;
            d[4] = 0;
        }
    sf_gates g;
    sf_gates_default(&g);
    sf_window_meta meta = meta_for(3);
    sf_report *r = NULL;
    assert_int_equal(sf_report_from_rows(&schema, &meta, m.rows, 21, &g, &r), 0);
    assert_int_equal(schema.n_groups, 3);
    assert_int_equal(r->groups[0].advance_ns, r->stages[0].advance_ns + r->stages[2].advance_ns);
    /* Clipping both microsteps of rank 1 removes 16 ms on each of 3 slow steps. */
    assert_int_equal(r->groups[0].gain_rank_median_ns, 3 * 16 * MS);
    assert_int_equal(r->stages[0].gain_rank_median_ns, 3 * 8 * MS);
    assert_int_equal(r->routing_order[0], 0);
    sf_report_free(r);
    matrix_free(&m);
    sf_schema_clear(&schema);
}

/* Above dense_max_ranks the dense-only figures are null, never approximated,
 * and the exactness map says so. */
static void mergeable_mode_nulls_dense_only_figures(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f, 10, 4, 4, four);
    for (uint32_t rk = 0; rk < 3; rk++)
        set_rank(&f, rk, (int64_t[]){1, 1, 11, 0});
    set_rank(&f, 3, (int64_t[]){10, 1, 2, 0});
    f.gates.dense_max_ranks = 3;
    sf_report *r = compute(&f, 40);
    assert_false(r->dense);
    assert_int_equal(r->stages[0].gain_cohort_median_ns, SF_NULL_NS);
    assert_int_equal(r->n_rank_evidence, 1); /* only the rank that led */
    assert_int_equal(r->rank_evidence[0].rank, 3);
    assert_null(r->rank_evidence[0].role);
    assert_int_equal(r->rank_evidence[0].mean_slack_ns, SF_NULL_NS);
    assert_false(sf_report_field_exact(r, "gain_cohort_median_s"));
    assert_true(sf_report_field_exact(r, "advance_s"));
    assert_int_equal(r->stages[0].advance_ns, 100 * MS); /* the frontier itself is exact */
    f.gates.dense_max_ranks = 4;
    r = compute(&f, 40);
    assert_true(r->dense && sf_report_field_exact(r, "gain_cohort_median_s"));
    assert_int_equal(r->n_rank_evidence, 4);
    assert_int_equal(r->rank_evidence[0].mean_slack_ns, 9 * MS / 2); /* (9 + 9 + 0 + 0) / 4 */
    fixture_clear(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(displacement_example),
        cmocka_unit_test(sync_wait_routes_data),
        cmocka_unit_test(two_rank_co_critical),
        cmocka_unit_test(two_stage_tie),
        cmocka_unit_test(roles_need_role_aware_reading),
        cmocka_unit_test(residual_above_gate_limits_telemetry),
        cmocka_unit_test(transient_spike_is_direct_exposure),
        cmocka_unit_test(missing_rank_and_incomplete_step),
        cmocka_unit_test(single_rank_and_share_floor),
        cmocka_unit_test(accumulation_without_microsteps_is_ambiguous),
        cmocka_unit_test(groups_sum_members),
        cmocka_unit_test(mergeable_mode_nulls_dense_only_figures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

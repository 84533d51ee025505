/*
 * The picture models (daemon/report/picture.c) on small windows whose
 * answers are known by hand: lead counts and their bins, slack folded to
 * the smallest, the ledger's advances summing to the step, the leaders, and
 * the window series' union of stage names.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "picture.h"

#define R 4
#define T 3
#define S 3

/* Rank 2 waits 5 ms longer for data in every step; rank 1 is 2 ms slower
 * in stage 1 of step 1 only. Stage durations in ms. */
static int64_t d[T][R][S];
static sf_row rows[T * R];

struct window {
    sf_schema schema;
    sf_summary *summary;
    sf_report *report;
};

static void make_window(struct window *w)
{
    static const char *const names[S] = {"data", "compute", "residual"};
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++) {
            d[t][r][0] = (r == 2 ? 6 : 1) * 1000000;
            d[t][r][1] = (10 + (t == 1 && r == 1 ? 9 : 0)) * 1000000;
            d[t][r][2] = 100000;
            rows[t * R + r] = (sf_row){.step = t, .rank = (uint32_t)r, .d = d[t][r]};
        }
    assert_int_equal(sf_schema_init(&w->schema, 1, S, names, NULL, 1), 0);
    sf_gates g;
    sf_gates_default(&g);
    sf_window_meta meta = {.index = 0, .first_step = 0, .last_step = T - 1, .world_size = R};
    assert_int_equal(sf_summary_build(&w->schema, &meta, rows, T * R, true, &w->summary), 0);
    assert_int_equal(sf_report_compute(w->summary, &g, &w->report), 0);
}

static void free_window(struct window *w)
{
    sf_report_free(w->report);
    sf_summary_free(w->summary);
    sf_schema_clear(&w->schema);
}

static double cell(const sf_heatmap *h, uint32_t row, uint32_t stage)
{
    return h->value[(size_t)row * h->n_stages + stage];
}

static void test_leads(void **state)
{
    (void)state;
    struct window w;
    make_window(&w);
    sf_heatmap *h;
    assert_int_equal(sf_heatmap_build(w.summary, w.report, NULL, rows, T * R, SF_HEAT_LEADS, 0, &h),
                     0);
    assert_int_equal(h->n_rows, R);
    assert_int_equal(h->ranks_per_row, 1);
    /* Rank 2 leads the data boundary in all steps and compute in steps 0
     * and 2 (6 + 10 > 1 + 19 is false in step 1: rank 1 reaches 20 there). */
    assert_true(cell(h, 2, 0) == 3);
    assert_true(cell(h, 2, 1) == 2);
    assert_true(cell(h, 1, 1) == 1);
    assert_true(cell(h, 0, 0) == 0);
    assert_int_equal(h->hot_row, 2);
    assert_int_equal(h->hot_stage, 0);
    assert_true(h->heat[2 * S + 0] == 1.0);
    sf_heatmap_free(h);
    /* Two rows of two ranks: bins sum their ranks' leads. */
    assert_int_equal(sf_heatmap_build(w.summary, w.report, NULL, rows, T * R, SF_HEAT_LEADS, 2, &h),
                     0);
    assert_int_equal(h->n_rows, 2);
    assert_int_equal(h->ranks_per_row, 2);
    assert_int_equal(h->row_first[1], 2);
    assert_int_equal(h->row_last[1], 3);
    assert_true(cell(h, 1, 0) == 3);
    assert_true(cell(h, 0, 1) == 1);
    assert_true(cell(h, 1, 1) == 2);
    sf_heatmap_free(h);
    free_window(&w);
}

static void test_slack(void **state)
{
    (void)state;
    struct window w;
    make_window(&w);
    sf_heatmap *h;
    assert_int_equal(sf_heatmap_build(w.summary, w.report, NULL, rows, T * R, SF_HEAT_SLACK, 2, &h),
                     0);
    /* Data boundary: frontier 6 ms; ranks 0, 1, 3 are 5 ms behind, rank 2
     * on it. The bin of ranks 2-3 shows the smallest, 0. */
    assert_true(fabs(cell(h, 0, 0) - 0.005) < 1e-12);
    assert_true(cell(h, 1, 0) == 0);
    /* Hottest is the least slack: ranks 2-3 at the data boundary. */
    assert_int_equal(h->hot_row, 1);
    assert_int_equal(h->hot_stage, 0);
    sf_heatmap_free(h);
    /* change needs a baseline. */
    assert_int_equal(
        sf_heatmap_build(w.summary, w.report, NULL, rows, T * R, SF_HEAT_CHANGE, 0, &h), -ENOENT);
    free_window(&w);
}

static void test_ledger(void **state)
{
    (void)state;
    struct window w;
    make_window(&w);
    sf_ledger *l;
    assert_int_equal(sf_ledger_build(w.summary, w.report, &l), 0);
    assert_int_equal(l->n_steps, T);
    for (uint32_t i = 0; i < T; i++) {
        int64_t sum = 0;
        for (uint32_t k = 0; k < S; k++)
            sum += l->advance[i * S + k];
        assert_int_equal(sum, w.summary->steps[i].prefix_top2[S - 1].v1);
    }
    assert_int_equal(l->advance[0 * S + 0], 6000000);
    assert_int_equal(l->advance[1 * S + 1], 14000000); /* rank 1 reaches 20 ms */
    assert_int_equal(l->leader[1 * S + 1], 1);
    assert_int_equal(l->leader[0 * S + 0], 2);
    assert_int_equal(l->max_step_ns, 20100000);
    sf_ledger_free(l);
    free_window(&w);
}

static void test_series(void **state)
{
    (void)state;
    struct window w;
    make_window(&w);
    sf_window_series s = {0};
    assert_int_equal(sf_window_series_add(&s, w.report), 0);
    assert_int_equal(sf_window_series_add(&s, w.report), 0);
    assert_int_equal(s.n_points, 2);
    assert_int_equal(s.n_stages, S);
    double total = 0;
    for (uint32_t k = 0; k < S; k++)
        total += s.points[1].share[k];
    assert_true(fabs(total - 1) < 1e-12);
    assert_false(s.points[0].changed);
    assert_true(isnan(s.points[0].slowdown));
    json_t *j;
    assert_int_equal(sf_window_series_to_json(&s, &j), 0);
    assert_int_equal(json_array_size(json_object_get(j, "windows")), 2);
    json_decref(j);
    sf_window_series_clear(&s);
    free_window(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leads),
        cmocka_unit_test(test_slack),
        cmocka_unit_test(test_ledger),
        cmocka_unit_test(test_series),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

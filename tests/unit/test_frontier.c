/*
 * Properties of the frontier accounting on random matrices: telescoping,
 * the max/mean bounds (Propositions 1 and 2) and their tightness, the slack
 * identity, and stability under bounded measurement error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "matrix.h"

static sf_summary *summarize(struct matrix *m, const sf_schema *schema)
{
    sf_window_meta meta = meta_for(m->ranks);
    sf_summary *s = NULL;
    assert_int_equal(
        sf_summary_build(schema, &meta, m->rows, (size_t)m->steps * m->ranks, true, &s), 0);
    return s;
}

static sf_report *report_of(struct matrix *m, const sf_schema *schema)
{
    sf_gates g;
    sf_gates_default(&g);
    sf_window_meta meta = meta_for(m->ranks);
    sf_report *r = NULL;
    assert_int_equal(
        sf_report_from_rows(schema, &meta, m->rows, (size_t)m->steps * m->ranks, &g, &r), 0);
    return r;
}

/* The test's own reference: the largest prefix over ranks at boundary s. */
static int64_t reference_frontier(struct matrix *m, uint32_t t, uint32_t s)
{
    int64_t best = INT64_MIN;
    for (uint32_t r = 0; r < m->ranks; r++) {
        int64_t p = 0;
        for (uint32_t k = 0; k <= s; k++)
            p += cell(m, t, r)[k];
        if (p > best)
            best = p;
    }
    return best;
}

static void telescoping_is_exact(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t st = seed;
        uint32_t stages = 1 + (uint32_t)rand_below(&st, SF_MAX_STAGES);
        uint32_t ranks = 1 + (uint32_t)rand_below(&st, 48);
        uint32_t steps = 1 + (uint32_t)rand_below(&st, 30);
        /* Half the seeds run at the step bound, half with small values and ties. */
        int64_t max = seed % 2 ? SF_MAX_STEP_NS / stages : 7;
        struct matrix m = matrix_random(seed * 7919, steps, ranks, stages, max);
        sf_schema schema;
        numbered_schema(&schema, stages);
        sf_summary *s = summarize(&m, &schema);
        for (uint32_t t = 0; t < steps; t++) {
            int64_t sum = 0, prev = 0;
            for (uint32_t k = 0; k < stages; k++) {
                int64_t f = s->steps[t].prefix_top2[k].v1;
                assert_int_equal(f, reference_frontier(&m, t, k));
                assert_true(f - prev >= 0);
                sum += f - prev;
                prev = f;
            }
            assert_int_equal(sum, s->steps[t].prefix_top2[stages - 1].v1);
        }
        sf_report *r = report_of(&m, &schema);
        assert_int_equal(r->telescoping_max_abs_err_ns, 0);
        __int128 adv = 0;
        for (uint32_t k = 0; k < stages; k++)
            adv += r->stages[k].advance_ns;
        assert_true(adv == r->exposed_total_ns);
        sf_report_free(r);
        sf_summary_free(s);
        sf_schema_clear(&schema);
        matrix_free(&m);
    }
}

/* Exact window sums of the per-stage max and of n times the mean. */
static void comparison_sums(struct matrix *m, const sf_schema *schema, __int128 *ret_exposed,
                            __int128 *ret_max, __int128 *ret_n_mean)
{
    sf_summary *s = summarize(m, schema);
    *ret_exposed = *ret_max = *ret_n_mean = 0;
    for (uint32_t t = 0; t < s->n_steps; t++) {
        *ret_exposed += s->steps[t].prefix_top2[m->stages - 1].v1;
        for (uint32_t k = 0; k < m->stages; k++) {
            *ret_max += s->steps[t].dmax[k];
            *ret_n_mean += s->steps[t].dsum[k];
        }
    }
    sf_summary_free(s);
}

static void max_overcounts_mean_undercounts(void **state)
{
    (void)state;
    for (uint64_t seed = 100; seed < 140; seed++) {
        uint64_t st = seed;
        uint32_t stages = 1 + (uint32_t)rand_below(&st, 12),
                 ranks = 1 + (uint32_t)rand_below(&st, 20);
        struct matrix m = matrix_random(seed, 10, ranks, stages, seed % 3 ? 1000000 : 3);
        sf_schema schema;
        numbered_schema(&schema, stages);
        __int128 e, mx, nmean;
        comparison_sums(&m, &schema, &e, &mx, &nmean);
        uint32_t bound = ranks < stages ? ranks : stages;
        assert_true(e <= mx && mx <= (__int128)bound * e);       /* Proposition 1 */
        assert_true(e <= nmean && nmean <= (__int128)ranks * e); /* Proposition 2, times n */
        sf_report *r = report_of(&m, &schema);
        __int128 reported = 0; /* each reported mean is its exact sum over n, toward zero */
        for (uint32_t k = 0; k < stages; k++)
            reported += r->stages[k].mean_ns;
        assert_true(reported * ranks <= nmean && nmean < (reported + stages) * ranks);
        sf_report_free(r);
        sf_schema_clear(&schema);
        matrix_free(&m);
    }
}

/* Rank r spends D in stage r and nothing elsewhere: the per-stage max sums
 * to min(n,S) times the exposed time. One rank does all the work: the mean
 * sums to exposed / n. Identical ranks reach both upper/lower ends. */
static void bounds_are_tight(void **state)
{
    (void)state;
    const int64_t D = 1000000;
    sf_schema schema;
    numbered_schema(&schema, 3);
    struct matrix m = matrix_new(1, 3, 3);
    for (uint32_t r = 0; r < 3; r++)
        cell(&m, 0, r)[r] = D;
    __int128 e, mx, nmean;
    comparison_sums(&m, &schema, &e, &mx, &nmean);
    assert_true(e == D && mx == 3 * e);
    memset(m.d, 0, 9 * sizeof *m.d);
    cell(&m, 0, 0)[0] = D;
    comparison_sums(&m, &schema, &e, &mx, &nmean);
    assert_true(e == D && nmean == e); /* mean sum = E / n */
    for (uint32_t r = 0; r < 3; r++)
        for (uint32_t k = 0; k < 3; k++)
            cell(&m, 0, r)[k] = D;
    comparison_sums(&m, &schema, &e, &mx, &nmean);
    assert_true(mx == e && nmean == 3 * e); /* max sum = E, mean sum = E */
    matrix_free(&m);
    sf_schema_clear(&schema);
}

static void slack_identity_holds(void **state)
{
    (void)state;
    for (uint64_t seed = 200; seed < 230; seed++) {
        struct matrix m =
            matrix_random(seed, 6, 1 + (uint32_t)(seed % 9), 5, seed % 2 ? 50 : 1000000);
        sf_schema schema;
        numbered_schema(&schema, 5);
        sf_summary *s = summarize(&m, &schema);
        for (uint32_t t = 0; t < m.steps; t++)
            for (uint32_t k = 0; k < 5; k++) {
                int64_t f_prev = k ? s->steps[t].prefix_top2[k - 1].v1 : 0;
                int64_t a = s->steps[t].prefix_top2[k].v1 - f_prev, best = INT64_MIN;
                for (uint32_t r = 0; r < m.ranks; r++) {
                    int64_t p_prev = 0;
                    for (uint32_t j = 0; j < k; j++)
                        p_prev += cell(&m, t, r)[j];
                    int64_t slack = f_prev - p_prev; /* sigma[t,r,k-1] >= 0 */
                    assert_true(slack >= 0);
                    if (cell(&m, t, r)[k] - slack > best)
                        best = cell(&m, t, r)[k] - slack;
                }
                assert_int_equal(a, best);
            }
        sf_summary_free(s);
        sf_schema_clear(&schema);
        matrix_free(&m);
    }
}

static void bounded_error_moves_frontier_boundedly(void **state)
{
    (void)state;
    const int64_t eps = 500;
    for (uint64_t seed = 300; seed < 330; seed++) {
        uint32_t S = 6;
        struct matrix m = matrix_random(seed, 8, 7, S, 100000);
        struct matrix p = matrix_new(8, 7, S);
        uint64_t st = seed;
        for (size_t i = 0; i < (size_t)8 * 7 * S; i++) {
            int64_t v = m.d[i] + rand_below(&st, 2 * eps + 1) - eps;
            p.d[i] = v < 0 ? 0 : v;
        }
        sf_schema schema;
        numbered_schema(&schema, S);
        sf_summary *a = summarize(&m, &schema), *b = summarize(&p, &schema);
        for (uint32_t t = 0; t < 8; t++)
            for (uint32_t k = 0; k < S; k++) {
                int64_t fa = a->steps[t].prefix_top2[k].v1, fb = b->steps[t].prefix_top2[k].v1;
                int64_t pa = k ? a->steps[t].prefix_top2[k - 1].v1 : 0;
                int64_t pb = k ? b->steps[t].prefix_top2[k - 1].v1 : 0;
                assert_true(llabs(fa - fb) <= (int64_t)S * eps);
                assert_true(llabs((fa - pa) - (fb - pb)) <= 2 * (int64_t)S * eps);
            }
        sf_summary_free(a);
        sf_summary_free(b);
        sf_schema_clear(&schema);
        matrix_free(&m);
        matrix_free(&p);
    }
}

static void median_follows_the_design(void **state)
{
    (void)state;
    int64_t odd[] = {5, 1, 3};
    assert_int_equal(sf_median_i64(odd, 3), 3);
    int64_t even[] = {4, 1, 2, 9};
    assert_int_equal(sf_median_i64(even, 4), 3); /* 2 + (4 - 2) / 2 */
    int64_t toward_zero[] = {1, 2};
    assert_int_equal(sf_median_i64(toward_zero, 2), 1); /* 1 + 1/2 rounds toward zero */
    int64_t big[] = {INT64_MAX - 1, INT64_MAX};
    assert_int_equal(sf_median_i64(big, 2), INT64_MAX - 1); /* no overflow */
    uint64_t st = 9;
    int64_t v[1001], sorted[1001];
    for (int i = 0; i < 1001; i++)
        v[i] = rand_below(&st, 50);
    memcpy(sorted, v, sizeof v);
    for (int i = 1; i < 1001; i++) /* insertion sort as an independent reference */
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int64_t x = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = x;
        }
    assert_int_equal(sf_median_i64(v, 1001), sorted[500]);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Shapes that defeat naive pivots or partitions: sorted, reversed, organ
 * pipe, all equal, two values, sawtooth and seeded random. */
static int64_t shaped_value(int shape, size_t i, size_t n, uint64_t *st)
{
    switch (shape) {
    case 0:
        return (int64_t)i;
    case 1:
        return (int64_t)(n - i);
    case 2:
        return (int64_t)(i < n / 2 ? i : n - i);
    case 3:
        return 7;
    case 4:
        return (int64_t)(i % 2);
    case 5:
        return (int64_t)(i % 17);
    default:
        return (int64_t)rand_below(st, 1000000) - 500000;
    }
}

/* The selection behind every median: for each shape and every size up to
 * 300 (plus a few large ones), the median equals the one read off a sort. */
static void median_matches_a_sort_on_every_shape(void **state)
{
    (void)state;
    enum { MAX_N = 5000 };
    static int64_t v[MAX_N], sorted[MAX_N];
    static const size_t large[] = {1000, 1023, 4096, MAX_N};
    uint64_t st = 42;
    for (int shape = 0; shape < 7; shape++)
        for (size_t n = 1; n <= 300 + sizeof large / sizeof large[0]; n++) {
            size_t len = n <= 300 ? n : large[n - 301];
            for (size_t i = 0; i < len; i++)
                v[i] = sorted[i] = shaped_value(shape, i, len, &st);
            qsort(sorted, len, sizeof *sorted, cmp_i64);
            int64_t lo = sorted[(len - 1) / 2], hi = sorted[len / 2];
            assert_int_equal(sf_median_i64(v, len), lo + (hi - lo) / 2);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(telescoping_is_exact),
        cmocka_unit_test(max_overcounts_mean_undercounts),
        cmocka_unit_test(bounds_are_tight),
        cmocka_unit_test(slack_identity_holds),
        cmocka_unit_test(bounded_error_moves_frontier_boundedly),
        cmocka_unit_test(median_follows_the_design),
        cmocka_unit_test(median_matches_a_sort_on_every_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The change against a reference and the what-if (docs/CHANGE.md): the
 * shift estimator on fixtures with exact numbers, the false-alarm rate over
 * seeded resamplings of a clean window, power on a known shift, mergeable
 * nulls, the own-work contrasts and their route under machine load, the
 * sync floor against late arrivals, and the clipped and sync what-ifs on
 * exact fixtures.
 */
#define _GNU_SOURCE /* open_memstream */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stagefrontier/change.h>

#include "change_json.h"
#include "matrix.h"

/* ---- the estimator ------------------------------------------------------ */

static void shift_small_fixture(void **state)
{
    (void)state;
    /* y - x: 1 2 3 3 4 5; U = 6, sigma^2 = 3, no ties */
    int64_t x[] = {3, 1, 2}, y[] = {6, 4};
    sf_shift s;
    assert_int_equal(sf_shift_estimate(x, 3, y, 2, 0.01, &s), 0);
    assert_int_equal(s.delta_ns, 3);
    assert_int_equal(s.ci_low_ns, 1); /* the interval covers every difference */
    assert_int_equal(s.ci_high_ns, 5);
    assert_true(fabs(s.p_value - erfc(2.5 / sqrt(3.0) / M_SQRT2)) < 1e-12);
    assert_int_equal(x[0], 3); /* inputs untouched */
}

static void shift_interval_fixture(void **state)
{
    (void)state;
    /* x = 0..9, y = 5..14: differences 5 + (j - i), 10 - |d| of each;
     * ties at 5..9 (five pairs of two). */
    int64_t x[10], y[10];
    for (int i = 0; i < 10; i++) {
        x[i] = i;
        y[i] = 5 + i;
    }
    sf_shift s;
    assert_int_equal(sf_shift_estimate(x, 10, y, 10, 0.05, &s), 0);
    assert_int_equal(s.delta_ns, 5);
    /* k = floor(50 - 1.96 sigma) = 24: the 24th and 77th differences */
    assert_int_equal(s.ci_low_ns, 2);
    assert_int_equal(s.ci_high_ns, 8);
    double var = 100.0 / 12 * (21 - 30.0 / (20 * 19));
    assert_true(fabs(s.p_value - erfc(37 / sqrt(var) / M_SQRT2)) < 1e-12);
    /* the reverse shift mirrors it */
    assert_int_equal(sf_shift_estimate(y, 10, x, 10, 0.05, &s), 0);
    assert_int_equal(s.delta_ns, -5);
    assert_int_equal(s.ci_low_ns, -8);
    assert_int_equal(s.ci_high_ns, -2);
}

static void shift_rejects_bad_input(void **state)
{
    (void)state;
    int64_t x[] = {1};
    sf_shift s;
    assert_int_equal(sf_shift_estimate(x, 0, x, 1, 0.01, &s), -EINVAL);
    assert_int_equal(sf_shift_estimate(x, 1, x, 1, 0, &s), -EINVAL);
    assert_int_equal(sf_shift_estimate(x, 1, x, 1, 1, &s), -EINVAL);
    assert_int_equal(sf_shift_estimate(x, 1, x, 1, 0.01, &s), 0);
    assert_int_equal(s.delta_ns, 0);
    assert_true(s.p_value == 1);
}

static void signed_rank_fixture(void **state)
{
    (void)state;
    /* 0 dropped; |z| 1 2 2 3: ranks 1, 2.5, 2.5, 4; W+ = 1 + 2.5 + 4 = 7.5
     * (z = -2 is the only negative); n = 4, mean 5, variance 4 x 5 x 9 / 24
     * minus the tie (2^3 - 2) / 48. */
    int64_t z[] = {3, -2, 0, 1, 2};
    double p;
    assert_int_equal(sf_signed_rank_p(z, 5, &p), 0);
    double var = 4.0 * 5 * 9 / 24 - 6.0 / 48;
    assert_true(fabs(p - erfc(2.0 / sqrt(var) / M_SQRT2)) < 1e-12);
    assert_int_equal(z[2], 0); /* input untouched */
    int64_t zero[] = {0, 0};
    assert_int_equal(sf_signed_rank_p(zero, 2, &p), 0);
    assert_true(p == 1);
    assert_int_equal(sf_signed_rank_p(NULL, 2, &p), -EINVAL);
}

/* ---- windows of a job ---------------------------------------------------- */

#define RANKS 4
#define STAGES 6
#define WSTEPS 100

/* A clean step of one rank: stage k near 10 ms * (k + 1) with jitter. */
static void clean_step(uint64_t *st, int64_t *d)
{
    for (uint32_t k = 0; k < STAGES; k++)
        d[k] = 10000000 * (int64_t)(k + 1) + rand_below(st, 2000000);
}

static struct matrix clean_matrix(uint64_t seed, uint32_t steps)
{
    struct matrix m = matrix_new(steps, RANKS, STAGES);
    uint64_t st = seed;
    for (uint32_t t = 0; t < steps; t++)
        for (uint32_t r = 0; r < RANKS; r++)
            clean_step(&st, cell(&m, t, r));
    return m;
}

static sf_summary *window_summary(const sf_schema *schema, struct matrix *m, uint32_t first,
                                  int64_t index, bool dense)
{
    sf_window_meta meta = {
        .index = index, .first_step = 0, .last_step = SF_MAX_WINDOW_STEPS - 1, .world_size = RANKS};
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(schema, &meta, &m->rows[(size_t)first * RANKS],
                                      (size_t)WSTEPS * RANKS, dense, &s),
                     0);
    return s;
}

static sf_reference *reference_of(const sf_schema *schema, struct matrix *m, bool dense)
{
    sf_summary *w[3];
    for (int j = 0; j < 3; j++)
        w[j] = window_summary(schema, m, (uint32_t)j * WSTEPS, j, dense);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)w, 3, &ref), 0);
    for (int j = 0; j < 3; j++)
        sf_summary_free(w[j]);
    return ref;
}

/* A window of WSTEPS steps drawn with replacement from the clean steps. */
static void resample(struct matrix *src, struct matrix *dst, uint64_t seed)
{
    uint64_t st = seed;
    for (uint32_t t = 0; t < WSTEPS; t++) {
        uint32_t from = (uint32_t)rand_below(&st, src->steps);
        memcpy(cell(dst, t, 0), cell(src, from, 0), sizeof(int64_t) * RANKS * STAGES);
    }
}

static void reference_is_compact(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, STAGES);
    struct matrix m = clean_matrix(7, 3 * WSTEPS);
    sf_reference *ref = reference_of(&schema, &m, true);
    assert_int_equal(ref->n_windows, 3);
    assert_int_equal(ref->windows[2], 2);
    assert_int_equal(ref->n_steps, 3 * WSTEPS);
    assert_int_equal(ref->n_ranks, RANKS);
    /* the first step's advances telescope to its frontier */
    int64_t sum = 0, best = 0;
    for (uint32_t k = 0; k < STAGES; k++)
        sum += ref->advance[k];
    for (uint32_t r = 0; r < RANKS; r++) {
        int64_t p = 0;
        for (uint32_t k = 0; k < STAGES; k++)
            p += cell(&m, 0, r)[k];
        best = p > best ? p : best;
    }
    assert_int_equal(sum, best);
    /* rank 2, stage 3: the median of its 300 durations */
    int64_t v[3 * WSTEPS];
    for (uint32_t t = 0; t < 3 * WSTEPS; t++)
        v[t] = cell(&m, t, 2)[3];
    assert_int_equal(ref->median_ns[2 * STAGES + 3], sf_median_i64(v, 3 * WSTEPS));
    /* step 7, stage 4: the shortest duration over the ranks */
    int64_t least = INT64_MAX;
    for (uint32_t r = 0; r < RANKS; r++)
        least = cell(&m, 7, r)[4] < least ? cell(&m, 7, r)[4] : least;
    assert_int_equal(ref->min_ns[7 * STAGES + 4], least);
    const char *why;
    assert_int_equal(sf_reference_check(ref, &schema, RANKS + 1, &why), -EINVAL);
    assert_string_equal(why, "the baseline has another world size");
    sf_schema other;
    numbered_schema(&other, STAGES - 1);
    assert_int_equal(sf_reference_check(ref, &other, RANKS, &why), -EINVAL);
    assert_string_equal(why, "the baseline has another schema");
    sf_reference_free(ref);
    matrix_free(&m);
    sf_schema_clear(&schema);
    sf_schema_clear(&other);
}

static void clean_windows_rarely_flagged(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, STAGES);
    sf_gates g;
    sf_gates_default(&g);
    sf_gates raw = g;
    raw.change_min_frac = 0; /* the rank test alone */
    struct matrix m = clean_matrix(11, 3 * WSTEPS), win = matrix_new(WSTEPS, RANKS, STAGES);
    sf_reference *ref = reference_of(&schema, &m, true);
    uint32_t flagged = 0, stage_hits = 0, trials = 1000;
    for (uint64_t seed = 1; seed <= trials; seed++) {
        resample(&m, &win, seed);
        sf_summary *s = window_summary(&schema, &win, 0, 5, true);
        sf_change *c = NULL, *c_raw = NULL;
        assert_int_equal(sf_change_compute(ref, s, &g, &c), 0);
        assert_int_equal(sf_change_compute(ref, s, &raw, &c_raw), 0);
        flagged += c->n_route > 0;
        stage_hits += c_raw->stages[2].significant;
        sf_change_free(c);
        sf_change_free(c_raw);
        sf_summary_free(s);
    }
    print_message("clean: %u flagged, %u raw stage hits of %u\n", flagged, stage_hits, trials);
    /* at most alpha of clean windows, and the rank test alone keeps its level */
    assert_true(flagged <= (uint32_t)(g.change_alpha * trials));
    assert_true(stage_hits <= (uint32_t)(g.change_alpha * trials));
    sf_reference_free(ref);
    matrix_free(&m);
    matrix_free(&win);
    sf_schema_clear(&schema);
}

/* A one-rank slowdown of frac of the clean step in one stage. */
static void inject(struct matrix *m, uint32_t rank, uint32_t stage, double frac)
{
    int64_t step = 0;
    for (uint32_t k = 0; k < STAGES; k++)
        step += 10000000 * (int64_t)(k + 1);
    for (uint32_t t = 0; t < m->steps; t++)
        cell(m, t, rank)[stage] += (int64_t)(frac * (double)step);
}

static void power_on_known_shift(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, STAGES);
    sf_gates g;
    sf_gates_default(&g);
    struct matrix m = clean_matrix(3, 3 * WSTEPS), win = matrix_new(WSTEPS, RANKS, STAGES);
    sf_reference *ref = reference_of(&schema, &m, true);
    uint32_t routed = 0, named = 0, trials = 50;
    for (uint64_t seed = 1; seed <= trials; seed++) {
        resample(&m, &win, seed * 7919);
        inject(&win, 3, 1, 0.05);
        sf_summary *s = window_summary(&schema, &win, 0, 9, true);
        sf_change *c = NULL;
        assert_int_equal(sf_change_compute(ref, s, &g, &c), 0);
        routed += c->n_route > 0 && c->route[0] == 1;
        named += c->n_suspects > 0 && c->suspects[0].rank == 3;
        assert_true(c->suspects_dense);
        assert_true(c->slowdown > 1.0);
        assert_true(c->stages[1].shift.ci_low_ns <= c->stages[1].shift.delta_ns);
        assert_true(c->stages[1].shift.delta_ns <= c->stages[1].shift.ci_high_ns);
        sf_change_free(c);
        sf_summary_free(s);
    }
    assert_true(routed >= trials * 95 / 100);
    assert_true(named >= trials * 95 / 100);
    sf_reference_free(ref);
    matrix_free(&m);
    matrix_free(&win);
    sf_schema_clear(&schema);
}

static void mergeable_mode_nulls(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, STAGES);
    sf_gates g;
    sf_gates_default(&g);
    struct matrix m = clean_matrix(5, 3 * WSTEPS), win = matrix_new(WSTEPS, RANKS, STAGES);
    sf_reference *ref = reference_of(&schema, &m, false);
    assert_null(ref->median_ns);
    assert_null(ref->lead_steps);
    assert_int_equal(ref->n_ranks, 0);
    resample(&m, &win, 99);
    inject(&win, 2, 4, 0.25);
    sf_summary *s = window_summary(&schema, &win, 0, 4, false);
    sf_change *c = NULL;
    assert_int_equal(sf_change_compute(ref, s, &g, &c), 0);
    assert_true(c->n_route > 0);
    assert_int_equal(c->route[0], 4);
    assert_false(c->suspects_dense);
    assert_true(c->n_suspects >= 1 && c->n_suspects <= 2);
    assert_int_equal(c->suspects[0].rank, 2); /* it leads boundary 4 every step */
    for (uint32_t i = 0; i < c->n_suspects; i++)
        assert_true(c->suspects[i].delta_ns == SF_NULL_NS);
    sf_whatif *wi = NULL;
    assert_int_equal(sf_whatif_compute(s, ref, c, &wi), -ENOTSUP);
    sf_change_free(c);
    sf_summary_free(s);
    sf_reference_free(ref);
    matrix_free(&m);
    matrix_free(&win);
    sf_schema_clear(&schema);
}

/* ---- the what-if ----------------------------------------------------------- */

static sf_summary *two_rank_summary(const sf_schema *schema, const int64_t (*d)[2][2],
                                    uint32_t steps, int64_t index)
{
    sf_row rows[8];
    for (uint32_t t = 0; t < steps; t++)
        for (uint32_t r = 0; r < 2; r++)
            rows[t * 2 + r] = (sf_row){.step = t, .rank = r, .d = d[t][r]};
    sf_window_meta meta = {.index = index, .last_step = 100, .world_size = 2};
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(schema, &meta, rows, steps * 2, true, &s), 0);
    return s;
}

static void whatif_fixture(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, 2);
    static const int64_t clean[3][2][2] = {
        {{10, 10}, {10, 10}}, {{10, 10}, {10, 10}}, {{10, 10}, {10, 10}}};
    /* rank 1 is 20 ns slow in stage 0; no one waits for it */
    static const int64_t slow[2][2][2] = {{{10, 10}, {30, 10}}, {{10, 10}, {30, 10}}};
    sf_summary *rs = two_rank_summary(&schema, clean, 3, 0);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)&rs, 1, &ref), 0);
    sf_summary *s = two_rank_summary(&schema, slow, 2, 1);
    sf_change route = {.n_stages = 2, .n_route = 1, .route = {0}};
    sf_whatif *w = NULL;
    assert_int_equal(sf_whatif_compute(s, ref, &route, &w), 0);
    assert_int_equal(w->basis, SF_WHATIF_REFERENCE);
    assert_true(w->lower_bound);
    assert_true(w->exposed_ns == 80 && w->ideal_ns == 40);
    assert_true(w->slowdown == 2.0);
    assert_true(fabs(w->waste_rank_s - 0.5 * 2 * 80e-9) < 1e-18);
    assert_int_equal(w->n_ranks, 1); /* rank 0 saves nothing */
    assert_int_equal(w->ranks[0].rank, 1);
    assert_int_equal(w->ranks[0].saved_ns, 40);
    assert_true(w->ranks[0].slowdown == 2.0);
    assert_int_equal(w->n_cells, 1);
    assert_int_equal(w->cells[0].rank, 1);
    assert_int_equal(w->cells[0].stage, 0);
    assert_int_equal(w->cells[0].saved_ns, 40);
    sf_whatif_free(w);
    /* no reference: each step's cohort median, lo + (hi - lo) / 2 = 20 */
    assert_int_equal(sf_whatif_compute(s, NULL, NULL, &w), 0);
    assert_int_equal(w->basis, SF_WHATIF_COHORT);
    assert_int_equal(w->n_ranks, 1);
    assert_int_equal(w->ranks[0].saved_ns, 20);
    assert_true(w->ideal_ns == 60);
    assert_int_equal(w->n_cells, 0);
    sf_whatif_free(w);
    sf_summary_free(s);
    sf_summary_free(rs);
    sf_reference_free(ref);
    sf_schema_clear(&schema);
}

static void whatif_without_arrival_points_is_a_lower_bound(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, 2);
    static const int64_t clean[1][2][2] = {{{10, 10}, {10, 10}}};
    /* rank 1 is slow in stage 0 and rank 0 waits for it inside stage 1 */
    static const int64_t synced[1][2][2] = {{{10, 30}, {30, 10}}};
    sf_summary *rs = two_rank_summary(&schema, clean, 1, 0);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)&rs, 1, &ref), 0);
    sf_summary *s = two_rank_summary(&schema, synced, 1, 1);
    sf_whatif *w = NULL;
    assert_int_equal(sf_whatif_compute(s, ref, NULL, &w), 0);
    /* clipping rank 1 alone keeps rank 0's wait: nothing saved, a lower bound */
    assert_int_equal(w->n_ranks, 0);
    /* every rank at its reference: the ideal step is 20 */
    assert_true(w->ideal_ns == 20);
    assert_true(w->slowdown == 2.0);
    sf_whatif_free(w);
    sf_summary_free(s);
    sf_summary_free(rs);
    sf_reference_free(ref);
    sf_schema_clear(&schema);
}

/* ---- the sync what-if -------------------------------------------------------- */

enum { SR = 3, SS = 4 }; /* s0, s0.sync_wait, s1, s2 (residual) */

static sf_summary *sync_summary(const sf_schema *schema, const int64_t (*d)[SR][SS],
                                const uint32_t (*flags)[SR], uint32_t steps, int64_t index)
{
    sf_row rows[4 * SR];
    for (uint32_t t = 0; t < steps; t++)
        for (uint32_t r = 0; r < SR; r++)
            rows[t * SR + r] =
                (sf_row){.step = t, .rank = r, .flags = flags ? flags[t][r] : 0, .d = d[t][r]};
    sf_window_meta meta = {.index = index, .last_step = 100, .world_size = SR};
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(schema, &meta, rows, steps * SR, true, &s), 0);
    return s;
}

/* Every rank: 10 ns of own work in s0, no wait, then 5 and 1. */
static const int64_t sync_clean[1][SR][SS] = {{{10, 0, 5, 1}, {10, 0, 5, 1}, {10, 0, 5, 1}}};

/* Step 0: rank 2 arrives 20 ns late at s0's sync point; ranks 0 and 1 wait
 * 22 ns, rank 2 2 ns (the collective itself after the last arrival): every
 * rank ends at 38. Step 1: rank 1 arrives 10 ns late, the others wait 10;
 * every rank ends at 26. Exposed: 38 + 26 = 64. */
static const int64_t sync_late[2][SR][SS] = {{{10, 22, 5, 1}, {10, 22, 5, 1}, {30, 2, 5, 1}},
                                             {{10, 10, 5, 1}, {20, 0, 5, 1}, {10, 10, 5, 1}}};

static sf_reference *sync_reference(const sf_schema *schema)
{
    sf_summary *rs = sync_summary(schema, sync_clean, NULL, 1, 0);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)&rs, 1, &ref), 0);
    sf_summary_free(rs);
    return ref;
}

/* The reference's contrasts, exactly: s0 is the only own-work stage. Step 0
 * s0 = 10 10 30: contrasts -10 -10 +20 (the others' median of two is their
 * midpoint); step 1 10 20 10: -5 +10 -5. Medians over the two steps:
 * -10 + 5/2 = -8, -10 + 20/2 = 0, -5 + 25/2 = 7 (integer, rounding down
 * the half difference like every median of the core). */
static void reference_contrasts_fixture(void **state)
{
    (void)state;
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    assert_true(sf_change_own_work_stage(&schema, 0));
    for (uint32_t k = 1; k < SS; k++)
        assert_false(sf_change_own_work_stage(&schema, k)); /* wait, then the tail */
    sf_summary *s = sync_summary(&schema, sync_late, NULL, 2, 0);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)&s, 1, &ref), 0);
    assert_non_null(ref->contrast_ns);
    int64_t want[SR] = {-8, 0, 7};
    for (uint32_t r = 0; r < SR; r++) {
        assert_int_equal(ref->contrast_ns[r * SS + 0], want[r]);
        for (uint32_t k = 1; k < SS; k++)
            assert_true(ref->contrast_ns[r * SS + k] == SF_NULL_NS);
    }
    sf_reference_free(ref);
    sf_summary_free(s);
    sf_schema_clear(&schema);
}

/* The median of the others, found in large rows from a bracketing sample
 * and otherwise by selection among all, gives exactly the contrasts of a
 * plain median per rank and step: heavy ties, a wide spread, a sorted row, a
 * row whose sample misses the middle (64 evenly spaced ranks far above the
 * rest), and the medians over the steps. */
enum { BIG_R = 301, BIG_T = 5 };

static int64_t others_median(const int64_t *v, uint32_t n, uint32_t x, int64_t *scratch)
{
    uint32_t c = 0;
    for (uint32_t y = 0; y < n; y++)
        if (y != x)
            scratch[c++] = v[y];
    return sf_median_i64(scratch, c);
}

static void reference_contrasts_large_rows(void **state)
{
    (void)state;
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    int64_t(*d)[BIG_R][SS] = calloc(BIG_T, sizeof *d);
    sf_row *rows = calloc((size_t)BIG_T * BIG_R, sizeof *rows);
    int64_t *scratch = calloc(BIG_R, sizeof *scratch), *z = calloc(BIG_T * BIG_R, sizeof *z);
    assert_true(d && rows && scratch && z);
    uint64_t st = 13;
    for (uint32_t r = 0; r < BIG_R; r++) {
        d[0][r][0] = 100 + rand_below(&st, 4);
        d[1][r][0] = rand_below(&st, 1000000000);
        d[2][r][0] = 1000 + r;
        d[3][r][0] = r;
        d[4][r][0] = 5000 + rand_below(&st, 50);
    }
    for (uint32_t i = 0; i < 64; i++)
        d[3][i * BIG_R / 64][0] = 1000000 + i; /* 64 evenly spaced ranks */
    for (uint32_t t = 0; t < BIG_T; t++)
        for (uint32_t r = 0; r < BIG_R; r++)
            rows[t * BIG_R + r] = (sf_row){.step = t, .rank = r, .d = d[t][r]};
    sf_window_meta meta = {.index = 0, .last_step = 100, .world_size = BIG_R};
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&schema, &meta, rows, (size_t)BIG_T * BIG_R, true, &s), 0);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)&s, 1, &ref), 0);
    assert_non_null(ref->contrast_ns);
    for (uint32_t t = 0; t < BIG_T; t++) {
        int64_t v[BIG_R];
        for (uint32_t r = 0; r < BIG_R; r++)
            v[r] = d[t][r][0];
        for (uint32_t r = 0; r < BIG_R; r++)
            z[r * BIG_T + t] = v[r] - others_median(v, BIG_R, r, scratch);
    }
    for (uint32_t r = 0; r < BIG_R; r++)
        assert_int_equal(ref->contrast_ns[r * SS + 0], sf_median_i64(&z[r * BIG_T], BIG_T));
    sf_reference_free(ref);
    sf_summary_free(s);
    free(d);
    free(rows);
    free(scratch);
    free(z);
    sf_schema_clear(&schema);
}

/* A synchronizing job of RANKS ranks: own work s0 near 10 ms, the wait up to
 * the last arrival plus a 1 ms collective, then s1 near 5 ms and a 1 ms
 * residual. load scales every duration (a machine that got slower for all);
 * rank `late` gets `extra` ns more own work in s0. */
static struct matrix sync_matrix(uint64_t seed, uint32_t steps, int64_t load_pct, uint32_t late,
                                 int64_t extra)
{
    struct matrix m = matrix_new(steps, RANKS, SS);
    uint64_t st = seed;
    for (uint32_t t = 0; t < steps; t++) {
        int64_t last = 0;
        for (uint32_t r = 0; r < RANKS; r++) {
            int64_t *d = cell(&m, t, r);
            d[0] = (10000000 + rand_below(&st, 4000000)) * load_pct / 100 + (r == late) * extra;
            d[2] = (5000000 + rand_below(&st, 2000000)) * load_pct / 100;
            d[3] = 1000000 * load_pct / 100;
            last = d[0] > last ? d[0] : last;
        }
        for (uint32_t r = 0; r < RANKS; r++)
            cell(&m, t, r)[1] = last - cell(&m, t, r)[0] + 1000000 * load_pct / 100;
    }
    return m;
}

/* The change of window 9, the first WSTEPS steps of win, at the default gates. */
static sf_change *window_change(const sf_schema *schema, const sf_reference *ref,
                                struct matrix *win)
{
    sf_gates g;
    sf_gates_default(&g);
    sf_summary *s = window_summary(schema, win, 0, 9, true);
    sf_change *c = NULL;
    assert_int_equal(sf_change_compute(ref, s, &g, &c), 0);
    sf_summary_free(s);
    return c;
}

static sf_change *sync_change(const sf_schema *schema, sf_reference *ref, int64_t load_pct,
                              uint32_t late, int64_t extra, uint64_t seed)
{
    struct matrix win = sync_matrix(seed, WSTEPS, load_pct, late, extra);
    sf_change *c = window_change(schema, ref, &win);
    matrix_free(&win);
    return c;
}

/* The reference of three clean synchronizing windows. */
static sf_reference *sync_baseline(const sf_schema *schema, uint64_t seed)
{
    struct matrix base = sync_matrix(seed, 3 * WSTEPS, 100, RANKS, 0);
    sf_summary *w[3];
    for (int j = 0; j < 3; j++)
        w[j] = window_summary(schema, &base, (uint32_t)j * WSTEPS, j, true);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)w, 3, &ref), 0);
    for (int j = 0; j < 3; j++)
        sf_summary_free(w[j]);
    matrix_free(&base);
    return ref;
}

/* The machine is 30 % slower in the window than in the baseline, for every
 * rank and stage. A clean window: every frontier advance shifted, but no
 * stage's share of the step and no rank's own work against the others', so
 * (at most one window in twenty) nothing is routed. With
 * 1.5 ms (about a tenth of the step) more own work on rank 2, the own-work
 * test of s0 routes it first, rank 2 first suspect, and the group-visible
 * shifts of its sync segment (the wait) are its effect, not routed. */
static void own_work_route_under_load(void **state)
{
    (void)state;
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    sf_reference *ref = sync_baseline(&schema, 5);
    uint32_t clean_flagged = 0, routed = 0, named = 0, trials = 20;
    for (uint64_t seed = 1; seed <= trials; seed++) {
        sf_change *c = sync_change(&schema, ref, 130, RANKS, 0, seed * 104729);
        /* the large advances moved by the load, but no stage's share of the step
         * and no rank's own work against the others' */
        assert_true(c->stages[0].shift.delta_ns >= c->min_effect_ns);
        assert_true(c->stages[2].shift.delta_ns >= c->min_effect_ns);
        assert_true(c->slowdown > 1.2);
        clean_flagged += c->n_route > 0;
        sf_change_free(c);
        c = sync_change(&schema, ref, 130, 2, 1500000, seed * 104729);
        routed += c->n_route > 0 && c->route[0] == 0 && c->stages[0].own_significant &&
                  c->stages[0].own_rank == 2;
        named += c->n_suspects > 0 && c->suspects[0].rank == 2;
        for (uint32_t i = 1; i < c->n_route; i++)
            assert_true(c->route[i] > 1); /* s0.sync_wait is s0's effect */
        sf_change_free(c);
    }
    assert_true(clean_flagged <= trials / 20);
    assert_true(routed >= trials * 95 / 100);
    assert_true(named >= trials * 95 / 100);
    sf_reference_free(ref);
    sf_schema_clear(&schema);
}

/* Every rank's own work in s0 grows by 3 ms: s0's share of the step moves
 * (routed by the frontier), no rank's contrast does (no own-work change).
 * The suspects at an own-work stage are scored by their contrast shifts:
 * each listed delta is exactly the median over the window of the rank's
 * contrast (its s0 minus the median of the others') less its reference
 * contrast, computed here the plain way. */
static void frontier_routed_own_work_stage_scores_contrasts(void **state)
{
    (void)state;
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    sf_reference *ref = sync_baseline(&schema, 7);
    struct matrix win = sync_matrix(8, WSTEPS, 100, RANKS, 0);
    for (uint32_t t = 0; t < WSTEPS; t++)
        for (uint32_t r = 0; r < RANKS; r++)
            cell(&win, t, r)[0] += 3000000; /* the waits stay: every arrival moved alike */
    sf_summary *s = window_summary(&schema, &win, 0, 9, true);
    sf_gates g;
    sf_gates_default(&g);
    sf_change *c = NULL;
    assert_int_equal(sf_change_compute(ref, s, &g, &c), 0);
    assert_int_equal(c->n_route, 1);
    assert_int_equal(c->route[0], 0);
    assert_false(c->stages[0].own_significant);
    int64_t want[RANKS], z[WSTEPS], v[RANKS];
    uint32_t positive = 0;
    for (uint32_t r = 0; r < RANKS; r++) {
        for (uint32_t t = 0; t < WSTEPS; t++) {
            uint32_t n = 0;
            for (uint32_t y = 0; y < RANKS; y++)
                if (y != r)
                    v[n++] = cell(&win, t, y)[0];
            z[t] = cell(&win, t, r)[0] - sf_median_i64(v, n) - ref->contrast_ns[r * SS + 0];
        }
        want[r] = sf_median_i64(z, WSTEPS);
        positive += want[r] > 0;
    }
    assert_true(positive > 0);
    assert_int_equal(c->n_suspects,
                     positive < g.suspect_ranks_max ? positive : g.suspect_ranks_max);
    for (uint32_t i = 0; i < c->n_suspects; i++) {
        assert_int_equal(c->suspects[i].delta_ns, want[c->suspects[i].rank]);
        if (i > 0)
            assert_true(c->suspects[i].delta_ns <= c->suspects[i - 1].delta_ns);
    }
    for (uint32_t r = 0; r < RANKS; r++)
        assert_true(want[r] <= c->suspects[0].delta_ns);
    sf_change_free(c);
    sf_summary_free(s);
    sf_reference_free(ref);
    matrix_free(&win);
    sf_schema_clear(&schema);
}

enum { RESAMPLES = 1000 };

/* Resamples the clean job `base` of 3 x WSTEPS steps RESAMPLES times into one
 * window each, against the reference of its first three windows: *flagged
 * counts the windows with a route at the default gates, *hits those where
 * `hit` finds a significant rank test without the minimum effect. */
static void resampled_clean_windows(const sf_schema *schema, struct matrix *base,
                                    bool (*hit)(const sf_change *), uint32_t *flagged,
                                    uint32_t *hits)
{
    sf_gates g, raw;
    sf_gates_default(&g);
    raw = g;
    raw.change_min_frac = 0; /* the rank tests alone */
    struct matrix win = matrix_new(WSTEPS, RANKS, SS);
    sf_reference *ref = reference_of(schema, base, true);
    uint64_t st = 17;
    *flagged = *hits = 0;
    for (uint32_t trial = 0; trial < RESAMPLES; trial++) {
        for (uint32_t t = 0; t < WSTEPS; t++)
            memcpy(cell(&win, t, 0), cell(base, (uint32_t)rand_below(&st, base->steps), 0),
                   sizeof(int64_t) * RANKS * SS);
        sf_summary *s = window_summary(schema, &win, 0, 5, true);
        sf_change *c = NULL, *c_raw = NULL;
        assert_int_equal(sf_change_compute(ref, s, &g, &c), 0);
        assert_int_equal(sf_change_compute(ref, s, &raw, &c_raw), 0);
        *flagged += c->n_route > 0;
        *hits += hit(c_raw);
        sf_change_free(c);
        sf_change_free(c_raw);
        sf_summary_free(s);
    }
    sf_reference_free(ref);
    matrix_free(&win);
}

/* The resamplings of the clean synchronizing job `base` (freed here): the
 * whole route flags at most alpha of them, and so does the rank test that
 * `hit` reads, alone. */
static void clean_windows_keep_the_level(struct matrix base, bool (*hit)(const sf_change *),
                                         const char *what)
{
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    sf_gates g;
    sf_gates_default(&g);
    uint32_t flagged, hits;
    resampled_clean_windows(&schema, &base, hit, &flagged, &hits);
    print_message("%s: %u flagged, %u hits of %u\n", what, flagged, hits, RESAMPLES);
    assert_true(flagged <= (uint32_t)(g.change_alpha * RESAMPLES));
    assert_true(hits <= (uint32_t)(g.change_alpha * RESAMPLES));
    matrix_free(&base);
    sf_schema_clear(&schema);
}

static bool own_work_hit(const sf_change *c)
{
    return c->stages[0].own_significant;
}

/* 1,000 resamplings of a clean synchronizing window: the whole route (the
 * share tests and the per-rank own-work family together) flags at most
 * alpha of them, and the own-work family alone keeps its level. */
static void own_work_clean_windows_rarely_flagged(void **state)
{
    (void)state;
    clean_windows_keep_the_level(sync_matrix(13, 3 * WSTEPS, 100, RANKS, 0), own_work_hit,
                                 "clean sync, own-work");
}

static void whatif_sync_recomputes_waits(void **state)
{
    (void)state;
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    sf_reference *ref = sync_reference(&schema);
    sf_summary *s = sync_summary(&schema, sync_late, NULL, 2, 1);
    sf_change route = {.n_stages = SS, .n_route = 2, .route = {0, 1}};
    sf_whatif *w = NULL;
    assert_int_equal(sf_whatif_compute(s, ref, &route, &w), 0);
    assert_false(w->lower_bound); /* the sync model */
    /* Segments: own work up to the arrival (s0), then the tail (s1 + s2).
     * Step 0: s0 arrivals 10, 10, 30: the ranks leave at 30 (+2). Rank 2 at
     * its reference 10 makes every rank arrive at 10: the tail is unchanged,
     * so step 0 saves 30 - 10 = 20. Ranks 0 and 1 save nothing: rank 2's 30
     * still holds the departure. Step 1: arrivals 10, 20, 10; rank 1 at 10
     * saves 10. Saved: rank 2 20, rank 1 10, rank 0 0. */
    assert_true(w->exposed_ns == 64);
    assert_int_equal(w->n_ranks, 2);
    assert_int_equal(w->ranks[0].rank, 2);
    assert_int_equal(w->ranks[0].saved_ns, 20);
    assert_true(w->ranks[0].slowdown == 64.0 / 44.0); /* S_2 = 64 / (64 - 20) */
    assert_int_equal(w->ranks[1].rank, 1);
    assert_int_equal(w->ranks[1].saved_ns, 10);
    assert_true(w->ranks[1].slowdown == 64.0 / 54.0); /* S_1 = 64 / (64 - 10) */
    /* Every rank at its reference: step 0 modelled 30 + 6 = 36 becomes
     * 10 + 6 = 16, so 38 - 20 = 18 (the collective's 2 ns stays); step 1
     * 26 - 10 = 16. Ideal 34, S = 64 / 34, waste = (1 - 34/64) x 3 x 64 ns
     * = 90 ns. */
    assert_true(w->ideal_ns == 34);
    assert_true(w->slowdown == 64.0 / 34.0);
    assert_true(fabs(w->waste_rank_s - 90e-9) < 1e-18);
    /* Route cells: s0 alone is the same as the rank (20 and 10); the wait is
     * derived from the arrivals, never replaced, so it gives no cell. */
    assert_int_equal(w->n_cells, 2);
    assert_int_equal(w->cells[0].rank, 2);
    assert_int_equal(w->cells[0].stage, 0);
    assert_int_equal(w->cells[0].saved_ns, 20);
    assert_int_equal(w->cells[1].rank, 1);
    assert_int_equal(w->cells[1].stage, 0);
    assert_int_equal(w->cells[1].saved_ns, 10);
    sf_whatif_free(w);
    sf_summary_free(s);
    sf_reference_free(ref);
    sf_schema_clear(&schema);
}

/* The same durations under a schema without arrival points: the waits are
 * ordinary stages that the clipped model keeps on the ranks not replaced. */
static void whatif_sync_beats_clipped_lower_bound(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, SS);
    sf_reference *ref = sync_reference(&schema);
    sf_summary *s = sync_summary(&schema, sync_late, NULL, 2, 1);
    sf_whatif *w = NULL;
    assert_int_equal(sf_whatif_compute(s, ref, NULL, &w), 0);
    assert_true(w->lower_bound); /* clipped */
    /* Step 0: rank 2 clipped ends at 10 + 0 + 5 + 1 = 16, but ranks 0 and 1
     * keep their 22 ns wait and end at 38: nothing saved; likewise rank 1 in
     * step 1 (16 against 26). The sync model saves 20 and 10 here. */
    assert_int_equal(w->n_ranks, 0);
    /* Every rank clipped (the waits to their reference 0): 16 + 16. */
    assert_true(w->ideal_ns == 32);
    assert_true(w->slowdown == 2.0);
    sf_whatif_free(w);
    sf_summary_free(s);
    sf_reference_free(ref);
    sf_schema_clear(&schema);
}

/* One row without its arrival mark sends the whole window to the clipped
 * model: the row reports all of s0 as own work and no wait. */
static void whatif_missing_arrival_falls_back_to_clipped(void **state)
{
    (void)state;
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    sf_reference *ref = sync_reference(&schema);
    static const int64_t unmarked[2][SR][SS] = {{{10, 22, 5, 1}, {10, 22, 5, 1}, {32, 0, 5, 1}},
                                                {{10, 10, 5, 1}, {20, 0, 5, 1}, {10, 10, 5, 1}}};
    static const uint32_t flags[2][SR] = {{0, 0, SF_ROW_ARRIVAL_MISSING}, {0, 0, 0}};
    sf_summary *s = sync_summary(&schema, unmarked, flags, 2, 1);
    sf_whatif *w = NULL;
    assert_int_equal(sf_whatif_compute(s, ref, NULL, &w), 0);
    assert_true(w->lower_bound);
    /* Clipped: step 0 rank 2 ends at 16 against 38, step 1 rank 1 at 16
     * against 26: nothing saved (the sync model would save 22 and 10). */
    assert_int_equal(w->n_ranks, 0);
    assert_true(w->exposed_ns == 64 && w->ideal_ns == 32);
    sf_whatif_free(w);
    sf_summary_free(s);
    sf_reference_free(ref);
    sf_schema_clear(&schema);
}

/* Without a reference: the basis is each step's cohort median. Step 0's s0
 * medians 10 (of 10, 10, 30): rank 2 saves 20; step 1's 10 (of 10, 20, 10):
 * rank 1 saves 10. The tail's median is the tail itself. */
static void whatif_sync_cohort_basis(void **state)
{
    (void)state;
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    sf_summary *s = sync_summary(&schema, sync_late, NULL, 2, 1);
    sf_whatif *w = NULL;
    assert_int_equal(sf_whatif_compute(s, NULL, NULL, &w), 0);
    assert_int_equal(w->basis, SF_WHATIF_COHORT);
    assert_false(w->lower_bound);
    assert_int_equal(w->n_ranks, 2);
    assert_int_equal(w->ranks[0].rank, 2);
    assert_int_equal(w->ranks[0].saved_ns, 20);
    assert_int_equal(w->ranks[1].rank, 1);
    assert_int_equal(w->ranks[1].saved_ns, 10);
    assert_true(w->ideal_ns == 34);
    sf_whatif_free(w);
    sf_summary_free(s);
    sf_schema_clear(&schema);
}

/* ---- the sync floor ----------------------------------------------------------- */

/* A synchronizing job whose ranks start each step up to 20 ms apart (the
 * previous step's tail differs per rank): own work s0 near 10 ms, then the
 * wait for the last arrival and a collective of `collective` ns plus up to
 * 0.5 ms that every rank sees, s1 near 5 ms, a 1 ms residual. Every
 * duration but the collective is scaled by pct / 100 (the machine got
 * faster or slower for all of the ranks' own work). Rank `late` does
 * `extra` ns more own work. The frontier advance at the sync point carries
 * the start offsets; the last arrival's wait is the collective alone. */
static struct matrix scaled_staggered_matrix(uint64_t seed, uint32_t steps, int64_t collective,
                                             int64_t pct, uint32_t late, int64_t extra)
{
    struct matrix m = matrix_new(steps, RANKS, SS);
    uint64_t st = seed;
    for (uint32_t t = 0; t < steps; t++) {
        int64_t arrive[RANKS], last = 0, c = collective + rand_below(&st, 500000);
        for (uint32_t r = 0; r < RANKS; r++) {
            int64_t *d = cell(&m, t, r);
            d[0] = (10000000 + rand_below(&st, 4000000)) * pct / 100 + (r == late) * extra;
            d[2] = (5000000 + rand_below(&st, 2000000)) * pct / 100;
            d[3] = 1000000 * pct / 100;
            arrive[r] = rand_below(&st, 20000000) * pct / 100 + d[0];
            last = arrive[r] > last ? arrive[r] : last;
        }
        for (uint32_t r = 0; r < RANKS; r++)
            cell(&m, t, r)[1] = last - arrive[r] + c;
    }
    return m;
}

static struct matrix staggered_matrix(uint64_t seed, uint32_t steps, int64_t collective,
                                      uint32_t late, int64_t extra)
{
    return scaled_staggered_matrix(seed, steps, collective, 100, late, extra);
}

static sf_reference *staggered_baseline(const sf_schema *schema, uint64_t seed)
{
    struct matrix base = staggered_matrix(seed, 3 * WSTEPS, 1000000, RANKS, 0);
    sf_reference *ref = reference_of(schema, &base, true);
    matrix_free(&base);
    return ref;
}

/* The window's and the reference's last-arrival waits at s0.sync_wait. */
static void floors_of(struct matrix *m, const sf_reference *ref, int64_t *y, int64_t *x)
{
    for (uint32_t t = 0; t < WSTEPS; t++) {
        y[t] = INT64_MAX;
        for (uint32_t r = 0; r < RANKS; r++)
            y[t] = cell(m, t, r)[1] < y[t] ? cell(m, t, r)[1] : y[t];
    }
    for (uint32_t t = 0; t < ref->n_steps; t++)
        x[t] = ref->min_ns[(size_t)t * SS + 1];
}

/* The human view of window 9's change (the first WSTEPS steps of win). */
static char *human_change(const sf_schema *schema, const sf_reference *ref, struct matrix *win)
{
    sf_gates g;
    sf_gates_default(&g);
    sf_summary *s = window_summary(schema, win, 0, 9, true);
    sf_report *r = NULL;
    assert_int_equal(sf_report_compute(s, &g, &r), 0);
    assert_int_equal(sf_report_attach_change(r, s, NULL, ref), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    sf_change_write_text(r, f);
    fclose(f);
    sf_report_free(r);
    sf_summary_free(s);
    return text;
}

/* The collective takes 0.8 ms longer once every rank has arrived (a slower
 * link, or a rank held up after its arrival mark): a little over the
 * minimum effect. The frontier's advance at the sync point moves by as
 * much, but the ranks' staggered starts blur it: in this window its share
 * test misses (p 0.07). The last arrival's wait moves by that and nothing
 * else. The floor test routes s0.sync_wait first, with the shift
 * sf_shift_estimate gives on the floors themselves, and the human view
 * says so without naming a rank; a reference without floors (a recording
 * from before them) finds nothing. */
static void sync_floor_routes_a_slower_collective(void **state)
{
    (void)state;
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    sf_reference *ref = staggered_baseline(&schema, 21);
    struct matrix win = staggered_matrix(39, WSTEPS, 1800000, RANKS, 0);
    sf_change *c = window_change(&schema, ref, &win);
    assert_true(c->stages[1].floor_tested && c->stages[1].floor_significant);
    assert_true(c->n_route > 0 && c->route[0] == 1);
    for (uint32_t k = 0; k < SS; k++)
        if (k != 1)
            assert_true(!c->stages[k].floor_tested && isnan(c->stages[k].floor_share_p_value));
    int64_t y[WSTEPS], x[3 * WSTEPS];
    floors_of(&win, ref, y, x);
    sf_shift want;
    sf_gates g;
    sf_gates_default(&g);
    assert_int_equal(sf_shift_estimate(x, ref->n_steps, y, WSTEPS, g.change_alpha, &want), 0);
    assert_int_equal(c->stages[1].floor.delta_ns, want.delta_ns);
    assert_int_equal(c->stages[1].floor.ci_low_ns, want.ci_low_ns);
    assert_int_equal(c->stages[1].floor.ci_high_ns, want.ci_high_ns);
    assert_true(want.ci_low_ns <= 800000 && 800000 <= want.ci_high_ns);
    sf_change_free(c);
    char *text = human_change(&schema, ref, &win);
    assert_non_null(strstr(text, "first appears in s0.sync_wait, the last arrival's wait"));
    assert_null(strstr(text, ", rank ")); /* no suspect is named for it */
    free(text);
    free(ref->min_ns);
    ref->min_ns = NULL;
    assert_int_equal(sf_reference_finish(ref), 0);
    c = window_change(&schema, ref, &win);
    for (uint32_t k = 0; k < SS; k++)
        assert_false(c->stages[k].floor_tested);
    for (uint32_t i = 0; i < c->n_route; i++)
        assert_true(c->route[i] != 1);
    sf_change_free(c);
    sf_reference_free(ref);
    matrix_free(&win);
    sf_schema_clear(&schema);
}

/* The change of window win (freed) against the staggered baseline of
 * seed base_seed. */
static sf_change *staggered_change(uint64_t base_seed, struct matrix win)
{
    sf_schema schema;
    synchronizing_schema(&schema, SS);
    sf_reference *ref = staggered_baseline(&schema, base_seed);
    sf_change *c = window_change(&schema, ref, &win);
    sf_reference_free(ref);
    matrix_free(&win);
    sf_schema_clear(&schema);
    return c;
}

/* Rank 2 arrives 3 ms late: every other rank waits longer and the frontier
 * moves, but the last arrival's wait is still the collective. The floor
 * stays below the minimum effect; the late rank's own work is routed. */
static void sync_floor_ignores_a_late_arrival(void **state)
{
    (void)state;
    sf_change *c = staggered_change(23, staggered_matrix(24, WSTEPS, 1000000, 2, 3000000));
    assert_true(c->stages[1].floor_tested);
    assert_false(c->stages[1].floor_significant);
    assert_true(llabs(c->stages[1].floor.delta_ns) < c->min_effect_ns);
    assert_true(c->n_route > 0 && c->route[0] == 0 && c->stages[0].own_rank == 2);
    sf_change_free(c);
}

/* The job got 40 % faster everywhere but in the collective, which takes
 * 0.5 ms longer once every rank has arrived: less than the minimum effect
 * in time, so a rule on the time alone would miss it, although the
 * collective's share of the step more than doubled. Measured on the share,
 * at the reference's step, the change is over 1 ms and is routed. */
static void share_effect_sees_through_a_faster_job(void **state)
{
    (void)state;
    sf_change *c = staggered_change(21, scaled_staggered_matrix(41, WSTEPS, 1500000, 60, RANKS, 0));
    const sf_stage_change *st = &c->stages[1];
    assert_true(st->floor.delta_ns > 0 && st->floor.delta_ns < c->min_effect_ns);
    assert_true(st->floor_share_delay_ns >= c->min_effect_ns);
    assert_true(st->floor_significant);
    assert_true(c->n_route > 0 && c->route[0] == 1);
    assert_true(c->step.delta_ns < 0); /* the step itself got shorter */
    sf_change_free(c);
}

/* The job got 60 % faster everywhere and the collective 0.2 ms faster too,
 * but less, so its share of the step rose well past the minimum effect
 * and the share test alone would flag it. Its time fell: it is not called
 * slower, and nothing is routed. */
static void share_effect_needs_the_time_to_move_the_same_way(void **state)
{
    (void)state;
    sf_change *c = staggered_change(21, scaled_staggered_matrix(43, WSTEPS, 800000, 40, RANKS, 0));
    const sf_stage_change *st = &c->stages[1];
    sf_gates g;
    sf_gates_default(&g);
    assert_true(st->floor.delta_ns < 0);
    assert_true(st->floor_share_delay_ns >= c->min_effect_ns);
    assert_true(st->floor_share_p_value < g.change_alpha / (SS + 1));
    assert_false(st->floor_significant);
    assert_int_equal(c->n_route, 0);
    sf_change_free(c);
}

static bool floor_hit(const sf_change *c)
{
    return c->stages[1].floor_significant;
}

/* 1,000 resamplings of a clean staggered window: the floor's rank test
 * alone (no minimum effect) keeps its share of the family's level, and the
 * whole route flags at most alpha of them. */
static void sync_floor_clean_windows_rarely_flagged(void **state)
{
    (void)state;
    clean_windows_keep_the_level(staggered_matrix(25, 3 * WSTEPS, 1000000, RANKS, 0), floor_hit,
                                 "clean staggered, floor");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shift_small_fixture),
        cmocka_unit_test(shift_interval_fixture),
        cmocka_unit_test(shift_rejects_bad_input),
        cmocka_unit_test(signed_rank_fixture),
        cmocka_unit_test(reference_is_compact),
        cmocka_unit_test(clean_windows_rarely_flagged),
        cmocka_unit_test(power_on_known_shift),
        cmocka_unit_test(mergeable_mode_nulls),
        cmocka_unit_test(whatif_fixture),
        cmocka_unit_test(whatif_without_arrival_points_is_a_lower_bound),
        cmocka_unit_test(reference_contrasts_fixture),
        cmocka_unit_test(reference_contrasts_large_rows),
        cmocka_unit_test(own_work_route_under_load),
        cmocka_unit_test(own_work_clean_windows_rarely_flagged),
        cmocka_unit_test(frontier_routed_own_work_stage_scores_contrasts),
        cmocka_unit_test(sync_floor_routes_a_slower_collective),
        cmocka_unit_test(sync_floor_ignores_a_late_arrival),
        cmocka_unit_test(sync_floor_clean_windows_rarely_flagged),
        cmocka_unit_test(share_effect_sees_through_a_faster_job),
        cmocka_unit_test(share_effect_needs_the_time_to_move_the_same_way),
        cmocka_unit_test(whatif_sync_recomputes_waits),
        cmocka_unit_test(whatif_sync_beats_clipped_lower_bound),
        cmocka_unit_test(whatif_missing_arrival_falls_back_to_clipped),
        cmocka_unit_test(whatif_sync_cohort_basis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The change's and the what-if's fast paths against the straightforward
 * computation (docs/CHANGE.md; docs/ACCOUNTING.md, "Exactness"): on seeded random
 * windows with ties, ranks missing from the window or the reference, no
 * reference, a missing arrival mark and every stage layout the what-if
 * specialises, each figure must equal the one of the window recomputed
 * scenario by scenario, and each median and interval the one of a plain
 * enumeration. Nothing here shares code with daemon/core (its internal
 * header only declares the sort checked against qsort, the midranks'
 * autocorrelation checked against a direct count and the rank test checked
 * against U counted pair by pair).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stagefrontier/change.h>

#include "core_internal.h"
#include "matrix.h"
#include "vec/vec.h"

/* ---- the shift's middle differences -------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The Hodges-Lehmann shift by listing and sorting every pairwise
 * difference: the midpoint (rounded down) of the two middle ones. */
static int64_t listed_shift(const int64_t *x, size_t m, const int64_t *y, size_t n)
{
    int64_t *all = malloc(m * n * sizeof *all);
    assert_non_null(all);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            all[i * n + j] = y[j] - x[i];
    qsort(all, m * n, sizeof *all, cmp_i64);
    size_t pairs = m * n;
    int64_t a = all[(pairs + 1) / 2 - 1], b = pairs % 2 ? a : all[pairs / 2];
    free(all);
    return a + (b - a) / 2;
}

/* Odd and even pair counts, heavy ties (values of 0 to 2), equal middle
 * differences and distinct ones, negative shifts, samples of one. */
static void shift_matches_listed_differences(void **state)
{
    (void)state;
    uint64_t st = 41;
    int64_t x[40], y[40];
    for (int trial = 0; trial < 2000; trial++) {
        size_t m = 1 + (size_t)rand_below(&st, 40), n = 1 + (size_t)rand_below(&st, 40);
        int64_t spread = trial % 3 == 0 ? 3 : 1000000, offset = rand_below(&st, 2 * spread);
        for (size_t i = 0; i < m; i++)
            x[i] = rand_below(&st, spread);
        for (size_t j = 0; j < n; j++)
            y[j] = rand_below(&st, spread) + offset - spread;
        sf_shift s;
        assert_int_equal(sf_shift_estimate(x, m, y, n, 0.05, &s), 0);
        assert_int_equal(s.delta_ns, listed_shift(x, m, y, n));
        assert_true(s.ci_low_ns <= s.delta_ns && s.delta_ns <= s.ci_high_ns);
    }
}

/* The two-sided normal quantile by the plain bisection's 200 rounds. */
static double listed_quantile(double p)
{
    double lo = 0, hi = 40;
    for (int it = 0; it < 200; it++) {
        double mid = (lo + hi) / 2;
        if (erfc(mid / M_SQRT2) > p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

/* The sum of t^3 - t over the groups of t tied values in both samples
 * together, from their sorted union. */
static double listed_ties(const int64_t *x, size_t m, const int64_t *y, size_t n)
{
    size_t total_n = m + n;
    int64_t *both = malloc(total_n * sizeof *both);
    assert_non_null(both);
    memcpy(both, x, m * sizeof *x);
    memcpy(both + m, y, n * sizeof *y);
    qsort(both, total_n, sizeof *both, cmp_i64);
    double ties = 0;
    for (size_t i = 0, j; i < total_n; i = j) {
        for (j = i; j < total_n && both[j] == both[i]; j++)
            ;
        double t = (double)(j - i);
        ties += t * t * t - t;
    }
    free(both);
    return ties;
}

/* The variance of U under no shift, tie-corrected (docs/CHANGE.md). */
static double listed_u_variance(size_t m, size_t n, double ties)
{
    double total = (double)(m + n), mn = (double)(m * n);
    return total > 1 ? mn / 12 * ((total + 1) - ties / (total * (total - 1))) : 0;
}

/* The Moses interval from the listed differences: order statistics lo_k
 * and pairs - lo_k + 1, lo_k from the tie-corrected deviation of U
 * (docs/CHANGE.md), the same floating-point expression as the estimator. */
static void listed_interval(const int64_t *x, size_t m, const int64_t *y, size_t n, double alpha,
                            int64_t *ret_lo, int64_t *ret_hi)
{
    size_t pairs = m * n;
    int64_t *all = malloc(pairs * sizeof *all);
    assert_non_null(all);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            all[i * n + j] = y[j] - x[i];
    qsort(all, pairs, sizeof *all, cmp_i64);
    double mn = (double)pairs, var = listed_u_variance(m, n, listed_ties(x, m, y, n));
    double sigma = var > 0 ? sqrt(var) : 0;
    double k = floor(mn / 2 - listed_quantile(alpha) * sigma);
    size_t lo_k = k < 1 ? 1 : (size_t)k;
    if (lo_k > (pairs + 1) / 2)
        lo_k = (pairs + 1) / 2;
    *ret_lo = all[lo_k - 1];
    *ret_hi = all[pairs - lo_k];
    free(all);
}

/* Mann-Whitney's two-sided p with the variance scaled by factor: U counted
 * pair by pair (a tie counts a half), continuity-corrected. */
static double listed_mann_whitney_p(const int64_t *x, size_t m, const int64_t *y, size_t n,
                                    double factor)
{
    double u = 0, mn = (double)(m * n);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++)
            u += x[i] < y[j] ? 1 : x[i] == y[j] ? 0.5 : 0;
    double var = listed_u_variance(m, n, listed_ties(x, m, y, n));
    double tested = var > 0 ? sqrt(var * factor) : 0;
    if (!(tested > 0))
        return 1;
    double dev = fabs(u - mn / 2) - 0.5;
    return dev > 0 ? erfc(dev / tested / M_SQRT2) : 1;
}

/* The whole estimate against the listing at the sizes of a window against
 * its reference (up to 300 x 100 pairs): clustered samples, samples with a
 * far outlier (the counting passes must fall back to halving the range),
 * heavy ties (a few values, and tens: passes over runs of ties), wide
 * 64-bit values and a shift of zero. */
static void shift_interval_matches_listed_differences(void **state)
{
    (void)state;
    uint64_t st = 43;
    static int64_t x[300], y[100];
    static const double alphas[] = {0.01, 0.05, 0.2};
    for (int trial = 0; trial < 288; trial++) {
        size_t m = 1 + (size_t)rand_below(&st, trial % 4 ? 300 : 12);
        size_t n = 1 + (size_t)rand_below(&st, trial % 4 ? 100 : 12);
        int kind = trial % 6;
        int64_t spread = kind == 0 ? 3 : kind == 4 ? INT64_C(1) << 60 : kind == 5 ? 40 : 1000000;
        int64_t offset = kind == 3 ? 0 : rand_below(&st, spread) - spread / 2;
        for (size_t i = 0; i < m; i++)
            x[i] = rand_below(&st, spread);
        for (size_t j = 0; j < n; j++)
            y[j] = rand_below(&st, spread) + offset;
        if (kind == 2) { /* one far outlier on each side */
            x[0] = INT64_C(1) << 40;
            y[n - 1] = -(INT64_C(1) << 40);
        }
        double alpha = alphas[trial % 3];
        sf_shift s;
        int64_t lo, hi;
        assert_int_equal(sf_shift_estimate(x, m, y, n, alpha, &s), 0);
        listed_interval(x, m, y, n, alpha, &lo, &hi);
        assert_int_equal(s.delta_ns, listed_shift(x, m, y, n));
        assert_int_equal(s.ci_low_ns, lo);
        assert_int_equal(s.ci_high_ns, hi);
        assert_true(s.p_value == listed_mann_whitney_p(x, m, y, n, 1));
    }
}

/* The rank test against U counted pair by pair, to the bit: samples of one,
 * all values tied, heavy ties across and within the samples, distinct
 * values, samples in any order, and a serial-dependence factor. */
static void mann_whitney_matches_counted_pairs(void **state)
{
    (void)state;
    uint64_t st = 45;
    static int64_t x[300], y[300];
    for (int trial = 0; trial < 600; trial++) {
        size_t m = 1 + (size_t)rand_below(&st, trial % 3 ? 300 : 6);
        size_t n = 1 + (size_t)rand_below(&st, trial % 3 ? 300 : 6);
        int kind = trial % 4;
        int64_t spread = kind == 0 ? 1 : kind == 1 ? 4 : kind == 2 ? 1000 : INT64_C(1) << 50;
        for (size_t i = 0; i < m; i++)
            x[i] = rand_below(&st, spread);
        for (size_t j = 0; j < n; j++)
            y[j] = rand_below(&st, spread) + (trial % 5 == 0 ? spread / 2 : 0);
        double factor = trial % 2 ? 1 : 1.7, p;
        assert_int_equal(sf__mann_whitney_p(x, m, y, n, factor, &p), 0);
        assert_true(p == listed_mann_whitney_p(x, m, y, n, factor));
    }
}

/* The sort the estimator runs on its samples, against qsort: sorted,
 * reversed, organ-pipe, constant, two-valued and random inputs, every size
 * up to 600 and a few large ones. */
static void sort_matches_qsort(void **state)
{
    (void)state;
    uint64_t st = 47;
    static int64_t v[5000], want[5000];
    for (size_t n = 0; n < 5000; n += n < 600 ? 1 : 1100) {
        for (int kind = 0; kind < 6; kind++) {
            for (size_t i = 0; i < n; i++) {
                int64_t r = rand_below(&st, 1000000) - 500000;
                v[i] = kind == 0   ? (int64_t)i
                       : kind == 1 ? -(int64_t)i
                       : kind == 2 ? (int64_t)(i < n / 2 ? i : n - i)
                       : kind == 3 ? 7
                       : kind == 4 ? r % 2
                                   : r * (INT64_C(1) << 40);
            }
            memcpy(want, v, n * sizeof *v);
            qsort(want, n, sizeof *want, cmp_i64);
            sf__sort_i64(v, n);
            assert_memory_equal(v, want, n * sizeof *v);
        }
    }
}

/* The lag-1 autocorrelation of a series' midranks, each midrank counted
 * directly (values below, plus half the ties beyond itself), against the
 * core's: series of 3 to 400 values, heavy ties, constant ones, negative
 * ones, and ones spread over 2^50 ns (too wide to pack with their times:
 * the search per value), with the sorted copy the core returns beside it. */
static void rank_autocorrelation_matches_plain_midranks(void **state)
{
    (void)state;
    uint64_t st = 53;
    static int64_t v[400], sorted[400], want[400];
    static double rank[400];
    for (int trial = 0; trial < 400; trial++) {
        size_t n = 3 + (size_t)rand_below(&st, 398);
        int64_t spread = trial % 4 == 0 ? 1 : trial % 4 == 1 ? 4 : 1000000;
        int64_t scale = trial % 5 == 4 ? INT64_C(1) << 30 : 1;
        int64_t offset = trial % 7 == 6 ? -INT64_C(5000000) : 0;
        for (size_t t = 0; t < n; t++)
            v[t] = (rand_below(&st, spread) + (trial % 3 == 0 ? (int64_t)t * 1000 : 0)) * scale +
                   offset;
        for (size_t t = 0; t < n; t++) {
            size_t below = 0, equal = 0;
            for (size_t u = 0; u < n; u++) {
                below += v[u] < v[t];
                equal += v[u] == v[t];
            }
            rank[t] = ((double)below + 1 + (double)(below + equal)) / 2;
        }
        /* lag-1 covariance over variance, summed in time order */
        double mean = ((double)n + 1) / 2, lagged = 0, sum_sq = 0;
        for (size_t t = 0; t + 1 < n; t++)
            lagged += (rank[t] - mean) * (rank[t + 1] - mean);
        for (size_t t = 0; t < n; t++)
            sum_sq += (rank[t] - mean) * (rank[t] - mean);
        double rho;
        assert_int_equal(sf__rank_lag1_autocorrelation(v, n, &rho), 0);
        assert_true(rho == (sum_sq > 0 ? lagged / sum_sq : 0));
        assert_true(sf__sort_and_rank_lag1(v, n, sorted, rank) == rho);
        memcpy(want, v, n * sizeof *v);
        qsort(want, n, sizeof *want, cmp_i64);
        assert_memory_equal(sorted, want, n * sizeof *v);
    }
}

/* ---- the what-if, recomputed scenario by scenario ------------------------ */

enum { MAX_R = 24, MAX_T = 12 };

struct layout {
    uint32_t recorded;     /* recorded stages */
    uint64_t recorded_syn; /* synchronizing recorded stages, 0: a plain schema */
};

/* The default schema (6 stages), the synchronizing layouts the what-if
 * unrolls (6 recorded stages split at the third's or the second's arrival,
 * 5 at the third's), and layouts that take the general loops: 4 and 2
 * plain stages, one sync point at the first stage, two sync points. */
static const struct layout layouts[] = {
    {6, 0},       {4, 0},       {2, 0},       {6, 1u << 2},
    {6, 1u << 1}, {5, 1u << 2}, {4, 1u << 0}, {5, (1u << 0) | (1u << 2)},
};

struct window {
    sf_schema schema;
    uint32_t R, T, S;
    int64_t d[MAX_T][MAX_R][SF_MAX_STAGES];
    bool present[MAX_T][MAX_R];
    uint32_t flags[MAX_T][MAX_R];
    sf_summary *summary;
};

static bool is_wait(const sf_schema *schema, uint32_t k)
{
    return k > 0 && (schema->sync_mask >> (k - 1) & 1);
}

static void schema_of(const struct layout *l, sf_schema *ret)
{
    static const char *const names[] = {"a", "b", "c", "d", "e", "f"};
    if (l->recorded_syn == 0)
        assert_int_equal(sf_schema_init(ret, 1, l->recorded, names, NULL, 1), 0);
    else
        assert_int_equal(sf_schema_init_sync(ret, 1, l->recorded, names, NULL, 1, l->recorded_syn),
                         0);
}

/* Durations near 1 ms per stage, or 0 to `ties` ns so that ends, segments
 * and medians tie; every step may lose a row (`holes`) and every row its
 * arrival mark (`unmarked`, one in that many); rank `absent` reports nothing. */
static void window_fill(struct window *w, uint64_t *st, int64_t index, int64_t ties, int holes,
                        int unmarked, int absent)
{
    for (uint32_t t = 0; t < w->T; t++)
        for (uint32_t r = 0; r < w->R; r++) {
            for (uint32_t k = 0; k < w->S; k++)
                w->d[t][r][k] = ties ? rand_below(st, ties + 1)
                                     : 1000000 + rand_below(st, 300000) + (int64_t)k * 1000;
            w->present[t][r] = (int)r != absent && !(holes && rand_below(st, holes) == 0);
            w->flags[t][r] = unmarked && rand_below(st, unmarked) == 0 ? SF_ROW_ARRIVAL_MISSING : 0;
        }
    sf_row rows[MAX_T * MAX_R];
    size_t n = 0;
    for (uint32_t t = 0; t < w->T; t++)
        for (uint32_t r = 0; r < w->R; r++)
            if (w->present[t][r])
                rows[n++] = (sf_row){
                    .step = index * 100 + t, .rank = r, .flags = w->flags[t][r], .d = w->d[t][r]};
    sf_window_meta meta = {.index = index,
                           .first_step = index * 100,
                           .last_step = index * 100 + 99,
                           .world_size = w->R};
    assert_int_equal(sf_summary_build(&w->schema, &meta, rows, n, true, &w->summary), 0);
}

/* The ranks that reported in the window (the dense ranks) and the steps
 * where all of them did. */
static uint32_t reporting_ranks(const struct window *w, uint32_t *ret)
{
    uint32_t n = 0;
    for (uint32_t r = 0; r < w->R; r++) {
        bool any = false;
        for (uint32_t t = 0; t < w->T; t++)
            any = any || w->present[t][r];
        if (any)
            ret[n++] = r;
    }
    return n;
}

static bool step_complete(const struct window *w, const uint32_t *ranks, uint32_t n, uint32_t t)
{
    if (n == 0)
        return false; /* no row: no step */
    for (uint32_t i = 0; i < n; i++)
        if (!w->present[t][ranks[i]])
            return false;
    return true;
}

static int64_t plain_median(const int64_t *v, size_t n)
{
    int64_t *c = malloc(n * sizeof *c);
    assert_non_null(c);
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_i64);
    int64_t m = n % 2 ? c[n / 2] : c[n / 2 - 1] + (c[n / 2] - c[n / 2 - 1]) / 2;
    free(c);
    return m;
}

/* The basis of rank r at stage k in step t: its reference median, or the
 * median of the step's reporting ranks where the reference has none. */
static int64_t basis_of(const struct window *w, const sf_reference *ref, const uint32_t *ranks,
                        uint32_t n, uint32_t t, uint32_t r, uint32_t k)
{
    for (uint32_t i = 0; ref && ref->median_ns && i < ref->n_ranks; i++)
        if (ref->ranks[i] == r && ref->median_ns[(size_t)i * w->S + k] != SF_NULL_NS)
            return ref->median_ns[(size_t)i * w->S + k];
    int64_t v[MAX_R];
    for (uint32_t i = 0; i < n; i++)
        v[i] = w->d[t][ranks[i]][k];
    return plain_median(v, n);
}

/* A step's length under a model, from each rank's durations e[i][...]:
 * the clipped model's largest end, or the sync model's sum over segments of
 * the longest own work (sync waits left out: the last arrival sets them). */
static int64_t modelled_step(const sf_schema *schema, int64_t (*e)[SF_MAX_STAGES], uint32_t n,
                             bool sync)
{
    int64_t length = 0, longest = INT64_MIN;
    if (!sync) {
        for (uint32_t i = 0; i < n; i++) {
            int64_t end = 0;
            for (uint32_t k = 0; k < schema->n_stages; k++)
                end += e[i][k];
            longest = end > longest ? end : longest;
        }
        return longest;
    }
    for (uint32_t lo = 0; lo < schema->n_stages;) {
        uint32_t hi = lo; /* the segment is lo..hi, its sync stage (or the residual) last */
        while (hi + 1 < schema->n_stages && !(schema->sync_mask >> hi & 1))
            hi++;
        longest = INT64_MIN;
        for (uint32_t i = 0; i < n; i++) {
            int64_t own = 0;
            for (uint32_t k = lo; k <= hi; k++)
                own += is_wait(schema, k) ? 0 : e[i][k];
            longest = own > longest ? own : longest;
        }
        length += longest;
        lo = hi + 1 < schema->n_stages && is_wait(schema, hi + 1) ? hi + 2 : hi + 1;
    }
    return length;
}

/* The what-if the long way: per complete step, the window with rank x (or
 * (x, k)) clipped to its basis is rebuilt and its modelled length taken. */
struct direct {
    uint32_t steps;
    __int128 exposed, ideal;
    __int128 saved[MAX_R];
    __int128 cell[SF_MAX_STAGES][MAX_R];
    bool sync;
};

static void direct_whatif(const struct window *w, const sf_reference *ref, const sf_change *route,
                          const uint32_t *ranks, uint32_t n, struct direct *ret)
{
    const sf_schema *schema = &w->schema;
    memset(ret, 0, sizeof *ret);
    ret->sync = schema->sync_mask != 0;
    for (uint32_t t = 0; t < w->T; t++)
        for (uint32_t i = 0; i < n && step_complete(w, ranks, n, t); i++)
            ret->sync = ret->sync && !(w->flags[t][ranks[i]] & SF_ROW_ARRIVAL_MISSING);
    static int64_t e[MAX_R][SF_MAX_STAGES], all[MAX_R][SF_MAX_STAGES];
    for (uint32_t t = 0; t < w->T; t++) {
        if (!step_complete(w, ranks, n, t))
            continue;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t k = 0; k < w->S; k++) {
                int64_t d = w->d[t][ranks[i]][k], b = basis_of(w, ref, ranks, n, t, ranks[i], k);
                e[i][k] = d;
                all[i][k] = d < b ? d : b;
            }
        int64_t exposed = modelled_step(schema, e, n, false);
        ret->steps++;
        int64_t modelled = modelled_step(schema, e, n, ret->sync);
        ret->exposed += exposed;
        ret->ideal += exposed - (modelled - modelled_step(schema, all, n, ret->sync));
        for (uint32_t i = 0; i < n; i++) {
            int64_t keep[SF_MAX_STAGES];
            memcpy(keep, e[i], sizeof keep);
            memcpy(e[i], all[i], sizeof keep);
            ret->saved[i] += modelled - modelled_step(schema, e, n, ret->sync);
            memcpy(e[i], keep, sizeof keep);
            for (uint32_t j = 0; route && j < route->n_route; j++) {
                uint32_t k = route->route[j];
                if (ret->sync && is_wait(schema, k))
                    continue; /* the sync model never replaces a wait */
                e[i][k] = all[i][k];
                ret->cell[j][i] += modelled - modelled_step(schema, e, n, ret->sync);
                e[i][k] = keep[k];
            }
        }
    }
}

/* Largest saving first, the earlier (rank, then route stage) first among
 * equals, at most max: the listing order of the what-if. */
struct listed {
    uint32_t rank, stage;
    __int128 saved;
};

static uint32_t list_largest(struct listed *v, uint32_t n, uint32_t max)
{
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j - 1].saved < v[j].saved; j--) {
            struct listed t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n < max ? n : max;
}

static bool same_double(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

/* What the checked windows held, so that none of the cases goes untested. */
struct seen {
    uint32_t sync_saved, clipped_saved, cells, cohort, no_step;
};

/* One form's what-if against the direct recomputation want. */
static void assert_whatif_form(const struct window *w, const sf_reference *ref,
                               const sf_change *route, const sf__vec *form, const uint32_t *ranks,
                               uint32_t n, const struct direct *want, struct seen *seen)
{
    sf_whatif *got = NULL;
    int rc = sf__whatif_compute_form(w->summary, ref, route, form, &got);
    if (want->steps == 0) {
        assert_int_equal(rc, -ENODATA);
        seen->no_step++;
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(got->lower_bound, !want->sync);
    assert_int_equal(got->basis, ref && ref->median_ns ? SF_WHATIF_REFERENCE : SF_WHATIF_COHORT);
    assert_true(got->exposed_ns == want->exposed && got->ideal_ns == want->ideal);
    double slowdown = want->ideal > 0 ? (double)want->exposed / (double)want->ideal : NAN;
    assert_true(same_double(got->slowdown, slowdown));
    double waste = isnan(slowdown) ? NAN : (1 - 1 / slowdown) * n * ((double)want->exposed / 1e9);
    assert_true(same_double(got->waste_rank_s, waste));
    struct listed v[MAX_R * SF_MAX_STAGES];
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++)
        if (want->saved[i] > 0)
            v[c++] = (struct listed){ranks[i], 0, want->saved[i]};
    c = list_largest(v, c, SF_WHATIF_MAX_RANKS);
    assert_int_equal(got->n_ranks, c);
    seen->sync_saved += want->sync && c > 0;
    seen->clipped_saved += !want->sync && c > 0;
    seen->cohort += got->basis == SF_WHATIF_COHORT && c > 0;
    for (uint32_t i = 0; i < c; i++) {
        assert_int_equal(got->ranks[i].rank, v[i].rank);
        assert_true(got->ranks[i].saved_ns == v[i].saved);
        __int128 rest = want->exposed - v[i].saved;
        assert_true(same_double(got->ranks[i].slowdown,
                                rest > 0 ? (double)want->exposed / (double)rest : NAN));
    }
    c = 0;
    for (uint32_t j = 0; route && j < route->n_route; j++)
        for (uint32_t i = 0; i < n; i++)
            if (want->cell[j][i] > 0)
                v[c++] = (struct listed){ranks[i], route->route[j], want->cell[j][i]};
    c = list_largest(v, c, SF_WHATIF_MAX_CELLS);
    assert_int_equal(got->n_cells, c);
    seen->cells += c > 0;
    for (uint32_t i = 0; i < c; i++) {
        assert_int_equal(got->cells[i].rank, v[i].rank);
        assert_int_equal(got->cells[i].stage, v[i].stage);
        assert_true(got->cells[i].saved_ns == v[i].saved);
    }
    sf_whatif_free(got);
}

/* Every form this CPU has (its clipped pass, vector or scalar) against the
 * direct recomputation of the same window; the cases are counted once. */
static void assert_whatif_direct(const struct window *w, const sf_reference *ref,
                                 const sf_change *route, struct seen *seen)
{
    uint32_t ranks[MAX_R], n = reporting_ranks(w, ranks);
    static struct direct want;
    direct_whatif(w, ref, route, ranks, n, &want);
    for (int isa = SF__ISA_GENERIC; isa < SF__ISA_COUNT; isa++) {
        const sf__vec *form = sf__vec_form((enum sf__isa)isa);
        struct seen again = {0};
        if (form != NULL)
            assert_whatif_form(w, ref, route, form, ranks, n, &want,
                               isa == SF__ISA_GENERIC ? seen : &again);
    }
}

/* Per layout and seed: a reference of two windows (one rank may be missing
 * from it, so its basis is the cohort's), a window with ties, holes (steps
 * skipped), a rank that never reported, a missing arrival mark, and a
 * random route that may hold sync waits; with and without the reference. */
static void whatif_matches_direct_recomputation(void **state)
{
    (void)state;
    static struct window base[2], cur;
    uint32_t checked = 0;
    struct seen seen = {0};
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        for (uint64_t seed = 0; seed < 40; seed++) {
            uint64_t st = seed * 977 + l;
            sf_schema_clear(&cur.schema);
            schema_of(&layouts[l], &cur.schema);
            cur.R = 1 + (uint32_t)rand_below(&st, MAX_R);
            cur.T = 1 + (uint32_t)rand_below(&st, MAX_T);
            cur.S = cur.schema.n_stages;
            int64_t ties = seed % 4 == 0 ? 0 : rand_below(&st, 4);
            int unref = cur.R > 1 && rand_below(&st, 3) == 0 ? (int)rand_below(&st, cur.R) : -1;
            for (int j = 0; j < 2; j++) {
                base[j].schema = cur.schema;
                base[j].R = cur.R;
                base[j].T = 1 + (uint32_t)rand_below(&st, MAX_T);
                base[j].S = cur.S;
                window_fill(&base[j], &st, j, ties, 0, 0, unref);
            }
            int holes = rand_below(&st, 3) == 0 ? 4 * (int)cur.R : 0;
            if (cur.R >= 4 && rand_below(&st, 8) == 0)
                holes = 2; /* often no complete step at all */
            int unmarked = rand_below(&st, 4) == 0 ? (int)(cur.R * cur.T) : 0;
            int absent = cur.R > 1 && rand_below(&st, 4) == 0 ? (int)rand_below(&st, cur.R) : -1;
            window_fill(&cur, &st, 5, ties, holes, unmarked, absent);
            const sf_summary *refw[2] = {base[0].summary, base[1].summary};
            sf_reference *ref = NULL;
            assert_int_equal(sf_reference_build(refw, 2, &ref), 0);
            sf_change route = {.n_stages = cur.S};
            for (uint32_t k = 0; k < cur.S; k++)
                if (rand_below(&st, 3) == 0)
                    route.route[route.n_route++] = k;
            assert_whatif_direct(&cur, ref, &route, &seen);
            assert_whatif_direct(&cur, NULL, &route, &seen);
            assert_whatif_direct(&cur, ref, NULL, &seen);
            checked++;
            sf_reference_free(ref);
            for (int j = 0; j < 2; j++)
                sf_summary_free(base[j].summary);
            sf_summary_free(cur.summary);
        }
    }
    sf_schema_clear(&cur.schema);
    assert_int_equal(checked, 40 * sizeof layouts / sizeof layouts[0]);
    print_message("saved: %u sync, %u clipped, %u cohort; %u with cells; %u without a step\n",
                  seen.sync_saved, seen.clipped_saved, seen.cohort, seen.cells, seen.no_step);
    assert_true(seen.sync_saved > 20 && seen.clipped_saved > 20 && seen.cohort > 20);
    assert_true(seen.cells > 20 && seen.no_step > 0);
}

/* ---- the change's suspects and own-work contrasts ------------------------- */

enum { CR = 12, CT = 40, LONG_T = 300, CS = 6, BIG = 301, BT = 30 };

static sf_summary *rows_summary(const sf_schema *schema, int64_t *d, const bool *present,
                                uint32_t R, uint32_t T, int64_t index)
{
    sf_row *rows = calloc((size_t)R * T, sizeof *rows);
    assert_non_null(rows);
    size_t n = 0;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t r = 0; r < R; r++)
            if (present == NULL || present[t * R + r])
                rows[n++] = (sf_row){.step = index * 1000 + t,
                                     .rank = r,
                                     .d = &d[((size_t)t * R + r) * schema->n_stages]};
    sf_window_meta meta = {.index = index,
                           .first_step = index * 1000,
                           .last_step = index * 1000 + 999,
                           .world_size = R};
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(schema, &meta, rows, n, true, &s), 0);
    free(rows);
    return s;
}

/* Keeps the largest delta first, the earlier rank first among equals. */
static uint32_t rank_suspects(sf_change_suspect *v, uint32_t n, uint32_t max)
{
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j - 1].delta_ns < v[j].delta_ns; j--) {
            sf_change_suspect t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n < max ? n : max;
}

/* Midrank of v[t] among the n values, by counting. */
static double counted_midrank(const int64_t *v, size_t n, size_t t)
{
    size_t below = 0, same = 0;
    for (size_t i = 0; i < n; i++) {
        below += v[i] < v[t];
        same += v[i] == v[t];
    }
    return (double)below + ((double)same + 1) / 2;
}

/* The lag-1 autocorrelation of the midranks in time order. */
static double counted_rank_rho(const int64_t *v, size_t n)
{
    if (n < 3)
        return 0;
    double mean = ((double)n + 1) / 2, prev = counted_midrank(v, n, 0) - mean;
    double num = 0, den = prev * prev;
    for (size_t t = 1; t < n; t++) {
        double d = counted_midrank(v, n, t) - mean;
        num += prev * d;
        den += d * d;
        prev = d;
    }
    return den > 0 ? num / den : 0;
}

/* The share test by counting pairs: U of y over x (ties a half), its
 * tie-corrected variance widened by the AR(1) factor of the two series'
 * rank autocorrelation (weighted by length, at most 0.9), continuity
 * corrected. */
static double counted_share_p(const int64_t *x, size_t m, const int64_t *y, size_t n)
{
    double u = 0, ties = 0, total = (double)(m + n), mn = (double)m * (double)n;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            u += y[j] > x[i] ? 1 : y[j] == x[i] ? 0.5 : 0;
    for (size_t i = 0; i < m + n; i++) {
        int64_t v = i < m ? x[i] : y[i - m];
        double c = 0;
        bool first = true;
        for (size_t q = 0; q < m + n; q++) {
            int64_t w = q < m ? x[q] : y[q - m];
            c += w == v;
            first = first && !(q < i && w == v);
        }
        ties += first ? c * c * c - c : 0;
    }
    double var = mn / 12 * ((total + 1) - ties / (total * (total - 1)));
    double rho = ((double)m * counted_rank_rho(x, m) + (double)n * counted_rank_rho(y, n)) / total;
    rho = rho > 0.9 ? 0.9 : rho;
    double factor = rho > 0 ? (1 + rho) / (1 - rho) : 1, dev = fabs(u - mn / 2) - 0.5;
    return var > 0 && dev > 0 ? erfc(dev / sqrt(var * factor) / M_SQRT2) : 1;
}

/* The share's delay: T (y - x) / (1 - y) at the median shares, T the
 * reference's median step, rounded to the nearest ns. */
static int64_t share_delay(const int64_t *x, size_t m, const int64_t *y, size_t n, int64_t T)
{
    double xm = (double)plain_median(x, m), ym = (double)plain_median(y, n);
    return (int64_t)llround((ym - xm) / (1e6 - ym) * (double)T);
}

/* Each stage's share test: the rank test of its advance's share of the
 * step (parts per million), the reference's shares against the window's,
 * recomputed from the rows (the advance being the largest end at the
 * stage's boundary less the largest at the one before), at change_alpha /
 * stages, and the share's delay, which must reach the minimum effect in
 * the direction of the advance's shift. Step hole (T: none) is not
 * complete. */
static void assert_share_tests(const sf_change *c, const sf_reference *ref, const int64_t *d,
                               uint32_t T, uint32_t hole, double alpha)
{
    static int64_t x[3 * LONG_T], y[LONG_T], advance[LONG_T][CS], exposed[LONG_T];
    static int64_t ref_ends[3 * LONG_T];
    uint32_t n = 0;
    for (uint32_t t = 0; t < T; t++) {
        if (t == hole)
            continue;
        int64_t prev = 0;
        for (uint32_t k = 0; k < CS; k++) {
            int64_t best = INT64_MIN;
            for (uint32_t r = 0; r < CR; r++) {
                int64_t end = 0;
                for (uint32_t q = 0; q <= k; q++)
                    end += d[((size_t)t * CR + r) * CS + q];
                best = end > best ? end : best;
            }
            advance[n][k] = best - prev;
            prev = best;
        }
        exposed[n++] = prev;
    }
    for (uint32_t k = 0; k < CS; k++) {
        for (uint32_t t = 0; t < ref->n_steps; t++) {
            int64_t end = 0;
            for (uint32_t q = 0; q < CS; q++)
                end += ref->advance[t * CS + q];
            x[t] = (int64_t)((__int128)ref->advance[t * CS + k] * 1000000 / end);
            ref_ends[t] = end;
        }
        for (uint32_t t = 0; t < n; t++)
            y[t] = (int64_t)((__int128)advance[t][k] * 1000000 / exposed[t]);
        double p = counted_share_p(x, ref->n_steps, y, n);
        assert_true(fabs(c->stages[k].share_p_value - p) <= 1e-9 * p);
        int64_t delay = share_delay(x, ref->n_steps, y, n, plain_median(ref_ends, ref->n_steps));
        int64_t shift = c->stages[k].shift.delta_ns;
        assert_int_equal(c->stages[k].share_delay_ns, delay);
        bool big = ((shift > 0 && delay > 0) || (shift < 0 && delay < 0)) &&
                   llabs(delay) >= c->min_effect_ns;
        assert_int_equal(c->stages[k].significant, p < alpha / CS && big);
    }
}

/* The default schema: one rank slower in one stage after the reference.
 * Every suspect's score is recomputed from the rows: per route stage, the
 * rank's median duration over the complete steps less its reference median
 * and less the cohort's median of that shift, plus the share of complete
 * steps where it alone held the largest end at the stage's boundary, less
 * its reference share, times the stage's frontier shift. One rank is
 * missing from the reference (never a suspect), one step may have a hole (not
 * counted), and ties at the boundaries are frequent. */
/* One window length: CT steps (the rank medians through the selection
 * network), or LONG_T, past the network's largest size (rank by rank). */
static void suspects_case(uint32_t T, uint64_t seeds, uint32_t hole)
{
    sf_schema schema;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    sf_gates g;
    sf_gates_default(&g);
    g.suspect_ranks_max = SF_CHANGE_MAX_SUSPECTS;
    uint32_t routed = 0;
    for (uint64_t seed = 0; seed < seeds; seed++) {
        uint64_t st = 1000 + seed;
        static int64_t d[4][LONG_T * CR * CS];
        static bool present[LONG_T * CR];
        uint32_t slow = (uint32_t)rand_below(&st, CR), stage = (uint32_t)rand_below(&st, CS);
        uint32_t unref = (slow + 1 + (uint32_t)rand_below(&st, CR - 1)) % CR;
        for (int j = 0; j < 4; j++)
            for (size_t i = 0; i < (size_t)T * CR * CS; i++) {
                uint32_t r = (uint32_t)(i / CS % CR), k = (uint32_t)(i % CS);
                d[j][i] = 1000000 * (int64_t)(k + 1) + 50000 * rand_below(&st, 4);
                if (j == 3 && r == slow && k == stage)
                    d[j][i] += 1500000;
            }
        for (uint32_t i = 0; i < T * CR; i++)
            present[i] = i % CR != unref;
        sf_summary *w[3];
        for (int j = 0; j < 3; j++)
            w[j] = rows_summary(&schema, d[j], present, CR, T, j);
        sf_reference *ref = NULL;
        assert_int_equal(sf_reference_build((const sf_summary *const *)w, 3, &ref), 0);
        for (uint32_t i = 0; i < T * CR; i++)
            present[i] = i != hole * CR + (slow + 2) % CR; /* none when hole is T */
        sf_summary *s = rows_summary(&schema, d[3], present, CR, T, 3);
        sf_change *c = NULL;
        assert_int_equal(sf_change_compute(ref, s, &g, &c), 0);
        routed += c->n_route > 0;
        assert_share_tests(c, ref, d[3], T, hole, g.change_alpha);
        /* without the reference's sorted columns each window derives them:
         * the same change, to the bit */
        struct sf_reference_columns *kept = ref->columns;
        ref->columns = NULL;
        sf_change *again = NULL;
        assert_int_equal(sf_change_compute(ref, s, &g, &again), 0);
        ref->columns = kept;
        assert_memory_equal(again, c, sizeof *c);
        sf_change_free(again);
        int64_t own[CS][CR], cohort[CS] = {0};
        double lead[CS][CR];
        for (uint32_t j = 0; j < c->n_route; j++) {
            uint32_t k = c->route[j];
            int64_t v[LONG_T], shifts[CR];
            uint32_t m = 0;
            for (uint32_t r = 0; r < CR; r++) {
                uint32_t n = 0, led = 0, ri = r < unref ? r : r - 1;
                for (uint32_t t = 0; t < T; t++) {
                    if (t == hole)
                        continue;
                    v[n++] = d[3][((size_t)t * CR + r) * CS + k];
                    int64_t end[CR], mine = 0, best = INT64_MIN;
                    for (uint32_t y = 0; y < CR; y++) {
                        end[y] = 0;
                        for (uint32_t q = 0; q <= k; q++)
                            end[y] += d[3][((size_t)t * CR + y) * CS + q];
                    }
                    mine = end[r];
                    for (uint32_t y = 0; y < CR; y++)
                        if (y != r)
                            best = end[y] > best ? end[y] : best;
                    led += mine > best;
                }
                if (r == unref)
                    continue;
                own[k][r] = plain_median(v, n) - ref->median_ns[ri * CS + k];
                lead[k][r] = (double)led / n - (double)ref->lead_steps[ri * CS + k] / ref->n_steps;
                shifts[m++] = own[k][r];
            }
            cohort[k] = plain_median(shifts, m);
        }
        sf_change_suspect want[CR];
        uint32_t n = 0;
        for (uint32_t r = 0; r < CR && c->n_route > 0; r++) {
            if (r == unref)
                continue;
            double score = 0;
            for (uint32_t j = 0; j < c->n_route; j++) {
                uint32_t k = c->route[j];
                score += (double)(own[k][r] - cohort[k]) +
                         lead[k][r] * (double)c->stages[k].shift.delta_ns;
            }
            int64_t delta = (int64_t)llround(score);
            if (delta > 0)
                want[n++] = (sf_change_suspect){r, delta};
        }
        n = rank_suspects(want, n, g.suspect_ranks_max);
        assert_int_equal(c->n_suspects, n);
        for (uint32_t i = 0; i < n; i++) {
            assert_int_equal(c->suspects[i].rank, want[i].rank);
            assert_int_equal(c->suspects[i].delta_ns, want[i].delta_ns);
        }
        sf_change_free(c);
        sf_summary_free(s);
        sf_reference_free(ref);
        for (int j = 0; j < 3; j++)
            sf_summary_free(w[j]);
    }
    assert_true(routed >= seeds / 2);
    sf_schema_clear(&schema);
}

static void suspects_match_direct_scores(void **state)
{
    (void)state;
    suspects_case(CT, 12, 7);
    suspects_case(LONG_T, 4, 7);
    /* every step whole: the route's rank medians are the summary's own */
    suspects_case(CT, 12, CT);
}

/* A synchronizing job of 300 or 301 ranks: columns of 256 or more take the
 * bracketed median of the others, read in place with the row's stride.
 * Eight ranks around the middle had far less own work in the reference, so their
 * contrast shifts lead the suspects (s0 is routed as an own-work change,
 * every suspect scored by its contrast shift), and in the window they hold
 * the middle of every column: one the middle value itself, the others its
 * neighbours, where leaving one value out moves the median of the rest.
 * Steps alternate distinct values in a shuffled order with heavy ties (three
 * levels). Each suspect's delta must equal the median over the window of
 * its s0 minus the plain median of the others', less its reference
 * contrast. */
static void column_fill(int64_t *row, uint32_t R, uint64_t *st, bool ties, bool probes_low)
{
    uint32_t order[BIG], probe = R / 2 - 4;
    for (uint32_t r = 0; r < R; r++)
        order[r] = r;
    for (uint32_t r = R - 1; r > 0; r--) { /* shuffle, the probes' places kept */
        uint32_t q = (uint32_t)rand_below(st, r + 1);
        if (r - probe < 8 || q - probe < 8)
            continue;
        uint32_t t = order[r];
        order[r] = order[q];
        order[q] = t;
    }
    for (uint32_t r = 0; r < R; r++) {
        int64_t level = ties ? (int64_t)order[r] * 3 / R : (int64_t)order[r];
        row[r * 4 + 0] = probes_low && r - probe < 8 ? 5000000 : 10000000 + 1000 * level;
    }
}

/* R ranks: 300 (an odd number of others, whose median is one of them) or
 * 301 (an even number, whose median is a midpoint). */
static void contrasts_case(uint32_t R)
{
    uint32_t probe = R / 2 - 4;
    sf_schema schema;
    synchronizing_schema(&schema, 4); /* s0, s0.sync_wait, s2, s3 */
    sf_gates g;
    sf_gates_default(&g);
    g.suspect_ranks_max = SF_CHANGE_MAX_SUSPECTS;
    size_t cells = (size_t)BT * R * 4;
    int64_t *d[4];
    uint64_t st = 99;
    for (int j = 0; j < 4; j++) {
        d[j] = malloc(cells * sizeof *d[j]);
        assert_non_null(d[j]);
        for (uint32_t t = 0; t < BT; t++) {
            int64_t *row = &d[j][(size_t)t * R * 4], last = 0;
            column_fill(row, R, &st, t % 3 == 0, j < 3);
            for (uint32_t r = probe; r < probe + 8 && j == 3; r++)
                row[r * 4 + 0] += 3000 * (int64_t)(t / (BT / 4)); /* a drift: serial dependence */
            for (uint32_t r = 0; r < R; r++) {
                row[r * 4 + 2] = 5000000 + rand_below(&st, 1000000);
                row[r * 4 + 3] = 1000000;
                last = row[r * 4 + 0] > last ? row[r * 4 + 0] : last;
            }
            for (uint32_t r = 0; r < R; r++)
                row[r * 4 + 1] = last - row[r * 4 + 0] + 1000000;
        }
    }
    sf_summary *w[3];
    for (int j = 0; j < 3; j++)
        w[j] = rows_summary(&schema, d[j], NULL, R, BT, j);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)w, 3, &ref), 0);
    sf_summary *s = rows_summary(&schema, d[3], NULL, R, BT, 3);
    sf_change *c = NULL;
    assert_int_equal(sf_change_compute(ref, s, &g, &c), 0);
    assert_true(c->n_route >= 1 && c->route[0] == 0 && c->stages[0].own_significant);
    sf_change_suspect want[BIG];
    uint32_t n = 0;
    int64_t *v = malloc(R * sizeof *v), z[BT];
    assert_non_null(v);
    for (uint32_t r = 0; r < R; r++) {
        for (uint32_t t = 0; t < BT; t++) {
            uint32_t m = 0;
            for (uint32_t y = 0; y < R; y++)
                if (y != r)
                    v[m++] = d[3][((size_t)t * R + y) * 4];
            z[t] =
                d[3][((size_t)t * R + r) * 4] - sf_median_i64(v, m) - ref->contrast_ns[r * 4 + 0];
        }
        int64_t shift = plain_median(z, BT);
        if (shift > 0)
            want[n++] = (sf_change_suspect){r, shift};
        if (r == c->stages[0].own_rank) { /* its rank test, serial factor counted */
            double rho = counted_rank_rho(z, BT);
            rho = rho > 0.9 ? 0.9 : rho;
            double p = sf__signed_rank_p_inplace(z, BT, rho > 0 ? (1 + rho) / (1 - rho) : 1);
            assert_true(fabs(c->stages[0].own_p_value - p) <= 1e-12 * p);
        }
    }
    n = rank_suspects(want, n, g.suspect_ranks_max);
    assert_int_equal(n, 8);
    assert_int_equal(c->n_suspects, n);
    for (uint32_t i = 0; i < n; i++) {
        assert_true(want[i].rank - probe < 8);
        assert_int_equal(c->suspects[i].rank, want[i].rank);
        assert_int_equal(c->suspects[i].delta_ns, want[i].delta_ns);
    }
    free(v);
    sf_change_free(c);
    sf_summary_free(s);
    sf_reference_free(ref);
    for (int j = 0; j < 3; j++)
        sf_summary_free(w[j]);
    for (int j = 0; j < 4; j++)
        free(d[j]);
    sf_schema_clear(&schema);
}

static void own_work_contrasts_match_plain_medians(void **state)
{
    (void)state;
    contrasts_case(BIG - 1);
    contrasts_case(BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shift_matches_listed_differences),
        cmocka_unit_test(shift_interval_matches_listed_differences),
        cmocka_unit_test(mann_whitney_matches_counted_pairs),
        cmocka_unit_test(sort_matches_qsort),
        cmocka_unit_test(rank_autocorrelation_matches_plain_midranks),
        cmocka_unit_test(whatif_matches_direct_recomputation),
        cmocka_unit_test(suspects_match_direct_scores),
        cmocka_unit_test(own_work_contrasts_match_plain_medians),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

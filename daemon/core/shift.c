/*
 * The shift of one sample against another: the Hodges-Lehmann estimate,
 * its rank-based (Moses) interval and the two-sided Mann-Whitney p-value
 * (docs/CHANGE.md). Exact on integer ns: order statistics of the m x n
 * pairwise differences are found by counting, never by listing them, so the
 * cost is O((m + n) log) whatever the sample sizes. Also the one-sample
 * signed-rank test used for per-rank contrasts. Knows nothing of reports.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/change.h>

#include "core_internal.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t *sorted_copy(const int64_t *v, size_t n)
{
    int64_t *c = malloc(n * sizeof *c);
    if (c == NULL)
        return NULL;
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_i64);
    return c;
}

/* Pairs (i, j) with y[j] - x[i] <= v; x and y sorted. */
static uint64_t count_le(const int64_t *x, size_t m, const int64_t *y, size_t n, int64_t v)
{
    uint64_t count = 0;
    size_t j = 0;
    for (size_t i = 0; i < m; i++) {
        while (j < n && y[j] - x[i] <= v)
            j++;
        count += j;
    }
    return count;
}

/* The k-th smallest pairwise difference, k from 1 to m x n. */
static int64_t kth_difference(const int64_t *x, size_t m, const int64_t *y, size_t n, uint64_t k)
{
    int64_t lo = y[0] - x[m - 1], hi = y[n - 1] - x[0];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2; /* hi - lo >= 0: rounds down, so it narrows */
        if (count_le(x, m, y, n, mid) >= k)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The smallest pairwise difference above v, and in *ret_count the pairs at
 * or below it (count_le's); INT64_MAX when no pair lies above v. */
static int64_t next_difference(const int64_t *x, size_t m, const int64_t *y, size_t n, int64_t v,
                               uint64_t *ret_count)
{
    uint64_t count = 0;
    int64_t next = INT64_MAX;
    size_t j = 0;
    for (size_t i = 0; i < m; i++) {
        while (j < n && y[j] - x[i] <= v)
            j++;
        count += j;
        if (j < n && y[j] - x[i] < next)
            next = y[j] - x[i];
    }
    *ret_count = count;
    return next;
}

/* The two middle pairwise differences, order statistics k and k + 1 (k
 * from 1 to m x n - 1): the second is the first again while the pairs at or
 * below it reach k + 1, else the smallest difference above it, so one
 * merge pass replaces a second search. */
static void middle_differences(const int64_t *x, size_t m, const int64_t *y, size_t n, uint64_t k,
                               int64_t *ret_a, int64_t *ret_b)
{
    uint64_t count;
    int64_t a = kth_difference(x, m, y, n, k);
    int64_t next = next_difference(x, m, y, n, a, &count);
    *ret_a = a;
    *ret_b = count >= k + 1 ? a : next;
}

/* Mann-Whitney U of y (pairs with y > x, ties counting a half) and the sum
 * of t^3 - t over tie groups, from the merged order. */
static void rank_statistics(const int64_t *x, size_t m, const int64_t *y, size_t n, double *ret_u,
                            double *ret_ties)
{
    double rank_sum_y = 0, ties = 0;
    size_t i = 0, j = 0, pos = 0;
    while (i < m || j < n) {
        int64_t v = (j >= n || (i < m && x[i] <= y[j])) ? x[i] : y[j];
        size_t cx = 0, cy = 0;
        while (i < m && x[i] == v)
            i++, cx++;
        while (j < n && y[j] == v)
            j++, cy++;
        double t = (double)(cx + cy);
        double mid_rank = (double)pos + (t + 1) / 2;
        rank_sum_y += mid_rank * (double)cy;
        ties += t * t * t - t;
        pos += cx + cy;
    }
    *ret_u = rank_sum_y - (double)n * ((double)n + 1) / 2;
    *ret_ties = ties;
}

/* z with P(Z > z) = p / 2 for a standard normal Z, by bisection. */
static double normal_two_sided_quantile(double p)
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

/* The two-sided Mann-Whitney p-value of sorted samples (normal
 * approximation, tie-corrected, with continuity correction), and in
 * *ret_sigma the U statistic's deviation that the interval needs. */
static double mann_whitney_sorted(const int64_t *x, size_t m, const int64_t *y, size_t n,
                                  double variance_factor, double *ret_sigma)
{
    double u, ties;
    rank_statistics(x, m, y, n, &u, &ties);
    double total = (double)(m + n), mn = (double)((uint64_t)m * n);
    double var = total > 1 ? mn / 12 * ((total + 1) - ties / (total * (total - 1))) : 0;
    double sigma = var > 0 ? sqrt(var) : 0, tested = var > 0 ? sqrt(var * variance_factor) : 0;
    double p = 1;
    if (tested > 0) {
        double dev = fabs(u - mn / 2) - 0.5; /* continuity correction */
        p = dev > 0 ? erfc(dev / tested / M_SQRT2) : 1;
    }
    *ret_sigma = sigma;
    return p;
}

static void estimate_sorted(const int64_t *x, size_t m, const int64_t *y, size_t n, double alpha,
                            sf_shift *ret)
{
    uint64_t pairs = (uint64_t)m * n;
    int64_t a, b;
    if (pairs % 2)
        a = b = kth_difference(x, m, y, n, (pairs + 1) / 2);
    else
        middle_differences(x, m, y, n, pairs / 2, &a, &b);
    double sigma, mn = (double)pairs;
    double p = mann_whitney_sorted(x, m, y, n, 1, &sigma);
    double k = floor(mn / 2 - normal_two_sided_quantile(alpha) * sigma);
    uint64_t lo_k = k < 1 ? 1 : (uint64_t)k;
    if (lo_k > (pairs + 1) / 2)
        lo_k = (pairs + 1) / 2;
    *ret = (sf_shift){
        .delta_ns = a + (b - a) / 2,
        .ci_low_ns = kth_difference(x, m, y, n, lo_k),
        .ci_high_ns = kth_difference(x, m, y, n, pairs - lo_k + 1),
        .p_value = p,
    };
}

int sf_shift_estimate(const int64_t *x, size_t m, const int64_t *y, size_t n, double alpha,
                      sf_shift *ret)
{
    if (x == NULL || y == NULL || ret == NULL || m == 0 || n == 0 || !(alpha > 0 && alpha < 1))
        return -EINVAL;
    int64_t *xs = sorted_copy(x, m), *ys = sorted_copy(y, n);
    int rc = -ENOMEM;
    if (xs != NULL && ys != NULL) {
        estimate_sorted(xs, m, ys, n, alpha, ret);
        rc = 0;
    }
    free(xs);
    free(ys);
    return rc;
}

int sf__mann_whitney_p(const int64_t *x, size_t m, const int64_t *y, size_t n,
                       double variance_factor, double *ret_p)
{
    if (x == NULL || y == NULL || ret_p == NULL || m == 0 || n == 0)
        return -EINVAL;
    int64_t *xs = sorted_copy(x, m), *ys = sorted_copy(y, n);
    int rc = -ENOMEM;
    double sigma;
    if (xs != NULL && ys != NULL) {
        *ret_p = mann_whitney_sorted(xs, m, ys, n, variance_factor, &sigma);
        rc = 0;
    }
    free(xs);
    free(ys);
    return rc;
}

static int cmp_abs_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    uint64_t ax = x < 0 ? 0 - (uint64_t)x : (uint64_t)x, ay = y < 0 ? 0 - (uint64_t)y : (uint64_t)y;
    return (ax > ay) - (ax < ay);
}

static bool same_abs(int64_t a, int64_t b)
{
    return a == b || a == -b;
}

/* The signed-rank p-value of the m nonzero values v, sorted here by |v|. */
static double signed_rank_nonzero(int64_t *v, size_t m, double variance_factor)
{
    qsort(v, m, sizeof *v, cmp_abs_i64);
    double w_plus = 0, ties = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && same_abs(v[j], v[i]))
            j++;
        double t = (double)(j - i), mid_rank = ((double)i + 1 + (double)j) / 2;
        for (size_t q = i; q < j; q++)
            w_plus += v[q] > 0 ? mid_rank : 0;
        ties += t * t * t - t;
        i = j;
    }
    double dm = (double)m;
    double var = (dm * (dm + 1) * (2 * dm + 1) / 24 - ties / 48) * variance_factor;
    if (var <= 0)
        return 1;
    double dev = fabs(w_plus - dm * (dm + 1) / 4) - 0.5; /* continuity correction */
    return dev > 0 ? erfc(dev / sqrt(var) / M_SQRT2) : 1;
}

double sf__signed_rank_p_inplace(int64_t *z, size_t n, double variance_factor)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (z[i] != 0)
            z[m++] = z[i];
    return signed_rank_nonzero(z, m, variance_factor);
}

int sf_signed_rank_p(const int64_t *z, size_t n, double *ret_p)
{
    if (z == NULL || ret_p == NULL)
        return -EINVAL;
    int64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (v == NULL)
        return -ENOMEM;
    memcpy(v, z, n * sizeof *v);
    *ret_p = sf__signed_rank_p_inplace(v, n, 1);
    free(v);
    return 0;
}

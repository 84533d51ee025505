/*
 * Serial dependence of a per-step series, for the change's rank tests
 * (docs/CHANGE.md, "Steps are not independent"). Consecutive steps share
 * the machine's state (load, placement, clocks), so their durations drift
 * together; a rank test that treats them as independent then reports
 * p-values far too small. This file measures that dependence and turns it
 * into the factor by which the tests widen their variance. Pure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

/* The dependence a factor is allowed to express: beyond it the factor
 * would grow without bound on a window that is one slow ramp. */
#define SERIAL_RHO_MAX 0.9

/* Values of sorted[0..n) below v, n >= 1, by halving without a branch on
 * the data: the compare's result moves the base arithmetically (a branch
 * there would be mispredicted every other round). */
static size_t count_below(const int64_t *sorted, size_t n, int64_t v)
{
    size_t base = 0;
    while (n > 1) {
        size_t half = n / 2;
        base += (size_t)(sorted[base + half - 1] < v) * half;
        n -= half;
    }
    return base + (size_t)(sorted[base] < v);
}

/* Midrank of every value, in time order: rank[t] for v[t]. A value's tie
 * group in the sorted copy runs from the count below it to the last value
 * equal to it, so no (value, time) pairs need sorting. */
static void midranks_in_time_order(const int64_t *v, const int64_t *sorted, size_t n, double *rank)
{
    for (size_t t = 0; t < n; t++) {
        size_t i = count_below(sorted, n, v[t]), j = i + 1;
        while (j < n && sorted[j] == v[t])
            j++;
        rank[t] = ((double)i + 1 + (double)j) / 2;
    }
}

double sf__rank_lag1_autocorrelation_sorted(const int64_t *v, const int64_t *sorted, size_t n,
                                            double *rank)
{
    if (n < 3)
        return 0;
    midranks_in_time_order(v, sorted, n, rank);
    double mean = ((double)n + 1) / 2, num = 0, den = 0;
    for (size_t t = 0; t < n; t++) {
        double d = rank[t] - mean;
        den += d * d;
        if (t + 1 < n)
            num += d * (rank[t + 1] - mean);
    }
    return den > 0 ? num / den : 0;
}

int sf__rank_lag1_autocorrelation(const int64_t *v, size_t n, double *ret_rho)
{
    if (v == NULL || ret_rho == NULL || n > UINT32_MAX)
        return -EINVAL;
    if (n < 3) {
        *ret_rho = 0;
        return 0;
    }
    int64_t *sorted = malloc(n * sizeof *sorted);
    double *rank = malloc(n * sizeof *rank);
    if (sorted == NULL || rank == NULL) {
        free(sorted);
        free(rank);
        return -ENOMEM;
    }
    memcpy(sorted, v, n * sizeof *v);
    sf__sort_i64(sorted, n);
    *ret_rho = sf__rank_lag1_autocorrelation_sorted(v, sorted, n, rank);
    free(sorted);
    free(rank);
    return 0;
}

double sf__serial_variance_factor(double rho)
{
    if (!(rho > 0))
        return 1;
    if (rho > SERIAL_RHO_MAX)
        rho = SERIAL_RHO_MAX;
    return (1 + rho) / (1 - rho);
}

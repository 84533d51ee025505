/*
 * Serial dependence of a per-step series, for the change's rank tests
 * (docs/CHANGE.md, "Steps are not independent"). Consecutive steps share
 * the machine's state (load, placement, clocks), so their durations drift
 * together; a rank test that treats them as independent then reports
 * p-values far too small. This file measures that dependence and turns it
 * into the factor by which the tests widen their variance. Pure.
 */
#include <errno.h>
#include <stdbool.h>
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
 * equal to it: one search per value, for a series whose values span too
 * wide a range to pack with their times (sort_with_midranks). */
static void midranks_in_time_order(const int64_t *v, const int64_t *sorted, size_t n, double *rank)
{
    for (size_t t = 0; t < n; t++) {
        size_t i = count_below(sorted, n, v[t]), j = i + 1;
        while (j < n && sorted[j] == v[t])
            j++;
        rank[t] = ((double)i + 1 + (double)j) / 2;
    }
}

static double lag1_of_midranks(const double *rank, size_t n)
{
    double mean = ((double)n + 1) / 2, num = 0, den = 0;
    for (size_t t = 0; t < n; t++) {
        double d = rank[t] - mean;
        den += d * d;
        if (t + 1 < n)
            num += d * (rank[t + 1] - mean);
    }
    return den > 0 ? num / den : 0;
}

/* (value - lowest, time) packed in one key: a sort of the keys orders the
 * values and carries each one's time, so the midranks follow in one pass
 * over the tie groups instead of a search per value. */
#define TIME_BITS 24
#define SPAN_BITS (63 - TIME_BITS)

/* v sorted into sorted and its midranks in time order into rank, through
 * packed keys; false (nothing written) when the series is too long or its
 * values span too wide a range to pack. */
static bool sort_with_midranks(const int64_t *v, size_t n, int64_t *sorted, double *rank)
{
    if (n >= (size_t)1 << TIME_BITS)
        return false;
    int64_t lowest = v[0], highest = v[0];
    for (size_t t = 1; t < n; t++) {
        lowest = v[t] < lowest ? v[t] : lowest;
        highest = v[t] > highest ? v[t] : highest;
    }
    if ((uint64_t)highest - (uint64_t)lowest >= (uint64_t)1 << SPAN_BITS)
        return false;
    for (size_t t = 0; t < n; t++)
        sorted[t] = (int64_t)((((uint64_t)v[t] - (uint64_t)lowest) << TIME_BITS) | t);
    sf__sort_i64(sorted, n);
    const uint64_t time_mask = ((uint64_t)1 << TIME_BITS) - 1;
    for (size_t i = 0; i < n;) {
        uint64_t group = (uint64_t)sorted[i] >> TIME_BITS;
        size_t j = i + 1;
        while (j < n && (uint64_t)sorted[j] >> TIME_BITS == group)
            j++;
        double midrank = ((double)i + 1 + (double)j) / 2;
        for (size_t q = i; q < j; q++) {
            rank[(uint64_t)sorted[q] & time_mask] = midrank;
            sorted[q] = (int64_t)(group + (uint64_t)lowest);
        }
        i = j;
    }
    return true;
}

double sf__sort_and_rank_lag1(const int64_t *v, size_t n, int64_t *sorted, double *rank)
{
    if (n == 0)
        return 0;
    if (!sort_with_midranks(v, n, sorted, rank)) {
        memcpy(sorted, v, n * sizeof *v);
        sf__sort_i64(sorted, n);
        midranks_in_time_order(v, sorted, n, rank);
    }
    return n < 3 ? 0 : lag1_of_midranks(rank, n);
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
    *ret_rho = sf__sort_and_rank_lag1(v, n, sorted, rank);
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

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

#include "core_internal.h"

/* The dependence a factor is allowed to express: beyond it the factor
 * would grow without bound on a window that is one slow ramp. */
#define SERIAL_RHO_MAX 0.9

struct timed_value {
    int64_t v;
    uint32_t t;
};

static int cmp_timed_value(const void *a, const void *b)
{
    const struct timed_value *x = a, *y = b;
    if (x->v != y->v)
        return (x->v > y->v) - (x->v < y->v);
    return (x->t > y->t) - (x->t < y->t);
}

/* Midrank of every value, in time order: rank[t] for v[t]. */
static void midranks_in_time_order(struct timed_value *tv, size_t n, double *rank)
{
    qsort(tv, n, sizeof *tv, cmp_timed_value);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && tv[j].v == tv[i].v)
            j++;
        double mid = ((double)i + 1 + (double)j) / 2;
        for (size_t q = i; q < j; q++)
            rank[tv[q].t] = mid;
        i = j;
    }
}

int sf__rank_lag1_autocorrelation(const int64_t *v, size_t n, double *ret_rho)
{
    if (v == NULL || ret_rho == NULL || n > UINT32_MAX)
        return -EINVAL;
    if (n < 3) {
        *ret_rho = 0;
        return 0;
    }
    struct timed_value *tv = malloc(n * sizeof *tv);
    double *rank = malloc(n * sizeof *rank);
    if (tv == NULL || rank == NULL) {
        free(tv);
        free(rank);
        return -ENOMEM;
    }
    for (size_t t = 0; t < n; t++)
        tv[t] = (struct timed_value){.v = v[t], .t = (uint32_t)t};
    midranks_in_time_order(tv, n, rank);
    double mean = ((double)n + 1) / 2, num = 0, den = 0;
    for (size_t t = 0; t < n; t++) {
        double d = rank[t] - mean;
        den += d * d;
        if (t + 1 < n)
            num += d * (rank[t + 1] - mean);
    }
    free(tv);
    free(rank);
    *ret_rho = den > 0 ? num / den : 0;
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

/*
 * Serial dependence in the change's rank tests (docs/CHANGE.md, "Steps are
 * not independent"): the rank autocorrelation and its variance factor on
 * exact fixtures, and the false-alarm rate of both rank tests on clean
 * series whose steps drift together, with and without the factor.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core_internal.h"
#include "matrix.h"

static double rho_of(const int64_t *v, size_t n)
{
    double rho = -2;
    assert_int_equal(sf__rank_lag1_autocorrelation(v, n, &rho), 0);
    return rho;
}

static void autocorrelation_fixtures(void **state)
{
    (void)state;
    /* ranks 1..5 in time order, mean 3: deviations -2..2, lag-1 products
     * 2 + 0 + 0 + 2 over squares 10 */
    int64_t rising[] = {10, 20, 30, 40, 50};
    assert_true(fabs(rho_of(rising, 5) - 0.4) < 1e-12);
    /* ties: midranks 3.5 3.5 1.5 1.5, mean 2.5, products 1 - 1 + 1 over 4 */
    int64_t tied[] = {5, 5, 1, 1};
    assert_true(fabs(rho_of(tied, 4) - 0.25) < 1e-12);
    /* the value's order only: the same ranks give the same rho */
    int64_t scaled[] = {-7, 1000, 1000000, INT64_MAX - 1, INT64_MAX};
    assert_true(fabs(rho_of(scaled, 5) - 0.4) < 1e-12);
    int64_t alternating[] = {1, 9, 1, 9, 1, 9};
    assert_true(rho_of(alternating, 6) < 0);
    int64_t flat[] = {4, 4, 4, 4};
    assert_true(rho_of(flat, 4) == 0);
    assert_true(rho_of(rising, 2) == 0);
    double rho;
    assert_int_equal(sf__rank_lag1_autocorrelation(NULL, 3, &rho), -EINVAL);
    assert_int_equal(sf__rank_lag1_autocorrelation(rising, 3, NULL), -EINVAL);
}

static void variance_factor_fixtures(void **state)
{
    (void)state;
    assert_true(sf__serial_variance_factor(-0.5) == 1);
    assert_true(sf__serial_variance_factor(0) == 1);
    assert_true(sf__serial_variance_factor(NAN) == 1);
    assert_true(fabs(sf__serial_variance_factor(0.4) - 1.4 / 0.6) < 1e-12);
    assert_true(fabs(sf__serial_variance_factor(0.9) - 19) < 1e-9);
    assert_true(fabs(sf__serial_variance_factor(1) - 19) < 1e-9); /* capped */
}

/* The factor widens the signed-rank test exactly: its statistic's variance
 * is multiplied, so z shrinks by the factor's square root. */
static void factor_scales_the_signed_rank_variance(void **state)
{
    (void)state;
    int64_t z[] = {3, -2, 0, 1, 2}, copy[5];
    double var = 4.0 * 5 * 9 / 24 - 6.0 / 48;
    memcpy(copy, z, sizeof z);
    double p = sf__signed_rank_p_inplace(copy, 5, 4);
    assert_true(fabs(p - erfc(2.0 / sqrt(4 * var) / M_SQRT2)) < 1e-12);
    memcpy(copy, z, sizeof z);
    double plain = sf__signed_rank_p_inplace(copy, 5, 1);
    assert_true(fabs(plain - erfc(2.0 / sqrt(var) / M_SQRT2)) < 1e-12);
    assert_true(p > plain);
}

/* A clean series whose steps drift together: a shared AR(1) term with
 * coefficient phi (the machine's state moving slowly) plus independent
 * jitter, around a fixed level. */
static void drifting_series(uint64_t *st, double phi, int64_t level, int64_t *v, size_t n)
{
    double drift = 0;
    for (size_t t = 0; t < n; t++) {
        double shock = (double)rand_below(st, 2000001) - 1000000;
        drift = phi * drift + shock;
        v[t] = level + (int64_t)drift + rand_below(st, 400001) - 200000;
    }
}

#define TRIALS 1000
#define ALPHA 0.01

static double signed_rank_p(int64_t *z, size_t n, bool corrected)
{
    double rho = 0;
    if (corrected)
        assert_int_equal(sf__rank_lag1_autocorrelation(z, n, &rho), 0);
    return sf__signed_rank_p_inplace(z, n, sf__serial_variance_factor(rho));
}

/* The own-work test's situation: a rank's contrast drifts about its
 * reference median (0 here). Treated as independent steps, windows of a
 * clean series are flagged far above alpha; with the factor, near it. */
static void signed_rank_on_drift_keeps_its_level(void **state)
{
    (void)state;
    int64_t z[100];
    uint32_t plain = 0, corrected = 0;
    uint64_t st = 41;
    for (uint32_t trial = 0; trial < TRIALS; trial++) {
        drifting_series(&st, 0.6, 0, z, 100);
        int64_t copy[100];
        memcpy(copy, z, sizeof z);
        plain += signed_rank_p(copy, 100, false) < ALPHA;
        corrected += signed_rank_p(z, 100, true) < ALPHA;
    }
    print_message("signed rank on AR(1) 0.6: %u plain, %u corrected of %u\n", plain, corrected,
                  TRIALS);
    assert_true(plain > 5 * ALPHA * TRIALS);
    assert_true(corrected <= 3 * ALPHA * TRIALS);
}

static double share_p(const int64_t *x, size_t m, const int64_t *y, size_t n, bool corrected)
{
    double rx = 0, ry = 0, p = -1;
    if (corrected) {
        assert_int_equal(sf__rank_lag1_autocorrelation(x, m, &rx), 0);
        assert_int_equal(sf__rank_lag1_autocorrelation(y, n, &ry), 0);
    }
    double factor = sf__serial_variance_factor((m * rx + n * ry) / ((double)m + n));
    assert_int_equal(sf__mann_whitney_p(x, m, y, n, factor, &p), 0);
    return p;
}

/* The share test's situation: a baseline of 300 steps and a window of 100
 * of the same drifting process. */
static void mann_whitney_on_drift_keeps_its_level(void **state)
{
    (void)state;
    int64_t x[300], y[100];
    uint32_t plain = 0, corrected = 0;
    uint64_t st = 43;
    for (uint32_t trial = 0; trial < TRIALS; trial++) {
        drifting_series(&st, 0.6, 50000000, x, 300);
        drifting_series(&st, 0.6, 50000000, y, 100);
        plain += share_p(x, 300, y, 100, false) < ALPHA;
        corrected += share_p(x, 300, y, 100, true) < ALPHA;
    }
    print_message("Mann-Whitney on AR(1) 0.6: %u plain, %u corrected of %u\n", plain, corrected,
                  TRIALS);
    assert_true(plain > 5 * ALPHA * TRIALS);
    assert_true(corrected <= 3 * ALPHA * TRIALS);
}

/* Independent steps: the factor stays near 1 and the level near alpha. */
static void independent_steps_keep_their_power(void **state)
{
    (void)state;
    int64_t z[100];
    uint32_t found = 0;
    uint64_t st = 47;
    for (uint32_t trial = 0; trial < TRIALS; trial++) {
        drifting_series(&st, 0, 300000, z, 100); /* a shift of about half a deviation */
        found += signed_rank_p(z, 100, true) < ALPHA;
    }
    print_message("independent steps, shifted: %u of %u found\n", found, TRIALS);
    assert_true(found >= TRIALS * 8 / 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(autocorrelation_fixtures),
        cmocka_unit_test(variance_factor_fixtures),
        cmocka_unit_test(factor_scales_the_signed_rank_variance),
        cmocka_unit_test(signed_rank_on_drift_keeps_its_level),
        cmocka_unit_test(mann_whitney_on_drift_keeps_its_level),
        cmocka_unit_test(independent_steps_keep_their_power),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

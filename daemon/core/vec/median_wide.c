/*
 * The median of one large multiset (a step's median over every rank, for
 * the cohort gains) by quickselect whose partitions are a form's vector
 * compressions (median_wide_avx512.c, median_wide_avx2.c), no branch on the
 * data. Exact: the same value as sf_median_i64, which the generic form
 * runs instead.
 */
#include "../core_internal.h"
#include "vec.h"

enum { WIDE_SMALL = 64 }; /* below this, the scalar selection finishes */

/* The first of the three buffers that is not `not`. */
static int64_t *other(int64_t *const pool[3], const int64_t * not, const int64_t *nor)
{
    for (int i = 0; i < 3; i++)
        if (pool[i] != not &&pool[i] != nor)
            return pool[i];
    return pool[0];
}

/* The k-th smallest of v[0..n) and, through *ret_below, the (k-1)-th (when
 * k >= 1). Values left behind below the range are never larger than those
 * in it, so the (k-1)-th is either below the k-th within the final range or
 * the largest value left behind. The range moves between three buffers of
 * tmp (v itself has no room for a whole store past its end): a split reads
 * one and writes the two others. */
static int64_t select_wide(const sf__vec *sp, int64_t *v, size_t n, size_t k, int64_t *tmp,
                           int64_t *ret_below)
{
    int64_t *const pool[3] = {tmp, tmp + n + 8, tmp + 2 * (n + 8)};
    int64_t *src = v, below_max = INT64_MIN;
    unsigned rounds = 64; /* then the scalar selection, bounded by its heap sort */
    while (n > WIDE_SMALL && rounds-- > 0) {
        int64_t *lt = other(pool, src, NULL), *ge = other(pool, src, lt);
        int64_t p = sf__pivot(src, n), lt_max = INT64_MIN;
        size_t n_lt = sp->split_below(src, n, p, lt, ge, &lt_max);
        if (k < n_lt) {
            src = lt;
            n = n_lt;
            continue;
        }
        below_max = lt_max > below_max ? lt_max : below_max;
        k -= n_lt;
        n -= n_lt;
        src = ge;
        if (n_lt > 0)
            continue;
        /* p is the range's minimum: split off the values equal to it. */
        size_t n_eq;
        int64_t *gt = other(pool, src, NULL);
        size_t n_gt = sp->split_above(src, n, p, gt, &n_eq);
        if (k < n_eq) {
            *ret_below = k > 0 ? p : below_max;
            return p;
        }
        below_max = p;
        k -= n_eq;
        n = n_gt;
        src = gt;
    }
    sf__select_kth(src, n, k);
    int64_t below = below_max;
    for (size_t i = 0; i < k; i++)
        below = src[i] > below ? src[i] : below;
    *ret_below = below;
    return src[k];
}

int64_t sf__median_wide(const sf__vec *v, int64_t *values, size_t n, int64_t *tmp)
{
    if (n <= WIDE_SMALL || v->split_below == NULL)
        return sf_median_i64(values, n);
    int64_t lo, hi = select_wide(v, values, n, n / 2, tmp, &lo);
    return n % 2 ? hi : lo + (hi - lo) / 2;
}

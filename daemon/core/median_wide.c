/*
 * The median of one large multiset (a step's median over every rank, for
 * the cohort gains) by quickselect whose partitions are AVX-512 compressions:
 * eight values per compare, no branch on the data. Exact: the same value as
 * sf_median_i64, which it falls back to where the CPU lacks AVX-512.
 */
#include "core_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

enum { WIDE_SMALL = 64 }; /* below this, the scalar selection finishes */

/* Splits src[0..n) into the values below p (to lt, from its start) and the
 * rest (to ge), each compressed in registers and stored whole: a store may
 * run up to 7 values past its part's end, which the buffers leave room for.
 * Returns the count below; *below_max is raised to the largest of them. */
__attribute__((target("avx512f"))) static size_t split(const int64_t *src, size_t n, int64_t p,
                                                       int64_t *lt, int64_t *ge, int64_t *below_max)
{
    __m512i vp = _mm512_set1_epi64(p), vmax = _mm512_set1_epi64(INT64_MIN);
    size_t n_lt = 0, n_ge = 0;
    for (size_t i = 0; i < n; i += 8) {
        __mmask8 live = n - i >= 8 ? 0xff : (__mmask8)((1u << (n - i)) - 1);
        __m512i x = _mm512_maskz_loadu_epi64(live, src + i);
        __mmask8 below = _mm512_mask_cmplt_epi64_mask(live, x, vp);
        __mmask8 rest = (__mmask8)(live & ~below);
        _mm512_storeu_si512(lt + n_lt, _mm512_maskz_compress_epi64(below, x));
        _mm512_storeu_si512(ge + n_ge, _mm512_maskz_compress_epi64(rest, x));
        vmax = _mm512_mask_max_epi64(vmax, below, vmax, x);
        n_lt += (size_t)__builtin_popcount(below);
        n_ge += (size_t)__builtin_popcount(rest);
    }
    int64_t m = _mm512_reduce_max_epi64(vmax);
    *below_max = m > *below_max ? m : *below_max;
    return n_lt;
}

/* Splits the values not below p into those equal to it (counted) and those
 * above (to gt). Returns the count above. */
__attribute__((target("avx512f"))) static size_t
split_equal(const int64_t *src, size_t n, int64_t p, int64_t *gt, size_t *ret_equal)
{
    __m512i vp = _mm512_set1_epi64(p);
    size_t n_gt = 0;
    for (size_t i = 0; i < n; i += 8) {
        __mmask8 live = n - i >= 8 ? 0xff : (__mmask8)((1u << (n - i)) - 1);
        __m512i x = _mm512_maskz_loadu_epi64(live, src + i);
        __mmask8 above = _mm512_mask_cmpgt_epi64_mask(live, x, vp);
        _mm512_storeu_si512(gt + n_gt, _mm512_maskz_compress_epi64(above, x));
        n_gt += (size_t)__builtin_popcount(above);
    }
    *ret_equal = n - n_gt;
    return n_gt;
}

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
static int64_t select_wide(int64_t *v, size_t n, size_t k, int64_t *tmp, int64_t *ret_below)
{
    int64_t *const pool[3] = {tmp, tmp + n + 8, tmp + 2 * (n + 8)};
    int64_t *src = v, below_max = INT64_MIN;
    unsigned rounds = 64; /* then the scalar selection, bounded by its heap sort */
    while (n > WIDE_SMALL && rounds-- > 0) {
        int64_t *lt = other(pool, src, NULL), *ge = other(pool, src, lt);
        int64_t p = sf__pivot(src, n), lt_max = INT64_MIN;
        size_t n_lt = split(src, n, p, lt, ge, &lt_max);
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
        size_t n_gt = split_equal(src, n, p, gt, &n_eq);
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

int64_t sf__median_wide(int64_t *values, size_t n, int64_t *tmp)
{
    if (n <= WIDE_SMALL || !__builtin_cpu_supports("avx512f"))
        return sf_median_i64(values, n);
    int64_t lo, hi = select_wide(values, n, n / 2, tmp, &lo);
    if (n % 2)
        return hi;
    return lo + (hi - lo) / 2;
}

#else

int64_t sf__median_wide(int64_t *values, size_t n, int64_t *tmp)
{
    (void)tmp;
    return sf_median_i64(values, n);
}

#endif

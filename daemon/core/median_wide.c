/*
 * The median of one large multiset (a step's median over every rank, for
 * the cohort gains) by quickselect whose partitions are vector compressions:
 * AVX-512 (eight values a compare) or AVX2 (four, compressed through a
 * permutation table), no branch on the data either way. Exact: the same
 * value as sf_median_i64, which it falls back to on other CPUs.
 */
#include <errno.h>

#include "core_internal.h"

enum { WIDE_SMALL = 64 }; /* below this, the scalar selection finishes */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* One partition pass of either width: splits src[0..n) into the values
 * below p (to lt) and the rest (to ge), each store a whole vector, so a
 * store may run up to 7 values past its part's end, which the buffers
 * leave room for.
 * Returns the count below; *below_max is raised to the largest of them. */
typedef size_t split_fn(const int64_t *src, size_t n, int64_t p, int64_t *lt, int64_t *ge,
                        int64_t *below_max);
/* Splits the values not below p into those equal to it (counted) and those
 * above (to gt). Returns the count above. */
typedef size_t split_equal_fn(const int64_t *src, size_t n, int64_t p, int64_t *gt,
                              size_t *ret_equal);

struct splits {
    split_fn *below;
    split_equal_fn *above;
};

/* ---- AVX-512: compress instructions ---------------------------------- */

__attribute__((target("avx512f"))) static size_t
split_avx512(const int64_t *src, size_t n, int64_t p, int64_t *lt, int64_t *ge, int64_t *below_max)
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

__attribute__((target("avx512f"))) static size_t
split_equal_avx512(const int64_t *src, size_t n, int64_t p, int64_t *gt, size_t *ret_equal)
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

/* ---- AVX2: compression by permutation --------------------------------- */

/* For each 4-bit lane mask, the 32-bit lanes that move the selected 64-bit
 * lanes to the front, in order (the rest are don't-cares). */
static const int32_t compress_lanes[16][8] = {
    {0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0}, {2, 3, 0, 0, 0, 0, 0, 0},
    {0, 1, 2, 3, 0, 0, 0, 0}, {4, 5, 0, 0, 0, 0, 0, 0}, {0, 1, 4, 5, 0, 0, 0, 0},
    {2, 3, 4, 5, 0, 0, 0, 0}, {0, 1, 2, 3, 4, 5, 0, 0}, {6, 7, 0, 0, 0, 0, 0, 0},
    {0, 1, 6, 7, 0, 0, 0, 0}, {2, 3, 6, 7, 0, 0, 0, 0}, {0, 1, 2, 3, 6, 7, 0, 0},
    {4, 5, 6, 7, 0, 0, 0, 0}, {0, 1, 4, 5, 6, 7, 0, 0}, {2, 3, 4, 5, 6, 7, 0, 0},
    {0, 1, 2, 3, 4, 5, 6, 7},
};

__attribute__((target("avx2"))) static inline void compress_store(int64_t *to, __m256i x,
                                                                  unsigned mask)
{
    __m256i lanes = _mm256_loadu_si256((const __m256i *)compress_lanes[mask]);
    _mm256_storeu_si256((__m256i *)to, _mm256_permutevar8x32_epi32(x, lanes));
}

__attribute__((target("avx2"))) static inline unsigned lane_mask(__m256i m)
{
    return (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(m));
}

__attribute__((target("avx2"))) static size_t
split_avx2(const int64_t *src, size_t n, int64_t p, int64_t *lt, int64_t *ge, int64_t *below_max)
{
    __m256i vp = _mm256_set1_epi64x(p), vmax = _mm256_set1_epi64x(INT64_MIN);
    size_t n_lt = 0, n_ge = 0, i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i below = _mm256_cmpgt_epi64(vp, x);
        unsigned m = lane_mask(below);
        compress_store(lt + n_lt, x, m);
        compress_store(ge + n_ge, x, m ^ 15u);
        __m256i raise = _mm256_and_si256(below, _mm256_cmpgt_epi64(x, vmax));
        vmax = _mm256_blendv_epi8(vmax, x, raise);
        n_lt += (size_t)__builtin_popcount(m);
        n_ge += 4 - (size_t)__builtin_popcount(m);
    }
    int64_t lanes[4], m = *below_max;
    _mm256_storeu_si256((__m256i *)lanes, vmax);
    for (int l = 0; l < 4; l++)
        m = lanes[l] > m ? lanes[l] : m;
    for (; i < n; i++) { /* the last n % 4: stored on both sides, one count moves */
        bool below = src[i] < p;
        lt[n_lt] = ge[n_ge] = src[i];
        n_lt += below;
        n_ge += !below;
        m = below && src[i] > m ? src[i] : m;
    }
    *below_max = m;
    return n_lt;
}

__attribute__((target("avx2"))) static size_t
split_equal_avx2(const int64_t *src, size_t n, int64_t p, int64_t *gt, size_t *ret_equal)
{
    __m256i vp = _mm256_set1_epi64x(p);
    size_t n_gt = 0, i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(src + i));
        unsigned m = lane_mask(_mm256_cmpgt_epi64(x, vp));
        compress_store(gt + n_gt, x, m);
        n_gt += (size_t)__builtin_popcount(m);
    }
    for (; i < n; i++) {
        gt[n_gt] = src[i];
        n_gt += src[i] > p;
    }
    *ret_equal = n - n_gt;
    return n_gt;
}

static const struct splits splits_avx512 = {split_avx512, split_equal_avx512};
static const struct splits splits_avx2 = {split_avx2, split_equal_avx2};

/* ---- the selection --------------------------------------------------- */

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
static int64_t select_wide(const struct splits *sp, int64_t *v, size_t n, size_t k, int64_t *tmp,
                           int64_t *ret_below)
{
    int64_t *const pool[3] = {tmp, tmp + n + 8, tmp + 2 * (n + 8)};
    int64_t *src = v, below_max = INT64_MIN;
    unsigned rounds = 64; /* then the scalar selection, bounded by its heap sort */
    while (n > WIDE_SMALL && rounds-- > 0) {
        int64_t *lt = other(pool, src, NULL), *ge = other(pool, src, lt);
        int64_t p = sf__pivot(src, n), lt_max = INT64_MIN;
        size_t n_lt = sp->below(src, n, p, lt, ge, &lt_max);
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
        size_t n_gt = sp->above(src, n, p, gt, &n_eq);
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

static const struct splits *splits_of(enum sf__net_isa isa)
{
    if (!sf__isa_present(isa))
        return NULL;
    return isa == SF__NET_AVX512 ? &splits_avx512 : isa == SF__NET_AVX2 ? &splits_avx2 : NULL;
}

#else

struct splits;

static const struct splits *splits_of(enum sf__net_isa isa)
{
    (void)isa;
    return NULL;
}

static int64_t select_wide(const struct splits *sp, int64_t *v, size_t n, size_t k, int64_t *tmp,
                           int64_t *ret_below)
{
    (void)sp, (void)v, (void)n, (void)k, (void)tmp, (void)ret_below;
    return 0;
}

#endif

int sf__median_wide_isa(int64_t *values, size_t n, int64_t *tmp, enum sf__net_isa isa,
                        int64_t *ret_median)
{
    const struct splits *sp = splits_of(isa);
    if (isa != SF__NET_GENERIC && sp == NULL)
        return -ENOTSUP;
    if (n <= WIDE_SMALL || sp == NULL) {
        *ret_median = sf_median_i64(values, n);
        return 0;
    }
    int64_t lo, hi = select_wide(sp, values, n, n / 2, tmp, &lo);
    *ret_median = n % 2 ? hi : lo + (hi - lo) / 2;
    return 0;
}

int64_t sf__median_wide(int64_t *values, size_t n, int64_t *tmp)
{
    int64_t median;
    sf__median_wide_isa(values, n, tmp, sf__median_net_best(), &median);
    return median;
}

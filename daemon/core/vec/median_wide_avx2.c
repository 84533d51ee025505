/*
 * The wide median's partitions in AVX2 (median_wide.c): four values a
 * compare, compressed through a permutation table, no branch on the data.
 */
#include "vec.h"

#ifdef SF_VEC_X86
#include <immintrin.h>

#include "forms.h"

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

__attribute__((target("avx2"))) size_t sf__split_avx2(const int64_t *src, size_t n, int64_t p,
                                                      int64_t *lt, int64_t *ge, int64_t *below_max)
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

__attribute__((target("avx2"))) size_t sf__split_equal_avx2(const int64_t *src, size_t n, int64_t p,
                                                            int64_t *gt, size_t *ret_equal)
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

#endif

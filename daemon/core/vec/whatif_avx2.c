/*
 * The what-if's clipped pass (whatif.c) in AVX2, four ranks a vector: a row
 * of up to 8 stages in two vectors, max and min by compare and blend. Lanes
 * past the last rank hold INT64_MIN ends, which change nothing.
 */
#include "../core_internal.h"
#include "vec.h"

#ifdef SF_VEC_X86
#include "avx2_lanes.h"
#include "forms.h"

/* The same pass in AVX2, four ranks a vector: a row of up to 8 stages in
 * two vectors, max and min by compare and blend. Lanes past the last rank
 * hold INT64_MIN ends, which change nothing. */
/* Lane r: the sum of the 8 lanes of row r (lo[r] + hi[r]). */
SF_AVX2 static inline __m256i row_sums4(const __m256i *lo, const __m256i *hi)
{
    __m256i s[4];
    for (int r = 0; r < 4; r++)
        s[r] = _mm256_add_epi64(lo[r], hi[r]);
    __m256i a =
        _mm256_add_epi64(_mm256_unpacklo_epi64(s[0], s[1]), _mm256_unpackhi_epi64(s[0], s[1]));
    __m256i b =
        _mm256_add_epi64(_mm256_unpacklo_epi64(s[2], s[3]), _mm256_unpackhi_epi64(s[2], s[3]));
    return _mm256_add_epi64(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

/* Per lane: the largest end, the second, the holder, its clipped end, and
 * the largest clipped end (struct lanes4), merged at the step's end. */
struct lanes4 {
    __m256i first, second, top, top_q, ideal;
};

SF_AVX2_INLINE void whatif_group4(struct lanes4 *l, const int64_t *rows, const int64_t *basis,
                                  uint32_t R, uint32_t g, uint32_t S)
{
    static const int64_t no_row[8] = {0};
    uint32_t n = R - g < 4 ? R - g : 4, k_lo = S < 4 ? S : 4, k_hi = S > 4 ? S - 4 : 0;
    __m256i d_lo[4], d_hi[4], c_lo[4], c_hi[4];
    for (uint32_t r = 0; r < 4; r++) {
        const int64_t *d = r < n ? rows + (size_t)(g + r) * S : no_row;
        const int64_t *b = r < n ? basis + (size_t)(g + r) * S : no_row;
        d_lo[r] = sf__load4(d, k_lo);
        d_hi[r] = sf__load4(d + 4, k_hi);
        __m256i b_lo = sf__load4(b, k_lo), b_hi = sf__load4(b + 4, k_hi);
        c_lo[r] = sf__min4(d_lo[r], b_lo);
        c_hi[r] = sf__min4(d_hi[r], b_hi);
    }
    __m256i live = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_set_epi64x(3, 2, 1, 0));
    __m256i none = _mm256_set1_epi64x(INT64_MIN);
    __m256i p = _mm256_blendv_epi8(none, row_sums4(d_lo, d_hi), live);
    __m256i q = _mm256_blendv_epi8(none, row_sums4(c_lo, c_hi), live);
    __m256i x = _mm256_add_epi64(_mm256_set_epi64x(3, 2, 1, 0), _mm256_set1_epi64x(g));
    __m256i gt = _mm256_cmpgt_epi64(p, l->first);
    l->second = _mm256_blendv_epi8(sf__max4(l->second, p), l->first, gt);
    l->first = _mm256_blendv_epi8(l->first, p, gt);
    l->top = _mm256_blendv_epi8(l->top, x, gt);
    l->top_q = _mm256_blendv_epi8(l->top_q, q, gt);
    l->ideal = sf__max4(l->ideal, q);
}

SF_AVX2_INLINE void whatif_step_s(const int64_t *rows, const int64_t *basis, uint32_t R, uint32_t S,
                                  struct sf__whatif_lanes *ret)
{
    __m256i none = _mm256_set1_epi64x(INT64_MIN), zero = _mm256_setzero_si256();
    struct lanes4 l = {none, none, zero, zero, none};
    for (uint32_t g = 0; g < R; g += 4)
        whatif_group4(&l, rows, basis, R, g, S);
    _mm256_storeu_si256((__m256i *)ret->first, l.first);
    _mm256_storeu_si256((__m256i *)ret->second, l.second);
    _mm256_storeu_si256((__m256i *)ret->top, l.top);
    _mm256_storeu_si256((__m256i *)ret->top_q, l.top_q);
    _mm256_storeu_si256((__m256i *)ret->ideal, l.ideal);
}

SF_AVX2 uint32_t sf__whatif_step_avx2(const int64_t *rows, const int64_t *basis, uint32_t R,
                                      uint32_t S, struct sf__whatif_lanes *ret)
{
    SF__BY_STAGE_COUNT(S, S_, whatif_step_s(rows, basis, R, S_, ret))
    return 4;
}
#endif

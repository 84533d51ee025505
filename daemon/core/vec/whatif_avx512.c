/*
 * The what-if's clipped pass (whatif.c) in AVX-512, eight ranks a vector.
 */
#include "../core_internal.h"
#include "vec.h"

#ifdef SF_VEC_X86
#include <immintrin.h>

#include "forms.h"

/* The sums of eight vectors, one per lane in their order: pairs of lanes,
 * then of 128-bit quarters, then of halves, each a shuffle and an add. */
__attribute__((target("avx512f"))) static inline __m512i sums8(const __m512i *v)
{
    __m512i a[4], b[2];
    for (int i = 0; i < 4; i++)
        a[i] = _mm512_add_epi64(_mm512_unpacklo_epi64(v[2 * i], v[2 * i + 1]),
                                _mm512_unpackhi_epi64(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; i++)
        b[i] = _mm512_add_epi64(_mm512_shuffle_i64x2(a[2 * i], a[2 * i + 1], 0x88),
                                _mm512_shuffle_i64x2(a[2 * i], a[2 * i + 1], 0xdd));
    return _mm512_add_epi64(_mm512_shuffle_i64x2(b[0], b[1], 0x88),
                            _mm512_shuffle_i64x2(b[0], b[1], 0xdd));
}

/* The clipped model's pass over one step, eight ranks a vector: each row
 * and its basis one vector, clipped, the eight rows' sums then turned into
 * one vector of ends (sums8). Every lane keeps its own largest end, second
 * one, holder (the first of equals, as the scalar pass) and clipped end;
 * the lanes are then merged into the step's. The same integers as
 * whatif.c's scalar pass: only where no stage falls back to the cohort median. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
whatif_step_s(const int64_t *rows, const int64_t *basis, uint32_t R, uint32_t S,
              struct sf__whatif_lanes *ret)
{
    const __mmask8 stages = (__mmask8)((1u << S) - 1);
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    __m512i first = _mm512_set1_epi64(INT64_MIN), second = first, ideal = first;
    __m512i top = _mm512_setzero_si512(), top_q = top;
    for (uint32_t g = 0; g < R; g += 8) {
        uint32_t n = R - g < 8 ? R - g : 8;
        __mmask8 live = (__mmask8)((1u << n) - 1);
        __m512i d[8], c[8];
        for (uint32_t r = 0; r < 8; r++) {
            __mmask8 m = r < n ? stages : 0;
            size_t at = (size_t)(g + r) * S;
            d[r] = _mm512_maskz_loadu_epi64(m, rows + at);
            c[r] = _mm512_min_epi64(d[r], _mm512_maskz_loadu_epi64(m, basis + at));
        }
        __m512i p = sums8(d), q = sums8(c);
        __m512i x = _mm512_add_epi64(lane, _mm512_set1_epi64(g));
        __mmask8 gt = _mm512_mask_cmpgt_epi64_mask(live, p, first);
        second = _mm512_mask_max_epi64(second, live, second, p);
        second = _mm512_mask_mov_epi64(second, gt, first);
        first = _mm512_mask_mov_epi64(first, gt, p);
        top = _mm512_mask_mov_epi64(top, gt, x);
        top_q = _mm512_mask_mov_epi64(top_q, gt, q);
        ideal = _mm512_mask_max_epi64(ideal, live, ideal, q);
    }
    _mm512_storeu_si512(ret->first, first);
    _mm512_storeu_si512(ret->second, second);
    _mm512_storeu_si512(ret->top, top);
    _mm512_storeu_si512(ret->top_q, top_q);
    _mm512_storeu_si512(ret->ideal, ideal);
}

__attribute__((target("avx512f"))) uint32_t sf__whatif_step_avx512(const int64_t *rows,
                                                                   const int64_t *basis, uint32_t R,
                                                                   uint32_t S,
                                                                   struct sf__whatif_lanes *ret)
{
    SF__BY_STAGE_COUNT(S, S_, whatif_step_s(rows, basis, R, S_, ret));
    return 8;
}
#endif

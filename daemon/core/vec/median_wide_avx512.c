/*
 * The wide median's partitions in AVX-512 (median_wide.c): compress
 * instructions, eight values a compare, no branch on the data.
 */
#include "vec.h"

#ifdef SF_VEC_X86
#include <immintrin.h>

#include "forms.h"

__attribute__((target("avx512f"))) size_t sf__split_avx512(const int64_t *src, size_t n, int64_t p,
                                                           int64_t *lt, int64_t *ge,
                                                           int64_t *below_max)
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

__attribute__((target("avx512f"))) size_t
sf__split_equal_avx512(const int64_t *src, size_t n, int64_t p, int64_t *gt, size_t *ret_equal)
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

#endif

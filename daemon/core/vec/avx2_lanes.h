/*
 * Four int64 lanes in AVX2, as the core's AVX2 forms use them (fold_avx2.c,
 * whatif_avx2.c): AVX2 has no 64-bit max or min, so each is a compare and a
 * blend; and a row's part of fewer than 4 stages loads with zeros after it.
 * The helpers exist where SF_AVX2_LANES is defined (x86-64, GCC or clang).
 */
#ifndef SF_AVX2_LANES_H
#define SF_AVX2_LANES_H

#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SF_AVX2_LANES 1
#include <immintrin.h>

#define SF_AVX2 __attribute__((target("avx2")))
#define SF_AVX2_INLINE SF_AVX2 static inline __attribute__((always_inline))

/* The first n of 4 values at d (n a constant once inlined), zeros after;
 * nothing is read past them. */
SF_AVX2_INLINE __m256i sf__load4(const int64_t *d, uint32_t n)
{
    switch (n) {
    case 0:
        return _mm256_setzero_si256();
    case 1:
        return _mm256_zextsi128_si256(_mm_loadl_epi64((const __m128i *)d));
    case 2:
        return _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)d));
    case 3:
        return _mm256_maskload_epi64((const long long *)d, _mm256_set_epi64x(0, -1, -1, -1));
    default:
        return _mm256_loadu_si256((const __m256i *)d);
    }
}

SF_AVX2_INLINE __m256i sf__max4(__m256i a, __m256i b)
{
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a));
}

SF_AVX2_INLINE __m256i sf__min4(__m256i a, __m256i b)
{
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}

#endif
#endif

/*
 * The median network in AVX2: on 64-bit values the generic body compiled
 * for AVX2, and on 32-bit offsets register tiles of 8 lanes (the packing
 * into offsets serves the AVX-512 form too).
 */
#include "vec.h"

#ifdef SF_VEC_X86
#include <immintrin.h>

#include "avx2_lanes.h"
#include "forms.h"
#include "median_net.h"
#include "median_net_tiles.h"

SF_AVX2 void sf__net_sort_avx2(const sf__median_net *net, int64_t *v, size_t lanes)
{
    NET_BY_LANES(net, v, lanes, 0);
}

/* One column of 8 lanes of an aligned block of `wires` <= TILE_WIRES wires
 * of offsets, sorted in registers by tile_net as the AVX-512 form's
 * tile_sort does (16 wires, one vector each, fill AVX2's 16 registers; the
 * few the compiler spills cost far less than a load and a store of both
 * wires per comparator). Wires past the block's end hold the largest
 * offset and are never stored. */
SF_AVX2_INLINE void tile_sort_narrow(uint32_t *col, uint32_t wires)
{
    __m256i w[TILE_WIRES];
#pragma GCC unroll 16
    for (uint32_t i = 0; i < TILE_WIRES; i++)
        w[i] = i < wires ? _mm256_loadu_si256((const __m256i *)(col + (size_t)i * NARROW_LANES))
                         : _mm256_set1_epi32(-1);
    TILE_NET_SWEEP(w, _mm256_min_epu32, _mm256_max_epu32);
#pragma GCC unroll 16
    for (uint32_t i = 0; i < TILE_WIRES; i++)
        if (i < wires)
            _mm256_storeu_si256((__m256i *)(col + (size_t)i * NARROW_LANES), w[i]);
}

/* Both halves of a column of NARROW_LANES offsets: two tiles of 8 lanes. */
SF_AVX2_INLINE void tile_sort_narrow_column(uint32_t *col, uint32_t wires)
{
    tile_sort_narrow(col, wires);
    tile_sort_narrow(col + 8, wires);
}

/* Two vectors of 8 lanes a wire, in intrinsics: the compiler's own
 * vectorizer leaves this loop scalar. The rounds below TILE_WIRES in
 * register tiles, the rest comparator by comparator. */
SF_AVX2 static void net_body_narrow(const sf__median_net *net, uint32_t *v)
{
    _Static_assert(NARROW_LANES == 16, "two vectors of 8 lanes");
    for (uint32_t b = 0; b < net->n; b += TILE_WIRES) {
        uint32_t wires = net->n - b < TILE_WIRES ? net->n - b : TILE_WIRES;
        tile_sort_narrow_column(v + (size_t)b * NARROW_LANES, wires);
    }
    for (uint32_t c = net->n_below[BELOW_TILES]; c < net->n_cmp; c++) {
        __m256i *a = (__m256i *)(v + (size_t)net->cmp[c][0] * NARROW_LANES);
        __m256i *b = (__m256i *)(v + (size_t)net->cmp[c][1] * NARROW_LANES);
        __m256i a0 = _mm256_loadu_si256(a), a1 = _mm256_loadu_si256(a + 1);
        __m256i b0 = _mm256_loadu_si256(b), b1 = _mm256_loadu_si256(b + 1);
        _mm256_storeu_si256(a, _mm256_min_epu32(a0, b0));
        _mm256_storeu_si256(a + 1, _mm256_min_epu32(a1, b1));
        _mm256_storeu_si256(b, _mm256_max_epu32(a0, b0));
        _mm256_storeu_si256(b + 1, _mm256_max_epu32(a1, b1));
    }
}

/* Series l0 .. l0 + w (w < NARROW_LANES) as offsets from their bases
 * (base: each first value less 2^31) into `to`, padded with zeros; false
 * where a value lies outside 32 bits of offset. Modulo 2^64, in unsigned
 * arithmetic: exact for series whose values differ by less than 2^63, as
 * their medians' hi - lo needs anyway. */
static bool pack_part(const sf__median_net *net, const int64_t *v, size_t stride, size_t l0,
                      size_t w, uint32_t *to, int64_t *base)
{
    uint64_t span = 0;
    for (size_t l = 0; l < NARROW_LANES; l++)
        base[l] = l < w ? (int64_t)((uint64_t)v[l0 + l] - (uint64_t)NARROW_HALF) : 0;
    for (uint32_t t = 0; t < net->n; t++)
        for (size_t l = 0; l < NARROW_LANES; l++) {
            uint64_t off = l < w ? (uint64_t)v[t * stride + l0 + l] - (uint64_t)base[l] : 0;
            span |= off;
            to[t * NARROW_LANES + l] = (uint32_t)off;
        }
    return span <= UINT32_MAX;
}

/* The low halves of two vectors of 4 offsets, in order, as 8 lanes. */
SF_AVX2_INLINE __m256i narrow8(__m256i x, __m256i y)
{
    const __m256i evens = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    __m256i lo = _mm256_permutevar8x32_epi32(x, evens), hi = _mm256_permutevar8x32_epi32(y, evens);
    return _mm256_blend_epi32(lo, hi, 0xF0);
}

/* pack_part for a whole run of NARROW_LANES series, in intrinsics: four
 * vectors of 4 values a wire. A value below its base wraps to an offset of
 * 64 bits, so the test of the high halves catches both sides. */
SF_AVX2 static bool pack_full(const sf__median_net *net, const int64_t *v, size_t stride, size_t l0,
                              uint32_t *to, int64_t *base)
{
    __m256i lo[4], span = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++)
        lo[j] = _mm256_sub_epi64(_mm256_loadu_si256((const __m256i *)(v + l0) + j),
                                 _mm256_set1_epi64x(NARROW_HALF));
    for (uint32_t t = 0; t < net->n; t++) {
        __m256i off[4];
        const int64_t *step = v + t * stride + l0;
        if (stride > NARROW_LANES && t + NARROW_AHEAD < net->n) {
            __builtin_prefetch(step + NARROW_AHEAD * stride);
            __builtin_prefetch(step + NARROW_AHEAD * stride + NARROW_LANES - 1);
        }
        for (int j = 0; j < 4; j++) {
            off[j] = _mm256_sub_epi64(_mm256_loadu_si256((const __m256i *)step + j), lo[j]);
            span = _mm256_or_si256(span, off[j]);
        }
        __m256i *row = (__m256i *)(to + t * NARROW_LANES);
        _mm256_storeu_si256(row, narrow8(off[0], off[1]));
        _mm256_storeu_si256(row + 1, narrow8(off[2], off[3]));
    }
    for (int j = 0; j < 4; j++)
        _mm256_storeu_si256((__m256i *)base + j, lo[j]);
    return _mm256_testz_si256(_mm256_srli_epi64(span, 32), _mm256_set1_epi64x(-1));
}

SF_AVX2 bool sf__net_narrow_run(const sf__median_net *net, sf__net_narrow_body *body,
                                const int64_t *v, size_t stride, size_t lanes, int64_t *ret_median)
{
    uint32_t w32[SF__MEDIAN_NET_MAX * NARROW_LANES];
    int64_t base[NARROW_LANES];
    for (size_t l0 = 0; l0 < lanes; l0 += NARROW_LANES) {
        size_t w = lanes - l0 < NARROW_LANES ? lanes - l0 : NARROW_LANES;
        if (!(w == NARROW_LANES ? pack_full(net, v, stride, l0, w32, base)
                                : pack_part(net, v, stride, l0, w, w32, base)))
            return false;
        body(net, w32);
        const uint32_t *hi = w32 + (size_t)(net->n / 2) * NARROW_LANES;
        const uint32_t *lo = net->n % 2 ? hi : hi - NARROW_LANES;
        for (size_t l = 0; l < w; l++) /* lo + (hi - lo) / 2 of the values themselves */
            ret_median[l0 + l] = (int64_t)((uint64_t)base[l] + lo[l] + (hi[l] - lo[l]) / 2);
    }
    return true;
}

bool sf__net_narrow_avx2(const sf__median_net *net, const int64_t *v, size_t stride, size_t lanes,
                         int64_t *ret_median)
{
    return sf__net_narrow_run(net, net_body_narrow, v, stride, lanes, ret_median);
}

/* The AVX2 form has the tile pass alone: a target function, so that the
 * tile inlines. */
SF_AVX2 bool sf__net_pass_avx2(enum sf__net_pass pass, uint32_t *col, uint32_t wires)
{
    if (pass != SF__NET_PASS_TILE)
        return false;
    tile_sort_narrow_column(col, wires);
    return true;
}
#endif

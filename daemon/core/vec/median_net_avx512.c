/*
 * The median network in AVX-512: on 64-bit values register tiles of 8
 * lanes for the first rounds, then the generic body compiled for AVX-512;
 * on 32-bit offsets (packed by the AVX2 form) one vector a wire, with the
 * rounds up to p = 32 in registers.
 */
#include "vec.h"

#ifdef SF_VEC_X86
#include <immintrin.h>

#include "forms.h"
#include "median_net.h"
#include "median_net_tiles.h"

/* batcher()'s round p = 16 on 32 wires: the merge that joins two sorted
 * tiles into one sorted pair of tiles (tile_sort_pair512). */
static const uint8_t tile_merge[65][2] = {
    {0, 16},  {1, 17},  {2, 18},  {3, 19},  {4, 20},  {5, 21},  {6, 22},  {7, 23},  {8, 24},
    {9, 25},  {10, 26}, {11, 27}, {12, 28}, {13, 29}, {14, 30}, {15, 31}, {8, 16},  {9, 17},
    {10, 18}, {11, 19}, {12, 20}, {13, 21}, {14, 22}, {15, 23}, {4, 8},   {5, 9},   {6, 10},
    {7, 11},  {12, 16}, {13, 17}, {14, 18}, {15, 19}, {20, 24}, {21, 25}, {22, 26}, {23, 27},
    {2, 4},   {3, 5},   {6, 8},   {7, 9},   {10, 12}, {11, 13}, {14, 16}, {15, 17}, {18, 20},
    {19, 21}, {22, 24}, {23, 25}, {26, 28}, {27, 29}, {1, 2},   {3, 4},   {5, 6},   {7, 8},
    {9, 10},  {11, 12}, {13, 14}, {15, 16}, {17, 18}, {19, 20}, {21, 22}, {23, 24}, {25, 26},
    {27, 28}, {29, 30}};

/* With AVX-512, a wire's NARROW_LANES offsets are one vector: half the
 * loads, stores and min/max of the AVX2 body for the same comparators, and
 * a tile of 16 wires takes half of AVX-512's 32 registers. */
#define SF_AVX512_NARROW __attribute__((target("avx512f")))

SF_AVX512_NARROW static inline __attribute__((always_inline)) void
tile_sort_narrow512(uint32_t *col, uint32_t wires)
{
    __m512i w[TILE_WIRES];
#pragma GCC unroll 16
    for (uint32_t i = 0; i < TILE_WIRES; i++)
        w[i] =
            i < wires ? _mm512_loadu_si512(col + (size_t)i * NARROW_LANES) : _mm512_set1_epi32(-1);
    TILE_NET_SWEEP(w, _mm512_min_epu32, _mm512_max_epu32);
#pragma GCC unroll 16
    for (uint32_t i = 0; i < TILE_WIRES; i++)
        if (i < wires)
            _mm512_storeu_si512(col + (size_t)i * NARROW_LANES, w[i]);
}

/* Two tiles at once, 32 wires in AVX-512's 32 registers: each tile sorted,
 * then merged, so that the round p = 16 too is done in registers rather
 * than a load and a store of both wires per comparator. */
SF_AVX512_NARROW static inline __attribute__((always_inline)) void tile_sort_pair512(uint32_t *col,
                                                                                     uint32_t wires)
{
    __m512i w[2 * TILE_WIRES];
#pragma GCC unroll 32
    for (uint32_t i = 0; i < 2 * TILE_WIRES; i++)
        w[i] =
            i < wires ? _mm512_loadu_si512(col + (size_t)i * NARROW_LANES) : _mm512_set1_epi32(-1);
    TILE_NET_SWEEP(w, _mm512_min_epu32, _mm512_max_epu32);
    TILE_NET_SWEEP(w + TILE_WIRES, _mm512_min_epu32, _mm512_max_epu32);
    NET_SWEEP(tile_merge, w, _mm512_min_epu32, _mm512_max_epu32);
#pragma GCC unroll 32
    for (uint32_t i = 0; i < 2 * TILE_WIRES; i++)
        if (i < wires)
            _mm512_storeu_si512(col + (size_t)i * NARROW_LANES, w[i]);
}

/* batcher()'s round p = 32 on a block of 64 wires, two sorted blocks of 32,
 * in two passes, each of which loads and stores a wire once, instead of
 * once per comparator. Its steps k = 32, 16 and 8 never leave a group of the
 * wires b + r + 8 a (r < 8, a < 8): on a group they are the merge of its
 * two sorted halves, merge_4x4. */
static const uint8_t merge_4x4[9][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {2, 4},
                                        {3, 5}, {1, 2}, {3, 4}, {5, 6}};

/* Its steps k = 4, 2 and 1 join only wires less than 8 apart: this
 * program runs them in one sweep up the block, each wire loaded into one
 * of 16 registers before its first comparator and stored after its last
 * (wires 0 and 63 have none). An op is {SWEEP_LOAD, register, wire},
 * {SWEEP_CMP, register, register} or {SWEEP_STORE, register, wire}. It was
 * made by loading 8 wires at a time, then running every comparator of the
 * steps whose wires are loaded and whose earlier comparators have run,
 * storing a wire after its last, into the lowest free register (at most
 * 15 are taken; test_fold's network_passes_sort checks the round as a
 * sorter). */
enum { SWEEP_LOAD, SWEEP_CMP, SWEEP_STORE, SWEEP_REGISTERS = 16 };
static const uint8_t round32_sweep[][3] = {
    {0, 0, 1},   {0, 1, 2},   {0, 2, 3},   {0, 3, 4},   {0, 4, 5},   {0, 5, 6},   {0, 6, 7},
    {0, 7, 8},   {0, 8, 9},   {0, 9, 10},  {0, 10, 11}, {0, 11, 12}, {0, 12, 13}, {0, 13, 14},
    {0, 14, 15}, {1, 3, 7},   {1, 4, 8},   {1, 5, 9},   {1, 6, 10},  {1, 1, 3},   {1, 2, 4},
    {1, 5, 7},   {1, 6, 8},   {1, 0, 1},   {2, 0, 1},   {2, 1, 2},   {1, 2, 3},   {2, 2, 3},
    {2, 3, 4},   {1, 4, 5},   {2, 4, 5},   {2, 5, 6},   {1, 6, 7},   {2, 6, 7},   {2, 7, 8},
    {0, 0, 16},  {0, 1, 17},  {0, 2, 18},  {0, 3, 19},  {0, 4, 20},  {0, 5, 21},  {0, 6, 22},
    {0, 7, 23},  {1, 11, 0},  {1, 12, 1},  {1, 13, 2},  {1, 14, 3},  {1, 9, 11},  {1, 10, 12},
    {1, 13, 0},  {1, 14, 1},  {1, 8, 9},   {2, 8, 9},   {2, 9, 10},  {1, 10, 11}, {2, 10, 11},
    {2, 11, 12}, {1, 12, 13}, {2, 12, 13}, {2, 13, 14}, {1, 14, 0},  {2, 14, 15}, {2, 0, 16},
    {0, 0, 24},  {0, 8, 25},  {0, 9, 26},  {0, 10, 27}, {0, 11, 28}, {0, 12, 29}, {0, 13, 30},
    {0, 14, 31}, {1, 4, 0},   {1, 5, 8},   {1, 6, 9},   {1, 7, 10},  {1, 2, 4},   {1, 3, 5},
    {1, 6, 0},   {1, 7, 8},   {1, 1, 2},   {2, 1, 17},  {2, 2, 18},  {1, 3, 4},   {2, 3, 19},
    {2, 4, 20},  {1, 5, 6},   {2, 5, 21},  {2, 6, 22},  {1, 7, 0},   {2, 7, 23},  {2, 0, 24},
    {0, 0, 32},  {0, 1, 33},  {0, 2, 34},  {0, 3, 35},  {0, 4, 36},  {0, 5, 37},  {0, 6, 38},
    {0, 7, 39},  {1, 11, 0},  {1, 12, 1},  {1, 13, 2},  {1, 14, 3},  {1, 9, 11},  {1, 10, 12},
    {1, 13, 0},  {1, 14, 1},  {1, 8, 9},   {2, 8, 25},  {2, 9, 26},  {1, 10, 11}, {2, 10, 27},
    {2, 11, 28}, {1, 12, 13}, {2, 12, 29}, {2, 13, 30}, {1, 14, 0},  {2, 14, 31}, {2, 0, 32},
    {0, 0, 40},  {0, 8, 41},  {0, 9, 42},  {0, 10, 43}, {0, 11, 44}, {0, 12, 45}, {0, 13, 46},
    {0, 14, 47}, {1, 4, 0},   {1, 5, 8},   {1, 6, 9},   {1, 7, 10},  {1, 2, 4},   {1, 3, 5},
    {1, 6, 0},   {1, 7, 8},   {1, 1, 2},   {2, 1, 33},  {2, 2, 34},  {1, 3, 4},   {2, 3, 35},
    {2, 4, 36},  {1, 5, 6},   {2, 5, 37},  {2, 6, 38},  {1, 7, 0},   {2, 7, 39},  {2, 0, 40},
    {0, 0, 48},  {0, 1, 49},  {0, 2, 50},  {0, 3, 51},  {0, 4, 52},  {0, 5, 53},  {0, 6, 54},
    {0, 7, 55},  {1, 11, 0},  {1, 12, 1},  {1, 13, 2},  {1, 14, 3},  {1, 9, 11},  {1, 10, 12},
    {1, 13, 0},  {1, 14, 1},  {1, 8, 9},   {2, 8, 41},  {2, 9, 42},  {1, 10, 11}, {2, 10, 43},
    {2, 11, 44}, {1, 12, 13}, {2, 12, 45}, {2, 13, 46}, {1, 14, 0},  {2, 14, 47}, {2, 0, 48},
    {0, 0, 56},  {0, 8, 57},  {0, 9, 58},  {0, 10, 59}, {0, 11, 60}, {0, 12, 61}, {0, 13, 62},
    {1, 4, 0},   {1, 5, 8},   {1, 6, 9},   {1, 7, 10},  {1, 2, 4},   {1, 3, 5},   {1, 6, 0},
    {1, 7, 8},   {1, 9, 11},  {1, 10, 12}, {1, 1, 2},   {2, 1, 49},  {2, 2, 50},  {1, 3, 4},
    {2, 3, 51},  {2, 4, 52},  {1, 5, 6},   {2, 5, 53},  {2, 6, 54},  {1, 7, 0},   {2, 7, 55},
    {2, 0, 56},  {1, 8, 9},   {2, 8, 57},  {2, 9, 58},  {1, 10, 11}, {2, 10, 59}, {2, 11, 60},
    {1, 12, 13}, {2, 12, 61}, {2, 13, 62}};

SF_AVX512_NARROW static inline __attribute__((always_inline)) void round32_groups512(uint32_t *col,
                                                                                     uint32_t wires)
{
#pragma GCC unroll 8
    for (uint32_t r = 0; r < 8; r++) {
        __m512i g[8];
#pragma GCC unroll 8
        for (uint32_t a = 0; a < 8; a++)
            g[a] = r + 8 * a < wires ? _mm512_loadu_si512(col + (size_t)(r + 8 * a) * NARROW_LANES)
                                     : _mm512_set1_epi32(-1);
        NET_SWEEP(merge_4x4, g, _mm512_min_epu32, _mm512_max_epu32);
#pragma GCC unroll 8
        for (uint32_t a = 0; a < 8; a++)
            if (r + 8 * a < wires)
                _mm512_storeu_si512(col + (size_t)(r + 8 * a) * NARROW_LANES, g[a]);
    }
}

SF_AVX512_NARROW static inline __attribute__((always_inline)) void round32_sweep512(uint32_t *col,
                                                                                    uint32_t wires)
{
    __m512i w[SWEEP_REGISTERS];
#pragma GCC unroll 256
    for (uint32_t i = 0; i < sizeof round32_sweep / sizeof round32_sweep[0]; i++) {
        uint32_t x = round32_sweep[i][1], y = round32_sweep[i][2];
        if (round32_sweep[i][0] == SWEEP_LOAD) {
            w[x] = y < wires ? _mm512_loadu_si512(col + (size_t)y * NARROW_LANES)
                             : _mm512_set1_epi32(-1);
        } else if (round32_sweep[i][0] == SWEEP_CMP) {
            __m512i lo = _mm512_min_epu32(w[x], w[y]);
            w[y] = _mm512_max_epu32(w[x], w[y]);
            w[x] = lo;
        } else if (y < wires) {
            _mm512_storeu_si512(col + (size_t)y * NARROW_LANES, w[x]);
        }
    }
}

/* The round on a block of more than 2 TILE_WIRES wires (fewer are sorted
 * whole by their tiles, which is what the round would leave them). */
SF_AVX512_NARROW static void round32_512(uint32_t *col, uint32_t wires)
{
    round32_groups512(col, wires);
    round32_sweep512(col, wires);
}

/* A last block of at most TILE_WIRES wires is sorted whole by one tile,
 * which is what the rounds below 2 TILE_WIRES do to it. */
SF_AVX512_NARROW static void net_body_narrow512(const sf__median_net *net, uint32_t *v)
{
    _Static_assert(NARROW_LANES == 16, "one vector of 16 lanes");
    for (uint32_t b = 0; b < net->n; b += 2 * TILE_WIRES) {
        uint32_t wires = net->n - b;
        if (wires > TILE_WIRES)
            tile_sort_pair512(v + (size_t)b * NARROW_LANES,
                              wires < 2 * TILE_WIRES ? wires : 2 * TILE_WIRES);
        else
            tile_sort_narrow512(v + (size_t)b * NARROW_LANES, wires);
    }
    for (uint32_t b = 0; b < net->n; b += 4 * TILE_WIRES)
        if (net->n - b > 2 * TILE_WIRES)
            round32_512(v + (size_t)b * NARROW_LANES,
                        net->n - b < 4 * TILE_WIRES ? net->n - b : 4 * TILE_WIRES);
    for (uint32_t c = net->n_below[BELOW_ROUND32]; c < net->n_cmp; c++) {
        uint32_t *a = v + (size_t)net->cmp[c][0] * NARROW_LANES;
        uint32_t *b = v + (size_t)net->cmp[c][1] * NARROW_LANES;
        __m512i x = _mm512_loadu_si512(a), y = _mm512_loadu_si512(b);
        _mm512_storeu_si512(a, _mm512_min_epu32(x, y));
        _mm512_storeu_si512(b, _mm512_max_epu32(x, y));
    }
}

bool sf__net_narrow_avx512(const sf__median_net *net, const int64_t *v, size_t stride, size_t lanes,
                           int64_t *ret_median)
{
    return sf__net_narrow_run(net, net_body_narrow512, v, stride, lanes, ret_median);
}

/* One register pass on a column of NARROW_LANES series: a target
 * function, so that the passes inline. */
SF_AVX512_NARROW bool sf__net_pass_avx512(enum sf__net_pass pass, uint32_t *col, uint32_t wires)
{
    if (pass == SF__NET_PASS_TILE)
        tile_sort_narrow512(col, wires);
    else if (pass == SF__NET_PASS_PAIR)
        tile_sort_pair512(col, wires);
    else
        round32_512(col, wires);
    return true;
}

/* One column of up to 8 lanes of an aligned block of `wires` <= TILE_WIRES
 * wires, sorted in registers by tile_net (the loop unrolls into straight
 * min/max code on registers); wires past the block's end hold +infinity and
 * are never stored. */
__attribute__((target("avx512f"))) static inline void tile_sort(int64_t *col, size_t lanes,
                                                                uint32_t wires, __mmask8 m)
{
    __m512i w[TILE_WIRES];
#pragma GCC unroll 16
    for (uint32_t i = 0; i < TILE_WIRES; i++)
        w[i] = i < wires ? _mm512_mask_loadu_epi64(_mm512_set1_epi64(INT64_MAX), m,
                                                   col + (size_t)i * lanes)
                         : _mm512_set1_epi64(INT64_MAX);
    TILE_NET_SWEEP(w, _mm512_min_epi64, _mm512_max_epi64);
#pragma GCC unroll 16
    for (uint32_t i = 0; i < TILE_WIRES; i++)
        if (i < wires)
            _mm512_mask_storeu_epi64(col + (size_t)i * lanes, m, w[i]);
}

__attribute__((target("avx512f"))) void sf__net_sort_avx512(const sf__median_net *net, int64_t *v,
                                                            size_t lanes)
{
    for (uint32_t b = 0; b < net->n; b += TILE_WIRES) {
        uint32_t wires = net->n - b < TILE_WIRES ? net->n - b : TILE_WIRES;
        for (size_t l = 0; l < lanes; l += 8) {
            __mmask8 m = lanes - l >= 8 ? 0xff : (__mmask8)((1u << (lanes - l)) - 1);
            tile_sort(v + (size_t)b * lanes + l, lanes, wires, m);
        }
    }
    NET_BY_LANES(net, v, lanes, net->n_below[BELOW_TILES])
}
#endif

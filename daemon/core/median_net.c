/*
 * Many medians of the same count at once, by a pruned selection network run
 * across lanes (one lane per series): every rank's median over the steps of a
 * grid window. Branchless and exact (the same values as sf_median_i64). It
 * must not be used where no vector unit makes it pay (sf__median_net_pays).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

/* The rounds of Batcher's sort below TILE_WIRES sort each aligned block of
 * TILE_WIRES wires and never cross one: with AVX-512 a block's column of 8
 * lanes fits in registers and is sorted there, loaded and stored once,
 * instead of every comparator loading and storing its two wires. */
enum { TILE_WIRES = 16 };

struct sf__median_net {
    uint32_t n;
    uint32_t n_cmp;
    uint32_t n_tiled;   /* the first n_tiled comparators: the rounds below TILE_WIRES */
    uint16_t (*cmp)[2]; /* compare-exchanges, in order: min to [0], max to [1] */
};

/* Batcher's odd-even merge sort on n wires, its rounds p < p_end: the
 * iterative form for a power of two, with every comparator that touches a
 * wire at or above n left out. That is exact for any n: those wires would
 * hold +infinity, and every comparator keeps its minimum on its lower wire,
 * so they never move. */
static uint32_t batcher(uint32_t n, uint32_t p_end, uint16_t (*out)[2])
{
    uint32_t m = 0;
    for (uint32_t p = 1; p < n && p < p_end; p <<= 1)
        for (uint32_t k = p; k >= 1; k >>= 1)
            for (uint32_t j = k % p; j + k < n; j += 2 * k)
                for (uint32_t i = 0; i < k && i + j + k < n; i++)
                    /* both wires in one block of 2p (a power of two): no
                     * bit at or above 2p differs; a division per test made
                     * this the cost of a small window's medians */
                    if (((i + j) ^ (i + j + k)) < 2 * p) {
                        if (out != NULL) {
                            out[m][0] = (uint16_t)(i + j);
                            out[m][1] = (uint16_t)(i + j + k);
                        }
                        m++;
                    }
    return m;
}

/* Keeps only the comparators whose outputs can still reach the median's
 * wires (n/2, and n/2 - 1 when n is even), walking the network backwards.
 * Of the first `tiled` comparators, *ret_tiled are kept. */
static uint32_t prune(uint32_t n, uint16_t (*cmp)[2], uint32_t n_cmp, uint32_t tiled,
                      uint32_t *ret_tiled)
{
    *ret_tiled = 0;
    bool need[SF__MEDIAN_NET_MAX] = {false};
    need[n / 2] = true;
    if (n % 2 == 0)
        need[n / 2 - 1] = true;
    uint32_t kept = 0;
    for (uint32_t c = n_cmp; c-- > 0;) {
        uint16_t a = cmp[c][0], b = cmp[c][1];
        if (!need[a] && !need[b])
            continue;
        need[a] = need[b] = true;
        *ret_tiled += c < tiled;
        cmp[n_cmp - 1 - kept][0] = a;
        cmp[n_cmp - 1 - kept][1] = b;
        kept++;
    }
    memmove(cmp, cmp + (n_cmp - kept), kept * sizeof *cmp);
    return kept;
}

int sf__median_net_new(uint32_t n, sf__median_net **ret)
{
    if (n == 0 || n > SF__MEDIAN_NET_MAX || ret == NULL)
        return -EINVAL;
    sf__median_net *net = calloc(1, sizeof *net);
    uint32_t total = batcher(n, UINT32_MAX, NULL);
    if (net == NULL || (net->cmp = malloc((total ? total : 1) * sizeof *net->cmp)) == NULL) {
        free(net);
        return -ENOMEM;
    }
    batcher(n, UINT32_MAX, net->cmp);
    net->n = n;
    net->n_cmp = prune(n, net->cmp, total, batcher(n, TILE_WIRES, NULL), &net->n_tiled);
    *ret = net;
    return 0;
}

void sf__median_net_free(sf__median_net *net)
{
    if (net == NULL)
        return;
    free(net->cmp);
    free(net);
}

/* One body, compiled once per instruction set: the lane loop is what the
 * compiler turns into vector min and max. */
static inline __attribute__((always_inline)) void net_body(const sf__median_net *net, int64_t *v,
                                                           size_t lanes, uint32_t first)
{
    for (uint32_t c = first; c < net->n_cmp; c++) {
        int64_t *restrict a = v + (size_t)net->cmp[c][0] * lanes;
        int64_t *restrict b = v + (size_t)net->cmp[c][1] * lanes;
        for (size_t l = 0; l < lanes; l++) {
            int64_t x = a[l], y = b[l];
            a[l] = x < y ? x : y;
            b[l] = x < y ? y : x;
        }
    }
}

/* Whole groups of ranks have 8 S lanes: with the count a constant, the lane
 * loop unrolls into straight vector code, no branch per comparator. */
#define NET_BY_LANES(net, v, lanes, first)                                                         \
    switch (lanes) {                                                                               \
    case 48:                                                                                       \
        net_body(net, v, 48, first);                                                               \
        break;                                                                                     \
    case 56:                                                                                       \
        net_body(net, v, 56, first);                                                               \
        break;                                                                                     \
    case 64:                                                                                       \
        net_body(net, v, 64, first);                                                               \
        break;                                                                                     \
    default:                                                                                       \
        net_body(net, v, lanes, first);                                                            \
        break;                                                                                     \
    }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SF_NET_X86 1
#include <immintrin.h>

__attribute__((target("avx2"))) static void run_avx2(const sf__median_net *net, int64_t *v,
                                                     size_t lanes)
{
    NET_BY_LANES(net, v, lanes, 0)
}

/* batcher()'s rounds p < 16 on 16 wires, written out: with constant wire
 * numbers the compiler keeps all 16 wires of a tile in registers, which a
 * table built at run time would not allow (test_fold checks the result
 * against a sort). */
static const uint8_t tile_net[63][2] = {
    {0, 1},   {2, 3},   {4, 5}, {6, 7},   {8, 9},   {10, 11}, {12, 13}, {14, 15}, {0, 2},
    {1, 3},   {4, 6},   {5, 7}, {8, 10},  {9, 11},  {12, 14}, {13, 15}, {1, 2},   {5, 6},
    {9, 10},  {13, 14}, {0, 4}, {1, 5},   {2, 6},   {3, 7},   {8, 12},  {9, 13},  {10, 14},
    {11, 15}, {2, 4},   {3, 5}, {10, 12}, {11, 13}, {1, 2},   {3, 4},   {5, 6},   {9, 10},
    {11, 12}, {13, 14}, {0, 8}, {1, 9},   {2, 10},  {3, 11},  {4, 12},  {5, 13},  {6, 14},
    {7, 15},  {4, 8},   {5, 9}, {6, 10},  {7, 11},  {2, 4},   {3, 5},   {6, 8},   {7, 9},
    {10, 12}, {11, 13}, {1, 2}, {3, 4},   {5, 6},   {7, 8},   {9, 10},  {11, 12}, {13, 14}};

/* One column of up to 8 lanes of an aligned block of `wires` <= TILE_WIRES
 * wires, sorted in registers by tile_net (the loop unrolls into straight
 * min/max code on registers); wires past the block's end hold +infinity and
 * are never stored. */
__attribute__((target("avx512f"))) static inline void tile_sort(int64_t *col, size_t lanes,
                                                                uint32_t wires, __mmask8 m)
{
    __m512i w[TILE_WIRES];
    for (uint32_t i = 0; i < TILE_WIRES; i++)
        w[i] = i < wires ? _mm512_mask_loadu_epi64(_mm512_set1_epi64(INT64_MAX), m,
                                                   col + (size_t)i * lanes)
                         : _mm512_set1_epi64(INT64_MAX);
#pragma GCC unroll 64
    for (uint32_t c = 0; c < 63; c++) {
        __m512i lo = _mm512_min_epi64(w[tile_net[c][0]], w[tile_net[c][1]]);
        w[tile_net[c][1]] = _mm512_max_epi64(w[tile_net[c][0]], w[tile_net[c][1]]);
        w[tile_net[c][0]] = lo;
    }
    for (uint32_t i = 0; i < wires; i++)
        _mm512_mask_storeu_epi64(col + (size_t)i * lanes, m, w[i]);
}

__attribute__((target("avx512f"))) static void run_avx512(const sf__median_net *net, int64_t *v,
                                                          size_t lanes)
{
    for (uint32_t b = 0; b < net->n; b += TILE_WIRES) {
        uint32_t wires = net->n - b < TILE_WIRES ? net->n - b : TILE_WIRES;
        for (size_t l = 0; l < lanes; l += 8) {
            __mmask8 m = lanes - l >= 8 ? 0xff : (__mmask8)((1u << (lanes - l)) - 1);
            tile_sort(v + (size_t)b * lanes + l, lanes, wires, m);
        }
    }
    NET_BY_LANES(net, v, lanes, net->n_tiled)
}
#endif

bool sf__isa_present(enum sf__net_isa isa)
{
    switch (isa) {
    case SF__NET_GENERIC:
        return true;
#ifdef SF_NET_X86
    case SF__NET_AVX2:
        return __builtin_cpu_supports("avx2");
    case SF__NET_AVX512:
        return __builtin_cpu_supports("avx512f");
#endif
    default:
        return false;
    }
}

enum sf__net_isa sf__median_net_best(void)
{
    if (sf__isa_present(SF__NET_AVX512))
        return SF__NET_AVX512;
    if (sf__isa_present(SF__NET_AVX2))
        return SF__NET_AVX2;
    return SF__NET_GENERIC;
}

bool sf__median_net_pays(void)
{
    return sf__median_net_best() != SF__NET_GENERIC;
}

int sf__median_net_run(const sf__median_net *net, enum sf__net_isa isa, int64_t *v, size_t lanes,
                       int64_t *ret_median)
{
    if (!sf__isa_present(isa))
        return -ENOTSUP;
    switch (isa) {
#ifdef SF_NET_X86
    case SF__NET_AVX512:
        run_avx512(net, v, lanes);
        break;
    case SF__NET_AVX2:
        run_avx2(net, v, lanes);
        break;
#endif
    default:
        net_body(net, v, lanes, 0);
        break;
    }
    const int64_t *hi = v + (size_t)(net->n / 2) * lanes;
    const int64_t *lo = net->n % 2 ? hi : hi - lanes;
    for (size_t l = 0; l < lanes; l++)
        ret_median[l] = lo[l] + (hi[l] - lo[l]) / 2;
    return 0;
}

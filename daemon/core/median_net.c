/*
 * Many medians of the same count at once, by a pruned selection network run
 * across lanes (one lane per series): every rank's median over the steps of a
 * grid window. Branchless and exact (the same values as sf_median_i64). It
 * must not be used where no vector unit makes it pay (sf__median_net_pays).
 * Its forms: AVX-512 (register tiles for the first rounds, then 8 lanes an
 * instruction), AVX-512 and AVX2 on 32-bit offsets where the series' spans
 * allow (register tiles too), both on 64 bits where they do not, and the
 * generic loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "avx2_lanes.h"
#include "core_internal.h"

/* lo + (hi - lo) / 2 of two sorted values, in unsigned arithmetic: exact
 * for any int64 lo <= hi, so the networks are defined for whatever values
 * they meet (the grid fold checks a window's durations after its medians
 * are taken: docs/ACCOUNTING.md, "Exactness"). */
static inline int64_t median_of_middle(int64_t lo, int64_t hi)
{
    return (int64_t)((uint64_t)lo + ((uint64_t)hi - (uint64_t)lo) / 2);
}

/* The rounds of Batcher's sort below TILE_WIRES sort each aligned block of
 * TILE_WIRES wires and never cross one: a block's column of 8 lanes (64-bit
 * values with AVX-512, 32-bit offsets with AVX2) fits in registers and is
 * sorted there, loaded and stored once, instead of every comparator loading
 * and storing its two wires. */
enum { TILE_WIRES = 16 };

/* The rounds a body runs in registers: those of its tiles (every form), and
 * with AVX-512 on offsets, also those of its pairs of tiles and the round
 * p = 32 (net_body_narrow512). */
enum { BELOW_TILES, BELOW_ROUND32, BELOW_LEVELS };
static const uint32_t ROUNDS_BELOW[BELOW_LEVELS] = {TILE_WIRES, 4 * TILE_WIRES};

struct sf__median_net {
    uint32_t n;
    uint32_t n_cmp;
    /* the first n_below[i] comparators: the rounds p < ROUNDS_BELOW[i],
     * which a body runs in registers */
    uint32_t n_below[BELOW_LEVELS];
    uint16_t (*cmp)[2]; /* compare-exchanges, in order: min to [0], max to [1] */
};

/* Comparators of Batcher's sort on 2^8 wires, (8^2 - 8 + 4) 2^6 - 1: the
 * most batcher() writes for n <= SF__MEDIAN_NET_MAX. */
enum { BATCHER_MAX = 3839 };
_Static_assert(SF__MEDIAN_NET_MAX <= 256, "BATCHER_MAX holds the network");

/* Batcher's odd-even merge sort on n wires into out, in one pass (a
 * window's build makes a network, so this is part of a small window's
 * cost): the iterative form for a power of two, with every comparator that
 * touches a wire at or above n left out. That is exact for any n: those
 * wires would hold +infinity, and every comparator keeps its minimum on its
 * lower wire, so they never move. ret_below[i]: how many of them come
 * from the rounds p < ROUNDS_BELOW[i], which come first. */
static uint32_t batcher(uint32_t n, uint16_t (*out)[BATCHER_MAX][2],
                        uint32_t ret_below[BELOW_LEVELS])
{
    uint32_t m = 0;
    memset(ret_below, 0, BELOW_LEVELS * sizeof *ret_below);
    for (uint32_t p = 1; p < n; p <<= 1) {
        for (uint32_t k = p; k >= 1; k >>= 1)
            for (uint32_t j = k % p; j + k < n; j += 2 * k)
                for (uint32_t i = 0; i < k && i + j + k < n; i++)
                    /* both wires in one block of 2p (a power of two): no
                     * bit at or above 2p differs; a division per test made
                     * this the cost of a small window's medians */
                    if (((i + j) ^ (i + j + k)) < 2 * p) {
                        (*out)[m][0] = (uint16_t)(i + j);
                        (*out)[m][1] = (uint16_t)(i + j + k);
                        m++;
                    }
        for (uint32_t l = 0; l < BELOW_LEVELS; l++)
            if (p < ROUNDS_BELOW[l])
                ret_below[l] = m;
    }
    return m;
}

/* Keeps only the comparators whose outputs can still reach the median's
 * wires (n/2, and n/2 - 1 when n is even), walking the network backwards.
 * Of the first below[i] comparators, ret_below[i] are kept. */
static uint32_t prune(uint32_t n, uint16_t (*cmp)[2], uint32_t n_cmp,
                      const uint32_t below[BELOW_LEVELS], uint32_t ret_below[BELOW_LEVELS])
{
    memset(ret_below, 0, BELOW_LEVELS * sizeof *ret_below);
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
        for (uint32_t l = 0; l < BELOW_LEVELS; l++)
            ret_below[l] += c < below[l];
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
    uint16_t all[BATCHER_MAX][2]; /* 15 KB */
    uint32_t below[BELOW_LEVELS], total = batcher(n, &all, below);
    sf__median_net *net = calloc(1, sizeof *net);
    if (net == NULL)
        return -ENOMEM;
    net->n = n;
    net->n_cmp = prune(n, all, total, below, net->n_below);
    if ((net->cmp = malloc((net->n_cmp ? net->n_cmp : 1) * sizeof *net->cmp)) == NULL) {
        free(net);
        return -ENOMEM;
    }
    memcpy(net->cmp, all, net->n_cmp * sizeof *net->cmp);
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

SF_AVX2 static void run_avx2(const sf__median_net *net, int64_t *v, size_t lanes)
{
    NET_BY_LANES(net, v, lanes, 0)
}

/* batcher()'s rounds p < 16 on 16 wires, written out: with constant wire
 * numbers the compiler keeps all 16 wires of a tile in registers, which a
 * table built at run time would not allow (test_fold's network_passes_sort
 * checks the tile on every 0-1 input). */
static const uint8_t tile_net[63][2] = {
    {0, 1},   {2, 3},   {4, 5}, {6, 7},   {8, 9},   {10, 11}, {12, 13}, {14, 15}, {0, 2},
    {1, 3},   {4, 6},   {5, 7}, {8, 10},  {9, 11},  {12, 14}, {13, 15}, {1, 2},   {5, 6},
    {9, 10},  {13, 14}, {0, 4}, {1, 5},   {2, 6},   {3, 7},   {8, 12},  {9, 13},  {10, 14},
    {11, 15}, {2, 4},   {3, 5}, {10, 12}, {11, 13}, {1, 2},   {3, 4},   {5, 6},   {9, 10},
    {11, 12}, {13, 14}, {0, 8}, {1, 9},   {2, 10},  {3, 11},  {4, 12},  {5, 13},  {6, 14},
    {7, 15},  {4, 8},   {5, 9}, {6, 10},  {7, 11},  {2, 4},   {3, 5},   {6, 8},   {7, 9},
    {10, 12}, {11, 13}, {1, 2}, {3, 4},   {5, 6},   {7, 8},   {9, 10},  {11, 12}, {13, 14}};

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

/* A table's comparators on registers w[...], with the vectors' min and
 * max: unrolled, so every wire number is a constant and the wires stay in
 * registers. */
#define NET_SWEEP(table, w, vmin, vmax)                                                            \
    _Pragma("GCC unroll 65") for (uint32_t c = 0; c < sizeof(table) / sizeof(table)[0]; c++)       \
    {                                                                                              \
        __typeof__((w)[0]) lo_ = vmin((w)[(table)[c][0]], (w)[(table)[c][1]]);                     \
        (w)[(table)[c][1]] = vmax((w)[(table)[c][0]], (w)[(table)[c][1]]);                         \
        (w)[(table)[c][0]] = lo_;                                                                  \
    }
#define TILE_NET_SWEEP(w, vmin, vmax) NET_SWEEP(tile_net, w, vmin, vmax)

/* The AVX2 form on offsets: where every value of a run of NARROW_LANES
 * series lies within 2^31 of its series' first value, either way (within
 * 2.1 s: nearly every rank's stage), each value minus that first value less
 * 2^31 fits 32 bits, and AVX2 has 32-bit unsigned min and max (one
 * instruction, 8 lanes) where it has no 64-bit ones (a compare and a blend,
 * 4 lanes). Subtracting one value from a whole series keeps its order, so
 * the medians are the same; taking the first value rather than the minimum
 * spares a pass over the series. */
enum { NARROW_LANES = 16 };
/* Read in place, a series' steps lie a whole step of rows apart, which the
 * hardware's stream detection does not follow: they are fetched this many
 * steps ahead. */
enum { NARROW_AHEAD = 4 };
#define NARROW_HALF (INT64_C(1) << 31)

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

/* One register pass on a column of NARROW_LANES series, for
 * sf__median_net_pass: target functions, so that the passes inline. */
SF_AVX2 static void pass_avx2(uint32_t *col, uint32_t wires)
{
    tile_sort_narrow_column(col, wires);
}

SF_AVX512_NARROW static void pass_avx512(enum sf__net_pass pass, uint32_t *col, uint32_t wires)
{
    if (pass == SF__NET_PASS_TILE)
        tile_sort_narrow512(col, wires);
    else if (pass == SF__NET_PASS_PAIR)
        tile_sort_pair512(col, wires);
    else
        round32_512(col, wires);
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

/* The medians of every series, NARROW_LANES at a time, sorted by isa's
 * body (AVX2 or AVX-512; the packing is AVX2's for both); false where a
 * series spans too much for offsets (the medians written so far are right,
 * and v is only read). */
SF_AVX2 static bool run_narrow(const sf__median_net *net, enum sf__net_isa isa, const int64_t *v,
                               size_t stride, size_t lanes, int64_t *ret_median)
{
    uint32_t w32[SF__MEDIAN_NET_MAX * NARROW_LANES];
    int64_t base[NARROW_LANES];
    for (size_t l0 = 0; l0 < lanes; l0 += NARROW_LANES) {
        size_t w = lanes - l0 < NARROW_LANES ? lanes - l0 : NARROW_LANES;
        if (!(w == NARROW_LANES ? pack_full(net, v, stride, l0, w32, base)
                                : pack_part(net, v, stride, l0, w, w32, base)))
            return false;
        if (isa == SF__NET_AVX512)
            net_body_narrow512(net, w32);
        else
            net_body_narrow(net, w32);
        const uint32_t *hi = w32 + (size_t)(net->n / 2) * NARROW_LANES;
        const uint32_t *lo = net->n % 2 ? hi : hi - NARROW_LANES;
        for (size_t l = 0; l < w; l++) /* lo + (hi - lo) / 2 of the values themselves */
            ret_median[l0 + l] = (int64_t)((uint64_t)base[l] + lo[l] + (hi[l] - lo[l]) / 2);
    }
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
    NET_BY_LANES(net, v, lanes, net->n_below[BELOW_TILES])
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
    case SF__NET_AVX2:
        if (run_narrow(net, isa, v, lanes, lanes, ret_median))
            return 0; /* else every series in 64 bits */
        if (isa == SF__NET_AVX512)
            run_avx512(net, v, lanes);
        else
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
        ret_median[l] = median_of_middle(lo[l], hi[l]);
    return 0;
}

int sf__median_net_pass(enum sf__net_isa isa, enum sf__net_pass pass, uint32_t *col, uint32_t wires)
{
    /* the counts of wires each pass takes, fewest and most */
    static const uint32_t takes[][2] = {
        [SF__NET_PASS_TILE] = {1, TILE_WIRES},
        [SF__NET_PASS_PAIR] = {1, 2 * TILE_WIRES},
        [SF__NET_PASS_ROUND32] = {2 * TILE_WIRES + 1, 4 * TILE_WIRES}};
    if ((unsigned)pass > SF__NET_PASS_ROUND32 || wires < takes[pass][0] || wires > takes[pass][1])
        return -EINVAL;
#ifdef SF_NET_X86
    if (isa == SF__NET_AVX512 && sf__isa_present(isa)) {
        pass_avx512(pass, col, wires);
        return 0;
    }
    if (isa == SF__NET_AVX2 && pass == SF__NET_PASS_TILE && sf__isa_present(isa)) {
        pass_avx2(col, wires);
        return 0;
    }
#else
    (void)isa, (void)col;
#endif
    return -ENOTSUP;
}

int sf__median_net_narrow(const sf__median_net *net, enum sf__net_isa isa, const int64_t *v,
                          size_t stride, size_t lanes, int64_t *ret_median)
{
#ifdef SF_NET_X86
    if (isa == SF__NET_GENERIC || !sf__isa_present(isa) || !sf__isa_present(SF__NET_AVX2) ||
        stride < lanes)
        return -ENOTSUP;
    return run_narrow(net, isa, v, stride, lanes, ret_median) ? 0 : -ERANGE;
#else
    (void)net, (void)isa, (void)v, (void)stride, (void)lanes, (void)ret_median;
    return -ENOTSUP;
#endif
}

/*
 * What the forms of the median network share (median_net.c builds the
 * network and holds the generic form; median_net_avx2.c and
 * median_net_avx512.c the vector ones): the network itself, the body every
 * form compiles for its own instruction set, and the layout of the forms on
 * 32-bit offsets.
 */
#ifndef SF_CORE_VEC_MEDIAN_NET_H
#define SF_CORE_VEC_MEDIAN_NET_H

#include "vec.h"

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

struct sf__median_net {
    uint32_t n;
    uint32_t n_cmp;
    /* the first n_below[i] comparators: the rounds p < ROUNDS_BELOW[i],
     * which a body runs in registers */
    uint32_t n_below[BELOW_LEVELS];
    uint16_t (*cmp)[2]; /* compare-exchanges, in order: min to [0], max to [1] */
};

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

/* A form's body on offsets: sorts a run of NARROW_LANES series, wire t of
 * series l at v[t NARROW_LANES + l]. */
typedef void sf__net_narrow_body(const sf__median_net *net, uint32_t *v);
/* The medians of every series, NARROW_LANES at a time, packed into offsets
 * with AVX2 (median_net_avx2.c) and sorted by body (AVX2's or AVX-512's);
 * false where a series spans too much for offsets (the medians written so
 * far are right, and v is only read). */
bool sf__net_narrow_run(const sf__median_net *net, sf__net_narrow_body *body, const int64_t *v,
                        size_t stride, size_t lanes, int64_t *ret_median);

#endif

/*
 * The register tiles of the vector forms of the median network
 * (median_net_avx2.c, median_net_avx512.c): the first rounds of the network
 * written out, and the sweep that runs a table of comparators on registers.
 */
#ifndef SF_CORE_VEC_MEDIAN_NET_TILES_H
#define SF_CORE_VEC_MEDIAN_NET_TILES_H

#include <stdint.h>

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

#endif

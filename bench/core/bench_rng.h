/*
 * The benchmarks' seeded generator: splitmix64 and a uniform double in
 * [-1, 1), so bench_core and bench_change draw the same kind of matrices.
 */
#ifndef SF_BENCH_RNG_H
#define SF_BENCH_RNG_H

#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), from the top 53 bits. */
static inline double uniform_pm1(uint64_t *state)
{
    return (double)(splitmix64(state) >> 11) * 0x1.0p-52 - 1.0;
}

#endif

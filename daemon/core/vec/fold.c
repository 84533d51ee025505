/*
 * The layout of the rank medians that the AVX2 grid fold reads (vec.h,
 * baseline_quads): plain C, made once per window by summary.c.
 */
#include "vec.h"

void sf__baseline_quads(const int64_t *baseline, uint32_t n, uint32_t S, int64_t *out)
{
    for (uint32_t q = 0; q < n / 4; q++)
        for (uint32_t k = 0; k < S; k++)
            for (uint32_t j = 0; j < 4; j++)
                out[((size_t)q * S + k) * 4 + j] = baseline[((size_t)q * 4 + j) * S + k];
}

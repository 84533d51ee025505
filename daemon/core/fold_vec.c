/*
 * The summary fold of a grid window (every step holds the same ranks in the
 * same order; the rows checked, their durations checked here) with a row's
 * stages in vectors:
 * prefixes, max/min/sum, top-2 prefixes, clipped end frontiers, the slowest
 * rank and rank 0 in one pass; and the same clipping for the cohort gains
 * (exposure.c). Exact: the same integers as the scalar loops there, which
 * stay the reference and the fallback. Here the form is chosen: AVX-512
 * (fold_avx512.c) or AVX2 (fold_avx2.c), for rows of at most 8 stages.
 */
#include "fold_vec.h"

enum sf__net_isa sf__fold_vec_isa(uint32_t n_stages, enum sf__net_isa cap)
{
    if (n_stages < 1 || n_stages > 8)
        return SF__NET_GENERIC;
    if (cap >= SF__NET_AVX512 && sf__isa_present(SF__NET_AVX512))
        return SF__NET_AVX512;
    if (cap >= SF__NET_AVX2 && sf__isa_present(SF__NET_AVX2))
        return SF__NET_AVX2;
    return SF__NET_GENERIC;
}

bool sf__fold_grid_vec(enum sf__net_isa isa, sf_summary *s, uint32_t step_i,
                       const struct sf__grid_step *g)
{
#ifdef SF_FOLD_X86
    if (isa == SF__NET_AVX512)
        return sf__fold_grid_avx512(s, &s->steps[step_i], g);
    if (isa == SF__NET_AVX2)
        return sf__fold_grid_avx2(s, &s->steps[step_i], g);
#endif
    (void)isa, (void)s, (void)step_i, (void)g;
    return false; /* no form here: sf__fold_vec_isa chooses none */
}

void sf__clip_rows_vec(enum sf__net_isa isa, const sf_summary *s, const int64_t *rows, uint32_t n,
                       const int64_t *baseline, int64_t *clipped)
{
#ifdef SF_FOLD_X86
    if (isa == SF__NET_AVX512)
        sf__clip_rows_avx512(s, rows, n, baseline, clipped);
    else if (isa == SF__NET_AVX2)
        sf__clip_rows_avx2(s, rows, n, baseline, clipped);
#else
    (void)isa, (void)s, (void)rows, (void)n, (void)baseline, (void)clipped;
#endif
}

void sf__baseline_quads(const int64_t *baseline, uint32_t n, uint32_t S, int64_t *out)
{
    for (uint32_t q = 0; q < n / 4; q++)
        for (uint32_t k = 0; k < S; k++)
            for (uint32_t j = 0; j < 4; j++)
                out[((size_t)q * S + k) * 4 + j] = baseline[((size_t)q * 4 + j) * S + k];
}

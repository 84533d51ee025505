/*
 * The summary fold of a grid window (every step holds the same ranks in the
 * same order, rows already checked) with a row's stages in one AVX-512
 * vector: prefixes, max/min/sum, top-2 prefixes, clipped end frontiers, the
 * slowest rank and rank 0 in one pass; and the same clipping for the cohort
 * gains (exposure.c). Exact: the same integers as the scalar loops there,
 * which stay the reference and the fallback.
 */
#include <string.h>

#include "core_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

bool sf__fold_vec_pays(uint32_t n_stages)
{
    return n_stages >= 1 && n_stages <= 8 && __builtin_cpu_supports("avx512f");
}

/* The prefixes of `hit` beat their stage's runner-up: into the top two.
 * Such rows are few (a new maximum or runner-up), so the branch to here is
 * rarely taken and well predicted. Returns the new runners-up. */
__attribute__((target("avx512f"))) static __m512i
top2_update(sf_top2 *top2, __mmask8 hit, const int64_t *p, uint32_t rank, uint32_t S)
{
    int64_t v2[8] = {0};
    for (uint32_t k = 0; k < S; k++) {
        if (hit >> k & 1)
            sf__top2_insert_ascending(&top2[k], p[k], rank);
        v2[k] = top2[k].v2;
    }
    return _mm512_loadu_si512(v2);
}

/* Shifts lanes up by `by` (1, 2 or 4), zeros in: one step of the prefix scan. */
#define LANES_UP(x, by) _mm512_alignr_epi64((x), _mm512_setzero_si512(), 8 - (by))

/* A row's prefixes P[1..S] from its durations: three lane shifts. */
__attribute__((target("avx512f"))) static inline __m512i prefixes(__m512i x)
{
    __m512i p = _mm512_add_epi64(x, LANES_UP(x, 1));
    p = _mm512_add_epi64(p, LANES_UP(p, 2));
    return _mm512_add_epi64(p, LANES_UP(p, 4));
}

/* The group candidates (past the first S): each cut is the sum of its
 * members' savings. */
__attribute__((target("avx512f"))) static void clip_groups(const sf_summary *s, __m512i sav,
                                                           int64_t total, int64_t *clipped)
{
    int64_t saving[8];
    _mm512_storeu_si512(saving, sav);
    for (uint32_t c = s->schema.n_stages; c < s->cand.n; c++) {
        int64_t cut = 0;
        for (uint64_t m = s->cand.member_mask[c]; m; m &= m - 1)
            cut += saving[__builtin_ctzll(m)];
        clipped[c] = total - cut > clipped[c] ? total - cut : clipped[c];
    }
}

__attribute__((target("avx512f"))) static void
fold_step(sf_summary *s, sf_step_summary *st, const sf_row *rows, const sf_row *const *ptrs,
          const int64_t *matrix, uint32_t R, const uint32_t *ranks, const int64_t *baseline)
{
    uint32_t S = s->schema.n_stages, C = s->cand.n;
    __mmask8 m = (__mmask8)((1u << S) - 1);
    __m512i zero = _mm512_setzero_si512(), last = _mm512_set1_epi64(S - 1);
    __m512i vmax = _mm512_maskz_loadu_epi64(m, st->dmax),
            vmin = _mm512_maskz_loadu_epi64(m, st->dmin);
    __m512i vsum = _mm512_maskz_loadu_epi64(m, st->dsum), vsum0 = vsum;
    __m512i vclip = _mm512_maskz_loadu_epi64(m, st->clipped_end);
    int64_t v2s[8] = {0}, p_lanes[8];
    for (uint32_t k = 0; k < S; k++)
        v2s[k] = st->prefix_top2[k].v2;
    __m512i v2 = _mm512_loadu_si512(v2s);
    int64_t slowest = st->slowest_total, end_sum = 0;
    for (uint32_t r = 0; r < R; r++) {
        const int64_t *d = matrix ? matrix + (size_t)r * S : ptrs ? ptrs[r]->d : rows[r].d;
        __m512i x = _mm512_maskz_loadu_epi64(m, d), p = prefixes(x);
        vmax = _mm512_max_epi64(vmax, x);
        vmin = _mm512_min_epi64(vmin, x);
        vsum = _mm512_add_epi64(vsum, x);
        __m512i sav = _mm512_max_epi64(
            _mm512_sub_epi64(x, _mm512_maskz_loadu_epi64(m, baseline + (size_t)r * S)), zero);
        __m512i end = _mm512_permutexvar_epi64(last, p);
        vclip = _mm512_max_epi64(vclip, _mm512_sub_epi64(end, sav));
        int64_t total = _mm_cvtsi128_si64(_mm512_castsi512_si128(end));
        end_sum += total;
        __mmask8 hit = _mm512_mask_cmpgt_epi64_mask(m, p, v2);
        if (__builtin_expect(hit != 0, 0)) {
            _mm512_storeu_si512(p_lanes, p);
            v2 = top2_update(st->prefix_top2, hit, p_lanes, ranks[r], S);
        }
        if (C > S)
            clip_groups(s, sav, total, st->clipped_end);
        if (total > slowest) { /* ascending ranks: the first of equals stays */
            slowest = total;
            st->slowest_rank = ranks[r];
            memcpy(st->slowest_d, d, S * sizeof *d);
        }
        if (ranks[r] == 0) {
            st->has_rank0 = true;
            memcpy(st->rank0_d, d, S * sizeof *d);
        }
    }
    _mm512_mask_storeu_epi64(st->dmax, m, vmax);
    _mm512_mask_storeu_epi64(st->dmin, m, vmin);
    _mm512_mask_storeu_epi64(st->dsum, m, vsum);
    _mm512_mask_storeu_epi64(st->clipped_end, m, vclip);
    int64_t sums[8], sums0[8];
    _mm512_storeu_si512(sums, vsum);
    _mm512_storeu_si512(sums0, vsum0);
    st->residual_sum += sums[S - 1] - sums0[S - 1];
    st->end_sum += end_sum;
    st->slowest_total = slowest;
    st->n_ranks += R;
}

void sf__fold_grid_vec(sf_summary *s, uint32_t step_i, const sf_row *rows,
                       const sf_row *const *ptrs, const int64_t *matrix, uint32_t R,
                       const uint32_t *ranks, const int64_t *baseline)
{
    fold_step(s, &s->steps[step_i], rows, ptrs, matrix, R, ranks, baseline);
}

__attribute__((target("avx512f"))) void sf__clip_rows_vec(const sf_summary *s, const int64_t *rows,
                                                          uint32_t n, const int64_t *baseline,
                                                          int64_t *clipped)
{
    uint32_t S = s->schema.n_stages, C = s->cand.n;
    __mmask8 m = (__mmask8)((1u << S) - 1);
    __m512i zero = _mm512_setzero_si512(), last = _mm512_set1_epi64(S - 1);
    __m512i b = _mm512_maskz_loadu_epi64(m, baseline), vclip = _mm512_set1_epi64(INT64_MIN);
    for (uint32_t r = 0; r < n; r++) {
        __m512i x = _mm512_maskz_loadu_epi64(m, rows + (size_t)r * S), p = prefixes(x);
        __m512i end = _mm512_permutexvar_epi64(last, p);
        __m512i sav = _mm512_max_epi64(_mm512_sub_epi64(x, b), zero);
        vclip = _mm512_max_epi64(vclip, _mm512_sub_epi64(end, sav));
        if (C > S)
            clip_groups(s, sav, _mm_cvtsi128_si64(_mm512_castsi512_si128(end)), clipped);
    }
    _mm512_mask_storeu_epi64(clipped, m, vclip);
}

#else

bool sf__fold_vec_pays(uint32_t n_stages)
{
    (void)n_stages;
    return false;
}

void sf__fold_grid_vec(sf_summary *s, uint32_t step_i, const sf_row *rows,
                       const sf_row *const *ptrs, const int64_t *matrix, uint32_t R,
                       const uint32_t *ranks, const int64_t *baseline)
{
    (void)s, (void)step_i, (void)rows, (void)ptrs, (void)matrix, (void)R, (void)ranks,
        (void)baseline;
}

void sf__clip_rows_vec(const sf_summary *s, const int64_t *rows, uint32_t n,
                       const int64_t *baseline, int64_t *clipped)
{
    (void)s, (void)rows, (void)n, (void)baseline, (void)clipped;
}

#endif

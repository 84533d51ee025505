/*
 * The grid fold and the cohort clipping (vec.h) in AVX-512: a row's
 * stages in one vector, so prefixes are three lane shifts and max, min and
 * compare masks are single instructions.
 */
#include "fold.h"

#ifdef SF_VEC_X86
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))

/* Shifts lanes up by `by` (1, 2 or 4), zeros in: one step of the prefix scan. */
#define LANES_UP(x, by) _mm512_alignr_epi64((x), _mm512_setzero_si512(), 8 - (by))

/* A row's prefixes P[1..S] from its durations: three lane shifts. */
AVX512 static inline __m512i prefixes(__m512i x)
{
    __m512i p = _mm512_add_epi64(x, LANES_UP(x, 1));
    p = _mm512_add_epi64(p, LANES_UP(p, 2));
    return _mm512_add_epi64(p, LANES_UP(p, 4));
}

AVX512 static void groups(const sf_summary *s, __m512i sav, int64_t total, int64_t *clipped)
{
    int64_t saving[8];
    _mm512_storeu_si512(saving, sav);
    sf__fold_groups(s, saving, total, clipped);
}

/* The step's top two prefixes of every stage, a stage a lane, held in
 * registers over the rows of one call: v1 and v2, and both ranks in one
 * 64-bit lane (r1 low, r2 high), as an sf_top2 lays them out. */
struct top2_lanes {
    __m512i v1, v2, ranks;
};

/* An sf_top2 is three int64: v1, v2, then r1 and r2 in one. Stage k's
 * field f is int64 3 k + f of the array, which spans at most three
 * vectors (8 stages). Every call (a block of ranks of one step) takes the
 * fields apart and puts them back, with permutes: gathers and scatters
 * cost more, at 51 200 calls a build of 16 384 ranks (the build ran about
 * 5 % faster with the permutes). */
_Static_assert(sizeof(sf_top2) == 3 * sizeof(int64_t), "sf_top2 is three int64 lanes");

/* Lane k of field f, int64 3 k + f: from the first two vectors (a permute
 * of two indexes 0 to 15), or where it lies past them (FIELD_IN_C), from
 * the third. */
static const int64_t FIELD_FROM_AB[3][8] = {
    {0, 3, 6, 9, 12, 15, 0, 0}, {1, 4, 7, 10, 13, 0, 0, 0}, {2, 5, 8, 11, 14, 0, 0, 0}};
static const int64_t FIELD_FROM_C[3][8] = {
    {0, 0, 0, 0, 0, 0, 2, 5}, {0, 0, 0, 0, 0, 0, 3, 6}, {0, 0, 0, 0, 0, 1, 4, 7}};
static const __mmask8 FIELD_IN_C[3] = {0xc0, 0xe0, 0xe0};

/* The way back: int64 i of vector p is field (8 p + i) % 3 of stage
 * (8 p + i) / 3. Where that field is v1 or v2 its index in a permute of
 * the two is the stage, or 8 plus it; the ranks are laid over them. */
static const int64_t PART_FROM_V[3][8] = {
    {0, 8, 0, 1, 9, 1, 2, 10}, {0, 3, 11, 0, 4, 12, 0, 5}, {13, 0, 6, 14, 0, 7, 15, 0}};
static const int64_t PART_FROM_RANKS[3][8] = {
    {0, 0, 0, 0, 0, 1, 0, 0}, {2, 0, 0, 3, 0, 0, 4, 0}, {0, 5, 0, 0, 6, 0, 0, 7}};
static const __mmask8 PART_IS_RANKS[3] = {0x24, 0x49, 0x92};

/* The mask of the int64 of vector `part` that S sf_top2 fill: lanes past
 * them load as zeros and are not stored. */
static inline __mmask8 top2_part(uint32_t S, uint32_t part)
{
    uint32_t n = 3 * S > 8 * part ? 3 * S - 8 * part : 0;
    return (__mmask8)(n >= 8 ? 0xff : (1u << n) - 1);
}

AVX512 static __m512i top2_field(__m512i a, __m512i b, __m512i c, int f)
{
    __m512i ab = _mm512_permutex2var_epi64(a, _mm512_loadu_si512(FIELD_FROM_AB[f]), b);
    return _mm512_mask_permutexvar_epi64(ab, FIELD_IN_C[f], _mm512_loadu_si512(FIELD_FROM_C[f]), c);
}

AVX512 static struct top2_lanes top2_load(const sf_top2 *t, uint32_t S)
{
    const int64_t *w = (const int64_t *)t;
    __m512i a = _mm512_maskz_loadu_epi64(top2_part(S, 0), w),
            b = _mm512_maskz_loadu_epi64(top2_part(S, 1), w + 8),
            c = _mm512_maskz_loadu_epi64(top2_part(S, 2), w + 16);
    return (struct top2_lanes){.v1 = top2_field(a, b, c, 0),
                               .v2 = top2_field(a, b, c, 1),
                               .ranks = top2_field(a, b, c, 2)};
}

AVX512 static void top2_store(sf_top2 *t, uint32_t S, const struct top2_lanes *l)
{
    int64_t *w = (int64_t *)t;
    for (uint32_t p = 0; p < 3; p++) {
        __m512i v = _mm512_permutex2var_epi64(l->v1, _mm512_loadu_si512(PART_FROM_V[p]), l->v2);
        v = _mm512_mask_permutexvar_epi64(v, PART_IS_RANKS[p],
                                          _mm512_loadu_si512(PART_FROM_RANKS[p]), l->ranks);
        _mm512_mask_storeu_epi64(w + 8 * p, top2_part(S, p), v);
    }
}

/* sf__top2_insert_ascending on the lanes of p that beat their runner-up
 * (hit): above the leader, the leader moves down and p leads; else p is
 * the new runner-up. */
AVX512 static void top2_insert(struct top2_lanes *l, __mmask8 hit, __m512i p, uint32_t rank)
{
    __mmask8 lead = _mm512_mask_cmpgt_epi64_mask(hit, p, l->v1), second = hit & ~lead;
    __m512i r = _mm512_set1_epi64(rank);
    __m512i r1_moves = _mm512_or_si512(_mm512_slli_epi64(l->ranks, 32), r);
    __m512i r2_new = _mm512_or_si512(_mm512_and_si512(l->ranks, _mm512_set1_epi64(UINT32_MAX)),
                                     _mm512_slli_epi64(r, 32));
    l->v2 = _mm512_mask_mov_epi64(_mm512_mask_mov_epi64(l->v2, lead, l->v1), second, p);
    l->v1 = _mm512_mask_mov_epi64(l->v1, lead, p);
    l->ranks =
        _mm512_mask_mov_epi64(_mm512_mask_mov_epi64(l->ranks, lead, r1_moves), second, r2_new);
}

/* Whether the durations or'ed into bits all lie in [0, SF_MAX_DURATION_NS),
 * with no bit at or above the cap's (the sign's included), and the rows'
 * ends or'ed into over as x + SF__OVER_STEP within the step's bound. */
AVX512 static bool bounds_hold(__m512i bits, __m512i over)
{
    return (_mm512_test_epi64_mask(bits, _mm512_set1_epi64(-SF_MAX_DURATION_NS)) |
            _mm512_test_epi64_mask(over, _mm512_set1_epi64(INT64_MIN))) == 0;
}

AVX512 bool sf__fold_grid_avx512(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g)
{
    uint32_t S = s->schema.n_stages, C = s->cand.n;
    __mmask8 m = (__mmask8)((1u << S) - 1);
    __m512i zero = _mm512_setzero_si512(), last = _mm512_set1_epi64(S - 1);
    __m512i over_step = _mm512_set1_epi64((int64_t)SF__OVER_STEP), over = zero, bits = zero;
    __m512i vmax = _mm512_maskz_loadu_epi64(m, st->dmax),
            vmin = _mm512_maskz_loadu_epi64(m, st->dmin);
    __m512i vsum = _mm512_maskz_loadu_epi64(m, st->dsum);
    __m512i vclip = _mm512_maskz_loadu_epi64(m, st->clipped_end);
    struct top2_lanes t2 = top2_load(st->prefix_top2, S);
    int64_t slowest = st->slowest_total, sum0 = st->dsum[S - 1];
    uint64_t end_sum = 0; /* unsigned: summed before the ends are checked */
    for (uint32_t r = 0; r < g->n; r++) {
        const int64_t *d = sf__grid_row(g, r, S);
        __m512i x = _mm512_maskz_loadu_epi64(m, d), p = prefixes(x);
        bits = _mm512_or_si512(bits, x);
        vmax = _mm512_max_epi64(vmax, x);
        vmin = _mm512_min_epi64(vmin, x);
        vsum = _mm512_add_epi64(vsum, x);
        __m512i sav = _mm512_max_epi64(
            _mm512_sub_epi64(x, _mm512_maskz_loadu_epi64(m, g->baseline + (size_t)r * S)), zero);
        __m512i end = _mm512_permutexvar_epi64(last, p);
        over = _mm512_or_si512(over, _mm512_add_epi64(end, over_step));
        vclip = _mm512_max_epi64(vclip, _mm512_sub_epi64(end, sav));
        int64_t total = _mm_cvtsi128_si64(_mm512_castsi512_si128(end));
        end_sum += (uint64_t)total;
        __mmask8 hit = _mm512_mask_cmpgt_epi64_mask(m, p, t2.v2);
        if (__builtin_expect(hit != 0, 0))
            top2_insert(&t2, hit, p, g->ranks[r]);
        if (C > S)
            groups(s, sav, total, st->clipped_end);
        sf__fold_row_rank(st, d, g->ranks[r], total, S, &slowest);
    }
    if (!bounds_hold(bits, over))
        return false;
    _mm512_mask_storeu_epi64(st->dmax, m, vmax);
    _mm512_mask_storeu_epi64(st->dmin, m, vmin);
    _mm512_mask_storeu_epi64(st->dsum, m, vsum);
    _mm512_mask_storeu_epi64(st->clipped_end, m, vclip);
    top2_store(st->prefix_top2, S, &t2);
    sf__fold_step_end(st, sum0, st->dsum[S - 1], (int64_t)end_sum, slowest, g->n);
    return true;
}

AVX512 void sf__clip_rows_avx512(const sf_summary *s, const int64_t *rows, uint32_t n,
                                 const int64_t *baseline, int64_t *clipped)
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
            groups(s, sav, _mm_cvtsi128_si64(_mm512_castsi512_si128(end)), clipped);
    }
    _mm512_mask_storeu_epi64(clipped, m, vclip);
}

#endif

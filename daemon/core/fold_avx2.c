/*
 * The grid fold and the cohort clipping (fold_vec.c) in AVX2, for CPUs
 * without AVX-512: a row of up to 8 stages in two 4-lane vectors, stages
 * 0..3 and 4..7. AVX2 has no 64-bit max or min and no compare into a mask
 * register, so each max or min is a compare and a blend, and compare masks
 * come out through movemask. The step's loop is compiled apart for the
 * usual stage counts (SF__BY_STAGE_COUNT), where S is a constant.
 */
#include "avx2_lanes.h"
#include "fold_vec.h"

#ifdef SF_AVX2_LANES

struct row {
    __m256i lo, hi;
};

SF_AVX2_INLINE struct row load_row(const int64_t *d, uint32_t S)
{
    return (struct row){sf__load4(d, S < 4 ? S : 4), sf__load4(d + 4, S > 4 ? S - 4 : 0)};
}

SF_AVX2_INLINE void store_row(int64_t *to, struct row x, uint32_t S)
{
    int64_t lanes[8];
    _mm256_storeu_si256((__m256i *)lanes, x.lo);
    _mm256_storeu_si256((__m256i *)(lanes + 4), x.hi);
    memcpy(to, lanes, S * sizeof *to);
}

/* max(x, 0): x where it is not negative. */
SF_AVX2_INLINE __m256i excess4(__m256i x)
{
    return _mm256_andnot_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), x), x);
}

/* Each lane plus the lanes below it: a shift by one lane, then by two. */
SF_AVX2_INLINE __m256i prefix4(__m256i x)
{
    __m256i up1 = _mm256_blend_epi32(_mm256_permute4x64_epi64(x, _MM_SHUFFLE(2, 1, 0, 0)),
                                     _mm256_setzero_si256(), 0x03);
    x = _mm256_add_epi64(x, up1);
    return _mm256_add_epi64(x, _mm256_permute2x128_si256(x, x, 0x08));
}

/* Lane 3 in every lane. */
SF_AVX2_INLINE __m256i broadcast3(__m256i x)
{
    return _mm256_permute4x64_epi64(x, 0xFF);
}

/* The operations on whole rows: the second vector only past 4 stages. */
#define ROW_OP(name, op)                                                                           \
    SF_AVX2_INLINE struct row name(struct row a, struct row b, uint32_t S)                         \
    {                                                                                              \
        return (struct row){op(a.lo, b.lo), S > 4 ? op(a.hi, b.hi) : a.hi};                        \
    }
ROW_OP(row_max, sf__max4)
ROW_OP(row_min, sf__min4)
ROW_OP(row_add, _mm256_add_epi64)
ROW_OP(row_sub, _mm256_sub_epi64)

SF_AVX2_INLINE struct row row_excess(struct row x, uint32_t S)
{
    return (struct row){excess4(x.lo), S > 4 ? excess4(x.hi) : x.hi};
}

SF_AVX2_INLINE struct row row_prefixes(struct row x, uint32_t S)
{
    __m256i lo = prefix4(x.lo);
    if (S <= 4)
        return (struct row){lo, x.hi};
    return (struct row){lo, _mm256_add_epi64(prefix4(x.hi), broadcast3(lo))};
}

/* The row's last prefix, the step's end for this rank, in every lane. The
 * lanes past S loaded zeros, so lane 3 of the vector that holds stage S - 1
 * is that prefix. */
SF_AVX2_INLINE __m256i row_end(struct row p, uint32_t S)
{
    return broadcast3(S <= 4 ? p.lo : p.hi);
}

/* Bit k: lane k of a is greater than lane k of b, for k < S. */
SF_AVX2_INLINE unsigned row_greater(struct row a, struct row b, uint32_t S)
{
    unsigned lo = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(a.lo, b.lo)));
    if (S <= 4)
        return lo & ((1u << S) - 1);
    unsigned hi = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(a.hi, b.hi)));
    return (lo | hi << 4) & ((1u << S) - 1);
}

SF_AVX2_INLINE void groups(const sf_summary *s, struct row sav, int64_t total, int64_t *clipped)
{
    int64_t saving[8];
    store_row(saving, sav, 8);
    sf__fold_groups(s, saving, total, clipped);
}

SF_AVX2_INLINE struct row top2(sf_top2 *t, unsigned hit, struct row p, uint32_t rank, uint32_t S)
{
    int64_t lanes[8], v2[8] = {0};
    store_row(lanes, p, 8);
    sf__fold_top2(t, hit, lanes, rank, S, v2);
    return load_row(v2, 8);
}

SF_AVX2_INLINE void fold_step_s(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g,
                                uint32_t S)
{
    uint32_t C = s->cand.n;
    struct row vmax = load_row(st->dmax, S), vmin = load_row(st->dmin, S);
    struct row vsum = load_row(st->dsum, S), vclip = load_row(st->clipped_end, S);
    struct row zero = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    struct row v2 = top2(st->prefix_top2, 0, zero, 0, S);
    int64_t slowest = st->slowest_total, end_sum = 0, sum0 = st->dsum[S - 1];
    for (uint32_t r = 0; r < g->n; r++) {
        const int64_t *d = sf__grid_row(g, r, S);
        struct row x = load_row(d, S), p = row_prefixes(x, S);
        vmax = row_max(vmax, x, S);
        vmin = row_min(vmin, x, S);
        vsum = row_add(vsum, x, S);
        struct row sav = row_excess(row_sub(x, load_row(g->baseline + (size_t)r * S, S), S), S);
        __m256i end = row_end(p, S);
        vclip = row_max(vclip, row_sub((struct row){end, end}, sav, S), S);
        int64_t total = _mm_cvtsi128_si64(_mm256_castsi256_si128(end));
        end_sum += total;
        unsigned hit = row_greater(p, v2, S);
        if (__builtin_expect(hit != 0, 0))
            v2 = top2(st->prefix_top2, hit, p, g->ranks[r], S);
        if (C > S)
            groups(s, sav, total, st->clipped_end);
        sf__fold_row_rank(st, d, g->ranks[r], total, S, &slowest);
    }
    store_row(st->dmax, vmax, S);
    store_row(st->dmin, vmin, S);
    store_row(st->dsum, vsum, S);
    store_row(st->clipped_end, vclip, S);
    sf__fold_step_end(st, sum0, st->dsum[S - 1], end_sum, slowest, g->n);
}

SF_AVX2_INLINE void clip_rows_s(const sf_summary *s, const int64_t *rows, uint32_t n,
                                const int64_t *baseline, int64_t *clipped, uint32_t S)
{
    uint32_t C = s->cand.n;
    struct row b = load_row(baseline, S);
    __m256i low = _mm256_set1_epi64x(INT64_MIN);
    struct row vclip = {low, low};
    for (uint32_t r = 0; r < n; r++) {
        struct row x = load_row(rows + (size_t)r * S, S), p = row_prefixes(x, S);
        __m256i end = row_end(p, S);
        struct row sav = row_excess(row_sub(x, b, S), S);
        vclip = row_max(vclip, row_sub((struct row){end, end}, sav, S), S);
        if (C > S)
            groups(s, sav, _mm_cvtsi128_si64(_mm256_castsi256_si128(end)), clipped);
    }
    store_row(clipped, vclip, S);
}

SF_AVX2 void sf__fold_grid_avx2(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g){
    SF__BY_STAGE_COUNT(s->schema.n_stages, S, fold_step_s(s, st, g, S))}

SF_AVX2 void sf__clip_rows_avx2(const sf_summary *s, const int64_t *rows, uint32_t n,
                                const int64_t *baseline, int64_t *clipped)
{
    SF__BY_STAGE_COUNT(s->schema.n_stages, S, clip_rows_s(s, rows, n, baseline, clipped, S))
}

#endif

/*
 * The grid fold and the cohort clipping (vec.h) in AVX2, for CPUs
 * without AVX-512: a row of up to 8 stages in two 4-lane vectors, stages
 * 0..3 and 4..7. AVX2 has no 64-bit max or min and no compare into a mask
 * register, so each max or min is a compare and a blend, and compare masks
 * come out through movemask. The step's loop is compiled apart for the
 * usual stage counts (SF__BY_STAGE_COUNT), where S is a constant.
 */
#include <string.h>

#include "avx2_lanes.h"
#include "fold.h"

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

/* Whether the durations or'ed into bits all lie in [0, SF_MAX_DURATION_NS),
 * with no bit at or above the cap's (the sign's included), and the rows'
 * ends or'ed into over as x + SF__OVER_STEP within the step's bound. */
SF_AVX2_INLINE bool bounds_hold(__m256i bits, __m256i over)
{
    return _mm256_testz_si256(bits, _mm256_set1_epi64x(-SF_MAX_DURATION_NS)) &
           _mm256_testz_si256(over, _mm256_set1_epi64x(INT64_MIN));
}

/* The or of a row's two vectors, as bounds_hold takes them. */
SF_AVX2_INLINE __m256i row_bits(struct row x, uint32_t S)
{
    return S > 4 ? _mm256_or_si256(x.lo, x.hi) : x.lo;
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

/* The prefixes in `hit` (bit k: p's lane k beat its stage's runner-up) into
 * the top two of their stages; the new runners-up. Such rows are few (a new
 * maximum or runner-up), so the branch here is rarely taken. */
SF_AVX2_INLINE struct row top2(sf_top2 *t, unsigned hit, struct row p, uint32_t rank, uint32_t S)
{
    int64_t lanes[8], v2[8] = {0};
    store_row(lanes, p, 8);
    for (uint32_t k = 0; k < S; k++) {
        if (hit >> k & 1)
            sf__top2_insert_ascending(&t[k], lanes[k], rank);
        v2[k] = t[k].v2;
    }
    return load_row(v2, 8);
}

/* ---- four rows at a time, a stage to a vector ---------------------------
 * A row in two vectors wastes lanes (6 stages in 8) and needs lane shifts
 * for its prefixes and a broadcast for its end. Four rows transposed put
 * stage k of four ranks in one vector: prefixes are adds of whole vectors,
 * the end is the last prefix itself, and a stage's max, min and sum over
 * ranks are lane-wise, reduced once a step. */

/* Stages 0..3 of four rows as columns: a 4 x 4 transpose of int64. */
SF_AVX2_INLINE void transpose4(__m256i a0, __m256i a1, __m256i a2, __m256i a3, __m256i *col)
{
    __m256i t0 = _mm256_unpacklo_epi64(a0, a1), t1 = _mm256_unpackhi_epi64(a0, a1);
    __m256i t2 = _mm256_unpacklo_epi64(a2, a3), t3 = _mm256_unpackhi_epi64(a2, a3);
    col[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
    col[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
    col[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
    col[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
}

/* col[k]: stage k of rows d[0..3], in that order. */
SF_AVX2_INLINE void load_quad(const int64_t *const d[4], uint32_t S, __m256i col[8])
{
    uint32_t lo = S < 4 ? S : 4;
    transpose4(sf__load4(d[0], lo), sf__load4(d[1], lo), sf__load4(d[2], lo), sf__load4(d[3], lo),
               col);
    if (S > 4)
        transpose4(sf__load4(d[0] + 4, S - 4), sf__load4(d[1] + 4, S - 4),
                   sf__load4(d[2] + 4, S - 4), sf__load4(d[3] + 4, S - 4), col + 4);
}

/* The largest, smallest and total of four lanes. */
SF_AVX2_INLINE int64_t hmax4(__m256i x)
{
    x = sf__max4(x, _mm256_permute2x128_si256(x, x, 0x01));
    x = sf__max4(x, _mm256_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtsi128_si64(_mm256_castsi256_si128(x));
}

SF_AVX2_INLINE int64_t hmin4(__m256i x)
{
    x = sf__min4(x, _mm256_permute2x128_si256(x, x, 0x01));
    x = sf__min4(x, _mm256_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtsi128_si64(_mm256_castsi256_si128(x));
}

SF_AVX2_INLINE int64_t hsum4(__m256i x)
{
    x = _mm256_add_epi64(x, _mm256_permute2x128_si256(x, x, 0x01));
    x = _mm256_add_epi64(x, _mm256_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtsi128_si64(_mm256_castsi256_si128(x));
}

/* A step's sums over quads of rows, lane by lane: each lane is a quarter of
 * the ranks, and the step's stored values start lane 0 (max, min and clip
 * in every lane). */
enum { QUAD_CANDIDATES = 8 + 8 / 2 }; /* 8 stages, and groups of 2 or more of them */

struct quad_acc {
    __m256i max[8], min[8], sum[8], clip[QUAD_CANDIDATES], end_sum, bits, over;
    __m256i v2[8]; /* each stage's runner-up prefix, in every lane */
};

SF_AVX2_INLINE void quad_acc_load(struct quad_acc *a, const sf_step_summary *st, uint32_t S,
                                  uint32_t C)
{
    for (uint32_t k = 0; k < S; k++) {
        a->max[k] = _mm256_set1_epi64x(st->dmax[k]);
        a->min[k] = _mm256_set1_epi64x(st->dmin[k]);
        a->sum[k] = _mm256_set_epi64x(0, 0, 0, st->dsum[k]);
        a->v2[k] = _mm256_set1_epi64x(st->prefix_top2[k].v2);
    }
    for (uint32_t c = 0; c < C; c++)
        a->clip[c] = _mm256_set1_epi64x(st->clipped_end[c]);
    a->end_sum = a->bits = a->over = _mm256_setzero_si256();
}

SF_AVX2_INLINE int64_t quad_acc_store(const struct quad_acc *a, sf_step_summary *st, uint32_t S,
                                      uint32_t C)
{
    for (uint32_t k = 0; k < S; k++) {
        st->dmax[k] = hmax4(a->max[k]);
        st->dmin[k] = hmin4(a->min[k]);
        st->dsum[k] = hsum4(a->sum[k]);
    }
    for (uint32_t c = 0; c < C; c++)
        st->clipped_end[c] = hmax4(a->clip[c]);
    return hsum4(a->end_sum);
}

/* The rare rows of a quad that beat a runner-up prefix, one at a time in
 * rank order, as the scalar fold takes them. The slowest total is the
 * largest end, the last stage's top prefix: a row that beats it beats that
 * stage's runner-up too, so it is taken here as well. */
static __attribute__((noinline)) SF_AVX2 void
quad_leaders(struct quad_acc *a, sf_step_summary *st, const __m256i *p, const int64_t *const d[4],
             const uint32_t *ranks, uint32_t S, int64_t *slowest)
{
    int64_t lanes[8][4];
    for (uint32_t k = 0; k < S; k++)
        _mm256_storeu_si256((__m256i *)lanes[k], p[k]);
    for (uint32_t j = 0; j < 4; j++) {
        for (uint32_t k = 0; k < S; k++)
            sf__top2_insert_ascending(&st->prefix_top2[k], lanes[k][j], ranks[j]);
        sf__fold_row_rank(st, d[j], ranks[j], lanes[S - 1][j], S, slowest);
    }
    for (uint32_t k = 0; k < S; k++)
        a->v2[k] = _mm256_set1_epi64x(st->prefix_top2[k].v2);
}

/* Four rows into the step: base + 4 k holds stage k of their rank medians. */
SF_AVX2_INLINE void fold_quad(const sf_summary *s, struct quad_acc *a, sf_step_summary *st,
                              const int64_t *const d[4], const int64_t *base, const uint32_t *ranks,
                              uint32_t S, int64_t *slowest)
{
    uint32_t C = s->cand.n;
    __m256i x[8], p[8], sav[8];
    load_quad(d, S, x);
    __m256i beat = _mm256_setzero_si256();
    for (uint32_t k = 0; k < S; k++) {
        p[k] = k ? _mm256_add_epi64(p[k - 1], x[k]) : x[0];
        a->bits = _mm256_or_si256(a->bits, x[k]);
        a->max[k] = sf__max4(a->max[k], x[k]);
        a->min[k] = sf__min4(a->min[k], x[k]);
        a->sum[k] = _mm256_add_epi64(a->sum[k], x[k]);
        sav[k] =
            excess4(_mm256_sub_epi64(x[k], _mm256_loadu_si256((const __m256i *)(base + 4 * k))));
        beat = _mm256_or_si256(beat, _mm256_cmpgt_epi64(p[k], a->v2[k]));
    }
    __m256i end = p[S - 1];
    for (uint32_t k = 0; k < S; k++)
        a->clip[k] = sf__max4(a->clip[k], _mm256_sub_epi64(end, sav[k]));
    for (uint32_t c = S; c < C; c++) {
        __m256i cut = _mm256_setzero_si256();
        for (uint64_t m = s->cand.member_mask[c]; m; m &= m - 1)
            cut = _mm256_add_epi64(cut, sav[__builtin_ctzll(m)]);
        a->clip[c] = sf__max4(a->clip[c], _mm256_sub_epi64(end, cut));
    }
    a->end_sum = _mm256_add_epi64(a->end_sum, end);
    a->over =
        _mm256_or_si256(a->over, _mm256_add_epi64(end, _mm256_set1_epi64x((int64_t)SF__OVER_STEP)));
    if (__builtin_expect(!_mm256_testz_si256(beat, beat), 0))
        quad_leaders(a, st, p, d, ranks, S, slowest);
}

/* Rows [0, n - n % 4) of the step by quads, their number in *done; the
 * rest are left to the row loop. base_quads: the rank medians in quads
 * (sf__baseline_quads). False where a row's end passed the step's bound. */
SF_AVX2_INLINE bool fold_quads_s(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g,
                                 uint32_t S, uint32_t *done)
{
    uint32_t C = s->cand.n, n4 = g->n & ~3u;
    *done = 0;
    if (n4 == 0 || g->baseline_quads == NULL || C > QUAD_CANDIDATES)
        return true;
    if (g->ranks[0] == 0) { /* rank 0 comes first, when present */
        st->has_rank0 = true;
        memcpy(st->rank0_d, sf__grid_row(g, 0, S), S * sizeof(int64_t));
    }
    struct quad_acc a;
    quad_acc_load(&a, st, S, C);
    int64_t slowest = st->slowest_total, sum0 = st->dsum[S - 1];
    /* a copy of g, which the stores into the step cannot alias: its fields
     * are read once, not again for every quad */
    const struct sf__grid_step at = *g;
    for (uint32_t r = 0; r < n4; r += 4) {
        const int64_t *d[4] = {sf__grid_row(&at, r, S), sf__grid_row(&at, r + 1, S),
                               sf__grid_row(&at, r + 2, S), sf__grid_row(&at, r + 3, S)};
        fold_quad(s, &a, st, d, at.baseline_quads + (size_t)r * S, at.ranks + r, S, &slowest);
    }
    if (!bounds_hold(a.bits, a.over))
        return false;
    int64_t end_sum = quad_acc_store(&a, st, S, C);
    sf__fold_step_end(st, sum0, st->dsum[S - 1], end_sum, slowest, n4);
    *done = n4;
    return true;
}

SF_AVX2_INLINE bool fold_step_s(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g,
                                uint32_t S)
{
    uint32_t r0, C = s->cand.n;
    if (!fold_quads_s(s, st, g, S, &r0))
        return false;
    if (r0 == g->n)
        return true;
    struct row vmax = load_row(st->dmax, S), vmin = load_row(st->dmin, S);
    struct row vsum = load_row(st->dsum, S), vclip = load_row(st->clipped_end, S);
    struct row zero = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    struct row v2 = top2(st->prefix_top2, 0, zero, 0, S);
    int64_t slowest = st->slowest_total, sum0 = st->dsum[S - 1];
    uint64_t end_sum = 0; /* unsigned: summed before the ends are checked */
    __m256i bits = _mm256_setzero_si256(), over = bits;
    __m256i over_step = _mm256_set1_epi64x((int64_t)SF__OVER_STEP);
    for (uint32_t r = r0; r < g->n; r++) {
        const int64_t *d = sf__grid_row(g, r, S);
        struct row x = load_row(d, S), p = row_prefixes(x, S);
        bits = _mm256_or_si256(bits, row_bits(x, S));
        vmax = row_max(vmax, x, S);
        vmin = row_min(vmin, x, S);
        vsum = row_add(vsum, x, S);
        struct row sav = row_excess(row_sub(x, load_row(g->baseline + (size_t)r * S, S), S), S);
        __m256i end = row_end(p, S);
        over = _mm256_or_si256(over, _mm256_add_epi64(end, over_step));
        vclip = row_max(vclip, row_sub((struct row){end, end}, sav, S), S);
        int64_t total = _mm_cvtsi128_si64(_mm256_castsi256_si128(end));
        end_sum += (uint64_t)total;
        unsigned hit = row_greater(p, v2, S);
        if (__builtin_expect(hit != 0, 0))
            v2 = top2(st->prefix_top2, hit, p, g->ranks[r], S);
        if (C > S)
            groups(s, sav, total, st->clipped_end);
        sf__fold_row_rank(st, d, g->ranks[r], total, S, &slowest);
    }
    if (!bounds_hold(bits, over))
        return false;
    store_row(st->dmax, vmax, S);
    store_row(st->dmin, vmin, S);
    store_row(st->dsum, vsum, S);
    store_row(st->clipped_end, vclip, S);
    sf__fold_step_end(st, sum0, st->dsum[S - 1], (int64_t)end_sum, slowest, g->n - r0);
    return true;
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

SF_AVX2 bool sf__fold_grid_avx2(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g)
{
    bool folded = false;
    SF__BY_STAGE_COUNT(s->schema.n_stages, S, folded = fold_step_s(s, st, g, S))
    return folded;
}

SF_AVX2 void sf__clip_rows_avx2(const sf_summary *s, const int64_t *rows, uint32_t n,
                                const int64_t *baseline, int64_t *clipped)
{
    SF__BY_STAGE_COUNT(s->schema.n_stages, S, clip_rows_s(s, rows, n, baseline, clipped, S))
}

#endif

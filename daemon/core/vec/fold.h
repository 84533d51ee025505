/*
 * What the vector forms of the grid fold share (fold_avx512.c and
 * fold_avx2.c; summary.c's scalar fold is the reference): the scalar work a row
 * needs only rarely or only once, written once, so that both forms do
 * exactly what the scalar fold in summary.c does.
 */
#ifndef SF_CORE_VEC_FOLD_H
#define SF_CORE_VEC_FOLD_H

#include "../core_internal.h"
#include "forms.h"

/* Row r's durations. */
static inline const int64_t *sf__grid_row(const struct sf__grid_step *g, uint32_t r, uint32_t S)
{
    return g->matrix ? g->matrix + (size_t)r * S : g->ptrs ? g->ptrs[r]->d : g->rows[r].d;
}

/* The group candidates (past the first S) of a row whose step ends at
 * `total`: each cut is the sum of its members' savings. In unsigned
 * arithmetic, which gives checked durations their exact values and is
 * defined for the unchecked ones that the grid fold meets before it has
 * checked them (vec.h, struct sf__grid_step). */
static inline void sf__fold_groups(const sf_summary *s, const int64_t *saving, int64_t total,
                                   int64_t *clipped)
{
    for (uint32_t c = s->schema.n_stages; c < s->cand.n; c++) {
        uint64_t cut = 0;
        for (uint64_t m = s->cand.member_mask[c]; m; m &= m - 1)
            cut += (uint64_t)saving[__builtin_ctzll(m)];
        int64_t end = (int64_t)((uint64_t)total - cut);
        clipped[c] = end > clipped[c] ? end : clipped[c];
    }
}

/* A row's S durations into dst: a loop, not a call to memcpy, which would
 * make the fold's loop keep its sums on the stack across it. */
static inline void sf__fold_copy_row(int64_t *dst, const int64_t *d, uint32_t S)
{
    for (uint32_t k = 0; k < S; k++)
        dst[k] = d[k];
}

/* The slowest rank and rank 0 of a row that ends at `total`. Ranks come in
 * ascending order, so the first of equal totals stays the slowest. */
static inline void sf__fold_row_rank(sf_step_summary *st, const int64_t *d, uint32_t rank,
                                     int64_t total, uint32_t S, int64_t *slowest)
{
    if (total > *slowest) {
        *slowest = total;
        st->slowest_rank = rank;
        sf__fold_copy_row(st->slowest_d, d, S);
    }
    if (rank == 0) {
        st->has_rank0 = true;
        sf__fold_copy_row(st->rank0_d, d, S);
    }
}

/* The step's scalars after its n rows: residual_sum from the last stage's
 * sum before (sum0) and after. */
static inline void sf__fold_step_end(sf_step_summary *st, int64_t sum0, int64_t sum,
                                     int64_t end_sum, int64_t slowest, uint32_t n)
{
    st->residual_sum += sum - sum0;
    st->end_sum += end_sum;
    st->slowest_total = slowest;
    st->n_ranks += n;
}

#endif

/*
 * Figures that need every rank's row, so they exist only in dense mode:
 * the direct-exposure gain against the cohort-median baseline and the mean
 * slack per rank (docs/SPEC.md section 1). Complete steps only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "vec/vec.h"

/* The scalar clipping of one step's rows, the fallback of
 * a form's clip_rows (vec.h): the first S candidates are the single stages, so their
 * cut is one saving. */
static inline __attribute__((always_inline)) void clip_rows_s(const sf_summary *s,
                                                              const int64_t *rows, uint32_t n,
                                                              const int64_t *baseline,
                                                              int64_t *clipped, uint32_t S)
{
    uint32_t C = s->cand.n;
    for (uint32_t r = 0; r < n; r++) {
        const int64_t *d = &rows[(size_t)r * S];
        int64_t p = 0, saving[SF_MAX_STAGES];
        for (uint32_t k = 0; k < S; k++) {
            p += d[k];
            saving[k] = sf__excess(d[k], baseline[k]);
        }
        for (uint32_t c = 0; c < S; c++)
            clipped[c] = p - saving[c] > clipped[c] ? p - saving[c] : clipped[c];
        for (uint32_t c = S; c < C; c++) {
            int64_t cut = 0;
            for (uint64_t m = s->cand.member_mask[c]; m; m &= m - 1)
                cut += saving[__builtin_ctzll(m)];
            clipped[c] = p - cut > clipped[c] ? p - cut : clipped[c];
        }
    }
}

/* Ranks up to which a step's stage medians come from the median network,
 * every stage a lane, where a vector unit runs it: one pass of the network
 * for all stages, where a selection per stage sorted its few values with a
 * mispredicted branch about every value: at 8 ranks the report's compute
 * half took 0.039 to 0.057 ms against 0.065 to 0.073 ms (bench_core
 * --ranks 8). Past 64 ranks the wide selection per stage is as fast. */
enum { COHORT_NET_MAX = 64 };

/* How a step's stage medians are found: the network for n ranks, or NULL
 * for the wide selection. */
struct cohort_medians {
    sf__median_net *net;
    const sf__vec *vec;
};

/* Each stage's median over the step's n ranks into baseline (scratch holds
 * S columns of n, then the selection's room). The network reads the rows
 * as they lie, rank-major, each stage a lane. */
static inline __attribute__((always_inline)) void stage_medians(const struct cohort_medians *cm,
                                                                const int64_t *rows, uint32_t n,
                                                                int64_t *scratch, int64_t *baseline,
                                                                uint32_t S)
{
    if (cm->net != NULL) {
        memcpy(scratch, rows, (size_t)n * S * sizeof *scratch);
        sf__median_net_run(cm->net, cm->vec, scratch, S, baseline);
        return;
    }
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t k = 0; k < S; k++)
            scratch[(size_t)k * n + r] = rows[(size_t)r * S + k];
    for (uint32_t k = 0; k < S; k++)
        baseline[k] = sf__median_wide(cm->vec, &scratch[(size_t)k * n], n, scratch + (size_t)S * n);
}

/* Per step: each stage's median over ranks, then the end frontier with each
 * candidate's members clipped to those medians. The scalar clipping is
 * inlined per stage count like the summary's fold. */
static inline __attribute__((always_inline)) void
cohort_step_s(const sf_summary *s, const struct cohort_medians *cm, const int64_t *rows, uint32_t n,
              int64_t *scratch, int64_t exposed, int64_t *gain, uint32_t S)
{
    uint32_t C = s->cand.n;
    int64_t baseline[SF_MAX_STAGES], clipped[SF_MAX_STAGES * 2];
    stage_medians(cm, rows, n, scratch, baseline, S);
    for (uint32_t c = 0; c < C; c++)
        clipped[c] = INT64_MIN;
    if (sf__vec_folds(cm->vec, S))
        cm->vec->clip_rows(s, rows, n, baseline, clipped);
    else
        clip_rows_s(s, rows, n, baseline, clipped, S);
    for (uint32_t c = 0; c < C; c++)
        gain[c] += exposed - clipped[c];
}

/* One step of cohort gains, unrolled for the usual stage counts. */
static void cohort_step(const sf_summary *s, const struct cohort_medians *cm, const int64_t *rows,
                        uint32_t n, int64_t *scratch, int64_t exposed, int64_t *gain)
{
    SF__BY_STAGE_COUNT(s->schema.n_stages, S,
                       cohort_step_s(s, cm, rows, n, scratch, exposed, gain, S))
}

int sf__cohort_gains(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                     int64_t *ret_gain)
{
    const sf_dense *dn = s->dense;
    uint32_t S = s->schema.n_stages, n = dn->n_ranks;
    int64_t *scratch = malloc(((size_t)n * S + 3 * (size_t)n + 24) * sizeof *scratch);
    if (scratch == NULL)
        return -ENOMEM;
    /* Without memory for the network, the selection does the same work. */
    struct cohort_medians cm = {NULL, sf__vec_chosen()};
    if (n <= COHORT_NET_MAX && n_complete > 0 && cm.vec->net_pays)
        (void)sf__median_net_new(n, &cm.net);
    for (uint32_t c = 0; c < s->cand.n; c++)
        ret_gain[c] = 0;
    for (uint32_t i = 0; i < n_complete; i++) {
        uint32_t t = complete[i];
        int64_t exposed = s->steps[t].prefix_top2[S - 1].v1;
        cohort_step(s, &cm, &dn->d[(size_t)t * n * S], n, scratch, exposed, ret_gain);
    }
    sf__median_net_free(cm.net);
    free(scratch);
    return 0;
}

/* One step's slack summed over boundaries 1..S is sum_k F[k] - sum_k P[k],
 * and sum_k P[k] = sum_k (S - k) d[k]: one weighted sum a row. A step's
 * slack of one rank is at most S frontiers of S capped durations (2^54 at
 * 64 stages), so int64 holds it; the total over steps is 128-bit. */
static inline __attribute__((always_inline)) void
slack_step_s(const sf_step_summary *st, const int64_t *rows, uint32_t n, __int128 *sum, uint32_t S)
{
    int64_t frontiers = 0;
    for (uint32_t k = 0; k < S; k++)
        frontiers += st->prefix_top2[k].v1;
    for (uint32_t r = 0; r < n; r++) {
        int64_t prefixes = 0;
        for (uint32_t k = 0; k < S; k++)
            prefixes += (int64_t)(S - k) * rows[(size_t)r * S + k];
        sum[r] += frontiers - prefixes;
    }
}

int sf__mean_slack(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                   int64_t *ret_slack)
{
    const sf_dense *dn = s->dense;
    uint32_t S = s->schema.n_stages, n = dn->n_ranks;
    __int128 *sum = calloc(n ? n : 1, sizeof *sum);
    if (sum == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < n_complete; i++) {
        const sf_step_summary *st = &s->steps[complete[i]];
        const int64_t *rows = &dn->d[(size_t)complete[i] * n * S];
        if (S == 6)
            slack_step_s(st, rows, n, sum, 6);
        else
            slack_step_s(st, rows, n, sum, S);
    }
    __int128 cells = (__int128)n_complete * S;
    for (uint32_t r = 0; r < n; r++)
        ret_slack[r] = cells ? (int64_t)(sum[r] / cells) : SF_NULL_NS;
    free(sum);
    return 0;
}

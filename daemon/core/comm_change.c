/*
 * The communication part of the change view (docs/CHANGE.md,
 * "Communication"): the baseline keeps, per synchronizing stage, the
 * largest issue lag of each step where every rank carried a mark; a window
 * is tested against it with the same shift estimate and the same level
 * discipline as the frontier tests, and the rank that led the window's
 * lags is named. Reads only summaries and a reference. Pure.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

/* Whether step t of c is eligible at stage j: every rank of the world marked
 * its issue there (the verdict's eligibility). */
static bool eligible(const sf_comm_summary *c, size_t t, size_t j, uint32_t world)
{
    return c->marked[t * c->n_sync + j] == world && c->lag_top2[t * c->n_sync + j].r1 != SF_NO_RANK;
}

static uint32_t count_eligible(const sf_comm_summary *c, size_t j, uint32_t world)
{
    uint32_t n = 0;
    for (size_t t = 0; t < c->n_steps; t++)
        n += eligible(c, t, j, world);
    return n;
}

int sf__comm_reference_collect(sf_reference *ref, const sf_summary *const *w, uint32_t n)
{
    uint32_t J = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (w[i]->comm == NULL)
            return 0; /* a window without marks: no baseline */
        J = w[i]->comm->n_sync;
    }
    size_t total = 0;
    for (uint32_t j = 0; j < J; j++) {
        ref->comm_at[j] = (uint32_t)total;
        ref->comm_n[j] = 0;
        for (uint32_t i = 0; i < n; i++)
            ref->comm_n[j] += count_eligible(w[i]->comm, j, w[i]->meta.world_size);
        total += ref->comm_n[j];
    }
    if (total == 0)
        return 0;
    ref->comm_lag_ns = malloc(total * sizeof *ref->comm_lag_ns);
    if (ref->comm_lag_ns == NULL)
        return -ENOMEM;
    ref->comm_n_sync = J;
    for (uint32_t j = 0; j < J; j++) {
        int64_t *out = ref->comm_lag_ns + ref->comm_at[j];
        for (uint32_t i = 0; i < n; i++) {
            const sf_comm_summary *c = w[i]->comm;
            for (size_t t = 0; t < c->n_steps; t++)
                if (eligible(c, t, j, w[i]->meta.world_size))
                    *out++ = c->lag_top2[t * J + j].v1;
        }
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The rank with the largest lag in most of the eligible steps (ties: the
 * lowest rank), from the leaders' ranks, sorted in place. */
static uint32_t most_frequent(uint32_t *rank, size_t n, uint32_t *ret_n)
{
    qsort(rank, n, sizeof *rank, cmp_u32);
    uint32_t best = SF_NO_RANK, best_n = 0;
    for (size_t i = 0, run; i < n; i += run) {
        for (run = 1; i + run < n && rank[i + run] == rank[i]; run++)
            ;
        if (run > best_n)
            best = rank[i], best_n = (uint32_t)run;
    }
    *ret_n = best_n;
    return best;
}

/* Stage j's test: the window's eligible steps' largest lags against the
 * baseline's. */
static int stage_test(const sf_reference *ref, const sf_comm_summary *c, size_t j, uint32_t world,
                      double alpha, sf_comm_change *ret, int64_t *lag, uint32_t *rank)
{
    size_t n = 0;
    for (size_t t = 0; t < c->n_steps; t++)
        if (eligible(c, t, j, world)) {
            lag[n] = c->lag_top2[t * c->n_sync + j].v1;
            rank[n++] = c->lag_top2[t * c->n_sync + j].r1;
        }
    if (n == 0 || ref->comm_n[j] == 0)
        return 0;
    sf_comm_change t = {.tested = true, .sync_stage = c->sync_stage[j]};
    int rc = sf_shift_estimate(ref->comm_lag_ns + ref->comm_at[j], ref->comm_n[j], lag, n, alpha,
                               &t.shift);
    if (rc < 0)
        return rc;
    t.eligible_steps = (uint32_t)n;
    t.rank = most_frequent(rank, n, &t.led_steps);
    if (!ret->tested || t.shift.p_value < ret->shift.p_value)
        *ret = t;
    return 0;
}

int sf__comm_change(sf_change *ch, const sf_reference *ref, const sf_summary *s,
                    const sf_gates *gates)
{
    memset(&ch->comm, 0, sizeof ch->comm);
    ch->comm.rank = SF_NO_RANK;
    const sf_comm_summary *c = s->comm;
    if (c == NULL || ref->comm_lag_ns == NULL || ref->comm_n_sync != c->n_sync)
        return 0;
    int64_t *lag = malloc((c->n_steps + 1) * sizeof *lag);
    uint32_t *rank = malloc((c->n_steps + 1) * sizeof *rank);
    int rc = lag && rank ? 0 : -ENOMEM;
    /* Bonferroni over the synchronizing stages, as the frontier tests are
     * over the stages: a clean run alarms at most change_alpha of windows. */
    double level = gates->change_alpha / c->n_sync;
    for (size_t j = 0; rc == 0 && j < c->n_sync; j++)
        rc = stage_test(ref, c, j, s->meta.world_size, level, &ch->comm, lag, rank);
    free(lag);
    free(rank);
    if (rc < 0)
        return rc;
    int64_t gap = (int64_t)llround(gates->comm_lag_min_s * 1e9);
    ch->comm.significant = ch->comm.tested && ch->comm.shift.p_value < level &&
                           ch->comm.shift.delta_ns >= gap && ch->comm.shift.ci_low_ns > 0;
    return 0;
}

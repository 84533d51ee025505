/*
 * Cohorts (docs/ACCOUNTING.md, "Cohorts"): the ranks' parallel coordinates
 * gathered from a window's rows into its dense rows, the cohorts they make,
 * and the report's cohort state. Ranks of one cohort (the same coordinates
 * but dp and ep) do the same work, so only they may be compared with one
 * another; the frontier ledger stays global. Pure and deterministic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

const char *sf_cohort_state_name(enum sf_cohort_state state)
{
    switch (state) {
    case SF_COHORTS_APPLIED:
        return "applied";
    case SF_COHORTS_INCONSISTENT:
        return "inconsistent";
    case SF_COHORTS_NONE:
        break;
    }
    return "none";
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Every rank declared, one shape, within range, sizes that multiply to the
 * world (when known), each tuple once. */
static int consistent(const sf_parallel *coords, uint32_t n, uint32_t world_size)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t product = sf_parallel_world(&coords[i]);
        if (coords[i].declared == 0 || !sf_parallel_same_shape(&coords[0], &coords[i]) ||
            product == 0 ||
            sf_parallel_check(&coords[i], world_size ? world_size : (uint32_t)product, NULL) < 0)
            return 0;
    }
    uint64_t *tuples = malloc((n ? n : 1) * sizeof *tuples);
    if (tuples == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        tuples[i] = sf_parallel_tuple(&coords[i]);
    qsort(tuples, n, sizeof *tuples, cmp_u64);
    int ok = 1;
    for (uint32_t i = 1; ok && i < n; i++)
        ok = tuples[i] != tuples[i - 1];
    free(tuples);
    return ok;
}

int sf_cohorts_build(const sf_parallel *coords, uint32_t n, uint32_t world_size,
                     uint32_t *ret_cohort, uint32_t *ret_n_cohorts)
{
    bool any = false;
    for (uint32_t i = 0; coords != NULL && i < n; i++)
        any |= coords[i].declared != 0;
    if (!any)
        return SF_COHORTS_NONE;
    int ok = consistent(coords, n, world_size);
    if (ok < 0)
        return ok;
    if (!ok)
        return SF_COHORTS_INCONSISTENT;
    /* Numbered in order of first appearance: a quadratic scan over the
     * cohorts seen, which are few (pp x tp x cp). */
    uint32_t n_cohorts = 0;
    uint32_t *first = malloc((n ? n : 1) * sizeof *first); /* cohort -> its first rank */
    if (first == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t c = 0;
        while (c < n_cohorts && !sf_parallel_same_cohort(&coords[first[c]], &coords[i]))
            c++;
        if (c == n_cohorts)
            first[n_cohorts++] = i;
        ret_cohort[i] = c;
    }
    free(first);
    *ret_n_cohorts = n_cohorts;
    return SF_COHORTS_APPLIED;
}

/* ---- gathering from rows ------------------------------------------------ */

/* One rank's rows must agree: all with the same coordinates or all without.
 * first[i]: the rank's first row's coordinates, or &d->parallel[i] (no
 * row's) for rows without, NULL before its first row. The rows of one rank
 * usually share one set (sfd's rows point at the rank's own), so equal
 * pointers spare a compare. */
static void gather_dense(sf_summary *s, const sf_row *rows, size_t n_rows,
                         const sf_parallel **first)
{
    sf_dense *d = s->dense;
    for (size_t k = 0; k < n_rows; k++) {
        uint32_t i = sf__index_u32(d->ranks, d->n_ranks, rows[k].rank);
        const sf_parallel *without = &d->parallel[i];
        const sf_parallel *p = rows[k].parallel != NULL ? rows[k].parallel : without;
        if (first[i] == NULL) {
            first[i] = p;
            if (p != without)
                d->parallel[i] = *p;
        } else if (first[i] != p &&
                   (first[i] == without || p == without || !sf_parallel_equal(first[i], p))) {
            s->parallel_conflict = true;
        }
    }
}

/* s->parallel_rows, counted by the row check, spares a job without
 * coordinates this pass. */
int sf__parallel_gather(sf_summary *s, const sf_row *rows, size_t n_rows)
{
    if (s->parallel_rows == 0)
        return 0;
    s->parallel_declared = true;
    if (s->parallel_rows != n_rows)
        s->parallel_conflict = true;
    if (s->dense == NULL || s->dense->n_ranks == 0)
        return 0;
    sf_dense *d = s->dense;
    const sf_parallel **first = calloc(d->n_ranks, sizeof *first);
    d->parallel = calloc(d->n_ranks, sizeof *d->parallel);
    if (first == NULL || d->parallel == NULL) {
        free(first);
        return -ENOMEM;
    }
    gather_dense(s, rows, n_rows, first);
    free(first);
    return 0;
}

/* ---- the report's cohorts ---------------------------------------------- */

int sf__report_cohorts(const sf_summary *s, uint32_t *cohort_of, enum sf_cohort_state *ret_state,
                       uint32_t *ret_n)
{
    *ret_n = 0;
    if (!s->parallel_declared) {
        *ret_state = SF_COHORTS_NONE;
        return 0;
    }
    if (!s->parallel_conflict && (s->dense == NULL || s->dense->parallel == NULL) &&
        s->cohort != NULL) /* a mergeable or decoded summary: its cohort part */
        return sf__cohort_part_state(s, cohort_of, ret_state, ret_n);
    if (s->parallel_conflict || s->dense == NULL || s->dense->parallel == NULL) {
        /* No part (lost in a merge with a summary without one, or too
         * large): no cohort can be formed, so no rank may be compared with
         * another. */
        *ret_state = SF_COHORTS_INCONSISTENT;
        return 0;
    }
    int r = sf_cohorts_build(s->dense->parallel, s->dense->n_ranks, s->meta.world_size, cohort_of,
                             ret_n);
    if (r < 0)
        return r;
    *ret_state = (enum sf_cohort_state)r;
    return 0;
}

/* ---- contrasts inside cohorts ------------------------------------------ */

void sf__cohort_contrasts(const int64_t *col, size_t stride, uint32_t n, const uint32_t *cohort_of,
                          uint32_t n_cohorts, int64_t *scratch, int64_t *out)
{
    int64_t *vals = scratch, *select = scratch + n;
    for (uint32_t c = 0; c < n_cohorts; c++) {
        uint32_t m = 0;
        for (uint32_t x = 0; x < n; x++)
            if (cohort_of[x] == c)
                vals[m++] = col[(size_t)x * stride];
        sf__middle mm = {0};
        if (m >= 2)
            sf__middle_of(vals, 1, m, select, &mm);
        for (uint32_t x = 0; x < n; x++)
            if (cohort_of[x] == c) /* alone in its cohort: no peer, no contrast */
                out[x] = m >= 2 ? sf__contrast(&mm, col[(size_t)x * stride]) : 0;
    }
}

/*
 * Accumulated sync waits (docs/ACCOUNTING.md, "Synchronizing groups"): per
 * row and synchronizing stage the time the rank spent inside that stage's
 * collectives and how many it entered, checked and gathered into the dense
 * rows, where the wait rule of tp and pp groups reads them
 * (daemon/core/straggler.c). Pure and deterministic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

int sf__sync_wait_row_check(const sf_row *row, const sf_schema *schema)
{
    if (row->sync_wait == NULL)
        return 0;
    uint32_t J = (uint32_t)__builtin_popcountll(schema->sync_mask);
    if (J == 0)
        return -EINVAL; /* waits without a synchronizing stage */
    uint32_t j = 0;
    for (uint64_t m = schema->sync_mask; m; m &= m - 1, j++) {
        uint32_t k = (uint32_t)__builtin_ctzll(m);
        int64_t wait = row->sync_wait[j], count = row->sync_wait[J + j];
        if (wait == -1 && count == 0)
            continue;
        /* Within the recorded stage: own work and sync wait together. */
        if (wait < 0 || wait > row->d[k] + row->d[k + 1] || count < 1 ||
            count > (int64_t)SF_MAX_SYNC_WAITS)
            return -ERANGE;
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int sf__sync_wait_gather(sf_summary *s, const sf_row *rows, size_t n_rows)
{
    bool any = false; /* a row with a wait mark: rows of -1 only are none */
    uint32_t J0 = (uint32_t)__builtin_popcountll(s->schema.sync_mask);
    for (size_t i = 0; i < n_rows; i++) {
        int r = sf__sync_wait_row_check(&rows[i], &s->schema);
        if (r < 0)
            return r;
        for (uint32_t j = 0; rows[i].sync_wait != NULL && j < J0; j++)
            any |= rows[i].sync_wait[j] >= 0;
    }
    sf_dense *d = s->dense;
    if (!any || d == NULL || d->n_ranks == 0)
        return 0;
    size_t J = (size_t)__builtin_popcountll(s->schema.sync_mask);
    size_t cells = (size_t)s->n_steps * d->n_ranks;
    d->sync_wait = malloc(cells * 2 * J * sizeof *d->sync_wait);
    if (d->sync_wait == NULL)
        return -ENOMEM;
    for (size_t c = 0; c < cells; c++)
        for (size_t j = 0; j < J; j++) {
            d->sync_wait[c * 2 * J + j] = -1;
            d->sync_wait[c * 2 * J + J + j] = 0;
        }
    for (size_t i = 0; i < n_rows; i++) {
        if (rows[i].sync_wait == NULL)
            continue;
        const uint32_t *p = bsearch(&rows[i].rank, d->ranks, d->n_ranks, sizeof *p, cmp_u32);
        int64_t t = sf_summary_step_index(s, rows[i].step);
        if (p == NULL || t < 0)
            continue;
        size_t c = (size_t)t * d->n_ranks + (size_t)(p - d->ranks);
        memcpy(&d->sync_wait[c * 2 * J], rows[i].sync_wait, 2 * J * sizeof *d->sync_wait);
    }
    return 0;
}

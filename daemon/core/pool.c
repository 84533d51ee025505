/*
 * The windows a change is measured over (docs/CHANGE.md, "Pooled windows").
 * A 100-step window is too short to see a twentieth of a step against the
 * steps' own noise; three of them are not. The report keeps its window, and
 * only the change test reads the window together with the ones just before
 * it. Pure: the caller keeps the pool and hands it each closed window.
 * Nothing is copied on the way: the pool owns the windows it keeps, and the
 * change reads their steps where they lie.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

void sf_change_pool_clear(sf_change_pool *p)
{
    for (uint32_t i = 0; i < p->n; i++) {
        sf_summary_free(p->recent[i]);
        free(p->derived[i]);
    }
    free(p->pending);
    memset(p, 0, sizeof *p);
}

size_t sf_change_pool_bytes(const sf_change_pool *p)
{
    size_t bytes = p->pending_bytes;
    for (uint32_t i = 0; i < p->n; i++)
        bytes += sf_summary_bytes(p->recent[i]) + p->derived_bytes[i];
    return bytes;
}

/* Moves kept window i to slot `to` (with what was derived of it). */
static void slot_move(sf_change_pool *p, uint32_t to, uint32_t from)
{
    p->recent[to] = p->recent[from];
    p->derived[to] = p->derived[from];
    p->derived_bytes[to] = p->derived_bytes[from];
}

static bool before(const sf_window_meta *a, const sf_window_meta *b)
{
    return a->segment < b->segment || (a->segment == b->segment && a->index < b->index);
}

int sf_change_pool_keep(sf_change_pool *p, sf_summary **summary, uint32_t want)
{
    if (p == NULL || summary == NULL || *summary == NULL || want < 1 || want > SF_POOL_MAX_WINDOWS)
        return -EINVAL;
    const sf_window_meta *m = &(*summary)->meta;
    uint32_t keep = want - 1;
    /* Where it goes among the kept windows, oldest first; a window older
     * than all of a full pool is of no use to the windows after it. */
    uint32_t at = p->n;
    while (at > 0 && before(m, &p->recent[at - 1]->meta))
        at--;
    bool again = at > 0 && !before(&p->recent[at - 1]->meta, m);
    bool mine = p->pending != NULL && !before(m, &p->pending_meta) && !before(&p->pending_meta, m);
    if (keep > 0 && !again && (at > 0 || p->n < keep)) {
        for (uint32_t i = p->n; i > at; i--)
            slot_move(p, i, i - 1);
        p->recent[at] = *summary;
        p->derived[at] = mine ? p->pending : NULL;
        p->derived_bytes[at] = mine ? p->pending_bytes : 0;
        p->pending = mine ? NULL : p->pending;
        *summary = NULL;
        p->n++;
    }
    free(p->pending); /* the window measured last has been offered */
    p->pending = NULL;
    p->pending_bytes = 0;
    for (; p->n > keep; p->n--) { /* the oldest leave */
        sf_summary_free(p->recent[0]);
        free(p->derived[0]);
        for (uint32_t i = 0; i + 1 < p->n; i++)
            slot_move(p, i, i + 1);
    }
    return 0;
}

static bool same_ranks(const sf_summary *a, const sf_summary *b)
{
    if (a->n_intervals != b->n_intervals ||
        memcmp(a->coverage, b->coverage, a->n_intervals * sizeof *a->coverage) != 0 ||
        (a->dense == NULL) != (b->dense == NULL))
        return false;
    return a->dense == NULL ||
           (a->dense->n_ranks == b->dense->n_ranks &&
            memcmp(a->dense->ranks, b->dense->ranks, a->dense->n_ranks * sizeof(uint32_t)) == 0);
}

/* Whether window w can be measured together with the later window s: the
 * same segment, shape and ranks (a step of either then reads like a step of
 * s), its steps before s's. */
static bool lines_up(const sf_summary *w, const sf_summary *s)
{
    return w->meta.segment == s->meta.segment && w->meta.index < s->meta.index &&
           w->meta.world_size == s->meta.world_size && sf_schema_equal(&w->schema, &s->schema) &&
           (w->n_steps == 0 || s->n_steps == 0 ||
            w->steps[w->n_steps - 1].step < s->steps[0].step) &&
           same_ranks(w, s);
}

/* The windows of the view, oldest first, into parts, with the contrasts
 * kept of each (NULL where none); returns their count. */
static uint32_t pool_parts(const sf_change_pool *p, const sf_summary *summary,
                           const sf_reference *ref, uint32_t want, const sf_summary **parts,
                           const int64_t **cached)
{
    uint32_t n = 0;
    const sf_summary *later = summary;
    /* Back from the newest kept window, while each lines up with the one
     * after it, lies within the last want - 1 window indices and comes
     * after the reference (no baseline step is measured against itself). */
    for (uint32_t i = p->n; i-- > 0 && n + 1 < want;) {
        const sf_summary *w = p->recent[i];
        if (!lines_up(w, later) || summary->meta.index - w->meta.index >= want ||
            !sf_reference_applies(ref, &w->meta))
            break;
        cached[n] = p->derived[i];
        parts[n++] = later = w;
    }
    for (uint32_t i = 0; i < n / 2; i++) { /* oldest first */
        const sf_summary *t = parts[i];
        const int64_t *c = cached[i];
        parts[i] = parts[n - 1 - i], cached[i] = cached[n - 1 - i];
        parts[n - 1 - i] = t, cached[n - 1 - i] = c;
    }
    cached[n] = NULL;
    parts[n++] = summary;
    return n;
}

int sf_change_pool_view(const sf_change_pool *p, const sf_summary *summary, const sf_reference *ref,
                        uint32_t want, const sf_summary **ret_parts)
{
    const int64_t *cached[SF_POOL_MAX_WINDOWS];
    if (p == NULL || summary == NULL || ref == NULL || ret_parts == NULL || want < 1 ||
        want > SF_POOL_MAX_WINDOWS)
        return -EINVAL;
    return (int)pool_parts(p, summary, ref, want, ret_parts, cached);
}

int sf__change_pool_measure(sf_change_pool *pool, const sf_summary *summary,
                            const sf_reference *ref, const sf_gates *gates, sf_change **ret)
{
    static const sf_change_pool none;
    const sf_summary *parts[SF_POOL_MAX_WINDOWS];
    const int64_t *cached[SF_POOL_MAX_WINDOWS];
    uint32_t want = gates->change_pool_windows ? gates->change_pool_windows : 1, n;
    if (want > SF_POOL_MAX_WINDOWS)
        return -EINVAL;
    n = pool_parts(pool ? pool : &none, summary, ref, want, parts, cached);
    struct sf_contrasts fresh = {0};
    int r =
        sf__change_of_parts(ref, parts, n, cached, pool && want > 1 ? &fresh : NULL, gates, ret);
    if (r == 0 && pool != NULL) { /* until the pool takes the window, or not */
        free(pool->pending);
        pool->pending = fresh.v;
        pool->pending_bytes = fresh.bytes;
        pool->pending_meta = summary->meta;
    }
    return r;
}

int sf_change_compute_pooled(const sf_reference *ref, const sf_summary *const *parts, uint32_t n,
                             const sf_gates *gates, sf_change **ret)
{
    if (ref == NULL || parts == NULL || n == 0 || n > SF_POOL_MAX_WINDOWS || gates == NULL ||
        ret == NULL)
        return -EINVAL;
    for (uint32_t i = 0; i < n; i++)
        if (parts[i] == NULL || (i > 0 && !lines_up(parts[i - 1], parts[i])))
            return -EINVAL;
    return sf__change_of_parts(ref, parts, n, NULL, NULL, gates, ret);
}

/*
 * Merging mergeable summaries. Every combine is a max, a min, a sum or a
 * top-2 under a total order (value descending, rank ascending), so merging is
 * exact, associative and commutative as long as rank coverage is disjoint,
 * which is checked first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

/* ---- coverage ------------------------------------------------------------ */

static uint64_t coverage_intersection(const sf_summary *a, const sf_summary *b)
{
    uint64_t n = 0;
    uint32_t i = 0, j = 0;
    while (i < a->n_intervals && j < b->n_intervals) {
        sf_rank_interval x = a->coverage[i], y = b->coverage[j];
        uint32_t lo = x.lo > y.lo ? x.lo : y.lo, hi = x.hi < y.hi ? x.hi : y.hi;
        if (lo <= hi)
            n += (uint64_t)hi - lo + 1;
        if (x.hi < y.hi)
            i++;
        else
            j++;
    }
    return n;
}

static int coverage_union(sf_summary *dst, const sf_summary *src)
{
    uint32_t n = dst->n_intervals + src->n_intervals;
    sf_rank_interval *out = malloc((n ? n : 1) * sizeof *out);
    if (out == NULL)
        return -ENOMEM;
    uint32_t i = 0, j = 0, k = 0;
    while (i < dst->n_intervals || j < src->n_intervals) {
        bool take_dst = j == src->n_intervals ||
                        (i < dst->n_intervals && dst->coverage[i].lo < src->coverage[j].lo);
        sf_rank_interval next = take_dst ? dst->coverage[i++] : src->coverage[j++];
        if (k && out[k - 1].hi + 1 == next.lo)
            out[k - 1].hi = next.hi;
        else
            out[k++] = next;
    }
    free(dst->coverage);
    dst->coverage = out;
    dst->n_intervals = k;
    return 0;
}

/* ---- per step ------------------------------------------------------------ */

static void step_copy(uint32_t S, uint32_t C, sf_step_summary *out, const sf_step_summary *in)
{
    out->step = in->step;
    out->n_ranks = in->n_ranks;
    memcpy(out->prefix_top2, in->prefix_top2, S * sizeof *in->prefix_top2);
    memcpy(out->dmax, in->dmax, S * sizeof(int64_t));
    memcpy(out->dmin, in->dmin, S * sizeof(int64_t));
    memcpy(out->dsum, in->dsum, S * sizeof(int64_t));
    memcpy(out->slowest_d, in->slowest_d, S * sizeof(int64_t));
    memcpy(out->rank0_d, in->rank0_d, S * sizeof(int64_t));
    memcpy(out->clipped_end, in->clipped_end, C * sizeof(int64_t));
    out->slowest_total = in->slowest_total;
    out->slowest_rank = in->slowest_rank;
    out->has_rank0 = in->has_rank0;
    out->residual_sum = in->residual_sum;
    out->overlap_sum = in->overlap_sum;
    out->end_sum = in->end_sum;
    out->arrival_missing = in->arrival_missing;
}

/* out already holds a copy of one side; fold the other side in. */
static void step_fold(uint32_t S, uint32_t C, sf_step_summary *out, const sf_step_summary *in)
{
    for (uint32_t k = 0; k < S; k++) {
        const sf_top2 *t = &in->prefix_top2[k];
        if (t->r1 != SF_NO_RANK)
            sf__top2_insert(&out->prefix_top2[k], t->v1, t->r1);
        if (t->r2 != SF_NO_RANK)
            sf__top2_insert(&out->prefix_top2[k], t->v2, t->r2);
        if (in->dmax[k] > out->dmax[k])
            out->dmax[k] = in->dmax[k];
        if (in->dmin[k] < out->dmin[k])
            out->dmin[k] = in->dmin[k];
        out->dsum[k] += in->dsum[k];
    }
    for (uint32_t c = 0; c < C; c++)
        if (in->clipped_end[c] > out->clipped_end[c])
            out->clipped_end[c] = in->clipped_end[c];
    if (in->slowest_total > out->slowest_total ||
        (in->slowest_total == out->slowest_total && in->slowest_rank < out->slowest_rank)) {
        out->slowest_total = in->slowest_total;
        out->slowest_rank = in->slowest_rank;
        memcpy(out->slowest_d, in->slowest_d, S * sizeof(int64_t));
    }
    if (in->has_rank0) {
        out->has_rank0 = true;
        memcpy(out->rank0_d, in->rank0_d, S * sizeof(int64_t));
    }
    out->n_ranks += in->n_ranks;
    out->residual_sum += in->residual_sum;
    out->overlap_sum += in->overlap_sum;
    out->end_sum += in->end_sum;
    out->arrival_missing += in->arrival_missing;
}

static uint32_t union_step_count(const sf_summary *a, const sf_summary *b)
{
    uint32_t i = 0, j = 0, n = 0;
    while (i < a->n_steps || j < b->n_steps) {
        if (j == b->n_steps || (i < a->n_steps && a->steps[i].step < b->steps[j].step))
            i++;
        else if (i == a->n_steps || b->steps[j].step < a->steps[i].step)
            j++;
        else
            i++, j++;
        n++;
    }
    return n;
}

/* Fills merged (allocated for the union of steps) from a and b. */
static void merge_steps(sf_summary *merged, const sf_summary *a, const sf_summary *b)
{
    uint32_t S = a->schema.n_stages, C = a->cand.n;
    uint32_t i = 0, j = 0, k = 0;
    while (i < a->n_steps || j < b->n_steps) {
        sf_step_summary *out = &merged->steps[k++];
        if (j == b->n_steps || (i < a->n_steps && a->steps[i].step < b->steps[j].step)) {
            step_copy(S, C, out, &a->steps[i++]);
        } else if (i == a->n_steps || b->steps[j].step < a->steps[i].step) {
            step_copy(S, C, out, &b->steps[j++]);
        } else {
            step_copy(S, C, out, &a->steps[i++]);
            step_fold(S, C, out, &b->steps[j++]);
        }
    }
}

/* ---- dense rows ---------------------------------------------------------- */

int64_t sf_summary_step_index(const sf_summary *s, int64_t step)
{
    uint32_t lo = 0, hi = s->n_steps;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->steps[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n_steps && s->steps[lo].step == step ? (int64_t)lo : -1;
}

/* Copies one side's dense rows into the merged layout: its ranks go to
 * slots [offset_of(rank)] of the union rank list. */
static void dense_scatter(sf_dense *out, const sf_summary *merged, const sf_summary *side)
{
    uint32_t S = merged->schema.n_stages;
    size_t J = (size_t)__builtin_popcountll(merged->schema.sync_mask);
    const sf_dense *in = side->dense;
    uint32_t slot = 0;
    for (uint32_t r = 0; r < in->n_ranks; r++) {
        while (out->ranks[slot] != in->ranks[r])
            slot++;
        for (uint32_t t = 0; t < side->n_steps; t++) {
            size_t src = (size_t)t * in->n_ranks + r;
            if (!in->present[src])
                continue;
            size_t dst =
                (size_t)sf_summary_step_index(merged, side->steps[t].step) * out->n_ranks + slot;
            out->present[dst] = 1;
            memcpy(&out->d[dst * S], &in->d[src * S], S * sizeof(int64_t));
            if (in->sync_wait != NULL)
                memcpy(&out->sync_wait[dst * 2 * J], &in->sync_wait[src * 2 * J],
                       2 * J * sizeof(int64_t));
        }
    }
}

static int dense_merge(sf_summary *merged, const sf_summary *a, const sf_summary *b)
{
    sf_dense *d = calloc(1, sizeof *d);
    if (d == NULL)
        return -ENOMEM;
    merged->dense = d;
    uint32_t n = a->dense->n_ranks + b->dense->n_ranks;
    size_t cells = (size_t)merged->n_steps * n;
    d->ranks = malloc((n ? n : 1) * sizeof *d->ranks);
    d->roles = calloc(n ? n : 1, sizeof *d->roles);
    d->d = calloc(cells ? cells * merged->schema.n_stages : 1, sizeof *d->d);
    d->present = calloc(cells ? cells : 1, 1);
    if (a->dense->parallel != NULL || b->dense->parallel != NULL)
        d->parallel = calloc(n ? n : 1, sizeof *d->parallel);
    if (!d->ranks || !d->roles || !d->d || !d->present ||
        ((a->dense->parallel != NULL || b->dense->parallel != NULL) && d->parallel == NULL))
        return -ENOMEM;
    if (a->dense->sync_wait != NULL || b->dense->sync_wait != NULL) {
        /* A side without waits keeps none: -1 and 0 in every cell. */
        size_t J = (size_t)__builtin_popcountll(merged->schema.sync_mask);
        d->sync_wait = malloc((cells ? cells : 1) * 2 * J * sizeof *d->sync_wait);
        if (d->sync_wait == NULL)
            return -ENOMEM;
        for (size_t c = 0; c < cells * 2 * J; c++)
            d->sync_wait[c] = c % (2 * J) < J ? -1 : 0;
    }
    uint32_t i = 0, j = 0;
    while (i < a->dense->n_ranks || j < b->dense->n_ranks) {
        bool from_a = j == b->dense->n_ranks ||
                      (i < a->dense->n_ranks && a->dense->ranks[i] < b->dense->ranks[j]);
        const sf_dense *side = from_a ? a->dense : b->dense;
        uint32_t idx = from_a ? i++ : j++;
        d->ranks[d->n_ranks] = side->ranks[idx];
        if (side->parallel != NULL) /* a side without keeps zeros: none declared */
            d->parallel[d->n_ranks] = side->parallel[idx];
        d->roles[d->n_ranks] = strdup(side->roles[idx]);
        if (d->roles[d->n_ranks++] == NULL)
            return -ENOMEM;
    }
    dense_scatter(d, merged, a);
    dense_scatter(d, merged, b);
    return 0;
}

/* ---- whole summaries ----------------------------------------------------- */

static int merge_window_fields(sf_summary *dst, const sf_summary *src)
{
    dst->meta.flags |= src->meta.flags;
    dst->meta.dropped_records += src->meta.dropped_records;
    dst->meta.contract_violations += src->meta.contract_violations;
    dst->meta.rejected_records += src->meta.rejected_records;
    /* The window's wall-clock span over the nodes: earliest open, latest close. */
    if (src->meta.opened_at_ms > 0 &&
        (dst->meta.opened_at_ms <= 0 || src->meta.opened_at_ms < dst->meta.opened_at_ms))
        dst->meta.opened_at_ms = src->meta.opened_at_ms;
    if (src->meta.closed_at_ms > dst->meta.closed_at_ms)
        dst->meta.closed_at_ms = src->meta.closed_at_ms;
    dst->event_samples += src->event_samples;
    dst->event_ready += src->event_ready;
    dst->event_cpu_ns += src->event_cpu_ns;
    dst->event_gpu_ns += src->event_gpu_ns;
    dst->merge_conflicts += src->merge_conflicts;
    dst->violation_rows += src->violation_rows;
    dst->non_monotonic_rows += src->non_monotonic_rows;
    dst->roles_overflow |= src->roles_overflow;
    dst->parallel_declared |= src->parallel_declared;
    dst->parallel_conflict |= src->parallel_conflict;
    dst->parallel_rows += src->parallel_rows;
    for (uint32_t i = 0; i < src->n_roles; i++) {
        int r = sf__roles_add(dst, src->roles[i]);
        if (r < 0)
            return r;
    }
    return coverage_union(dst, src);
}

/* The group of each synchronizing stage: a summary from an older peer says
 * world (0) for every stage, which a declared group replaces; the ranks of
 * one job declare the same groups (sfd checks it at Hello), and were two to
 * differ, the larger would win either way round. */
static void merge_sync_groups(sf_schema *dst, const sf_schema *src)
{
    for (uint64_t m = dst->sync_mask; m; m &= m - 1) {
        uint32_t k = (uint32_t)__builtin_ctzll(m);
        if (src->sync_group[k] > dst->sync_group[k])
            dst->sync_group[k] = src->sync_group[k];
    }
}

static void swap_step_arrays(sf_summary *a, sf_summary *b)
{
    sf_summary tmp = *a;
    a->n_steps = b->n_steps;
    a->steps = b->steps;
    a->storage = b->storage;
    a->top2_storage = b->top2_storage;
    a->dense = b->dense;
    b->n_steps = tmp.n_steps;
    b->steps = tmp.steps;
    b->storage = tmp.storage;
    b->top2_storage = tmp.top2_storage;
    b->dense = tmp.dense;
}

int sf_summary_merge(sf_summary *dst, const sf_summary *src)
{
    if (dst == NULL || src == NULL || dst == src || !sf_schema_equal(&dst->schema, &src->schema) ||
        dst->meta.index != src->meta.index || dst->meta.segment != src->meta.segment ||
        dst->meta.world_size != src->meta.world_size)
        return -EINVAL;
    uint64_t overlap = coverage_intersection(dst, src);
    uint64_t covered = sf_summary_covered_ranks(src);
    if (overlap == covered)
        return -EALREADY;
    if (overlap > 0) {
        dst->merge_conflicts++;
        return -EBUSY;
    }
    sf_summary *merged = NULL;
    int r = sf_summary_alloc(&dst->schema, &dst->meta, union_step_count(dst, src), &merged);
    if (r < 0)
        return r;
    merge_steps(merged, dst, src);
    if (dst->dense && src->dense && (r = dense_merge(merged, dst, src)) < 0)
        goto out;
    if ((r = merge_window_fields(dst, src)) < 0 ||
        (r = sf__comm_merge(&dst->comm, src->comm)) < 0 ||
        (r = sf__cohort_merge(&dst->cohort, src->cohort)) < 0)
        goto out;
    merge_sync_groups(&dst->schema, &src->schema);
    swap_step_arrays(dst, merged); /* the old arrays leave with merged */
out:
    sf_summary_free(merged);
    return r;
}

int sf_summary_clone(const sf_summary *s, sf_summary **ret)
{
    if (s == NULL || ret == NULL)
        return -EINVAL;
    sf_summary *c = NULL;
    int r = sf_summary_alloc(&s->schema, &s->meta, s->n_steps, &c);
    if (r < 0)
        return r;
    uint32_t S = s->schema.n_stages;
    for (uint32_t i = 0; i < s->n_steps; i++)
        step_copy(S, s->cand.n, &c->steps[i], &s->steps[i]);
    if ((r = merge_window_fields(c, s)) < 0)
        goto fail;
    c->meta = s->meta; /* the fold above added the counters to a copy of themselves */
    if ((r = sf__comm_clone(s->comm, &c->comm)) < 0 ||
        (r = sf__cohort_clone(s->cohort, &c->cohort)) < 0)
        goto fail;
    if (s->dense) {
        sf_summary none = {.dense = &(sf_dense){0}};
        if ((r = dense_merge(c, s, &none)) < 0)
            goto fail;
    }
    *ret = c;
    return 0;
fail:
    sf_summary_free(c);
    return r;
}

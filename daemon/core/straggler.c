/*
 * Arrival-point evidence of one window (docs/ACCOUNTING.md, "Straggler
 * verdict" and "Critical path"): the rank that arrived last at a
 * synchronizing stage, where its lateness began, its persistence across
 * windows, and the most frequent chain of boundary leaders. Pure: reads the
 * summary's top-2 prefixes and the report's per-step leaders, nothing else.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

const char *sf_persistence_name(enum sf_persistence p)
{
    switch (p) {
    case SF_PERSIST_FIXED:
        return "fixed";
    case SF_PERSIST_ROTATING:
        return "rotating";
    case SF_PERSIST_NONE:
        break;
    }
    return "none";
}

/* ---- the verdict ---------------------------------------------------------- */

struct arrival { /* one eligible step: who arrived last, by how much */
    uint32_t rank, at;
    int64_t lateness;
};

static int cmp_arrival(const void *a, const void *b)
{
    const struct arrival *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->lateness != y->lateness)
        return x->lateness < y->lateness ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

static int cmp_u32_asc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The earliest stage up to k whose boundary rank led (uniquely, beyond the
 * gap tolerance) in more than half of the steps it arrived last; k itself
 * when no earlier one does. at[] holds complete-step positions. */
static uint32_t origin_stage(const sf_report *r, uint32_t rank, uint32_t k, const uint32_t *at,
                             uint32_t n)
{
    uint32_t S = r->schema.n_stages;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t led = 0;
        for (uint32_t i = 0; i < n; i++)
            led += r->step_leaders[(size_t)at[i] * S + j] == rank;
        if (2 * (uint64_t)led > n)
            return j;
    }
    return k;
}

/* The candidate verdict at synchronizing stage k, or present = false. */
static void verdict_at(const sf_report *r, const sf_summary *s, const uint32_t *complete,
                       uint32_t n_complete, uint32_t k, struct arrival *arr, uint32_t *at,
                       sf_straggler *ret)
{
    uint32_t n = 0;
    memset(ret, 0, sizeof *ret);
    for (uint32_t i = 0; i < n_complete; i++) {
        const sf_step_summary *st = &s->steps[complete[i]];
        if (st->arrival_missing != 0 || st->n_ranks < 2)
            continue;
        const sf_top2 *t = &st->prefix_top2[k];
        arr[n++] = (struct arrival){t->r1, i, t->v1 - t->v2};
    }
    ret->eligible_steps = n;
    if (n == 0)
        return;
    qsort(arr, n, sizeof *arr, cmp_arrival);
    uint32_t best = 0, best_len = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i;
        while (j < n && arr[j].rank == arr[i].rank)
            j++;
        if (j - i > best_len) { /* strict: the lowest rank wins ties */
            best = i;
            best_len = j - i;
        }
        i = j;
    }
    /* Lateness is sorted within the run: its median, integer ns. */
    int64_t lo = arr[best + (best_len - 1) / 2].lateness, hi = arr[best + best_len / 2].lateness;
    int64_t median = lo + (hi - lo) / 2;
    if ((double)best_len < r->gates.straggler_last_share_min * n || median <= r->leader_gap_tol_ns)
        return;
    for (uint32_t i = 0; i < best_len; i++)
        at[i] = arr[best + i].at;
    qsort(at, best_len, sizeof *at, cmp_u32_asc);
    *ret = (sf_straggler){.present = true,
                          .rank = arr[best].rank,
                          .sync_stage = k,
                          .origin_stage = origin_stage(r, arr[best].rank, k, at, best_len),
                          .arrived_last_steps = best_len,
                          .eligible_steps = n,
                          .median_lateness_ns = median,
                          .persistence = SF_PERSIST_NONE,
                          .windows_in_a_row = 1};
}

/* Over every synchronizing stage, the verdict with the most arrived-last
 * steps; the earliest stage on ties. Without one, eligible_steps still says
 * how many steps the first synchronizing stage could judge. */
int sf__straggler_verdict(sf_report *r, const sf_summary *s, const uint32_t *complete,
                          uint32_t n_complete)
{
    memset(&r->straggler, 0, sizeof r->straggler);
    if (s->schema.sync_mask == 0 || n_complete == 0)
        return 0;
    struct arrival *arr = malloc(n_complete * sizeof *arr);
    uint32_t *at = malloc(n_complete * sizeof *at);
    if (arr == NULL || at == NULL) {
        free(arr);
        free(at);
        return -ENOMEM;
    }
    bool first = true;
    for (uint64_t m = s->schema.sync_mask; m; m &= m - 1) {
        sf_straggler v;
        verdict_at(r, s, complete, n_complete, (uint32_t)__builtin_ctzll(m), arr, at, &v);
        if (first || (v.present && (!r->straggler.present ||
                                    v.arrived_last_steps > r->straggler.arrived_last_steps)))
            r->straggler = v;
        first = false;
    }
    free(arr);
    free(at);
    return 0;
}

/* ---- persistence ---------------------------------------------------------- */

void sf_straggler_track(sf_straggler_history *h, sf_report *report)
{
    if (h == NULL || report == NULL)
        return;
    if (h->any && h->segment == report->meta.segment && h->last_index == report->meta.index) {
        h->any = h->prev_any; /* the same window again: undo its first report */
        h->last_index = h->prev_index;
        h->last_rank = h->prev_rank;
        h->run = h->prev_run;
    }
    h->prev_any = h->any;
    h->prev_index = h->last_index;
    h->prev_rank = h->last_rank;
    h->prev_run = h->run;
    bool consecutive =
        h->any && h->segment == report->meta.segment && h->last_index + 1 == report->meta.index;
    if (!consecutive) {
        h->last_rank = SF_NO_RANK;
        h->run = 0;
    }
    h->any = true;
    h->last_index = report->meta.index;
    h->segment = report->meta.segment;
    sf_straggler *v = &report->straggler;
    if (!v->present) {
        h->last_rank = SF_NO_RANK;
        h->run = 0;
        return;
    }
    bool same = h->last_rank == v->rank;
    bool after_other = !same && h->last_rank != SF_NO_RANK;
    h->run = same ? h->run + 1 : 1;
    h->last_rank = v->rank;
    v->windows_in_a_row = h->run;
    if (h->run >= report->gates.straggler_persist_windows)
        v->persistence = SF_PERSIST_FIXED;
    else if (after_other)
        v->persistence = SF_PERSIST_ROTATING;
    else
        v->persistence = SF_PERSIST_NONE;
}

/* ---- the critical path ------------------------------------------------------ */

struct chain_ref {
    const uint32_t *row;
    uint32_t len;
};

static int cmp_chain(const void *a, const void *b)
{
    const struct chain_ref *x = a, *y = b;
    for (uint32_t k = 0; k < x->len; k++)
        if (x->row[k] != y->row[k])
            return x->row[k] < y->row[k] ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row); /* equal chains: by position */
}

static bool same_chain(const struct chain_ref *x, const struct chain_ref *y)
{
    return memcmp(x->row, y->row, x->len * sizeof *x->row) == 0;
}

/* Most frequent row of step_leaders; the smallest chain (rank ids in
 * boundary order, SF_NO_RANK last) on ties. */
int sf__critical_path(sf_report *r)
{
    uint32_t S = r->schema.n_stages, n = r->steps;
    r->critical_path = (sf_critical_path){0};
    if (n == 0)
        return 0;
    struct chain_ref *refs = malloc(n * sizeof *refs);
    uint32_t *chain = malloc(S * sizeof *chain);
    if (refs == NULL || chain == NULL) {
        free(refs);
        free(chain);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        refs[i] = (struct chain_ref){&r->step_leaders[(size_t)i * S], S};
    qsort(refs, n, sizeof *refs, cmp_chain);
    uint32_t best = 0, best_len = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && same_chain(&refs[j], &refs[i]))
            j++;
        if (j - i > best_len) {
            best = i;
            best_len = j - i;
        }
        i = j;
    }
    memcpy(chain, refs[best].row, S * sizeof *chain);
    free(refs);
    r->critical_path = (sf_critical_path){.steps = best_len, .chain = chain};
    return 0;
}

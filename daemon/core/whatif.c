/*
 * The counterfactual what-if of a dense window (docs/CHANGE.md): the window
 * recomputed with one rank, or one (rank, stage) of the change's route, or
 * every rank clipped to its basis (reference medians, or the per-step cohort
 * median without a reference). With arrival points every sync wait is
 * recomputed from the ranks' new arrivals (the sync model); without them the
 * other ranks' sync waits are kept, so each saving is a lower bound (the
 * clipped model). Reads only the summary.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/change.h>

#include "core_internal.h"

void sf_whatif_free(sf_whatif *whatif)
{
    free(whatif);
}

struct whatif_work {
    uint32_t R, S, n_route;
    const uint32_t *route;
    int64_t *basis;   /* [R][S]; the cohort stages refilled per step */
    int64_t *ref_map; /* [R][S] reference medians, SF_NULL_NS where unknown */
    bool *cohort;     /* [S] some rank falls back to the cohort median here */
    int64_t *scratch; /* [R] */
    int64_t *end;     /* [R] P[t,r,S] */
    int64_t *clipped; /* [R] P with every stage clipped */
    __int128 *saved;  /* [R] */
    __int128 *cell;   /* [n_route][R] */
    __int128 exposed, ideal;
    /* The sync model: segment j of a step runs from the previous sync
     * point's departure to sync point j's arrival; segment n_seg - 1 is the
     * tail after the last sync point. */
    uint32_t n_seg;
    uint32_t *seg_of;     /* [S] segment of each stage */
    bool *is_wait;        /* [S] a "<stage>.sync_wait" stage */
    int64_t *own;         /* [R][n_seg] segment sums as recorded */
    int64_t *fixed;       /* [R][n_seg] segment sums clipped to the basis */
    int64_t *top1, *top2; /* [n_seg] largest and second largest own */
    uint32_t *top_rank;   /* [n_seg] a rank holding top1 */
};

static void work_free(struct whatif_work *w)
{
    free(w->basis);
    free(w->ref_map);
    free(w->cohort);
    free(w->scratch);
    free(w->end);
    free(w->clipped);
    free(w->saved);
    free(w->cell);
    free(w->seg_of);
    free(w->is_wait);
    free(w->own);
    free(w->fixed);
    free(w->top1);
    free(w->top2);
    free(w->top_rank);
}

static int work_alloc(struct whatif_work *w, uint32_t R, uint32_t S, uint32_t n_route)
{
    size_t cells = (size_t)R * S;
    w->R = R;
    w->S = S;
    w->n_route = n_route;
    w->basis = malloc(cells * sizeof *w->basis);
    w->ref_map = malloc(cells * sizeof *w->ref_map);
    w->cohort = calloc(S ? S : 1, sizeof *w->cohort);
    w->scratch = malloc(R * sizeof *w->scratch);
    w->end = malloc(R * sizeof *w->end);
    w->clipped = malloc(R * sizeof *w->clipped);
    w->saved = calloc(R, sizeof *w->saved);
    w->cell = calloc((size_t)(n_route ? n_route : 1) * R, sizeof *w->cell);
    if (!w->basis || !w->ref_map || !w->cohort || !w->scratch || !w->end || !w->clipped ||
        !w->saved || !w->cell)
        return -ENOMEM;
    return 0;
}

/* Segments of the sync model: each synchronizing stage k closes one at its
 * arrival boundary; its wait k + 1 belongs to no segment's own work. */
static int sync_alloc(struct whatif_work *w, uint64_t sync_mask)
{
    uint32_t S = w->S;
    w->n_seg = (uint32_t)__builtin_popcountll(sync_mask) + 1;
    w->seg_of = malloc(S * sizeof *w->seg_of);
    w->is_wait = malloc(S * sizeof *w->is_wait);
    w->own = malloc((size_t)w->R * w->n_seg * sizeof *w->own);
    w->fixed = malloc((size_t)w->R * w->n_seg * sizeof *w->fixed);
    w->top1 = malloc(w->n_seg * sizeof *w->top1);
    w->top2 = malloc(w->n_seg * sizeof *w->top2);
    w->top_rank = malloc(w->n_seg * sizeof *w->top_rank);
    if (!w->seg_of || !w->is_wait || !w->own || !w->fixed || !w->top1 || !w->top2 || !w->top_rank)
        return -ENOMEM;
    for (uint32_t k = 0, j = 0; k < S; k++) {
        w->is_wait[k] = k > 0 && (sync_mask >> (k - 1) & 1);
        w->seg_of[k] = j;
        j += (sync_mask >> k & 1) != 0;
    }
    return 0;
}

/* Reference medians per dense rank; SF_NULL_NS for a rank the reference
 * never saw, which then falls back to the cohort median of each step. The
 * basis of a known (rank, stage) is the same on every step: set once here. */
static void map_reference(struct whatif_work *w, const sf_dense *d, const sf_reference *ref)
{
    for (uint32_t x = 0; x < w->R; x++) {
        const uint32_t *hit =
            ref && ref->median_ns
                ? bsearch(&d->ranks[x], ref->ranks, ref->n_ranks, sizeof(uint32_t), sf__cmp_u32)
                : NULL;
        for (uint32_t k = 0; k < w->S; k++) {
            int64_t b = hit ? ref->median_ns[(size_t)(hit - ref->ranks) * w->S + k] : SF_NULL_NS;
            w->ref_map[(size_t)x * w->S + k] = b;
            w->basis[(size_t)x * w->S + k] = b;
            w->cohort[k] = w->cohort[k] || b == SF_NULL_NS;
        }
    }
}

static void step_basis(struct whatif_work *w, const int64_t *rows)
{
    uint32_t R = w->R, S = w->S;
    for (uint32_t k = 0; k < S; k++) {
        if (!w->cohort[k])
            continue;
        int64_t cohort = SF_NULL_NS;
        for (uint32_t x = 0; x < R; x++) {
            if (w->ref_map[(size_t)x * S + k] != SF_NULL_NS)
                continue;
            if (cohort == SF_NULL_NS) {
                for (uint32_t y = 0; y < R; y++)
                    w->scratch[y] = rows[(size_t)y * S + k];
                cohort = sf_median_i64(w->scratch, R);
            }
            w->basis[(size_t)x * S + k] = cohort;
        }
    }
}

static int64_t clip(int64_t d, int64_t basis)
{
    return d < basis ? d : basis;
}

/* One complete step: every rank's end, the end with the rank clipped, and
 * the end with only one route stage of the rank clipped. */
static void whatif_step(struct whatif_work *w, const int64_t *rows)
{
    uint32_t R = w->R, S = w->S, top = 0;
    int64_t first = INT64_MIN, second = INT64_MIN, ideal = INT64_MIN;
    step_basis(w, rows);
    for (uint32_t x = 0; x < R; x++) {
        const int64_t *d = &rows[(size_t)x * S], *b = &w->basis[(size_t)x * S];
        int64_t p = 0, q = 0;
        for (uint32_t k = 0; k < S; k++) {
            p += d[k];
            q += clip(d[k], b[k]);
        }
        w->end[x] = p;
        w->clipped[x] = q;
        if (q > ideal)
            ideal = q;
        if (p > first) {
            second = first;
            first = p;
            top = x;
        } else if (p > second) {
            second = p;
        }
    }
    w->exposed += first;
    w->ideal += ideal;
    for (uint32_t x = 0; x < R; x++) {
        int64_t others = x == top ? second : first;
        int64_t alone = w->clipped[x] > others ? w->clipped[x] : others;
        w->saved[x] += first - alone;
        for (uint32_t j = 0; j < w->n_route; j++) {
            uint32_t k = w->route[j];
            int64_t d = rows[(size_t)x * S + k];
            int64_t p = w->end[x] - d + clip(d, w->basis[(size_t)x * S + k]);
            w->cell[(size_t)j * R + x] += first - (p > others ? p : others);
        }
    }
}

/* Rank x's segment sums, recorded and clipped; the waits are left out
 * because the model derives them. */
static void sync_segments(struct whatif_work *w, const int64_t *rows, uint32_t x)
{
    const int64_t *d = &rows[(size_t)x * w->S], *b = &w->basis[(size_t)x * w->S];
    int64_t *own = &w->own[(size_t)x * w->n_seg], *fixed = &w->fixed[(size_t)x * w->n_seg];
    memset(own, 0, w->n_seg * sizeof *own);
    memset(fixed, 0, w->n_seg * sizeof *fixed);
    for (uint32_t k = 0; k < w->S; k++) {
        if (w->is_wait[k])
            continue;
        own[w->seg_of[k]] += d[k];
        fixed[w->seg_of[k]] += clip(d[k], b[k]);
    }
}

/* Segment j's longest own work with rank x's replaced by v: the ranks
 * leave a sync point together when the last one arrives. */
static int64_t segment_with(const struct whatif_work *w, uint32_t j, uint32_t x, int64_t v)
{
    int64_t others = x == w->top_rank[j] ? w->top2[j] : w->top1[j];
    return v > others ? v : others;
}

/* One complete step in the sync model. A step's modelled length is the sum
 * over segments of the longest own work (each sync wait being the last
 * arrival minus the rank's own); every saving is the difference of two
 * modelled lengths, and the ideal is the exposed time less the modelled
 * saving of clipping every rank. */
static void whatif_sync_step(struct whatif_work *w, const int64_t *rows)
{
    uint32_t R = w->R, S = w->S, J = w->n_seg;
    int64_t first = INT64_MIN, model = 0, ideal_model = 0;
    step_basis(w, rows);
    for (uint32_t j = 0; j < J; j++)
        w->top1[j] = w->top2[j] = INT64_MIN;
    for (uint32_t x = 0; x < R; x++) {
        int64_t p = 0;
        for (uint32_t k = 0; k < S; k++)
            p += rows[(size_t)x * S + k];
        first = p > first ? p : first;
        sync_segments(w, rows, x);
        for (uint32_t j = 0; j < J; j++) {
            int64_t v = w->own[(size_t)x * J + j];
            if (v > w->top1[j]) {
                w->top2[j] = w->top1[j];
                w->top1[j] = v;
                w->top_rank[j] = x;
            } else if (v > w->top2[j]) {
                w->top2[j] = v;
            }
        }
    }
    for (uint32_t j = 0; j < J; j++) {
        int64_t longest = INT64_MIN;
        for (uint32_t x = 0; x < R; x++)
            if (w->fixed[(size_t)x * J + j] > longest)
                longest = w->fixed[(size_t)x * J + j];
        model += w->top1[j];
        ideal_model += longest;
    }
    w->exposed += first;
    w->ideal += first - (model - ideal_model);
    for (uint32_t x = 0; x < R; x++) {
        for (uint32_t j = 0; j < J; j++)
            w->saved[x] += w->top1[j] - segment_with(w, j, x, w->fixed[(size_t)x * J + j]);
        for (uint32_t i = 0; i < w->n_route; i++) {
            uint32_t k = w->route[i], j = w->seg_of[k];
            if (w->is_wait[k])
                continue; /* derived from the arrivals, never replaced */
            int64_t d = rows[(size_t)x * S + k];
            int64_t v = w->own[(size_t)x * J + j] - d + clip(d, w->basis[(size_t)x * S + k]);
            w->cell[(size_t)i * R + x] += w->top1[j] - segment_with(w, j, x, v);
        }
    }
}

static void list_ranks(sf_whatif *out, const struct whatif_work *w, const sf_dense *d)
{
    for (uint32_t x = 0; x < w->R; x++) {
        if (w->saved[x] <= 0)
            continue;
        uint32_t at = out->n_ranks < SF_WHATIF_MAX_RANKS ? out->n_ranks++ : SF_WHATIF_MAX_RANKS;
        if (at == SF_WHATIF_MAX_RANKS) {
            if (w->saved[x] <= out->ranks[at - 1].saved_ns)
                continue;
            at--;
        }
        while (at > 0 && out->ranks[at - 1].saved_ns < w->saved[x]) {
            out->ranks[at] = out->ranks[at - 1];
            at--;
        }
        __int128 rest = w->exposed - w->saved[x];
        out->ranks[at] = (sf_whatif_rank){
            .rank = d->ranks[x],
            .saved_ns = (int64_t)w->saved[x],
            .slowdown = rest > 0 ? (double)w->exposed / (double)rest : NAN,
        };
    }
}

static void list_cells(sf_whatif *out, const struct whatif_work *w, const sf_dense *d)
{
    for (uint32_t j = 0; j < w->n_route; j++) {
        for (uint32_t x = 0; x < w->R; x++) {
            __int128 v = w->cell[(size_t)j * w->R + x];
            if (v <= 0)
                continue;
            uint32_t at = out->n_cells < SF_WHATIF_MAX_CELLS ? out->n_cells++ : SF_WHATIF_MAX_CELLS;
            if (at == SF_WHATIF_MAX_CELLS) {
                if (v <= out->cells[at - 1].saved_ns)
                    continue;
                at--;
            }
            while (at > 0 && out->cells[at - 1].saved_ns < v) {
                out->cells[at] = out->cells[at - 1];
                at--;
            }
            out->cells[at] = (sf_whatif_cell){d->ranks[x], w->route[j], (int64_t)v};
        }
    }
}

/* The sync model needs every synchronizing stage's arrival on every rank of
 * every complete step; one step without it sends the whole window to the
 * clipped model, so that one label holds for every figure. */
static bool sync_model_applies(const sf_summary *summary, uint32_t R)
{
    if (summary->schema.sync_mask == 0)
        return false;
    for (uint32_t i = 0; i < summary->n_steps; i++)
        if (summary->steps[i].n_ranks == R && summary->steps[i].arrival_missing != 0)
            return false;
    return true;
}

int sf_whatif_compute(const sf_summary *summary, const sf_reference *ref, const sf_change *change,
                      sf_whatif **ret)
{
    if (summary == NULL || ret == NULL)
        return -EINVAL;
    const sf_dense *d = summary->dense;
    if (d == NULL)
        return -ENOTSUP;
    const char *why;
    if (ref != NULL && sf_reference_check(ref, &summary->schema, summary->meta.world_size, &why))
        return -EINVAL;
    uint32_t S = summary->schema.n_stages, R = d->n_ranks, steps = 0;
    struct whatif_work w = {.route = change ? change->route : NULL};
    sf_whatif *out = calloc(1, sizeof *out);
    int rc = out == NULL ? -ENOMEM : work_alloc(&w, R, S, change ? change->n_route : 0);
    if (rc < 0)
        goto fail;
    map_reference(&w, d, ref);
    bool sync = sync_model_applies(summary, R);
    if (sync && (rc = sync_alloc(&w, summary->schema.sync_mask)) < 0)
        goto fail;
    for (uint32_t i = 0; i < summary->n_steps; i++) {
        if (summary->steps[i].n_ranks != R)
            continue;
        if (sync)
            whatif_sync_step(&w, &d->d[(size_t)i * R * S]);
        else
            whatif_step(&w, &d->d[(size_t)i * R * S]);
        steps++;
    }
    if (steps == 0) {
        rc = -ENODATA;
        goto fail;
    }
    out->basis = ref && ref->median_ns ? SF_WHATIF_REFERENCE : SF_WHATIF_COHORT;
    out->lower_bound = !sync; /* clipped: the other ranks' sync waits are kept */
    out->exposed_ns = w.exposed;
    out->ideal_ns = w.ideal;
    out->slowdown = w.ideal > 0 ? (double)w.exposed / (double)w.ideal : NAN;
    out->waste_rank_s =
        isnan(out->slowdown) ? NAN : (1 - 1 / out->slowdown) * R * ((double)w.exposed / 1e9);
    list_ranks(out, &w, d);
    list_cells(out, &w, d);
    work_free(&w);
    *ret = out;
    return 0;
fail:
    work_free(&w);
    free(out);
    return rc;
}

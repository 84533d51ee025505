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
#include "vec/vec.h"

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
    /* [R] each rank's cohort where the ranks declared coordinates that make
     * cohorts (docs/ACCOUNTING.md, "Cohorts"): the per-step median is then
     * its cohort's; NULL: every rank's. */
    uint32_t *cohort_of;
    uint32_t n_cohorts;
    int64_t *scratch; /* [R] */
    __int128 *saved;  /* [R] */
    __int128 *cell;   /* [n_route][R] */
    __int128 exposed, ideal;
    /* The sync model: segment j of a step runs from the previous sync
     * point's departure to sync point j's arrival; the last segment is the
     * tail after the last sync point. */
    uint64_t sync_mask;
};

static void work_free(struct whatif_work *w)
{
    free(w->basis);
    free(w->ref_map);
    free(w->cohort);
    free(w->cohort_of);
    free(w->scratch);
    free(w->saved);
    free(w->cell);
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
    w->saved = calloc(R, sizeof *w->saved);
    w->cell = calloc((size_t)(n_route ? n_route : 1) * R, sizeof *w->cell);
    if (!w->basis || !w->ref_map || !w->cohort || !w->scratch || !w->saved || !w->cell)
        return -ENOMEM;
    return 0;
}

/* Reference medians per dense rank; SF_NULL_NS for a rank the reference
 * never saw, which then falls back to the cohort median of each step. The
 * basis of a known (rank, stage) is the same on every step: set once here. */
static void map_reference(struct whatif_work *w, const sf_dense *d, const sf_reference *ref)
{
    for (uint32_t x = 0; x < w->R; x++) {
        const uint32_t *hit =
            ref && ref->median_ns ? sf__find_rank(ref->ranks, ref->n_ranks, d->ranks[x], x) : NULL;
        for (uint32_t k = 0; k < w->S; k++) {
            int64_t b = hit ? ref->median_ns[(size_t)(hit - ref->ranks) * w->S + k] : SF_NULL_NS;
            w->ref_map[(size_t)x * w->S + k] = b;
            w->basis[(size_t)x * w->S + k] = b;
            w->cohort[k] = w->cohort[k] || b == SF_NULL_NS;
        }
    }
}

/* Inside cohorts: each rank without a reference median at stage k gets the
 * median of its cohort's durations at the step. */
static void step_basis_cohorts(struct whatif_work *w, const int64_t *rows, uint32_t k)
{
    uint32_t R = w->R, S = w->S;
    for (uint32_t c = 0; c < w->n_cohorts; c++) {
        uint32_t n = 0;
        int64_t med = SF_NULL_NS;
        for (uint32_t x = 0; x < R; x++) {
            if (w->cohort_of[x] != c || w->ref_map[(size_t)x * S + k] != SF_NULL_NS)
                continue;
            if (med == SF_NULL_NS) {
                for (uint32_t y = 0; y < R; y++)
                    if (w->cohort_of[y] == c)
                        w->scratch[n++] = rows[(size_t)y * S + k];
                med = sf_median_i64(w->scratch, n);
            }
            w->basis[(size_t)x * S + k] = med;
        }
    }
}

static void step_basis(struct whatif_work *w, const int64_t *rows)
{
    uint32_t R = w->R, S = w->S;
    for (uint32_t k = 0; k < S; k++) {
        if (w->cohort[k] && w->cohort_of != NULL) {
            step_basis_cohorts(w, rows, k);
            continue;
        }
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

static int64_t max_i64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The holder's savings, once a step's largest end (first), second one,
 * holder (top) and its clipped end are known: shared by both passes. */
static void holder_savings(struct whatif_work *w, const int64_t *rows, uint32_t S, uint32_t top,
                           int64_t first, int64_t second, int64_t top_clipped)
{
    uint32_t R = w->R;
    w->saved[top] += first - max_i64(top_clipped, second);
    for (uint32_t j = 0; j < w->n_route; j++) {
        uint32_t k = w->route[j];
        int64_t d = rows[(size_t)top * S + k];
        int64_t p = first - d + clip(d, w->basis[(size_t)top * S + k]);
        w->cell[(size_t)j * R + top] += first - max_i64(p, second);
    }
}

/* Why one rank per step (per segment in the sync model) is enough: clipping
 * never lengthens a duration, so a rank that does not hold the step's (the
 * segment's) longest end alone ends, clipped, no later than the one that
 * does, and the step stays as long as it was. Its saving, and that of each
 * of its (rank, stage) cells, is exactly zero; only the unique holder's
 * can be positive. So one pass finds, per rank, the recorded and clipped
 * sums, and the savings are added for the holder alone. */

/* One complete step in the clipped model: the largest end, the second one
 * and the clipped holder; the ideal step is the largest clipped end. The
 * step's layout is passed in so that the common stage counts get a loop the
 * compiler unrolls. */
static inline __attribute__((always_inline)) void whatif_step_s(struct whatif_work *w,
                                                                const int64_t *rows, uint32_t S)
{
    uint32_t R = w->R, top = 0;
    int64_t first = INT64_MIN, second = INT64_MIN, ideal = INT64_MIN, top_clipped = 0;
    for (uint32_t x = 0; x < R; x++) {
        const int64_t *d = &rows[(size_t)x * S], *b = &w->basis[(size_t)x * S];
        int64_t p = 0, q = 0;
        for (uint32_t k = 0; k < S; k++) {
            p += d[k];
            q += clip(d[k], b[k]);
        }
        ideal = max_i64(ideal, q);
        if (p > first) {
            second = first;
            first = p;
            top = x;
            top_clipped = q;
        } else if (p > second) {
            second = p;
        }
    }
    w->exposed += first;
    w->ideal += ideal;
    /* the holder alone: the others' ends are at most second */
    holder_savings(w, rows, S, top, first, second, top_clipped);
}

/* The lanes of a form's vector pass (vec.h; each lane its own ranks, in
 * order), merged into the step's: the largest end f; its holder, the
 * smallest rank among the lanes that hold f (the scalar pass's first of
 * equals); the second end, a lane's own second or another lane's first (f
 * itself where two lanes hold it); the largest clipped end. */
static void merge_lanes(struct whatif_work *w, const int64_t *rows, uint32_t S,
                        const int64_t *first, const int64_t *second, const int64_t *top,
                        const int64_t *top_q, const int64_t *ideal, uint32_t lanes)
{
    int64_t f = INT64_MIN, sec = INT64_MIN, best = INT64_MIN;
    uint32_t holder = 0, at_f = 0;
    for (uint32_t l = 0; l < lanes; l++)
        f = max_i64(f, first[l]);
    for (uint32_t l = 0; l < lanes; l++) {
        best = max_i64(best, ideal[l]);
        sec = max_i64(sec, second[l]);
        if (first[l] != f)
            sec = max_i64(sec, first[l]);
        else if (at_f++ == 0 || top[l] < top[holder])
            holder = l;
    }
    sec = at_f > 1 ? f : sec;
    w->exposed += f;
    w->ideal += best;
    holder_savings(w, rows, S, (uint32_t)top[holder], f, sec, top_q[holder]);
}

/* A form's clipped pass over one step, its lanes merged into the step's. */
static void whatif_step_lanes(struct whatif_work *w, const sf__vec *v, const int64_t *rows)
{
    struct sf__whatif_lanes l;
    uint32_t lanes = v->whatif_step(rows, w->basis, w->R, w->S, &l);
    merge_lanes(w, rows, w->S, l.first, l.second, l.top, l.top_q, l.ideal, lanes);
}

/* The vector passes need a form that has one, a row of at most 8 stages
 * and every rank's basis fixed for the window. */
static bool whatif_vec_applies(const struct whatif_work *w, const sf__vec *v)
{
    if (v->whatif_step == NULL || w->S > 8)
        return false;
    for (uint32_t k = 0; k < w->S; k++)
        if (w->cohort[k])
            return false;
    return true;
}

static void whatif_step(struct whatif_work *w, const int64_t *rows)
{
    step_basis(w, rows);
    SF__BY_STAGE_COUNT(w->S, S, whatif_step_s(w, rows, S))
}

/* Per segment of one step: the longest own work (top1), a rank holding it
 * (the first), that rank's clipped own work, the second longest (top2), and
 * the longest clipped own work. */
struct segments {
    int64_t top1[SF_MAX_STAGES], top2[SF_MAX_STAGES], top_fixed[SF_MAX_STAGES];
    int64_t longest_fixed[SF_MAX_STAGES];
    uint32_t top_rank[SF_MAX_STAGES];
};

/* Stage k closes a segment when it synchronizes; k's ".sync_wait" stage
 * (k + 1) belongs to no segment's own work, because the model derives it. */
static inline bool is_wait(uint64_t mask, uint32_t k)
{
    return k > 0 && (mask >> (k - 1) & 1);
}

/* The sync points before stage k: each closes one segment. */
static inline uint32_t segment_of(uint64_t mask, uint32_t k)
{
    return (uint32_t)__builtin_popcountll(mask & ((UINT64_C(1) << k) - 1));
}

/* One complete step in the sync model. A step's modelled length is the sum
 * over segments of the longest own work (each sync wait being the last
 * arrival minus the rank's own); every saving is the difference of two
 * modelled lengths, and the ideal is the exposed time less the modelled
 * saving of clipping every rank. With S and the mask constant (the common
 * layouts) the stage loop unrolls and every segment sum stays in a
 * register. */
static inline __attribute__((always_inline)) void
whatif_sync_step_s(struct whatif_work *w, const int64_t *rows, uint32_t S, uint64_t mask)
{
    uint32_t R = w->R, J = (uint32_t)__builtin_popcountll(mask) + 1;
    int64_t first = INT64_MIN, model = 0, ideal_model = 0;
    struct segments g;
    for (uint32_t j = 0; j < J; j++) {
        g.top1[j] = g.top2[j] = g.longest_fixed[j] = INT64_MIN;
        g.top_fixed[j] = 0;
        g.top_rank[j] = 0;
    }
    for (uint32_t x = 0; x < R; x++) {
        const int64_t *d = &rows[(size_t)x * S], *b = &w->basis[(size_t)x * S];
        int64_t own[SF_MAX_STAGES], fixed[SF_MAX_STAGES], p = 0;
        for (uint32_t j = 0; j < J; j++)
            own[j] = fixed[j] = 0;
        for (uint32_t k = 0, j = 0; k < S; k++) {
            p += d[k];
            if (!is_wait(mask, k)) {
                own[j] += d[k];
                fixed[j] += clip(d[k], b[k]);
            }
            j += (mask >> k & 1) != 0;
        }
        first = max_i64(first, p);
        for (uint32_t j = 0; j < J; j++) {
            g.longest_fixed[j] = max_i64(g.longest_fixed[j], fixed[j]);
            if (own[j] > g.top1[j]) {
                g.top2[j] = g.top1[j];
                g.top1[j] = own[j];
                g.top_rank[j] = x;
                g.top_fixed[j] = fixed[j];
            } else if (own[j] > g.top2[j]) {
                g.top2[j] = own[j];
            }
        }
    }
    for (uint32_t j = 0; j < J; j++) {
        model += g.top1[j];
        ideal_model += g.longest_fixed[j];
        /* the holder alone: the others' own work is at most top2 */
        w->saved[g.top_rank[j]] += g.top1[j] - max_i64(g.top_fixed[j], g.top2[j]);
    }
    w->exposed += first;
    w->ideal += first - (model - ideal_model);
    for (uint32_t i = 0; i < w->n_route; i++) {
        uint32_t k = w->route[i], j = segment_of(mask, k);
        if (is_wait(mask, k))
            continue; /* derived from the arrivals, never replaced */
        uint32_t x = g.top_rank[j];
        int64_t d = rows[(size_t)x * S + k];
        int64_t v = g.top1[j] - d + clip(d, w->basis[(size_t)x * S + k]);
        w->cell[(size_t)i * R + x] += g.top1[j] - max_i64(v, g.top2[j]);
    }
}

static void whatif_sync_step(struct whatif_work *w, const int64_t *rows)
{
    step_basis(w, rows);
    /* The default stages split at the backward's or the forward's arrival,
     * and five recorded stages split at the third's: unrolled, every
     * segment sum stays in a register (5.7 M instructions against the
     * general loop's 20.9 M at 1 024 ranks, bench_change 1 1024 sync). */
    if (w->S == 7 && w->sync_mask == UINT64_C(1) << 2)
        whatif_sync_step_s(w, rows, 7, UINT64_C(1) << 2);
    else if (w->S == 7 && w->sync_mask == UINT64_C(1) << 1)
        whatif_sync_step_s(w, rows, 7, UINT64_C(1) << 1);
    else if (w->S == 6 && w->sync_mask == UINT64_C(1) << 2)
        whatif_sync_step_s(w, rows, 6, UINT64_C(1) << 2);
    else
        whatif_sync_step_s(w, rows, w->S, w->sync_mask);
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

int sf__whatif_compute_form(const sf_summary *summary, const sf_reference *ref,
                            const sf_change *change, const sf__vec *form, sf_whatif **ret)
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
    enum sf_cohort_state cohorts;
    if ((w.cohort_of = malloc(((size_t)R + 1) * sizeof *w.cohort_of)) == NULL ||
        (rc = sf__report_cohorts(summary, w.cohort_of, &cohorts, &w.n_cohorts)) < 0) {
        rc = rc < 0 ? rc : -ENOMEM;
        goto fail;
    }
    if (cohorts != SF_COHORTS_APPLIED) {
        free(w.cohort_of);
        w.cohort_of = NULL;
    }
    bool sync = sync_model_applies(summary, R);
    bool vec = !sync && whatif_vec_applies(&w, form);
    w.sync_mask = summary->schema.sync_mask;
    for (uint32_t i = 0; i < summary->n_steps; i++) {
        if (summary->steps[i].n_ranks != R)
            continue;
        if (sync)
            whatif_sync_step(&w, &d->d[(size_t)i * R * S]);
        else if (vec)
            whatif_step_lanes(&w, form, &d->d[(size_t)i * R * S]);
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

int sf_whatif_compute(const sf_summary *summary, const sf_reference *ref, const sf_change *change,
                      sf_whatif **ret)
{
    return sf__whatif_compute_form(summary, ref, change, sf__vec_chosen(), ret);
}

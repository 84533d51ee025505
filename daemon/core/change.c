/*
 * What changed in one window against the job's reference (docs/CHANGE.md):
 * the shift of each stage's per-step advance and of the exposed step, the
 * sync floor of each ".sync_wait" stage (the last arrival's wait), the
 * per-rank own-work contrasts at the stages that feed a sync point, the
 * route of significant slowdowns, and the ranks that changed. Reads only a
 * summary and a reference; never touches the report it will be attached to.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/change.h>

#include "core_internal.h"
#include "vec/vec.h"

void sf_change_free(sf_change *change)
{
    free(change);
}

/* The complete steps the change measures: those of one window, or of the
 * windows pooled with it, in time order, read where they lie. */
struct window_steps {
    uint32_t n;
    uint32_t n_parts;                            /* windows: more than one when pooled */
    const sf_summary *part[SF_POOL_MAX_WINDOWS]; /* oldest first */
    uint32_t part_end[SF_POOL_MAX_WINDOWS];      /* complete steps up to each part's last */
    const sf_step_summary **step;                /* [n] */
    const int64_t **rows; /* [n] each step's dense rows, [R][S]; NULL in mergeable mode */
    /* Each part's own-work contrasts from an earlier change, [K][steps][R]
     * over its complete steps at the K own-work stages (NULL: compute
     * them), and where the last part's go when computed (NULL: nowhere). */
    const int64_t *cached[SF_POOL_MAX_WINDOWS];
    int64_t *fresh;
    int64_t *advance; /* [S][n], stage-major for the estimator */
    int64_t *floor;   /* [S][n], each step's dmin, filled at ".sync_wait" stages only */
    int64_t *ends;    /* [n] */
};

/* The first of part j's complete steps; they end at part_end[j]. */
static uint32_t part_begin(const struct window_steps *w, uint32_t j)
{
    return j > 0 ? w->part_end[j - 1] : 0;
}

static void window_steps_free(struct window_steps *w)
{
    free(w->step);
    free(w->rows);
    free(w->advance);
    free(w->floor);
    free(w->ends);
}

static bool sync_wait_stage(const sf_schema *schema, uint32_t k)
{
    return k > 0 && k - 1 < 64 && (schema->sync_mask >> (k - 1)) & 1;
}

/* The parts line up (one segment and shape, the same covered and dense
 * ranks; pool.c): a step is complete when every covered rank reported it. */
static int window_steps_collect(const sf_summary *const *parts, uint32_t n_parts,
                                struct window_steps *w)
{
    const sf_summary *s = parts[n_parts - 1];
    uint32_t S = s->schema.n_stages, ranks = (uint32_t)sf_summary_covered_ranks(s);
    size_t cap = 1;
    for (uint32_t i = 0; i < n_parts; i++)
        cap += parts[i]->n_steps;
    w->n_parts = n_parts;
    w->step = malloc(cap * sizeof *w->step);
    w->rows = s->dense ? malloc(cap * sizeof *w->rows) : NULL;
    w->advance = malloc(cap * S * sizeof *w->advance);
    w->floor = malloc(cap * S * sizeof *w->floor);
    w->ends = malloc(cap * sizeof *w->ends);
    if (!w->step || (s->dense && !w->rows) || !w->advance || !w->floor || !w->ends)
        return -ENOMEM;
    for (uint32_t j = 0; j < n_parts; j++) {
        const sf_summary *p = parts[j];
        for (uint32_t i = 0; i < p->n_steps; i++) {
            if (p->steps[i].n_ranks != ranks)
                continue;
            if (w->rows)
                w->rows[w->n] = &p->dense->d[(size_t)i * p->dense->n_ranks * S];
            w->step[w->n++] = &p->steps[i];
        }
        w->part[j] = p;
        w->part_end[j] = w->n;
    }
    if (w->n == 0)
        return -ENODATA;
    for (uint32_t t = 0; t < w->n; t++) {
        const sf_step_summary *st = w->step[t];
        int64_t prev = 0;
        for (uint32_t k = 0; k < S; k++) {
            w->advance[(size_t)k * w->n + t] = st->prefix_top2[k].v1 - prev;
            prev = st->prefix_top2[k].v1;
            if (sync_wait_stage(&s->schema, k))
                w->floor[(size_t)k * w->n + t] = st->dmin[k];
        }
        w->ends[t] = prev;
    }
    return 0;
}

/* What both frontier tests share for one window: the reference's sorted
 * columns, the window's exposed steps, scratch for one series and for the
 * shift estimate, the interval's normal quantile and the family's level. */
struct frontier_test {
    const struct sf_reference_columns *cols;
    uint32_t m, n;
    const int64_t *ends;
    int64_t *ys, *share, *share_sorted, *shift_scratch;
    double *rank;
    double z, alpha;
    int64_t ref_step_ns; /* the reference's median exposed step */
};

/* The delay, in the reference's time, that a part of the step alone must
 * have gained for its median share to move from x to y ppm while the rest
 * of the step scaled alike: if it takes a of a reference step T and gains
 * d, (a + d) / (T + d) = y and a / T = x, so d = T (y - x) / (1 - y). A job
 * that got faster or slower everywhere moves no share and gains no delay. */
static int64_t delay_of_share(int64_t x_ppm, int64_t y_ppm, int64_t ref_step_ns)
{
    double rest = (double)(SF_PPM - y_ppm);
    double d = (double)(y_ppm - x_ppm) / (rest > 1 ? rest : 1) * (double)ref_step_ns;
    return (int64_t)llround(fmin(fmax(d, -1e18), 1e18));
}

/* The shift of the window's series y against the reference's sorted column
 * x_sorted, into out, and the delay of y's share of the exposed step into
 * share_delay; returns the rank test's p-value of that share against the
 * reference's. The variance factor is the serial dependence of both share
 * series, weighted by their lengths. */
static double series_test(const struct frontier_test *f, const int64_t *x_sorted,
                          const int64_t *x_share_sorted, double x_rho, const int64_t *y,
                          sf_shift *out, int64_t *share_delay)
{
    uint32_t m = f->m, n = f->n;
    memcpy(f->ys, y, (size_t)n * sizeof *f->ys);
    sf__sort_i64(f->ys, n);
    sf__shift_estimate_sorted(x_sorted, m, f->ys, n, f->z, f->shift_scratch, out);
    double rho = sf__share_series(y, f->ends, n, f->share, f->share_sorted, f->rank);
    double factor = sf__serial_variance_factor((m * x_rho + n * rho) / ((double)m + n));
    *share_delay = delay_of_share(sf__median_sorted(x_share_sorted, m),
                                  sf__median_sorted(f->share_sorted, n), f->ref_step_ns);
    return sf__mann_whitney_sorted_p(x_share_sorted, m, f->share_sorted, n, factor);
}

/* Whether a significant share test is a change of at least the minimum
 * effect: measured on the share, as the test is, so that a job that got
 * faster or slower everywhere neither hides a stage's change nor makes
 * one; and in the direction the stage's own time moved, so that a stage
 * whose time fell is never called slower because the rest fell more. */
static bool effect_reached(int64_t shift_ns, int64_t share_delay_ns, int64_t min_effect_ns)
{
    bool same_sign = (shift_ns > 0 && share_delay_ns > 0) || (shift_ns < 0 && share_delay_ns < 0);
    return same_sign && llabs(share_delay_ns) >= min_effect_ns;
}

/* The sync floor of stage k: the last arrival's wait. A late rank moves the
 * others' waits and the frontier, never the wait of the rank that came
 * last; a collective that takes longer once everyone has arrived (a slower
 * link, a rank held up after its arrival mark) moves it. */
static void floor_test(sf_change *c, const struct frontier_test *f, const struct window_steps *w,
                       uint32_t k)
{
    sf_stage_change *st = &c->stages[k];
    size_t at = (size_t)k * f->m;
    st->floor_tested = true;
    st->floor_share_p_value = series_test(
        f, &f->cols->floor_sorted[at], &f->cols->floor_share_sorted[at], f->cols->floor_rho[k],
        &w->floor[(size_t)k * f->n], &st->floor, &st->floor_share_delay_ns);
    st->floor_significant =
        st->floor_share_p_value < f->alpha && st->floor.delta_ns > 0 &&
        effect_reached(st->floor.delta_ns, st->floor_share_delay_ns, c->min_effect_ns);
}

/* The frontier tests of every stage: the shift of its advance (reported,
 * and the direction) and the rank test of its share of the step with the
 * share's delay (the significance and the size); at ".sync_wait" stages
 * also the sync floor, when the reference has one. The family (change_alpha
 * over all these tests) shares one level. Then the same estimator on the
 * exposed step. The reference's columns come sorted (sf_reference_finish);
 * only the window's are sorted here. */
static int stage_shifts(sf_change *c, const sf_reference *ref, const struct window_steps *w,
                        const sf_schema *schema, const sf_gates *g)
{
    uint32_t S = ref->n_stages, m = ref->n_steps, n = w->n, floors = 0;
    if (!(g->change_alpha > 0 && g->change_alpha < 1))
        return -EINVAL;
    struct sf_reference_columns *derived = NULL;
    size_t scratch_words = SF__SHIFT_SCRATCH_WORDS(m, n);
    int64_t *buf = malloc(((size_t)n * 3 + 1 + scratch_words) * sizeof *buf);
    double *rank = malloc(((size_t)n + 1) * sizeof *rank);
    int rc = buf == NULL || rank == NULL ? -ENOMEM : 0;
    if (rc == 0 && ref->columns == NULL)
        rc = sf__reference_columns_build(ref, &derived);
    const struct sf_reference_columns *cols = ref->columns ? ref->columns : derived;
    for (uint32_t k = 0; rc == 0 && cols->floor_sorted != NULL && k < S; k++)
        floors += sync_wait_stage(schema, k);
    struct frontier_test f = {cols,
                              m,
                              n,
                              w->ends,
                              buf,
                              buf + n,
                              buf + 2 * (size_t)n,
                              buf + 3 * (size_t)n + 1,
                              rank,
                              sf__normal_two_sided_quantile(g->change_alpha),
                              g->change_alpha / (S + floors),
                              ref->median_step_ns};
    for (uint32_t k = 0; k < S && rc == 0; k++) {
        sf_stage_change *st = &c->stages[k];
        size_t at = (size_t)k * m;
        st->share_p_value =
            series_test(&f, &cols->advance_sorted[at], &cols->share_sorted[at], cols->share_rho[k],
                        &w->advance[(size_t)k * n], &st->shift, &st->share_delay_ns);
        st->floor_share_p_value = NAN;
        st->floor_share_delay_ns = SF_NULL_NS;
        if (floors > 0 && sync_wait_stage(schema, k))
            floor_test(c, &f, w, k);
        st->significant =
            st->floor_significant ||
            (st->share_p_value < f.alpha &&
             effect_reached(st->shift.delta_ns, st->share_delay_ns, c->min_effect_ns));
    }
    if (rc == 0) {
        memcpy(buf, w->ends, (size_t)n * sizeof *buf);
        sf__sort_i64(buf, n);
        sf__shift_estimate_sorted(&cols->advance_sorted[(size_t)S * m], m, buf, n, f.z,
                                  f.shift_scratch, &c->step);
    }
    sf__reference_columns_free(derived);
    free(buf);
    free(rank);
    return rc;
}

bool sf_change_own_work_stage(const sf_schema *schema, uint32_t k)
{
    return k < 64 && !sync_wait_stage(schema, k) && (schema->sync_mask >> k) != 0;
}

/* Sync segment of a stage: the number of ".sync_wait" stages before it, so
 * a segment runs from after one wait up to and including the next. */
static uint32_t sync_segment(const sf_schema *schema, uint32_t k)
{
    uint32_t seg = 0;
    for (uint32_t j = 0; j < k; j++)
        seg += sync_wait_stage(schema, j);
    return seg;
}

static void route_insert(sf_change *c, uint32_t from, uint32_t k, int64_t key, const int64_t *keys)
{
    uint32_t at = c->n_route++;
    while (at > from && keys[c->route[at - 1]] < key) {
        c->route[at] = c->route[at - 1];
        at--;
    }
    c->route[at] = k;
}

const sf_shift *sf_change_frontier_shift(const sf_stage_change *st)
{
    return st->floor_significant ? &st->floor : &st->shift;
}

/* Own-work changes first (largest rank shift first): that is where the delay
 * began. Then frontier shifts, largest first, except in a sync segment that
 * holds an own-work change: there the group-visible shift (the others' wait,
 * the collective after a late arrival) is that change's effect. */
static void route_order(sf_change *c, const sf_schema *schema)
{
    int64_t own[SF_MAX_STAGES], front[SF_MAX_STAGES];
    bool explained[SF_MAX_STAGES + 1] = {false};
    for (uint32_t k = 0; k < c->n_stages; k++) {
        own[k] = c->stages[k].own_delta_ns;
        front[k] = sf_change_frontier_shift(&c->stages[k])->delta_ns;
        if (c->stages[k].own_significant) {
            explained[sync_segment(schema, k)] = true;
            route_insert(c, 0, k, own[k], own);
        }
    }
    uint32_t from = c->n_route;
    for (uint32_t k = 0; k < c->n_stages; k++) {
        const sf_stage_change *st = &c->stages[k];
        if (st->significant && front[k] > 0 && !st->own_significant &&
            !explained[sync_segment(schema, k)])
            route_insert(c, from, k, front[k], front);
    }
}

/* Keeps the top suspects by delta (then rank), at most max. */
static void suspect_insert(sf_change *c, uint32_t max, uint32_t rank, int64_t delta)
{
    uint32_t at = c->n_suspects < max ? c->n_suspects++ : max;
    if (at == max && (max == 0 || delta <= c->suspects[max - 1].delta_ns))
        return;
    if (at == max)
        at = max - 1;
    while (at > 0 && c->suspects[at - 1].delta_ns < delta) {
        c->suspects[at] = c->suspects[at - 1];
        at--;
    }
    c->suspects[at] = (sf_change_suspect){.rank = rank, .delta_ns = delta};
}

static uint32_t suspects_max(const sf_gates *g)
{
    uint32_t max = g->suspect_ranks_max;
    return max < SF_CHANGE_MAX_SUSPECTS ? max : SF_CHANGE_MAX_SUSPECTS;
}

/* Mergeable mode: the two ranks that most often uniquely led route[0]'s
 * boundary (ties to the lower rank); their change against the reference is
 * unknown (null). */
static int suspects_top2(sf_change *c, const struct window_steps *w, const sf_gates *g)
{
    uint32_t k = c->route[0], n = 0;
    uint32_t *leaders = malloc(w->n * sizeof *leaders);
    if (leaders == NULL)
        return -ENOMEM;
    for (uint32_t t = 0; t < w->n; t++) {
        const sf_top2 *top = &w->step[t]->prefix_top2[k];
        if (top->v1 > top->v2)
            leaders[n++] = top->r1;
    }
    qsort(leaders, n, sizeof *leaders, sf__cmp_u32);
    uint32_t max = suspects_max(g) < 2 ? suspects_max(g) : 2;
    sf_change_suspect best[2] = {{SF_NO_RANK, 0}, {SF_NO_RANK, 0}};
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i;
        while (j < n && leaders[j] == leaders[i])
            j++;
        int64_t run = j - i;
        if (run > best[0].delta_ns) {
            best[1] = best[0];
            best[0] = (sf_change_suspect){leaders[i], run};
        } else if (run > best[1].delta_ns) {
            best[1] = (sf_change_suspect){leaders[i], run};
        }
        i = j;
    }
    for (uint32_t j = 0; j < max; j++)
        if (best[j].rank != SF_NO_RANK)
            c->suspects[c->n_suspects++] = (sf_change_suspect){best[j].rank, SF_NULL_NS};
    free(leaders);
    return 0;
}

/* Each dense rank's median of a series over the window's complete steps,
 * value t of rank x at src[t * step_stride + x * stride], or where rows is
 * set at rows[t][offset + x * stride], into med[x]. Through the selection
 * network (vec/median_net.c) where it pays, NET_LANES ranks at a time, every
 * rank of a group in its own lane; otherwise rank by rank for
 * sf_median_i64. The same values either way. The series are gathered step
 * by step, every group at once: the steps are read in the order they lie in
 * memory, a few steps ahead fetched (consecutive steps lie a whole step of
 * rows apart). */
enum { NET_LANES = 48, GATHER_AHEAD = 4 };

struct rank_medians {
    sf__median_net *net; /* NULL: rank by rank */
    const sf__vec *vec;
    int64_t *buf; /* n x R: per group [t][lane] (network), else [x][t] */
};

struct series {
    const int64_t *src;
    size_t step_stride, stride;
    const int64_t *const *rows; /* NULL: step t is src's row t */
    size_t offset;
};

static void rank_medians_free(struct rank_medians *m)
{
    sf__median_net_free(m->net);
    free(m->buf);
}

static int rank_medians_init(struct rank_medians *m, uint32_t n, uint32_t R)
{
    if (m->buf != NULL)
        return 0;
    *m = (struct rank_medians){.vec = sf__vec_chosen()};
    if (n <= SF__MEDIAN_NET_MAX && m->vec->net_pays && sf__median_net_new(n, &m->net) < 0)
        return -ENOMEM;
    m->buf = malloc(((size_t)n * R + 1) * sizeof *m->buf);
    return m->buf == NULL ? -ENOMEM : 0;
}

static const int64_t *series_step(const struct series *v, uint32_t t)
{
    return v->rows ? v->rows[t] + v->offset : &v->src[(size_t)t * v->step_stride];
}

static void rank_medians_of(const struct rank_medians *m, const struct series *v, uint32_t R,
                            uint32_t n, int64_t *med)
{
    for (uint32_t t = 0; t < n; t++) {
        const int64_t *from = series_step(v, t);
        if (t + GATHER_AHEAD < n)
            __builtin_prefetch(series_step(v, t + GATHER_AHEAD));
        for (uint32_t g = 0; g < R; g += NET_LANES) {
            uint32_t lanes = R - g < NET_LANES ? R - g : NET_LANES;
            int64_t *to = m->net ? &m->buf[(size_t)n * g + (size_t)t * lanes] : &m->buf[t];
            size_t to_stride = m->net ? 1 : n;
            for (uint32_t x = g; x < g + lanes; x++)
                to[(x - (m->net ? g : 0)) * to_stride] = from[x * v->stride];
        }
    }
    for (uint32_t g = 0; g < R; g += NET_LANES) {
        uint32_t lanes = R - g < NET_LANES ? R - g : NET_LANES;
        if (m->net)
            sf__median_net_run(m->net, m->vec, &m->buf[(size_t)n * g], lanes, &med[g]);
        else
            for (uint32_t x = g; x < g + lanes; x++)
                med[x] = sf_median_i64(&m->buf[(size_t)x * n], n);
    }
}

/* Per dense rank and own-work stage, the shift of the rank's contrast: the
 * median over the window's complete steps of (its duration minus the median
 * of the other ranks' in the step) minus the reference's median contrast.
 * Machine load that slows every rank alike cancels in the contrast. */
struct own_work {
    uint32_t R, S, n;
    int64_t *shift;              /* [R][S] at own-work stages, SF_NULL_NS elsewhere */
    int64_t *z;                  /* [R][n] of the stage last filled, rank by rank */
    int64_t *base;               /* [R] reference contrast at that stage, SF_NULL_NS if unknown */
    int64_t *v;                  /* 2 x R scratch */
    int64_t *row;                /* [R] one step's contrasts when not kept */
    uint32_t q;                  /* the own-work stage's ordinal among them */
    int64_t *tmp;                /* [n] scratch for a median, so z keeps its time order */
    double *rank;                /* [n] scratch for the serial factor's midranks */
    int64_t *med;                /* [R] every rank's median contrast */
    uint32_t *below;             /* [R] steps of that stage with z below the minimum effect */
    struct rank_medians medians; /* set up at first use, also by the suspects */
    /* Cohorts (docs/ACCOUNTING.md, "Cohorts"): contrasts inside them. */
    uint32_t *cohort_of; /* [R], NULL without */
    uint32_t n_cohorts;
    int64_t *cv; /* [2 R] their scratch */
};

static void own_work_free(struct own_work *o)
{
    free(o->shift);
    free(o->z);
    free(o->base);
    free(o->v);
    free(o->row);
    free(o->tmp);
    free(o->rank);
    free(o->med);
    free(o->below);
    free(o->cohort_of);
    free(o->cv);
    rank_medians_free(&o->medians);
}

/* One step's contrasts at stage k: every rank's duration minus the median
 * of the others', into out. The column is read in place: one pass finds the
 * middle order statistics, one writes every contrast. */
static void step_contrasts(const int64_t *row, uint32_t k, struct own_work *o, int64_t *out)
{
    const int64_t *col = row + k;
    if (o->cohort_of != NULL) {
        sf__cohort_contrasts(col, o->S, o->R, o->cohort_of, o->n_cohorts, o->cv, out);
        return;
    }
    sf__middle mm;
    sf__middle_of(col, o->S, o->R, o->v, &mm);
    for (uint32_t x = 0; x < o->R; x++)
        out[x] = sf__contrast(&mm, col[(size_t)x * o->S]);
}

/* Fills o->z with every rank's contrast at stage k, step by step, minus its
 * reference contrast, and counts in o->below those below e. A part whose
 * contrasts an earlier change kept (a pooled window) is read, not
 * recomputed; the last part's are kept in w->fresh when it is set. */
static void own_work_fill(const sf_summary *s, const sf_reference *ref,
                          const struct window_steps *w, struct own_work *o, uint32_t k, int64_t e)
{
    const sf_dense *d = s->dense;
    uint32_t R = o->R, S = o->S, n = o->n;
    int64_t *offset = o->v + R; /* the reference contrast, 0 where unknown */
    for (uint32_t x = 0; x < R; x++) {
        const uint32_t *hit = sf__find_rank(ref->ranks, ref->n_ranks, d->ranks[x], x);
        o->base[x] = hit ? ref->contrast_ns[(size_t)(hit - ref->ranks) * S + k] : SF_NULL_NS;
        offset[x] = o->base[x] == SF_NULL_NS ? 0 : o->base[x];
        o->below[x] = 0;
    }
    for (uint32_t j = 0; j < w->n_parts; j++) {
        uint32_t lo = part_begin(w, j), steps = w->part_end[j] - lo;
        size_t block = (size_t)o->q * steps * R;
        const int64_t *kept = w->cached[j] ? w->cached[j] + block : NULL;
        int64_t *keep = j + 1 == w->n_parts && w->fresh ? w->fresh + block : NULL;
        for (uint32_t t = lo; t < w->part_end[j]; t++) {
            const int64_t *c = kept ? kept + (size_t)(t - lo) * R : NULL;
            if (c == NULL) {
                int64_t *out = keep ? keep + (size_t)(t - lo) * R : o->row;
                step_contrasts(w->rows[t], k, o, out);
                c = out;
            }
            for (uint32_t x = 0; x < R; x++) {
                int64_t z = c[x] - offset[x];
                o->z[(size_t)x * n + t] = z;
                o->below[x] += z < e;
            }
        }
    }
}

/* Keeps every rank's contrast shift at stage k (for the suspects), and in
 * c->stages[k] the significant rank with the largest shift, or else the
 * largest shift that reached the minimum effect (none: not reported). Only
 * such a shift can be significant, so only those ranks get the rank test.
 * The suspects read the shifts only at a stage the route can hold (one with
 * an own-work change or a significant frontier slowdown): elsewhere a shift
 * that a count proves below the minimum effect is left unknown. */
static int own_work_stage(sf_change *c, const sf_summary *s, const sf_reference *ref,
                          const struct window_steps *w, struct own_work *o, uint32_t k,
                          double alpha)
{
    int64_t e = c->min_effect_ns > 1 ? c->min_effect_ns : 1;
    own_work_fill(s, ref, w, o, k, e);
    sf_stage_change *st = &c->stages[k];
    bool skipped = false;
    for (uint32_t x = 0; x < o->R; x++) {
        if (o->base[x] == SF_NULL_NS)
            continue;
        int64_t *z = &o->z[(size_t)x * o->n];
        /* more than half of the values below e put the upper middle one,
         * and so the median (sf_median_i64's), below it */
        if (o->below[x] > o->n / 2) {
            skipped = true;
            continue;
        }
        memcpy(o->tmp, z, (size_t)o->n * sizeof *z); /* the series' order is its dependence */
        int64_t shift = sf_median_i64(o->tmp, o->n);
        o->shift[(size_t)x * o->S + k] = shift;
        if (shift < e)
            continue;
        double rho = sf__sort_and_rank_lag1(z, o->n, o->tmp, o->rank);
        double p = sf__signed_rank_p_inplace(z, o->n, sf__serial_variance_factor(rho));
        bool sig = p < alpha;
        if (st->own_delta_ns == SF_NULL_NS || (sig && !st->own_significant) ||
            (sig == st->own_significant && shift > st->own_delta_ns)) {
            st->own_delta_ns = shift;
            st->own_rank = s->dense->ranks[x];
            st->own_p_value = p;
            st->own_significant = sig;
        }
    }
    if (!skipped || !(st->own_significant || (st->significant && st->shift.delta_ns > 0)))
        return 0;
    /* a skipped column is still whole: every rank's median at once */
    struct series all = {o->z, 1, o->n, NULL, 0};
    rank_medians_of(&o->medians, &all, o->R, o->n, o->med);
    for (uint32_t x = 0; x < o->R; x++)
        if (o->base[x] != SF_NULL_NS && o->shift[(size_t)x * o->S + k] == SF_NULL_NS)
            o->shift[(size_t)x * o->S + k] = o->med[x];
    return 0;
}

/* Dense mode with the reference's contrasts: tests every (rank, own-work
 * stage) at change_alpha / (ranks x own-work stages), so the whole family
 * of a window keeps the false-alarm rate of one test. */
static int own_work_tests(sf_change *c, const sf_summary *s, const sf_reference *ref,
                          const struct window_steps *w, const sf_gates *g, struct own_work *o)
{
    uint32_t S = ref->n_stages, R = s->dense->n_ranks, tested = 0;
    for (uint32_t k = 0; k < S; k++)
        tested += sf_change_own_work_stage(&s->schema, k);
    if (tested == 0 || R < 2 || ref->contrast_ns == NULL)
        return 0;
    *o = (struct own_work){.R = R, .S = S, .n = w->n};
    o->shift = malloc((size_t)R * S * sizeof *o->shift);
    o->z = malloc((size_t)R * w->n * sizeof *o->z);
    o->base = malloc((size_t)R * sizeof *o->base);
    o->v = malloc((size_t)R * 2 * sizeof *o->v);
    o->row = malloc((size_t)R * sizeof *o->row);
    o->tmp = malloc(((size_t)w->n + 1) * sizeof *o->tmp);
    o->rank = malloc(((size_t)w->n + 1) * sizeof *o->rank);
    o->med = malloc((size_t)R * sizeof *o->med);
    o->below = malloc((size_t)R * sizeof *o->below);
    if (!o->shift || !o->z || !o->base || !o->v || !o->row || !o->tmp || !o->rank || !o->med ||
        !o->below || rank_medians_init(&o->medians, w->n, R) < 0)
        return -ENOMEM;
    enum sf_cohort_state cohorts;
    o->cohort_of = malloc((size_t)R * sizeof *o->cohort_of);
    if (o->cohort_of == NULL || sf__report_cohorts(s, o->cohort_of, &cohorts, &o->n_cohorts) < 0)
        return -ENOMEM;
    if (cohorts == SF_COHORTS_APPLIED) {
        if ((o->cv = malloc((size_t)R * 2 * sizeof *o->cv)) == NULL)
            return -ENOMEM;
    } else {
        free(o->cohort_of);
        o->cohort_of = NULL;
    }
    for (size_t i = 0; i < (size_t)R * S; i++)
        o->shift[i] = SF_NULL_NS;
    double alpha = g->change_alpha / ((double)R * tested);
    int rc = 0;
    for (uint32_t k = 0; k < S && rc == 0; k++)
        if (sf_change_own_work_stage(&s->schema, k)) {
            rc = own_work_stage(c, s, ref, w, o, k, alpha);
            o->q++;
        }
    return rc;
}

/* Per dense rank and route stage: the shift of its own median duration (or
 * of its contrast, at an own-work stage) and its unique-lead share against
 * the reference. */
struct rank_change {
    int64_t own;
    double lead;
    bool contrast;
};

/* Steps of the window where each dense rank uniquely led route stage j's
 * boundary, for every route stage: led[j][x]. One pass over the steps per
 * stage, instead of one per rank. */
static void route_leads(const sf_summary *s, const struct window_steps *w, const sf_change *c,
                        uint32_t *led)
{
    const sf_dense *d = s->dense;
    for (uint32_t j = 0; j < c->n_route; j++) {
        uint32_t k = c->route[j], *row = &led[(size_t)j * d->n_ranks];
        for (uint32_t t = 0; t < w->n; t++) {
            const sf_top2 *top = &w->step[t]->prefix_top2[k];
            if (top->v1 <= top->v2)
                continue;
            const uint32_t *hit = sf__find_rank(d->ranks, d->n_ranks, top->r1, top->r1);
            if (hit != NULL)
                row[hit - d->ranks]++;
        }
    }
}

/* Whether every rank has a row in every step of part j: then a rank's
 * median over its rows, which the summary kept, is its median over the
 * complete steps. */
static bool part_whole(const struct window_steps *w, uint32_t j)
{
    const sf_summary *p = w->part[j];
    uint32_t n = w->part_end[j] - part_begin(w, j);
    if (p->dense->rank_median == NULL || n != p->n_steps)
        return false;
    for (uint32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].n_ranks != p->dense->n_ranks)
            return false;
    return true;
}

/* Every rank's median duration at stage k over part j's complete steps,
 * into to[x] (SF_NULL_NS for all when the part has none). */
static int part_medians(const struct window_steps *w, uint32_t j, uint32_t k, int64_t *to)
{
    const sf_dense *d = w->part[j]->dense;
    uint32_t R = d->n_ranks, S = w->part[j]->schema.n_stages;
    uint32_t lo = part_begin(w, j), n = w->part_end[j] - lo;
    if (part_whole(w, j)) {
        for (uint32_t x = 0; x < R; x++)
            to[x] = d->rank_median[(size_t)x * S + k];
        return 0;
    }
    if (n == 0) {
        for (uint32_t x = 0; x < R; x++)
            to[x] = SF_NULL_NS;
        return 0;
    }
    struct rank_medians m = {0};
    struct series v = {NULL, 0, S, w->rows + lo, k};
    int rc = rank_medians_init(&m, n, R);
    if (rc == 0)
        rank_medians_of(&m, &v, R, n, to);
    rank_medians_free(&m);
    return rc;
}

/* Each route stage's rank medians, med[j][x], for the stages where some
 * rank has no contrast shift to use instead (NULL: none): a rank's median
 * over the complete steps of the window, or when windows are pooled the
 * median of its medians in each (docs/CHANGE.md, "Pooled windows"): the
 * summaries kept those, so pooling costs no gathering. */
static int route_medians(const struct window_steps *w, const sf_change *c, struct own_work *o,
                         int64_t **ret)
{
    const sf_dense *d = w->part[w->n_parts - 1]->dense;
    uint32_t R = d->n_ranks, S = w->part[0]->schema.n_stages, P = w->n_parts;
    uint32_t js[SF_MAX_STAGES], g = 0;
    for (uint32_t j = 0; j < c->n_route; j++) {
        bool need = o->shift == NULL;
        for (uint32_t x = 0; x < R && !need; x++)
            need = o->shift[(size_t)x * S + c->route[j]] == SF_NULL_NS;
        if (need)
            js[g++] = j;
    }
    *ret = NULL;
    if (g == 0)
        return 0;
    int64_t *med = malloc((size_t)c->n_route * R * sizeof *med);
    int64_t *by_part = malloc(((size_t)P * R + P) * sizeof *by_part), *of_rank = by_part + P * R;
    int rc = med == NULL || by_part == NULL ? -ENOMEM : 0;
    for (size_t i = 0; i < (size_t)c->n_route * R && rc == 0; i++)
        med[i] = SF_NULL_NS; /* the stages not gathered: every rank has a contrast there */
    for (uint32_t i = 0; i < g && rc == 0; i++) {
        int64_t *to = &med[(size_t)js[i] * R];
        for (uint32_t p = 0; p < P && rc == 0; p++)
            rc = part_medians(w, p, c->route[js[i]], &by_part[(size_t)p * R]);
        for (uint32_t x = 0; x < R && rc == 0; x++) {
            uint32_t known = 0;
            for (uint32_t p = 0; p < P; p++)
                if (by_part[(size_t)p * R + x] != SF_NULL_NS)
                    of_rank[known++] = by_part[(size_t)p * R + x];
            to[x] = known ? sf_median_i64(of_rank, known) : SF_NULL_NS;
        }
    }
    free(by_part);
    if (rc < 0)
        free(med);
    *ret = rc < 0 ? NULL : med;
    return rc;
}

/* Rank x's change at every route stage, ret[j]; false when the reference
 * does not know the rank (or its median at a route stage). */
static bool rank_change_one(const sf_summary *s, const sf_reference *ref,
                            const struct window_steps *w, const sf_change *c,
                            const struct own_work *o, const uint32_t *led, const int64_t *med,
                            uint32_t x, struct rank_change *ret)
{
    const sf_dense *d = s->dense;
    uint32_t S = ref->n_stages, rank = d->ranks[x];
    const uint32_t *hit = sf__find_rank(ref->ranks, ref->n_ranks, rank, x);
    if (hit == NULL)
        return false;
    bool known = true;
    size_t ri = (size_t)(hit - ref->ranks);
    for (uint32_t j = 0; j < c->n_route; j++) {
        uint32_t k = c->route[j];
        int64_t base = ref->median_ns[ri * S + k];
        int64_t shift = o->shift ? o->shift[(size_t)x * S + k] : SF_NULL_NS;
        int64_t own = med ? med[(size_t)j * d->n_ranks + x] : SF_NULL_NS;
        ret[j].contrast = shift != SF_NULL_NS;
        known = known && base != SF_NULL_NS && (ret[j].contrast || own != SF_NULL_NS);
        if (ret[j].contrast)
            ret[j].own = shift;
        else if (base == SF_NULL_NS || own == SF_NULL_NS)
            ret[j].own = 0;
        else /* gathered: this rank has no contrast shift here */
            ret[j].own = own - base;
        ret[j].lead = (double)led[(size_t)j * d->n_ranks + x] / w->n -
                      (double)ref->lead_steps[ri * S + k] / ref->n_steps;
    }
    return known;
}

/* Dense mode: a rank's score is, over the route, its own shift beyond the
 * cohort's median shift (at an own-work stage: its contrast shift, already
 * relative to the others) plus the lead share it gained times the stage's
 * shift. A fault on one rank moves its own duration or its leadership; the
 * waits it causes on the others move all of them alike. */
static int suspects_dense(sf_change *c, const sf_summary *s, const sf_reference *ref,
                          const struct window_steps *w, const sf_gates *g, struct own_work *o)
{
    uint32_t R = s->dense->n_ranks, J = c->n_route;
    /* [R][J], each row set by rank_change_one */
    struct rank_change *rc = malloc(((size_t)R * J + 1) * sizeof *rc);
    bool *known = malloc(((size_t)R + 1) * sizeof *known);
    int64_t *scratch = malloc(((size_t)R + 1) * sizeof *scratch), *med = NULL;
    uint32_t *led = calloc((size_t)J * R + 1, sizeof *led);
    int ret = rc && known && scratch && led ? route_medians(w, c, o, &med) : -ENOMEM;
    if (ret < 0)
        goto out;
    route_leads(s, w, c, led);
    for (uint32_t x = 0; x < R; x++)
        known[x] = rank_change_one(s, ref, w, c, o, led, med, x, &rc[(size_t)x * J]);
    double score_extra[SF_MAX_STAGES] = {0};
    int64_t cohort[SF_MAX_STAGES] = {0};
    for (uint32_t j = 0; j < J; j++) {
        size_t n = 0;
        for (uint32_t x = 0; x < R; x++)
            if (known[x] && !rc[(size_t)x * J + j].contrast)
                scratch[n++] = rc[(size_t)x * J + j].own;
        cohort[j] = n ? sf_median_i64(scratch, n) : 0;
        score_extra[j] = (double)sf_change_frontier_shift(&c->stages[c->route[j]])->delta_ns;
    }
    for (uint32_t x = 0; x < R; x++) {
        if (!known[x])
            continue;
        double score = 0;
        for (uint32_t j = 0; j < J; j++) {
            const struct rank_change *v = &rc[(size_t)x * J + j];
            /* a contrast shift is the rank's whole change at the stage: the
             * frontier's shift there is mostly the others' (or the load's) */
            score += (double)(v->own - cohort[j]) + (v->contrast ? 0 : v->lead * score_extra[j]);
        }
        int64_t delta = (int64_t)llround(score);
        if (delta > 0)
            suspect_insert(c, suspects_max(g), s->dense->ranks[x], delta);
    }
out:
    free(rc);
    free(known);
    free(scratch);
    free(led);
    free(med);
    return ret;
}

/* Room for the last part's own-work contrasts, [K][steps][R], when the
 * caller keeps them (NULL, 0 when there is nothing to keep). */
static int fresh_contrasts(const sf_summary *s, const struct window_steps *w,
                           struct sf_contrasts *ret)
{
    uint32_t K = 0, last = w->n_parts - 1, steps = w->part_end[last] - part_begin(w, last);
    for (uint32_t k = 0; k < s->schema.n_stages; k++)
        K += sf_change_own_work_stage(&s->schema, k);
    *ret = (struct sf_contrasts){0};
    if (K == 0 || s->dense == NULL || s->dense->n_ranks < 2 || steps == 0)
        return 0;
    ret->bytes = (size_t)K * steps * s->dense->n_ranks * sizeof(int64_t);
    ret->v = malloc(ret->bytes);
    return ret->v == NULL ? -ENOMEM : 0;
}

int sf__change_of_parts(const sf_reference *ref, const sf_summary *const *parts, uint32_t n_parts,
                        const int64_t *const *cached, struct sf_contrasts *ret_fresh,
                        const sf_gates *gates, sf_change **ret)
{
    const char *why;
    const sf_summary *summary = parts[n_parts - 1];
    if (sf_reference_check(ref, &summary->schema, summary->meta.world_size, &why) < 0)
        return -EINVAL;
    struct window_steps w = {0};
    struct own_work own = {0};
    struct sf_contrasts fresh = {0};
    sf_change *c = calloc(1, sizeof *c);
    int rc = c == NULL ? -ENOMEM : window_steps_collect(parts, n_parts, &w);
    for (uint32_t j = 0; j < n_parts && cached != NULL; j++)
        w.cached[j] = cached[j];
    if (rc == 0 && ret_fresh != NULL && ref->contrast_ns != NULL &&
        (rc = fresh_contrasts(summary, &w, &fresh)) == 0)
        w.fresh = fresh.v;
    if (rc < 0)
        goto fail;
    c->n_stages = ref->n_stages;
    c->baseline_n_windows = ref->n_windows;
    memcpy(c->baseline_windows, ref->windows, sizeof c->baseline_windows);
    c->baseline_steps = ref->n_steps;
    c->n_measured = n_parts;
    for (uint32_t i = 0; i < n_parts; i++)
        c->measured_windows[i] = parts[i]->meta.index;
    c->steps = w.n;
    c->min_effect_ns = (int64_t)llround(gates->change_min_frac * (double)ref->median_step_ns);
    if ((rc = stage_shifts(c, ref, &w, &summary->schema, gates)) < 0)
        goto fail;
    for (uint32_t k = 0; k < c->n_stages; k++)
        c->stages[k].own_delta_ns = SF_NULL_NS;
    c->suspects_dense = summary->dense != NULL && ref->median_ns != NULL;
    /* Coordinates that make no cohorts: no rank is compared with another
     * (docs/ACCOUNTING.md, "Cohorts"); the frontier shifts stand. */
    enum sf_cohort_state cohorts;
    uint32_t n_cohorts, R = summary->dense ? summary->dense->n_ranks : 0;
    uint32_t *cohort_of = malloc((R ? R : 1) * sizeof *cohort_of);
    rc = cohort_of == NULL ? -ENOMEM : sf__report_cohorts(summary, cohort_of, &cohorts, &n_cohorts);
    free(cohort_of);
    if (rc < 0)
        goto fail;
    if (cohorts == SF_COHORTS_INCONSISTENT)
        c->suspects_dense = false;
    if (c->suspects_dense && (rc = own_work_tests(c, summary, ref, &w, gates, &own)) < 0)
        goto fail;
    int64_t median_step = sf_median_i64(w.ends, w.n);
    c->slowdown = ref->median_step_ns > 0 ? (double)median_step / (double)ref->median_step_ns : NAN;
    route_order(c, &summary->schema);
    if (c->n_route > 0 && c->suspects_dense)
        rc = suspects_dense(c, summary, ref, &w, gates, &own);
    else if (c->n_route > 0 && cohorts != SF_COHORTS_INCONSISTENT)
        rc = suspects_top2(c, &w, gates);
    if (rc == 0)
        rc = sf__comm_change(c, ref, summary, gates);
    if (rc < 0)
        goto fail;
    bool filled = own.z != NULL; /* every own-work stage's block of fresh */
    window_steps_free(&w);
    own_work_free(&own);
    if (ret_fresh != NULL)
        *ret_fresh = filled ? fresh : (struct sf_contrasts){0};
    if (ret_fresh == NULL || !filled)
        free(fresh.v);
    *ret = c;
    return 0;
fail:
    window_steps_free(&w);
    own_work_free(&own);
    free(fresh.v);
    free(c);
    return rc;
}

int sf_change_compute(const sf_reference *ref, const sf_summary *summary, const sf_gates *gates,
                      sf_change **ret)
{
    if (ref == NULL || summary == NULL || gates == NULL || ret == NULL)
        return -EINVAL;
    return sf__change_of_parts(ref, &summary, 1, NULL, NULL, gates, ret);
}

int sf_report_attach_change(sf_report *report, const sf_summary *summary, sf_change_pool *pool,
                            const sf_reference *ref)
{
    if (report == NULL || summary == NULL)
        return -EINVAL;
    sf_change *c = NULL;
    sf_whatif *w = NULL;
    int rc = 0;
    if (ref != NULL && report->steps > 0)
        rc = sf__change_pool_measure(pool, summary, ref, &report->gates, &c);
    if (rc == 0 && summary->dense != NULL && report->steps > 0)
        rc = sf_whatif_compute(summary, ref, c, &w);
    if (rc < 0) {
        sf_change_free(c);
        return rc;
    }
    sf_change_free(report->change);
    sf_whatif_free(report->whatif);
    report->change = c;
    report->whatif = w;
    return 0;
}

/* Downgrades that say the window's data is incomplete or suspect; those that
 * only say how to read it (shares, floor, one rank) do not bar a reference. */
#define REFERENCE_BARRED                                                                           \
    ((1u << SF_DG_MISSING_RANKS) | (1u << SF_DG_INCOMPLETE_STEPS) |                                \
     (1u << SF_DG_DROPPED_RECORDS) | (1u << SF_DG_CONTRACT_VIOLATIONS) |                           \
     (1u << SF_DG_NON_MONOTONIC_TIME) | (1u << SF_DG_LATE_OR_FAILED_SUMMARY) |                     \
     (1u << SF_DG_WINDOW_CLOSED_EARLY) | (1u << SF_DG_WINDOW_PARTIAL))

bool sf_reference_eligible(const sf_report *report)
{
    return report != NULL && report->steps > 0 && (report->downgrades & REFERENCE_BARRED) == 0;
}

/*
 * The job's reference (docs/CHANGE.md): per complete step the frontier
 * advance and the shortest duration of every stage, and in dense mode per
 * (rank, stage) the median duration, the share of steps led and, for
 * own-work stages, the median contrast against the other ranks. Built once
 * from the summaries of the reference windows and bounded by
 * SF_REF_MAX_STEPS; per-rank figures stay NULL in mergeable mode, where
 * they cannot be exact.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/change.h>

#include "core_internal.h"

void sf_reference_free(sf_reference *ref)
{
    if (ref == NULL)
        return;
    free(ref->advance);
    free(ref->min_ns);
    free(ref->ranks);
    free(ref->median_ns);
    free(ref->lead_steps);
    free(ref->contrast_ns);
    free(ref->comm_lag_ns);
    sf__reference_columns_free(ref->columns);
    free(ref);
}

void sf__reference_columns_free(struct sf_reference_columns *c)
{
    if (c == NULL)
        return;
    free(c->advance_sorted);
    free(c->share_sorted);
    free(c->share_rho);
    free(c->floor_sorted);
    free(c->floor_share_sorted);
    free(c->floor_rho);
    free(c);
}

double sf__share_series(const int64_t *advance, const int64_t *ends, uint32_t n, int64_t *share,
                        int64_t *sorted, double *rank)
{
    for (uint32_t t = 0; t < n; t++)
        share[t] = sf__share_ppm(advance[t], ends[t]);
    return sf__sort_and_rank_lag1(share, n, sorted, rank);
}

/* Stage k's column of from ([n_steps][n_stages]) into its row of sorted,
 * its share series sorted into share_sorted with its autocorrelation
 * (returned), then the column sorted. ends is the exposed step in time order. */
static double column_of_stage(const sf_reference *ref, const int64_t *from, uint32_t k,
                              const int64_t *ends, int64_t *sorted, int64_t *share_sorted,
                              int64_t *share, double *rank)
{
    uint32_t S = ref->n_stages, m = ref->n_steps;
    int64_t *column = &sorted[(size_t)k * m];
    for (uint32_t t = 0; t < m; t++)
        column[t] = from[(size_t)t * S + k];
    double rho = sf__share_series(column, ends, m, share, &share_sorted[(size_t)k * m], rank);
    sf__sort_i64(column, m);
    return rho;
}

static bool columns_alloc(const sf_reference *ref, struct sf_reference_columns *c)
{
    size_t S = ref->n_stages, m = ref->n_steps;
    c->advance_sorted = malloc((S + 1) * m * sizeof *c->advance_sorted);
    c->share_sorted = malloc((S * m + 1) * sizeof *c->share_sorted);
    c->share_rho = malloc((S + 1) * sizeof *c->share_rho);
    bool ok = c->advance_sorted && c->share_sorted && c->share_rho;
    if (ok && ref->min_ns != NULL) {
        c->floor_sorted = malloc((S * m + 1) * sizeof *c->floor_sorted);
        c->floor_share_sorted = malloc((S * m + 1) * sizeof *c->floor_share_sorted);
        c->floor_rho = malloc((S + 1) * sizeof *c->floor_rho);
        ok = c->floor_sorted && c->floor_share_sorted && c->floor_rho;
    }
    return ok;
}

int sf__reference_columns_build(const sf_reference *ref, struct sf_reference_columns **ret)
{
    uint32_t S = ref->n_stages, m = ref->n_steps;
    struct sf_reference_columns *c = calloc(1, sizeof *c);
    int64_t *share = malloc(((size_t)m + 1) * sizeof *share);
    double *rank = malloc(((size_t)m + 1) * sizeof *rank);
    if (c == NULL || !columns_alloc(ref, c) || !share || !rank) {
        sf__reference_columns_free(c);
        free(share);
        free(rank);
        return -ENOMEM;
    }
    int64_t *ends = &c->advance_sorted[(size_t)S * m]; /* in time order until the stages are done */
    for (uint32_t t = 0; t < m; t++) {
        int64_t sum = 0;
        for (uint32_t k = 0; k < S; k++)
            sum += ref->advance[(size_t)t * S + k];
        ends[t] = sum;
    }
    for (uint32_t k = 0; k < S; k++) {
        c->share_rho[k] = column_of_stage(ref, ref->advance, k, ends, c->advance_sorted,
                                          c->share_sorted, share, rank);
        if (ref->min_ns != NULL)
            c->floor_rho[k] = column_of_stage(ref, ref->min_ns, k, ends, c->floor_sorted,
                                              c->floor_share_sorted, share, rank);
    }
    sf__sort_i64(ends, m);
    free(share);
    free(rank);
    *ret = c;
    return 0;
}

static bool step_complete(const sf_summary *s, uint32_t i)
{
    return s->steps[i].n_ranks == (uint32_t)sf_summary_covered_ranks(s);
}

static void step_advances(const sf_step_summary *st, uint32_t S, int64_t *ret)
{
    int64_t prev = 0;
    for (uint32_t k = 0; k < S; k++) {
        ret[k] = st->prefix_top2[k].v1 - prev;
        prev = st->prefix_top2[k].v1;
    }
}

/* Each complete step's advances and shortest durations, in window order,
 * at most SF_REF_MAX_STEPS. */
static int collect_advances(sf_reference *ref, const sf_summary *const *w, uint32_t n)
{
    uint32_t S = ref->n_stages, total = 0;
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t i = 0; i < w[j]->n_steps; i++)
            total += step_complete(w[j], i);
    if (total == 0)
        return -ENODATA;
    if (total > SF_REF_MAX_STEPS)
        total = SF_REF_MAX_STEPS;
    ref->advance = malloc((size_t)total * S * sizeof *ref->advance);
    ref->min_ns = malloc((size_t)total * S * sizeof *ref->min_ns);
    if (ref->advance == NULL || ref->min_ns == NULL)
        return -ENOMEM;
    for (uint32_t j = 0; j < n && ref->n_steps < total; j++) {
        for (uint32_t i = 0; i < w[j]->n_steps && ref->n_steps < total; i++) {
            if (!step_complete(w[j], i))
                continue;
            step_advances(&w[j]->steps[i], S, &ref->advance[(size_t)ref->n_steps * S]);
            memcpy(&ref->min_ns[(size_t)ref->n_steps * S], w[j]->steps[i].dmin,
                   S * sizeof *ref->min_ns);
            ref->n_steps++;
        }
    }
    return sf_reference_finish(ref);
}

int sf_reference_finish(sf_reference *ref)
{
    if (ref->n_steps == 0)
        return -ENODATA;
    sf__reference_columns_free(ref->columns);
    ref->columns = NULL;
    int rc = sf__reference_columns_build(ref, &ref->columns);
    if (rc < 0)
        return rc;
    const int64_t *ends = &ref->columns->advance_sorted[(size_t)ref->n_stages * ref->n_steps];
    ref->median_step_ns = sf__median_sorted(ends, ref->n_steps); /* the exposed steps, sorted */
    return 0;
}

bool sf_reference_applies(const sf_reference *ref, const sf_window_meta *meta)
{
    int64_t last = ref->windows[0];
    for (uint32_t j = 1; j < ref->n_windows; j++)
        last = ref->windows[j] > last ? ref->windows[j] : last;
    return meta->segment > ref->segment || (meta->segment == ref->segment && meta->index > last);
}

int sf__cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The sorted union of the windows' dense ranks. */
static int union_ranks(sf_reference *ref, const sf_summary *const *w, uint32_t n)
{
    size_t total = 0;
    for (uint32_t j = 0; j < n; j++)
        total += w[j]->dense->n_ranks;
    uint32_t *all = malloc((total ? total : 1) * sizeof *all);
    if (all == NULL)
        return -ENOMEM;
    size_t k = 0;
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t i = 0; i < w[j]->dense->n_ranks; i++)
            all[k++] = w[j]->dense->ranks[i];
    qsort(all, total, sizeof *all, sf__cmp_u32);
    uint32_t u = 0;
    for (size_t i = 0; i < total; i++)
        if (u == 0 || all[u - 1] != all[i])
            all[u++] = all[i];
    ref->ranks = all;
    ref->n_ranks = u;
    return 0;
}

static int dense_index(const sf_dense *d, uint32_t rank)
{
    uint32_t *hit = bsearch(&rank, d->ranks, d->n_ranks, sizeof rank, sf__cmp_u32);
    return hit == NULL ? -1 : (int)(hit - d->ranks);
}

/* Medians of every row the rank reported in the reference windows, and its
 * share of complete steps with a unique lead at each boundary. */
static void rank_figures(sf_reference *ref, const sf_summary *const *w, uint32_t n, uint32_t ri,
                         int64_t *scratch)
{
    uint32_t S = ref->n_stages, rank = ref->ranks[ri];
    for (uint32_t k = 0; k < S; k++) {
        size_t c = 0;
        uint32_t led = 0;
        for (uint32_t j = 0; j < n; j++) {
            const sf_dense *d = w[j]->dense;
            int x = dense_index(d, rank);
            for (uint32_t i = 0; i < w[j]->n_steps; i++) {
                if (x >= 0 && d->present[(size_t)i * d->n_ranks + x])
                    scratch[c++] = d->d[((size_t)i * d->n_ranks + x) * S + k];
                if (!step_complete(w[j], i))
                    continue;
                const sf_top2 *t = &w[j]->steps[i].prefix_top2[k];
                led += t->r1 == rank && t->v1 > t->v2;
            }
        }
        ref->median_ns[(size_t)ri * S + k] = c ? sf_median_i64(scratch, c) : SF_NULL_NS;
        ref->lead_steps[(size_t)ri * S + k] = led;
    }
}

/* Order statistic k of the n values in scratch, and its two neighbours
 * (INT64_MIN and INT64_MAX where k - 1 or k + 1 lies outside them). */
static void middle_select(int64_t *scratch, size_t n, size_t k, sf__middle *m)
{
    m->below = INT64_MIN;
    m->above = INT64_MAX;
    sf__select_kth(scratch, n, k);
    m->mid = scratch[k];
    for (size_t i = 0; i < k; i++)
        m->below = scratch[i] > m->below ? scratch[i] : m->below;
    for (size_t i = k + 1; i < n; i++)
        m->above = scratch[i] < m->above ? scratch[i] : m->above;
}

/* Large rows: two values of a fixed sample of 64 bracket a range that
 * should hold order statistics h - 1 to h + 1; one pass counts the values
 * below the range and copies those inside it, and the three are found among
 * those alone. The counts prove whether the range holds the three: if not,
 * false, and the caller selects among all n. Either way the values are the
 * same order statistics, so the result never depends on the sample. */
static bool middle_bracketed(const int64_t *v, size_t stride, uint32_t n, int64_t *scratch,
                             uint32_t h, sf__middle *ret)
{
    enum { SAMPLE = 64, MARGIN = 8 };
    int64_t sample[SAMPLE];
    for (uint32_t i = 0; i < SAMPLE; i++)
        sample[i] = v[(size_t)i * n / SAMPLE * stride];
    uint32_t at = (uint32_t)((uint64_t)h * SAMPLE / n);
    uint32_t lo_at = at > MARGIN ? at - MARGIN : 0;
    uint32_t hi_at = at + MARGIN < SAMPLE ? at + MARGIN : SAMPLE - 1;
    sf__select_kth(sample, SAMPLE, lo_at);
    int64_t lo = sample[lo_at]; /* read before the next selection reorders it */
    sf__select_kth(sample + lo_at, SAMPLE - lo_at, hi_at - lo_at);
    int64_t hi = sample[hi_at];
    uint64_t width = (uint64_t)hi - (uint64_t)lo; /* lo <= x <= hi in one unsigned test */
    size_t below = 0, inside = 0;
    for (uint32_t i = 0; i < n; i++) {
        int64_t x = v[(size_t)i * stride];
        scratch[inside] = x;
        inside += (size_t)((uint64_t)x - (uint64_t)lo <= width);
        below += (size_t)(x < lo);
    }
    if (below + 1 > h || h + 1 >= below + inside)
        return false;
    middle_select(scratch, inside, h - below, ret);
    return true;
}

/* Leaving one value out of n moves the median of the rest only among the
 * order statistics h - 1, h and h + 1 of all n (h = (n - 1) / 2): which of
 * them it is depends only on whether the value left out lies below them. So
 * three order statistics, found by selection, give every rank's median of
 * the others in O(n), the same number sf_median_i64 would give. */
void sf__middle_of(const int64_t *v, size_t stride, uint32_t n, int64_t *scratch, sf__middle *ret)
{
    uint32_t m = n - 1, h = m / 2;
    if (n < 256 || !middle_bracketed(v, stride, n, scratch, h, ret)) {
        for (uint32_t i = 0; i < n; i++)
            scratch[i] = v[(size_t)i * stride];
        middle_select(scratch, n, h, ret);
    }
    ret->even = m % 2 == 0;
}

void sf__contrasts(const int64_t *v, uint32_t n, int64_t *scratch, int64_t *ret)
{
    sf__middle mm;
    sf__middle_of(v, 1, n, scratch, &mm);
    for (uint32_t x = 0; x < n; x++)
        ret[x] = sf__contrast(&mm, v[x]);
}

/* Per own-work stage, each rank's contrast on every complete step of the
 * windows where all its dense ranks reported; the median per rank. */
static int collect_contrasts(sf_reference *ref, const sf_summary *const *w, uint32_t n,
                             const sf_schema *schema)
{
    uint32_t S = ref->n_stages, R = ref->n_ranks, steps = 0;
    for (uint32_t j = 0; j < n; j++)
        steps += w[j]->n_steps;
    size_t cells = (size_t)R * S;
    ref->contrast_ns = malloc((cells ? cells : 1) * sizeof *ref->contrast_ns);
    int64_t *by_rank = malloc(((size_t)R * steps + 1) * sizeof *by_rank);
    /* values, 2 x scratch (the cohorts' contrasts need both), contrasts */
    int64_t *v = malloc(((size_t)R + 1) * 4 * sizeof *v);
    int64_t *out = v ? v + 3 * ((size_t)R + 1) : NULL;
    uint32_t *count = calloc(R ? R : 1, sizeof *count);
    uint32_t *cohort_of = malloc(((size_t)R + 1) * sizeof *cohort_of);
    int rc = ref->contrast_ns && by_rank && v && count && cohort_of ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < cells; i++)
        ref->contrast_ns[i] = SF_NULL_NS;
    for (uint32_t k = 0; rc == 0 && k < S; k++) {
        if (!sf_change_own_work_stage(schema, k))
            continue;
        memset(count, 0, (R ? R : 1) * sizeof *count);
        for (uint32_t j = 0; j < n && rc == 0; j++) {
            const sf_dense *d = w[j]->dense;
            if (d->n_ranks < 2)
                continue;
            /* Inside cohorts where the ranks declared them (docs/ACCOUNTING.md,
             * "Cohorts"), as the change computes the window's. */
            enum sf_cohort_state cohorts;
            uint32_t n_cohorts;
            if ((rc = sf__report_cohorts(w[j], cohort_of, &cohorts, &n_cohorts)) < 0)
                break;
            for (uint32_t i = 0; i < w[j]->n_steps; i++) {
                if (!step_complete(w[j], i))
                    continue;
                for (uint32_t x = 0; x < d->n_ranks; x++)
                    v[x] = d->d[((size_t)i * d->n_ranks + x) * S + k];
                if (cohorts == SF_COHORTS_APPLIED)
                    sf__cohort_contrasts(v, 1, d->n_ranks, cohort_of, n_cohorts, v + R + 1, out);
                else
                    sf__contrasts(v, d->n_ranks, v + R + 1, out);
                for (uint32_t x = 0; x < d->n_ranks; x++) {
                    uint32_t *hit = bsearch(&d->ranks[x], ref->ranks, R, sizeof *hit, sf__cmp_u32);
                    size_t ri = (size_t)(hit - ref->ranks);
                    by_rank[ri * steps + count[ri]++] = out[x];
                }
            }
        }
        for (uint32_t ri = 0; ri < R; ri++)
            if (count[ri] > 0)
                ref->contrast_ns[(size_t)ri * S + k] =
                    sf_median_i64(&by_rank[(size_t)ri * steps], count[ri]);
    }
    free(by_rank);
    free(v);
    free(count);
    free(cohort_of);
    return rc;
}

static int collect_ranks(sf_reference *ref, const sf_summary *const *w, uint32_t n)
{
    int rc = union_ranks(ref, w, n);
    if (rc < 0)
        return rc;
    size_t cells = (size_t)ref->n_ranks * ref->n_stages, rows = 0;
    for (uint32_t j = 0; j < n; j++)
        rows += w[j]->n_steps;
    ref->median_ns = malloc((cells ? cells : 1) * sizeof *ref->median_ns);
    ref->lead_steps = malloc((cells ? cells : 1) * sizeof *ref->lead_steps);
    int64_t *scratch = malloc((rows ? rows : 1) * sizeof *scratch);
    if (ref->median_ns == NULL || ref->lead_steps == NULL || scratch == NULL) {
        free(scratch);
        return -ENOMEM;
    }
    for (uint32_t ri = 0; ri < ref->n_ranks; ri++)
        rank_figures(ref, w, n, ri, scratch);
    free(scratch);
    return collect_contrasts(ref, w, n, &w[0]->schema);
}

int sf_reference_build(const sf_summary *const *windows, uint32_t n, sf_reference **ret)
{
    if (windows == NULL || ret == NULL || n == 0 || n > SF_REF_MAX_WINDOWS)
        return -EINVAL;
    bool dense = true;
    for (uint32_t j = 0; j < n; j++) {
        if (windows[j] == NULL || windows[j]->schema.hash != windows[0]->schema.hash ||
            windows[j]->meta.world_size != windows[0]->meta.world_size)
            return -EINVAL;
        dense = dense && windows[j]->dense != NULL;
    }
    sf_reference *ref = calloc(1, sizeof *ref);
    if (ref == NULL)
        return -ENOMEM;
    ref->schema_hash = windows[0]->schema.hash;
    ref->n_stages = windows[0]->schema.n_stages;
    ref->world_size = windows[0]->meta.world_size;
    ref->n_windows = n;
    for (uint32_t j = 0; j < n; j++)
        ref->windows[j] = windows[j]->meta.index;
    ref->segment = windows[n - 1]->meta.segment;
    int rc = collect_advances(ref, windows, n);
    if (rc == 0)
        rc = sf__comm_reference_collect(ref, windows, n);
    if (rc == 0 && dense)
        rc = collect_ranks(ref, windows, n);
    if (rc < 0) {
        sf_reference_free(ref);
        return rc;
    }
    *ret = ref;
    return 0;
}

int sf_reference_check(const sf_reference *ref, const sf_schema *schema, uint32_t world_size,
                       const char **ret_why)
{
    if (ref->schema_hash != schema->hash || ref->n_stages != schema->n_stages) {
        *ret_why = "the baseline has another schema";
        return -EINVAL;
    }
    if (ref->world_size != world_size) {
        *ret_why = "the baseline has another world size";
        return -EINVAL;
    }
    return 0;
}

void sf_reference_collector_clear(sf_reference_collector *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        sf_summary_free(c->pending[i]);
    c->n = 0;
}

int sf_reference_collect(sf_reference_collector *c, const sf_summary *summary,
                         const sf_report *report, sf_reference **ret)
{
    if (c == NULL || summary == NULL || ret == NULL || c->want < 1 || c->want > SF_REF_MAX_WINDOWS)
        return -EINVAL;
    if (!sf_reference_eligible(report))
        return 0;
    if (c->n > 0 && (c->pending[0]->schema.hash != summary->schema.hash ||
                     c->pending[0]->meta.world_size != summary->meta.world_size))
        sf_reference_collector_clear(c); /* the job changed shape: start over */
    int rc = sf_summary_clone(summary, &c->pending[c->n]);
    if (rc < 0)
        return rc;
    if (++c->n < c->want)
        return 0;
    rc = sf_reference_build((const sf_summary *const *)c->pending, c->n, ret);
    sf_reference_collector_clear(c);
    return rc < 0 ? rc : 1;
}

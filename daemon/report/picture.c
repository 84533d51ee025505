/*
 * Picture models (picture.h): the heatmap, the frontier ledger and the window
 * series, computed from the core's summary and report and the window's rows.
 * Owns no drawing and no I/O; every number a picture shows comes from here.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picture.h"

static const char *const metric_names[] = {"leads", "slack", "change"};

const char *sf_heat_metric_name(enum sf_heat_metric m)
{
    return (unsigned)m < 3 ? metric_names[m] : "?";
}

int sf_heat_metric_parse(const char *name, enum sf_heat_metric *ret)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(name, metric_names[i]) == 0) {
            *ret = (enum sf_heat_metric)i;
            return 0;
        }
    return -ENOENT;
}

static void copy_names(char (*dst)[SF_MAX_NAME_LEN + 1], const sf_schema *schema)
{
    for (uint32_t k = 0; k < schema->n_stages; k++)
        snprintf(dst[k], SF_MAX_NAME_LEN + 1, "%s", schema->names[k]);
}

/* ---- ranks and steps ------------------------------------------------------ */

/* The window's rank ids, sorted, from the summary's coverage. */
static uint32_t *rank_ids(const sf_summary *s, uint32_t n)
{
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (ids == NULL)
        return NULL;
    uint32_t at = 0;
    for (uint32_t i = 0; i < s->n_intervals && at < n; i++)
        for (uint64_t r = s->coverage[i].lo; r <= s->coverage[i].hi && at < n; r++)
            ids[at++] = (uint32_t)r;
    return ids;
}

static int64_t find_u32(const uint32_t *a, uint32_t n, uint32_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && a[lo] == key ? (int64_t)lo : -1;
}

/* ---- per-rank cell values ------------------------------------------------- */

static void rank_leads(const sf_report *r, const uint32_t *ids, uint32_t n, double *v)
{
    uint32_t S = r->schema.n_stages;
    for (size_t c = 0; c < (size_t)n * S; c++)
        v[c] = 0;
    for (size_t i = 0; i < (size_t)r->steps * S; i++) {
        uint32_t leader = r->step_leaders[i];
        int64_t at = leader == SF_NO_RANK ? -1 : find_u32(ids, n, leader);
        if (at >= 0)
            v[(size_t)at * S + i % S] += 1;
    }
}

static int rank_slack(const sf_summary *s, const sf_row *rows, size_t n_rows, const uint32_t *ids,
                      uint32_t n, double *v)
{
    uint32_t S = s->schema.n_stages;
    int64_t *sum = calloc((size_t)n * S + 1, sizeof *sum);
    uint32_t *count = calloc((size_t)n + 1, sizeof *count);
    if (sum == NULL || count == NULL) {
        free(sum);
        free(count);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n_rows; i++) {
        int64_t st = sf_summary_step_index(s, rows[i].step), at = find_u32(ids, n, rows[i].rank);
        if (st < 0 || at < 0 || s->steps[st].n_ranks != n)
            continue;
        int64_t prefix = 0;
        for (uint32_t k = 0; k < S; k++) {
            prefix += rows[i].d[k];
            sum[(size_t)at * S + k] += s->steps[st].prefix_top2[k].v1 - prefix;
        }
        count[at]++;
    }
    for (uint32_t a = 0; a < n; a++)
        for (uint32_t k = 0; k < S; k++)
            v[(size_t)a * S + k] = count[a] ? (double)sum[(size_t)a * S + k] / count[a] / 1e9 : NAN;
    free(sum);
    free(count);
    return 0;
}

/* Median of each rank's stage durations over complete steps minus its
 * baseline median, stage by stage. */
static int rank_change(const sf_summary *s, const sf_reference *ref, const sf_row *rows,
                       size_t n_rows, const uint32_t *ids, uint32_t n, double *v)
{
    uint32_t S = s->schema.n_stages;
    size_t *start = calloc((size_t)n + 1, sizeof *start),
           *fill = calloc((size_t)n + 1, sizeof *fill);
    int64_t *vals = malloc((n_rows ? n_rows : 1) * sizeof *vals);
    int64_t *row_at = malloc((n_rows ? n_rows : 1) * sizeof *row_at);
    int rc = -ENOMEM;
    if (start == NULL || fill == NULL || vals == NULL || row_at == NULL)
        goto out;
    for (size_t i = 0; i < n_rows; i++) {
        int64_t st = sf_summary_step_index(s, rows[i].step);
        row_at[i] = st >= 0 && s->steps[st].n_ranks == n ? find_u32(ids, n, rows[i].rank) : -1;
        if (row_at[i] >= 0)
            start[row_at[i] + 1]++;
    }
    for (uint32_t a = 0; a < n; a++)
        start[a + 1] += start[a];
    for (uint32_t k = 0; k < S; k++) {
        memcpy(fill, start, ((size_t)n + 1) * sizeof *fill);
        for (size_t i = 0; i < n_rows; i++)
            if (row_at[i] >= 0)
                vals[fill[row_at[i]]++] = rows[i].d[k];
        for (uint32_t a = 0; a < n; a++) {
            int64_t at = find_u32(ref->ranks, ref->n_ranks, ids[a]);
            int64_t base = at >= 0 ? ref->median_ns[(size_t)at * ref->n_stages + k] : SF_NULL_NS;
            size_t m = start[a + 1] - start[a];
            v[(size_t)a * S + k] = m == 0 || base == SF_NULL_NS
                                       ? NAN
                                       : (double)(sf_median_i64(vals + start[a], m) - base) / 1e9;
        }
    }
    rc = 0;
out:
    free(start);
    free(fill);
    free(vals);
    free(row_at);
    return rc;
}

/* ---- heatmap -------------------------------------------------------------- */

static double fold(enum sf_heat_metric m, double acc, double x)
{
    if (isnan(x))
        return acc;
    if (isnan(acc))
        return x;
    return m == SF_HEAT_LEADS ? acc + x : m == SF_HEAT_SLACK ? fmin(acc, x) : fmax(acc, x);
}

static void bin_rows(sf_heatmap *h, const double *per_rank, const uint32_t *ids)
{
    uint32_t S = h->n_stages;
    for (uint32_t row = 0; row < h->n_rows; row++) {
        uint32_t a0 = row * h->ranks_per_row;
        uint32_t a1 = a0 + h->ranks_per_row < h->n_ranks ? a0 + h->ranks_per_row : h->n_ranks;
        h->row_first[row] = ids[a0];
        h->row_last[row] = ids[a1 - 1];
        for (uint32_t k = 0; k < S; k++) {
            double acc = NAN;
            for (uint32_t a = a0; a < a1; a++)
                acc = fold(h->metric, acc, per_rank[(size_t)a * S + k]);
            h->value[(size_t)row * S + k] = acc;
        }
    }
}

static int64_t row_of(const sf_heatmap *h, const uint32_t *ids, uint32_t rank)
{
    int64_t at = find_u32(ids, h->n_ranks, rank);
    return at < 0 ? -1 : at / h->ranks_per_row;
}

static void mark_rows(sf_heatmap *h, const sf_report *r, const uint32_t *ids)
{
    for (uint32_t i = 0; i < r->n_suspects; i++) {
        int64_t row = row_of(h, ids, r->suspects[i].rank);
        if (row >= 0)
            h->marks[row] |= SF_HEAT_SUSPECT;
    }
    if (r->straggler.present) {
        int64_t row = row_of(h, ids, r->straggler.rank);
        if (row >= 0)
            h->marks[row] |= SF_HEAT_STRAGGLER;
        h->has_straggler = true;
        h->straggler_rank = r->straggler.rank;
        h->straggler_stage = r->straggler.sync_stage;
    }
}

/* Colour intensity: more leads, less slack, more change are hotter. */
static void heat_cells(sf_heatmap *h)
{
    size_t cells = (size_t)h->n_rows * h->n_stages;
    h->lo = INFINITY;
    h->hi = -INFINITY;
    for (size_t c = 0; c < cells; c++)
        if (!isnan(h->value[c])) {
            h->lo = fmin(h->lo, h->value[c]);
            h->hi = fmax(h->hi, h->value[c]);
        }
    if (h->lo > h->hi)
        h->lo = h->hi = 0;
    double span = h->hi - h->lo, best = -1;
    for (size_t c = 0; c < cells; c++) {
        double v = h->value[c], heat = 0;
        if (!isnan(v) && h->metric == SF_HEAT_LEADS)
            heat = h->hi > 0 ? v / h->hi : 0;
        else if (!isnan(v) && span > 0)
            heat = h->metric == SF_HEAT_SLACK ? (h->hi - v) / span : (v - h->lo) / span;
        h->heat[c] = heat;
        if (heat > best) {
            best = heat;
            h->hot_row = (uint32_t)(c / h->n_stages);
            h->hot_stage = (uint32_t)(c % h->n_stages);
        }
    }
}

static int heatmap_alloc(sf_heatmap *h)
{
    size_t cells = (size_t)h->n_rows * h->n_stages;
    h->row_first = malloc(h->n_rows * sizeof *h->row_first);
    h->row_last = malloc(h->n_rows * sizeof *h->row_last);
    h->value = malloc(cells * sizeof *h->value);
    h->heat = malloc(cells * sizeof *h->heat);
    h->marks = calloc(h->n_rows, 1);
    return h->row_first && h->row_last && h->value && h->heat && h->marks ? 0 : -ENOMEM;
}

static int rank_values(const sf_summary *s, const sf_report *r, const sf_reference *ref,
                       const sf_row *rows, size_t n_rows, enum sf_heat_metric metric,
                       const uint32_t *ids, uint32_t n, double *v)
{
    switch (metric) {
    case SF_HEAT_LEADS:
        rank_leads(r, ids, n, v);
        return 0;
    case SF_HEAT_SLACK:
        return rank_slack(s, rows, n_rows, ids, n, v);
    case SF_HEAT_CHANGE:
        return rank_change(s, ref, rows, n_rows, ids, n, v);
    }
    return -EINVAL;
}

int sf_heatmap_build(const sf_summary *summary, const sf_report *report, const sf_reference *ref,
                     const sf_row *rows, size_t n_rows, enum sf_heat_metric metric,
                     uint32_t max_rows, sf_heatmap **ret)
{
    uint32_t n = (uint32_t)sf_summary_covered_ranks(summary);
    if (report->steps == 0 || n == 0)
        return -ENODATA;
    if (metric == SF_HEAT_CHANGE && ref == NULL)
        return -ENOENT;
    if (metric == SF_HEAT_CHANGE && ref->n_ranks == 0)
        return -ENOTSUP;
    sf_heatmap *h = calloc(1, sizeof *h);
    uint32_t *ids = rank_ids(summary, n);
    double *per_rank = malloc((size_t)n * report->schema.n_stages * sizeof *per_rank);
    int rc = -ENOMEM;
    if (h == NULL || ids == NULL || per_rank == NULL)
        goto fail;
    *h = (sf_heatmap){.metric = metric,
                      .window = report->meta.index,
                      .segment = report->meta.segment,
                      .steps = report->steps,
                      .n_stages = report->schema.n_stages,
                      .n_ranks = n,
                      .ranks_per_row = 1};
    copy_names(h->names, &report->schema);
    if (max_rows > 0 && n > max_rows)
        h->ranks_per_row = (n + max_rows - 1) / max_rows;
    h->n_rows = (n + h->ranks_per_row - 1) / h->ranks_per_row;
    if ((rc = heatmap_alloc(h)) < 0 ||
        (rc = rank_values(summary, report, ref, rows, n_rows, metric, ids, n, per_rank)) < 0)
        goto fail;
    bin_rows(h, per_rank, ids);
    mark_rows(h, report, ids);
    heat_cells(h);
    free(ids);
    free(per_rank);
    *ret = h;
    return 0;
fail:
    free(ids);
    free(per_rank);
    sf_heatmap_free(h);
    return rc;
}

void sf_heatmap_free(sf_heatmap *h)
{
    if (h == NULL)
        return;
    free(h->row_first);
    free(h->row_last);
    free(h->value);
    free(h->heat);
    free(h->marks);
    free(h);
}

/* ---- ledger --------------------------------------------------------------- */

int sf_ledger_build(const sf_summary *summary, const sf_report *report, sf_ledger **ret)
{
    uint32_t n = (uint32_t)sf_summary_covered_ranks(summary), S = summary->schema.n_stages;
    if (report->steps == 0)
        return -ENODATA;
    sf_ledger *l = calloc(1, sizeof *l);
    if (l == NULL)
        return -ENOMEM;
    *l = (sf_ledger){.window = report->meta.index, .segment = report->meta.segment, .n_stages = S};
    copy_names(l->names, &summary->schema);
    l->step = malloc(report->steps * sizeof *l->step);
    l->advance = malloc((size_t)report->steps * S * sizeof *l->advance);
    l->leader = malloc((size_t)report->steps * S * sizeof *l->leader);
    if (l->step == NULL || l->advance == NULL || l->leader == NULL) {
        sf_ledger_free(l);
        return -ENOMEM;
    }
    /* Complete steps in summary order, as the report numbers them. */
    for (uint32_t i = 0; i < summary->n_steps && l->n_steps < report->steps; i++) {
        const sf_step_summary *st = &summary->steps[i];
        if (st->n_ranks != n)
            continue;
        size_t j = l->n_steps++;
        l->step[j] = st->step;
        for (uint32_t k = 0; k < S; k++) {
            int64_t before = k == 0 ? 0 : st->prefix_top2[k - 1].v1;
            l->advance[j * S + k] = st->prefix_top2[k].v1 - before;
            l->leader[j * S + k] = report->step_leaders[j * S + k];
        }
        if (st->prefix_top2[S - 1].v1 > l->max_step_ns)
            l->max_step_ns = st->prefix_top2[S - 1].v1;
    }
    *ret = l;
    return 0;
}

void sf_ledger_free(sf_ledger *l)
{
    if (l == NULL)
        return;
    free(l->step);
    free(l->advance);
    free(l->leader);
    free(l);
}

/* ---- pipeline stage x step ---------------------------------------------------- */

int sf_pipeline_picture_build(const sf_summary *summary, const sf_report *report,
                              sf_pipeline_picture **ret)
{
    const sf_pipeline_view *v = &report->pipeline;
    uint32_t n = (uint32_t)sf_summary_covered_ranks(summary), P = v->n_stages;
    if (report->steps == 0)
        return -ENODATA;
    if (!v->present)
        return -ENOENT;
    sf_pipeline_picture *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    *p = (sf_pipeline_picture){.window = report->meta.index,
                               .segment = report->meta.segment,
                               .n_stages = P,
                               .has_origin = v->origin,
                               .origin_pp = v->origin_pp,
                               .origin_rank = v->origin_rank};
    if (v->origin)
        snprintf(p->origin_stage, sizeof p->origin_stage, "%s",
                 report->schema.names[v->origin_stage]);
    p->step = malloc(report->steps * sizeof *p->step);
    p->delay = malloc((size_t)report->steps * P * sizeof *p->delay);
    p->origin = malloc(report->steps * sizeof *p->origin);
    if (p->step == NULL || p->delay == NULL || p->origin == NULL) {
        sf_pipeline_picture_free(p);
        return -ENOMEM;
    }
    /* Complete steps in summary order, as the report numbers them. */
    for (uint32_t i = 0; i < summary->n_steps && p->n_steps < report->steps; i++) {
        if (summary->steps[i].n_ranks != n)
            continue;
        uint32_t j = p->n_steps++;
        p->step[j] = summary->steps[i].step;
        p->origin[j] = v->step_origin[j];
        for (uint32_t q = 0; q < P; q++) {
            int64_t d = v->step_delay[(size_t)j * P + q];
            p->delay[(size_t)j * P + q] = d;
            if (d > p->max_delay_ns) {
                p->max_delay_ns = d;
                p->hot_step = j;
                p->hot_stage = q;
            }
        }
    }
    *ret = p;
    return 0;
}

void sf_pipeline_picture_free(sf_pipeline_picture *p)
{
    if (p == NULL)
        return;
    free(p->step);
    free(p->delay);
    free(p->origin);
    free(p);
}

/* ---- window series -------------------------------------------------------- */

static int union_stage(sf_window_series *w, const char *name)
{
    for (uint32_t k = 0; k < w->n_stages; k++)
        if (strcmp(w->names[k], name) == 0)
            return (int)k;
    if (w->n_stages == SF_MAX_STAGES)
        return -E2BIG;
    snprintf(w->names[w->n_stages], SF_MAX_NAME_LEN + 1, "%s", name);
    return (int)w->n_stages++;
}

int sf_window_series_add(sf_window_series *w, const sf_report *report)
{
    if (w->n_points == w->cap_points) {
        uint32_t cap = w->cap_points ? 2 * w->cap_points : 16;
        sf_window_point *p = realloc(w->points, cap * sizeof *p);
        if (p == NULL)
            return -ENOMEM;
        w->points = p;
        w->cap_points = cap;
    }
    sf_window_point *p = &w->points[w->n_points];
    *p = (sf_window_point){.index = report->meta.index,
                           .segment = report->meta.segment,
                           .steps = report->steps,
                           .labels = report->labels,
                           .slowdown = NAN,
                           .straggler =
                               report->straggler.present ? report->straggler.rank : SF_NO_RANK};
    for (uint32_t k = 0; k < SF_MAX_STAGES; k++)
        p->share[k] = NAN;
    if (report->steps > 0)
        p->mean_step_ns = (int64_t)(report->exposed_total_ns / report->steps);
    for (uint32_t k = 0; k < report->schema.n_stages; k++) {
        int at = union_stage(w, report->schema.names[k]);
        if (at < 0)
            return at;
        if (report->exposed_total_ns > 0)
            p->share[at] = (double)report->stages[k].advance_ns / (double)report->exposed_total_ns;
    }
    if (report->change != NULL) {
        p->changed = report->change->n_route > 0;
        p->slowdown = report->change->slowdown;
    }
    w->n_points++;
    return 0;
}

void sf_window_series_clear(sf_window_series *w)
{
    free(w->points);
    *w = (sf_window_series){0};
}

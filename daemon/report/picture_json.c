/*
 * The --data JSON of the picture models (docs/PICTURES.md): the numbers a
 * picture was drawn from, so a script can check what a reader sees. Times
 * are seconds, or integer ns where a field's name ends in _ns.
 */
#include <errno.h>
#include <math.h>

#include "picture.h"

static json_t *number_or_null(double v)
{
    return isnan(v) || isinf(v) ? json_null() : json_real(v);
}

static json_t *rank_or_null(uint32_t rank)
{
    return rank == SF_NO_RANK ? json_null() : json_integer(rank);
}

static json_t *stage_list(const char (*names)[SF_MAX_NAME_LEN + 1], uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t k = 0; a != NULL && k < n; k++)
        json_array_append_new(a, json_string(names[k]));
    return a;
}

static json_t *heat_row(const sf_heatmap *h, uint32_t row)
{
    json_t *values = json_array();
    for (uint32_t k = 0; values != NULL && k < h->n_stages; k++)
        json_array_append_new(values, number_or_null(h->value[(size_t)row * h->n_stages + k]));
    return json_pack("{s:I, s:I, s:b, s:b, s:o}", "first_rank", (json_int_t)h->row_first[row],
                     "last_rank", (json_int_t)h->row_last[row], "suspect",
                     (h->marks[row] & SF_HEAT_SUSPECT) != 0, "straggler",
                     (h->marks[row] & SF_HEAT_STRAGGLER) != 0, "values", values);
}

int sf_heatmap_to_json(const sf_heatmap *h, json_t **ret)
{
    json_t *rows = json_array();
    for (uint32_t r = 0; rows != NULL && r < h->n_rows; r++)
        json_array_append_new(rows, heat_row(h, r));
    json_t *straggler = h->has_straggler
                            ? json_pack("{s:I, s:s}", "rank", (json_int_t)h->straggler_rank,
                                        "sync_stage", h->names[h->straggler_stage])
                            : json_null();
    json_t *o =
        json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:{s:I, s:I, s:s, s:o}, s:o}",
                  "kind", "heatmap", "metric", sf_heat_metric_name(h->metric), "window",
                  (json_int_t)h->window, "segment", (json_int_t)h->segment, "steps",
                  (json_int_t)h->steps, "ranks", (json_int_t)h->n_ranks, "ranks_per_row",
                  (json_int_t)h->ranks_per_row, "stages", stage_list(h->names, h->n_stages), "rows",
                  rows, "hottest", "first_rank", (json_int_t)h->row_first[h->hot_row], "last_rank",
                  (json_int_t)h->row_last[h->hot_row], "stage", h->names[h->hot_stage], "value",
                  number_or_null(h->value[(size_t)h->hot_row * h->n_stages + h->hot_stage]),
                  "straggler", straggler);
    if (o == NULL)
        return -ENOMEM;
    *ret = o;
    return 0;
}

int sf_ledger_to_json(const sf_ledger *l, json_t **ret)
{
    json_t *steps = json_array();
    for (uint32_t i = 0; steps != NULL && i < l->n_steps; i++) {
        json_t *adv = json_array(), *lead = json_array();
        int64_t total = 0;
        for (uint32_t k = 0; adv != NULL && lead != NULL && k < l->n_stages; k++) {
            total += l->advance[(size_t)i * l->n_stages + k];
            json_array_append_new(adv, json_integer(l->advance[(size_t)i * l->n_stages + k]));
            json_array_append_new(lead, rank_or_null(l->leader[(size_t)i * l->n_stages + k]));
        }
        json_array_append_new(
            steps, json_pack("{s:I, s:I, s:o, s:o}", "step", (json_int_t)l->step[i], "exposed_ns",
                             (json_int_t)total, "advance_ns", adv, "leader", lead));
    }
    json_t *o = json_pack("{s:s, s:I, s:I, s:o, s:o}", "kind", "frontier", "window",
                          (json_int_t)l->window, "segment", (json_int_t)l->segment, "stages",
                          stage_list(l->names, l->n_stages), "steps", steps);
    if (o == NULL)
        return -ENOMEM;
    *ret = o;
    return 0;
}

static json_t *label_list(uint32_t labels)
{
    json_t *a = json_array();
    for (int b = 0; a != NULL && b < SF_LABEL_COUNT; b++)
        if (labels & (1u << b))
            json_array_append_new(a, json_string(sf_label_name((enum sf_label)b)));
    return a;
}

int sf_window_series_to_json(const sf_window_series *w, json_t **ret)
{
    json_t *windows = json_array();
    for (uint32_t i = 0; windows != NULL && i < w->n_points; i++) {
        const sf_window_point *p = &w->points[i];
        json_t *shares = json_array();
        for (uint32_t k = 0; shares != NULL && k < w->n_stages; k++)
            json_array_append_new(shares, number_or_null(p->share[k]));
        json_array_append_new(
            windows,
            json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:b, s:o, s:o}", "window",
                      (json_int_t)p->index, "segment", (json_int_t)p->segment, "steps",
                      (json_int_t)p->steps, "mean_step_ns", (json_int_t)p->mean_step_ns, "shares",
                      shares, "labels", label_list(p->labels), "changed", p->changed, "slowdown",
                      number_or_null(p->slowdown), "straggler", rank_or_null(p->straggler)));
    }
    json_t *o = json_pack("{s:s, s:o, s:o}", "kind", "windows", "stages",
                          stage_list(w->names, w->n_stages), "windows", windows);
    if (o == NULL)
        return -ENOMEM;
    *ret = o;
    return 0;
}

int sf_pipeline_picture_to_json(const sf_pipeline_picture *p, json_t **ret)
{
    json_t *steps = json_array();
    for (uint32_t i = 0; steps != NULL && i < p->n_steps; i++) {
        json_t *delay = json_array();
        for (uint32_t q = 0; delay != NULL && q < p->n_stages; q++)
            json_array_append_new(delay, json_integer(p->delay[(size_t)i * p->n_stages + q]));
        json_array_append_new(steps,
                              json_pack("{s:I, s:o, s:o}", "step", (json_int_t)p->step[i],
                                        "delay_ns", delay, "origin", rank_or_null(p->origin[i])));
    }
    json_t *origin = p->has_origin
                         ? json_pack("{s:I, s:I, s:s}", "pipeline_stage", (json_int_t)p->origin_pp,
                                     "rank", (json_int_t)p->origin_rank, "stage", p->origin_stage)
                         : json_null();
    json_t *hot = p->max_delay_ns > 0
                      ? json_pack("{s:I, s:I, s:I}", "step", (json_int_t)p->step[p->hot_step],
                                  "pipeline_stage", (json_int_t)p->hot_stage, "delay_ns",
                                  (json_int_t)p->max_delay_ns)
                      : json_null();
    json_t *o =
        json_pack("{s:s, s:I, s:I, s:I, s:o, s:o, s:o}", "kind", "pipeline", "window",
                  (json_int_t)p->window, "segment", (json_int_t)p->segment, "pipeline_stages",
                  (json_int_t)p->n_stages, "origin", origin, "hottest", hot, "steps", steps);
    if (o == NULL)
        return -ENOMEM;
    *ret = o;
    return 0;
}

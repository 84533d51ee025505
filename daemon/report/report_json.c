/*
 * Report -> JSON (docs/SPEC.md section 5). Every duration leaves the core in
 * integer ns and becomes seconds here, at the last moment; undefined figures
 * become null. The same function serves sfd's query socket and sfctl replay,
 * so their outputs compare byte for byte.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "change_json.h"
#include "report_json.h"

static json_t *seconds(int64_t ns)
{
    return ns == SF_NULL_NS ? json_null() : json_real((double)ns / 1e9);
}

static json_t *seconds128(__int128 ns)
{
    return json_real((double)ns / 1e9);
}

static json_t *ratio_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static json_t *rank_or_null(uint32_t rank)
{
    return rank == SF_NO_RANK ? json_null() : json_integer(rank);
}

static json_t *unit_json(const sf_unit_figures *u)
{
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
                     "s:o, s:I}",
                     "name", u->name, "group", u->group, "advance_s", seconds(u->advance_ns),
                     "share", ratio_or_null(u->share), "max_s", seconds(u->max_ns), "mean_s",
                     seconds(u->mean_ns), "spread_s", seconds(u->spread_ns), "slowest_rank_s",
                     seconds(u->slowest_rank_ns), "rank0_s", seconds(u->rank0_ns),
                     "gain_rank_median_s", seconds(u->gain_rank_median_ns), "gain_cohort_median_s",
                     seconds(u->gain_cohort_median_ns), "gain", ratio_or_null(u->gain), "lag_s",
                     seconds(u->lag_ns), "delta_lag_s", seconds(u->delta_lag_ns), "leader_rank",
                     rank_or_null(u->leader_rank), "leader_steps", (json_int_t)u->leader_steps);
}

static json_t *units_json(const sf_unit_figures *units, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new(a, unit_json(&units[i]));
    return a;
}

static json_t *group_names(const sf_report *r, const uint32_t *groups, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(r->schema.group_names[groups[i]]));
    return a;
}

static json_t *label_list(uint32_t bits, const char *(*name)(int), int count)
{
    json_t *a = json_array();
    for (int i = 0; i < count; i++)
        if (bits & (1u << i))
            json_array_append_new(a, json_string(name(i)));
    return a;
}

static const char *label_name_of(int i)
{
    return sf_label_name((enum sf_label)i);
}
static const char *downgrade_name_of(int i)
{
    return sf_downgrade_name((enum sf_downgrade)i);
}

static json_t *window_json(const sf_report *r)
{
    json_t *w = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "index", (json_int_t)r->meta.index,
        "segment", (json_int_t)r->meta.segment, "first_step", (json_int_t)r->first_step,
        "last_step", (json_int_t)r->last_step, "steps", (json_int_t)r->steps, "ranks",
        (json_int_t)r->ranks, "world_size", (json_int_t)r->meta.world_size, "missing_ranks",
        (json_int_t)r->missing_ranks, "incomplete_steps", (json_int_t)r->incomplete_steps, "mode",
        r->dense ? "dense" : "mergeable");
    /* Wall clock, seconds since the epoch: absent when the input had none. */
    if (w != NULL && r->meta.opened_at_ms > 0)
        json_object_set_new(w, "opened_at", json_real((double)r->meta.opened_at_ms / 1000.0));
    if (w != NULL && r->meta.closed_at_ms > 0)
        json_object_set_new(w, "closed_at", json_real((double)r->meta.closed_at_ms / 1000.0));
    return w;
}

static json_t *suspects_json(const sf_report *r)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < r->n_suspects; i++)
        json_array_append_new(a, json_pack("{s:I, s:I}", "rank", (json_int_t)r->suspects[i].rank,
                                           "steps", (json_int_t)r->suspects[i].steps));
    return a;
}

/* The verdict object of the contract, or null. */
static json_t *straggler_json(const sf_report *r)
{
    const sf_straggler *v = &r->straggler;
    if (!v->present)
        return json_null();
    bool waits = v->wait_rule;
    json_t *o = json_pack(
        "{s:I, s:s, s:s, s:s, s:I, s:I, s:o, s:s, s:I, s:s}", "rank", (json_int_t)v->rank, "origin",
        v->communication ? "communication"
        : waits          ? "wait"
                         : "arrival",
        "origin_stage", r->schema.names[v->origin_stage], "sync_stage",
        r->schema.names[v->sync_stage], "arrived_last_steps", (json_int_t)v->arrived_last_steps,
        "eligible_steps", (json_int_t)v->eligible_steps, "median_lateness_s",
        seconds(v->median_lateness_ns), "persistence", sf_persistence_name(v->persistence),
        "windows_in_a_row", (json_int_t)v->windows_in_a_row, "group", sf_sync_group_name(v->group));
    if (o != NULL && waits)
        json_object_set_new(
            o, "victim_rank",
            v->victim_rank == SF_NO_RANK ? json_null() : json_integer((json_int_t)v->victim_rank));
    return o;
}

/* What the window's issue marks show (docs/ACCOUNTING.md, "Communication
 * verdict"): whether lateness to communicate can be seen, and who, if any. */
static json_t *communication_json(const sf_report *r)
{
    const sf_comm_verdict *v = &r->comm;
    json_t *verdict = json_null();
    if (v->present)
        verdict = json_pack(
            "{s:I, s:s, s:I, s:I, s:o, s:o}", "rank", (json_int_t)v->rank, "sync_stage",
            r->schema.names[v->sync_stage], "led_steps", (json_int_t)v->led_steps, "eligible_steps",
            (json_int_t)v->eligible_steps, "median_issue_lag_s", seconds(v->median_lag_ns),
            "others_median_issue_lag_s", seconds(v->others_median_ns));
    return json_pack("{s:s, s:I, s:I, s:o}", "visibility", sf_comm_visibility_name(v->visibility),
                     "rows", (json_int_t)v->rows, "marked_rows", (json_int_t)v->marked_rows,
                     "verdict", verdict);
}

/* The pipeline view (docs/ACCOUNTING.md, "Pipeline view"): where a rank
 * first fell behind its cohort, per pipeline stage its bubble and what
 * restoring it saves. */
static json_t *pipeline_json(const sf_report *r)
{
    const sf_pipeline_view *v = &r->pipeline;
    json_t *origin = json_null(), *stages = json_array();
    if (v->origin)
        origin = json_pack(
            "{s:I, s:I, s:s, s:I, s:I, s:o, s:o}", "pipeline_stage", (json_int_t)v->origin_pp,
            "rank", (json_int_t)v->origin_rank, "stage", r->schema.names[v->origin_stage], "steps",
            (json_int_t)v->origin_steps, "of_steps", (json_int_t)r->steps, "median_delay_s",
            seconds(v->median_delay_ns), "median_cost_s", seconds(v->median_cost_ns));
    for (uint32_t p = 0; p < v->n_stages; p++) {
        const sf_pipeline_stage *st = &v->stages[p];
        json_array_append_new(stages, json_pack("{s:I, s:I, s:I, s:o, s:o}", "pipeline_stage",
                                                (json_int_t)p, "ranks", (json_int_t)st->ranks,
                                                "origin_steps", (json_int_t)st->origin_steps,
                                                "bubble_s", seconds(st->bubble_ns),
                                                "restore_saves_s", seconds(st->restore_saved_ns)));
    }
    return json_pack("{s:I, s:o, s:o}", "pipeline_stages", (json_int_t)v->n_stages, "origin",
                     origin, "stages", stages);
}

/* The chain lists the boundaries that had a unique leader, in order. */
static json_t *critical_path_json(const sf_report *r)
{
    const sf_critical_path *p = &r->critical_path;
    if (p->chain == NULL)
        return json_null();
    json_t *chain = json_array();
    for (uint32_t k = 0; k < r->schema.n_stages; k++)
        if (p->chain[k] != SF_NO_RANK)
            json_array_append_new(chain, json_pack("{s:s, s:I}", "stage", r->schema.names[k],
                                                   "rank", (json_int_t)p->chain[k]));
    return json_pack("{s:I, s:I, s:o}", "steps", (json_int_t)p->steps, "of_steps",
                     (json_int_t)r->steps, "chain", chain);
}

static json_t *rank_json(const sf_report *r, const sf_rank_evidence *e)
{
    json_t *leads = json_object(), *gaps = json_object();
    for (uint32_t k = 0; k < r->schema.n_stages; k++) {
        if (e->leader_steps[k] == 0)
            continue;
        json_object_set_new(leads, r->schema.names[k], json_integer(e->leader_steps[k]));
        json_object_set_new(gaps, r->schema.names[k], seconds(e->median_gap_ns[k]));
    }
    return json_pack("{s:I, s:o, s:o, s:o, s:o}", "rank", (json_int_t)e->rank, "role",
                     e->role ? json_string(e->role) : json_null(), "leader_steps", leads,
                     "median_gap_s", gaps, "mean_slack_s", seconds(e->mean_slack_ns));
}

static json_t *ranks_json(const sf_report *r)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < r->n_rank_evidence; i++)
        json_array_append_new(a, rank_json(r, &r->rank_evidence[i]));
    return a;
}

static json_t *exact_json(const sf_report *r)
{
    static const char *const fields[] = {"exposed_total_s",
                                         "advance_s",
                                         "share",
                                         "max_s",
                                         "mean_s",
                                         "spread_s",
                                         "slowest_rank_s",
                                         "rank0_s",
                                         "gain_rank_median_s",
                                         "gain_cohort_median_s",
                                         "gain",
                                         "leader_rank",
                                         "leader_steps",
                                         "routing_set",
                                         "co_critical_stages",
                                         "labels",
                                         "downgrade_reasons",
                                         "suspect_ranks",
                                         "ranks",
                                         "role",
                                         "median_gap_s",
                                         "mean_slack_s",
                                         "straggler",
                                         "critical_path"};
    json_t *o = json_object();
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        json_object_set_new(o, fields[i], json_boolean(sf_report_field_exact(r, fields[i])));
    return o;
}

json_t *sf_gates_to_json(const sf_gates *gates)
{
    json_t *o = json_object();
    enum sf_gate_type type;
    double number;
    const char *text, *key;
    for (size_t i = 0; (key = sf_gates_describe(gates, i, &type, &number, &text)) != NULL; i++) {
        json_t *v = type == SF_GATE_NAME    ? json_string(text)
                    : type == SF_GATE_BOOL  ? json_boolean(number != 0)
                    : type == SF_GATE_COUNT ? json_integer((json_int_t)number)
                                            : json_real(number);
        json_object_set_new(o, key, v);
    }
    return o;
}

static json_t *extras_json(const sf_report *r)
{
    return json_pack(
        "{s:o, s:o, s:o, s:{s:I, s:I, s:o, s:o}, s:{s:I, s:I, s:I, s:I, s:I}, s:o, "
        "s:o, s:o, s:o}",
        "residual_share", ratio_or_null(r->residual_share), "overlap_share",
        ratio_or_null(r->overlap_share), "leader_switch_rate", json_real(r->leader_switch_rate),
        "events", "samples", (json_int_t)r->event_samples, "ready", (json_int_t)r->event_ready,
        "ready_ratio", ratio_or_null(r->event_ready_ratio), "ratio", ratio_or_null(r->event_ratio),
        "counters", "dropped_records", (json_int_t)r->dropped_records, "contract_violations",
        (json_int_t)r->contract_violations, "rejected_records", (json_int_t)r->rejected_records,
        "merge_conflicts", (json_int_t)r->merge_conflicts, "arrival_missing_steps",
        (json_int_t)r->arrival_missing_steps, "routing_order",
        group_names(r, r->routing_order, r->schema.n_groups), "straggler", straggler_json(r),
        "communication", communication_json(r), "critical_path", critical_path_json(r));
}

int sf_report_to_json(const sf_report *r, json_t **ret)
{
    if (r == NULL || ret == NULL)
        return -EINVAL;
    json_t *gates = sf_gates_to_json(&r->gates);
    json_object_set_new(gates, "leader_gap_tol_s", seconds(r->leader_gap_tol_ns));
    json_t *o =
        json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "window",
                  window_json(r), "exposed_total_s", seconds128(r->exposed_total_ns),
                  "telescoping_max_abs_err", seconds(r->telescoping_max_abs_err_ns), "stages",
                  units_json(r->stages, r->schema.n_stages), "groups",
                  units_json(r->groups, r->schema.n_groups), "routing_set",
                  group_names(r, r->routing_order, r->n_routing), "co_critical_stages",
                  group_names(r, r->co_critical, r->n_co_critical), "labels",
                  label_list(r->labels, label_name_of, SF_LABEL_COUNT), "downgrade_reasons",
                  label_list(r->downgrades, downgrade_name_of, SF_DG_COUNT), "suspect_ranks",
                  suspects_json(r), "ranks", ranks_json(r), "exact", exact_json(r), "gates", gates);
    if (o == NULL)
        return -ENOMEM;
    json_t *extras = extras_json(r);
    json_object_update(o, extras);
    if (r->stall.present) /* only then: reports without one read as before */
        json_object_set_new(
            o, "stall",
            json_pack("{s:I, s:s, s:s, s:I, s:o, s:f}", "step", (json_int_t)r->stall.step, "stage",
                      r->schema.names[r->stall.stage], "group", r->groups[r->stall.group].name,
                      "rank", (json_int_t)r->stall.rank, "excess_s", seconds(r->stall.excess_ns),
                      "share", r->stall.share));
    if (r->pipeline.present) /* only then, as the stall */
        json_object_set_new(o, "pipeline", pipeline_json(r));
    json_decref(extras);
    json_object_set_new(o, "change", sf_change_to_json(r));
    json_object_set_new(o, "whatif", sf_whatif_to_json(r));
    *ret = o;
    return 0;
}

char *sf_report_array_dumps(json_t *array)
{
    return json_dumps(array, JSON_INDENT(2) | JSON_PRESERVE_ORDER | SF_JSON_REAL_PRECISION);
}

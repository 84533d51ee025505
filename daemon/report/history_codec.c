/*
 * The report codec of the history store: a versioned little-endian encoding
 * of every sf_report field, so a report read back renders the same bytes.
 * Pure: no I/O, no sfd state. The decoder treats the bytes as hostile (a
 * corrupt or foreign file) and bounds every count by the buffer and schema.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/change.h>

#include "byte_codec.h"
#include "history_codec.h"

#define CODEC_MAGIC_V2 0x32525453u  /* "STR2": STR1 plus arrival points */
#define CODEC_MAGIC_V3 0x33525453u  /* "STR3": STR2, then the change and what-if */
#define CODEC_MAGIC_V4 0x34525453u  /* "STR4": STR3, the change's own-work tests */
#define CODEC_MAGIC_V5 0x35525453u  /* "STR5": STR4, then the window's wall clock */
#define CODEC_MAGIC_V6 0x36525453u  /* "STR6": STR5, then the change's sync floor tests */
#define CODEC_MAGIC_V7 0x37525453u  /* "STR7": STR6, then the windows the change measured */
#define CODEC_MAGIC_V8 0x38525453u  /* "STR8": STR7, then the change's share delays */
#define CODEC_MAGIC_V9 0x39525453u  /* "STR9": STR8, then the stall */
#define CODEC_MAGIC_V10 0x30315453u /* "ST10": STR9, then the communication verdict */
#define CODEC_MAGIC_V11 0x31315453u /* "ST11": ST10, then the change's communication test */
#define CODEC_MAGIC_V12 0x32315453u /* "ST12": ST11, then the cohorts and the pipeline view */
#define CODEC_MAGIC 0x33315453u     /* "ST13": ST12, then the sync groups and the wait rule */

/* ---- encoder --------------------------------------------------------------- */

static void put_schema(struct enc *e, const sf_schema *s)
{
    put_u32(e, s->version);
    put_u32(e, s->n_stages);
    put_u32(e, s->accumulation);
    put_u64(e, s->hash);
    for (uint32_t i = 0; i < s->n_stages; i++) {
        put_str(e, s->names[i]);
        put_str(e, s->groups[i]);
    }
}

static void put_meta(struct enc *e, const sf_window_meta *m)
{
    put_i64(e, m->index);
    put_u32(e, m->segment);
    put_i64(e, m->first_step);
    put_i64(e, m->last_step);
    put_u32(e, m->world_size);
    put_u32(e, m->flags);
    put_u64(e, m->dropped_records);
    put_u64(e, m->contract_violations);
    put_u64(e, m->rejected_records);
}

/* Gates by key, through the core's own table, so a gate added later is
 * carried without a codec change. */
static void put_gates(struct enc *e, const sf_gates *g)
{
    enum sf_gate_type type;
    double number;
    const char *text, *key;
    uint32_t n = 0;
    while (sf_gates_describe(g, n, &type, &number, &text) != NULL)
        n++;
    put_u32(e, n);
    for (size_t i = 0; (key = sf_gates_describe(g, i, &type, &number, &text)) != NULL; i++) {
        char value[64];
        if (type == SF_GATE_NAME)
            snprintf(value, sizeof value, "%s", text);
        else if (type == SF_GATE_BOOL)
            snprintf(value, sizeof value, "%s", number != 0 ? "true" : "false");
        else if (type == SF_GATE_COUNT)
            snprintf(value, sizeof value, "%.0f", number);
        else
            snprintf(value, sizeof value, "%.17g", number);
        put_str(e, key);
        put_str(e, value);
    }
}

static void put_unit(struct enc *e, const sf_unit_figures *u)
{
    const int64_t v[] = {u->advance_ns,
                         u->max_ns,
                         u->mean_ns,
                         u->spread_ns,
                         u->slowest_rank_ns,
                         u->rank0_ns,
                         u->lag_ns,
                         u->delta_lag_ns,
                         u->gain_rank_median_ns,
                         u->gain_cohort_median_ns};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        put_i64(e, v[i]);
    put_f64(e, u->share);
    put_f64(e, u->gain);
    put_u32(e, u->leader_rank);
    put_u32(e, u->leader_steps);
    put_u32(e, u->evidence_stage);
}

static void put_evidence(struct enc *e, const sf_report *r)
{
    uint32_t S = r->schema.n_stages;
    put_u32(e, r->n_rank_evidence);
    for (uint32_t i = 0; i < r->n_rank_evidence; i++) {
        const sf_rank_evidence *ev = &r->rank_evidence[i];
        put_u32(e, ev->rank);
        put_u32(e, ev->role != NULL);
        put_str(e, ev->role);
        put_i64(e, ev->mean_slack_ns);
        for (uint32_t k = 0; k < S; k++) {
            put_u32(e, ev->leader_steps[k]);
            put_i64(e, ev->median_gap_ns[k]);
        }
    }
}

/* Arrival points: the missing-mark count, the verdict, the critical path. */
static void put_arrivals(struct enc *e, const sf_report *r)
{
    const sf_straggler *v = &r->straggler;
    put_u64(e, r->arrival_missing_steps);
    put_u32(e, v->present);
    put_u32(e, v->rank);
    put_u32(e, v->sync_stage);
    put_u32(e, v->origin_stage);
    put_u32(e, v->arrived_last_steps);
    put_u32(e, v->eligible_steps);
    put_i64(e, v->median_lateness_ns);
    put_u32(e, (uint32_t)v->persistence);
    put_u32(e, v->windows_in_a_row);
    put_u32(e, r->critical_path.chain != NULL);
    put_u32(e, r->critical_path.steps);
    for (uint32_t k = 0; r->critical_path.chain && k < r->schema.n_stages; k++)
        put_u32(e, r->critical_path.chain[k]);
}

static void put_body(struct enc *e, const sf_report *r)
{
    put_u32(e, r->dense);
    put_u32(e, r->steps);
    put_u32(e, r->ranks);
    put_u32(e, r->missing_ranks);
    put_u32(e, r->incomplete_steps);
    put_i64(e, r->first_step);
    put_i64(e, r->last_step);
    put_u32(e, r->rank0_present);
    put_u64(e, (uint64_t)(unsigned __int128)r->exposed_total_ns);
    put_u64(e, (uint64_t)((unsigned __int128)r->exposed_total_ns >> 64));
    put_i64(e, r->telescoping_max_abs_err_ns);
    put_i64(e, r->leader_gap_tol_ns);
    put_f64(e, r->residual_share);
    put_f64(e, r->overlap_share);
    put_f64(e, r->leader_switch_rate);
    put_u64(e, r->event_samples);
    put_u64(e, r->event_ready);
    put_f64(e, r->event_ready_ratio);
    put_f64(e, r->event_ratio);
    for (uint32_t k = 0; k < r->schema.n_stages; k++)
        put_unit(e, &r->stages[k]);
    for (uint32_t g = 0; g < r->schema.n_groups; g++)
        put_unit(e, &r->groups[g]);
    for (uint32_t g = 0; g < r->schema.n_groups; g++)
        put_u32(e, r->routing_order[g]);
    put_u32(e, r->n_routing);
    put_u32(e, r->n_co_critical);
    for (uint32_t i = 0; i < r->n_co_critical; i++)
        put_u32(e, r->co_critical[i]);
    size_t cells = (size_t)r->steps * r->schema.n_stages;
    for (size_t i = 0; i < cells; i++)
        put_u32(e, r->step_leaders[i]);
    put_u32(e, r->labels);
    put_u32(e, r->downgrades);
    put_u32(e, r->n_suspects);
    for (uint32_t i = 0; i < r->n_suspects; i++) {
        put_u32(e, r->suspects[i].rank);
        put_u32(e, r->suspects[i].steps);
    }
    put_evidence(e, r);
    put_u64(e, r->dropped_records);
    put_u64(e, r->contract_violations);
    put_u64(e, r->rejected_records);
    put_u64(e, r->merge_conflicts);
    put_arrivals(e, r);
}

static void put_shift(struct enc *e, const sf_shift *s)
{
    put_i64(e, s->delta_ns);
    put_i64(e, s->ci_low_ns);
    put_i64(e, s->ci_high_ns);
    put_f64(e, s->p_value);
}

/* The change against the baseline (docs/CHANGE.md), or a 0 when absent. */
static void put_change(struct enc *e, const sf_change *c)
{
    put_u32(e, c != NULL);
    if (c == NULL)
        return;
    put_u32(e, c->n_stages);
    put_u32(e, c->baseline_n_windows);
    for (uint32_t i = 0; i < c->baseline_n_windows; i++)
        put_i64(e, c->baseline_windows[i]);
    put_u32(e, c->baseline_steps);
    put_u32(e, c->steps);
    put_shift(e, &c->step);
    put_f64(e, c->slowdown);
    put_i64(e, c->min_effect_ns);
    for (uint32_t k = 0; k < c->n_stages; k++) {
        put_shift(e, &c->stages[k].shift);
        put_u32(e, c->stages[k].significant);
        put_f64(e, c->stages[k].share_p_value);
        put_i64(e, c->stages[k].own_delta_ns);
        put_u32(e, c->stages[k].own_rank);
        put_f64(e, c->stages[k].own_p_value);
        put_u32(e, c->stages[k].own_significant);
    }
    put_u32(e, c->n_route);
    for (uint32_t i = 0; i < c->n_route; i++)
        put_u32(e, c->route[i]);
    put_u32(e, c->suspects_dense);
    put_u32(e, c->n_suspects);
    for (uint32_t i = 0; i < c->n_suspects; i++) {
        put_u32(e, c->suspects[i].rank);
        put_i64(e, c->suspects[i].delta_ns);
    }
}

/* The windows the change measured (STR7), after the floors, only with a change. */
static void put_change_measured(struct enc *e, const sf_change *c)
{
    if (c == NULL)
        return;
    put_u32(e, c->n_measured);
    for (uint32_t i = 0; i < c->n_measured; i++)
        put_i64(e, c->measured_windows[i]);
}

/* Each stage's share delay, and its floor's where tested (STR8), after the
 * windows measured, only with a change. */
static void put_change_share_delays(struct enc *e, const sf_change *c)
{
    for (uint32_t k = 0; c != NULL && k < c->n_stages; k++) {
        put_i64(e, c->stages[k].share_delay_ns);
        if (c->stages[k].floor_tested)
            put_i64(e, c->stages[k].floor_share_delay_ns);
    }
}

/* The stall (STR9), last: present, then its fields when it is. */
static void put_stall(struct enc *e, const sf_stall *st)
{
    put_u32(e, st->present);
    if (!st->present)
        return;
    put_i64(e, st->step);
    put_u32(e, st->stage);
    put_u32(e, st->group);
    put_u32(e, st->rank);
    put_i64(e, st->excess_ns);
    put_f64(e, st->share);
}

/* The communication verdict and its gates (ST10), after the stall. */
static void put_comm(struct enc *e, const sf_report *r)
{
    const sf_comm_verdict *c = &r->comm;
    put_f64(e, r->gates.comm_lag_min_s);
    put_f64(e, r->gates.comm_share_min);
    put_u32(e, r->straggler.communication);
    put_u32(e, c->visibility);
    put_i64(e, (int64_t)c->rows);
    put_i64(e, (int64_t)c->marked_rows);
    put_u32(e, c->present);
    put_u32(e, c->rank);
    put_u32(e, c->sync_stage);
    put_u32(e, c->led_steps);
    put_u32(e, c->eligible_steps);
    put_i64(e, c->median_lag_ns);
    put_i64(e, c->others_median_ns);
}

/* The change's communication test (ST11), last, only with a change: every
 * field, tested or not, so that a decoded change is the same bytes. */
static void put_change_comm(struct enc *e, const sf_change *c)
{
    if (c == NULL)
        return;
    const sf_comm_change *cc = &c->comm;
    put_u32(e, cc->tested);
    put_u32(e, cc->sync_stage);
    put_shift(e, &cc->shift);
    put_u32(e, cc->rank);
    put_u32(e, cc->led_steps);
    put_u32(e, cc->eligible_steps);
    put_u32(e, cc->significant);
}

/* The cohorts and the pipeline view (ST12), last: the view's window
 * figures, its stages and its per-step origins and delays. */
static void put_pipeline(struct enc *e, const sf_report *r)
{
    const sf_pipeline_view *v = &r->pipeline;
    put_u32(e, r->cohorts);
    put_u32(e, r->n_cohorts);
    put_u32(e, v->present);
    if (!v->present)
        return;
    put_u32(e, v->n_stages);
    put_u32(e, v->origin);
    put_u32(e, v->origin_pp);
    put_u32(e, v->origin_rank);
    put_u32(e, v->origin_stage);
    put_u32(e, v->origin_steps);
    put_i64(e, v->median_delay_ns);
    put_i64(e, v->median_cost_ns);
    for (uint32_t p = 0; p < v->n_stages; p++) {
        put_u32(e, v->stages[p].ranks);
        put_u32(e, v->stages[p].origin_steps);
        put_i64(e, v->stages[p].bubble_ns);
        put_i64(e, v->stages[p].restore_saved_ns);
    }
    for (uint32_t i = 0; i < r->steps; i++) {
        put_u32(e, v->step_origin[i]);
        for (uint32_t p = 0; p < v->n_stages; p++)
            put_i64(e, v->step_delay[(size_t)i * v->n_stages + p]);
    }
}

/* The synchronizing stages' groups and the verdict's wait rule (ST13),
 * last: each synchronizing stage's group in stage order, then the verdict's
 * group, whether the wait rule named it, and its victim. */
static void put_wait_rule(struct enc *e, const sf_report *r)
{
    for (uint64_t m = r->schema.sync_mask; m; m &= m - 1)
        put_u32(e, r->schema.sync_group[__builtin_ctzll(m)]);
    put_u32(e, (uint32_t)r->straggler.group);
    put_u32(e, r->straggler.wait_rule);
    put_u32(e, r->straggler.victim_rank);
}

/* The sync floor tests (STR6), after the wall clock, only with a change. */
static void put_change_floors(struct enc *e, const sf_change *c)
{
    for (uint32_t k = 0; c != NULL && k < c->n_stages; k++) {
        const sf_stage_change *st = &c->stages[k];
        put_u32(e, st->floor_tested);
        if (!st->floor_tested)
            continue;
        put_shift(e, &st->floor);
        put_f64(e, st->floor_share_p_value);
        put_u32(e, st->floor_significant);
    }
}

static void put_whatif(struct enc *e, const sf_whatif *w)
{
    put_u32(e, w != NULL);
    if (w == NULL)
        return;
    put_u32(e, w->basis);
    put_u32(e, w->lower_bound);
    put_u64(e, (uint64_t)(unsigned __int128)w->exposed_ns);
    put_u64(e, (uint64_t)((unsigned __int128)w->exposed_ns >> 64));
    put_u64(e, (uint64_t)(unsigned __int128)w->ideal_ns);
    put_u64(e, (uint64_t)((unsigned __int128)w->ideal_ns >> 64));
    put_f64(e, w->slowdown);
    put_f64(e, w->waste_rank_s);
    put_u32(e, w->n_ranks);
    for (uint32_t i = 0; i < w->n_ranks; i++) {
        put_u32(e, w->ranks[i].rank);
        put_i64(e, w->ranks[i].saved_ns);
        put_f64(e, w->ranks[i].slowdown);
    }
    put_u32(e, w->n_cells);
    for (uint32_t i = 0; i < w->n_cells; i++) {
        put_u32(e, w->cells[i].rank);
        put_u32(e, w->cells[i].stage);
        put_i64(e, w->cells[i].saved_ns);
    }
}

int sfd_report_pack(const sf_report *report, uint8_t **ret, size_t *ret_len)
{
    struct enc e = {0};
    if (report == NULL || ret == NULL || ret_len == NULL)
        return -EINVAL;
    put_u32(&e, CODEC_MAGIC);
    put_schema(&e, &report->schema);
    put_meta(&e, &report->meta);
    put_gates(&e, &report->gates);
    put_body(&e, report);
    put_change(&e, report->change);
    put_whatif(&e, report->whatif);
    put_i64(&e, report->meta.opened_at_ms);
    put_i64(&e, report->meta.closed_at_ms);
    put_change_floors(&e, report->change);
    put_change_measured(&e, report->change);
    put_change_share_delays(&e, report->change);
    put_stall(&e, &report->stall);
    put_comm(&e, report);
    put_change_comm(&e, report->change);
    put_pipeline(&e, report);
    put_wait_rule(&e, report);
    if (e.oom) {
        free(e.buf);
        return -ENOMEM;
    }
    *ret = e.buf;
    *ret_len = e.len;
    return 0;
}

/* ---- decoder --------------------------------------------------------------- */

static int get_schema(struct dec *d, sf_schema *ret)
{
    char *names[SF_MAX_STAGES] = {0}, *groups[SF_MAX_STAGES] = {0};
    uint32_t version = get_u32(d), n = get_u32(d), acc = get_u32(d);
    uint64_t hash = get_u64(d);
    int r = -EINVAL;
    if (d->bad || n < 1 || n > SF_MAX_STAGES)
        return -EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        names[i] = get_str(d);
        groups[i] = get_str(d);
    }
    if (!d->bad)
        r = sf_schema_init(ret, version, n, (const char *const *)names, (const char *const *)groups,
                           acc);
    for (uint32_t i = 0; i < n; i++) {
        free(names[i]);
        free(groups[i]);
    }
    if (r == 0 && ret->hash != hash) {
        sf_schema_clear(ret);
        r = -EINVAL;
    }
    return r;
}

static void get_meta(struct dec *d, sf_window_meta *m)
{
    m->index = get_i64(d);
    m->segment = get_u32(d);
    m->first_step = get_i64(d);
    m->last_step = get_i64(d);
    m->world_size = get_u32(d);
    m->flags = get_u32(d);
    m->dropped_records = get_u64(d);
    m->contract_violations = get_u64(d);
    m->rejected_records = get_u64(d);
}

static int get_gates(struct dec *d, sf_gates *g)
{
    sf_gates_default(g);
    uint32_t n = get_u32(d);
    if (n > 256)
        return -EINVAL;
    for (uint32_t i = 0; i < n && !d->bad; i++) {
        char *key = get_str(d), *value = get_str(d);
        int r = d->bad ? -EINVAL : sf_gates_set(g, key, value);
        free(key);
        free(value);
        if (r < 0)
            return -EINVAL;
    }
    return d->bad || sf_gates_validate(g) < 0 ? -EINVAL : 0;
}

static void get_unit(struct dec *d, sf_unit_figures *u)
{
    int64_t *v[] = {&u->advance_ns,
                    &u->max_ns,
                    &u->mean_ns,
                    &u->spread_ns,
                    &u->slowest_rank_ns,
                    &u->rank0_ns,
                    &u->lag_ns,
                    &u->delta_lag_ns,
                    &u->gain_rank_median_ns,
                    &u->gain_cohort_median_ns};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        *v[i] = get_i64(d);
    u->share = get_f64(d);
    u->gain = get_f64(d);
    u->leader_rank = get_u32(d);
    u->leader_steps = get_u32(d);
    u->evidence_stage = get_u32(d);
}

/* Units point into the report's own schema, as the core sets them. */
static int get_units(struct dec *d, sf_report *r)
{
    const sf_schema *s = &r->schema;
    for (uint32_t k = 0; k < s->n_stages; k++) {
        get_unit(d, &r->stages[k]);
        r->stages[k].name = s->names[k];
        r->stages[k].group = s->groups[k];
        if (r->stages[k].evidence_stage >= s->n_stages)
            return -EINVAL;
    }
    for (uint32_t g = 0; g < s->n_groups; g++) {
        get_unit(d, &r->groups[g]);
        r->groups[g].name = s->group_names[g];
        r->groups[g].group = s->group_names[g];
        if (r->groups[g].evidence_stage >= s->n_stages)
            return -EINVAL;
    }
    return d->bad ? -EINVAL : 0;
}

static int get_routing(struct dec *d, sf_report *r)
{
    uint32_t G = r->schema.n_groups;
    for (uint32_t g = 0; g < G; g++)
        if ((r->routing_order[g] = get_u32(d)) >= G)
            return -EINVAL;
    r->n_routing = get_u32(d);
    r->n_co_critical = get_u32(d);
    if (r->n_routing > G || r->n_co_critical > 4 || r->n_co_critical > G)
        return -EINVAL;
    for (uint32_t i = 0; i < r->n_co_critical; i++)
        if ((r->co_critical[i] = get_u32(d)) >= G)
            return -EINVAL;
    return d->bad ? -EINVAL : 0;
}

static int get_step_leaders(struct dec *d, sf_report *r)
{
    size_t cells = (size_t)r->steps * r->schema.n_stages;
    if (r->steps > SF_MAX_WINDOW_STEPS || cells > d->left / 4)
        return -EINVAL;
    r->step_leaders = malloc((cells ? cells : 1) * sizeof *r->step_leaders);
    if (r->step_leaders == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < cells; i++)
        r->step_leaders[i] = get_u32(d);
    return d->bad ? -EINVAL : 0;
}

static int get_suspects(struct dec *d, sf_report *r)
{
    uint32_t n = get_u32(d);
    if (d->bad || n > d->left / 8)
        return -EINVAL;
    r->suspects = calloc(n ? n : 1, sizeof *r->suspects);
    if (r->suspects == NULL)
        return -ENOMEM;
    r->n_suspects = n;
    for (uint32_t i = 0; i < n; i++) {
        r->suspects[i].rank = get_u32(d);
        r->suspects[i].steps = get_u32(d);
    }
    return d->bad ? -EINVAL : 0;
}

/* The arrays of every rank share two blocks, as sf_report_free expects. */
static int get_evidence(struct dec *d, sf_report *r)
{
    uint32_t S = r->schema.n_stages, n = get_u32(d);
    /* each entry is at least rank, has_role, role length, slack, S cells */
    size_t min_entry = 4 + 4 + 4 + 8 + (size_t)S * 12;
    if (d->bad || n > SF_MAX_RANKS || n > d->left / min_entry)
        return -EINVAL;
    r->rank_evidence = calloc(n ? n : 1, sizeof *r->rank_evidence);
    uint32_t *counts = calloc((size_t)(n ? n : 1) * S, sizeof *counts);
    int64_t *gaps = calloc((size_t)(n ? n : 1) * S, sizeof *gaps);
    if (r->rank_evidence == NULL || counts == NULL || gaps == NULL) {
        free(counts);
        free(gaps);
        return -ENOMEM;
    }
    r->rank_evidence[0].leader_steps = counts;
    r->rank_evidence[0].median_gap_ns = gaps;
    r->n_rank_evidence = n;
    for (uint32_t i = 0; i < n && !d->bad; i++) {
        sf_rank_evidence *ev = &r->rank_evidence[i];
        ev->leader_steps = counts + (size_t)i * S;
        ev->median_gap_ns = gaps + (size_t)i * S;
        ev->rank = get_u32(d);
        bool has_role = get_bool(d);
        char *role = get_str(d);
        if (has_role)
            ev->role = role;
        else
            free(role);
        ev->mean_slack_ns = get_i64(d);
        for (uint32_t k = 0; k < S; k++) {
            ev->leader_steps[k] = get_u32(d);
            ev->median_gap_ns[k] = get_i64(d);
        }
    }
    return d->bad ? -EINVAL : 0;
}

static int get_head(struct dec *d, sf_report *r)
{
    r->dense = get_bool(d);
    r->steps = get_u32(d);
    r->ranks = get_u32(d);
    r->missing_ranks = get_u32(d);
    r->incomplete_steps = get_u32(d);
    r->first_step = get_i64(d);
    r->last_step = get_i64(d);
    r->rank0_present = get_bool(d);
    uint64_t lo = get_u64(d), hi = get_u64(d);
    r->exposed_total_ns = (__int128)((unsigned __int128)hi << 64 | lo);
    r->telescoping_max_abs_err_ns = get_i64(d);
    r->leader_gap_tol_ns = get_i64(d);
    r->residual_share = get_f64(d);
    r->overlap_share = get_f64(d);
    r->leader_switch_rate = get_f64(d);
    r->event_samples = get_u64(d);
    r->event_ready = get_u64(d);
    r->event_ready_ratio = get_f64(d);
    r->event_ratio = get_f64(d);
    return d->bad ? -EINVAL : 0;
}

static bool rank_ok(uint32_t rank)
{
    return rank < SF_MAX_RANKS || rank == SF_NO_RANK;
}

static int get_arrivals(struct dec *d, sf_report *r)
{
    uint32_t S = r->schema.n_stages;
    sf_straggler *v = &r->straggler;
    r->arrival_missing_steps = get_u64(d);
    v->present = get_bool(d);
    v->rank = get_u32(d);
    v->sync_stage = get_u32(d);
    v->origin_stage = get_u32(d);
    v->arrived_last_steps = get_u32(d);
    v->eligible_steps = get_u32(d);
    v->median_lateness_ns = get_i64(d);
    uint32_t persistence = get_u32(d);
    v->windows_in_a_row = get_u32(d);
    if (d->bad || !rank_ok(v->rank) || v->sync_stage >= S || v->origin_stage >= S ||
        v->arrived_last_steps > v->eligible_steps || v->eligible_steps > r->steps ||
        persistence > SF_PERSIST_ROTATING)
        return -EINVAL;
    v->persistence = (enum sf_persistence)persistence;
    bool has_chain = get_bool(d);
    r->critical_path.steps = get_u32(d);
    if (d->bad || r->critical_path.steps > r->steps || (has_chain && d->left < (size_t)S * 4))
        return -EINVAL;
    if (!has_chain)
        return 0;
    r->critical_path.chain = malloc(S * sizeof *r->critical_path.chain);
    if (r->critical_path.chain == NULL)
        return -ENOMEM;
    for (uint32_t k = 0; k < S; k++)
        if (!rank_ok(r->critical_path.chain[k] = get_u32(d)))
            return -EINVAL;
    return d->bad ? -EINVAL : 0;
}

static int get_body(struct dec *d, sf_report *r)
{
    int rc = get_head(d, r);
    if (rc == 0)
        rc = get_units(d, r);
    if (rc == 0)
        rc = get_routing(d, r);
    if (rc == 0)
        rc = get_step_leaders(d, r);
    if (rc < 0)
        return rc;
    r->labels = get_u32(d);
    r->downgrades = get_u32(d);
    if (r->labels >> SF_LABEL_COUNT || r->downgrades >> SF_DG_COUNT)
        return -EINVAL;
    rc = get_suspects(d, r);
    if (rc == 0)
        rc = get_evidence(d, r);
    if (rc < 0)
        return rc;
    r->dropped_records = get_u64(d);
    r->contract_violations = get_u64(d);
    r->rejected_records = get_u64(d);
    r->merge_conflicts = get_u64(d);
    rc = d->bad ? -EINVAL : get_arrivals(d, r);
    if (rc < 0)
        return rc;
    return d->bad ? -EINVAL : 0;
}

static void get_shift(struct dec *d, sf_shift *s)
{
    s->delta_ns = get_i64(d);
    s->ci_low_ns = get_i64(d);
    s->ci_high_ns = get_i64(d);
    s->p_value = get_f64(d);
}

static int get_change_stages(struct dec *d, sf_change *c, bool own_work)
{
    for (uint32_t k = 0; k < c->n_stages; k++) {
        sf_stage_change *st = &c->stages[k];
        get_shift(d, &st->shift);
        st->significant = get_bool(d);
        st->share_p_value = own_work ? get_f64(d) : NAN;
        st->own_delta_ns = own_work ? get_i64(d) : SF_NULL_NS;
        st->own_rank = own_work ? get_u32(d) : 0;
        st->own_p_value = own_work ? get_f64(d) : 1;
        st->own_significant = own_work && get_bool(d);
        st->floor_share_p_value = NAN;   /* untested until STR6's floors say otherwise */
        st->share_delay_ns = SF_NULL_NS; /* unknown until STR8's delays say otherwise */
        st->floor_share_delay_ns = SF_NULL_NS;
    }
    c->n_route = get_u32(d);
    if (d->bad || c->n_route > c->n_stages)
        return -EINVAL;
    for (uint32_t i = 0; i < c->n_route; i++)
        if ((c->route[i] = get_u32(d)) >= c->n_stages)
            return -EINVAL;
    c->suspects_dense = get_bool(d);
    c->n_suspects = get_u32(d);
    if (d->bad || c->n_suspects > SF_CHANGE_MAX_SUSPECTS)
        return -EINVAL;
    for (uint32_t i = 0; i < c->n_suspects; i++) {
        c->suspects[i].rank = get_u32(d);
        c->suspects[i].delta_ns = get_i64(d);
    }
    return d->bad ? -EINVAL : 0;
}

static int get_change_floors(struct dec *d, sf_change *c)
{
    for (uint32_t k = 0; c != NULL && k < c->n_stages; k++) {
        sf_stage_change *st = &c->stages[k];
        st->floor_tested = get_bool(d);
        if (!st->floor_tested)
            continue;
        get_shift(d, &st->floor);
        st->floor_share_p_value = get_f64(d);
        st->floor_significant = get_bool(d);
    }
    return d->bad ? -EINVAL : 0;
}

static int get_change(struct dec *d, sf_report *r, bool own_work)
{
    if (!get_bool(d))
        return d->bad ? -EINVAL : 0;
    sf_change *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    r->change = c; /* freed with the report on failure */
    c->n_stages = get_u32(d);
    c->baseline_n_windows = get_u32(d);
    if (d->bad || c->n_stages != r->schema.n_stages || c->baseline_n_windows < 1 ||
        c->baseline_n_windows > SF_REF_MAX_WINDOWS)
        return -EINVAL;
    for (uint32_t i = 0; i < c->baseline_n_windows; i++)
        c->baseline_windows[i] = get_i64(d);
    c->baseline_steps = get_u32(d);
    c->steps = get_u32(d);
    get_shift(d, &c->step);
    c->slowdown = get_f64(d);
    c->min_effect_ns = get_i64(d);
    return d->bad ? -EINVAL : get_change_stages(d, c, own_work);
}

static int get_whatif(struct dec *d, sf_report *r)
{
    if (!get_bool(d))
        return d->bad ? -EINVAL : 0;
    sf_whatif *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return -ENOMEM;
    r->whatif = w;
    uint32_t basis = get_u32(d);
    if (basis > SF_WHATIF_COHORT)
        return -EINVAL;
    w->basis = (enum sf_whatif_basis)basis;
    w->lower_bound = get_bool(d);
    uint64_t lo = get_u64(d), hi = get_u64(d);
    w->exposed_ns = (__int128)((unsigned __int128)hi << 64 | lo);
    lo = get_u64(d);
    hi = get_u64(d);
    w->ideal_ns = (__int128)((unsigned __int128)hi << 64 | lo);
    w->slowdown = get_f64(d);
    w->waste_rank_s = get_f64(d);
    w->n_ranks = get_u32(d);
    if (d->bad || w->n_ranks > SF_WHATIF_MAX_RANKS)
        return -EINVAL;
    for (uint32_t i = 0; i < w->n_ranks; i++) {
        w->ranks[i].rank = get_u32(d);
        w->ranks[i].saved_ns = get_i64(d);
        w->ranks[i].slowdown = get_f64(d);
    }
    w->n_cells = get_u32(d);
    if (d->bad || w->n_cells > SF_WHATIF_MAX_CELLS)
        return -EINVAL;
    for (uint32_t i = 0; i < w->n_cells; i++) {
        w->cells[i].rank = get_u32(d);
        if ((w->cells[i].stage = get_u32(d)) >= r->schema.n_stages)
            return -EINVAL;
        w->cells[i].saved_ns = get_i64(d);
    }
    return d->bad ? -EINVAL : 0;
}

/* The windows the change measured; before STR7, the window alone. */
static int get_change_measured(struct dec *d, sf_report *r, bool stored)
{
    sf_change *c = r->change;
    if (!stored) {
        c->n_measured = 1;
        c->measured_windows[0] = r->meta.index;
        return 0;
    }
    c->n_measured = get_u32(d);
    if (d->bad || c->n_measured < 1 || c->n_measured > SF_POOL_MAX_WINDOWS)
        return -EINVAL;
    for (uint32_t i = 0; i < c->n_measured; i++)
        c->measured_windows[i] = get_i64(d);
    return d->bad ? -EINVAL : 0;
}

/* The share delays (STR8); before it they stay unknown. */
static int get_change_share_delays(struct dec *d, sf_change *c)
{
    for (uint32_t k = 0; k < c->n_stages; k++) {
        c->stages[k].share_delay_ns = get_i64(d);
        if (c->stages[k].floor_tested)
            c->stages[k].floor_share_delay_ns = get_i64(d);
    }
    return d->bad ? -EINVAL : 0;
}

/* The communication verdict (ST10); before it a report says nothing of
 * communication. A verdict must name the report's own rank and a
 * synchronizing stage. */
static int get_comm(struct dec *d, sf_report *r)
{
    sf_comm_verdict *c = &r->comm;
    /* Through the core's own check, as the gates are written back (put_gates):
     * what is read here must read back the same. */
    double lag_min = get_f64(d), share_min = get_f64(d);
    char text[64];
    snprintf(text, sizeof text, "%.17g", lag_min);
    if (d->bad || sf_gates_set(&r->gates, "comm_lag_min_s", text) < 0)
        return -EINVAL;
    snprintf(text, sizeof text, "%.17g", share_min);
    if (sf_gates_set(&r->gates, "comm_share_min", text) < 0)
        return -EINVAL;
    uint32_t communication = get_u32(d), visibility = get_u32(d);
    int64_t rows = get_i64(d), marked = get_i64(d);
    uint32_t present = get_u32(d);
    c->rank = get_u32(d);
    c->sync_stage = get_u32(d);
    c->led_steps = get_u32(d);
    c->eligible_steps = get_u32(d);
    c->median_lag_ns = get_i64(d);
    c->others_median_ns = get_i64(d);
    if (d->bad || communication > 1 || present > 1 || visibility > SF_COMM_NO_ISSUE_MARKS ||
        rows < 0 || marked < 0 || marked > rows || c->led_steps > c->eligible_steps ||
        !(r->gates.comm_lag_min_s >= 0) || !(r->gates.comm_share_min >= 0) ||
        (present && (c->rank >= r->meta.world_size || c->sync_stage >= r->schema.n_stages)) ||
        (communication && !present))
        return -EINVAL;
    r->straggler.communication = communication;
    c->visibility = (enum sf_comm_visibility)visibility;
    c->rows = (uint64_t)rows;
    c->marked_rows = (uint64_t)marked;
    c->present = present;
    return 0;
}

/* The change's communication test (ST11); before it a change has none
 * (untested, no rank). A tested one names the report's own stage and rank. */
static int get_change_comm(struct dec *d, sf_report *r)
{
    sf_comm_change *cc = &r->change->comm;
    uint32_t tested = get_u32(d);
    cc->sync_stage = get_u32(d);
    get_shift(d, &cc->shift);
    cc->rank = get_u32(d);
    cc->led_steps = get_u32(d);
    cc->eligible_steps = get_u32(d);
    uint32_t significant = get_u32(d);
    if (d->bad || tested > 1 || significant > 1 || (significant && !tested) ||
        cc->led_steps > cc->eligible_steps ||
        (tested && (cc->sync_stage >= r->schema.n_stages ||
                    (cc->rank >= r->meta.world_size && cc->rank != SF_NO_RANK))))
        return -EINVAL;
    cc->tested = tested;
    cc->significant = significant;
    return 0;
}

/* The stall (STR9); before it there is none. Its stage, group and rank
 * must be the report's own. */
static int get_stall(struct dec *d, sf_report *r)
{
    sf_stall *st = &r->stall;
    uint32_t present = get_u32(d);
    if (d->bad || present > 1)
        return -EINVAL;
    if (!present)
        return 0;
    st->step = get_i64(d);
    st->stage = get_u32(d);
    st->group = get_u32(d);
    st->rank = get_u32(d);
    st->excess_ns = get_i64(d);
    st->share = get_f64(d);
    if (d->bad || st->stage >= r->schema.n_stages || st->group >= r->schema.n_groups ||
        st->rank >= r->meta.world_size || st->excess_ns <= 0 || !(st->share > 0 && st->share <= 1))
        return -EINVAL;
    st->present = true;
    return 0;
}

/* The cohorts and the pipeline view (ST12); before it a report says none
 * and has no view. Bounded by the report's own stages, steps and world;
 * the view's rank counts by the world, its step origins by its stages. */
static int get_pipeline(struct dec *d, sf_report *r)
{
    sf_pipeline_view *v = &r->pipeline;
    uint32_t cohorts = get_u32(d), n_cohorts = get_u32(d), present = get_u32(d);
    if (d->bad || cohorts > SF_COHORTS_INCONSISTENT || n_cohorts > r->meta.world_size ||
        (cohorts != SF_COHORTS_APPLIED && n_cohorts != 0) || present > 1 ||
        (present && cohorts != SF_COHORTS_APPLIED))
        return -EINVAL;
    r->cohorts = (enum sf_cohort_state)cohorts;
    r->n_cohorts = n_cohorts;
    if (!present)
        return 0;
    uint32_t P = get_u32(d), origin = get_u32(d);
    if (d->bad || P < 2 || P > SF_PIPELINE_MAX_STAGES || P > r->meta.world_size || origin > 1)
        return -EINVAL;
    v->origin_pp = get_u32(d);
    v->origin_rank = get_u32(d);
    v->origin_stage = get_u32(d);
    v->origin_steps = get_u32(d);
    v->median_delay_ns = get_i64(d);
    v->median_cost_ns = get_i64(d);
    if (d->bad || (origin && (v->origin_pp >= P || v->origin_rank >= r->meta.world_size ||
                              v->origin_stage >= r->schema.n_stages || v->origin_steps == 0 ||
                              v->origin_steps > r->steps)))
        return -EINVAL;
    /* the figures a view holds come after: each needs bytes, so the buffer bounds them */
    if ((uint64_t)P * 24 + (uint64_t)r->steps * (4 + 8 * (uint64_t)P) > d->left)
        return -EINVAL;
    v->stages = calloc(P, sizeof *v->stages);
    v->step_origin = malloc(((size_t)r->steps + 1) * sizeof *v->step_origin);
    v->step_delay = malloc(((size_t)r->steps * P + 1) * sizeof *v->step_delay);
    v->n_stages = P;
    v->present = true;
    v->origin = origin;
    if (v->stages == NULL || v->step_origin == NULL || v->step_delay == NULL)
        return -ENOMEM;
    for (uint32_t p = 0; p < P; p++) {
        sf_pipeline_stage *st = &v->stages[p];
        st->ranks = get_u32(d);
        st->origin_steps = get_u32(d);
        st->bubble_ns = get_i64(d);
        st->restore_saved_ns = get_i64(d);
        if (d->bad || st->ranks > r->meta.world_size || st->origin_steps > r->steps)
            return -EINVAL;
    }
    for (uint32_t i = 0; i < r->steps; i++) {
        v->step_origin[i] = get_u32(d);
        if (d->bad || (v->step_origin[i] >= P && v->step_origin[i] != SF_NO_RANK))
            return -EINVAL;
        for (uint32_t p = 0; p < P; p++)
            v->step_delay[(size_t)i * P + p] = get_i64(d);
    }
    return d->bad ? -EINVAL : 0;
}

/* The sync groups and the wait rule (ST13); before it every stage spans
 * the world and no verdict came from the wait rule. A group is one of
 * enum sf_sync_group; the wait rule names a tp or pp verdict only, its
 * victim a rank of the world or SF_NO_RANK; outside it the victim is a rank
 * as any other (the core leaves 0). */
static int get_wait_rule(struct dec *d, sf_report *r)
{
    uint8_t groups[SF_MAX_STAGES];
    uint32_t J = (uint32_t)__builtin_popcountll(r->schema.sync_mask);
    for (uint32_t j = 0; j < J; j++) {
        uint32_t g = get_u32(d);
        if (d->bad || g > SF_SYNC_GROUP_MAX)
            return -EINVAL;
        groups[j] = (uint8_t)g;
    }
    sf_straggler *v = &r->straggler;
    uint32_t group = get_u32(d), wait_rule = get_u32(d), victim = get_u32(d);
    if (d->bad || group > SF_SYNC_GROUP_MAX || wait_rule > 1 ||
        (wait_rule && (!v->present || (group != SF_SYNC_TP && group != SF_SYNC_PP))) ||
        !rank_ok(victim) || (wait_rule && victim != SF_NO_RANK && victim >= r->meta.world_size) ||
        sf_schema_set_sync_groups(&r->schema, groups, J) < 0)
        return -EINVAL;
    v->group = (enum sf_sync_group)group;
    v->wait_rule = wait_rule;
    v->victim_rank = victim;
    return 0;
}

/* The codec version of a magic: 2 to 13, or 0 for none of ours. */
static unsigned codec_version(uint32_t magic)
{
    static const uint32_t magics[] = {CODEC_MAGIC_V2,  CODEC_MAGIC_V3,  CODEC_MAGIC_V4,
                                      CODEC_MAGIC_V5,  CODEC_MAGIC_V6,  CODEC_MAGIC_V7,
                                      CODEC_MAGIC_V8,  CODEC_MAGIC_V9,  CODEC_MAGIC_V10,
                                      CODEC_MAGIC_V11, CODEC_MAGIC_V12, CODEC_MAGIC};
    for (unsigned i = 0; i < sizeof magics / sizeof magics[0]; i++)
        if (magic == magics[i])
            return i + 2;
    return 0;
}

int sfd_report_unpack(const uint8_t *buf, size_t len, sf_report **ret)
{
    struct dec d = {buf, len, false};
    if (buf == NULL || ret == NULL)
        return -EINVAL;
    unsigned version = codec_version(get_u32(&d));
    if (version == 0 || d.bad)
        return -EINVAL;
    sf_report *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    int rc = get_schema(&d, &r->schema);
    if (rc < 0) {
        free(r);
        return rc;
    }
    get_meta(&d, &r->meta);
    rc = d.bad ? -EINVAL : get_gates(&d, &r->gates);
    if (rc == 0)
        rc = get_body(&d, r);
    if (rc == 0 && version >= 3)
        rc = get_change(&d, r, version >= 4);
    if (rc == 0 && version >= 3)
        rc = get_whatif(&d, r);
    if (rc == 0 && version >= 5) {
        r->meta.opened_at_ms = get_i64(&d);
        r->meta.closed_at_ms = get_i64(&d);
        if (d.bad || r->meta.opened_at_ms < 0 || r->meta.closed_at_ms < 0)
            rc = -EINVAL;
    }
    if (rc == 0 && version >= 6)
        rc = get_change_floors(&d, r->change);
    if (rc == 0 && r->change != NULL)
        rc = get_change_measured(&d, r, version >= 7);
    if (rc == 0 && r->change != NULL && version >= 8)
        rc = get_change_share_delays(&d, r->change);
    if (rc == 0 && version >= 9)
        rc = get_stall(&d, r);
    if (rc == 0 && version >= 10)
        rc = get_comm(&d, r);
    if (rc == 0 && r->change != NULL && version >= 11)
        rc = get_change_comm(&d, r);
    else if (rc == 0 && r->change != NULL)
        r->change->comm.rank = SF_NO_RANK; /* untested, as the core leaves it */
    if (rc == 0 && version >= 12)
        rc = get_pipeline(&d, r);
    if (rc == 0 && version >= 13)
        rc = get_wait_rule(&d, r);
    if (rc == 0 && d.left != 0)
        rc = -EINVAL;
    if (rc < 0) {
        sf_report_free(r);
        return rc;
    }
    *ret = r;
    return 0;
}

/*
 * The change and what-if parts of a window report (docs/CHANGE.md): their
 * JSON objects and the human change line that leads the text view. Formats
 * what the core attached to the report; computes nothing itself.
 */
#include <math.h>
#include <stdio.h>

#include <stagefrontier/change.h>

#include "change_json.h"

static json_t *seconds(int64_t ns)
{
    return ns == SF_NULL_NS ? json_null() : json_real((double)ns / 1e9);
}

static json_t *real_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static json_t *windows_json(const int64_t *windows, uint32_t n, uint32_t steps)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(windows[i]));
    return json_pack("{s:o, s:I}", "windows", a, "steps", (json_int_t)steps);
}

/* The own-work test of a stage (docs/CHANGE.md), null where not tested. */
static json_t *own_work_json(const sf_stage_change *s)
{
    if (s->own_delta_ns == SF_NULL_NS)
        return json_null();
    return json_pack("{s:I, s:o, s:f, s:b}", "rank", (json_int_t)s->own_rank, "delta_s",
                     seconds(s->own_delta_ns), "p_value", s->own_p_value, "significant",
                     s->own_significant);
}

/* The sync floor test of a ".sync_wait" stage (docs/CHANGE.md), null where
 * not tested. */
static json_t *sync_floor_json(const sf_stage_change *s)
{
    if (!s->floor_tested)
        return json_null();
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:b}", "delta_s", seconds(s->floor.delta_ns),
                     "ci_low_s", seconds(s->floor.ci_low_ns), "ci_high_s",
                     seconds(s->floor.ci_high_ns), "share_p_value",
                     real_or_null(s->floor_share_p_value), "share_delay_s",
                     seconds(s->floor_share_delay_ns), "significant", s->floor_significant);
}

static json_t *stages_json(const sf_report *r, const sf_change *c)
{
    json_t *a = json_array();
    for (uint32_t k = 0; k < c->n_stages; k++) {
        const sf_stage_change *s = &c->stages[k];
        json_t *o =
            json_pack("{s:s, s:o, s:o, s:o, s:f, s:o, s:o, s:b}", "name", r->schema.names[k],
                      "delta_advance_s", seconds(s->shift.delta_ns), "ci_low_s",
                      seconds(s->shift.ci_low_ns), "ci_high_s", seconds(s->shift.ci_high_ns),
                      "p_value", s->shift.p_value, "share_p_value", real_or_null(s->share_p_value),
                      "share_delay_s", seconds(s->share_delay_ns), "significant", s->significant);
        json_object_set_new(o, "sync_floor", sync_floor_json(s));
        json_object_set_new(o, "own_work", own_work_json(s));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *route_json(const sf_report *r, const sf_change *c)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < c->n_route; i++)
        json_array_append_new(a, json_string(r->schema.names[c->route[i]]));
    return a;
}

static json_t *suspects_json(const sf_change *c)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < c->n_suspects; i++)
        json_array_append_new(a, json_pack("{s:I, s:o}", "rank", (json_int_t)c->suspects[i].rank,
                                           "delta_s", seconds(c->suspects[i].delta_ns)));
    return a;
}

/* The communication test (docs/CHANGE.md, "Communication"), null where not
 * tested. */
static json_t *comm_change_json(const sf_report *r, const sf_change *c)
{
    const sf_comm_change *m = &c->comm;
    if (!m->tested)
        return json_null();
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:b, s:I, s:I, s:I}", "sync_stage",
                     r->schema.names[m->sync_stage], "delta_s", seconds(m->shift.delta_ns),
                     "ci_low_s", seconds(m->shift.ci_low_ns), "ci_high_s",
                     seconds(m->shift.ci_high_ns), "p_value", real_or_null(m->shift.p_value),
                     "significant", m->significant, "rank", (json_int_t)m->rank, "led_steps",
                     (json_int_t)m->led_steps, "eligible_steps", (json_int_t)m->eligible_steps);
}

json_t *sf_change_to_json(const sf_report *r)
{
    const sf_change *c = r->change;
    if (c == NULL)
        return json_null();
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:o}", "baseline",
                     windows_json(c->baseline_windows, c->baseline_n_windows, c->baseline_steps),
                     "measured", windows_json(c->measured_windows, c->n_measured, c->steps),
                     "step_delta_s", seconds(c->step.delta_ns), "step_ci_low_s",
                     seconds(c->step.ci_low_ns), "step_ci_high_s", seconds(c->step.ci_high_ns),
                     "slowdown", real_or_null(c->slowdown), "min_effect_s",
                     seconds(c->min_effect_ns), "stages", stages_json(r, c), "route",
                     route_json(r, c), "suspect_ranks", suspects_json(c), "suspect_basis",
                     c->suspects_dense ? "rank_change" : "top2_leaders", "communication",
                     comm_change_json(r, c));
}

json_t *sf_whatif_to_json(const sf_report *r)
{
    const sf_whatif *w = r->whatif;
    if (w == NULL)
        return json_null();
    json_t *ranks = json_array(), *cells = json_array();
    for (uint32_t i = 0; i < w->n_ranks; i++)
        json_array_append_new(ranks,
                              json_pack("{s:I, s:o, s:o}", "rank", (json_int_t)w->ranks[i].rank,
                                        "whatif_saved_s", seconds(w->ranks[i].saved_ns), "slowdown",
                                        real_or_null(w->ranks[i].slowdown)));
    for (uint32_t i = 0; i < w->n_cells; i++)
        json_array_append_new(cells,
                              json_pack("{s:I, s:s, s:o}", "rank", (json_int_t)w->cells[i].rank,
                                        "stage", r->schema.names[w->cells[i].stage],
                                        "whatif_saved_s", seconds(w->cells[i].saved_ns)));
    return json_pack("{s:s, s:b, s:s, s:o, s:f, s:o, s:o, s:o}", "model",
                     w->lower_bound ? "clipped" : "sync", "lower_bound", w->lower_bound, "basis",
                     w->basis == SF_WHATIF_REFERENCE ? "reference" : "cohort_median", "slowdown",
                     real_or_null(w->slowdown), "ideal_s", (double)w->ideal_ns / 1e9,
                     "waste_rank_s", real_or_null(w->waste_rank_s), "ranks", ranks, "stages",
                     cells);
}

static void write_windows(const int64_t *windows, uint32_t n, FILE *out)
{
    bool run = n > 1;
    for (uint32_t i = 1; i < n; i++)
        run = run && windows[i] == windows[i - 1] + 1;
    if (run) {
        fprintf(out, "windows %lld-%lld", (long long)windows[0], (long long)windows[n - 1]);
        return;
    }
    fprintf(out, "window%s", n > 1 ? "s" : "");
    for (uint32_t i = 0; i < n; i++)
        fprintf(out, "%s%lld", i ? ", " : " ", (long long)windows[i]);
}

/* A stage routed by its frontier: the shift and interval that routed it,
 * naming the sync floor when that was it. */
static void write_frontier_shift(const char *name, const sf_stage_change *s, FILE *out)
{
    const sf_shift *f = sf_change_frontier_shift(s);
    fprintf(out, ": %+.1f ms first appears in %s%s (%.1f-%.1f ms)", f->delta_ns / 1e6, name,
            f == &s->floor ? ", the last arrival's wait" : "", f->ci_low_ns / 1e6,
            f->ci_high_ns / 1e6);
}

/* The step's change and the stages it first appears in: one line. */
static void write_step_change(const sf_report *r, const sf_change *c, FILE *out)
{
    double pct = isnan(c->slowdown) ? 0 : 100 * (c->slowdown - 1);
    fprintf(out, "step %+.1f %%", pct);
    if (c->n_measured > 1) { /* pooled: say which windows were measured */
        fprintf(out, " over ");
        write_windows(c->measured_windows, c->n_measured, out);
    }
    fprintf(out, " vs baseline (");
    write_windows(c->baseline_windows, c->baseline_n_windows, out);
    fprintf(out, ")");
    if (r->stall.present) /* the test measures the typical step: the stall leads */
        fprintf(out, ": step %lld stalled %.1f ms (rank %u in %s); typical steps",
                (long long)r->stall.step, r->stall.excess_ns / 1e6, r->stall.rank,
                r->schema.names[r->stall.stage]);
    if (c->n_route == 0) {
        fprintf(out, ": no significant change\n");
        return;
    }
    const sf_stage_change *s = &c->stages[c->route[0]];
    if (s->own_significant) /* routed by a rank's own work (docs/CHANGE.md) */
        fprintf(out, ": %+.1f ms first appears in %s, own work of rank %u (frontier %+.1f ms)",
                s->own_delta_ns / 1e6, r->schema.names[c->route[0]], s->own_rank,
                s->shift.delta_ns / 1e6);
    else
        write_frontier_shift(r->schema.names[c->route[0]], s, out);
    /* a delay inside the collective has no suspect worth naming (docs/CHANGE.md) */
    bool named = !s->own_significant && !s->floor_significant;
    if (c->n_suspects > 0 && named)
        fprintf(out, ", rank %u%s", c->suspects[0].rank,
                c->suspects_dense ? "" : " (top leader; mergeable mode)");
    for (uint32_t i = 1; i < c->n_route; i++) {
        const sf_stage_change *n = &c->stages[c->route[i]];
        fprintf(out, "%s %s %+.1f ms", i == 1 ? "; then" : ",", r->schema.names[c->route[i]],
                (n->own_significant ? n->own_delta_ns : sf_change_frontier_shift(n)->delta_ns) /
                    1e6);
        if (n->own_significant)
            fprintf(out, " (rank %u)", n->own_rank);
    }
    fprintf(out, "\n");
}

/* The communication test (docs/CHANGE.md, "Communication"): one line where
 * it was tested, naming the rank whose collective starts later than in the
 * baseline when the shift is significant. */
static void write_comm_change(const sf_report *r, const sf_change *c, FILE *out)
{
    const sf_comm_change *m = &c->comm;
    if (!m->tested)
        return;
    const char *stage = r->schema.names[m->sync_stage];
    if (m->significant && m->rank != SF_NO_RANK) {
        fprintf(out,
                "communication vs baseline: rank %u starts its collective in %s %+.1f ms later "
                "(%.1f to %.1f ms; the largest issue lag in %u of %u steps)\n",
                m->rank, stage, m->shift.delta_ns / 1e6, m->shift.ci_low_ns / 1e6,
                m->shift.ci_high_ns / 1e6, m->led_steps, m->eligible_steps);
        return;
    }
    fprintf(out,
            "communication vs baseline: issue lag in %s %+.1f ms (%.1f to %.1f ms, %u steps): "
            "no significant change\n",
            stage, m->shift.delta_ns / 1e6, m->shift.ci_low_ns / 1e6, m->shift.ci_high_ns / 1e6,
            m->eligible_steps);
}

void sf_change_write_text(const sf_report *r, FILE *out)
{
    const sf_change *c = r->change;
    if (c == NULL)
        return;
    write_step_change(r, c, out);
    write_comm_change(r, c, out);
}

void sf_whatif_write_text(const sf_report *r, FILE *out)
{
    const sf_whatif *w = r->whatif;
    if (w == NULL || isnan(w->slowdown))
        return;
    fprintf(out, "what-if: S %.3f against %s, waste %.3f rank-s%s", w->slowdown,
            w->basis == SF_WHATIF_REFERENCE ? "the baseline" : "the cohort median", w->waste_rank_s,
            w->lower_bound ? " (clipped; savings are lower bounds)" : "");
    if (w->n_ranks > 0)
        fprintf(out, "; rank %u alone saves %.1f ms (S_r %.3f)", w->ranks[0].rank,
                w->ranks[0].saved_ns / 1e6, w->ranks[0].slowdown);
    fprintf(out, "\n");
}

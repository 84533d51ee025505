/*
 * The human view of one window. It leads with the straggler verdict when
 * there is one, then the route (where exposed time first appears, led by
 * which rank), then the evidence labels and a one-line
 * suggestion of what to profile next, then the per-stage table.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "change_json.h"
#include "report_text.h"

static bool has_label(const sf_report *r, enum sf_label l)
{
    return (r->labels >> l) & 1u;
}

/* What an operator profiles for a stage, by its name. */
static const char *target_of(const char *group)
{
    static const struct {
        const char *prefix, *target;
    } targets[] = {
        {"data", "input pipeline"},
        {"model.fwd", "forward pass"},
        {"model.backward", "backward pass and gradient communication"},
        {"callbacks", "callbacks"},
        {"optim", "optimizer step"},
        {"step.other", "untimed work between stages"},
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (strncmp(group, targets[i].prefix, strlen(targets[i].prefix)) == 0)
            return targets[i].target;
    return group;
}

static void write_route(const sf_report *r, FILE *out)
{
    fprintf(out, "route:");
    if (r->n_routing == 0) {
        fprintf(out, " none (exposed time below the share floor)\n");
        return;
    }
    for (uint32_t i = 0; i < r->n_routing; i++) {
        const sf_unit_figures *u = &r->groups[r->routing_order[i]];
        fprintf(out, "%s %s %.1f%%", i ? " ->" : "", u->name, 100 * u->share);
    }
    fprintf(out, "   (tau %.2f)\n", r->gates.tau);
    const sf_unit_figures *lead = &r->groups[r->routing_order[0]];
    if (r->stall.present) { /* the stall leads; the step counts describe the other steps */
        const sf_stall *st = &r->stall;
        fprintf(out, "leader: rank %u led %s at the stall (step %lld)", st->rank,
                r->groups[st->group].name, (long long)st->step);
        if (lead->leader_rank != SF_NO_RANK && lead->leader_rank != st->rank)
            fprintf(out, "; rank %u led %s in %u of %u steps", lead->leader_rank, lead->name,
                    lead->leader_steps, r->steps);
        fprintf(out, "\n");
    } else if (lead->leader_rank != SF_NO_RANK)
        fprintf(out, "leader: rank %u led %s in %u of %u steps\n", lead->leader_rank, lead->name,
                lead->leader_steps, r->steps);
    else
        fprintf(out, "leader: no unique leader at %s\n", lead->name);
}

static void write_names(const sf_report *r, FILE *out, const char *title, uint32_t bits,
                        const char *(*name)(int), int count)
{
    fprintf(out, "%s:", title);
    int n = 0;
    for (int i = 0; i < count; i++)
        if (bits & (1u << i))
            fprintf(out, "%s %s", n++ ? "," : "", name(i));
    if (n == 0)
        fprintf(out, " none");
    if (bits == r->labels && has_label(r, SF_LABEL_CO_CRITICAL)) {
        fprintf(out, " {");
        for (uint32_t i = 0; i < r->n_co_critical; i++)
            fprintf(out, "%s%s", i ? ", " : "", r->schema.group_names[r->co_critical[i]]);
        fprintf(out, "}");
    }
    fprintf(out, "\n");
}

static const char *label_name_of(int i)
{
    return sf_label_name((enum sf_label)i);
}
static const char *downgrade_name_of(int i)
{
    return sf_downgrade_name((enum sf_downgrade)i);
}

/* With a straggler verdict the suggestion is its rank and the stage where
 * its lateness began: the frontier's leader at a synchronized stage is only
 * whoever left the collective a moment later. */
static bool write_next_straggler(const sf_report *r, FILE *out)
{
    const sf_straggler *v = &r->straggler;
    if (!v->present)
        return false;
    if (v->communication) {
        fprintf(out,
                "next: profile rank %u's communication (its collective's issue) in %s; the group "
                "waits for it there\n",
                v->rank, r->schema.names[v->sync_stage]);
        return true;
    }
    const char *origin = r->schema.names[v->origin_stage];
    const char *target = target_of(r->schema.groups[v->origin_stage]);
    if (target == r->schema.groups[v->origin_stage])
        fprintf(out, "next: profile rank %u's %s", v->rank, origin);
    else
        fprintf(out, "next: profile rank %u's %s (%s)", v->rank, target, origin);
    fprintf(out, "; the group waits for it at %s's sync point%s\n", r->schema.names[v->sync_stage],
            has_label(r, SF_LABEL_TELEMETRY_LIMITED) ? "; telemetry is limited (see downgrades)"
                                                     : "");
    return true;
}

/* With a stall the suggestion is its rank and stage at that step. */
static bool write_next_stall(const sf_report *r, FILE *out)
{
    const sf_stall *st = &r->stall;
    if (!st->present)
        return false;
    const char *name = r->schema.names[st->stage];
    const char *target = target_of(r->schema.groups[st->stage]);
    if (target == r->schema.groups[st->stage])
        fprintf(out, "next: profile rank %u's %s", st->rank, name);
    else
        fprintf(out, "next: profile rank %u's %s (%s)", st->rank, target, name);
    fprintf(out, " at step %lld, where it stalled %.1f ms", (long long)st->step,
            st->excess_ns / 1e6);
    if (r->straggler.present && r->straggler.rank != st->rank)
        fprintf(out, "; over the steps the group waits for rank %u", r->straggler.rank);
    fprintf(out, "\n");
    return true;
}

/* The suggestion names the stall, else the straggler, else the leading
 * unit's leader when there is one, then whatever makes the reading less
 * certain. */
static void write_next(const sf_report *r, FILE *out)
{
    if (write_next_stall(r, out) || write_next_straggler(r, out))
        return;
    if (r->n_routing == 0) {
        fprintf(out, "next: nothing to route in this window\n");
        return;
    }
    const sf_unit_figures *lead = &r->groups[r->routing_order[0]];
    const char *target = target_of(lead->name);
    char what[2 * SF_MAX_NAME_LEN + 8];
    if (target == lead->name)
        snprintf(what, sizeof what, "%s", lead->name);
    else
        snprintf(what, sizeof what, "%s (%s)", target, lead->name);
    if (lead->leader_rank != SF_NO_RANK)
        fprintf(out, "next: profile rank %u's %s", lead->leader_rank, what);
    else
        fprintf(out, "next: profile the %s across ranks", what);
    if (has_label(r, SF_LABEL_CO_CRITICAL)) {
        fprintf(out, "; co-critical with");
        int n = 0;
        for (uint32_t i = 0; i < r->n_co_critical; i++)
            if (r->co_critical[i] != r->routing_order[0])
                fprintf(out, "%s %s", n++ ? "," : "", r->schema.group_names[r->co_critical[i]]);
        fprintf(out, ", so check %s too", n > 1 ? "them" : "it");
    }
    if (has_label(r, SF_LABEL_TELEMETRY_LIMITED))
        fprintf(out, "; telemetry is limited (see downgrades)");
    fprintf(out, "\n");
}

static void write_table(const sf_report *r, FILE *out)
{
    fprintf(out, "%-34s %7s %11s %11s %11s %11s %7s %7s\n", "stage", "share", "advance_s", "max_s",
            "mean_s", "spread_s", "gain", "leader");
    for (uint32_t k = 0; k < r->schema.n_stages; k++) {
        const sf_unit_figures *u = &r->stages[k];
        char leader[16] = "-";
        if (u->leader_rank != SF_NO_RANK)
            snprintf(leader, sizeof leader, "%u", u->leader_rank);
        fprintf(out, "%-34s %6.1f%% %11.6f %11.6f %11.6f %11.6f %7.3f %7s\n", u->name,
                isnan(u->share) ? 0.0 : 100 * u->share, u->advance_ns / 1e9, u->max_ns / 1e9,
                u->mean_ns / 1e9, u->spread_ns / 1e9, isnan(u->gain) ? 0.0 : u->gain, leader);
    }
}

/* A stall leads the view: one step holds most of the window's exposed
 * time, so the figures over steps (counts, verdict, change) speak of the
 * other steps. */
static void write_stall(const sf_report *r, FILE *out)
{
    const sf_stall *st = &r->stall;
    if (!st->present)
        return;
    fprintf(out,
            "stall: rank %u in %s at step %lld, %.1f ms above the median step (%.1f%% of the "
            "window's exposed time)\n",
            st->rank, r->schema.names[st->stage], (long long)st->step, st->excess_ns / 1e6,
            100 * st->share);
}

/* The verdict leads the view: which rank the group waited for, and where
 * its lateness began. */
static void write_persistence(const sf_straggler *v, FILE *out)
{
    if (v->persistence == SF_PERSIST_FIXED)
        fprintf(out, "; fixed for %u windows", v->windows_in_a_row);
    else if (v->persistence == SF_PERSIST_ROTATING)
        fprintf(out, "; rotating");
}

/* A straggler whose origin is its communication: on time at the arrival,
 * late to hand its collective to the backend. */
static void write_comm_straggler(const sf_report *r, FILE *out)
{
    const sf_straggler *v = &r->straggler;
    fprintf(out,
            "straggler: rank %u's all-reduce in %s started %.1f ms after its arrival in %u of %u "
            "steps (origin communication",
            v->rank, r->schema.names[v->sync_stage], v->median_lateness_ns / 1e6,
            v->arrived_last_steps, v->eligible_steps);
    write_persistence(v, out);
    fprintf(out, ")\n");
}

/* Without issue marks a rank that is ready on time but communicates late
 * looks punctual: the view says so rather than naming nobody silently. */
static void write_comm_visibility(const sf_report *r, FILE *out)
{
    if (r->comm.visibility == SF_COMM_NO_ISSUE_MARKS)
        fprintf(out, "communication: lateness to communicate cannot be seen (no issue marks; "
                     "use the DDP hook, rec.sync() or sf_stage_issue)\n");
}

static void write_straggler(const sf_report *r, FILE *out)
{
    const sf_straggler *v = &r->straggler;
    if (!v->present)
        return;
    if (v->communication) {
        write_comm_straggler(r, out);
        return;
    }
    if (r->stall.present && r->stall.rank != v->rank)
        fprintf(out, "straggler: rank %u at the stall (step %lld); over the steps, ", r->stall.rank,
                (long long)r->stall.step);
    else
        fprintf(out, "straggler: ");
    if (v->wait_rule) {
        /* The wait rule: the rank its group waited for. */
        fprintf(out, "rank %u held up its %s group at %s's sync points in %u of %u steps, ",
                v->rank, sf_sync_group_name(v->group), r->schema.names[v->sync_stage],
                v->arrived_last_steps, v->eligible_steps);
        if (v->victim_rank != SF_NO_RANK)
            fprintf(out, "rank %u waited longest, ", v->victim_rank);
        fprintf(out, "%.1f ms more than it (origin %s", v->median_lateness_ns / 1e6,
                r->schema.names[v->origin_stage]);
        write_persistence(v, out);
        fprintf(out, ")\n");
        return;
    }
    fprintf(out,
            "rank %u arrived last at %s's sync point in %u of %u steps, %.1f ms late "
            "(origin %s",
            v->rank, r->schema.names[v->sync_stage], v->arrived_last_steps, v->eligible_steps,
            v->median_lateness_ns / 1e6, r->schema.names[v->origin_stage]);
    write_persistence(v, out);
    fprintf(out, ")\n");
}

/* The stall's rank first when it is a suspect: it is the window's story. */
static void write_suspects(const sf_report *r, FILE *out)
{
    if (r->n_suspects == 0)
        return;
    fprintf(out, "suspects:");
    int n = 0;
    for (uint32_t i = 0; r->stall.present && i < r->n_suspects; i++)
        if (r->suspects[i].rank == r->stall.rank)
            fprintf(out, "%s rank %u (%u steps, the stall)", n++ ? "," : "", r->suspects[i].rank,
                    r->suspects[i].steps);
    for (uint32_t i = 0; i < r->n_suspects; i++)
        if (!r->stall.present || r->suspects[i].rank != r->stall.rank)
            fprintf(out, "%s rank %u (%u steps)", n++ ? "," : "", r->suspects[i].rank,
                    r->suspects[i].steps);
    fprintf(out, "\n");
}

/* The pipeline view: where a rank first fell behind its cohort, then per
 * pipeline stage its mean bubble per step and what restoring it saves. */
static void write_pipeline(const sf_report *r, FILE *out)
{
    const sf_pipeline_view *v = &r->pipeline;
    if (!v->present)
        return;
    if (v->origin)
        fprintf(out,
                "pipeline: first delay at pipeline stage %u, rank %u, in %s, in %u of %u steps, "
                "%.1f ms behind its cohort, costing the step %.1f ms\n",
                v->origin_pp, v->origin_rank, r->schema.names[v->origin_stage], v->origin_steps,
                r->steps, v->median_delay_ns / 1e6, v->median_cost_ns / 1e6);
    else
        fprintf(out, "pipeline: no rank fell behind its cohort in any step\n");
    fprintf(out, "pipeline stages:");
    for (uint32_t p = 0; p < v->n_stages; p++) {
        double steps = r->steps ? r->steps : 1;
        fprintf(out, "%s %u bubble %.1f ms, restored saves %.1f ms", p ? ";" : "", p,
                v->stages[p].bubble_ns / 1e6 / steps, v->stages[p].restore_saved_ns / 1e6 / steps);
    }
    fprintf(out, " (per step)\n");
}

/* Each boundary's leader is written "stage (rank k)": "stage@k" is the
 * schema's spelling of accumulated microsteps (docs/SPEC.md). */
static void write_critical_path(const sf_report *r, FILE *out)
{
    const sf_critical_path *p = &r->critical_path;
    if (p->chain == NULL)
        return;
    fprintf(out, "critical path (%u of %u steps):", p->steps, r->steps);
    int n = 0;
    for (uint32_t k = 0; k < r->schema.n_stages; k++)
        if (p->chain[k] != SF_NO_RANK)
            fprintf(out, "%s %s (rank %u)", n++ ? " ->" : "", r->schema.names[k], p->chain[k]);
    fprintf(out, "%s\n", n ? "" : " no unique leader at any boundary");
}

int sf_report_write_text(const sf_report *r, FILE *out)
{
    if (r == NULL || out == NULL)
        return -EINVAL;
    fprintf(out, "window %lld", (long long)r->meta.index);
    if (r->meta.segment)
        fprintf(out, " segment %u", r->meta.segment);
    fprintf(out, ": steps %lld-%lld, %u complete, %u ranks of %u, exposed %.6f s\n",
            (long long)r->first_step, (long long)r->last_step, r->steps, r->ranks,
            r->meta.world_size, (double)r->exposed_total_ns / 1e9);
    sf_change_write_text(r, out); /* what changed leads, when the job has a baseline */
    write_stall(r, out);
    write_straggler(r, out);
    write_comm_visibility(r, out);
    write_route(r, out);
    write_names(r, out, "labels", r->labels, label_name_of, SF_LABEL_COUNT);
    write_names(r, out, "downgrades", r->downgrades, downgrade_name_of, SF_DG_COUNT);
    write_suspects(r, out);
    write_critical_path(r, out);
    write_pipeline(r, out);
    if (r->arrival_missing_steps)
        fprintf(out, "arrival marks missing: %llu rank-steps (not eligible for the verdict)\n",
                (unsigned long long)r->arrival_missing_steps);
    write_next(r, out);
    sf_whatif_write_text(r, out);
    write_table(r, out);
    return ferror(out) ? -EIO : 0;
}

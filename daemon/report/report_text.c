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
    if (lead->leader_rank != SF_NO_RANK)
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

/* The suggestion names the straggler, else the leading unit's leader when
 * there is one, then whatever makes the reading less certain. */
static void write_next(const sf_report *r, FILE *out)
{
    if (write_next_straggler(r, out))
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
    fprintf(out,
            "straggler: rank %u arrived last at %s's sync point in %u of %u steps, %.1f ms late "
            "(origin %s",
            v->rank, r->schema.names[v->sync_stage], v->arrived_last_steps, v->eligible_steps,
            v->median_lateness_ns / 1e6, r->schema.names[v->origin_stage]);
    write_persistence(v, out);
    fprintf(out, ")\n");
}

static void write_critical_path(const sf_report *r, FILE *out)
{
    const sf_critical_path *p = &r->critical_path;
    if (p->chain == NULL)
        return;
    fprintf(out, "critical path (%u of %u steps):", p->steps, r->steps);
    int n = 0;
    for (uint32_t k = 0; k < r->schema.n_stages; k++)
        if (p->chain[k] != SF_NO_RANK)
            fprintf(out, "%s %s@%u", n++ ? " ->" : "", r->schema.names[k], p->chain[k]);
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
    write_straggler(r, out);
    write_comm_visibility(r, out);
    write_route(r, out);
    write_names(r, out, "labels", r->labels, label_name_of, SF_LABEL_COUNT);
    write_names(r, out, "downgrades", r->downgrades, downgrade_name_of, SF_DG_COUNT);
    if (r->n_suspects) {
        fprintf(out, "suspects:");
        for (uint32_t i = 0; i < r->n_suspects; i++)
            fprintf(out, "%s rank %u (%u steps)", i ? "," : "", r->suspects[i].rank,
                    r->suspects[i].steps);
        fprintf(out, "\n");
    }
    write_critical_path(r, out);
    if (r->arrival_missing_steps)
        fprintf(out, "arrival marks missing: %llu rank-steps (not eligible for the verdict)\n",
                (unsigned long long)r->arrival_missing_steps);
    write_next(r, out);
    sf_whatif_write_text(r, out);
    write_table(r, out);
    return ferror(out) ? -EIO : 0;
}

/*
 * From a (merged) summary to the window report: frontier advances, exposed
 * time, comparison summaries, leader evidence and gains per stage and per
 * reporting group (docs/SPEC.md section 1). Routing and labels are in labels.c.
 * Integer ns throughout; doubles only for the final ratios.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/change.h>

#include "core_internal.h"

struct lead { /* one unique lead: a rank led a boundary at a step */
    uint32_t rank, stage;
    int64_t gap;
};

struct work {           /* scratch of one report computation */
    uint32_t *complete; /* indices of complete steps in the summary */
    uint32_t n_complete;
    struct lead *leads;
    size_t n_leads;
};

static int cmp_lead(const void *a, const void *b)
{
    const struct lead *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->stage != y->stage)
        return x->stage < y->stage ? -1 : 1;
    return (x->gap > y->gap) - (x->gap < y->gap);
}

static int64_t ns_from_seconds(double s)
{
    return (int64_t)llround(s * 1e9);
}

static double ratio(__int128 num, __int128 den)
{
    return den > 0 ? (double)num / (double)den : NAN;
}

/* ---- complete steps and the frontier ------------------------------------ */

static int find_complete_steps(const sf_summary *s, uint32_t n_ranks, struct work *w)
{
    w->complete = malloc((s->n_steps ? s->n_steps : 1) * sizeof *w->complete);
    if (w->complete == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < s->n_steps; i++)
        if (s->steps[i].n_ranks == n_ranks)
            w->complete[w->n_complete++] = i;
    return 0;
}

static int64_t median_exposed(const sf_summary *s, const struct work *w)
{
    uint32_t S = s->schema.n_stages;
    if (w->n_complete == 0)
        return 0;
    int64_t *e = malloc(w->n_complete * sizeof *e);
    if (e == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < w->n_complete; i++)
        e[i] = s->steps[w->complete[i]].prefix_top2[S - 1].v1;
    int64_t m = sf_median_i64(e, w->n_complete);
    free(e);
    return m;
}

/* The stall (sf_stall in accounting.h): the complete step of the largest
 * exposed time, when its excess over the median step is at least
 * dominance_share_min of the window's exposed time; at that step, the stage
 * of the largest frontier advance and the rank that reached its end last.
 * Under three complete steps there is no typical step to stand out from. */
static void find_stall(sf_report *r, const sf_summary *s, const struct work *w, int64_t median_e)
{
    uint32_t S = s->schema.n_stages;
    if (w->n_complete < 3 || r->exposed_total_ns <= 0)
        return;
    const sf_step_summary *worst = &s->steps[w->complete[0]];
    for (uint32_t i = 1; i < w->n_complete; i++) {
        const sf_step_summary *st = &s->steps[w->complete[i]];
        if (st->prefix_top2[S - 1].v1 > worst->prefix_top2[S - 1].v1)
            worst = st;
    }
    int64_t excess = worst->prefix_top2[S - 1].v1 - median_e;
    double share = ratio(excess, r->exposed_total_ns);
    if (excess <= 0 || !(share >= r->gates.dominance_share_min))
        return;
    int64_t prev = 0, best = INT64_MIN;
    uint32_t stage = 0;
    for (uint32_t k = 0; k < S; k++) {
        int64_t advance = worst->prefix_top2[k].v1 - prev;
        prev = worst->prefix_top2[k].v1;
        if (advance > best) {
            best = advance;
            stage = k;
        }
    }
    r->stall = (sf_stall){.present = true,
                          .step = worst->step,
                          .stage = stage,
                          .group = s->schema.group_of[stage],
                          .rank = worst->prefix_top2[stage].r1,
                          .excess_ns = excess,
                          .share = share};
}

/* Advances, exposed time, telescoping check and the per-stage comparison
 * sums over complete steps. */
static void frontier_sums(sf_report *r, const sf_summary *s, const struct work *w, uint32_t n_ranks,
                          __int128 *prefix_sum)
{
    uint32_t S = s->schema.n_stages;
    __int128 dsum[SF_MAX_STAGES] = {0}, frontier[SF_MAX_STAGES] = {0}, residual = 0, overlap = 0,
             end = 0;
    for (uint32_t i = 0; i < w->n_complete; i++) {
        const sf_step_summary *st = &s->steps[w->complete[i]];
        int64_t prev = 0, total = 0;
        for (uint32_t k = 0; k < S; k++) {
            int64_t f = st->prefix_top2[k].v1;
            sf_unit_figures *u = &r->stages[k];
            u->advance_ns += f - prev;
            total += f - prev;
            prev = f;
            u->max_ns += st->dmax[k];
            u->spread_ns += st->dmax[k] - st->dmin[k];
            u->slowest_rank_ns += st->slowest_d[k];
            if (st->has_rank0)
                u->rank0_ns += st->rank0_d[k];
            dsum[k] += st->dsum[k];
            frontier[k] += f;
        }
        int64_t err = llabs(total - st->prefix_top2[S - 1].v1);
        if (err > r->telescoping_max_abs_err_ns)
            r->telescoping_max_abs_err_ns = err;
        r->exposed_total_ns += st->prefix_top2[S - 1].v1;
        residual += st->residual_sum;
        overlap += st->overlap_sum;
        end += st->end_sum;
    }
    __int128 running = 0;
    for (uint32_t k = 0; k < S; k++) {
        sf_unit_figures *u = &r->stages[k];
        running += dsum[k];
        prefix_sum[k] = running;
        u->mean_ns = n_ranks ? (int64_t)(dsum[k] / n_ranks) : 0;
        u->lag_ns = n_ranks ? (int64_t)(frontier[k] - running / n_ranks) : 0;
        u->delta_lag_ns = u->advance_ns - u->mean_ns;
    }
    r->residual_share = ratio(residual, end);
    r->overlap_share = ratio(overlap, end);
}

/* ---- leader evidence ----------------------------------------------------- */

static int collect_leads(sf_report *r, const sf_summary *s, struct work *w, uint32_t n_ranks)
{
    uint32_t S = s->schema.n_stages;
    size_t cells = (size_t)w->n_complete * S;
    r->step_leaders = malloc((cells ? cells : 1) * sizeof *r->step_leaders);
    w->leads = malloc((cells ? cells : 1) * sizeof *w->leads);
    if (r->step_leaders == NULL || w->leads == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < w->n_complete; i++) {
        const sf_step_summary *st = &s->steps[w->complete[i]];
        for (uint32_t k = 0; k < S; k++) {
            const sf_top2 *t = &st->prefix_top2[k];
            /* v2 stays INT64_MIN when no second rank reached the boundary
             * (a world of one): there is no runner-up and no gap to take. */
            bool runner_up = n_ranks >= 2 && t->v2 != INT64_MIN;
            int64_t gap = runner_up ? t->v1 - t->v2 : 0;
            bool unique = runner_up && gap > r->leader_gap_tol_ns;
            r->step_leaders[(size_t)i * S + k] = unique ? t->r1 : SF_NO_RANK;
            if (unique)
                w->leads[w->n_leads++] = (struct lead){t->r1, k, gap};
        }
    }
    qsort(w->leads, w->n_leads, sizeof *w->leads, cmp_lead);
    return 0;
}

/* The stage's leader is the rank with the most unique leads, lowest id on
 * ties. Leads are sorted by rank, so the first strict maximum wins. */
static void stage_leaders(sf_report *r, const struct work *w)
{
    for (uint32_t k = 0; k < r->schema.n_stages; k++) {
        r->stages[k].leader_rank = SF_NO_RANK;
        r->stages[k].leader_steps = 0;
        r->stages[k].evidence_stage = k;
    }
    for (size_t i = 0; i < w->n_leads;) {
        size_t j = i;
        while (j < w->n_leads && w->leads[j].rank == w->leads[i].rank &&
               w->leads[j].stage == w->leads[i].stage)
            j++;
        sf_unit_figures *u = &r->stages[w->leads[i].stage];
        if (j - i > u->leader_steps) {
            u->leader_steps = (uint32_t)(j - i);
            u->leader_rank = w->leads[i].rank;
        }
        i = j;
    }
}

static int rank_evidence_alloc(sf_report *r, uint32_t n)
{
    uint32_t S = r->schema.n_stages;
    r->rank_evidence = calloc(n ? n : 1, sizeof *r->rank_evidence);
    uint32_t *counts = calloc((size_t)(n ? n : 1) * S, sizeof *counts);
    int64_t *gaps = malloc((size_t)(n ? n : 1) * S * sizeof *gaps);
    if (r->rank_evidence == NULL || counts == NULL || gaps == NULL) {
        free(counts);
        free(gaps);
        return -ENOMEM;
    }
    for (size_t i = 0; i < (size_t)n * S; i++)
        gaps[i] = SF_NULL_NS;
    /* Element 0 always holds the two arrays, even for an empty list, so
     * sf_report_free finds them. */
    r->rank_evidence[0].leader_steps = counts;
    r->rank_evidence[0].median_gap_ns = gaps;
    for (uint32_t i = 0; i < n; i++) {
        r->rank_evidence[i].leader_steps = counts + (size_t)i * S;
        r->rank_evidence[i].median_gap_ns = gaps + (size_t)i * S;
        r->rank_evidence[i].mean_slack_ns = SF_NULL_NS;
    }
    r->n_rank_evidence = n;
    return 0;
}

/* Ranks listed in the report: every rank in dense mode, else the ranks that
 * led at least once (nothing else is known about the others). */
static int rank_evidence_build(sf_report *r, const sf_summary *s, const struct work *w)
{
    uint32_t n = 0;
    if (s->dense)
        n = s->dense->n_ranks;
    else
        for (size_t i = 0; i < w->n_leads; i++)
            n += i == 0 || w->leads[i].rank != w->leads[i - 1].rank;
    int rc = rank_evidence_alloc(r, n);
    if (rc < 0)
        return rc;
    uint32_t slot = 0;
    for (uint32_t i = 0; s->dense && i < n; i++) {
        r->rank_evidence[i].rank = s->dense->ranks[i];
        r->rank_evidence[i].role = strdup(s->dense->roles[i]); /* outlives the summary */
        if (r->rank_evidence[i].role == NULL)
            return -ENOMEM;
    }
    for (size_t i = 0; i < w->n_leads;) {
        size_t j = i;
        while (j < w->n_leads && w->leads[j].rank == w->leads[i].rank &&
               w->leads[j].stage == w->leads[i].stage)
            j++;
        if (s->dense)
            while (r->rank_evidence[slot].rank != w->leads[i].rank)
                slot++;
        else if (i > 0 && w->leads[i].rank != w->leads[i - 1].rank)
            slot++;
        sf_rank_evidence *e = &r->rank_evidence[slot];
        e->rank = w->leads[i].rank;
        e->leader_steps[w->leads[i].stage] = (uint32_t)(j - i);
        size_t m = (j - i) / 2; /* gaps are sorted within the run */
        int64_t lo = w->leads[i + ((j - i) % 2 ? m : m - 1)].gap, hi = w->leads[i + m].gap;
        e->median_gap_ns[w->leads[i].stage] = lo + (hi - lo) / 2;
        i = j;
    }
    return 0;
}

/* ---- gains --------------------------------------------------------------- */

static void rank_median_gains(const sf_summary *s, const struct work *w, int64_t *ret_gain)
{
    uint32_t S = s->schema.n_stages;
    for (uint32_t c = 0; c < s->cand.n; c++) {
        int64_t g = 0;
        for (uint32_t i = 0; i < w->n_complete; i++) {
            const sf_step_summary *st = &s->steps[w->complete[i]];
            g += st->prefix_top2[S - 1].v1 - st->clipped_end[c];
        }
        ret_gain[c] = g;
    }
}

/* The candidate index of a group: its own candidate when it has several
 * members, else its single stage's. */
static uint32_t group_candidate(const sf_summary *s, uint32_t g)
{
    uint64_t mask = 0;
    for (uint32_t k = 0; k < s->schema.n_stages; k++)
        if (s->schema.group_of[k] == g)
            mask |= UINT64_C(1) << k;
    for (uint32_t c = 0; c < s->cand.n; c++)
        if (s->cand.member_mask[c] == mask)
            return c;
    return 0;
}

static double unit_gain(int64_t rm, int64_t cohort, __int128 exposed, bool floor_ok)
{
    int64_t best = cohort != SF_NULL_NS && cohort > rm ? cohort : rm;
    return floor_ok ? ratio(best, exposed) : NAN;
}

static int fill_gains(sf_report *r, const sf_summary *s, const struct work *w, bool floor_ok)
{
    int64_t rm[SF_MAX_STAGES * 2], cohort[SF_MAX_STAGES * 2];
    rank_median_gains(s, w, rm);
    for (uint32_t c = 0; c < s->cand.n; c++)
        cohort[c] = SF_NULL_NS;
    if (s->dense) {
        int rc = sf__cohort_gains(s, w->complete, w->n_complete, cohort);
        if (rc < 0)
            return rc;
    }
    for (uint32_t k = 0; k < s->schema.n_stages; k++) {
        sf_unit_figures *u = &r->stages[k];
        u->gain_rank_median_ns = rm[k];
        u->gain_cohort_median_ns = cohort[k];
        u->gain = unit_gain(rm[k], cohort[k], r->exposed_total_ns, floor_ok);
    }
    for (uint32_t g = 0; g < s->schema.n_groups; g++) {
        uint32_t c = group_candidate(s, g);
        sf_unit_figures *u = &r->groups[g];
        u->gain_rank_median_ns = rm[c];
        u->gain_cohort_median_ns = cohort[c];
        u->gain = unit_gain(rm[c], cohort[c], r->exposed_total_ns, floor_ok);
    }
    return 0;
}

/* ---- stages and groups --------------------------------------------------- */

static void stage_names_and_shares(sf_report *r, bool floor_ok)
{
    for (uint32_t k = 0; k < r->schema.n_stages; k++) {
        sf_unit_figures *u = &r->stages[k];
        u->name = r->schema.names[k];
        u->group = r->schema.groups[k];
        u->share = floor_ok ? ratio(u->advance_ns, r->exposed_total_ns) : NAN;
        if (!r->rank0_present)
            u->rank0_ns = SF_NULL_NS;
    }
}

/* A group's figures are the sums over its members; its leader evidence is
 * that of the member with the largest advance (first in schema order on
 * ties). */
static void group_figures(sf_report *r, bool floor_ok)
{
    for (uint32_t g = 0; g < r->schema.n_groups; g++) {
        sf_unit_figures *u = &r->groups[g];
        memset(u, 0, sizeof *u);
        u->name = r->schema.group_names[g];
        u->group = u->name;
        u->lag_ns = SF_NULL_NS;
        u->evidence_stage = UINT32_MAX;
        for (uint32_t k = 0; k < r->schema.n_stages; k++) {
            const sf_unit_figures *m = &r->stages[k];
            if (r->schema.group_of[k] != g)
                continue;
            u->advance_ns += m->advance_ns;
            u->max_ns += m->max_ns;
            u->mean_ns += m->mean_ns;
            u->spread_ns += m->spread_ns;
            u->slowest_rank_ns += m->slowest_rank_ns;
            u->rank0_ns = m->rank0_ns == SF_NULL_NS ? SF_NULL_NS : u->rank0_ns + m->rank0_ns;
            u->delta_lag_ns += m->delta_lag_ns;
            if (u->evidence_stage == UINT32_MAX ||
                m->advance_ns > r->stages[u->evidence_stage].advance_ns)
                u->evidence_stage = k;
        }
        u->leader_rank = r->stages[u->evidence_stage].leader_rank;
        u->leader_steps = r->stages[u->evidence_stage].leader_steps;
        u->share = floor_ok ? ratio(u->advance_ns, r->exposed_total_ns) : NAN;
    }
}

/* ---- the whole report ---------------------------------------------------- */

static int report_init(sf_report **ret, const sf_summary *s, const sf_gates *gates)
{
    sf_report *r = calloc(1, sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    int rc = sf_schema_copy(&r->schema, &s->schema);
    if (rc < 0) {
        free(r);
        return rc;
    }
    r->meta = s->meta;
    r->gates = *gates;
    r->dense = s->dense != NULL;
    *ret = r;
    return 0;
}

static bool rank0_covered(const sf_summary *s)
{
    return s->n_intervals > 0 && s->coverage[0].lo == 0;
}

static void window_counts(sf_report *r, const sf_summary *s, const struct work *w, uint32_t n)
{
    r->ranks = n;
    r->steps = w->n_complete;
    r->incomplete_steps = s->n_steps - w->n_complete;
    r->missing_ranks = s->meta.world_size > n ? s->meta.world_size - n : 0;
    r->first_step = w->n_complete ? s->steps[w->complete[0]].step : -1;
    r->last_step = w->n_complete ? s->steps[w->complete[w->n_complete - 1]].step : -1;
    r->rank0_present = rank0_covered(s);
    r->dropped_records = s->meta.dropped_records;
    r->contract_violations = s->meta.contract_violations + s->violation_rows;
    r->rejected_records = s->meta.rejected_records;
    r->merge_conflicts = s->merge_conflicts;
    for (uint32_t i = 0; i < s->n_steps; i++)
        r->arrival_missing_steps += s->steps[i].arrival_missing;
    r->event_samples = s->event_samples;
    r->event_ready = s->event_ready;
    r->event_ready_ratio =
        s->event_samples ? (double)s->event_ready / (double)s->event_samples : NAN;
    r->event_ratio = s->event_cpu_ns > 0 ? (double)s->event_gpu_ns / (double)s->event_cpu_ns : NAN;
}

static int mean_slack(sf_report *r, const sf_summary *s, const struct work *w)
{
    if (s->dense == NULL)
        return 0;
    int64_t *slack = malloc((s->dense->n_ranks ? s->dense->n_ranks : 1) * sizeof *slack);
    if (slack == NULL)
        return -ENOMEM;
    int rc = sf__mean_slack(s, w->complete, w->n_complete, slack);
    for (uint32_t i = 0; rc == 0 && i < r->n_rank_evidence; i++)
        r->rank_evidence[i].mean_slack_ns = slack[i];
    free(slack);
    return rc;
}

int sf_report_compute(const sf_summary *summary, const sf_gates *gates, sf_report **ret)
{
    if (summary == NULL || gates == NULL || ret == NULL || sf_gates_validate(gates) < 0)
        return -EINVAL;
    const sf_summary *s = summary;
    uint32_t n = (uint32_t)sf_summary_covered_ranks(s);
    struct work w = {0};
    sf_report *r = NULL;
    uint32_t *cohort_of = NULL;
    __int128 prefix_sum[SF_MAX_STAGES];
    int rc = report_init(&r, s, gates);
    if (rc < 0 || (rc = find_complete_steps(s, n, &w)) < 0)
        goto fail;
    window_counts(r, s, &w, n);
    frontier_sums(r, s, &w, n, prefix_sum);
    int64_t median_e = median_exposed(s, &w);
    if (median_e < 0) {
        rc = (int)median_e;
        goto fail;
    }
    find_stall(r, s, &w, median_e);
    int64_t tol_frac = (int64_t)llround(gates->leader_gap_tol_frac * (double)median_e);
    r->leader_gap_tol_ns = ns_from_seconds(gates->leader_gap_tol_min_s);
    if (tol_frac > r->leader_gap_tol_ns)
        r->leader_gap_tol_ns = tol_frac;
    bool floor_ok =
        w.n_complete > 0 && r->exposed_total_ns >= (__int128)ns_from_seconds(gates->share_floor_s);
    stage_names_and_shares(r, floor_ok);
    if ((rc = collect_leads(r, s, &w, n)) < 0)
        goto fail;
    stage_leaders(r, &w);
    group_figures(r, floor_ok);
    cohort_of = malloc((s->dense && s->dense->n_ranks ? s->dense->n_ranks : 1) * sizeof *cohort_of);
    if (cohort_of == NULL ||
        (rc = sf__report_cohorts(s, cohort_of, &r->cohorts, &r->n_cohorts)) < 0)
        goto fail;
    /* Each dense rank's cohort; a mergeable summary has no dense ranks, and
     * its comparisons read the cohort part instead. */
    const uint32_t *cohorts =
        r->cohorts == SF_COHORTS_APPLIED && s->dense != NULL ? cohort_of : NULL;
    if ((rc = fill_gains(r, s, &w, floor_ok)) < 0 || (rc = rank_evidence_build(r, s, &w)) < 0 ||
        (rc = mean_slack(r, s, &w)) < 0 ||
        (rc = sf__straggler_verdict(r, s, w.complete, w.n_complete, cohorts)) < 0 ||
        (rc = sf__comm_verdict(s, gates, &r->comm)) < 0 || (rc = sf__critical_path(r)) < 0 ||
        (rc = sf__pipeline_view(r, s, w.complete, w.n_complete)) < 0)
        goto fail;
    /* Issue lags compare every rank with every other: with coordinates that
     * make no cohorts they name no rank. */
    if (r->cohorts == SF_COHORTS_INCONSISTENT)
        r->comm.present = false;
    /* A rank that arrives on time but communicates late is the window's
     * straggler when no rank arrived late; not across cohorts. */
    if (!r->straggler.present && r->comm.present && r->cohorts == SF_COHORTS_NONE)
        sf__comm_as_straggler(&r->comm, &r->straggler);
    struct sf__cohort_view cv = {w.complete, w.n_complete, cohorts};
    sf__report_route_and_label(r, s, n, &cv);
    free(cohort_of);
    free(w.complete);
    free(w.leads);
    *ret = r;
    return 0;
fail:
    free(cohort_of);
    free(w.complete);
    free(w.leads);
    sf_report_free(r);
    return rc < 0 ? rc : -ENOMEM;
}

void sf_report_free(sf_report *r)
{
    if (r == NULL)
        return;
    if (r->rank_evidence) {
        for (uint32_t i = 0; i < r->n_rank_evidence; i++)
            free((char *)r->rank_evidence[i].role);
        free(r->rank_evidence[0].leader_steps);
        free(r->rank_evidence[0].median_gap_ns);
    }
    free(r->rank_evidence);
    free(r->suspects);
    free(r->step_leaders);
    free(r->critical_path.chain);
    sf__pipeline_view_free(&r->pipeline);
    sf_change_free(r->change);
    sf_whatif_free(r->whatif);
    sf_schema_clear(&r->schema);
    free(r);
}

int sf_report_from_rows(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                        size_t n_rows, const sf_gates *gates, sf_report **ret)
{
    if (gates == NULL)
        return -EINVAL;
    sf_summary *s = NULL;
    /* Dense by world size, as sfd decides it, so live and replay agree. */
    bool dense = meta != NULL && meta->world_size <= gates->dense_max_ranks;
    /* The summary dies below, before the rows: it may view them. */
    int rc = sf__summary_build(schema, meta, rows, n_rows, dense, SF__BUILD_BORROW, &s);
    if (rc < 0)
        return rc;
    rc = sf_report_compute(s, gates, ret);
    sf_summary_free(s);
    return rc;
}

bool sf_report_field_exact(const sf_report *report, const char *field)
{
    static const char *const dense_only[] = {"gain_cohort_median_s", "mean_slack_s", "ranks",
                                             "role", "straggler"};
    for (size_t i = 0; i < sizeof dense_only / sizeof dense_only[0]; i++)
        if (strcmp(field, dense_only[i]) == 0)
            return report->dense;
    /* The verdict's rank leads the suspects. */
    if (strcmp(field, "suspect_ranks") == 0)
        return report->dense || report->schema.sync_mask == 0;
    return true;
}

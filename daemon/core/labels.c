/*
 * Routing order, routing set, downgrade reasons, evidence labels and suspect
 * ranks (docs/SPEC.md section 1). Works on reporting groups: a report whose stage
 * and group figures are already filled in. Deterministic given the report,
 * the summary's window counters and the gates.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

static const char *const label_names[SF_LABEL_COUNT] = {
    "frontier_accounting",
    "telemetry_limited",
    "role_aware_needed",
    "co_critical",
    "direct_exposure",
    "sync_wait_dependent",
    "likely_sync_wait",
    "forward_event_scope_limited",
    "forward_device_supported",
    "forward_host_overhead_suspected",
    "forward_spillover_suspected",
    "gradient_accumulation_ambiguous",
    "role_aware_applied",
};

static const char *const downgrade_names[SF_DG_COUNT] = {
    "residual_share",      "overlap_share",       "missing_ranks",      "incomplete_steps",
    "dropped_records",     "contract_violations", "non_monotonic_time", "late_or_failed_summary",
    "window_closed_early", "window_partial",      "below_share_floor",  "single_rank",
};

const char *sf_label_name(enum sf_label label)
{
    return (unsigned)label < SF_LABEL_COUNT ? label_names[label] : NULL;
}

const char *sf_downgrade_name(enum sf_downgrade reason)
{
    return (unsigned)reason < SF_DG_COUNT ? downgrade_names[reason] : NULL;
}

/* ---- routing ------------------------------------------------------------- */

/* Units ordered by a figure, descending, ties in schema order: a stable
 * insertion sort over at most SF_MAX_STAGES groups. */
static void order_groups(const sf_report *r, int64_t (*key)(const sf_unit_figures *),
                         uint32_t *order)
{
    uint32_t n = r->schema.n_groups;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i;
        while (j > 0 && key(&r->groups[order[j - 1]]) < key(&r->groups[i])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

static int64_t advance_key(const sf_unit_figures *u)
{
    return u->advance_ns;
}
static int64_t spread_key(const sf_unit_figures *u)
{
    return u->spread_ns;
}

static void route(sf_report *r, bool floor_ok)
{
    order_groups(r, advance_key, r->routing_order);
    r->n_routing = 0;
    if (!floor_ok)
        return;
    double target = r->gates.tau * (double)r->exposed_total_ns;
    __int128 cumulative = 0;
    while (r->n_routing < r->schema.n_groups) {
        cumulative += r->groups[r->routing_order[r->n_routing++]].advance_ns;
        if ((double)cumulative >= target)
            break;
    }
}

static bool in_routing_set(const sf_report *r, uint32_t group)
{
    for (uint32_t i = 0; i < r->n_routing; i++)
        if (r->routing_order[i] == group)
            return true;
    return false;
}

/* ---- downgrades ---------------------------------------------------------- */

static uint32_t downgrades(const sf_report *r, const sf_summary *s, uint32_t n_ranks, bool floor_ok)
{
    const sf_gates *g = &r->gates;
    uint32_t m = r->meta.flags, d = 0;
    d |= (uint32_t)(r->residual_share > g->residual_share_max) << SF_DG_RESIDUAL_SHARE;
    d |= (uint32_t)(r->overlap_share > g->overlap_share_max) << SF_DG_OVERLAP_SHARE;
    d |= (uint32_t)(r->missing_ranks > g->missing_ranks_max) << SF_DG_MISSING_RANKS;
    d |= (uint32_t)(r->incomplete_steps > g->incomplete_steps_max) << SF_DG_INCOMPLETE_STEPS;
    d |= (uint32_t)(r->dropped_records > 0) << SF_DG_DROPPED_RECORDS;
    d |= (uint32_t)(r->contract_violations > 0) << SF_DG_CONTRACT_VIOLATIONS;
    d |= (uint32_t)((m & SF_WIN_NON_MONOTONIC) || s->non_monotonic_rows > 0)
         << SF_DG_NON_MONOTONIC_TIME;
    d |= (uint32_t)((m & SF_WIN_LATE_SUMMARY) != 0) << SF_DG_LATE_OR_FAILED_SUMMARY;
    d |= (uint32_t)((m & SF_WIN_CLOSED_EARLY) != 0) << SF_DG_WINDOW_CLOSED_EARLY;
    d |= (uint32_t)((m & SF_WIN_PARTIAL) != 0) << SF_DG_WINDOW_PARTIAL;
    d |= (uint32_t)!floor_ok << SF_DG_BELOW_SHARE_FLOOR;
    d |= (uint32_t)(n_ranks == 1) << SF_DG_SINGLE_RANK;
    return d;
}

/* ---- leader switches and suspects ---------------------------------------- */

static double leader_switch_rate(const sf_report *r, uint32_t stage)
{
    uint32_t S = r->schema.n_stages, eligible = 0, switches = 0;
    for (uint32_t i = 1; i < r->steps; i++) {
        uint32_t a = r->step_leaders[(size_t)(i - 1) * S + stage];
        uint32_t b = r->step_leaders[(size_t)i * S + stage];
        if (a == SF_NO_RANK || b == SF_NO_RANK)
            continue;
        eligible++;
        switches += a != b;
    }
    return eligible ? (double)switches / eligible : 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_suspect(const void *a, const void *b)
{
    const sf_suspect *x = a, *y = b;
    if (x->steps != y->steps)
        return x->steps > y->steps ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The straggler verdict's rank leads the suspects, with its own lead count
 * at the evidence stage (0 when it never led there). */
static void promote_suspect(sf_report *r, uint32_t rank)
{
    uint32_t i = 0;
    while (i < r->n_suspects && r->suspects[i].rank != rank)
        i++;
    sf_suspect first = i < r->n_suspects ? r->suspects[i] : (sf_suspect){rank, 0};
    if (i == r->n_suspects)
        r->n_suspects++;
    memmove(&r->suspects[1], &r->suspects[0], i * sizeof *r->suspects);
    r->suspects[0] = first;
}

/* The rank of each cohort whose work up to boundary `stage` led its
 * cohort's runner-up beyond the gap tolerance, per complete step: the
 * cohort's own leaders (docs/ACCOUNTING.md, "Cohorts"). One pass over a
 * step's ranks, in rank order, keeps every cohort's two largest prefixes
 * (acc: 3 values a cohort), so a step costs its ranks, not ranks x cohorts. */
static uint32_t cohort_leaders(const sf_report *r, const sf_summary *s,
                               const struct sf__cohort_view *cv, uint32_t stage, uint32_t *leaders,
                               int64_t *acc)
{
    const sf_dense *dn = s->dense;
    uint32_t S = s->schema.n_stages, R = dn->n_ranks, K = r->n_cohorts, n = 0;
    int64_t *best = acc, *second = acc + K, *who = acc + 2 * (size_t)K;
    for (uint32_t i = 0; i < cv->n_complete; i++) {
        const int64_t *rows = &dn->d[(size_t)cv->complete[i] * R * S];
        for (uint32_t c = 0; c < K; c++)
            best[c] = second[c] = INT64_MIN, who[c] = -1;
        for (uint32_t q = 0; q < R; q++) {
            uint32_t c = cv->cohort_of[q];
            int64_t p = 0;
            for (uint32_t j = 0; j <= stage; j++)
                p += rows[(size_t)q * S + j];
            if (p > best[c])
                second[c] = best[c], best[c] = p, who[c] = q;
            else if (p > second[c])
                second[c] = p;
        }
        for (uint32_t c = 0; c < K; c++)
            if (who[c] >= 0 && second[c] != INT64_MIN && best[c] - second[c] > r->leader_gap_tol_ns)
                leaders[n++] = dn->ranks[who[c]];
    }
    return n;
}

/* The same from the cohort part's top-2 prefixes (mergeable mode): the
 * cohort's last rank at the boundary, when it led the runner-up beyond the
 * tolerance; equal to the dense rows' answer. */
static uint32_t part_leaders(const sf_report *r, const sf_summary *s,
                             const struct sf__cohort_view *cv, uint32_t stage, uint32_t *leaders)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < cv->n_complete; i++)
        for (uint32_t c = 0; c < s->cohort->n_cohorts; c++) {
            uint32_t m;
            const sf_top2 *t = sf__cohort_top2(s->cohort, s->steps[cv->complete[i]].step, c, &m);
            if (t != NULL && m >= 2 && t[stage].v1 - t[stage].v2 > r->leader_gap_tol_ns)
                leaders[n++] = t[stage].r1;
        }
    return n;
}

/* Without cohorts, the ranks that set the frontier at the evidence stage;
 * with them, each cohort's own leaders; with coordinates that make no
 * cohorts, none (no rank is compared with ranks doing other work). */
static void find_suspects(sf_report *r, const sf_summary *s, const struct sf__cohort_view *cv,
                          uint32_t stage)
{
    uint32_t S = r->schema.n_stages, n = 0;
    bool by_part = r->cohorts == SF_COHORTS_APPLIED && cv != NULL && cv->cohort_of == NULL &&
                   s->dense == NULL && s->cohort != NULL;
    bool by_cohort = r->cohorts == SF_COHORTS_APPLIED && cv != NULL && cv->cohort_of != NULL;
    size_t cap = (size_t)(r->steps ? r->steps : 1) *
                 (by_cohort || by_part ? (by_part ? s->cohort->n_cohorts : r->n_cohorts) : 1);
    if (r->cohorts == SF_COHORTS_INCONSISTENT)
        return;
    uint32_t *leaders = malloc(cap * sizeof *leaders);
    int64_t *acc = by_cohort ? malloc(3 * (size_t)r->n_cohorts * sizeof *acc) : NULL;
    r->suspects = calloc(cap + 1, sizeof *r->suspects); /* + the verdict's rank */
    if (leaders == NULL || r->suspects == NULL || (by_cohort && acc == NULL)) {
        free(leaders);
        free(acc);
        return; /* suspects stay empty; the report is still exact elsewhere */
    }
    if (by_cohort)
        n = cohort_leaders(r, s, cv, stage, leaders, acc);
    else if (by_part)
        n = part_leaders(r, s, cv, stage, leaders);
    for (uint32_t i = 0; !by_cohort && !by_part && i < r->steps; i++)
        if (r->step_leaders[(size_t)i * S + stage] != SF_NO_RANK)
            leaders[n++] = r->step_leaders[(size_t)i * S + stage];
    qsort(leaders, n, sizeof *leaders, cmp_u32);
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0 || leaders[i] != leaders[i - 1])
            r->suspects[r->n_suspects++] = (sf_suspect){leaders[i], 0};
        r->suspects[r->n_suspects - 1].steps++;
    }
    qsort(r->suspects, r->n_suspects, sizeof *r->suspects, cmp_suspect);
    if (r->straggler.present)
        promote_suspect(r, r->straggler.rank);
    if (r->n_suspects > r->gates.suspect_ranks_max)
        r->n_suspects = r->gates.suspect_ranks_max;
    free(leaders);
    free(acc);
}

/* ---- labels -------------------------------------------------------------- */

struct lead_view {      /* what the label rules read about the leading unit */
    uint32_t L, second; /* group indices; second == UINT32_MAX when absent */
    double share_l, share_2, gain_l, gain_ratio;
    double top_gain, second_gain;
    uint32_t top_gain_group, second_gain_group;
    bool dominant;
};

static struct lead_view view_of(const sf_report *r)
{
    struct lead_view v = {
        .second = UINT32_MAX, .top_gain_group = UINT32_MAX, .second_gain_group = UINT32_MAX};
    const sf_gates *g = &r->gates;
    v.L = r->routing_order[0];
    if (r->schema.n_groups > 1)
        v.second = r->routing_order[1];
    v.share_l = r->groups[v.L].share;
    v.share_2 = v.second != UINT32_MAX ? r->groups[v.second].share : 0;
    v.gain_l = r->groups[v.L].gain;
    v.gain_ratio = v.share_l > 0 ? v.gain_l / v.share_l : NAN;
    for (uint32_t i = 0; i < r->schema.n_groups; i++) {
        double gain = r->groups[i].gain;
        if (v.top_gain_group == UINT32_MAX || gain > v.top_gain) {
            v.second_gain = v.top_gain;
            v.second_gain_group = v.top_gain_group;
            v.top_gain = gain;
            v.top_gain_group = i;
        } else if (v.second_gain_group == UINT32_MAX || gain > v.second_gain) {
            v.second_gain = gain;
            v.second_gain_group = i;
        }
    }
    if (v.second_gain_group == UINT32_MAX)
        v.second_gain = 0;
    v.dominant = v.share_l >= g->dominance_share_min && v.share_l - v.share_2 > g->tie_tol;
    return v;
}

static void add_co_critical(sf_report *r, uint32_t group)
{
    for (uint32_t i = 0; i < r->n_co_critical; i++)
        if (r->co_critical[i] == group)
            return;
    uint32_t i = r->n_co_critical++;
    while (i > 0 && r->co_critical[i - 1] > group) {
        r->co_critical[i] = r->co_critical[i - 1];
        i--;
    }
    r->co_critical[i] = group;
}

static bool co_critical(sf_report *r, const struct lead_view *v)
{
    const sf_gates *g = &r->gates;
    bool tie = v->share_l - v->share_2 <= g->tie_tol;
    bool gain_rule = v->second_gain_group != UINT32_MAX && v->top_gain >= g->tie_tol &&
                     v->top_gain - v->second_gain <= g->tie_tol;
    bool switching = r->leader_switch_rate > g->leader_switch_rate_max;
    bool unexplained = v->dominant && v->gain_ratio < g->gain_ratio_min && !g->model_fit;
    if (!(tie || gain_rule || switching || unexplained))
        return false;
    for (uint32_t i = 0; i < 2 && i < r->schema.n_groups; i++)
        add_co_critical(r, r->routing_order[i]);
    if (gain_rule) {
        add_co_critical(r, v->top_gain_group);
        add_co_critical(r, v->second_gain_group);
    }
    return true;
}

static int group_of_stage_name(const sf_report *r, const char *name)
{
    size_t len = strlen(name);
    for (uint32_t k = 0; k < r->schema.n_stages; k++) {
        const char *s = r->schema.names[k];
        if (strncmp(s, name, len) == 0 && (s[len] == '\0' || s[len] == '@'))
            return (int)r->schema.group_of[k];
    }
    return -1;
}

static bool group_ranked_by_spread(const sf_report *r, uint32_t group, uint32_t within)
{
    uint32_t order[SF_MAX_STAGES];
    order_groups(r, spread_key, order);
    for (uint32_t i = 0; i < within && i < r->schema.n_groups; i++)
        if (order[i] == group)
            return true;
    return false;
}

static uint32_t strong_labels(const sf_report *r, const struct lead_view *v)
{
    const sf_gates *g = &r->gates;
    uint32_t labels = 0;
    if (!v->dominant)
        return 0;
    if (v->gain_ratio >= g->gain_ratio_min && r->groups[v->L].spread_ns > 0 &&
        group_ranked_by_spread(r, v->L, 2))
        labels |= 1u << SF_LABEL_DIRECT_EXPOSURE;
    if (v->gain_ratio < g->gain_ratio_min && g->model_fit) {
        labels |= 1u << SF_LABEL_SYNC_WAIT_DEPENDENT;
        if (r->groups[v->L].advance_ns > r->groups[v->L].mean_ns)
            labels |= 1u << SF_LABEL_LIKELY_SYNC_WAIT;
    }
    return labels;
}

/* Forward labels need side evidence: with no event samples at all the
 * channel was off or unavailable, and no forward label is emitted. */
static uint32_t forward_labels(const sf_report *r, const sf_summary *s, const struct lead_view *v)
{
    const sf_gates *g = &r->gates;
    int fwd = group_of_stage_name(r, g->forward_stage);
    int bwd = group_of_stage_name(r, g->backward_stage);
    if (fwd < 0 || s->event_samples == 0 || r->n_routing == 0)
        return 0;
    bool routed = in_routing_set(r, (uint32_t)fwd);
    bool enough = r->event_ready_ratio >= g->event_ready_ratio_min &&
                  s->event_ready >= g->event_samples_min && !isnan(r->event_ratio);
    if (!enough)
        return routed ? 1u << SF_LABEL_FORWARD_EVENT_SCOPE_LIMITED : 0;
    uint32_t labels = 0;
    if (routed && r->event_ratio >= g->event_support_ratio_min)
        labels |= 1u << SF_LABEL_FORWARD_DEVICE_SUPPORTED;
    if ((int)v->L == fwd && v->dominant && r->event_ratio < g->event_host_ratio_max)
        labels |= 1u << SF_LABEL_FORWARD_HOST_OVERHEAD_SUSPECTED;
    if ((int)v->L == bwd && !routed && r->event_ratio >= g->event_support_ratio_min)
        labels |= 1u << SF_LABEL_FORWARD_SPILLOVER_SUSPECTED;
    return labels;
}

static uint32_t context_labels(const sf_report *r, const sf_summary *s)
{
    uint32_t labels = 0;
    if (r->steps > 0)
        labels |= 1u << SF_LABEL_FRONTIER_ACCOUNTING;
    if (r->downgrades)
        labels |= 1u << SF_LABEL_TELEMETRY_LIMITED;
    /* Cohorts answer the question roles raise; coordinates that make none
     * leave it open. */
    if (r->cohorts == SF_COHORTS_APPLIED)
        labels |= 1u << SF_LABEL_ROLE_AWARE_APPLIED;
    else if (r->cohorts == SF_COHORTS_INCONSISTENT || s->n_roles > 1 || s->roles_overflow)
        labels |= 1u << SF_LABEL_ROLE_AWARE_NEEDED;
    if (s->schema.accumulation > 1 && !s->schema.microstep_indexed)
        labels |= 1u << SF_LABEL_GRADIENT_ACCUMULATION_AMBIGUOUS;
    return labels;
}

void sf__report_route_and_label(sf_report *r, const sf_summary *s, uint32_t n_ranks,
                                const struct sf__cohort_view *cv)
{
    bool floor_ok = r->steps > 0 && !isnan(r->groups[0].share);
    route(r, floor_ok);
    r->downgrades = downgrades(r, s, n_ranks, floor_ok);
    r->labels = context_labels(r, s);
    if (!floor_ok)
        return;
    struct lead_view v = view_of(r);
    uint32_t evidence = r->groups[v.L].evidence_stage;
    r->leader_switch_rate = leader_switch_rate(r, evidence);
    find_suspects(r, s, cv, evidence);
    r->labels |= forward_labels(r, s, &v);
    if (n_ranks < 2)
        return; /* one rank: no gap, so no co-critical, exposure or sync labels */
    if (co_critical(r, &v))
        r->labels |= 1u << SF_LABEL_CO_CRITICAL;
    bool strong_ok =
        !(r->labels & (1u << SF_LABEL_TELEMETRY_LIMITED | 1u << SF_LABEL_ROLE_AWARE_NEEDED));
    if (strong_ok)
        r->labels |= strong_labels(r, &v);
}

/*
 * The summary codec: sf_summary <-> the Summary message of peer.proto, and
 * the job key every message that names a job carries (owner uid, job id,
 * incarnation). Decoding treats the message as hostile even though it is
 * authenticated: every repeated field is checked against S, C, the step
 * count and the world size, and every value against the core's bounds,
 * before any of it reaches the merge. It must not merge, log or touch
 * sockets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"
#include "strutil.h"

#define PREFIX_MAX ((int64_t)SF_MAX_STAGES * SF_MAX_DURATION_NS)

/* One allocation list for an encoded message, so the message's arrays can
 * be views or copies and still be freed in one call. */
typedef struct enc {
    Stagefrontier__Summary msg; /* first: the message is the handle */
    Stagefrontier__StepSummary *steps;
    Stagefrontier__StepSummary **step_ptrs;
    Stagefrontier__DenseRows dense;
    Stagefrontier__CommSummary comm;
    int64_t *i64;
    uint32_t *u32;
    int64_t *comm_i64;  /* the communication top-2 values */
    uint32_t *comm_u32; /* and their ranks */
    Stagefrontier__CohortSummary cohort;
    uint32_t *coh_u32;  /* the ranks' coordinates, then the top-2 ranks */
    int64_t *coh_i64;   /* the cohort top-2 values */
    int64_t *wait_i64;  /* the dense rows' sync waits */
    uint32_t *wait_u32; /* and their counts */
    uint32_t sync_groups[SF_MAX_STAGES];
} enc;

/* ---- the job key ------------------------------------------------------- */

int sfd_peer_owner_check(bool has_uid, uint32_t uid, bool has_incarnation, uint32_t incarnation)
{
    if (!has_uid || uid > SFD_PEER_UID_MAX || !has_incarnation || incarnation < 1 ||
        incarnation > SF_MAX_INCARNATION)
        return -EPROTO;
    return 0;
}

int sfd_peer_window_key_make(const char *job, bool has_uid, uint32_t uid, bool has_incarnation,
                             uint32_t incarnation, int64_t window, uint32_t segment,
                             sfd_window_key *ret)
{
    size_t n = job != NULL ? strnlen(job, SF_MAX_JOB_ID_LEN + 1) : 0;
    if (!sfd_peer_job_id_valid(job, n) || window < 0)
        return -EBADMSG;
    if (sfd_peer_owner_check(has_uid, uid, has_incarnation, incarnation) < 0)
        return -EPROTO;
    *ret = (sfd_window_key){
        .uid = uid, .incarnation = incarnation, .window = window, .segment = segment};
    memcpy(ret->job, job, n + 1);
    return 0;
}

/* ---- encoding ---------------------------------------------------------- */

void sfd_peer_summary_msg_free(Stagefrontier__Summary *m)
{
    if (m == NULL)
        return;
    enc *e = (enc *)m;
    free(e->steps);
    free(e->step_ptrs);
    free(e->i64);
    free(e->u32);
    free(e->comm_i64);
    free(e->comm_u32);
    free(e->coh_u32);
    free(e->coh_i64);
    free(e->wait_i64);
    free(e->wait_u32);
    free(e);
}

static void encode_step(const sf_summary *s, const sf_step_summary *st,
                        Stagefrontier__StepSummary *o, int64_t *i64, uint32_t *u32)
{
    size_t S = s->schema.n_stages;
    stagefrontier__step_summary__init(o);
    o->step = st->step;
    o->n_ranks = st->n_ranks;
    for (size_t k = 0; k < S; k++) {
        i64[2 * k] = st->prefix_top2[k].v1;
        i64[2 * k + 1] = st->prefix_top2[k].v2;
        u32[2 * k] = st->prefix_top2[k].r1;
        u32[2 * k + 1] = st->prefix_top2[k].r2;
    }
    o->n_top2 = o->n_top2_ranks = 2 * S;
    o->top2 = i64;
    o->top2_ranks = u32;
    o->n_dmax = o->n_dmin = o->n_dsum = o->n_slowest_d = S;
    o->dmax = st->dmax;
    o->dmin = st->dmin;
    o->dsum = st->dsum;
    o->slowest_total = st->slowest_total;
    o->slowest_rank = st->slowest_rank;
    o->slowest_d = st->slowest_d;
    o->has_has_rank0 = true;
    o->has_rank0 = st->has_rank0;
    o->n_rank0_d = st->has_rank0 ? S : 0;
    o->rank0_d = st->rank0_d;
    o->n_clipped_end = s->cand.n;
    o->clipped_end = st->clipped_end;
    o->residual_sum = st->residual_sum;
    o->overlap_sum = st->overlap_sum;
    o->end_sum = st->end_sum;
    o->has_arrival_missing = st->arrival_missing != 0;
    o->arrival_missing = st->arrival_missing;
}

static void encode_dense(const sf_summary *s, enc *e)
{
    const sf_dense *d = s->dense;
    Stagefrontier__DenseRows *o = &e->dense;
    stagefrontier__dense_rows__init(o);
    o->n_ranks = d->n_ranks;
    o->ranks = d->ranks;
    o->n_roles = d->n_ranks;
    o->roles = d->roles;
    size_t cells = (size_t)s->n_steps * d->n_ranks;
    o->n_d = cells * s->schema.n_stages;
    o->d = d->d;
    o->has_present = true;
    o->present.len = cells;
    o->present.data = d->present;
    e->msg.dense = o;
}

/* The dense rows' sync waits, split from sf_dense's [cell][2 * J] (waits,
 * then counts) into one array of each. */
static int encode_dense_waits(const sf_summary *s, enc *e)
{
    const sf_dense *d = s->dense;
    size_t J = (size_t)__builtin_popcountll(s->schema.sync_mask);
    size_t cells = (size_t)s->n_steps * d->n_ranks;
    if (d->sync_wait == NULL || J == 0 || cells == 0)
        return 0;
    e->wait_i64 = malloc(cells * J * sizeof *e->wait_i64);
    e->wait_u32 = malloc(cells * J * sizeof *e->wait_u32);
    if (e->wait_i64 == NULL || e->wait_u32 == NULL)
        return -ENOMEM;
    for (size_t c = 0; c < cells; c++)
        for (size_t j = 0; j < J; j++) {
            e->wait_i64[c * J + j] = d->sync_wait[c * 2 * J + j];
            e->wait_u32[c * J + j] = (uint32_t)d->sync_wait[c * 2 * J + J + j];
        }
    e->dense.n_sync_wait_ns = e->dense.n_sync_waits = cells * J;
    e->dense.sync_wait_ns = e->wait_i64;
    e->dense.sync_waits = e->wait_u32;
    return 0;
}

/* The synchronizing stages' groups, sent only when one is not the world. */
static void encode_sync_groups(const sf_schema *schema, enc *e)
{
    size_t n = 0;
    bool any = false;
    for (uint64_t m = schema->sync_mask; m; m &= m - 1) {
        uint8_t g = schema->sync_group[__builtin_ctzll(m)];
        e->sync_groups[n++] = g;
        any |= g != SF_SYNC_WORLD;
    }
    e->msg.n_sync_groups = any ? n : 0;
    e->msg.sync_groups = e->sync_groups;
}

static int encode_comm(const sf_comm_summary *c, enc *e)
{
    Stagefrontier__CommSummary *o = &e->comm;
    stagefrontier__comm_summary__init(o);
    size_t cells = (size_t)c->n_steps * c->n_sync;
    e->comm_i64 = malloc((2 * cells + 1) * sizeof *e->comm_i64);
    e->comm_u32 = malloc((2 * cells + 1) * sizeof *e->comm_u32);
    if (e->comm_i64 == NULL || e->comm_u32 == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < cells; i++) {
        const sf_top2 *t = &c->lag_top2[i];
        e->comm_i64[2 * i] = t->v1;
        e->comm_i64[2 * i + 1] = t->v2;
        e->comm_u32[2 * i] = t->r1;
        e->comm_u32[2 * i + 1] = t->r2;
    }
    o->n_steps = c->n_steps;
    o->steps = c->steps;
    o->n_lag_top2 = o->n_lag_top2_ranks = 2 * cells;
    o->lag_top2 = e->comm_i64;
    o->lag_top2_ranks = e->comm_u32;
    o->n_marked = cells;
    o->marked = c->marked;
    o->n_ranks = c->n_ranks;
    o->ranks = c->ranks;
    o->n_rank_max = o->n_rank_median = (size_t)c->n_ranks * c->n_sync;
    o->rank_max = c->rank_max;
    o->rank_median = c->rank_median;
    o->has_rows = o->has_marked_rows = true;
    o->rows = c->rows;
    o->marked_rows = c->marked_rows;
    e->msg.comm = o;
    return 0;
}

#define COORD_WORDS (3 + 2 * SF_PAR_DIMS) /* declared, indices, sizes, schedule, virtual */

static void coords_put(const sf_parallel *p, uint32_t *out)
{
    out[0] = p->declared;
    for (int d = 0; d < SF_PAR_DIMS; d++) {
        out[1 + d] = p->index[d];
        out[1 + SF_PAR_DIMS + d] = p->size[d];
    }
    out[1 + 2 * SF_PAR_DIMS] = p->schedule;
    out[2 + 2 * SF_PAR_DIMS] = p->virtual_stages;
}

static void coords_get(const uint32_t *in, sf_parallel *p)
{
    p->declared = in[0];
    for (int d = 0; d < SF_PAR_DIMS; d++) {
        p->index[d] = in[1 + d];
        p->size[d] = in[1 + SF_PAR_DIMS + d];
    }
    p->schedule = in[1 + 2 * SF_PAR_DIMS];
    p->virtual_stages = in[2 + 2 * SF_PAR_DIMS];
}

static int encode_cohort(const sf_cohort_summary *c, enc *e)
{
    Stagefrontier__CohortSummary *o = &e->cohort;
    stagefrontier__cohort_summary__init(o);
    size_t R = c->n_ranks, cells = (size_t)c->n_steps * c->n_cohorts * c->n_stages;
    e->coh_u32 = malloc((R * COORD_WORDS + 2 * cells + 1) * sizeof *e->coh_u32);
    e->coh_i64 = malloc((2 * cells + 1) * sizeof *e->coh_i64);
    if (e->coh_u32 == NULL || e->coh_i64 == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < R; i++)
        coords_put(&c->parallel[i], e->coh_u32 + i * COORD_WORDS);
    uint32_t *top_ranks = e->coh_u32 + R * COORD_WORDS;
    for (size_t i = 0; i < cells; i++) {
        const sf_top2 *t = &c->prefix_top2[i];
        e->coh_i64[2 * i] = t->v1;
        e->coh_i64[2 * i + 1] = t->v2;
        top_ranks[2 * i] = t->r1;
        top_ranks[2 * i + 1] = t->r2;
    }
    o->n_ranks = R;
    o->ranks = c->ranks;
    o->n_coords = R * COORD_WORDS;
    o->coords = e->coh_u32;
    o->n_cohort_pp = o->n_cohort_key = c->n_cohorts;
    o->cohort_pp = c->cohort_pp;
    o->cohort_key = c->cohort_key;
    o->n_steps = c->n_steps;
    o->steps = c->steps;
    o->n_count = (size_t)c->n_steps * c->n_cohorts;
    o->count = c->count;
    o->n_prefix_top2 = o->n_prefix_top2_ranks = 2 * cells;
    o->prefix_top2 = e->coh_i64;
    o->prefix_top2_ranks = top_ranks;
    e->msg.cohort = o;
    return 0;
}

static void encode_meta(const sf_summary *s, Stagefrontier__Summary *m)
{
    m->schema_version = s->schema.version;
    m->n_stage_names = m->n_stage_groups = s->schema.n_stages;
    m->stage_names = (char **)s->schema.names;
    m->stage_groups = (char **)s->schema.groups;
    m->accumulation = s->schema.accumulation;
    m->schema_hash = s->schema.hash;
    m->window = s->meta.index;
    m->segment = s->meta.segment;
    m->first_step = s->meta.first_step;
    m->last_step = s->meta.last_step;
    m->world_size = s->meta.world_size;
    m->flags = s->meta.flags;
    m->has_dropped_records = m->has_contract_violations = m->has_rejected_records = true;
    m->dropped_records = s->meta.dropped_records;
    m->contract_violations = s->meta.contract_violations;
    m->rejected_records = s->meta.rejected_records;
    m->has_opened_at_ms = m->has_closed_at_ms = true;
    m->opened_at_ms = s->meta.opened_at_ms;
    m->closed_at_ms = s->meta.closed_at_ms;
    m->n_roles = s->n_roles;
    m->roles = (char **)s->roles;
    m->has_roles_overflow = true;
    m->roles_overflow = s->roles_overflow;
    m->has_event_samples = m->has_event_ready = true;
    m->has_event_cpu_ns = m->has_event_gpu_ns = true;
    m->event_samples = s->event_samples;
    m->event_ready = s->event_ready;
    m->event_cpu_ns = s->event_cpu_ns;
    m->event_gpu_ns = s->event_gpu_ns;
    m->has_merge_conflicts = true;
    m->merge_conflicts = s->merge_conflicts;
    m->has_parallel_declared = m->has_parallel_conflict = m->has_parallel_rows = true;
    m->parallel_declared = s->parallel_declared;
    m->parallel_conflict = s->parallel_conflict;
    m->parallel_rows = s->parallel_rows;
}

int sfd_peer_summary_encode(const sf_summary *s, const sfd_window_key *key,
                            Stagefrontier__Summary **ret)
{
    if (s == NULL || key == NULL || ret == NULL ||
        !sfd_peer_job_id_valid(key->job, strnlen(key->job, sizeof key->job)) ||
        sfd_peer_owner_check(true, key->uid, true, key->incarnation) < 0 ||
        key->window != s->meta.index || key->segment != s->meta.segment)
        return -EINVAL;
    size_t S = s->schema.n_stages, n = s->n_steps ? s->n_steps : 1;
    enc *e = calloc(1, sizeof *e);
    if (e == NULL)
        return -ENOMEM;
    Stagefrontier__Summary *m = &e->msg;
    stagefrontier__summary__init(m);
    e->steps = calloc(n, sizeof *e->steps);
    e->step_ptrs = calloc(n, sizeof *e->step_ptrs);
    e->i64 = calloc(n * 2 * S, sizeof *e->i64);
    e->u32 = calloc(n * 2 * S + 2 * (size_t)s->n_intervals + 1, sizeof *e->u32);
    if (!e->steps || !e->step_ptrs || !e->i64 || !e->u32) {
        sfd_peer_summary_msg_free(m);
        return -ENOMEM;
    }
    m->job_id = (char *)key->job;
    m->has_owner_uid = m->has_incarnation = true;
    m->owner_uid = key->uid;
    m->incarnation = key->incarnation;
    encode_meta(s, m);
    for (uint32_t i = 0; i < s->n_steps; i++) {
        encode_step(s, &s->steps[i], &e->steps[i], e->i64 + i * 2 * S, e->u32 + i * 2 * S);
        e->step_ptrs[i] = &e->steps[i];
    }
    m->n_steps = s->n_steps;
    m->steps = e->step_ptrs;
    uint32_t *cov = e->u32 + n * 2 * S;
    for (uint32_t i = 0; i < s->n_intervals; i++) {
        cov[2 * i] = s->coverage[i].lo;
        cov[2 * i + 1] = s->coverage[i].hi;
    }
    m->n_coverage = 2 * (size_t)s->n_intervals;
    m->coverage = cov;
    encode_sync_groups(&s->schema, e);
    if (s->dense != NULL)
        encode_dense(s, e);
    if ((s->dense != NULL && encode_dense_waits(s, e) < 0) ||
        (s->comm != NULL && encode_comm(s->comm, e) < 0) ||
        (s->cohort != NULL && encode_cohort(s->cohort, e) < 0)) {
        sfd_peer_summary_msg_free(m);
        return -ENOMEM;
    }
    *ret = m;
    return 0;
}

/* ---- decoding ---------------------------------------------------------- */

static bool in_range(int64_t v, int64_t lo, int64_t hi)
{
    return v >= lo && v <= hi;
}

static bool durations_ok(const int64_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!in_range(d[i], 0, SF_MAX_DURATION_NS))
            return false;
    return true;
}

/* None (every stage spans the world), or one group per synchronizing
 * stage, each a known one. */
static int decode_sync_groups(const Stagefrontier__Summary *m, sf_schema *sc)
{
    uint8_t groups[SF_MAX_STAGES];
    if (m->n_sync_groups > (size_t)__builtin_popcountll(sc->sync_mask))
        return -EBADMSG;
    for (size_t j = 0; j < m->n_sync_groups; j++) {
        if (m->sync_groups[j] > SF_SYNC_GROUP_MAX)
            return -EBADMSG;
        groups[j] = (uint8_t)m->sync_groups[j];
    }
    return sf_schema_set_sync_groups(sc, groups, (uint32_t)m->n_sync_groups) < 0 ? -EBADMSG : 0;
}

static int decode_schema(const Stagefrontier__Summary *m, sf_schema *ret)
{
    size_t n = m->n_stage_names;
    if (n < 2 || n > SF_MAX_STAGES || (m->n_stage_groups != 0 && m->n_stage_groups != n))
        return -EBADMSG;
    if (m->accumulation < 1 || m->accumulation > SF_MAX_ACCUMULATION)
        return -EBADMSG;
    for (size_t i = 0; i < n; i++) {
        if (!sf_str_len_ok(m->stage_names[i], 0, SF_MAX_NAME_LEN) ||
            (m->n_stage_groups && !sf_str_len_ok(m->stage_groups[i], 0, SF_MAX_NAME_LEN)))
            return -EBADMSG;
    }
    sf_schema sc;
    int r = sf_schema_init(&sc, m->schema_version, (uint32_t)n, (const char *const *)m->stage_names,
                           m->n_stage_groups ? (const char *const *)m->stage_groups : NULL,
                           m->accumulation);
    if (r < 0)
        return -EBADMSG;
    if (sc.hash != m->schema_hash || decode_sync_groups(m, &sc) < 0) {
        sf_schema_clear(&sc);
        return -EBADMSG;
    }
    *ret = sc;
    return 0;
}

static int decode_meta(const Stagefrontier__Summary *m, sf_window_meta *meta)
{
    if (m->window < 0 || m->world_size < 1 || m->world_size > SF_MAX_RANKS ||
        (m->flags & ~UINT32_C(0xf)) != 0 || m->first_step < 0 || m->last_step < m->first_step ||
        m->opened_at_ms < 0 || m->closed_at_ms < 0)
        return -EBADMSG;
    *meta = (sf_window_meta){
        .opened_at_ms = m->opened_at_ms,
        .closed_at_ms = m->closed_at_ms,
        .index = m->window,
        .segment = m->segment,
        .first_step = m->first_step,
        .last_step = m->last_step,
        .world_size = m->world_size,
        .flags = m->flags,
        .dropped_records = m->dropped_records,
        .contract_violations = m->contract_violations,
        .rejected_records = m->rejected_records,
    };
    return 0;
}

/* A rank this summary covers: binary search of the (already validated,
 * sorted, disjoint) coverage intervals. The core indexes per-rank evidence
 * by these ranks, so a rank named anywhere must be covered. */
static bool covered(const sf_summary *s, uint32_t r)
{
    uint32_t lo = 0, hi = s->n_intervals;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r < s->coverage[mid].lo)
            hi = mid;
        else if (r > s->coverage[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static int decode_top2(const Stagefrontier__StepSummary *o, sf_step_summary *st, size_t S,
                       const sf_summary *s)
{
    for (size_t k = 0; k < S; k++) {
        sf_top2 t = {o->top2[2 * k], o->top2[2 * k + 1], o->top2_ranks[2 * k],
                     o->top2_ranks[2 * k + 1]};
        if (!in_range(t.v1, 0, PREFIX_MAX) || !covered(s, t.r1))
            return -EBADMSG;
        bool absent = t.v2 == INT64_MIN && t.r2 == SF_NO_RANK;
        if (absent != (o->n_ranks == 1))
            return -EBADMSG;
        if (!absent && (!in_range(t.v2, 0, t.v1) || !covered(s, t.r2) || t.r2 == t.r1))
            return -EBADMSG;
        st->prefix_top2[k] = t;
    }
    return 0;
}

static int decode_step(const Stagefrontier__StepSummary *o, sf_step_summary *st, size_t S, size_t C,
                       const sf_summary *s, uint64_t n_covered)
{
    if (o->n_top2 != 2 * S || o->n_top2_ranks != 2 * S || o->n_dmax != S || o->n_dmin != S ||
        o->n_dsum != S || o->n_slowest_d != S || o->n_rank0_d != (o->has_rank0 ? S : 0) ||
        o->n_clipped_end != C)
        return -EBADMSG;
    if (o->step < 0 || o->n_ranks < 1 || o->n_ranks > n_covered || (o->has_rank0 && !covered(s, 0)))
        return -EBADMSG;
    if (!durations_ok(o->dmax, S) || !durations_ok(o->dmin, S) || !durations_ok(o->slowest_d, S) ||
        !durations_ok(o->rank0_d, o->n_rank0_d))
        return -EBADMSG;
    /* A sum over n ranks is at most n whole steps: merged sums of disjoint
     * ranks then stay within SF_MAX_RANKS * SF_MAX_STEP_NS, inside int64. */
    int64_t sum_max = (int64_t)o->n_ranks * SF_MAX_STEP_NS;
    for (size_t k = 0; k < S; k++)
        if (o->dmin[k] > o->dmax[k] || !in_range(o->dsum[k], 0, sum_max))
            return -EBADMSG;
    for (size_t c = 0; c < C; c++)
        if (!in_range(o->clipped_end[c], 0, PREFIX_MAX))
            return -EBADMSG;
    if (!in_range(o->slowest_total, 0, PREFIX_MAX) || !covered(s, o->slowest_rank) ||
        !in_range(o->residual_sum, 0, sum_max) || !in_range(o->overlap_sum, 0, sum_max) ||
        !in_range(o->end_sum, 0, sum_max) ||
        (o->has_arrival_missing && o->arrival_missing > o->n_ranks))
        return -EBADMSG;
    if (decode_top2(o, st, S, s) < 0)
        return -EBADMSG;
    st->step = o->step;
    st->n_ranks = o->n_ranks;
    memcpy(st->dmax, o->dmax, S * sizeof *st->dmax);
    memcpy(st->dmin, o->dmin, S * sizeof *st->dmin);
    memcpy(st->dsum, o->dsum, S * sizeof *st->dsum);
    memcpy(st->slowest_d, o->slowest_d, S * sizeof *st->slowest_d);
    st->has_rank0 = o->has_rank0;
    if (o->has_rank0)
        memcpy(st->rank0_d, o->rank0_d, S * sizeof *st->rank0_d);
    memcpy(st->clipped_end, o->clipped_end, C * sizeof *st->clipped_end);
    st->slowest_total = o->slowest_total;
    st->slowest_rank = o->slowest_rank;
    st->residual_sum = o->residual_sum;
    st->overlap_sum = o->overlap_sum;
    st->end_sum = o->end_sum;
    st->arrival_missing = o->has_arrival_missing ? o->arrival_missing : 0;
    return 0;
}

static int decode_roles(const Stagefrontier__Summary *m, sf_summary *s)
{
    if (m->n_roles > SF_MAX_ROLES)
        return -EBADMSG;
    for (size_t i = 0; i < m->n_roles; i++) {
        if (!sf_str_len_ok(m->roles[i], 0, SF_MAX_NAME_LEN) ||
            (i > 0 && strcmp(m->roles[i - 1], m->roles[i]) >= 0))
            return -EBADMSG;
        if ((s->roles[i] = strdup(m->roles[i])) == NULL)
            return -ENOMEM;
        s->n_roles = (uint32_t)i + 1;
    }
    s->roles_overflow = m->roles_overflow;
    return 0;
}

static int decode_coverage(const Stagefrontier__Summary *m, sf_summary *s)
{
    size_t n = m->n_coverage / 2;
    if (m->n_coverage % 2 != 0 || n == 0 || n > m->world_size)
        return -EBADMSG;
    s->coverage = malloc(n * sizeof *s->coverage);
    if (s->coverage == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        sf_rank_interval iv = {m->coverage[2 * i], m->coverage[2 * i + 1]};
        if (iv.lo > iv.hi || iv.hi >= m->world_size)
            return -EBADMSG;
        /* Coalesced: a gap of at least one rank between intervals. */
        if (i > 0 && iv.lo <= s->coverage[i - 1].hi + 1)
            return -EBADMSG;
        s->coverage[i] = iv;
        s->n_intervals = (uint32_t)i + 1;
    }
    return 0;
}

/* One cell's sync wait at synchronizing stage k, as the core's row check
 * takes it: none (-1 with 0, the only form without a row), or a wait within
 * the recorded stage and its sync wait together, with 1..SF_MAX_SYNC_WAITS
 * sync points. */
static bool wait_cell_ok(int64_t wait, uint32_t count, bool present, const int64_t *d, uint32_t k)
{
    if (wait == -1 && count == 0)
        return true;
    return present && in_range(wait, 0, d[k] + d[k + 1]) && count >= 1 &&
           count <= SF_MAX_SYNC_WAITS;
}

/* The dense rows' sync waits (after the rows themselves, which bound them):
 * none, or one wait and one count per cell and synchronizing stage. */
static int decode_dense_waits(const Stagefrontier__DenseRows *o, sf_summary *s)
{
    sf_dense *d = s->dense;
    size_t J = (size_t)__builtin_popcountll(s->schema.sync_mask), S = s->schema.n_stages;
    size_t cells = (size_t)s->n_steps * d->n_ranks;
    if (o->n_sync_wait_ns == 0 && o->n_sync_waits == 0)
        return 0;
    if (J == 0 || cells == 0 || o->n_sync_wait_ns != cells * J || o->n_sync_waits != cells * J)
        return -EBADMSG;
    for (size_t c = 0; c < cells; c++) {
        size_t j = 0;
        for (uint64_t m = s->schema.sync_mask; m; m &= m - 1, j++)
            if (!wait_cell_ok(o->sync_wait_ns[c * J + j], o->sync_waits[c * J + j],
                              d->present[c] != 0, &d->d[c * S], (uint32_t)__builtin_ctzll(m)))
                return -EBADMSG;
    }
    d->sync_wait = malloc(cells * 2 * J * sizeof *d->sync_wait);
    if (d->sync_wait == NULL)
        return -ENOMEM;
    for (size_t c = 0; c < cells; c++)
        for (size_t j = 0; j < J; j++) {
            d->sync_wait[c * 2 * J + j] = o->sync_wait_ns[c * J + j];
            d->sync_wait[c * 2 * J + J + j] = o->sync_waits[c * J + j];
        }
    return 0;
}

static int decode_dense(const Stagefrontier__DenseRows *o, sf_summary *s)
{
    uint32_t world = s->meta.world_size;
    size_t S = s->schema.n_stages;
    if (o->n_ranks == 0 || o->n_ranks > world || o->n_roles != o->n_ranks)
        return -EBADMSG;
    uint64_t cells = (uint64_t)s->n_steps * o->n_ranks;
    if (o->n_d != cells * S || !o->has_present || o->present.len != cells)
        return -EBADMSG;
    /* The dense ranks are exactly the covered ranks, and each step has a
     * row for exactly the ranks it counts. */
    if (o->n_ranks != sf_summary_covered_ranks(s))
        return -EBADMSG;
    for (size_t i = 0; i < o->n_ranks; i++)
        if (o->ranks[i] >= world || (i > 0 && o->ranks[i] <= o->ranks[i - 1]) ||
            !covered(s, o->ranks[i]) || !sf_str_len_ok(o->roles[i], 0, SF_MAX_NAME_LEN))
            return -EBADMSG;
    for (uint32_t t = 0; t < s->n_steps; t++) {
        uint32_t present = 0;
        for (size_t r = 0; r < o->n_ranks; r++) {
            uint8_t p = o->present.data[(size_t)t * o->n_ranks + r];
            if (p > 1)
                return -EBADMSG;
            present += p;
        }
        if (present != s->steps[t].n_ranks)
            return -EBADMSG;
    }
    if (!durations_ok(o->d, o->n_d))
        return -EBADMSG;
    sf_dense *d = calloc(1, sizeof *d);
    if (d == NULL)
        return -ENOMEM;
    s->dense = d;
    d->ranks = malloc(o->n_ranks * sizeof *d->ranks);
    d->roles = calloc(o->n_ranks, sizeof *d->roles);
    d->d = malloc(o->n_d ? o->n_d * sizeof *d->d : 1);
    d->present = malloc(cells ? cells : 1);
    if (!d->ranks || !d->roles || !d->d || !d->present)
        return -ENOMEM;
    d->n_ranks = (uint32_t)o->n_ranks;
    memcpy(d->ranks, o->ranks, o->n_ranks * sizeof *d->ranks);
    for (size_t i = 0; i < o->n_ranks; i++)
        if ((d->roles[i] = strdup(o->roles[i])) == NULL)
            return -ENOMEM;
    memcpy(d->d, o->d, o->n_d * sizeof *d->d);
    memcpy(d->present, o->present.data, cells);
    return decode_dense_waits(o, s);
}

/* One step's top-2 of issue lags: absent, one rank, or two distinct ranks,
 * all covered, as many as the rows that carried a mark. */
static bool comm_top2_ok(const sf_top2 *t, uint32_t marked, const sf_summary *s)
{
    bool none1 = t->v1 == INT64_MIN && t->r1 == SF_NO_RANK;
    bool none2 = t->v2 == INT64_MIN && t->r2 == SF_NO_RANK;
    if (none1)
        return none2 && marked == 0;
    if (!in_range(t->v1, 0, SF_MAX_DURATION_NS) || !covered(s, t->r1))
        return false;
    if (none2)
        return marked == 1;
    return marked >= 2 && in_range(t->v2, 0, t->v1) && covered(s, t->r2) && t->r2 != t->r1;
}

/* A rank's maximum and median lag: both absent, or 0 <= median <= max. */
static bool comm_rank_ok(int64_t max, int64_t median)
{
    if (max == SF_NULL_NS || median == SF_NULL_NS)
        return max == median;
    return in_range(max, 0, SF_MAX_DURATION_NS) && in_range(median, 0, max);
}

static int comm_shape_ok(const Stagefrontier__CommSummary *o, const sf_summary *s, size_t J,
                         uint64_t n_covered)
{
    size_t T = o->n_steps, R = o->n_ranks;
    if (T > SF_MAX_WINDOW_STEPS || R > n_covered || o->n_lag_top2 != 2 * T * J ||
        o->n_lag_top2_ranks != 2 * T * J || o->n_marked != T * J || o->n_rank_max != R * J ||
        o->n_rank_median != R * J || o->marked_rows > o->rows || o->rows > (uint64_t)T * n_covered)
        return -EBADMSG;
    for (size_t t = 0; t < T; t++)
        if (o->steps[t] < 0 || (t > 0 && o->steps[t] <= o->steps[t - 1]))
            return -EBADMSG;
    for (size_t i = 0; i < R; i++)
        if ((i > 0 && o->ranks[i] <= o->ranks[i - 1]) || !covered(s, o->ranks[i]))
            return -EBADMSG;
    for (size_t i = 0; i < T * J; i++)
        if (o->marked[i] > n_covered)
            return -EBADMSG;
    for (size_t i = 0; i < R * J; i++)
        if (!comm_rank_ok(o->rank_max[i], o->rank_median[i]))
            return -EBADMSG;
    return 0;
}

static int decode_comm(const Stagefrontier__CommSummary *o, sf_summary *s)
{
    if (s->schema.sync_mask == 0)
        return -EBADMSG; /* a communication part without synchronizing stages */
    size_t J = (size_t)__builtin_popcountll(s->schema.sync_mask);
    int r;
    if ((r = comm_shape_ok(o, s, J, sf_summary_covered_ranks(s))) < 0)
        return r;
    for (size_t i = 0; i < o->n_steps * J; i++) {
        sf_top2 t = {o->lag_top2[2 * i], o->lag_top2[2 * i + 1], o->lag_top2_ranks[2 * i],
                     o->lag_top2_ranks[2 * i + 1]};
        if (!comm_top2_ok(&t, o->marked[i], s))
            return -EBADMSG;
    }
    sf_comm_summary *c = NULL;
    if ((r = sf_comm_summary_alloc(&s->schema, (uint32_t)o->n_steps, (uint32_t)o->n_ranks, &c)) < 0)
        return r;
    for (size_t i = 0; i < o->n_steps * J; i++)
        c->lag_top2[i] = (sf_top2){o->lag_top2[2 * i], o->lag_top2[2 * i + 1],
                                   o->lag_top2_ranks[2 * i], o->lag_top2_ranks[2 * i + 1]};
    memcpy(c->steps, o->steps, o->n_steps * sizeof *c->steps);
    memcpy(c->marked, o->marked, o->n_marked * sizeof *c->marked);
    memcpy(c->ranks, o->ranks, o->n_ranks * sizeof *c->ranks);
    memcpy(c->rank_max, o->rank_max, o->n_rank_max * sizeof *c->rank_max);
    memcpy(c->rank_median, o->rank_median, o->n_rank_median * sizeof *c->rank_median);
    c->rows = o->rows;
    c->marked_rows = o->marked_rows;
    s->comm = c;
    return 0;
}

/* ---- the cohort part ---------------------------------------------------- */

struct coh_id {
    uint32_t pp;
    uint64_t key;
};

static int coh_cmp(struct coh_id a, struct coh_id b)
{
    if (a.pp != b.pp)
        return a.pp < b.pp ? -1 : 1;
    return (a.key > b.key) - (a.key < b.key);
}

static int64_t coh_find(const Stagefrontier__CohortSummary *o, struct coh_id id)
{
    size_t lo = 0, hi = o->n_cohort_pp;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (coh_cmp((struct coh_id){o->cohort_pp[mid], o->cohort_key[mid]}, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->n_cohort_pp &&
                   coh_cmp((struct coh_id){o->cohort_pp[lo], o->cohort_key[lo]}, id) == 0
               ? (int64_t)lo
               : -1;
}

/* Sizes, order, coverage and every rank's coordinates; *members[q] counts
 * cohort q's ranks and of[i] is rank i's cohort. */
static int cohort_shape_ok(const Stagefrontier__CohortSummary *o, const sf_summary *s,
                           uint32_t *members, uint32_t *of)
{
    size_t R = o->n_ranks, K = o->n_cohort_pp, T = o->n_steps, S = s->schema.n_stages;
    uint64_t cells = (uint64_t)T * K * S;
    if (R > sf_summary_covered_ranks(s) || o->n_coords != R * COORD_WORDS || o->n_cohort_key != K ||
        K > R || T > SF_MAX_WINDOW_STEPS || cells > SF_COHORT_PART_MAX_CELLS ||
        o->n_count != T * K || o->n_prefix_top2 != 2 * cells || o->n_prefix_top2_ranks != 2 * cells)
        return -EBADMSG;
    for (size_t q = 1; q < K; q++)
        if (coh_cmp((struct coh_id){o->cohort_pp[q - 1], o->cohort_key[q - 1]},
                    (struct coh_id){o->cohort_pp[q], o->cohort_key[q]}) >= 0)
            return -EBADMSG;
    for (size_t t = 0; t < T; t++)
        if (o->steps[t] < 0 || (t > 0 && o->steps[t] <= o->steps[t - 1]))
            return -EBADMSG;
    for (size_t i = 0; i < R; i++) {
        sf_parallel p;
        coords_get(o->coords + i * COORD_WORDS, &p);
        uint64_t world = sf_parallel_world(&p);
        if ((i > 0 && o->ranks[i] <= o->ranks[i - 1]) || !covered(s, o->ranks[i]) ||
            p.declared == 0 || world == 0 || sf_parallel_check(&p, (uint32_t)world, NULL) < 0)
            return -EBADMSG;
        int64_t q = coh_find(o, (struct coh_id){p.index[SF_PAR_PP], sf_parallel_cohort(&p)});
        if (q < 0)
            return -EBADMSG;
        of[i] = (uint32_t)q;
        members[q]++;
    }
    for (size_t q = 0; q < K; q++)
        if (members[q] == 0)
            return -EBADMSG; /* a cohort without a rank */
    return 0;
}

static bool cohort_rank_in(const Stagefrontier__CohortSummary *o, const uint32_t *of, uint32_t q,
                           uint32_t rank)
{
    size_t lo = 0, hi = o->n_ranks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->ranks[mid] < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->n_ranks && o->ranks[lo] == rank && of[lo] == q;
}

/* One boundary's top-2 in a cohort: absent with no row, one rank with one,
 * two distinct ranks of the cohort with more, v2 <= v1, prefixes in bounds. */
static bool cohort_top2_ok(const Stagefrontier__CohortSummary *o, const uint32_t *of, uint32_t q,
                           uint32_t count, const sf_top2 *t)
{
    bool none1 = t->v1 == INT64_MIN && t->r1 == SF_NO_RANK;
    bool none2 = t->v2 == INT64_MIN && t->r2 == SF_NO_RANK;
    if (none1)
        return none2 && count == 0;
    if (!in_range(t->v1, 0, PREFIX_MAX) || !cohort_rank_in(o, of, q, t->r1))
        return false;
    if (none2)
        return count == 1;
    return count >= 2 && in_range(t->v2, 0, t->v1) && t->r2 != t->r1 &&
           cohort_rank_in(o, of, q, t->r2);
}

static int decode_cohort_checked(const Stagefrontier__CohortSummary *o, sf_summary *s,
                                 uint32_t *members, uint32_t *of)
{
    int r = cohort_shape_ok(o, s, members, of);
    if (r < 0)
        return r;
    size_t K = o->n_cohort_pp, T = o->n_steps, S = s->schema.n_stages;
    for (size_t t = 0; t < T; t++)
        for (size_t q = 0; q < K; q++) {
            size_t cell = t * K + q;
            if (o->count[cell] > members[q])
                return -EBADMSG;
            for (size_t j = 0; j < S; j++) {
                size_t i = cell * S + j;
                sf_top2 top = {o->prefix_top2[2 * i], o->prefix_top2[2 * i + 1],
                               o->prefix_top2_ranks[2 * i], o->prefix_top2_ranks[2 * i + 1]};
                if (!cohort_top2_ok(o, of, (uint32_t)q, o->count[cell], &top))
                    return -EBADMSG;
            }
        }
    sf_cohort_summary *c = NULL;
    if ((r = sf_cohort_summary_alloc((uint32_t)S, (uint32_t)o->n_ranks, (uint32_t)K, (uint32_t)T,
                                     &c)) < 0)
        return r == -EINVAL ? -EBADMSG : r;
    memcpy(c->ranks, o->ranks, o->n_ranks * sizeof *c->ranks);
    for (size_t i = 0; i < o->n_ranks; i++)
        coords_get(o->coords + i * COORD_WORDS, &c->parallel[i]);
    memcpy(c->cohort_pp, o->cohort_pp, K * sizeof *c->cohort_pp);
    memcpy(c->cohort_key, o->cohort_key, K * sizeof *c->cohort_key);
    memcpy(c->steps, o->steps, T * sizeof *c->steps);
    memcpy(c->count, o->count, T * K * sizeof *c->count);
    for (size_t i = 0; i < T * K * S; i++)
        c->prefix_top2[i] = (sf_top2){o->prefix_top2[2 * i], o->prefix_top2[2 * i + 1],
                                      o->prefix_top2_ranks[2 * i], o->prefix_top2_ranks[2 * i + 1]};
    s->cohort = c;
    return 0;
}

static int decode_cohort(const Stagefrontier__Summary *m, sf_summary *s)
{
    uint64_t n_covered = sf_summary_covered_ranks(s);
    if (m->parallel_rows > (uint64_t)m->n_steps * n_covered ||
        (m->parallel_rows > 0) != m->parallel_declared ||
        (m->cohort != NULL && !m->parallel_declared))
        return -EBADMSG;
    s->parallel_declared = m->parallel_declared;
    s->parallel_conflict = m->parallel_conflict;
    s->parallel_rows = m->parallel_rows;
    if (m->cohort == NULL)
        return 0;
    const Stagefrontier__CohortSummary *o = m->cohort;
    if (o->n_ranks > n_covered || o->n_cohort_pp > o->n_ranks)
        return -EBADMSG;
    uint32_t *members = calloc(o->n_cohort_pp + 1, sizeof *members);
    uint32_t *of = malloc((o->n_ranks + 1) * sizeof *of);
    int r = members && of ? decode_cohort_checked(o, s, members, of) : -ENOMEM;
    free(members);
    free(of);
    return r;
}

static int decode_body(const Stagefrontier__Summary *m, sf_summary *s)
{
    size_t S = s->schema.n_stages, C = s->cand.n;
    int r = decode_coverage(m, s);
    if (r < 0)
        return r;
    uint64_t n_covered = sf_summary_covered_ranks(s);
    for (size_t i = 0; i < m->n_steps; i++) {
        if (i > 0 && m->steps[i]->step <= m->steps[i - 1]->step)
            return -EBADMSG;
        if ((r = decode_step(m->steps[i], &s->steps[i], S, C, s, n_covered)) < 0)
            return r;
    }
    if ((r = decode_roles(m, s)) < 0)
        return r;
    if ((m->has_event_cpu_ns && m->event_cpu_ns < 0) ||
        (m->has_event_gpu_ns && m->event_gpu_ns < 0) || m->event_ready > m->event_samples)
        return -EBADMSG;
    s->event_samples = m->event_samples;
    s->event_ready = m->event_ready;
    s->event_cpu_ns = m->event_cpu_ns;
    s->event_gpu_ns = m->event_gpu_ns;
    s->merge_conflicts = m->merge_conflicts;
    if (m->comm != NULL && (r = decode_comm(m->comm, s)) < 0)
        return r;
    if ((r = decode_cohort(m, s)) < 0)
        return r;
    if (m->dense != NULL)
        return decode_dense(m->dense, s);
    return 0;
}

int sfd_peer_summary_decode(const Stagefrontier__Summary *m, sf_summary **ret,
                            sfd_window_key *ret_key)
{
    if (m == NULL || ret == NULL)
        return -EINVAL;
    sfd_window_key key;
    int r = sfd_peer_window_key_make(m->job_id, m->has_owner_uid, m->owner_uid, m->has_incarnation,
                                     m->incarnation, m->window, m->segment, &key);
    if (r < 0)
        return r;
    if (m->n_steps > SF_MAX_WINDOW_STEPS)
        return -EBADMSG;
    sf_window_meta meta;
    sf_schema schema;
    if ((r = decode_meta(m, &meta)) < 0)
        return r;
    if ((r = decode_schema(m, &schema)) < 0)
        return r;
    sf_summary *s = NULL;
    r = sf_summary_alloc(&schema, &meta, (uint32_t)m->n_steps, &s);
    sf_schema_clear(&schema);
    if (r < 0)
        return r;
    if ((r = decode_body(m, s)) < 0) {
        sf_summary_free(s);
        return r;
    }
    if (ret_key != NULL)
        *ret_key = key;
    *ret = s;
    return 0;
}

int sfd_peer_summary_pack(const sf_summary *s, const sfd_window_key *key, bool resent,
                          uint32_t origin, uint8_t **ret_buf, size_t *ret_len)
{
    Stagefrontier__Summary *m = NULL;
    int r = sfd_peer_summary_encode(s, key, &m);
    if (r < 0)
        return r;
    m->has_resent = true;
    m->resent = resent;
    m->has_origin_id = origin != 0;
    m->origin_id = origin;
    r = sfd_peer_pack(&m->base, ret_buf, ret_len);
    sfd_peer_summary_msg_free(m);
    return r;
}

int sfd_peer_summary_unpack(const uint8_t *buf, size_t len, sf_summary **ret,
                            sfd_window_key *ret_key, bool *ret_resent)
{
    if (buf == NULL || len > SFD_PEER_FRAME_MAX)
        return -EBADMSG;
    Stagefrontier__Summary *m = stagefrontier__summary__unpack(NULL, len, buf);
    if (m == NULL)
        return -EBADMSG;
    sf_summary *s = NULL;
    sfd_window_key key;
    int r = sfd_peer_summary_decode(m, &s, &key);
    bool resent = m->resent;
    stagefrontier__summary__free_unpacked(m, NULL);
    if (r < 0)
        return r;
    *ret = s;
    if (ret_key != NULL)
        *ret_key = key;
    if (ret_resent != NULL)
        *ret_resent = resent;
    return 0;
}

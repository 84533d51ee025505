/*
 * Unit tests of the summary codec: a round trip through the wire form is
 * byte-identical and report-identical, node summaries merged after the trip
 * give exactly the single-process report of the whole window, and every
 * malformed field is refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "peer.h"

#define WORLD 8
#define STEPS 24
#define S 6

typedef struct fixture {
    sf_schema schema;
    sf_window_meta meta;
    sf_gates gates;
    int64_t d[STEPS * WORLD * S];
    sf_row rows[STEPS * WORLD];
    size_t n_rows;
} fixture;

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005u + 1442695040888963407u;
    return *x >> 33;
}

static fixture *fixture_new(void)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(sf_schema_init_default(&f->schema, 1), 0);
    sf_gates_default(&f->gates);
    f->meta = (sf_window_meta){.index = 0, .first_step = 20, .last_step = 119, .world_size = WORLD};
    uint64_t x = 42;
    for (uint32_t t = 0; t < STEPS; t++) {
        for (uint32_t r = 0; r < WORLD; r++) {
            int64_t *d = &f->d[(t * WORLD + r) * S];
            for (uint32_t s = 0; s < S; s++)
                d[s] = 1000000 + (int64_t)(lcg(&x) % 5000000);
            if (r == 5)
                d[0] += 20000000; /* a slow data loader on rank 5 */
            sf_row *row = &f->rows[f->n_rows++];
            *row = (sf_row){.step = 20 + t, .rank = r, .d = d, .role = r < 4 ? "a" : "b"};
        }
    }
    return f;
}

static void fixture_free(fixture *f)
{
    sf_schema_clear(&f->schema);
    free(f);
}

/* Summary of the ranks in [lo, hi] only. */
static sf_summary *node_summary(fixture *f, uint32_t lo, uint32_t hi, bool dense)
{
    sf_row sel[STEPS * WORLD];
    size_t n = 0;
    for (size_t i = 0; i < f->n_rows; i++)
        if (f->rows[i].rank >= lo && f->rows[i].rank <= hi)
            sel[n++] = f->rows[i];
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&f->schema, &f->meta, sel, n, dense, &s), 0);
    return s;
}

/* The key of s's window of job-1, owned by uid, in incarnation inc. */
static sfd_window_key key_of(const sf_summary *s, uint32_t uid, uint32_t inc)
{
    sfd_window_key k = {.job = "job-1",
                        .uid = uid,
                        .incarnation = inc,
                        .window = s->meta.index,
                        .segment = s->meta.segment};
    return k;
}

static sf_summary *round_trip(const sf_summary *s)
{
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    sfd_window_key in = key_of(s, 1000, 3);
    assert_int_equal(sfd_peer_summary_pack(s, &in, false, 1, &buf, &len), 0);
    sf_summary *out = NULL;
    sfd_window_key key;
    bool resent = true;
    assert_int_equal(sfd_peer_summary_unpack(buf, len, &out, &key, &resent), 0);
    assert_string_equal(key.job, "job-1");
    assert_int_equal(key.uid, 1000);
    assert_int_equal(key.incarnation, 3);
    assert_int_equal(key.window, s->meta.index);
    assert_true(sfd_window_key_equal(&key, &in));
    assert_false(resent);
    /* decoding then encoding again gives the same bytes */
    assert_int_equal(sfd_peer_summary_pack(out, &key, false, 1, &buf2, &len2), 0);
    assert_int_equal(len, len2);
    assert_memory_equal(buf, buf2, len);
    free(buf);
    free(buf2);
    return out;
}

static void assert_units_equal(const sf_unit_figures *a, const sf_unit_figures *b)
{
    assert_int_equal(a->advance_ns, b->advance_ns);
    assert_int_equal(a->max_ns, b->max_ns);
    assert_int_equal(a->mean_ns, b->mean_ns);
    assert_int_equal(a->spread_ns, b->spread_ns);
    assert_int_equal(a->slowest_rank_ns, b->slowest_rank_ns);
    assert_int_equal(a->rank0_ns, b->rank0_ns);
    assert_int_equal(a->lag_ns, b->lag_ns);
    assert_int_equal(a->gain_rank_median_ns, b->gain_rank_median_ns);
    assert_int_equal(a->gain_cohort_median_ns, b->gain_cohort_median_ns);
    assert_int_equal(a->leader_rank, b->leader_rank);
    assert_int_equal(a->leader_steps, b->leader_steps);
}

static void assert_reports_equal(const sf_report *a, const sf_report *b)
{
    assert_true(a->exposed_total_ns == b->exposed_total_ns);
    assert_int_equal(a->steps, b->steps);
    assert_int_equal(a->ranks, b->ranks);
    assert_int_equal(a->missing_ranks, b->missing_ranks);
    assert_int_equal(a->labels, b->labels);
    assert_int_equal(a->downgrades, b->downgrades);
    assert_int_equal(a->n_routing, b->n_routing);
    assert_int_equal(a->n_suspects, b->n_suspects);
    for (uint32_t i = 0; i < a->schema.n_stages; i++)
        assert_units_equal(&a->stages[i], &b->stages[i]);
    for (uint32_t i = 0; i < a->schema.n_groups; i++)
        assert_units_equal(&a->groups[i], &b->groups[i]);
    for (uint32_t i = 0; i < a->n_routing; i++)
        assert_int_equal(a->routing_order[i], b->routing_order[i]);
}

static void check_merge_exact(bool dense)
{
    fixture *f = fixture_new();
    sf_summary *full = node_summary(f, 0, WORLD - 1, dense);
    sf_summary *parts[3] = {node_summary(f, 0, 2, dense), node_summary(f, 3, 5, dense),
                            node_summary(f, 6, 7, dense)};
    sf_summary *wire[3];
    for (int i = 0; i < 3; i++)
        wire[i] = round_trip(parts[i]);
    /* merge in a different order than built: merging is commutative */
    sf_summary *m = NULL;
    assert_int_equal(sf_summary_clone(wire[2], &m), 0);
    assert_int_equal(sf_summary_merge(m, wire[0]), 0);
    assert_int_equal(sf_summary_merge(m, wire[1]), 0);
    assert_int_equal(sf_summary_merge(m, wire[1]), -EALREADY);
    assert_int_equal(sf_summary_covered_ranks(m), WORLD);
    sf_report *ra = NULL, *rb = NULL;
    assert_int_equal(sf_report_compute(full, &f->gates, &ra), 0);
    assert_int_equal(sf_report_compute(m, &f->gates, &rb), 0);
    assert_reports_equal(ra, rb);
    assert_true(ra->stages[0].advance_ns > 0);
    assert_int_equal(ra->stages[0].leader_rank, 5);
    sf_report_free(ra);
    sf_report_free(rb);
    sf_summary_free(m);
    for (int i = 0; i < 3; i++) {
        sf_summary_free(parts[i]);
        sf_summary_free(wire[i]);
    }
    sf_summary_free(full);
    fixture_free(f);
}

static void test_merge_exact_dense(void **state)
{
    (void)state;
    check_merge_exact(true);
}

static void test_merge_exact_mergeable(void **state)
{
    (void)state;
    check_merge_exact(false);
}

typedef void (*mutator)(Stagefrontier__Summary *m);

static void m_dmax_len(Stagefrontier__Summary *m)
{
    m->steps[0]->n_dmax--;
}
static void m_top2_rank(Stagefrontier__Summary *m)
{
    m->steps[1]->top2_ranks[0] = WORLD;
}
static void m_hash(Stagefrontier__Summary *m)
{
    m->schema_hash ^= 1;
}
static void m_world(Stagefrontier__Summary *m)
{
    m->world_size = 0;
}
static void m_flags(Stagefrontier__Summary *m)
{
    m->flags = 0x100;
}
static void m_order(Stagefrontier__Summary *m)
{
    m->steps[1]->step = m->steps[0]->step;
}
static void m_cov(Stagefrontier__Summary *m)
{
    m->coverage[1] = WORLD;
}
static void m_cov_odd(Stagefrontier__Summary *m)
{
    m->n_coverage = 1;
}
static void m_neg(Stagefrontier__Summary *m)
{
    m->steps[0]->dmin[2] = -1;
}
static void m_big(Stagefrontier__Summary *m)
{
    m->steps[0]->dmax[2] = SF_MAX_DURATION_NS + 1;
}
static void m_job(Stagefrontier__Summary *m)
{
    m->job_id = "bad job";
}
static void m_clip(Stagefrontier__Summary *m)
{
    m->steps[0]->n_clipped_end = 0;
}
static void m_dense_len(Stagefrontier__Summary *m)
{
    m->dense->n_d--;
}
static void m_dense_present(Stagefrontier__Summary *m)
{
    m->dense->present.data[0] = 7;
}
static void m_roles(Stagefrontier__Summary *m)
{
    m->n_roles = SF_MAX_ROLES + 1;
}

static void test_hostile_fields(void **state)
{
    (void)state;
    static const mutator muts[] = {m_dmax_len, m_top2_rank, m_hash,      m_world,         m_flags,
                                   m_order,    m_cov,       m_cov_odd,   m_neg,           m_big,
                                   m_job,      m_clip,      m_dense_len, m_dense_present, m_roles};
    fixture *f = fixture_new();
    sf_summary *s = node_summary(f, 0, 3, true);
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        Stagefrontier__Summary *m = NULL;
        sfd_window_key key = key_of(s, 1000, 1);
        assert_int_equal(sfd_peer_summary_encode(s, &key, &m), 0);
        /* copies of the arrays we mutate, so the summary stays intact */
        int64_t *dmin = malloc(S * sizeof *dmin), *dmax = malloc(S * sizeof *dmax);
        uint8_t *present = malloc(m->dense->present.len);
        memcpy(dmin, m->steps[0]->dmin, S * sizeof *dmin);
        memcpy(dmax, m->steps[0]->dmax, S * sizeof *dmax);
        memcpy(present, m->dense->present.data, m->dense->present.len);
        m->steps[0]->dmin = dmin;
        m->steps[0]->dmax = dmax;
        m->dense->present.data = present;
        size_t roles = m->n_roles;
        char *many[SF_MAX_ROLES + 1];
        if (muts[i] == m_roles) {
            for (int k = 0; k <= SF_MAX_ROLES; k++)
                many[k] = "r";
            m->roles = many;
        }
        (void)roles;
        muts[i](m);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(sfd_peer_pack(&m->base, &buf, &len), 0);
        sf_summary *out = NULL;
        int r = sfd_peer_summary_unpack(buf, len, &out, NULL, NULL);
        if (r != -EBADMSG)
            print_error("mutator %zu accepted (%d)\n", i, r);
        assert_int_equal(r, -EBADMSG);
        assert_null(out);
        free(buf);
        free(dmin);
        free(dmax);
        free(present);
        sfd_peer_summary_msg_free(m);
    }
    /* garbage and truncation */
    uint8_t junk[64];
    memset(junk, 0xff, sizeof junk);
    sf_summary *out = NULL;
    assert_int_equal(sfd_peer_summary_unpack(junk, sizeof junk, &out, NULL, NULL), -EBADMSG);
    uint8_t *buf = NULL;
    size_t len = 0;
    sfd_window_key key = key_of(s, 1000, 1);
    assert_int_equal(sfd_peer_summary_pack(s, &key, false, 1, &buf, &len), 0);
    for (size_t cut = 0; cut < len; cut += len / 17 + 1)
        assert_true(sfd_peer_summary_unpack(buf, cut, &out, NULL, NULL) < 0);
    free(buf);
    sf_summary_free(s);
    fixture_free(f);
}

/* ---- the communication part ---------------------------------------------- */

#define MS INT64_C(1000000)
#define US INT64_C(1000)
#define CS 5 /* data, forward, backward, backward.sync_wait, other */

typedef struct comm_fixture {
    sf_schema schema;
    sf_window_meta meta;
    sf_gates gates;
    int64_t d[STEPS * WORLD * CS];
    int64_t lag[STEPS * WORLD];
    sf_row rows[STEPS * WORLD];
} comm_fixture;

/* Every rank arrives at its backward all-reduce on time; rank 6 hands it to
 * the backend 5 ms late (the others 20..80 us), and everyone leaves 1 ms
 * after the last issue. */
static comm_fixture *comm_fixture_new(void)
{
    static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                           "model.backward_cpu_wall", "step.other_cpu_wall"};
    comm_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(sf_schema_init_sync(&f->schema, 1, 4, recorded, NULL, 1, 1u << 2), 0);
    sf_gates_default(&f->gates);
    f->meta = (sf_window_meta){.index = 0, .first_step = 20, .last_step = 119, .world_size = WORLD};
    uint64_t x = 7;
    for (uint32_t t = 0; t < STEPS; t++) {
        int64_t start = 0;
        for (uint32_t r = 0; r < WORLD; r++) {
            int64_t *d = &f->d[(t * WORLD + r) * CS];
            d[0] = 1 * MS, d[1] = 10 * MS, d[2] = 20 * MS + (int64_t)(lcg(&x) % MS), d[4] = 2 * MS;
            f->lag[t * WORLD + r] = r == 6 ? 5 * MS : 20 * US + (int64_t)(lcg(&x) % (60 * US));
            int64_t issued = d[0] + d[1] + d[2] + f->lag[t * WORLD + r];
            start = issued > start ? issued : start;
        }
        for (uint32_t r = 0; r < WORLD; r++) {
            int64_t *d = &f->d[(t * WORLD + r) * CS];
            d[3] = start + 1 * MS - (d[0] + d[1] + d[2]);
            f->rows[t * WORLD + r] = (sf_row){
                .step = 20 + t, .rank = r, .d = d, .role = "", .issue_lag = &f->lag[t * WORLD + r]};
        }
    }
    return f;
}

static void comm_fixture_free(comm_fixture *f)
{
    sf_schema_clear(&f->schema);
    free(f);
}

static sf_summary *comm_node_summary(comm_fixture *f, uint32_t lo, uint32_t hi, bool dense)
{
    sf_row sel[STEPS * WORLD];
    size_t n = 0;
    for (size_t i = 0; i < STEPS * WORLD; i++)
        if (f->rows[i].rank >= lo && f->rows[i].rank <= hi)
            sel[n++] = f->rows[i];
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&f->schema, &f->meta, sel, n, dense, &s), 0);
    assert_non_null(s->comm);
    return s;
}

static void assert_comm_equal(const sf_comm_verdict *a, const sf_comm_verdict *b)
{
    assert_int_equal(a->visibility, b->visibility);
    assert_int_equal(a->rows, b->rows);
    assert_int_equal(a->marked_rows, b->marked_rows);
    assert_int_equal(a->present, b->present);
    assert_int_equal(a->rank, b->rank);
    assert_int_equal(a->sync_stage, b->sync_stage);
    assert_int_equal(a->led_steps, b->led_steps);
    assert_int_equal(a->eligible_steps, b->eligible_steps);
    assert_true(a->median_lag_ns == b->median_lag_ns);
    assert_true(a->others_median_ns == b->others_median_ns);
}

/* Node summaries of disjoint ranks, sent through the wire and merged at the
 * root, give the communication verdict of the single-process window. */
static void test_comm_merge_exact(void **state)
{
    (void)state;
    comm_fixture *f = comm_fixture_new();
    sf_summary *full = comm_node_summary(f, 0, WORLD - 1, true);
    sf_summary *parts[3] = {comm_node_summary(f, 0, 2, false), comm_node_summary(f, 3, 5, false),
                            comm_node_summary(f, 6, 7, false)};
    sf_summary *wire[3];
    for (int i = 0; i < 3; i++) {
        wire[i] = round_trip(parts[i]);
        assert_non_null(wire[i]->comm);
        assert_int_equal(wire[i]->comm->n_ranks, parts[i]->comm->n_ranks);
        assert_int_equal(wire[i]->comm->marked_rows, parts[i]->comm->marked_rows);
    }
    sf_summary *m = NULL;
    assert_int_equal(sf_summary_clone(wire[2], &m), 0);
    assert_int_equal(sf_summary_merge(m, wire[0]), 0);
    assert_int_equal(sf_summary_merge(m, wire[1]), 0);
    sf_report *ra = NULL, *rb = NULL;
    assert_int_equal(sf_report_compute(full, &f->gates, &ra), 0);
    assert_int_equal(sf_report_compute(m, &f->gates, &rb), 0);
    assert_int_equal(ra->comm.visibility, SF_COMM_SEEN);
    assert_true(ra->comm.present);
    assert_int_equal(ra->comm.rank, 6);
    assert_int_equal(ra->comm.led_steps, STEPS);
    assert_comm_equal(&ra->comm, &rb->comm);
    sf_report_free(ra);
    sf_report_free(rb);
    sf_summary_free(m);
    for (int i = 0; i < 3; i++) {
        sf_summary_free(parts[i]);
        sf_summary_free(wire[i]);
    }
    sf_summary_free(full);
    comm_fixture_free(f);
}

/* A node that sends no communication part (an older peer): the merge keeps
 * none, and the root says lateness cannot be seen rather than naming a rank
 * from part of the job. */
static void test_comm_missing_part(void **state)
{
    (void)state;
    comm_fixture *f = comm_fixture_new();
    sf_summary *a = comm_node_summary(f, 0, 3, false), *b = comm_node_summary(f, 4, 7, false);
    sf_summary *wa = round_trip(a), *wb = round_trip(b);
    sf_comm_summary_free(wb->comm);
    wb->comm = NULL;
    assert_int_equal(sf_summary_merge(wa, wb), 0);
    assert_null(wa->comm);
    sf_report *r = NULL;
    assert_int_equal(sf_report_compute(wa, &f->gates, &r), 0);
    assert_int_equal(r->comm.visibility, SF_COMM_NO_ISSUE_MARKS);
    assert_false(r->comm.present);
    sf_report_free(r);
    sf_summary_free(a);
    sf_summary_free(b);
    sf_summary_free(wa);
    sf_summary_free(wb);
    comm_fixture_free(f);
}

typedef void (*comm_mutator)(Stagefrontier__CommSummary *c);

static void c_top2_len(Stagefrontier__CommSummary *c)
{
    c->n_lag_top2--;
}
static void c_marked_len(Stagefrontier__CommSummary *c)
{
    c->n_marked++;
}
static void c_rank_max_len(Stagefrontier__CommSummary *c)
{
    c->n_rank_max = 0;
}
static void c_step_order(Stagefrontier__CommSummary *c)
{
    c->steps[1] = c->steps[0];
}
static void c_step_neg(Stagefrontier__CommSummary *c)
{
    c->steps[0] = -1;
}
static void c_rank_uncovered(Stagefrontier__CommSummary *c)
{
    c->ranks[c->n_ranks - 1] = WORLD - 1; /* the node covers ranks 0..3 */
}
static void c_rank_order(Stagefrontier__CommSummary *c)
{
    c->ranks[1] = c->ranks[0];
}
static void c_lag_neg(Stagefrontier__CommSummary *c)
{
    c->lag_top2[0] = -2;
}
static void c_lag_big(Stagefrontier__CommSummary *c)
{
    c->lag_top2[0] = SF_MAX_DURATION_NS + 1;
}
static void c_lag_order(Stagefrontier__CommSummary *c)
{
    c->lag_top2[1] = c->lag_top2[0] + 1;
}
static void c_top2_rank(Stagefrontier__CommSummary *c)
{
    c->lag_top2_ranks[0] = WORLD;
}
static void c_top2_same(Stagefrontier__CommSummary *c)
{
    c->lag_top2_ranks[1] = c->lag_top2_ranks[0];
}
static void c_marked_big(Stagefrontier__CommSummary *c)
{
    c->marked[0] = 5; /* more marked rows than the 4 covered ranks */
}
static void c_marked_none(Stagefrontier__CommSummary *c)
{
    c->marked[0] = 0; /* a top-2 without a marked row */
}
static void c_median_over_max(Stagefrontier__CommSummary *c)
{
    c->rank_median[0] = c->rank_max[0] + 1;
}
static void c_half_null(Stagefrontier__CommSummary *c)
{
    c->rank_max[0] = SF_NULL_NS;
}
static void c_rows(Stagefrontier__CommSummary *c)
{
    c->marked_rows = c->rows + 1;
}
static void c_rows_big(Stagefrontier__CommSummary *c)
{
    c->rows = c->marked_rows = UINT64_MAX;
}

static void test_comm_hostile_fields(void **state)
{
    (void)state;
    static const comm_mutator muts[] = {
        c_top2_len,   c_marked_len,  c_rank_max_len,    c_step_order, c_step_neg,  c_rank_uncovered,
        c_rank_order, c_lag_neg,     c_lag_big,         c_lag_order,  c_top2_rank, c_top2_same,
        c_marked_big, c_marked_none, c_median_over_max, c_half_null,  c_rows,      c_rows_big};
    comm_fixture *f = comm_fixture_new();
    sf_summary *s = comm_node_summary(f, 0, 3, false);
    const sf_comm_summary *cs = s->comm;
    size_t cells = (size_t)cs->n_steps * cs->n_sync, rj = (size_t)cs->n_ranks * cs->n_sync;
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        Stagefrontier__Summary *m = NULL;
        sfd_window_key key = key_of(s, 1000, 1);
        assert_int_equal(sfd_peer_summary_encode(s, &key, &m), 0);
        assert_non_null(m->comm);
        Stagefrontier__CommSummary *c = m->comm;
        /* copies of the arrays we mutate, so the summary stays intact */
        int64_t *steps = malloc(cs->n_steps * sizeof *steps);
        int64_t *rmax = malloc(rj * sizeof *rmax), *rmed = malloc(rj * sizeof *rmed);
        uint32_t *ranks = malloc(cs->n_ranks * sizeof *ranks);
        uint32_t *marked = malloc(cells * sizeof *marked);
        memcpy(steps, c->steps, cs->n_steps * sizeof *steps);
        memcpy(rmax, c->rank_max, rj * sizeof *rmax);
        memcpy(rmed, c->rank_median, rj * sizeof *rmed);
        memcpy(ranks, c->ranks, cs->n_ranks * sizeof *ranks);
        memcpy(marked, c->marked, cells * sizeof *marked);
        c->steps = steps, c->rank_max = rmax, c->rank_median = rmed, c->ranks = ranks;
        c->marked = marked;
        muts[i](c);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(sfd_peer_pack(&m->base, &buf, &len), 0);
        sf_summary *out = NULL;
        int r = sfd_peer_summary_unpack(buf, len, &out, NULL, NULL);
        if (r != -EBADMSG)
            print_error("comm mutator %zu accepted (%d)\n", i, r);
        assert_int_equal(r, -EBADMSG);
        assert_null(out);
        free(buf);
        free(steps);
        free(rmax);
        free(rmed);
        free(ranks);
        free(marked);
        sfd_peer_summary_msg_free(m);
    }
    sf_summary_free(s);
    comm_fixture_free(f);
}

/* ---- the cohort part ---------------------------------------------------- */

/* 8 ranks, pp=0..3 x dp=0..1, each data-parallel pair leaving its gradient
 * all-reduce together; the pipeline's later stages do more forward work by
 * their role, and rank 5 (pipeline stage 2) is 8 ms slow in backward. */
#define CO_STAGES 5
typedef struct cohort_fixture {
    sf_schema schema;
    sf_window_meta meta;
    sf_gates gates;
    sf_parallel par[WORLD];
    int64_t d[STEPS * WORLD * CO_STAGES];
    sf_row rows[STEPS * WORLD];
} cohort_fixture;

static cohort_fixture *cohort_fixture_new(void)
{
    static const char *const rec[] = {"data", "forward", "backward", "other"};
    cohort_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(sf_schema_init_sync(&f->schema, 1, 4, rec, NULL, 1, 1u << 2), 0);
    sf_gates_default(&f->gates);
    f->meta = (sf_window_meta){.index = 0, .first_step = 20, .last_step = 119, .world_size = WORLD};
    for (uint32_t r = 0; r < WORLD; r++) {
        char text[32];
        snprintf(text, sizeof text, "pp=%u/4,dp=%u/2", r / 2, r % 2);
        assert_int_equal(sf_parallel_parse(text, &f->par[r], NULL, 0), 0);
    }
    uint64_t x = 7;
    for (uint32_t t = 0; t < STEPS; t++) {
        for (uint32_t r = 0; r < WORLD; r++) {
            int64_t *d = &f->d[(t * WORLD + r) * CO_STAGES];
            d[0] = 10000000 + (int64_t)(lcg(&x) % 1000000);
            d[1] = 40000000 + 10000000 * (r / 2) + (int64_t)(lcg(&x) % 1000000);
            d[2] = 60000000 + (r == 5 ? 8000000 : 0) + (int64_t)(lcg(&x) % 1000000);
            d[4] = 5000000;
        }
        for (uint32_t r = 0; r < WORLD; r += 2) {
            int64_t *a = &f->d[(t * WORLD + r) * CO_STAGES], *b = a + CO_STAGES;
            int64_t pa = a[0] + a[1] + a[2], pb = b[0] + b[1] + b[2], top = pa > pb ? pa : pb;
            a[3] = top - pa;
            b[3] = top - pb;
        }
        for (uint32_t r = 0; r < WORLD; r++)
            f->rows[t * WORLD + r] = (sf_row){.step = 20 + t,
                                              .rank = r,
                                              .d = &f->d[(t * WORLD + r) * CO_STAGES],
                                              .parallel = &f->par[r]};
    }
    return f;
}

static sf_summary *cohort_node_summary(cohort_fixture *f, uint32_t lo, uint32_t hi, bool dense)
{
    sf_row sel[STEPS * WORLD];
    size_t n = 0;
    for (size_t i = 0; i < STEPS * WORLD; i++)
        if (f->rows[i].rank >= lo && f->rows[i].rank <= hi)
            sel[n++] = f->rows[i];
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&f->schema, &f->meta, sel, n, dense, &s), 0);
    return s;
}

static void assert_cohort_reports_equal(const sf_report *a, const sf_report *b)
{
    assert_int_equal(a->cohorts, b->cohorts);
    assert_int_equal(a->n_cohorts, b->n_cohorts);
    assert_int_equal(a->labels, b->labels);
    assert_int_equal(a->straggler.present, b->straggler.present);
    assert_int_equal(a->straggler.rank, b->straggler.rank);
    assert_int_equal(a->straggler.arrived_last_steps, b->straggler.arrived_last_steps);
    assert_int_equal(a->straggler.median_lateness_ns, b->straggler.median_lateness_ns);
    assert_int_equal(a->n_suspects, b->n_suspects);
    for (uint32_t i = 0; i < a->n_suspects; i++)
        assert_int_equal(a->suspects[i].rank, b->suspects[i].rank);
    const sf_pipeline_view *x = &a->pipeline, *y = &b->pipeline;
    assert_int_equal(x->present, y->present);
    assert_int_equal(x->origin_pp, y->origin_pp);
    assert_int_equal(x->origin_rank, y->origin_rank);
    assert_int_equal(x->origin_stage, y->origin_stage);
    assert_int_equal(x->origin_steps, y->origin_steps);
    assert_int_equal(x->median_delay_ns, y->median_delay_ns);
    assert_int_equal(x->median_cost_ns, y->median_cost_ns);
    assert_memory_equal(x->stages, y->stages, x->n_stages * sizeof *x->stages);
}

/* Three nodes' summaries through the wire and merged: in both modes the
 * root's report applies the cohorts and names rank 5 as one node's report
 * of every row does, with the same pipeline view. */
static void test_cohort_merge_exact(void **state)
{
    (void)state;
    cohort_fixture *f = cohort_fixture_new();
    for (int dense = 0; dense < 2; dense++) {
        sf_summary *full = cohort_node_summary(f, 0, WORLD - 1, dense);
        sf_summary *parts[3] = {cohort_node_summary(f, 0, 2, dense),
                                cohort_node_summary(f, 3, 5, dense),
                                cohort_node_summary(f, 6, 7, dense)};
        sf_summary *wire[3];
        for (int i = 0; i < 3; i++) {
            wire[i] = round_trip(parts[i]);
            assert_non_null(wire[i]->cohort);
            assert_true(wire[i]->parallel_declared);
            assert_int_equal(wire[i]->parallel_rows, parts[i]->parallel_rows);
        }
        sf_summary *m = NULL;
        assert_int_equal(sf_summary_clone(wire[1], &m), 0);
        assert_int_equal(sf_summary_merge(m, wire[2]), 0);
        assert_int_equal(sf_summary_merge(m, wire[0]), 0);
        sf_report *ra = NULL, *rb = NULL;
        assert_int_equal(sf_report_compute(full, &f->gates, &ra), 0);
        assert_int_equal(sf_report_compute(m, &f->gates, &rb), 0);
        assert_int_equal(ra->cohorts, SF_COHORTS_APPLIED);
        assert_true(ra->straggler.present);
        assert_int_equal(ra->straggler.rank, 5);
        assert_true(ra->pipeline.origin);
        assert_int_equal(ra->pipeline.origin_pp, 2);
        assert_int_equal(ra->pipeline.origin_rank, 5);
        assert_int_equal(ra->pipeline.origin_stage, 2);
        assert_cohort_reports_equal(ra, rb);
        sf_report_free(ra);
        sf_report_free(rb);
        sf_summary_free(m);
        for (int i = 0; i < 3; i++) {
            sf_summary_free(parts[i]);
            sf_summary_free(wire[i]);
        }
        sf_summary_free(full);
    }
    sf_schema_clear(&f->schema);
    free(f);
}

typedef void (*cohort_mutator)(Stagefrontier__Summary *m);

static void k_count_len(Stagefrontier__Summary *m)
{
    m->cohort->n_count--;
}
static void k_coords_len(Stagefrontier__Summary *m)
{
    m->cohort->n_coords--;
}
static void k_top2_len(Stagefrontier__Summary *m)
{
    m->cohort->n_prefix_top2_ranks--;
}
static void k_index(Stagefrontier__Summary *m)
{
    m->cohort->coords[1] = 9; /* rank 0's pp index past its size */
}
static void k_undeclared(Stagefrontier__Summary *m)
{
    m->cohort->coords[0] = 0;
}
static void k_rank_order(Stagefrontier__Summary *m)
{
    m->cohort->ranks[1] = m->cohort->ranks[0];
}
static void k_rank_uncovered(Stagefrontier__Summary *m)
{
    m->cohort->ranks[m->cohort->n_ranks - 1] = WORLD + 3;
}
static void k_cohort_order(Stagefrontier__Summary *m)
{
    m->cohort->cohort_pp[1] = m->cohort->cohort_pp[0];
    m->cohort->cohort_key[1] = m->cohort->cohort_key[0];
}
static void k_cohort_foreign(Stagefrontier__Summary *m)
{
    m->cohort->cohort_key[0] = 1000; /* rank 0's cohort is not listed */
}
static void k_step_order(Stagefrontier__Summary *m)
{
    m->cohort->steps[1] = m->cohort->steps[0];
}
static void k_count_big(Stagefrontier__Summary *m)
{
    m->cohort->count[0] = 3;
}
static void k_top2_order(Stagefrontier__Summary *m)
{
    m->cohort->prefix_top2[1] = m->cohort->prefix_top2[0] + 1;
}
static void k_top2_same(Stagefrontier__Summary *m)
{
    m->cohort->prefix_top2_ranks[1] = m->cohort->prefix_top2_ranks[0];
}
static void k_top2_other_cohort(Stagefrontier__Summary *m)
{
    m->cohort->prefix_top2_ranks[0] = 2; /* cohort 0 holds ranks 0 and 1 */
}
static void k_top2_neg(Stagefrontier__Summary *m)
{
    m->cohort->prefix_top2[1] = -1;
}
static void k_rows_undeclared(Stagefrontier__Summary *m)
{
    m->parallel_declared = false;
}
static void k_rows_big(Stagefrontier__Summary *m)
{
    m->parallel_rows = UINT64_MAX;
}

static void test_cohort_hostile_fields(void **state)
{
    (void)state;
    static const cohort_mutator muts[] = {k_count_len,       k_coords_len,        k_top2_len,
                                          k_index,           k_undeclared,        k_rank_order,
                                          k_rank_uncovered,  k_cohort_order,      k_cohort_foreign,
                                          k_step_order,      k_count_big,         k_top2_order,
                                          k_top2_same,       k_top2_other_cohort, k_top2_neg,
                                          k_rows_undeclared, k_rows_big};
    cohort_fixture *f = cohort_fixture_new();
    sf_summary *s = cohort_node_summary(f, 0, 3, false);
    const sf_cohort_summary *c = s->cohort;
    size_t R = c->n_ranks, K = c->n_cohorts, T = c->n_steps, cells = T * K * c->n_stages;
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        Stagefrontier__Summary *m = NULL;
        sfd_window_key key = key_of(s, 1000, 1);
        assert_int_equal(sfd_peer_summary_encode(s, &key, &m), 0);
        Stagefrontier__CohortSummary *o = m->cohort;
        assert_non_null(o);
        /* copies of what the mutators write, so the summary stays intact */
        uint32_t *ranks = malloc(R * sizeof *ranks), *pp = malloc(K * sizeof *pp);
        uint64_t *keys = malloc(K * sizeof *keys);
        int64_t *steps = malloc(T * sizeof *steps);
        uint32_t *count = malloc(T * K * sizeof *count);
        memcpy(ranks, o->ranks, R * sizeof *ranks);
        memcpy(pp, o->cohort_pp, K * sizeof *pp);
        memcpy(keys, o->cohort_key, K * sizeof *keys);
        memcpy(steps, o->steps, T * sizeof *steps);
        memcpy(count, o->count, T * K * sizeof *count);
        o->ranks = ranks, o->cohort_pp = pp, o->cohort_key = keys, o->steps = steps;
        o->count = count;
        (void)cells;
        muts[i](m);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(sfd_peer_pack(&m->base, &buf, &len), 0);
        sf_summary *out = NULL;
        int r = sfd_peer_summary_unpack(buf, len, &out, NULL, NULL);
        if (r != -EBADMSG)
            print_error("cohort mutator %zu accepted (%d)\n", i, r);
        assert_int_equal(r, -EBADMSG);
        assert_null(out);
        free(buf);
        free(ranks);
        free(pp);
        free(keys);
        free(steps);
        free(count);
        sfd_peer_summary_msg_free(m);
    }
    sf_summary_free(s);
    sf_schema_clear(&f->schema);
    free(f);
}

/* ---- group sync waits ------------------------------------------------------ */

/* 8 ranks, tp = r % 2 x dp = r / 2. Forward: 4 layers, each ending in an
 * all-reduce of the tp pair that both leave when the later arrives, its
 * waits accumulated over the 4 sync points; rank 5's second layer is 8 ms
 * slow, and its tp peer rank 4's last layer 1 ms slower than usual, so that
 * rank 4 (the victim) is the last to reach the stage's last sync point.
 * Backward: an all-reduce of every rank (dp), one sync point. */
#define W_STAGES 6
#define MS INT64_C(1000000)
enum { W_DATA, W_FWD, W_FWD_WAIT, W_BWD, W_BWD_WAIT, W_OTHER };
enum { WJ = 2 };
typedef struct wait_fixture {
    sf_schema schema;
    sf_window_meta meta;
    sf_gates gates;
    sf_parallel par[WORLD];
    int64_t d[STEPS * WORLD * W_STAGES];
    int64_t waits[STEPS * WORLD * 2 * WJ];
    sf_row rows[STEPS * WORLD];
} wait_fixture;

static void wait_forward(wait_fixture *f, uint32_t t, uint32_t g, int64_t *end, uint64_t *x)
{
    int64_t cur[2], wait[2] = {0, 0}, last[2] = {0, 0};
    for (uint32_t q = 0; q < 2; q++) {
        int64_t *d = &f->d[(t * WORLD + 2 * g + q) * W_STAGES];
        d[W_DATA] = 5 * MS + (int64_t)(lcg(x) % 500000);
        cur[q] = d[W_DATA];
    }
    for (uint32_t l = 0; l < 4; l++) {
        for (uint32_t q = 0; q < 2; q++) {
            uint32_t r = 2 * g + q;
            last[q] = cur[q] + 5 * MS + (int64_t)(lcg(x) % 500000) +
                      (r == 5 && l == 1 ? 8 * MS : 0) + (r == 4 && l == 3 ? MS : 0);
        }
        int64_t exit = last[0] > last[1] ? last[0] : last[1];
        for (uint32_t q = 0; q < 2; q++) {
            wait[q] += exit - last[q];
            cur[q] = exit;
        }
    }
    for (uint32_t q = 0; q < 2; q++) {
        uint32_t r = 2 * g + q;
        int64_t *d = &f->d[(t * WORLD + r) * W_STAGES], *w = &f->waits[(t * WORLD + r) * 2 * WJ];
        end[r] = cur[q] + MS + (int64_t)(lcg(x) % 250000);
        d[W_FWD] = last[q] - d[W_DATA];
        d[W_FWD_WAIT] = end[r] - last[q];
        w[0] = wait[q];
        w[WJ] = 4;
    }
}

static wait_fixture *wait_fixture_new(void)
{
    static const char *const rec[] = {"data", "forward", "backward", "other"};
    wait_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(sf_schema_init_sync(&f->schema, 1, 4, rec, NULL, 1, 3u << 1), 0);
    uint8_t groups[WJ] = {SF_SYNC_TP, SF_SYNC_DP};
    assert_int_equal(sf_schema_set_sync_groups(&f->schema, groups, WJ), 0);
    sf_gates_default(&f->gates);
    f->meta = (sf_window_meta){.index = 0, .first_step = 20, .last_step = 119, .world_size = WORLD};
    for (uint32_t r = 0; r < WORLD; r++) {
        char text[32];
        snprintf(text, sizeof text, "tp=%u/2,dp=%u/4", r % 2, r / 2);
        assert_int_equal(sf_parallel_parse(text, &f->par[r], NULL, 0), 0);
    }
    uint64_t x = 51;
    for (uint32_t t = 0; t < STEPS; t++) {
        int64_t end[WORLD], arrive[WORLD], top = 0;
        for (uint32_t g = 0; g < WORLD / 2; g++)
            wait_forward(f, t, g, end, &x);
        for (uint32_t r = 0; r < WORLD; r++) {
            int64_t *d = &f->d[(t * WORLD + r) * W_STAGES];
            d[W_BWD] = 30 * MS + (int64_t)(lcg(&x) % 1000000);
            arrive[r] = end[r] + d[W_BWD];
            top = arrive[r] > top ? arrive[r] : top;
        }
        for (uint32_t r = 0; r < WORLD; r++) {
            int64_t *d = &f->d[(t * WORLD + r) * W_STAGES],
                    *w = &f->waits[(t * WORLD + r) * 2 * WJ];
            d[W_BWD_WAIT] = top - arrive[r];
            d[W_OTHER] = 5 * MS;
            w[1] = d[W_BWD_WAIT];
            w[WJ + 1] = 1;
            f->rows[t * WORLD + r] =
                (sf_row){.step = 20 + t, .rank = r, .d = d, .sync_wait = w, .parallel = &f->par[r]};
        }
    }
    return f;
}

/* The summary of the ranks in rank_mask. */
static sf_summary *wait_node_summary(wait_fixture *f, uint32_t rank_mask)
{
    sf_row sel[STEPS * WORLD];
    size_t n = 0;
    for (size_t i = 0; i < STEPS * WORLD; i++)
        if (rank_mask >> f->rows[i].rank & 1)
            sel[n++] = f->rows[i];
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&f->schema, &f->meta, sel, n, true, &s), 0);
    return s;
}

static void assert_wait_verdicts_equal(const sf_report *a, const sf_report *b)
{
    assert_cohort_reports_equal(a, b);
    assert_int_equal(a->straggler.sync_stage, b->straggler.sync_stage);
    assert_int_equal(a->straggler.group, b->straggler.group);
    assert_int_equal(a->straggler.wait_rule, b->straggler.wait_rule);
    assert_int_equal(a->straggler.victim_rank, b->straggler.victim_rank);
    assert_int_equal(a->straggler.eligible_steps, b->straggler.eligible_steps);
}

/* Three nodes whose tp pairs each span two of them, their summaries through
 * the wire and merged: the root's verdict is one node's, by the wait rule,
 * naming rank 5 and its victim rank 4. */
static void test_waits_merge_exact(void **state)
{
    (void)state;
    wait_fixture *f = wait_fixture_new();
    static const uint32_t nodes[3] = {0x55, 0x0a, 0xa0}; /* {0,2,4,6}, {1,3}, {5,7} */
    sf_summary *full = wait_node_summary(f, 0xff), *wire[3];
    for (int i = 0; i < 3; i++) {
        sf_summary *part = wait_node_summary(f, nodes[i]);
        assert_non_null(part->dense->sync_wait);
        wire[i] = round_trip(part);
        assert_non_null(wire[i]->dense->sync_wait);
        assert_memory_equal(wire[i]->dense->sync_wait, part->dense->sync_wait,
                            (size_t)STEPS * part->dense->n_ranks * 2 * WJ * sizeof(int64_t));
        assert_int_equal(wire[i]->schema.sync_group[W_FWD], SF_SYNC_TP);
        assert_int_equal(wire[i]->schema.sync_group[W_BWD], SF_SYNC_DP);
        sf_summary_free(part);
    }
    sf_summary *m = NULL;
    assert_int_equal(sf_summary_clone(wire[2], &m), 0);
    assert_int_equal(sf_summary_merge(m, wire[0]), 0);
    assert_int_equal(sf_summary_merge(m, wire[1]), 0);
    /* and the merged summary through the wire once more, as a Report carries it */
    sf_summary *root = round_trip(m);
    sf_report *ra = NULL, *rb = NULL, *rc = NULL;
    assert_int_equal(sf_report_compute(full, &f->gates, &ra), 0);
    assert_int_equal(sf_report_compute(m, &f->gates, &rb), 0);
    assert_int_equal(sf_report_compute(root, &f->gates, &rc), 0);
    assert_int_equal(ra->cohorts, SF_COHORTS_APPLIED);
    assert_true(ra->straggler.present);
    assert_true(ra->straggler.wait_rule);
    assert_int_equal(ra->straggler.group, SF_SYNC_TP);
    assert_int_equal(ra->straggler.rank, 5);
    assert_int_equal(ra->straggler.victim_rank, 4);
    assert_wait_verdicts_equal(ra, rb);
    assert_wait_verdicts_equal(ra, rc);
    sf_report_free(ra);
    sf_report_free(rb);
    sf_report_free(rc);
    sf_summary_free(root);
    sf_summary_free(m);
    for (int i = 0; i < 3; i++)
        sf_summary_free(wire[i]);
    sf_summary_free(full);
    sf_schema_clear(&f->schema);
    free(f);
}

/* An older peer's summary (no waits, no groups) still decodes, and a merge
 * with a newer one keeps the declared groups in either order. */
static void test_waits_old_peer(void **state)
{
    (void)state;
    wait_fixture *f = wait_fixture_new();
    sf_summary *a = wait_node_summary(f, 0x0f), *b = wait_node_summary(f, 0xf0);
    Stagefrontier__Summary *m = NULL;
    sfd_window_key key = key_of(a, 1000, 1);
    assert_int_equal(sfd_peer_summary_encode(a, &key, &m), 0);
    m->n_sync_groups = 0;
    m->dense->n_sync_wait_ns = m->dense->n_sync_waits = 0;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sfd_peer_pack(&m->base, &buf, &len), 0);
    sfd_peer_summary_msg_free(m);
    sf_summary *old = NULL;
    assert_int_equal(sfd_peer_summary_unpack(buf, len, &old, NULL, NULL), 0);
    free(buf);
    assert_null(old->dense->sync_wait);
    assert_int_equal(old->schema.sync_group[W_FWD], SF_SYNC_WORLD);
    sf_summary *x = NULL, *y = NULL;
    assert_int_equal(sf_summary_clone(old, &x), 0);
    assert_int_equal(sf_summary_merge(x, b), 0);
    assert_int_equal(sf_summary_clone(b, &y), 0);
    assert_int_equal(sf_summary_merge(y, old), 0);
    assert_int_equal(x->schema.sync_group[W_FWD], SF_SYNC_TP);
    assert_int_equal(y->schema.sync_group[W_FWD], SF_SYNC_TP);
    /* the old node's ranks carry no wait: -1 and 0 */
    assert_non_null(x->dense->sync_wait);
    assert_true(x->dense->sync_wait[0] == -1 && x->dense->sync_wait[WJ] == 0);
    assert_memory_equal(x->dense->sync_wait, y->dense->sync_wait,
                        (size_t)STEPS * WORLD * 2 * WJ * sizeof(int64_t));
    sf_summary_free(x);
    sf_summary_free(y);
    sf_summary_free(old);
    sf_summary_free(a);
    sf_summary_free(b);
    sf_schema_clear(&f->schema);
    free(f);
}

typedef void (*wait_mutator)(Stagefrontier__Summary *m);

static void w_len(Stagefrontier__Summary *m)
{
    m->dense->n_sync_wait_ns--;
}
static void w_count_len(Stagefrontier__Summary *m)
{
    m->dense->n_sync_waits = 0;
}
static void w_neg(Stagefrontier__Summary *m)
{
    m->dense->sync_wait_ns[0] = -2;
}
static void w_beyond_stage(Stagefrontier__Summary *m)
{
    m->dense->sync_wait_ns[0] = INT64_C(1) << 42; /* past forward and its sync wait */
}
static void w_count_zero(Stagefrontier__Summary *m)
{
    m->dense->sync_waits[0] = 0;
}
static void w_count_big(Stagefrontier__Summary *m)
{
    m->dense->sync_waits[1] = SF_MAX_SYNC_WAITS + 1;
}
static void w_none_counted(Stagefrontier__Summary *m)
{
    m->dense->sync_wait_ns[0] = -1; /* no wait, yet a count of 4 */
}
static void w_no_row(Stagefrontier__Summary *m)
{
    m->dense->present.data[0] = 0; /* a wait without its row (the step count says so too) */
    m->steps[0]->n_ranks--;
}
static void w_groups_len(Stagefrontier__Summary *m)
{
    m->n_sync_groups = 1;
}
static void w_group_unknown(Stagefrontier__Summary *m)
{
    m->sync_groups[0] = SF_SYNC_GROUP_MAX + 1;
}

static void test_waits_hostile_fields(void **state)
{
    (void)state;
    static const wait_mutator muts[] = {
        w_len,       w_count_len,    w_neg,    w_beyond_stage, w_count_zero,
        w_count_big, w_none_counted, w_no_row, w_groups_len,   w_group_unknown};
    wait_fixture *f = wait_fixture_new();
    sf_summary *s = wait_node_summary(f, 0x0f);
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        Stagefrontier__Summary *m = NULL;
        sfd_window_key key = key_of(s, 1000, 1);
        assert_int_equal(sfd_peer_summary_encode(s, &key, &m), 0);
        /* copies of what the mutators write, so the summary stays intact */
        uint8_t *present = malloc(m->dense->present.len);
        memcpy(present, m->dense->present.data, m->dense->present.len);
        m->dense->present.data = present;
        muts[i](m);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(sfd_peer_pack(&m->base, &buf, &len), 0);
        sf_summary *out = NULL;
        int r = sfd_peer_summary_unpack(buf, len, &out, NULL, NULL);
        if (r != -EBADMSG)
            print_error("wait mutator %zu accepted (%d)\n", i, r);
        assert_int_equal(r, -EBADMSG);
        assert_null(out);
        free(buf);
        free(present);
        sfd_peer_summary_msg_free(m);
    }
    sf_summary_free(s);
    sf_schema_clear(&f->schema);
    free(f);
}

/* A communication part on a schema without synchronizing stages is refused. */
static void test_comm_without_sync_stage(void **state)
{
    (void)state;
    fixture *f = fixture_new();
    comm_fixture *cf = comm_fixture_new();
    sf_summary *s = node_summary(f, 0, 3, false), *c = comm_node_summary(cf, 0, 3, false);
    assert_null(s->comm);
    Stagefrontier__Summary *m = NULL, *mc = NULL;
    sfd_window_key key = key_of(s, 1000, 1);
    assert_int_equal(sfd_peer_summary_encode(s, &key, &m), 0);
    assert_int_equal(sfd_peer_summary_encode(c, &key, &mc), 0);
    m->comm = mc->comm;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sfd_peer_pack(&m->base, &buf, &len), 0);
    sf_summary *out = NULL;
    assert_int_equal(sfd_peer_summary_unpack(buf, len, &out, NULL, NULL), -EBADMSG);
    free(buf);
    m->comm = NULL;
    sfd_peer_summary_msg_free(m);
    sfd_peer_summary_msg_free(mc);
    sf_summary_free(s);
    sf_summary_free(c);
    comm_fixture_free(cf);
    fixture_free(f);
}

/* A summary packed with its owner and incarnation fields set or cleared as
 * asked; the decoder's verdict on it. */
static int decode_with_owner(const sf_summary *s, bool has_uid, uint32_t uid, bool has_inc,
                             uint32_t inc, sfd_window_key *ret_key)
{
    Stagefrontier__Summary *m = NULL;
    sfd_window_key key = key_of(s, 1000, 1);
    assert_int_equal(sfd_peer_summary_encode(s, &key, &m), 0);
    m->has_owner_uid = has_uid;
    m->owner_uid = uid;
    m->has_incarnation = has_inc;
    m->incarnation = inc;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sfd_peer_pack(&m->base, &buf, &len), 0);
    sfd_peer_summary_msg_free(m);
    sf_summary *out = NULL;
    int r = sfd_peer_summary_unpack(buf, len, &out, ret_key, NULL);
    free(buf);
    if (r == 0)
        sf_summary_free(out);
    else
        assert_null(out);
    return r;
}

/* The job key travels with every summary: the owner uid and incarnation are
 * required, bounded, and part of the window key the root merges by. */
static void test_job_key(void **state)
{
    (void)state;
    fixture *f = fixture_new();
    sf_summary *s = node_summary(f, 0, 3, false);
    sfd_window_key k;
    /* missing or out of bounds: -EPROTO, the rejected_owner reason */
    assert_int_equal(decode_with_owner(s, false, 0, true, 1, NULL), -EPROTO);
    assert_int_equal(decode_with_owner(s, true, 1000, false, 0, NULL), -EPROTO);
    assert_int_equal(decode_with_owner(s, true, UINT32_MAX, true, 1, NULL), -EPROTO);
    assert_int_equal(decode_with_owner(s, true, UINT32_MAX - 1, true, 1, NULL), -EPROTO);
    assert_int_equal(decode_with_owner(s, true, 1000, true, 0, NULL), -EPROTO);
    assert_int_equal(decode_with_owner(s, true, 1000, true, SF_MAX_INCARNATION + 1, NULL), -EPROTO);
    /* the bounds themselves pass */
    assert_int_equal(decode_with_owner(s, true, 0, true, 1, &k), 0);
    assert_int_equal(k.uid, 0);
    assert_int_equal(decode_with_owner(s, true, SFD_PEER_UID_MAX, true, SF_MAX_INCARNATION, &k), 0);
    assert_int_equal(k.uid, SFD_PEER_UID_MAX);
    assert_int_equal(k.incarnation, SF_MAX_INCARNATION);
    /* nothing out of bounds, or of another window, is encoded */
    Stagefrontier__Summary *m = NULL;
    sfd_window_key bad = key_of(s, UINT32_MAX, 1);
    assert_int_equal(sfd_peer_summary_encode(s, &bad, &m), -EINVAL);
    bad = key_of(s, 1000, 0);
    assert_int_equal(sfd_peer_summary_encode(s, &bad, &m), -EINVAL);
    bad = key_of(s, 1000, 1);
    bad.window++;
    assert_int_equal(sfd_peer_summary_encode(s, &bad, &m), -EINVAL);
    assert_null(m);
    /* two uids, or two incarnations, of one job id are two windows */
    sfd_window_key a = key_of(s, 1000, 1), b = a;
    assert_true(sfd_window_key_equal(&a, &b));
    b.uid = 1001;
    assert_false(sfd_window_key_equal(&a, &b));
    b = a;
    b.incarnation = 2;
    assert_false(sfd_window_key_equal(&a, &b));
    /* the wire fields of any message make a key only when all check */
    assert_int_equal(sfd_peer_window_key_make("job-1", true, 7, true, 2, 4, 1, &k), 0);
    assert_true(k.uid == 7 && k.incarnation == 2 && k.window == 4 && k.segment == 1);
    assert_int_equal(sfd_peer_window_key_make("job 1", true, 7, true, 2, 4, 1, &k), -EBADMSG);
    assert_int_equal(sfd_peer_window_key_make("job-1", true, 7, true, 2, -1, 1, &k), -EBADMSG);
    assert_int_equal(sfd_peer_window_key_make(NULL, true, 7, true, 2, 4, 1, &k), -EBADMSG);
    assert_int_equal(sfd_peer_window_key_make("job-1", false, 7, true, 2, 4, 1, &k), -EPROTO);
    assert_int_equal(sfd_peer_window_key_make("job-1", true, 7, false, 2, 4, 1, &k), -EPROTO);
    sf_summary_free(s);
    fixture_free(f);
}

/* The catch-up messages: their bounds at, inside and past each end, and
 * bytes that do not decode. */
static void pack_value(bool request, uint32_t v, uint8_t **buf, size_t *len)
{
    Stagefrontier__CatchUpRequest q = STAGEFRONTIER__CATCH_UP_REQUEST__INIT;
    Stagefrontier__CatchUpDone d = STAGEFRONTIER__CATCH_UP_DONE__INIT;
    q.keep_windows = d.reports = v;
    assert_int_equal(sfd_peer_pack(request ? &q.base : &d.base, buf, len), 0);
}

static void test_catchup_bounds(void **state)
{
    (void)state;
    static const struct {
        bool request;
        uint32_t value;
        int want;
    } cases[] = {
        {true, 0, -ERANGE}, {true, 1, 0},     {true, 4096, 0},        {true, 4097, -ERANGE},
        {false, 0, 0},      {false, 1024, 0}, {false, 1025, -ERANGE}, {false, UINT32_MAX, -ERANGE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *buf;
        size_t len;
        uint32_t got = 7;
        pack_value(cases[i].request, cases[i].value, &buf, &len);
        int r = cases[i].request ? sfd_peer_catchup_request_unpack(buf, len, &got)
                                 : sfd_peer_catchup_done_unpack(buf, len, &got);
        assert_int_equal(r, cases[i].want);
        assert_int_equal(got, r == 0 ? cases[i].value : 7); /* set only on success */
        free(buf);
    }
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    uint32_t got;
    assert_int_equal(sfd_peer_catchup_request_unpack(junk, sizeof junk, &got), -EBADMSG);
    assert_int_equal(sfd_peer_catchup_done_unpack(junk, sizeof junk, &got), -EBADMSG);
    /* a required field missing */
    assert_int_equal(sfd_peer_catchup_request_unpack(junk, 0, &got), -EBADMSG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_exact_dense),
        cmocka_unit_test(test_merge_exact_mergeable),
        cmocka_unit_test(test_hostile_fields),
        cmocka_unit_test(test_job_key),
        cmocka_unit_test(test_catchup_bounds),
        cmocka_unit_test(test_comm_merge_exact),
        cmocka_unit_test(test_comm_missing_part),
        cmocka_unit_test(test_comm_hostile_fields),
        cmocka_unit_test(test_comm_without_sync_stage),
        cmocka_unit_test(test_cohort_merge_exact),
        cmocka_unit_test(test_cohort_hostile_fields),
        cmocka_unit_test(test_waits_merge_exact),
        cmocka_unit_test(test_waits_old_peer),
        cmocka_unit_test(test_waits_hostile_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

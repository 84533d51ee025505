/*
 * Cohorts (docs/ACCOUNTING.md, "Cohorts"): their construction from parallel
 * coordinates and the states that refuse them, and a 2-stage pipeline x
 * 2-way data-parallel fixture where the last pipeline stage does more work
 * by its role and rank 1 (stage 0) is slowed: compared globally, the verdict
 * names nobody or, with rank 1's data-parallel twin of stage 1 absent, the
 * wrong rank (stage 1's, last by its role); compared inside cohorts it names
 * rank 1. The frontier ledger is the same either way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "matrix.h"
#include "stagefrontier/change.h"

#define MS INT64_C(1000000)

static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                       "model.backward_cpu_wall", "step.other_cpu_wall"};
enum { DATA, FWD, BWD, BWD_WAIT, OTHER, S5 };

static sf_parallel coords(const char *text)
{
    sf_parallel p;
    assert_int_equal(sf_parallel_parse(text, &p, NULL, 0), 0);
    return p;
}

/* ---- construction ---------------------------------------------------------- */

static void cohorts_from_coordinates(void **state)
{
    (void)state;
    sf_parallel c[4] = {coords("pp=0/2,dp=0/2"), coords("pp=0/2,dp=1/2"), coords("pp=1/2,dp=0/2"),
                        coords("pp=1/2,dp=1/2")};
    uint32_t of[8] = {9, 9, 9, 9}, n = 0;
    assert_int_equal(sf_cohorts_build(c, 4, 4, of, &n), SF_COHORTS_APPLIED);
    assert_int_equal(n, 2);
    assert_int_equal(of[0], 0);
    assert_int_equal(of[1], 0);
    assert_int_equal(of[2], 1);
    assert_int_equal(of[3], 1);

    /* Numbered by first appearance, whatever the pipeline index. */
    sf_parallel rev[4] = {c[3], c[0], c[2], c[1]};
    assert_int_equal(sf_cohorts_build(rev, 4, 4, of, &n), SF_COHORTS_APPLIED);
    assert_int_equal(of[0], 0);
    assert_int_equal(of[1], 1);
    assert_int_equal(of[2], 0);
    assert_int_equal(of[3], 1);

    /* ep, like dp, stays inside a cohort; tp parts cohorts. */
    sf_parallel e[8];
    for (uint32_t i = 0; i < 8; i++) {
        char text[64];
        snprintf(text, sizeof text, "tp=%u/2,dp=%u/2,ep=%u/2", i >> 2, (i >> 1) & 1, i & 1);
        e[i] = coords(text);
    }
    assert_int_equal(sf_cohorts_build(e, 8, 8, of, &n), SF_COHORTS_APPLIED);
    assert_int_equal(n, 2);
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(of[i], i >> 2);

    /* A window missing a rank still makes cohorts of the ranks it has. */
    assert_int_equal(sf_cohorts_build(c, 3, 4, of, &n), SF_COHORTS_APPLIED);
    assert_int_equal(n, 2);
}

static void cohorts_refused(void **state)
{
    (void)state;
    sf_parallel none[2];
    sf_parallel_init(&none[0]);
    sf_parallel_init(&none[1]);
    uint32_t of[4] = {7, 7, 7, 7}, n = 7;
    assert_int_equal(sf_cohorts_build(none, 2, 2, of, &n), SF_COHORTS_NONE);
    assert_int_equal(sf_cohorts_build(NULL, 2, 2, of, &n), SF_COHORTS_NONE);

    sf_parallel dup[4] = {coords("pp=0/2,dp=0/2"), coords("pp=0/2,dp=1/2"), coords("pp=1/2,dp=0/2"),
                          coords("pp=1/2,dp=0/2")}; /* a tuple twice */
    assert_int_equal(sf_cohorts_build(dup, 4, 4, of, &n), SF_COHORTS_INCONSISTENT);
    sf_parallel gap[4] = {dup[0], dup[1], dup[2], none[0]}; /* a rank without */
    assert_int_equal(sf_cohorts_build(gap, 4, 4, of, &n), SF_COHORTS_INCONSISTENT);
    sf_parallel shapes[2] = {coords("pp=0/2,dp=0/2"), coords("pp=1/2,tp=0/2")};
    assert_int_equal(sf_cohorts_build(shapes, 2, 4, of, &n), SF_COHORTS_INCONSISTENT);
    sf_parallel tile[2] = {coords("pp=0/2,dp=0/2"), coords("pp=1/2,dp=0/2")};
    assert_int_equal(sf_cohorts_build(tile, 2, 8, of, &n), SF_COHORTS_INCONSISTENT); /* 4 != 8 */
    assert_int_equal(sf_cohorts_build(tile, 2, 0, of, &n), SF_COHORTS_APPLIED);      /* unknown */
    sf_parallel range = tile[0];
    range.index[SF_PAR_DP] = 5; /* filled by hand, out of range */
    sf_parallel bad[2] = {range, tile[1]};
    assert_int_equal(sf_cohorts_build(bad, 2, 4, of, &n), SF_COHORTS_INCONSISTENT);
    assert_int_equal(of[0], 0); /* untouched by the refusals: last set by the APPLIED above */
}

/* ---- the pipeline fixture ---------------------------------------------------- */

static const char *const layout[4] = {"pp=0/2,dp=0/2", "pp=0/2,dp=1/2", "pp=1/2,dp=0/2",
                                      "pp=1/2,dp=1/2"};

struct pipe {
    sf_schema schema;
    struct matrix m;
    sf_parallel par[4];
    sf_report *report;
};

/* Data 10, forward 50 (70 on pipeline stage 1: the loss), backward 80 ms
 * (90 on rank 1: the fault), each with up to 1 ms of noise; other 5 ms. Each
 * rank leaves the backward's collective when the last one arrives. ranks < 4
 * leaves the last ranks out of the window. */
static void pipe_init_seeded(struct pipe *p, uint32_t steps, uint32_t ranks, bool declared,
                             uint64_t seed, int64_t fault_ns)
{
    memset(p, 0, sizeof *p);
    assert_int_equal(sf_schema_init_sync(&p->schema, 1, 4, recorded, NULL, 1, 1u << 2), 0);
    p->m = matrix_new(steps, ranks, S5);
    for (uint32_t t = 0; t < steps; t++) {
        int64_t arrival_max = 0;
        for (uint32_t r = 0; r < ranks; r++) {
            int64_t *d = cell(&p->m, t, r);
            d[DATA] = 10 * MS + rand_below(&seed, MS);
            d[FWD] = (r >= 2 ? 70 : 50) * MS + rand_below(&seed, MS);
            d[BWD] = 80 * MS + (r == 1 ? fault_ns : 0) + rand_below(&seed, MS);
            d[OTHER] = 5 * MS;
            int64_t a = d[DATA] + d[FWD] + d[BWD];
            arrival_max = a > arrival_max ? a : arrival_max;
        }
        for (uint32_t r = 0; r < ranks; r++) {
            int64_t *d = cell(&p->m, t, r);
            d[BWD_WAIT] = arrival_max - (d[DATA] + d[FWD] + d[BWD]);
        }
    }
    for (uint32_t r = 0; r < 4; r++)
        p->par[r] = coords(layout[r]);
    for (size_t i = 0; declared && i < (size_t)steps * ranks; i++)
        p->m.rows[i].parallel = &p->par[p->m.rows[i].rank];
}

static void pipe_init(struct pipe *p, uint32_t steps, uint32_t ranks, bool declared)
{
    pipe_init_seeded(p, steps, ranks, declared, 51, 10 * MS);
}

static sf_report *pipe_compute(struct pipe *p)
{
    sf_gates gates;
    sf_gates_default(&gates);
    sf_window_meta meta = meta_for(4);
    sf_report_free(p->report);
    p->report = NULL;
    assert_int_equal(sf_report_from_rows(&p->schema, &meta, p->m.rows,
                                         (size_t)p->m.steps * p->m.ranks, &gates, &p->report),
                     0);
    return p->report;
}

static void pipe_clear(struct pipe *p)
{
    sf_report_free(p->report);
    matrix_free(&p->m);
    sf_schema_clear(&p->schema);
}

static bool has_label(const sf_report *r, enum sf_label l)
{
    return r->labels & (1u << l);
}

/* The frontier ledger does not depend on cohorts. */
static void same_ledger(const sf_report *a, const sf_report *b)
{
    assert_true(a->exposed_total_ns == b->exposed_total_ns);
    for (uint32_t k = 0; k < a->schema.n_stages; k++) {
        assert_int_equal(a->stages[k].advance_ns, b->stages[k].advance_ns);
        assert_int_equal(a->stages[k].leader_rank, b->stages[k].leader_rank);
    }
}

static void global_misses_cohort_names_rank1(void **state)
{
    (void)state;
    struct pipe g, c;
    pipe_init(&g, 40, 4, false);
    pipe_init(&c, 40, 4, true);
    sf_report *rg = pipe_compute(&g), *rc = pipe_compute(&c);
    /* Globally the last arrivals are stage 1's two ranks, by noise alone. */
    assert_false(rg->straggler.present);
    assert_int_equal(rg->cohorts, SF_COHORTS_NONE);
    assert_true(rc->straggler.present);
    assert_int_equal(rc->straggler.rank, 1);
    assert_int_equal(rc->straggler.sync_stage, BWD);
    assert_int_equal(rc->straggler.origin_stage, BWD);
    assert_int_equal(rc->cohorts, SF_COHORTS_APPLIED);
    assert_int_equal(rc->n_cohorts, 2);
    assert_true(has_label(rc, SF_LABEL_ROLE_AWARE_APPLIED));
    assert_false(has_label(rc, SF_LABEL_ROLE_AWARE_NEEDED));
    assert_false(has_label(rg, SF_LABEL_ROLE_AWARE_APPLIED));
    assert_true(rc->n_suspects >= 1);
    assert_int_equal(rc->suspects[0].rank, 1);
    same_ledger(rg, rc);
    pipe_clear(&g);
    pipe_clear(&c);
}

/* Rank 3 (stage 1's other replica) is absent: globally rank 2 is last by
 * its role in every step and is named; the cohorts name rank 1. */
static void global_names_wrong_rank(void **state)
{
    (void)state;
    struct pipe g, c;
    pipe_init(&g, 40, 3, false);
    pipe_init(&c, 40, 3, true);
    sf_report *rg = pipe_compute(&g), *rc = pipe_compute(&c);
    assert_true(rg->straggler.present);
    assert_int_equal(rg->straggler.rank, 2);
    assert_int_equal(rg->suspects[0].rank, 2);
    assert_true(rc->straggler.present);
    assert_int_equal(rc->straggler.rank, 1);
    assert_int_equal(rc->suspects[0].rank, 1);
    assert_int_equal(rc->cohorts, SF_COHORTS_APPLIED);
    same_ledger(rg, rc);
    pipe_clear(&g);
    pipe_clear(&c);
}

/* Coordinates that make no cohorts: role_aware_needed stays, and no rank
 * is named, neither as the straggler nor among the suspects. */
static void inconsistent_names_nobody(void **state)
{
    (void)state;
    struct pipe p;
    pipe_init(&p, 40, 3, true);
    p.par[2] = p.par[1]; /* rank 2 claims rank 1's tuple */
    sf_report *r = pipe_compute(&p);
    assert_int_equal(r->cohorts, SF_COHORTS_INCONSISTENT);
    assert_false(r->straggler.present);
    assert_false(r->comm.present);
    assert_int_equal(r->n_suspects, 0);
    assert_true(has_label(r, SF_LABEL_ROLE_AWARE_NEEDED));
    assert_false(has_label(r, SF_LABEL_ROLE_AWARE_APPLIED));

    /* Coordinates on some rows only: the same. */
    p.par[2] = coords(layout[2]);
    p.m.rows[5].parallel = NULL;
    r = pipe_compute(&p);
    assert_int_equal(r->cohorts, SF_COHORTS_INCONSISTENT);
    assert_false(r->straggler.present);
    pipe_clear(&p);
}

/* Mergeable summaries keep no rank's coordinates: declared coordinates then
 * name no rank either, while merged dense summaries keep them. */
static void merged_summaries(void **state)
{
    (void)state;
    struct pipe p;
    pipe_init(&p, 40, 4, true);
    sf_gates gates;
    sf_gates_default(&gates);
    sf_window_meta meta = meta_for(4);
    sf_summary *a = NULL, *b = NULL, *m = NULL;
    /* ranks 0..1 and 2..3 as two nodes' rows */
    sf_row rows_a[80], rows_b[80];
    size_t na = 0, nb = 0;
    for (size_t i = 0; i < 160; i++) {
        if (p.m.rows[i].rank < 2)
            rows_a[na++] = p.m.rows[i];
        else
            rows_b[nb++] = p.m.rows[i];
    }
    assert_int_equal(sf_summary_build(&p.schema, &meta, rows_a, na, true, &a), 0);
    assert_int_equal(sf_summary_build(&p.schema, &meta, rows_b, nb, true, &b), 0);
    assert_int_equal(sf_summary_merge(a, b), 0);
    sf_report *r = NULL;
    assert_int_equal(sf_report_compute(a, &gates, &r), 0);
    assert_int_equal(r->cohorts, SF_COHORTS_APPLIED);
    assert_int_equal(r->straggler.rank, 1);
    sf_report_free(r);
    assert_int_equal(sf_summary_clone(a, &m), 0);
    assert_int_equal(sf_report_compute(m, &gates, &r), 0);
    assert_int_equal(r->straggler.rank, 1);
    sf_report_free(r);
    sf_summary_free(m);
    sf_summary_free(a);
    sf_summary_free(b);

    assert_int_equal(sf_summary_build(&p.schema, &meta, p.m.rows, 160, false, &a), 0);
    assert_int_equal(sf_report_compute(a, &gates, &r), 0);
    assert_int_equal(r->cohorts, SF_COHORTS_INCONSISTENT);
    assert_false(r->straggler.present);
    sf_report_free(r);
    sf_summary_free(a);
    pipe_clear(&p);
}

/* The change against a clean reference: rank 1's backward slowed by 10 ms
 * is its own-work change, its contrast taken inside its cohort; with
 * coordinates that make no cohorts the change names no rank. */
static sf_summary *pipe_summary(struct pipe *p, int64_t index)
{
    sf_window_meta meta = meta_for(4);
    meta.index = index;
    sf_summary *s = NULL;
    assert_int_equal(
        sf_summary_build(&p->schema, &meta, p->m.rows, (size_t)p->m.steps * p->m.ranks, true, &s),
        0);
    return s;
}

static void change_inside_cohorts(void **state)
{
    (void)state;
    sf_gates gates;
    sf_gates_default(&gates);
    sf_summary *w[3];
    for (int j = 0; j < 3; j++) {
        struct pipe clean;
        pipe_init_seeded(&clean, 40, 4, true, 100 + (uint64_t)j, 0);
        w[j] = pipe_summary(&clean, j);
        pipe_clear(&clean);
    }
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)w, 3, &ref), 0);
    struct pipe p;
    pipe_init_seeded(&p, 40, 4, true, 7, 10 * MS);
    sf_summary *s = pipe_summary(&p, 3);
    sf_change *c = NULL;
    assert_int_equal(sf_change_compute(ref, s, &gates, &c), 0);
    assert_true(c->stages[BWD].own_significant);
    assert_int_equal(c->stages[BWD].own_rank, 1);
    assert_true(c->n_suspects >= 1);
    assert_int_equal(c->suspects[0].rank, 1);
    sf_change_free(c);
    sf_summary_free(s);

    p.par[2] = p.par[1]; /* rank 2 claims rank 1's tuple */
    s = pipe_summary(&p, 3);
    assert_int_equal(sf_change_compute(ref, s, &gates, &c), 0);
    for (uint32_t k = 0; k < c->n_stages; k++)
        assert_false(c->stages[k].own_significant);
    assert_int_equal(c->n_suspects, 0);
    sf_change_free(c);
    sf_summary_free(s);
    pipe_clear(&p);
    sf_reference_free(ref);
    for (int j = 0; j < 3; j++)
        sf_summary_free(w[j]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cohorts_from_coordinates),
        cmocka_unit_test(cohorts_refused),
        cmocka_unit_test(global_misses_cohort_names_rank1),
        cmocka_unit_test(global_names_wrong_rank),
        cmocka_unit_test(inconsistent_names_nobody),
        cmocka_unit_test(merged_summaries),
        cmocka_unit_test(change_inside_cohorts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

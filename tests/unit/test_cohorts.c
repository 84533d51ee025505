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

static sf_summary *pipe_summary(struct pipe *p, int64_t index);

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

/* The dense gather: a rank's rows may point at different copies of its
 * coordinates, but not at different coordinates. */
static bool dense_conflict(struct pipe *p)
{
    sf_window_meta meta = meta_for(4);
    sf_summary *s = NULL;
    assert_int_equal(
        sf_summary_build(&p->schema, &meta, p->m.rows, (size_t)p->m.steps * p->m.ranks, true, &s),
        0);
    assert_true(s->parallel_declared);
    bool conflict = s->parallel_conflict;
    sf_summary_free(s);
    return conflict;
}

static void gather_copies_and_conflicts(void **state)
{
    (void)state;
    struct pipe p;
    pipe_init(&p, 20, 4, true);
    assert_false(dense_conflict(&p));
    sf_parallel copy = p.par[1];
    p.m.rows[4 * 7 + 1].parallel = &copy; /* rank 1, step 7: an equal copy */
    assert_false(dense_conflict(&p));
    assert_int_equal(pipe_compute(&p)->cohorts, SF_COHORTS_APPLIED);
    p.m.rows[4 * 9 + 1].parallel = &p.par[3]; /* rank 1, step 9: rank 3's */
    assert_true(dense_conflict(&p));
    assert_int_equal(pipe_compute(&p)->cohorts, SF_COHORTS_INCONSISTENT);
    p.m.rows[4 * 9 + 1].parallel = &p.par[1];
    p.m.rows[4 * 0 + 2].parallel = NULL; /* rank 2's first row without */
    assert_true(dense_conflict(&p));
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

    /* Mergeable: the cohort part keeps each rank's coordinates and each
     * cohort's top-2 prefixes, so the cohorts apply and the top-2 test
     * inside them names rank 1. */
    assert_int_equal(sf_summary_build(&p.schema, &meta, p.m.rows, 160, false, &a), 0);
    assert_non_null(a->cohort);
    assert_int_equal(sf_report_compute(a, &gates, &r), 0);
    assert_int_equal(r->cohorts, SF_COHORTS_APPLIED);
    assert_int_equal(r->n_cohorts, 2);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 1);
    assert_int_equal(r->straggler.sync_stage, BWD);
    assert_int_equal(r->suspects[0].rank, 1);
    assert_true(has_label(r, SF_LABEL_ROLE_AWARE_APPLIED));
    sf_report_free(r);

    /* A summary without the part (a node whose rows carried none) drops it
     * from the merge: inconsistent, no rank named. */
    assert_int_equal(sf_summary_build(&p.schema, &meta, rows_a, na, false, &b), 0);
    for (size_t i = 0; i < nb; i++)
        rows_b[i].parallel = NULL;
    assert_int_equal(sf_summary_build(&p.schema, &meta, rows_b, nb, false, &m), 0);
    assert_null(m->cohort);
    assert_int_equal(sf_summary_merge(b, m), 0);
    assert_null(b->cohort);
    assert_int_equal(sf_report_compute(b, &gates, &r), 0);
    assert_int_equal(r->cohorts, SF_COHORTS_INCONSISTENT);
    assert_false(r->straggler.present);
    sf_report_free(r);
    sf_summary_free(m);
    sf_summary_free(b);
    sf_summary_free(a);
    pipe_clear(&p);
}

/* ---- the cohort part merges exactly ------------------------------------------- */

static void parts_equal(const sf_cohort_summary *a, const sf_cohort_summary *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->n_stages, b->n_stages);
    assert_int_equal(a->n_ranks, b->n_ranks);
    assert_int_equal(a->n_cohorts, b->n_cohorts);
    assert_int_equal(a->n_steps, b->n_steps);
    assert_memory_equal(a->ranks, b->ranks, a->n_ranks * sizeof *a->ranks);
    assert_memory_equal(a->parallel, b->parallel, a->n_ranks * sizeof *a->parallel);
    assert_memory_equal(a->cohort_pp, b->cohort_pp, a->n_cohorts * sizeof *a->cohort_pp);
    assert_memory_equal(a->cohort_key, b->cohort_key, a->n_cohorts * sizeof *a->cohort_key);
    assert_memory_equal(a->steps, b->steps, a->n_steps * sizeof *a->steps);
    size_t cells = (size_t)a->n_steps * a->n_cohorts;
    assert_memory_equal(a->count, b->count, cells * sizeof *a->count);
    assert_memory_equal(a->prefix_top2, b->prefix_top2,
                        cells * a->n_stages * sizeof *a->prefix_top2);
}

static void verdicts_equal(const sf_report *a, const sf_report *b)
{
    assert_int_equal(a->cohorts, b->cohorts);
    assert_int_equal(a->n_cohorts, b->n_cohorts);
    assert_int_equal(a->straggler.present, b->straggler.present);
    assert_int_equal(a->straggler.rank, b->straggler.rank);
    assert_int_equal(a->straggler.sync_stage, b->straggler.sync_stage);
    assert_int_equal(a->straggler.origin_stage, b->straggler.origin_stage);
    assert_int_equal(a->straggler.arrived_last_steps, b->straggler.arrived_last_steps);
    assert_int_equal(a->straggler.eligible_steps, b->straggler.eligible_steps);
    assert_int_equal(a->straggler.median_lateness_ns, b->straggler.median_lateness_ns);
    assert_int_equal(a->n_suspects, b->n_suspects);
    for (uint32_t i = 0; i < a->n_suspects; i++) {
        assert_int_equal(a->suspects[i].rank, b->suspects[i].rank);
        assert_int_equal(a->suspects[i].steps, b->suspects[i].steps);
    }
    const sf_pipeline_view *x = &a->pipeline, *y = &b->pipeline;
    assert_int_equal(x->present, y->present);
    assert_int_equal(x->n_stages, y->n_stages);
    assert_int_equal(x->origin, y->origin);
    assert_int_equal(x->origin_pp, y->origin_pp);
    assert_int_equal(x->origin_rank, y->origin_rank);
    assert_int_equal(x->origin_stage, y->origin_stage);
    assert_int_equal(x->origin_steps, y->origin_steps);
    assert_int_equal(x->median_delay_ns, y->median_delay_ns);
    assert_int_equal(x->median_cost_ns, y->median_cost_ns);
    if (x->present) {
        assert_memory_equal(x->stages, y->stages, x->n_stages * sizeof *x->stages);
        assert_memory_equal(x->step_origin, y->step_origin, a->steps * sizeof *x->step_origin);
        assert_memory_equal(x->step_delay, y->step_delay,
                            (size_t)a->steps * x->n_stages * sizeof *x->step_delay);
    }
}

/* Rows of 8 ranks (pp=0..3 x dp=0..1), split over 1 to 5 nodes at random
 * and merged in a random order: the merged part equals the part built from
 * every row, in both modes, and so do the cohort figures of the reports. */
static void merged_part_equals_dense(void **state)
{
    (void)state;
    enum { T = 30, R = 8 };
    sf_schema schema;
    assert_int_equal(sf_schema_init_sync(&schema, 1, 4, recorded, NULL, 1, 1u << 2), 0);
    sf_gates gates;
    sf_gates_default(&gates);
    sf_window_meta meta = meta_for(R);
    sf_parallel par[R];
    for (uint32_t r = 0; r < R; r++) {
        char text[64];
        snprintf(text, sizeof text, "pp=%u/4,dp=%u/2", r / 2, r % 2);
        par[r] = coords(text);
    }
    uint64_t seed = 5;
    for (int trial = 0; trial < 40; trial++) {
        struct matrix m = matrix_new(T, R, S5);
        uint32_t slow = (uint32_t)rand_below(&seed, R), slow_stage = (uint32_t)rand_below(&seed, 3);
        for (uint32_t t = 0; t < T; t++) {
            for (uint32_t r = 0; r < R; r++) {
                int64_t *d = cell(&m, t, r);
                d[DATA] = 10 * MS + rand_below(&seed, 2 * MS);
                d[FWD] = (40 + 10 * (r / 2)) * MS + rand_below(&seed, 2 * MS);
                d[BWD] = 60 * MS + rand_below(&seed, 2 * MS);
                d[slow_stage == 2 ? BWD : slow_stage] += r == slow ? 8 * MS : 0;
                d[OTHER] = rand_below(&seed, 3) == 0 ? 4 * MS : 5 * MS; /* ties */
            }
            for (uint32_t r = 0; r < R; r += 2) { /* each data-parallel pair syncs */
                int64_t *a = cell(&m, t, r), *b = cell(&m, t, r + 1);
                int64_t pa = a[DATA] + a[FWD] + a[BWD], pb = b[DATA] + b[FWD] + b[BWD];
                int64_t top = pa > pb ? pa : pb;
                a[BWD_WAIT] = top - pa;
                b[BWD_WAIT] = top - pb;
            }
        }
        for (size_t i = 0; i < (size_t)T * R; i++)
            m.rows[i].parallel = &par[m.rows[i].rank];
        uint32_t nodes = 1 + (uint32_t)rand_below(&seed, 5), node_of[R];
        for (uint32_t r = 0; r < R; r++)
            node_of[r] = (uint32_t)rand_below(&seed, nodes);
        for (int dense = 0; dense < 2; dense++) {
            sf_summary *all = NULL, *merged = NULL;
            assert_int_equal(sf_summary_build(&schema, &meta, m.rows, (size_t)T * R, dense, &all),
                             0);
            sf_row *part = malloc((size_t)T * R * sizeof *part);
            uint32_t order[5] = {0, 1, 2, 3, 4};
            for (uint32_t i = nodes - 1; i > 0; i--) {
                uint32_t j = (uint32_t)rand_below(&seed, i + 1), x = order[i];
                order[i] = order[j];
                order[j] = x;
            }
            for (uint32_t k = 0; k < nodes; k++) {
                size_t n = 0;
                for (size_t i = 0; i < (size_t)T * R; i++)
                    if (node_of[m.rows[i].rank] == order[k])
                        part[n++] = m.rows[i];
                if (n == 0)
                    continue;
                sf_summary *one = NULL;
                assert_int_equal(sf_summary_build(&schema, &meta, part, n, dense, &one), 0);
                if (merged == NULL)
                    merged = one;
                else {
                    assert_int_equal(sf_summary_merge(merged, one), 0);
                    sf_summary_free(one);
                }
            }
            free(part);
            parts_equal(all->cohort, merged->cohort);
            sf_report *ra = NULL, *rm = NULL;
            assert_int_equal(sf_report_compute(all, &gates, &ra), 0);
            assert_int_equal(sf_report_compute(merged, &gates, &rm), 0);
            assert_int_equal(ra->cohorts, SF_COHORTS_APPLIED);
            assert_int_equal(ra->n_cohorts, 4);
            verdicts_equal(ra, rm);
            /* The pipeline view names the slowed rank's stage and rank. */
            assert_true(ra->pipeline.present);
            assert_true(ra->pipeline.origin);
            assert_int_equal(ra->pipeline.origin_pp, slow / 2);
            assert_int_equal(ra->pipeline.origin_rank, slow);
            assert_int_equal(ra->pipeline.origin_stage, slow_stage == 2 ? BWD : slow_stage);
            sf_report_free(ra);
            sf_report_free(rm);
            sf_summary_free(all);
            sf_summary_free(merged);
        }
        matrix_free(&m);
    }
    sf_schema_clear(&schema);
}

/* The part's top-2 of one (step, cohort, boundary), found by brute force:
 * the largest prefix (ties: the lower rank), then the largest of the rest. */
static void top2_by_hand(const sf_row *rows, size_t n, int64_t step, const sf_parallel *par,
                         uint32_t pp, uint32_t j, sf_top2 *ret, uint32_t *ret_count)
{
    *ret = (sf_top2){INT64_MIN, INT64_MIN, SF_NO_RANK, SF_NO_RANK};
    *ret_count = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            if (rows[i].step != step || par[rows[i].rank].index[SF_PAR_PP] != pp)
                continue;
            int64_t v = 0;
            for (uint32_t k = 0; k <= j; k++)
                v += rows[i].d[k];
            uint32_t r = rows[i].rank;
            *ret_count += pass == 0;
            int64_t *bv = pass == 0 ? &ret->v1 : &ret->v2;
            uint32_t *br = pass == 0 ? &ret->r1 : &ret->r2;
            if (pass == 1 && r == ret->r1)
                continue;
            if (v > *bv || (v == *bv && r < *br))
                *bv = v, *br = r;
        }
}

/* Rows of 12 ranks (pp=0..2 x dp=0..3) on steps 7, 10, 13, ... (not
 * consecutive) and, in some trials, rank 5 missing from a step, with
 * durations of a few values (ties at every boundary): the part is the same
 * built from the rows in (step, rank) order or shuffled, and each cell
 * holds the two largest prefixes of its cohort, ties to the lower rank. */
static void part_any_row_order(void **state)
{
    (void)state;
    enum { T = 12, R = 12, PP = 3 };
    sf_schema schema;
    assert_int_equal(sf_schema_init_sync(&schema, 1, 4, recorded, NULL, 1, 1u << 2), 0);
    sf_window_meta meta = meta_for(R);
    sf_parallel par[R];
    for (uint32_t r = 0; r < R; r++) {
        char text[64];
        snprintf(text, sizeof text, "pp=%u/%u,dp=%u/%u", r / (R / PP), PP, r % (R / PP), R / PP);
        par[r] = coords(text);
    }
    uint64_t seed = 17;
    for (int trial = 0; trial < 30; trial++) {
        struct matrix m = matrix_new(T, R, S5);
        m.first_step = 7;
        matrix_bind_rows(&m);
        for (size_t i = 0; i < (size_t)T * R * S5; i++)
            m.d[i] = (1 + rand_below(&seed, 3)) * MS;
        for (size_t i = 0; i < (size_t)T * R; i++) {
            m.rows[i].step = 7 + 3 * (m.rows[i].step - 7);
            m.rows[i].parallel = &par[m.rows[i].rank];
        }
        size_t n = 0; /* some trials drop rank 5 from every other step */
        for (size_t i = 0; i < (size_t)T * R; i++)
            if (!(trial % 3 == 1 && m.rows[i].rank == 5 && (i / R) % 2 == 0))
                m.rows[n++] = m.rows[i];
        sf_row *shuffled = malloc(n * sizeof *shuffled);
        memcpy(shuffled, m.rows, n * sizeof *shuffled);
        for (size_t i = n - 1; i > 0; i--) {
            size_t k = (size_t)rand_below(&seed, (int64_t)i + 1);
            sf_row x = shuffled[i];
            shuffled[i] = shuffled[k];
            shuffled[k] = x;
        }
        for (int dense = 0; dense < 2; dense++) {
            sf_summary *a = NULL, *b = NULL;
            assert_int_equal(sf_summary_build(&schema, &meta, m.rows, n, dense, &a), 0);
            assert_int_equal(sf_summary_build(&schema, &meta, shuffled, n, dense, &b), 0);
            assert_false(a->parallel_conflict);
            assert_false(b->parallel_conflict);
            parts_equal(a->cohort, b->cohort);
            const sf_cohort_summary *c = a->cohort;
            assert_int_equal(c->n_steps, T);
            assert_int_equal(c->n_cohorts, PP);
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t q = 0; q < PP; q++)
                    for (uint32_t j = 0; j < S5; j++) {
                        sf_top2 want;
                        uint32_t count;
                        top2_by_hand(m.rows, n, 7 + 3 * (int64_t)t, par, c->cohort_pp[q], j, &want,
                                     &count);
                        size_t at = (size_t)t * PP + q;
                        assert_int_equal(c->count[at], count);
                        const sf_top2 *got = &c->prefix_top2[at * S5 + j];
                        assert_int_equal(got->v1, want.v1);
                        assert_int_equal(got->r1, want.r1);
                        assert_int_equal(got->v2, want.v2);
                        assert_int_equal(got->r2, want.r2);
                    }
            sf_summary_free(a);
            sf_summary_free(b);
        }
        free(shuffled);
        matrix_free(&m);
    }
    sf_schema_clear(&schema);
}

/* ---- the pipeline view --------------------------------------------------------- */

/* pipe_init_seeded with each data-parallel pair's own gradient all-reduce
 * (ranks 0, 1 and ranks 2, 3) instead of one over every rank. */
static void pipe_local_sync(struct pipe *p)
{
    for (uint32_t t = 0; t < p->m.steps; t++)
        for (uint32_t r = 0; r < p->m.ranks; r += 2) {
            int64_t *a = cell(&p->m, t, r), *b = cell(&p->m, t, r + 1);
            int64_t pa = a[DATA] + a[FWD] + a[BWD], pb = b[DATA] + b[FWD] + b[BWD];
            int64_t top = pa > pb ? pa : pb;
            a[BWD_WAIT] = top - pa;
            b[BWD_WAIT] = top - pb;
        }
}

/* The what-if of one data-parallel rank restores it to its cohort's
 * median. With rank 3 absent, rank 2 is alone in pipeline stage 1 and its
 * forward is 20 ms longer than stage 0's by its role: against every rank's
 * median it would "save" the 10 ms by which it arrives after rank 1 in each
 * step; inside its cohort it has no peer and saves nothing, and neither
 * does rank 1 (its cohort's midpoint still arrives before rank 2). */
static void whatif_inside_cohorts(void **state)
{
    (void)state;
    for (int declared = 0; declared < 2; declared++) {
        struct pipe p;
        pipe_init(&p, 40, 3, declared);
        sf_summary *s = pipe_summary(&p, 0);
        sf_whatif *w = NULL;
        assert_int_equal(sf_whatif_compute(s, NULL, NULL, &w), 0);
        int64_t saved2 = 0;
        for (uint32_t i = 0; i < w->n_ranks; i++)
            if (w->ranks[i].rank == 2)
                saved2 = w->ranks[i].saved_ns;
        if (declared)
            assert_int_equal(w->n_ranks, 0);
        else
            assert_in_range(saved2 / 40, 8 * MS, 12 * MS);
        sf_whatif_free(w);
        sf_summary_free(s);
        pipe_clear(&p);
    }
}

/* Rank 1 (stage 0) is 30 ms slow in backward: the first delay of every step
 * is stage 0's backward, rank 1, about 30 ms behind rank 0. Rank 1 arrives
 * at 170 ms (10 + 50 + 110) and stage 1 at 160 (10 + 70 + 80), so the
 * delay costs the step 10 ms of its 30, which is also what restoring stage
 * 0 saves; stage 1 waits about 10 ms at the end of each step (its bubble),
 * stage 0 none, and restoring stage 1 saves nothing. */
static void pipeline_view_first_delay(void **state)
{
    (void)state;
    struct pipe p;
    pipe_init_seeded(&p, 40, 4, true, 51, 30 * MS);
    pipe_local_sync(&p);
    sf_report *r = pipe_compute(&p);
    const sf_pipeline_view *v = &r->pipeline;
    assert_int_equal(r->cohorts, SF_COHORTS_APPLIED);
    assert_true(v->present);
    assert_int_equal(v->n_stages, 2);
    assert_true(v->origin);
    assert_int_equal(v->origin_pp, 0);
    assert_int_equal(v->origin_rank, 1);
    assert_int_equal(v->origin_stage, BWD);
    assert_int_equal(v->origin_steps, 40);
    assert_in_range(v->median_delay_ns, 27 * MS, 32 * MS);
    assert_in_range(v->median_cost_ns, 8 * MS, 12 * MS);
    assert_int_equal(v->stages[0].origin_steps, 40);
    assert_int_equal(v->stages[1].origin_steps, 0);
    assert_int_equal(v->stages[0].ranks, 2);
    assert_int_equal(v->stages[0].bubble_ns, 0);
    assert_in_range(v->stages[1].bubble_ns / 40, 8 * MS, 12 * MS);
    assert_in_range(v->stages[0].restore_saved_ns / 40, 8 * MS, 12 * MS);
    assert_int_equal(v->stages[1].restore_saved_ns, 0);
    for (uint32_t i = 0; i < r->steps; i++) {
        assert_int_equal(v->step_origin[i], 0);
        assert_in_range(v->step_delay[(size_t)i * 2], 27 * MS, 32 * MS);
        assert_true(v->step_delay[(size_t)i * 2 + 1] < 3 * MS);
    }
    pipe_clear(&p);

    /* Without coordinates there is no pipeline view. */
    pipe_init_seeded(&p, 40, 4, false, 51, 30 * MS);
    pipe_local_sync(&p);
    r = pipe_compute(&p);
    assert_false(r->pipeline.present);
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
        cmocka_unit_test(merged_part_equals_dense),
        cmocka_unit_test(part_any_row_order),
        cmocka_unit_test(gather_copies_and_conflicts),
        cmocka_unit_test(pipeline_view_first_delay),
        cmocka_unit_test(whatif_inside_cohorts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

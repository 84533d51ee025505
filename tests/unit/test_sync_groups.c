/*
 * Synchronizing groups (docs/ACCOUNTING.md, "Synchronizing groups"): the
 * group of each synchronizing stage, accumulated sync waits in rows and
 * dense rows, and the wait rule inside tp and pp groups. Two fixtures:
 * a 2-way tp x 2-way dp job whose forward all-reduces in its tp group after
 * every layer, rank 1's second layer slowed: by arrival order its tp peer
 * (rank 0) is named, the victim; by the wait rule rank 1, its victim rank 0.
 * A 2-stage pipeline x 2-way dp job whose stage 1 waits for stage 0's
 * activations by structure, rank 1 (stage 0) slowed: the wait rule names
 * rank 1, its victim rank 3, and a clean pipeline names nobody.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "matrix.h"

#define MS INT64_C(1000000)
#define US INT64_C(1000)

static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                       "model.backward_cpu_wall", "step.other_cpu_wall"};
enum { DATA, FWD, FWD_WAIT, BWD, BWD_WAIT, OTHER, S6 };
enum { J = 2 }; /* synchronizing stages: forward, backward */

static sf_parallel coords(const char *text)
{
    sf_parallel p;
    assert_int_equal(sf_parallel_parse(text, &p, NULL, 0), 0);
    return p;
}

struct job {
    sf_schema schema;
    struct matrix m;
    sf_parallel par[4];
    int64_t *waits; /* [steps * ranks][2 * J] */
    sf_report *report;
};

static void job_schema(struct job *j, uint8_t fwd_group, uint8_t bwd_group)
{
    assert_int_equal(sf_schema_init_sync(&j->schema, 1, 4, recorded, NULL, 1, 3u << 1), 0);
    uint8_t groups[J] = {fwd_group, bwd_group};
    assert_int_equal(sf_schema_set_sync_groups(&j->schema, groups, J), 0);
}

static int64_t *wait_of(struct job *j, uint32_t t, uint32_t r)
{
    return &j->waits[((size_t)t * j->m.ranks + r) * 2 * J];
}

/* Backward: own work then an all-reduce of every rank; its wait counted as
 * one sync point. */
static void backward(struct job *j, uint32_t t, const int64_t *end, uint64_t *seed)
{
    int64_t arrive[4], last = 0;
    for (uint32_t r = 0; r < 4; r++) {
        int64_t *d = cell(&j->m, t, r);
        d[BWD] = 30 * MS + rand_below(seed, MS);
        arrive[r] = end[r] + d[BWD];
        last = arrive[r] > last ? arrive[r] : last;
    }
    for (uint32_t r = 0; r < 4; r++) {
        int64_t *d = cell(&j->m, t, r);
        d[BWD_WAIT] = last - arrive[r];
        d[OTHER] = 5 * MS;
        wait_of(j, t, r)[1] = d[BWD_WAIT];
        wait_of(j, t, r)[J + 1] = 1;
    }
}

static void job_rows(struct job *j, const char *const layout[4])
{
    for (uint32_t r = 0; r < 4; r++)
        j->par[r] = coords(layout[r]);
    for (size_t i = 0; i < (size_t)j->m.steps * j->m.ranks; i++) {
        j->m.rows[i].parallel = &j->par[j->m.rows[i].rank];
        j->m.rows[i].sync_wait = &j->waits[i * 2 * J];
    }
}

/* tp x dp: rank r at tp = r % 2, dp = r / 2. Forward: 4 layers of 5 ms
 * (+ noise), each ending in an all-reduce of the tp group that every member
 * leaves when the last arrives; then 1 ms of loss. Rank 1's second layer is
 * `fault` longer, and rank 0's last layer `extra` longer (1 ms: so that it
 * is the last to reach the stage's last sync point). */
static void tp_init_extra(struct job *j, uint32_t steps, int64_t fault, uint8_t fwd_group,
                          int64_t extra)
{
    static const char *const layout[4] = {"tp=0/2,dp=0/2", "tp=1/2,dp=0/2", "tp=0/2,dp=1/2",
                                          "tp=1/2,dp=1/2"};
    memset(j, 0, sizeof *j);
    job_schema(j, fwd_group, SF_SYNC_DP);
    j->m = matrix_new(steps, 4, S6);
    j->waits = calloc((size_t)steps * 4 * 2 * J, sizeof *j->waits);
    uint64_t seed = 51;
    for (uint32_t t = 0; t < steps; t++) {
        int64_t end[4];
        for (uint32_t g = 0; g < 2; g++) {
            int64_t cur[2], wait[2] = {0, 0}, last_arrive[2] = {0, 0};
            for (uint32_t q = 0; q < 2; q++) {
                int64_t *d = cell(&j->m, t, 2 * g + q);
                d[DATA] = 5 * MS + rand_below(&seed, MS / 2);
                cur[q] = d[DATA];
            }
            for (uint32_t l = 0; l < 4; l++) {
                int64_t arrive[2];
                for (uint32_t q = 0; q < 2; q++) {
                    uint32_t r = 2 * g + q;
                    int64_t c = 5 * MS + rand_below(&seed, MS / 2);
                    c += r == 1 && l == 1 ? fault : 0;
                    c += r == 0 && l == 3 ? extra : 0;
                    arrive[q] = cur[q] + c;
                    last_arrive[q] = arrive[q];
                }
                int64_t exit = arrive[0] > arrive[1] ? arrive[0] : arrive[1];
                for (uint32_t q = 0; q < 2; q++) {
                    wait[q] += exit - arrive[q];
                    cur[q] = exit;
                }
            }
            for (uint32_t q = 0; q < 2; q++) {
                uint32_t r = 2 * g + q;
                int64_t *d = cell(&j->m, t, r);
                end[r] = cur[q] + MS + rand_below(&seed, MS / 4);
                d[FWD] = last_arrive[q] - d[DATA];
                d[FWD_WAIT] = end[r] - last_arrive[q];
                wait_of(j, t, r)[0] = wait[q];
                wait_of(j, t, r)[J] = 4;
            }
        }
        backward(j, t, end, &seed);
    }
    job_rows(j, layout);
}

static void tp_init(struct job *j, uint32_t steps, int64_t fault, uint8_t fwd_group)
{
    tp_init_extra(j, steps, fault, fwd_group, MS);
}

/* pp x dp: rank r at pp = r / 2, dp = r % 2. Forward on stage 0: 20 ms (+
 * noise, + fault on rank 1), then the send of its activations (a sync point
 * without a wait). On stage 1: 1 ms, then the receive, which waits until
 * its stage 0 peer sent, then 20 ms. */
static void pp_init(struct job *j, uint32_t steps, int64_t fault)
{
    static const char *const layout[4] = {"pp=0/2,dp=0/2", "pp=0/2,dp=1/2", "pp=1/2,dp=0/2",
                                          "pp=1/2,dp=1/2"};
    memset(j, 0, sizeof *j);
    job_schema(j, SF_SYNC_PP, SF_SYNC_DP);
    j->m = matrix_new(steps, 4, S6);
    j->waits = calloc((size_t)steps * 4 * 2 * J, sizeof *j->waits);
    uint64_t seed = 7;
    for (uint32_t t = 0; t < steps; t++) {
        int64_t end[4];
        for (uint32_t dp = 0; dp < 2; dp++) {
            int64_t *d0 = cell(&j->m, t, dp), *d1 = cell(&j->m, t, 2 + dp);
            d0[DATA] = 5 * MS + rand_below(&seed, MS / 2);
            d1[DATA] = 5 * MS + rand_below(&seed, MS / 2);
            d0[FWD] = 20 * MS + rand_below(&seed, MS / 2) + (dp == 1 ? fault : 0);
            d0[FWD_WAIT] = 0;
            end[dp] = d0[DATA] + d0[FWD];
            wait_of(j, t, dp)[0] = 0;
            wait_of(j, t, dp)[J] = 1;
            int64_t enter = d1[DATA] + MS, exit = end[dp] > enter ? end[dp] : enter;
            d1[FWD] = MS;
            d1[FWD_WAIT] = exit - enter + 20 * MS + rand_below(&seed, MS / 2);
            end[2 + dp] = enter + d1[FWD_WAIT];
            wait_of(j, t, 2 + dp)[0] = exit - enter;
            wait_of(j, t, 2 + dp)[J] = 1;
        }
        backward(j, t, end, &seed);
    }
    job_rows(j, layout);
}

static sf_report *job_compute(struct job *j)
{
    sf_gates gates;
    sf_gates_default(&gates);
    sf_window_meta meta = meta_for(4);
    sf_report_free(j->report);
    j->report = NULL;
    assert_int_equal(sf_report_from_rows(&j->schema, &meta, j->m.rows,
                                         (size_t)j->m.steps * j->m.ranks, &gates, &j->report),
                     0);
    return j->report;
}

static void job_clear(struct job *j)
{
    sf_report_free(j->report);
    matrix_free(&j->m);
    free(j->waits);
    sf_schema_clear(&j->schema);
}

static void same_ledger(const sf_report *a, const sf_report *b)
{
    assert_true(a->exposed_total_ns == b->exposed_total_ns);
    for (uint32_t k = 0; k < a->schema.n_stages; k++) {
        assert_int_equal(a->stages[k].advance_ns, b->stages[k].advance_ns);
        assert_int_equal(a->stages[k].leader_rank, b->stages[k].leader_rank);
    }
}

/* ---- groups ----------------------------------------------------------------- */

static void groups_set_and_named(void **state)
{
    (void)state;
    sf_schema s, c;
    assert_int_equal(sf_schema_init_sync(&s, 1, 4, recorded, NULL, 1, 3u << 1), 0);
    uint64_t hash = s.hash;
    assert_int_equal(s.sync_group[FWD], SF_SYNC_WORLD);
    uint8_t g[2] = {SF_SYNC_TP, SF_SYNC_PP};
    assert_int_equal(sf_schema_set_sync_groups(&s, g, 2), 0);
    assert_int_equal(s.sync_group[FWD], SF_SYNC_TP);
    assert_int_equal(s.sync_group[BWD], SF_SYNC_PP);
    assert_int_equal(s.sync_group[DATA], SF_SYNC_WORLD);
    assert_true(s.hash == hash); /* not hashed */
    assert_int_equal(sf_schema_copy(&c, &s), 0);
    assert_int_equal(c.sync_group[BWD], SF_SYNC_PP);
    sf_schema_clear(&c);
    uint8_t bad[2] = {SF_SYNC_TP, 4};
    assert_int_equal(sf_schema_set_sync_groups(&s, bad, 2), -EINVAL);
    assert_int_equal(sf_schema_set_sync_groups(&s, g, 1), -EINVAL);
    assert_int_equal(sf_schema_set_sync_groups(&s, NULL, 0), 0);
    assert_int_equal(s.sync_group[BWD], SF_SYNC_WORLD);
    assert_int_equal(sf_sync_group_parse("tp"), SF_SYNC_TP);
    assert_int_equal(sf_sync_group_parse("world"), SF_SYNC_WORLD);
    assert_int_equal(sf_sync_group_parse("TP"), -EINVAL);
    assert_int_equal(sf_sync_group_parse(NULL), -EINVAL);
    assert_string_equal(sf_sync_group_name(SF_SYNC_DP), "dp");
    sf_schema_clear(&s);
}

/* Waits beyond the recorded stage, a count out of range, a wait without a
 * count: refused. */
static void waits_validated(void **state)
{
    (void)state;
    struct job j;
    tp_init(&j, 4, 8 * MS, SF_SYNC_TP);
    sf_row row = j.m.rows[0];
    int64_t w[2 * J];
    memcpy(w, row.sync_wait, sizeof w);
    row.sync_wait = w;
    assert_int_equal(sf_row_validate(&row, &j.schema), 0);
    w[0] = row.d[FWD] + row.d[FWD_WAIT] + 1;
    assert_int_equal(sf_row_validate(&row, &j.schema), -ERANGE);
    w[0] = 0;
    w[J] = 0;
    assert_int_equal(sf_row_validate(&row, &j.schema), -ERANGE);
    w[J] = (int64_t)SF_MAX_SYNC_WAITS + 1;
    assert_int_equal(sf_row_validate(&row, &j.schema), -ERANGE);
    w[0] = -1;
    w[J] = 0; /* no mark */
    assert_int_equal(sf_row_validate(&row, &j.schema), 0);
    j.m.rows[3].sync_wait = w;
    w[1] = -5;
    sf_gates gates;
    sf_gates_default(&gates);
    sf_window_meta meta = meta_for(4);
    sf_report *r = NULL;
    assert_int_equal(sf_report_from_rows(&j.schema, &meta, j.m.rows, 16, &gates, &r), -ERANGE);
    job_clear(&j);
}

/* Many sync points: the dense rows keep each rank's accumulated wait and
 * count, through a merge of two halves too. */
static void waits_accumulated(void **state)
{
    (void)state;
    struct job j;
    tp_init(&j, 6, 8 * MS, SF_SYNC_TP);
    sf_window_meta meta = meta_for(4);
    sf_summary *whole = NULL, *a = NULL, *b = NULL;
    size_t n = (size_t)j.m.steps * 4;
    assert_int_equal(sf_summary_build(&j.schema, &meta, j.m.rows, n, true, &whole), 0);
    assert_non_null(whole->dense->sync_wait);
    sf_row *odd = calloc(n, sizeof *odd), *even = calloc(n, sizeof *even);
    size_t n_odd = 0, n_even = 0;
    for (size_t i = 0; i < n; i++) {
        if (j.m.rows[i].rank % 2)
            odd[n_odd++] = j.m.rows[i];
        else
            even[n_even++] = j.m.rows[i];
    }
    assert_int_equal(sf_summary_build(&j.schema, &meta, odd, n_odd, true, &a), 0);
    assert_int_equal(sf_summary_build(&j.schema, &meta, even, n_even, true, &b), 0);
    assert_int_equal(sf_summary_merge(a, b), 0);
    for (uint32_t t = 0; t < j.m.steps; t++)
        for (uint32_t r = 0; r < 4; r++) {
            const int64_t *x = &whole->dense->sync_wait[((size_t)t * 4 + r) * 2 * J];
            const int64_t *y = &a->dense->sync_wait[((size_t)t * 4 + r) * 2 * J];
            assert_memory_equal(x, wait_of(&j, t, r), 2 * J * sizeof *x);
            assert_memory_equal(x, y, 2 * J * sizeof *x);
            assert_int_equal(x[J], 4); /* four layers, four sync points */
            assert_int_equal(x[J + 1], 1);
        }
    /* Rank 0 waited for rank 1's slow layer in every step. */
    assert_true(wait_of(&j, 0, 0)[0] > 7 * MS);
    assert_true(wait_of(&j, 0, 1)[0] < 2 * MS);
    sf_summary_free(whole);
    sf_summary_free(a);
    sf_summary_free(b);
    free(odd);
    free(even);
    job_clear(&j);
}

/* ---- the tp fixture ------------------------------------------------------------ */

static void tp_arrival_names_victim_waits_name_culprit(void **state)
{
    (void)state;
    struct job w, t;
    tp_init(&w, 40, 8 * MS, SF_SYNC_WORLD);
    tp_init(&t, 40, 8 * MS, SF_SYNC_TP);
    sf_report *rw = job_compute(&w), *rt = job_compute(&t);
    /* By arrival at the stage's last sync point (inside cohorts), rank 0:
     * it waited for rank 1 and then did its last layer. */
    assert_true(rw->straggler.present);
    assert_int_equal(rw->straggler.rank, 0);
    assert_int_equal(rw->straggler.sync_stage, FWD);
    assert_int_equal(rw->straggler.group, SF_SYNC_WORLD);
    /* By the wait rule, rank 1, and rank 0 its victim. */
    assert_true(rt->straggler.present);
    assert_int_equal(rt->straggler.rank, 1);
    assert_int_equal(rt->straggler.sync_stage, FWD);
    assert_int_equal(rt->straggler.origin_stage, FWD);
    assert_int_equal(rt->straggler.group, SF_SYNC_TP);
    assert_true(rt->straggler.wait_rule);
    assert_int_equal(rt->straggler.victim_rank, 0);
    assert_true(rt->straggler.arrived_last_steps >= 36);
    assert_true(rt->straggler.median_lateness_ns > 5 * MS);
    assert_true(rt->straggler.median_lateness_ns < 9 * MS);
    assert_int_equal(rt->cohorts, SF_COHORTS_APPLIED);
    same_ledger(rw, rt);
    job_clear(&w);
    job_clear(&t);
}

static void tp_clean_names_nobody(void **state)
{
    (void)state;
    struct job t;
    tp_init_extra(&t, 40, 0, SF_SYNC_TP, 0);
    sf_report *r = job_compute(&t);
    assert_false(r->straggler.present && r->straggler.group == SF_SYNC_TP);
    job_clear(&t);
}

/* Rows without waits (an old client): the tp stage falls back to the
 * arrival rule, and the report is that of a schema without groups. */
static void old_rows_unchanged(void **state)
{
    (void)state;
    struct job w, t;
    tp_init(&w, 40, 8 * MS, SF_SYNC_WORLD);
    tp_init(&t, 40, 8 * MS, SF_SYNC_TP);
    for (size_t i = 0; i < (size_t)40 * 4; i++)
        w.m.rows[i].sync_wait = t.m.rows[i].sync_wait = NULL;
    sf_report *rw = job_compute(&w), *rt = job_compute(&t);
    same_ledger(rw, rt);
    assert_int_equal(rw->straggler.present, rt->straggler.present);
    assert_int_equal(rw->straggler.rank, rt->straggler.rank);
    assert_int_equal(rw->straggler.sync_stage, rt->straggler.sync_stage);
    assert_int_equal(rw->straggler.arrived_last_steps, rt->straggler.arrived_last_steps);
    assert_true(rw->straggler.median_lateness_ns == rt->straggler.median_lateness_ns);
    assert_int_equal(rw->n_suspects, rt->n_suspects);
    job_clear(&w);
    job_clear(&t);

    /* Waits in the backward only: the tp forward has none, so it keeps the
     * arrival rule too. */
    tp_init(&w, 40, 8 * MS, SF_SYNC_WORLD);
    tp_init(&t, 40, 8 * MS, SF_SYNC_TP);
    for (uint32_t i = 0; i < 40 * 4; i++) {
        t.waits[i * 2 * J] = -1;
        t.waits[i * 2 * J + J] = 0;
    }
    rw = job_compute(&w);
    rt = job_compute(&t);
    assert_int_equal(rt->straggler.present, rw->straggler.present);
    assert_int_equal(rt->straggler.rank, rw->straggler.rank);
    assert_int_equal(rt->straggler.group, SF_SYNC_TP);
    assert_false(rt->straggler.wait_rule);
    assert_int_equal(rt->straggler.arrived_last_steps, rw->straggler.arrived_last_steps);
    job_clear(&w);
    job_clear(&t);
}

/* ---- the pp fixture ------------------------------------------------------------ */

static void pp_wait_rule(void **state)
{
    (void)state;
    struct job p;
    pp_init(&p, 40, 10 * MS);
    sf_report *r = job_compute(&p);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 1);
    assert_int_equal(r->straggler.group, SF_SYNC_PP);
    assert_int_equal(r->straggler.sync_stage, FWD);
    assert_int_equal(r->straggler.victim_rank, 3);
    assert_true(r->straggler.median_lateness_ns > 8 * MS);
    job_clear(&p);

    /* Stage 1 waits for stage 0 in every step, by structure: no verdict. */
    pp_init(&p, 40, 0);
    r = job_compute(&p);
    assert_false(r->straggler.present);
    job_clear(&p);
}

/* pp x dp as the real Gloo jobs measured it (bench/parallel/pjob.py): stage
 * 0 forwards (wait 0, its sends), its two replicas `noise` apart in turn
 * (host noise, rank 0 the slower one in odd steps, rank 1 in even ones);
 * stage 1 receives (8 ms of wait) and computes 20 ms, rank 3 (stage 1,
 * replica 1) `fault` longer, so that it finds its later activations already
 * sent and waits `fault` less: both stage 1 ranks leave forward together. */
static void pp_replica_fault_init(struct job *j, uint32_t steps, int64_t noise, int64_t fault)
{
    static const char *const layout[4] = {"pp=0/2,dp=0/2", "pp=0/2,dp=1/2", "pp=1/2,dp=0/2",
                                          "pp=1/2,dp=1/2"};
    memset(j, 0, sizeof *j);
    job_schema(j, SF_SYNC_PP, SF_SYNC_DP);
    j->m = matrix_new(steps, 4, S6);
    j->waits = calloc((size_t)steps * 4 * 2 * J, sizeof *j->waits);
    uint64_t seed = 3;
    for (uint32_t t = 0; t < steps; t++) {
        int64_t end[4];
        for (uint32_t r = 0; r < 4; r++) {
            int64_t *d = cell(&j->m, t, r), wait = 0;
            int64_t compute = 20 * MS + rand_below(&seed, MS / 2);
            d[DATA] = 5 * MS + rand_below(&seed, MS / 4);
            if (r < 2) { /* compute, then the send: the last sync point */
                d[FWD] = compute + (r == t % 2 ? 0 : noise);
                d[FWD_WAIT] = 0;
            } else { /* the receive, then compute after it */
                wait = 8 * MS + rand_below(&seed, MS / 2) - (r == 3 ? fault : 0);
                d[FWD] = MS;
                d[FWD_WAIT] = wait + compute + (r == 3 ? fault : 0);
            }
            wait_of(j, t, r)[0] = wait;
            wait_of(j, t, r)[J] = 1;
            end[r] = d[DATA] + d[FWD] + d[FWD_WAIT];
        }
        backward(j, t, end, &seed);
    }
    job_rows(j, layout);
}

/* Rank 3's fault turns its pp peer rank 2's figures (taken against rank 3)
 * negative, so rank 0 is the most blamed of group {0, 2} in every step, and
 * the steps where it happened to be the slower replica are eligible; its own
 * work beats its replica's in half of the steps only, so it is nobody's
 * culprit. Rank 3 itself: named when its fault outweighs the stage 0 noise. */
static void pp_replica_fault_names_no_bystander(void **state)
{
    (void)state;
    struct job p;
    pp_replica_fault_init(&p, 40, 10 * MS, 4 * MS);
    sf_report *r = job_compute(&p);
    assert_false(r->straggler.present && r->straggler.rank != 3);
    job_clear(&p);

    pp_replica_fault_init(&p, 40, 3 * MS, 4 * MS);
    r = job_compute(&p);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 3);
    assert_int_equal(r->straggler.group, SF_SYNC_PP);
    assert_int_equal(r->straggler.sync_stage, FWD);
    job_clear(&p);

    /* The same job without the fault: nobody. */
    pp_replica_fault_init(&p, 40, 10 * MS, 0);
    r = job_compute(&p);
    assert_false(r->straggler.present);
    job_clear(&p);
}

/* ---- across nodes ------------------------------------------------------------ */

static sf_summary *summary_of(struct job *j, uint32_t rank_mask)
{
    size_t n = (size_t)j->m.steps * j->m.ranks, n_sel = 0;
    sf_row *sel = calloc(n, sizeof *sel);
    assert_non_null(sel);
    for (size_t i = 0; i < n; i++)
        if (rank_mask >> j->m.rows[i].rank & 1)
            sel[n_sel++] = j->m.rows[i];
    sf_window_meta meta = meta_for(4);
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&j->schema, &meta, sel, n_sel, true, &s), 0);
    free(sel);
    return s;
}

static void same_verdict(const sf_report *a, const sf_report *b)
{
    assert_int_equal(a->cohorts, b->cohorts);
    assert_int_equal(a->straggler.present, b->straggler.present);
    assert_int_equal(a->straggler.rank, b->straggler.rank);
    assert_int_equal(a->straggler.sync_stage, b->straggler.sync_stage);
    assert_int_equal(a->straggler.group, b->straggler.group);
    assert_int_equal(a->straggler.wait_rule, b->straggler.wait_rule);
    assert_int_equal(a->straggler.victim_rank, b->straggler.victim_rank);
    assert_int_equal(a->straggler.arrived_last_steps, b->straggler.arrived_last_steps);
    assert_int_equal(a->straggler.eligible_steps, b->straggler.eligible_steps);
    assert_true(a->straggler.median_lateness_ns == b->straggler.median_lateness_ns);
    same_ledger(a, b);
}

/* The window's rows split over two nodes so that every group spans both
 * (node A holds the ranks of node_a, node B the others), each node's
 * summary built alone and merged in either order: the wait rule's verdict
 * is one node's. Then with the merged dense rows stripped of coordinates,
 * as the wire leaves them: the groups come from the cohort part, and the
 * verdict stays. */
static void split_merges_to_one_verdict(struct job *j, uint32_t node_a)
{
    sf_gates gates;
    sf_gates_default(&gates);
    sf_summary *whole = summary_of(j, 0xf);
    sf_report *one = NULL;
    assert_int_equal(sf_report_compute(whole, &gates, &one), 0);
    assert_true(one->straggler.wait_rule);
    for (int order = 0; order < 2; order++) {
        sf_summary *a = summary_of(j, order ? node_a : 0xf & ~node_a);
        sf_summary *b = summary_of(j, order ? 0xf & ~node_a : node_a);
        assert_int_equal(sf_summary_merge(a, b), 0);
        sf_report *merged = NULL;
        assert_int_equal(sf_report_compute(a, &gates, &merged), 0);
        same_verdict(one, merged);
        sf_report_free(merged);
        assert_non_null(a->cohort);
        free(a->dense->parallel);
        a->dense->parallel = NULL;
        assert_int_equal(sf_report_compute(a, &gates, &merged), 0);
        same_verdict(one, merged);
        sf_report_free(merged);
        sf_summary_free(a);
        sf_summary_free(b);
    }
    sf_report_free(one);
    sf_summary_free(whole);
}

static void tp_split_over_nodes(void **state)
{
    (void)state;
    struct job t;
    tp_init(&t, 40, 8 * MS, SF_SYNC_TP);
    split_merges_to_one_verdict(&t, 0x5); /* tp = 0 on node A, tp = 1 on node B */
    job_clear(&t);
}

static void pp_split_over_nodes(void **state)
{
    (void)state;
    struct job p;
    pp_init(&p, 40, 10 * MS);
    split_merges_to_one_verdict(&p, 0x5); /* dp = 0 of both stages on node A */
    job_clear(&p);
}

/* A node whose summary says world for the tp stage (an older peer), merged
 * with one that declares tp, in either order: tp. */
static void sync_groups_merge_either_way(void **state)
{
    (void)state;
    struct job t, w;
    tp_init(&t, 8, 8 * MS, SF_SYNC_TP);
    tp_init(&w, 8, 8 * MS, SF_SYNC_WORLD);
    for (int order = 0; order < 2; order++) {
        sf_summary *a = summary_of(order ? &t : &w, 0x3), *b = summary_of(order ? &w : &t, 0xc);
        assert_int_equal(sf_summary_merge(a, b), 0);
        assert_int_equal(a->schema.sync_group[FWD], SF_SYNC_TP);
        assert_int_equal(a->schema.sync_group[BWD], SF_SYNC_DP);
        sf_summary_free(a);
        sf_summary_free(b);
    }
    job_clear(&t);
    job_clear(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(groups_set_and_named),
        cmocka_unit_test(waits_validated),
        cmocka_unit_test(waits_accumulated),
        cmocka_unit_test(tp_arrival_names_victim_waits_name_culprit),
        cmocka_unit_test(tp_clean_names_nobody),
        cmocka_unit_test(old_rows_unchanged),
        cmocka_unit_test(pp_wait_rule),
        cmocka_unit_test(pp_replica_fault_names_no_bystander),
        cmocka_unit_test(tp_split_over_nodes),
        cmocka_unit_test(pp_split_over_nodes),
        cmocka_unit_test(sync_groups_merge_either_way),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Issue lags with exact numbers (docs/ACCOUNTING.md, "Issue lag" and
 * "Communication verdict"): a rank that arrives on time but issues its
 * collective late is named with its communication as origin where the
 * arrival verdict names nobody; a clean window names none; the gates; the
 * evidence without issue marks; mergeable summaries against the dense one.
 */
#define _GNU_SOURCE /* open_memstream */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stagefrontier/change.h>

#include "change_json.h"
#include "matrix.h"

#define US INT64_C(1000)
#define MS INT64_C(1000000)

static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                       "model.backward_cpu_wall", "step.other_cpu_wall"};
enum { DATA, FWD, BWD, BWD_WAIT, OTHER, S5 };

struct win {
    sf_schema schema;
    struct matrix m;
    int64_t *lag; /* [steps][ranks]: one synchronizing stage */
    sf_gates gates;
    sf_window_meta meta;
    sf_report *report;
};

/* Every rank: data 1, forward 10, backward own work 20 ms with up to 1 ms
 * of noise, other 2 ms; issue lags 20..80 us. */
static void win_init(struct win *w, uint32_t steps, uint32_t ranks, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    assert_int_equal(sf_schema_init_sync(&w->schema, 1, 4, recorded, NULL, 1, 1u << 2), 0);
    w->m = matrix_new(steps, ranks, S5);
    w->lag = calloc((size_t)steps * ranks, sizeof *w->lag);
    assert_non_null(w->lag);
    sf_gates_default(&w->gates);
    w->meta = meta_for(ranks);
    uint64_t st = seed;
    for (uint32_t t = 0; t < steps; t++)
        for (uint32_t r = 0; r < ranks; r++) {
            int64_t *d = cell(&w->m, t, r);
            d[DATA] = 1 * MS;
            d[FWD] = 10 * MS;
            d[BWD] = 20 * MS + rand_below(&st, MS);
            d[OTHER] = 2 * MS;
            w->lag[(size_t)t * ranks + r] = 20 * US + rand_below(&st, 60 * US);
        }
}

/* The collective starts when the last rank issued it and every rank leaves
 * together 1 ms later: each rank's wait runs from its arrival to there. */
static void win_close_waits(struct win *w, bool marks)
{
    uint32_t R = w->m.ranks;
    for (uint32_t t = 0; t < w->m.steps; t++) {
        int64_t start = 0;
        for (uint32_t r = 0; r < R; r++) {
            int64_t *d = cell(&w->m, t, r);
            int64_t issued = d[DATA] + d[FWD] + d[BWD] + w->lag[(size_t)t * R + r];
            start = issued > start ? issued : start;
        }
        for (uint32_t r = 0; r < R; r++) {
            int64_t *d = cell(&w->m, t, r);
            d[BWD_WAIT] = start + 1 * MS - (d[DATA] + d[FWD] + d[BWD]);
            w->m.rows[(size_t)t * R + r].issue_lag = marks ? &w->lag[(size_t)t * R + r] : NULL;
        }
    }
}

static sf_report *win_compute(struct win *w, bool marks)
{
    win_close_waits(w, marks);
    sf_report_free(w->report);
    w->report = NULL;
    assert_int_equal(sf_report_from_rows(&w->schema, &w->meta, w->m.rows,
                                         (size_t)w->m.steps * w->m.ranks, &w->gates, &w->report),
                     0);
    return w->report;
}

static void win_clear(struct win *w)
{
    sf_report_free(w->report);
    matrix_free(&w->m);
    free(w->lag);
    sf_schema_clear(&w->schema);
}

/* rank's inner hook waits ns before it issues, in steps [first, first + n). */
static void late_issue(struct win *w, uint32_t rank, int64_t ns, uint32_t first, uint32_t n)
{
    for (uint32_t t = first; t < first + n; t++)
        w->lag[(size_t)t * w->m.ranks + rank] += ns;
}

static void hidden_rank_named_by_issue_lag(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 50, 4, 7);
    for (uint32_t t = 0; t < 50; t++)
        if (t % 17 != 3) /* 47 of 50 steps */
            late_issue(&w, 2, 6 * MS, t, 1);
    sf_report *r = win_compute(&w, true);
    assert_int_equal(r->comm.visibility, SF_COMM_SEEN);
    assert_int_equal(r->comm.rows, 200);
    assert_int_equal(r->comm.marked_rows, 200);
    assert_true(r->comm.present);
    assert_int_equal(r->comm.rank, 2);
    assert_int_equal(r->comm.sync_stage, BWD);
    assert_int_equal(r->comm.led_steps, 47);
    assert_int_equal(r->comm.eligible_steps, 50);
    assert_true(r->comm.median_lag_ns >= 6 * MS + 20 * US &&
                r->comm.median_lag_ns <= 6 * MS + 80 * US);
    assert_true(r->comm.others_median_ns >= 20 * US && r->comm.others_median_ns <= 80 * US);
    /* The rank arrives on time: no arrival verdict, so the window's
     * straggler is the communication verdict. */
    assert_true(r->straggler.present);
    assert_true(r->straggler.communication);
    assert_int_equal(r->straggler.rank, 2);
    assert_int_equal(r->straggler.arrived_last_steps, 47);
    assert_int_equal(r->straggler.median_lateness_ns, r->comm.median_lag_ns);

    /* The same job without issue marks: the rank hides, and the report
     * says that it cannot see communication lateness. */
    r = win_compute(&w, false);
    assert_false(r->straggler.present);
    assert_false(r->comm.present);
    assert_int_equal(r->comm.visibility, SF_COMM_NO_ISSUE_MARKS);
    assert_int_equal(r->comm.marked_rows, 0);
    win_clear(&w);
}

static void clean_window_names_none(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        struct win w;
        win_init(&w, 50, 8, seed);
        sf_report *r = win_compute(&w, true);
        assert_int_equal(r->comm.visibility, SF_COMM_SEEN);
        assert_false(r->comm.present);
        assert_false(r->straggler.present && r->straggler.communication);
        win_clear(&w);
    }
}

static void gates(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 50, 4, 3);
    /* Below the lag gate (0.5 ms): none; with a lower gate, named. */
    late_issue(&w, 1, 300 * US, 0, 50);
    assert_false(win_compute(&w, true)->comm.present);
    w.gates.comm_lag_min_s = 0.0001;
    sf_report *r = win_compute(&w, true);
    assert_true(r->comm.present);
    assert_int_equal(r->comm.rank, 1);
    assert_int_equal(r->comm.led_steps, 50);
    win_clear(&w);

    /* Late in 25 of 50 steps: not more than half. 26: named. */
    win_init(&w, 50, 4, 4);
    late_issue(&w, 3, 5 * MS, 0, 25);
    assert_false(win_compute(&w, true)->comm.present);
    late_issue(&w, 3, 5 * MS, 25, 1);
    r = win_compute(&w, true);
    assert_true(r->comm.present);
    assert_int_equal(r->comm.led_steps, 26);
    win_clear(&w);

    /* A step where one rank has no mark is not eligible. */
    win_init(&w, 10, 4, 5);
    late_issue(&w, 0, 5 * MS, 0, 10);
    for (uint32_t t = 0; t < 6; t++)
        w.lag[t * 4 + 1] = -1;
    r = win_compute(&w, true);
    assert_int_equal(r->comm.eligible_steps, 4);
    assert_int_equal(r->comm.led_steps, 4);
    assert_int_equal(r->comm.marked_rows, 34);
    win_clear(&w);
}

static void without_sync_stage(void **state)
{
    (void)state;
    sf_schema s;
    assert_int_equal(sf_schema_init_default(&s, 1), 0);
    struct matrix m = matrix_new(4, 2, s.n_stages);
    for (size_t i = 0; i < 8 * s.n_stages; i++)
        m.d[i] = MS;
    sf_window_meta meta = meta_for(2);
    sf_gates g;
    sf_gates_default(&g);
    sf_report *r = NULL;
    assert_int_equal(sf_report_from_rows(&s, &meta, m.rows, 8, &g, &r), 0);
    assert_int_equal(r->comm.visibility, SF_COMM_NO_SYNC_STAGE);
    assert_false(r->comm.present);
    sf_report_free(r);
    matrix_free(&m);
    sf_schema_clear(&s);
}

static void row_bounds(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 2, 2, 9);
    win_close_waits(&w, true);
    sf_row row = w.m.rows[0];
    assert_int_equal(sf_row_validate(&row, &w.schema), 0);
    int64_t lag = row.d[BWD_WAIT];
    row.issue_lag = &lag; /* at the end of the wait: in range */
    assert_int_equal(sf_row_validate(&row, &w.schema), 0);
    lag = row.d[BWD_WAIT] + 1; /* a kernel that started after the host left the stage */
    assert_int_equal(sf_row_validate(&row, &w.schema), 0);
    lag = SF_MAX_DURATION_NS;
    assert_int_equal(sf_row_validate(&row, &w.schema), 0);
    lag = SF_MAX_DURATION_NS + 1;
    assert_int_equal(sf_row_validate(&row, &w.schema), -ERANGE);
    lag = -2;
    assert_int_equal(sf_row_validate(&row, &w.schema), -ERANGE);
    w.m.rows[1].issue_lag = &lag;
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&w.schema, &w.meta, w.m.rows, 4, false, &s), -ERANGE);
    win_clear(&w);
}

static void assert_comm_equal(const sf_comm_summary *a, const sf_comm_summary *b)
{
    assert_int_equal(a->n_sync, b->n_sync);
    assert_int_equal(a->n_steps, b->n_steps);
    assert_int_equal(a->n_ranks, b->n_ranks);
    assert_int_equal(a->rows, b->rows);
    assert_int_equal(a->marked_rows, b->marked_rows);
    size_t TJ = (size_t)a->n_steps * a->n_sync, RJ = (size_t)a->n_ranks * a->n_sync;
    assert_memory_equal(a->steps, b->steps, a->n_steps * sizeof *a->steps);
    assert_memory_equal(a->lag_top2, b->lag_top2, TJ * sizeof *a->lag_top2);
    assert_memory_equal(a->marked, b->marked, TJ * sizeof *a->marked);
    assert_memory_equal(a->ranks, b->ranks, a->n_ranks * sizeof *a->ranks);
    assert_memory_equal(a->rank_max, b->rank_max, RJ * sizeof *a->rank_max);
    assert_memory_equal(a->rank_median, b->rank_median, RJ * sizeof *a->rank_median);
}

/* Rows split by rank into three nodes' mergeable summaries, merged in any
 * order, equal the dense summary of every row, and give its verdict. */
static void merged_equals_dense(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 40, 6, 11);
    late_issue(&w, 4, 3 * MS, 0, 40);
    for (uint32_t t = 0; t < 5; t++)
        w.lag[t * 6 + 5] = -1; /* some unmarked rows */
    sf_report *dense_report = win_compute(&w, true);
    sf_summary *dense = NULL;
    size_t n = (size_t)40 * 6;
    assert_int_equal(sf_summary_build(&w.schema, &w.meta, w.m.rows, n, true, &dense), 0);
    sf_row *part[3];
    size_t n_part[3] = {0};
    for (int p = 0; p < 3; p++)
        part[p] = calloc(n, sizeof(sf_row));
    for (size_t i = 0; i < n; i++) {
        int p = (int)(w.m.rows[i].rank / 2);
        part[p][n_part[p]++] = w.m.rows[i];
    }
    sf_summary *node[3];
    for (int p = 0; p < 3; p++)
        assert_int_equal(sf_summary_build(&w.schema, &w.meta, part[p], n_part[p], false, &node[p]),
                         0);
    assert_int_equal(sf_summary_merge(node[2], node[0]), 0);
    assert_int_equal(sf_summary_merge(node[2], node[1]), 0);
    assert_non_null(node[2]->comm);
    assert_comm_equal(node[2]->comm, dense->comm);
    sf_summary *copy = NULL;
    assert_int_equal(sf_summary_clone(node[2], &copy), 0);
    assert_comm_equal(copy->comm, dense->comm);
    assert_int_equal(sf_summary_bytes(copy), sf_summary_bytes(node[2]));
    sf_report *merged = NULL;
    assert_int_equal(sf_report_compute(node[2], &w.gates, &merged), 0);
    assert_true(merged->comm.present);
    assert_memory_equal(&merged->comm, &dense_report->comm, sizeof merged->comm);
    assert_int_equal(merged->comm.rank, 4);
    sf_report_free(merged);
    sf_summary_free(copy);
    for (int p = 0; p < 3; p++) {
        sf_summary_free(node[p]);
        free(part[p]);
    }
    sf_summary_free(dense);
    win_clear(&w);
}

/* ---- the change view: issue lag against the baseline ------------------- */

/* The summary of one window of w, its waits closed with issue marks. */
static sf_summary *win_summary(struct win *w, bool dense)
{
    win_close_waits(w, true);
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&w->schema, &w->meta, w->m.rows,
                                      (size_t)w->m.steps * w->m.ranks, dense, &s),
                     0);
    return s;
}

/* The reference of three clean 40-step windows of 4 ranks. */
static sf_reference *clean_reference(bool dense)
{
    sf_summary *b[3];
    for (int i = 0; i < 3; i++) {
        struct win w;
        win_init(&w, 40, 4, 100 + (uint64_t)i);
        b[i] = win_summary(&w, dense);
        win_clear(&w);
    }
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)b, 3, &ref), 0);
    for (int i = 0; i < 3; i++)
        sf_summary_free(b[i]);
    assert_non_null(ref->comm_lag_ns);
    assert_int_equal(ref->comm_n_sync, 1);
    assert_int_equal(ref->comm_n[0], 120);
    return ref;
}

static sf_change *change_of(const sf_reference *ref, struct win *w, bool dense)
{
    sf_summary *s = win_summary(w, dense);
    sf_change *c = NULL;
    assert_int_equal(sf_change_compute(ref, s, &w->gates, &c), 0);
    sf_summary_free(s);
    return c;
}

/* Rank 2's issue lag grows by 2 ms against the baseline: the change names it
 * in the backward stage's communication, in dense and mergeable mode. */
static void change_names_late_issue(void **state)
{
    (void)state;
    for (int dense = 0; dense < 2; dense++) {
        sf_reference *ref = clean_reference(dense);
        struct win w;
        win_init(&w, 40, 4, 7);
        late_issue(&w, 2, 2 * MS, 0, 40);
        sf_change *c = change_of(ref, &w, dense);
        assert_true(c->comm.tested);
        assert_true(c->comm.significant);
        assert_int_equal(c->comm.rank, 2);
        assert_int_equal(c->comm.sync_stage, BWD);
        assert_int_equal(c->comm.led_steps, 40);
        assert_int_equal(c->comm.eligible_steps, 40);
        assert_true(c->comm.shift.delta_ns > 1 * MS && c->comm.shift.delta_ns < 3 * MS);
        sf_change_free(c);
        win_clear(&w);
        sf_reference_free(ref);
    }
}

/* The human view's line of the communication test: the late rank, its
 * shift and interval, and how often it led; a clean window says no
 * significant change; without marks in the baseline, no line. */
static char *comm_text(struct win *w, sf_change *c)
{
    sf_report r;
    memset(&r, 0, sizeof r);
    r.schema = w->schema; /* borrowed: r is not freed */
    r.change = c;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    sf_change_write_text(&r, f);
    fclose(f);
    return text;
}

static void change_text_names_late_issue(void **state)
{
    (void)state;
    sf_reference *ref = clean_reference(true);
    struct win w;
    win_init(&w, 40, 4, 7);
    late_issue(&w, 2, 2 * MS, 0, 40);
    sf_change *c = change_of(ref, &w, true);
    char *text = comm_text(&w, c);
    char want[160];
    snprintf(want, sizeof want,
             "communication vs baseline: rank 2 starts its collective in %s +%.1f ms later (",
             w.schema.names[BWD], c->comm.shift.delta_ns / 1e6);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "the largest issue lag in 40 of 40 steps)\n"));
    free(text);
    sf_change_free(c);
    win_clear(&w);
    win_init(&w, 40, 4, 1001);
    c = change_of(ref, &w, true);
    text = comm_text(&w, c);
    assert_non_null(strstr(text, "communication vs baseline: issue lag in "));
    assert_non_null(strstr(text, "40 steps): no significant change\n"));
    free(text);
    sf_change_free(c);
    win_clear(&w);
    sf_reference_free(ref);
}

/* Clean windows of other seeds never alarm, and a lag growth below the
 * comm_lag_min_s gate does not either, however certain. */
static void change_quiet_on_clean_windows(void **state)
{
    (void)state;
    sf_reference *ref = clean_reference(true);
    for (uint64_t seed = 0; seed < 20; seed++) {
        struct win w;
        win_init(&w, 40, 4, 1000 + seed);
        if (seed == 19)
            late_issue(&w, 1, 200 * US, 0, 40); /* significant, but under the gate */
        sf_change *c = change_of(ref, &w, true);
        assert_true(c->comm.tested);
        assert_false(c->comm.significant);
        sf_change_free(c);
        win_clear(&w);
    }
    sf_reference_free(ref);
}

/* Without issue marks in the baseline there is no test. */
static void change_untested_without_marks(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 40, 4, 3);
    win_close_waits(&w, false);
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&w.schema, &w.meta, w.m.rows, 160, true, &s), 0);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)&s, 1, &ref), 0);
    assert_null(ref->comm_lag_ns);
    sf_change *c = NULL;
    late_issue(&w, 2, 2 * MS, 0, 40);
    sf_summary *s2 = win_summary(&w, true);
    assert_int_equal(sf_change_compute(ref, s2, &w.gates, &c), 0);
    assert_false(c->comm.tested);
    assert_false(c->comm.significant);
    assert_int_equal(c->comm.rank, SF_NO_RANK);
    sf_change_free(c);
    sf_summary_free(s);
    sf_summary_free(s2);
    sf_reference_free(ref);
    win_clear(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hidden_rank_named_by_issue_lag),
        cmocka_unit_test(clean_window_names_none),
        cmocka_unit_test(gates),
        cmocka_unit_test(without_sync_stage),
        cmocka_unit_test(row_bounds),
        cmocka_unit_test(merged_equals_dense),
        cmocka_unit_test(change_names_late_issue),
        cmocka_unit_test(change_text_names_late_issue),
        cmocka_unit_test(change_quiet_on_clean_windows),
        cmocka_unit_test(change_untested_without_marks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

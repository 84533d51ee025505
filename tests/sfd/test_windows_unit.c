/*
 * Unit tests of sfd's window assembly (windows.c, jobs.c) without sockets:
 * completeness, deadlines, late and duplicate records, drop attribution,
 * pressure closes, segments and partial windows. Each test ends with the
 * loop closing cleanly.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loop_fixture.h"
#include "sfd.h"

struct fx {
    struct sfd d;
    uv_loop_t loop;
    struct sfd_job *job;
};

static int setup(void **state)
{
    static struct fx fx;
    loop_fixture_open(&fx.d, &fx.loop);
    fx.d.cfg.window_grace_ms = 100;
    fx.job = loop_fixture_job(&fx.d, "unit"); /* both ranks connected */
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    loop_fixture_close(&fx->d);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    return 0;
}

static int add(struct fx *fx, uint32_t rank, int64_t step, enum sfd_reject *why)
{
    int64_t d[6] = {1000 + rank * 500, 2000, 3000, 400, 500, 60};
    sf_row row = {.step = step, .d = d};
    enum sfd_reject dummy;
    return sfd_window_add(fx->job, rank, &row, why ? why : &dummy);
}

static void add_steps(struct fx *fx, uint32_t rank, int64_t first, int64_t last)
{
    for (int64_t s = first; s <= last; s++)
        assert_int_equal(add(fx, rank, s, NULL), 0);
}

static void add_steps_of(struct sfd_job *job, uint32_t rank, int64_t first, int64_t last);

static void complete_window_closes_at_once(void **state)
{
    struct fx *fx = *state;
    add_steps(fx, 0, 0, 3);
    assert_int_equal(fx->job->n_stored, 0);
    add_steps(fx, 1, 0, 3);
    assert_int_equal(fx->job->n_stored, 1);
    assert_int_equal(fx->job->n_open, 0);
    const struct sfd_stored *s = &fx->job->stored[0];
    assert_non_null(s->report);
    assert_int_equal(s->rows.n, 8);
    assert_int_equal(s->meta.index, 0);
    assert_int_equal(s->meta.first_step, 0);
    assert_int_equal(s->meta.last_step, 3);
    assert_int_equal(s->meta.flags, 0);
    assert_int_equal(s->report->incomplete_steps, 0);
    assert_int_equal(fx->job->pending_rows, 0);
}

static void deadline_closes_incomplete_window(void **state)
{
    struct fx *fx = *state;
    add_steps(fx, 0, 0, 4); /* step 4 lies beyond window 0 */
    add_steps(fx, 1, 0, 2);
    assert_int_equal(fx->job->n_open, 2);
    struct sfd_window *w0 = fx->job->open[0]->meta.index == 0 ? fx->job->open[0] : fx->job->open[1];
    assert_true(w0->deadline_ms > 0);
    sfd_windows_tick(&fx->d, w0->deadline_ms - 1);
    assert_int_equal(fx->job->n_stored, 0);
    sfd_windows_tick(&fx->d, w0->deadline_ms);
    assert_int_equal(fx->job->n_stored, 1);
    assert_int_equal(fx->job->stored[0].rows.n, 7);
    assert_int_equal(fx->job->stored[0].report->incomplete_steps, 1);

    enum sfd_reject why;
    assert_int_equal(add(fx, 1, 3, &why), -ENOSPC); /* its window closed */
    assert_int_equal(why, SFD_REJ_LATE);
    assert_int_equal(add(fx, 0, 4, &why), -EEXIST); /* not after the last step */
    assert_int_equal(why, SFD_REJ_DUPLICATE_RECORD);
}

static void drops_go_to_their_windows(void **state)
{
    struct fx *fx = *state;
    add_steps(fx, 0, 0, 1);
    sfd_window_note_drops(fx->job, 2, 9, 8); /* windows 0 (2..3), 1 (4..7), 2 (8..9) */
    sfd_window_note_violations(fx->job, 5, 3);
    uint64_t dropped[3] = {0}, viol[3] = {0};
    for (uint32_t i = 0; i < fx->job->n_open; i++) {
        const sf_window_meta *m = &fx->job->open[i]->meta;
        dropped[m->index] = m->dropped_records;
        viol[m->index] = m->contract_violations;
    }
    assert_int_equal(dropped[0], 2);
    assert_int_equal(dropped[1], 4);
    assert_int_equal(dropped[2], 2);
    assert_int_equal(viol[1], 3);
    sfd_window_note_reconnect(fx->job, 1);  /* window 0 already counts drops */
    sfd_window_note_reconnect(fx->job, 13); /* window 3: at least one */
    for (uint32_t i = 0; i < fx->job->n_open; i++) {
        const sf_window_meta *m = &fx->job->open[i]->meta;
        if (m->index == 0)
            assert_int_equal(m->dropped_records, 2);
        if (m->index == 3)
            assert_int_equal(m->dropped_records, 1);
    }
}

static void pressure_closes_the_oldest_window(void **state)
{
    struct fx *fx = *state;
    fx->d.cfg.max_pending_steps = 4;
    add_steps(fx, 0, 0, 3); /* window 0: 4 rows, rank 1 silent */
    assert_int_equal(fx->job->pending_rows, 4);
    add_steps(fx, 0, 4, 4); /* no room: window 0 closes early */
    assert_int_equal(fx->job->n_stored, 1);
    assert_int_equal(fx->job->stored[0].meta.index, 0);
    assert_int_equal(fx->job->pending_rows, 1);
    /* Within one window there is nothing older to close: refused, counted. */
    add_steps(fx, 0, 5, 7);
    enum sfd_reject why;
    assert_int_equal(add(fx, 1, 4, &why), -ENOSPC);
    assert_int_equal(why, SFD_REJ_PENDING);
    assert_int_equal(fx->job->n_stored, 1);
    assert_int_equal(fx->job->open[0]->meta.rejected_records, 1);
}

static void shape_change_starts_a_segment(void **state)
{
    struct fx *fx = *state;
    add_steps(fx, 0, 0, 1);
    fx->job->n_live = 1;
    sf_schema schema;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    assert_int_equal(sfd_job_bind_shape(fx->job, &schema, 3), -EXDEV); /* live: conflict */
    fx->job->n_live = 0;
    assert_int_equal(sfd_job_bind_shape(fx->job, &schema, 3), 0);
    sf_schema_clear(&schema);
    assert_int_equal(fx->job->segment, 1);
    assert_int_equal(fx->job->n_stored, 1);
    assert_true(fx->job->stored[0].meta.flags & SF_WIN_CLOSED_EARLY);
    assert_int_equal(fx->job->world_size, 3);
    /* The same index continues as the next segment. */
    fx->job->n_live = 3;
    add_steps(fx, 2, 0, 0);
    assert_int_equal(fx->job->open[0]->meta.index, 0);
    assert_int_equal(fx->job->open[0]->meta.segment, 1);
}

static void orphaned_job_closes_partial(void **state)
{
    struct fx *fx = *state;
    add_steps(fx, 0, 0, 1);
    add_steps(fx, 1, 0, 1);
    fx->job->n_live = 0;
    fx->job->orphan_deadline_ms = 1000;
    sfd_windows_tick(&fx->d, 999);
    assert_int_equal(fx->job->n_stored, 0);
    sfd_windows_tick(&fx->d, 1000);
    assert_int_equal(fx->job->n_stored, 1);
    assert_true(fx->job->stored[0].meta.flags & SF_WIN_PARTIAL);
    assert_int_equal(fx->job->n_open, 0);
}

static void kept_windows_are_bounded(void **state)
{
    struct fx *fx = *state;
    for (int64_t w = 0; w < 40; w++) {
        add_steps(fx, 0, w * 4, w * 4 + 3);
        add_steps(fx, 1, w * 4, w * 4 + 3);
    }
    assert_int_equal(fx->job->n_stored, fx->d.cfg.keep_windows);
    assert_int_equal(fx->job->stored[0].meta.index, 40 - (int)fx->d.cfg.keep_windows);
    const sf_report *latest = sfd_job_latest_report(fx->job);
    assert_non_null(latest);
    assert_int_equal(latest->meta.index, 39);
    sfd_job_trim_kept(fx->job, 3);
    assert_int_equal(fx->job->n_stored, 3);
}

/* ---- rows kept in (step, rank) order ---------------------------------- */

static void add_row(struct sfd_job *job, uint32_t rank, int64_t step);

static void add_steps_of(struct sfd_job *job, uint32_t rank, int64_t first, int64_t last)
{
    for (int64_t s = first; s <= last; s++)
        add_row(job, rank, s);
}

static int64_t duration(uint32_t rank, int64_t step, uint32_t k)
{
    uint64_t x = (uint64_t)rank * 0x9e3779b97f4a7c15u ^ (uint64_t)step * 0xbf58476d1ce4e5b9u ^ k;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebu;
    return 1000 + (int64_t)((x >> 20) % 50000);
}

static void add_row(struct sfd_job *job, uint32_t rank, int64_t step)
{
    int64_t d[6];
    for (uint32_t k = 0; k < 6; k++)
        d[k] = duration(rank, step, k);
    sf_row row = {.step = step, .d = d};
    enum sfd_reject why;
    assert_int_equal(sfd_window_add(job, rank, &row, &why), 0);
}

static struct sfd_job *job_of(struct fx *fx, const char *id, uint32_t world)
{
    enum sfd_reject why;
    sf_schema schema;
    struct sfd_job *job;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    assert_int_equal(sfd_job_find_or_create(&fx->d, id, 1000, 0, &job, &why), 0);
    assert_int_equal(sfd_job_bind_shape(job, &schema, world), 0);
    sf_schema_clear(&schema);
    job->n_live = world;
    return job;
}

/* The stored rows of the job's only window, in (step, rank) order, and its
 * report the same as the core's for those rows built in that order. */
static void assert_window_in_order(struct sfd_job *job, uint32_t world, bool want_sorted)
{
    assert_int_equal(job->n_stored, 1);
    const struct sfd_stored *s = &job->stored[0];
    assert_int_equal(s->rows.n, 4 * world);
    bool sorted = true;
    for (size_t i = 1; i < s->rows.n; i++) {
        const struct sfd_rec *a = &s->rows.rec[i - 1], *b = &s->rows.rec[i];
        sorted &= a->step < b->step || (a->step == b->step && a->rank < b->rank);
    }
    assert_int_equal(sorted, want_sorted);
    for (size_t i = 0; i < s->rows.n; i++) /* durations moved with their rows */
        for (uint32_t k = 0; k < 6; k++)
            assert_int_equal(s->rows.d[i * 6 + k],
                             duration(s->rows.rec[i].rank, s->rows.rec[i].step, k));
    int64_t *d = calloc((size_t)4 * world * 6, sizeof(*d));
    sf_row *rows = calloc((size_t)4 * world, sizeof(*rows));
    for (uint32_t t = 0; t < 4; t++)
        for (uint32_t r = 0; r < world; r++) {
            size_t i = (size_t)t * world + r;
            for (uint32_t k = 0; k < 6; k++)
                d[i * 6 + k] = duration(r, t, k);
            rows[i] = (sf_row){.step = t, .rank = r, .d = &d[i * 6], .role = ""};
        }
    sf_report *want = NULL;
    assert_int_equal(
        sf_report_from_rows(&job->schema, &s->meta, rows, (size_t)4 * world, &job->gates, &want),
        0);
    const sf_report *got = s->report;
    assert_non_null(got);
    assert_int_equal(got->exposed_total_ns, want->exposed_total_ns);
    for (uint32_t k = 0; k < 6; k++) {
        assert_int_equal(got->stages[k].advance_ns, want->stages[k].advance_ns);
        assert_int_equal(got->stages[k].gain_rank_median_ns, want->stages[k].gain_rank_median_ns);
        assert_int_equal(got->stages[k].gain_cohort_median_ns,
                         want->stages[k].gain_cohort_median_ns);
    }
    sf_report_free(want);
    free(rows);
    free(d);
}

/* Ranks deliver whole batches (all of a window's steps) in a shuffled rank
 * order, then steps interleave rank by rank backwards: every row is placed
 * in its step's list, and the window closes as one (step, rank) array. */
static void out_of_order_rows_close_sorted(void **state)
{
    struct fx *fx = *state;
    enum { W = 24 };
    struct sfd_job *job = job_of(fx, "order", W);
    uint32_t perm[W];
    for (uint32_t r = 0; r < W; r++)
        perm[r] = (r * 7 + 3) % W; /* 7 is prime to 24: a permutation */
    for (uint32_t i = 0; i < W / 2; i++)
        add_steps_of(job, perm[i], 0, 3);
    for (int64_t step = 0; step < 4; step++) /* the rest step by step, ranks descending */
        for (uint32_t i = W; i-- > W / 2;)
            add_row(job, perm[i], step);
    assert_window_in_order(job, W, true);
}

/* A step of more local ranks than a walk may cover, the even ranks first,
 * then the odd ones, each between two placed rows: past the walk's bound the
 * window gives its order up, keeps the rows as they came, and the core's own
 * sort still gives the same report. */
static void long_walks_give_the_order_up(void **state)
{
    struct fx *fx = *state;
    enum { W = 200 };
    struct sfd_job *job = job_of(fx, "walks", W);
    for (int64_t step = 0; step < 4; step++) {
        for (uint32_t r = 0; r < W; r += 2)
            add_row(job, r, step);
        for (uint32_t r = 1; r < W; r += 2) {
            add_row(job, r, step);
            if (step == 0) { /* rank r walks past the r rows of ranks 0 .. r - 1 */
                assert_int_equal(job->open[0]->order.given_up, r > 64);
                assert_int_equal(job->open[0]->order.next == NULL, r > 64);
            }
        }
    }
    assert_window_in_order(job, W, false);
}

/* A window's rows start at the size of the last window closed: the first
 * window grows by doubling from 64 rows, every later one of the same shape
 * is allocated once, and keeps no slack once it closes. */
static void a_window_starts_at_the_last_ones_size(void **state)
{
    struct fx *fx = *state;
    enum { W = 24, ROWS = 4 * W };
    struct sfd_job *job = job_of(fx, "sizes", W);
    for (uint32_t r = 0; r < W; r++)
        add_steps_of(job, r, 0, 3);
    assert_int_equal(job->n_stored, 1);
    assert_int_equal(job->stored[0].rows.cap, 128);
    add_row(job, 0, 4);
    assert_int_equal(job->n_open, 1);
    assert_int_equal(job->open[0]->rows.cap, ROWS);
    for (uint32_t r = 0; r < W; r++)
        add_steps_of(job, r, r == 0 ? 5 : 4, 7);
    assert_int_equal(job->n_stored, 2);
    const struct sfd_rows *kept = &job->stored[1].rows;
    assert_int_equal(kept->n, ROWS);
    assert_int_equal(kept->cap, ROWS);
    assert_int_equal(kept->bytes, ROWS * (sizeof(struct sfd_rec) + 6 * sizeof(int64_t)));
}

/* That first size is a guess: where the uid's share has no room for it,
 * the window starts at 64 rows and the uid's kept rows stay. */
static void a_guessed_size_frees_no_kept_rows(void **state)
{
    struct fx *fx = *state;
    enum { W = 24, ROW_BYTES = sizeof(struct sfd_rec) + 6 * sizeof(int64_t) };
    struct sfd_job *job = job_of(fx, "guess", W);
    for (uint32_t r = 0; r < W; r++)
        add_steps_of(job, r, 0, 3);
    assert_int_equal(job->n_stored, 1);
    assert_int_equal(job->rows_hint, 4 * W);
    /* Fill the uid's share to leave room for 64 rows, not for 4 W. */
    fx->d.cfg.max_memory_per_uid_mb = 1;
    uint64_t room = 80 * ROW_BYTES, used = sfd_budget_uid_bytes(&fx->d.mem, job->uid);
    assert_true(used + room < (1u << 20));
    uint64_t filler = (1u << 20) - room - used;
    sfd_budget_force(&fx->d.mem, job->uid, SFD_MEM_REPORTS, filler);
    add_row(job, 0, 4);
    assert_int_equal(job->open[0]->rows.cap, 64);
    assert_int_equal(job->evicted_windows, 0);
    assert_non_null(job->stored[0].rows.rec);
    sfd_budget_uncharge(&fx->d.mem, job->uid, SFD_MEM_REPORTS, filler);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(complete_window_closes_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(deadline_closes_incomplete_window, setup, teardown),
        cmocka_unit_test_setup_teardown(drops_go_to_their_windows, setup, teardown),
        cmocka_unit_test_setup_teardown(pressure_closes_the_oldest_window, setup, teardown),
        cmocka_unit_test_setup_teardown(shape_change_starts_a_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(orphaned_job_closes_partial, setup, teardown),
        cmocka_unit_test_setup_teardown(kept_windows_are_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(out_of_order_rows_close_sorted, setup, teardown),
        cmocka_unit_test_setup_teardown(long_walks_give_the_order_up, setup, teardown),
        cmocka_unit_test_setup_teardown(a_window_starts_at_the_last_ones_size, setup, teardown),
        cmocka_unit_test_setup_teardown(a_guessed_size_frees_no_kept_rows, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Pooled windows (docs/CHANGE.md, "Pooled windows"): the pool a job keeps
 * of its latest windows, which of them a window's change pools, and the
 * change measured over them: equal to the change of one window holding all
 * their rows, able to see a shift that a single window rarely does, and
 * keeping the level on clean windows.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stagefrontier/change.h>

#include "matrix.h"

#define RANKS 4
#define STAGES 6
#define WSTEPS 100

/* A job's steps: stage k near 10 ms * (k + 1), jitter up to 30 ms: a
 * noisy job, where a small shift needs many steps to be seen. */
#define JITTER_NS 30000000
static struct matrix job_matrix(uint64_t seed, uint32_t steps)
{
    struct matrix m = matrix_new(steps, RANKS, STAGES);
    uint64_t st = seed;
    for (uint32_t t = 0; t < steps; t++)
        for (uint32_t r = 0; r < RANKS; r++)
            for (uint32_t k = 0; k < STAGES; k++)
                cell(&m, t, r)[k] = 10000000 * (int64_t)(k + 1) + rand_below(&st, JITTER_NS);
    return m;
}

/* Window `index` of segment 0, dense: the rows of steps [index * WSTEPS,
 * + WSTEPS), less those of rank `skip` (RANKS: none). */
static sf_summary *window_of(const sf_schema *schema, struct matrix *m, int64_t index,
                             uint32_t skip)
{
    sf_window_meta meta = {.index = index,
                           .first_step = index * WSTEPS,
                           .last_step = index * WSTEPS + WSTEPS - 1,
                           .world_size = RANKS};
    sf_row rows[WSTEPS * RANKS];
    size_t n = 0;
    for (uint32_t t = 0; t < WSTEPS; t++)
        for (uint32_t r = 0; r < RANKS; r++)
            if (r != skip)
                rows[n++] = m->rows[((size_t)index * WSTEPS + t) * RANKS + r];
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(schema, &meta, rows, n, true, &s), 0);
    return s;
}

/* Windows 0 to n - 1 of m, dense, window `thin` without rank 2 (-1: none). */
static void windows_of(const sf_schema *schema, struct matrix *m, int n, int thin, sf_summary **w)
{
    for (int j = 0; j < n; j++)
        w[j] = window_of(schema, m, j, j == thin ? 2 : RANKS);
}

static void windows_free(sf_summary **w, int n)
{
    for (int j = 0; j < n; j++)
        sf_summary_free(w[j]);
}

static sf_reference *reference_of(const sf_schema *schema, struct matrix *m)
{
    sf_summary *w[3];
    windows_of(schema, m, 3, -1, w);
    sf_reference *ref = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)w, 3, &ref), 0);
    windows_free(w, 3);
    return ref;
}

/* ---- the pool ------------------------------------------------------------ */

/* Offers the pool a copy of s (the test keeps its own). */
static void keep_copy(sf_change_pool *p, const sf_summary *s, uint32_t want)
{
    sf_summary *copy = NULL;
    assert_int_equal(sf_summary_clone(s, &copy), 0);
    assert_int_equal(sf_change_pool_keep(p, &copy, want), 0);
    sf_summary_free(copy); /* NULL when taken */
}

static void assert_kept(const sf_change_pool *p, uint32_t n, const int64_t *indices)
{
    assert_int_equal(p->n, n);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(p->recent[i]->meta.index, indices[i]);
}

static void pool_keeps_the_latest_windows(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, STAGES);
    struct matrix m = job_matrix(8, 8 * WSTEPS);
    sf_summary *w[8];
    windows_of(&schema, &m, 8, -1, w);
    sf_change_pool p = {0};
    sf_summary *own = NULL; /* a window the pool takes: the caller's pointer is cleared */
    assert_int_equal(sf_summary_clone(w[3], &own), 0);
    assert_int_equal(sf_change_pool_keep(&p, &own, 3), 0);
    assert_null(own);
    for (int j = 4; j <= 5; j++)
        keep_copy(&p, w[j], 3);
    assert_kept(&p, 2, (int64_t[]){4, 5});
    assert_int_equal(sf_summary_clone(w[5], &own), 0); /* kept already: stays the caller's */
    assert_int_equal(sf_change_pool_keep(&p, &own, 3), 0);
    assert_non_null(own);
    sf_summary_free(own);
    keep_copy(&p, w[2], 3); /* older than a full pool */
    assert_kept(&p, 2, (int64_t[]){4, 5});
    keep_copy(&p, w[7], 3);
    keep_copy(&p, w[6], 3); /* late, but among the latest */
    assert_kept(&p, 2, (int64_t[]){6, 7});
    keep_copy(&p, w[3], 5);
    assert_kept(&p, 3, (int64_t[]){3, 6, 7});
    keep_copy(&p, w[5], 2); /* the gate shrank */
    assert_kept(&p, 1, (int64_t[]){7});
    keep_copy(&p, w[7], 1);
    assert_int_equal(p.n, 0);
    own = w[7];
    assert_int_equal(sf_change_pool_keep(&p, &own, 0), -EINVAL);
    assert_int_equal(sf_change_pool_keep(&p, &own, SF_POOL_MAX_WINDOWS + 1), -EINVAL);
    own = NULL;
    assert_int_equal(sf_change_pool_keep(&p, &own, 3), -EINVAL);
    sf_change_pool_clear(&p);
    windows_free(w, 8);
    matrix_free(&m);
    sf_schema_clear(&schema);
}

/* The window indices a view pools with w, oldest first, and their count. */
static int view_of(const sf_change_pool *p, const sf_summary *w, const sf_reference *ref,
                   uint32_t want, int64_t *windows)
{
    const sf_summary *parts[SF_POOL_MAX_WINDOWS];
    int n = sf_change_pool_view(p, w, ref, want, parts);
    for (int i = 0; i < n; i++)
        windows[i] = parts[i]->meta.index;
    if (n > 0)
        assert_ptr_equal(parts[n - 1], w);
    return n;
}

static void pool_view_takes_recent_windows_after_the_baseline(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, STAGES);
    struct matrix m = job_matrix(9, 9 * WSTEPS);
    sf_summary *w[9];
    windows_of(&schema, &m, 9, -1, w);
    sf_reference *ref = reference_of(&schema, &m);
    sf_change_pool p = {0};
    int64_t win[SF_POOL_MAX_WINDOWS];
    for (int j = 0; j < 3; j++) /* the baseline's own windows are never pooled */
        keep_copy(&p, w[j], 3);
    assert_int_equal(view_of(&p, w[3], ref, 3, win), 1);
    assert_int_equal(win[0], 3);
    keep_copy(&p, w[3], 3);
    assert_int_equal(view_of(&p, w[4], ref, 3, win), 2);
    keep_copy(&p, w[4], 3);
    assert_int_equal(view_of(&p, w[5], ref, 3, win), 3);
    assert_true(win[0] == 3 && win[1] == 4 && win[2] == 5);
    assert_int_equal(view_of(&p, w[5], ref, 1, win), 1); /* the gate at 1: alone */
    /* window 5 never closed: 7 pools 6 only */
    keep_copy(&p, w[6], 3);
    assert_int_equal(view_of(&p, w[7], ref, 3, win), 2);
    assert_true(win[0] == 6 && win[1] == 7);
    w[8]->meta.segment = 1; /* a new segment pools nothing from the old one */
    assert_int_equal(view_of(&p, w[8], ref, 3, win), 1);
    const sf_summary *parts[SF_POOL_MAX_WINDOWS];
    assert_int_equal(sf_change_pool_view(&p, w[8], NULL, 3, parts), -EINVAL);
    assert_int_equal(sf_change_pool_view(&p, w[8], ref, 0, parts), -EINVAL);
    sf_change_pool_clear(&p);
    sf_reference_free(ref);
    windows_free(w, 9);
    matrix_free(&m);
    sf_schema_clear(&schema);
}

/* ---- the change over pooled windows ---------------------------------------- */

/* A window's report under the default gates but these two. */
static sf_report *report_of(const sf_summary *s, uint32_t pool_windows, double min_frac)
{
    sf_gates g;
    sf_gates_default(&g);
    g.change_pool_windows = pool_windows;
    g.change_min_frac = min_frac;
    sf_report *r = NULL;
    assert_int_equal(sf_report_compute(s, &g, &r), 0);
    return r;
}

/* A window's change pooled with the two before it equals the change of one
 * window holding the rows of all three, but for the suspects' own term
 * (the median of window medians); the what-if stays the window's own.
 * Rank 1 is slowed at `stage` after the reference. */
/* Measures window s (its change pooled with the windows of p, as at its
 * close), then offers p a copy of it. */
static void measure_and_keep(sf_change_pool *p, const sf_summary *s, const sf_reference *ref)
{
    sf_report *r = report_of(s, 3, 0.02);
    assert_int_equal(sf_report_attach_change(r, s, p, ref), 0);
    sf_report_free(r);
    keep_copy(p, s, 3);
}

static void assert_pooled_equals_all_rows(const sf_schema *schema, uint32_t stage,
                                          bool measured_first)
{
    struct matrix m = job_matrix(10, 6 * WSTEPS);
    for (uint32_t t = 3 * WSTEPS; t < 6 * WSTEPS; t++)
        cell(&m, t, 1)[stage] += 20000000;
    sf_summary *w[6];
    windows_of(schema, &m, 6, -1, w);
    sf_reference *ref = reference_of(schema, &m);
    sf_change_pool p = {0};
    for (int j = 3; j < 5; j++) {
        if (measured_first) /* as sfd does: the pool keeps their contrasts */
            measure_and_keep(&p, w[j], ref);
        else
            keep_copy(&p, w[j], 3);
    }
    /* contrasts are kept only where the own-work test ran */
    assert_true((p.derived[0] != NULL) == (measured_first && schema->sync_mask != 0));
    sf_report *r = report_of(w[5], 3, 0.02), *alone = report_of(w[5], 1, 0.02);
    assert_int_equal(sf_report_attach_change(r, w[5], &p, ref), 0);
    assert_int_equal(sf_report_attach_change(alone, w[5], &p, ref), 0);
    sf_window_meta meta = {
        .index = 5, .first_step = 3 * WSTEPS, .last_step = 6 * WSTEPS - 1, .world_size = RANKS};
    sf_summary *all = NULL;
    sf_change *direct = NULL;
    assert_int_equal(sf_summary_build(schema, &meta, &m.rows[(size_t)3 * WSTEPS * RANKS],
                                      (size_t)3 * WSTEPS * RANKS, true, &all),
                     0);
    assert_int_equal(sf_change_compute(ref, all, &r->gates, &direct), 0);
    const sf_change *c = r->change;
    assert_int_equal(c->n_measured, 3);
    assert_true(c->measured_windows[0] == 3 && c->measured_windows[2] == 5);
    assert_int_equal(c->steps, 3 * WSTEPS);
    assert_int_equal(direct->steps, 3 * WSTEPS);
    assert_int_equal(alone->change->n_measured, 1);
    assert_int_equal(alone->change->steps, WSTEPS);
    for (uint32_t k = 0; k < STAGES; k++) {
        const sf_stage_change *a = &c->stages[k], *b = &direct->stages[k];
        assert_memory_equal(&a->shift, &b->shift, sizeof(sf_shift));
        assert_true(a->share_p_value == b->share_p_value && a->significant == b->significant);
        assert_int_equal(a->share_delay_ns, b->share_delay_ns);
        assert_true(a->floor_tested == b->floor_tested);
        assert_memory_equal(&a->floor, &b->floor, sizeof(sf_shift));
        assert_int_equal(a->floor_share_delay_ns, b->floor_share_delay_ns);
        assert_int_equal(a->own_delta_ns, b->own_delta_ns);
        assert_true(a->own_p_value == b->own_p_value ||
                    (isnan(a->own_p_value) && isnan(b->own_p_value)));
        assert_true(a->own_significant == b->own_significant);
    }
    assert_memory_equal(&c->step, &direct->step, sizeof(sf_shift));
    assert_int_equal(c->n_route, direct->n_route);
    assert_true(c->n_route > 0 && c->route[0] == stage);
    assert_true(c->stages[stage].own_significant == (schema->sync_mask != 0));
    assert_memory_equal(c->route, direct->route, c->n_route * sizeof c->route[0]);
    assert_true(c->slowdown == direct->slowdown);
    assert_true(c->n_suspects > 0 && c->suspects[0].rank == 1);
    /* the what-if stays the window's own */
    assert_non_null(r->whatif);
    assert_true(r->whatif->exposed_ns == alone->whatif->exposed_ns);
    assert_true(r->whatif->ideal_ns == alone->whatif->ideal_ns);
    sf_change_free(direct);
    sf_summary_free(all);
    sf_report_free(r);
    sf_report_free(alone);
    sf_change_pool_clear(&p);
    sf_reference_free(ref);
    windows_free(w, 6);
    matrix_free(&m);
}

static void pooled_change_is_the_change_of_all_its_rows(void **state)
{
    (void)state;
    sf_schema plain, sync;
    numbered_schema(&plain, STAGES);
    synchronizing_schema(&sync, STAGES);
    for (int measured_first = 0; measured_first < 2; measured_first++) {
        assert_pooled_equals_all_rows(&plain, 2, measured_first);
        assert_pooled_equals_all_rows(&sync, 0, measured_first); /* own work before the sync */
    }
    sf_schema_clear(&plain);
    sf_schema_clear(&sync);
}

/* A window without one rank's rows breaks the pool there: the windows
 * before it are not pooled across it, and a pooled change refuses it. */
static void pool_stops_at_a_window_of_other_ranks(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, STAGES);
    struct matrix m = job_matrix(12, 7 * WSTEPS);
    sf_summary *w[7];
    windows_of(&schema, &m, 7, 4, w);
    sf_reference *ref = reference_of(&schema, &m);
    sf_change_pool p = {0};
    for (int j = 3; j < 5; j++)
        keep_copy(&p, w[j], 4);
    int64_t win[SF_POOL_MAX_WINDOWS];
    assert_int_equal(view_of(&p, w[5], ref, 4, win), 1);
    keep_copy(&p, w[5], 4);
    assert_int_equal(view_of(&p, w[6], ref, 4, win), 2); /* 5 only: 4 lacks rank 2 */
    assert_true(win[0] == 5 && win[1] == 6);
    const sf_summary *across[2] = {w[4], w[5]}, *backwards[2] = {w[5], w[3]};
    sf_change *c = NULL;
    sf_gates g;
    sf_gates_default(&g);
    assert_int_equal(sf_change_compute_pooled(ref, across, 2, &g, &c), -EINVAL);
    assert_int_equal(sf_change_compute_pooled(ref, backwards, 2, &g, &c), -EINVAL);
    assert_int_equal(sf_change_compute_pooled(ref, across, 0, &g, &c), -EINVAL);
    assert_null(c);
    sf_change_pool_clear(&p);
    sf_reference_free(ref);
    windows_free(w, 7);
    matrix_free(&m);
    sf_schema_clear(&schema);
}

#define TRIALS 40
#define POWER_FRAC 0.03 /* of the step: one window sees it about half the time */

/* Windows 3..5 drawn from the clean steps with replacement, rank 3's stage 1
 * slowed by frac of the step: how often window 5's change routes stage 1
 * first, measured alone and pooled with 3 and 4. */
static void routed_rates(const sf_schema *schema, double frac, uint32_t *ret_alone,
                         uint32_t *ret_pooled)
{
    struct matrix base = job_matrix(11, 3 * WSTEPS), win = job_matrix(0, 6 * WSTEPS);
    sf_reference *ref = reference_of(schema, &base);
    int64_t step = 0;
    for (uint32_t k = 0; k < STAGES; k++)
        step += 10000000 * (int64_t)(k + 1) + JITTER_NS / 2;
    uint64_t st = 23;
    *ret_alone = *ret_pooled = 0;
    for (uint32_t trial = 0; trial < TRIALS; trial++) {
        sf_change_pool p = {0};
        sf_summary *s = NULL;
        for (int64_t j = 3; j < 6; j++) {
            for (uint32_t t = (uint32_t)j * WSTEPS; t < (uint32_t)(j + 1) * WSTEPS; t++) {
                memcpy(cell(&win, t, 0), cell(&base, (uint32_t)rand_below(&st, base.steps), 0),
                       sizeof(int64_t) * RANKS * STAGES);
                cell(&win, t, 3)[1] += (int64_t)(frac * (double)step);
            }
            sf_summary_free(s);
            s = window_of(schema, &win, j, RANKS);
            if (j < 5)
                keep_copy(&p, s, 3);
        }
        /* the rank test's power alone: no minimum effect */
        sf_report *alone = report_of(s, 1, 0), *pooled = report_of(s, 3, 0);
        assert_int_equal(sf_report_attach_change(alone, s, &p, ref), 0);
        assert_int_equal(sf_report_attach_change(pooled, s, &p, ref), 0);
        *ret_alone += alone->change->n_route > 0 && alone->change->route[0] == 1;
        *ret_pooled += pooled->change->n_route > 0 && pooled->change->route[0] == 1;
        sf_report_free(alone);
        sf_report_free(pooled);
        sf_summary_free(s);
        sf_change_pool_clear(&p);
    }
    sf_reference_free(ref);
    matrix_free(&base);
    matrix_free(&win);
}

/* A one-rank slowdown that one window of 100 steps rarely sees: three
 * windows pooled see it; with no slowdown, neither flags more than alpha. */
static void pooling_sees_a_smaller_shift_and_keeps_the_level(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, STAGES);
    uint32_t alone, pooled;
    routed_rates(&schema, POWER_FRAC, &alone, &pooled);
    print_message("shift %.3f: alone %u, pooled %u of %u\n", POWER_FRAC, alone, pooled, TRIALS);
    assert_true(alone <= TRIALS * 6 / 10);
    assert_true(pooled >= TRIALS * 9 / 10);
    routed_rates(&schema, 0, &alone, &pooled);
    print_message("clean: alone %u, pooled %u of %u\n", alone, pooled, TRIALS);
    assert_true(alone <= 1 && pooled <= 1);
    sf_schema_clear(&schema);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_keeps_the_latest_windows),
        cmocka_unit_test(pool_view_takes_recent_windows_after_the_baseline),
        cmocka_unit_test(pool_stops_at_a_window_of_other_ranks),
        cmocka_unit_test(pooled_change_is_the_change_of_all_its_rows),
        cmocka_unit_test(pooling_sees_a_smaller_shift_and_keeps_the_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

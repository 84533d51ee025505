/*
 * The summary build's layout fast paths (a grid of ranks, a step-major array
 * read in place, a dense summary that views the caller's rows) against its
 * general path: same summaries and the same reports, byte for byte in JSON,
 * in both modes, whatever order and memory the rows come in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core_internal.h"
#include "matrix.h"
#include "report_json.h"

static char *report_json(const sf_report *r)
{
    json_t *obj = NULL;
    assert_int_equal(sf_report_to_json(r, &obj), 0);
    char *text = json_dumps(obj, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(obj);
    return text;
}

static char *summary_report(const sf_summary *s)
{
    sf_gates g;
    sf_gates_default(&g);
    sf_report *r = NULL;
    assert_int_equal(sf_report_compute(s, &g, &r), 0);
    char *text = report_json(r);
    sf_report_free(r);
    return text;
}

/* The fields a report does not show: rank medians feed the gains only
 * through the clipped end frontiers, so those are compared directly. */
static void assert_same_summary(const sf_summary *a, const sf_summary *b)
{
    uint32_t S = a->schema.n_stages;
    assert_int_equal(a->n_steps, b->n_steps);
    for (uint32_t t = 0; t < a->n_steps; t++) {
        const sf_step_summary *x = &a->steps[t], *y = &b->steps[t];
        assert_int_equal(x->step, y->step);
        assert_int_equal(x->n_ranks, y->n_ranks);
        assert_int_equal(x->slowest_rank, y->slowest_rank);
        assert_int_equal(x->slowest_total, y->slowest_total);
        assert_int_equal(x->has_rank0, y->has_rank0);
        assert_int_equal(x->residual_sum, y->residual_sum);
        assert_int_equal(x->overlap_sum, y->overlap_sum);
        assert_int_equal(x->end_sum, y->end_sum);
        assert_int_equal(x->arrival_missing, y->arrival_missing);
        assert_memory_equal(x->prefix_top2, y->prefix_top2, S * sizeof *x->prefix_top2);
        assert_memory_equal(x->dmax, y->dmax, (5 * S + a->cand.n) * sizeof(int64_t));
    }
    assert_int_equal(a->violation_rows, b->violation_rows);
    assert_int_equal(a->non_monotonic_rows, b->non_monotonic_rows);
    assert_int_equal(a->event_samples, b->event_samples);
    assert_int_equal(a->event_ready, b->event_ready);
    assert_int_equal(a->event_cpu_ns, b->event_cpu_ns);
    assert_int_equal(a->event_gpu_ns, b->event_gpu_ns);
    assert_int_equal(a->dense != NULL, b->dense != NULL);
    if (a->dense) {
        size_t cells = (size_t)a->n_steps * a->dense->n_ranks;
        assert_int_equal(a->dense->n_ranks, b->dense->n_ranks);
        assert_memory_equal(a->dense->ranks, b->dense->ranks, a->dense->n_ranks * sizeof(uint32_t));
        assert_memory_equal(a->dense->d, b->dense->d, cells * S * sizeof(int64_t));
        assert_memory_equal(a->dense->present, b->dense->present, cells);
        for (uint32_t i = 0; i < a->dense->n_ranks; i++)
            assert_string_equal(a->dense->roles[i], b->dense->roles[i]);
    }
}

static sf_summary *build(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                         size_t n, bool dense, unsigned flags)
{
    sf_summary *s = NULL;
    assert_int_equal(sf__summary_build(schema, meta, rows, n, dense, flags, &s), 0);
    return s;
}

static void run_case(uint64_t seed, bool dense)
{
    uint64_t st = seed;
    uint32_t stages = 2 + (uint32_t)rand_below(&st, 9), ranks = 1 + (uint32_t)rand_below(&st, 40);
    uint32_t steps = 1 + (uint32_t)rand_below(&st, 25);
    struct matrix m = matrix_random(seed, steps, ranks, stages, seed % 2 ? 9 : 50000000);
    size_t n = (size_t)steps * ranks;
    for (size_t i = 0; i < n; i++) {
        m.rows[i].step += 7;
        m.rows[i].rank = m.rows[i].rank * 3 + (uint32_t)(seed % 3); /* sparse rank numbers */
    }
    matrix_random_extras(&m, &st);
    sf_schema schema;
    if (seed % 3 == 0 && stages >= 3)
        synchronizing_schema(&schema, stages);
    else
        numbered_schema(&schema, stages);
    sf_window_meta meta = meta_for(ranks * 3);

    /* The same rows: shuffled (a grid, sorted by the build), and in order
     * but with every row's durations copied elsewhere (a grid, not one
     * array). */
    sf_row *shuffled = malloc(n * sizeof *shuffled), *scattered = malloc(n * sizeof *scattered);
    int64_t *copies = malloc(n * stages * sizeof *copies);
    memcpy(shuffled, m.rows, n * sizeof *shuffled);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rand_below(&st, (int64_t)i);
        sf_row t = shuffled[i - 1];
        shuffled[i - 1] = shuffled[j];
        shuffled[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        scattered[i] = m.rows[i];
        memcpy(&copies[(n - 1 - i) * stages], m.rows[i].d, stages * sizeof *copies);
        scattered[i].d = &copies[(n - 1 - i) * stages];
    }

    sf_summary *general = build(&schema, &meta, m.rows, n, dense, SF__BUILD_GENERAL);
    sf_summary *in_place = build(&schema, &meta, m.rows, n, dense, 0);
    sf_summary *borrowed = build(&schema, &meta, m.rows, n, dense, SF__BUILD_BORROW);
    sf_summary *from_shuffled = build(&schema, &meta, shuffled, n, dense, SF__BUILD_BORROW);
    sf_summary *from_scattered = build(&schema, &meta, scattered, n, dense, SF__BUILD_BORROW);
    if (dense) {
        assert_true(borrowed->dense->d_borrowed);
        assert_ptr_equal(borrowed->dense->d, m.d); /* no copy */
        assert_false(in_place->dense->d_borrowed);
        assert_false(from_shuffled->dense->d_borrowed);
        assert_false(from_scattered->dense->d_borrowed);
    }
    sf_summary *all[] = {in_place, borrowed, from_shuffled, from_scattered};
    char *want = summary_report(general);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        assert_same_summary(general, all[i]);
        char *got = summary_report(all[i]);
        if (strcmp(want, got) != 0)
            fail_msg("seed %llu dense %d layout %zu:\nfast    %s\ngeneral %s",
                     (unsigned long long)seed, dense, i, got, want);
        free(got);
    }
    /* sf_report_from_rows views the rows in dense mode and agrees too. */
    sf_gates g;
    sf_gates_default(&g);
    g.dense_max_ranks = dense ? SF_MAX_RANKS : 0;
    sf_report *r = NULL;
    assert_int_equal(sf_report_from_rows(&schema, &meta, m.rows, n, &g, &r), 0);
    assert_int_equal(r->dense, dense);
    sf_report_free(r);

    free(want);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sf_summary_free(all[i]);
    sf_summary_free(general);
    sf_schema_clear(&schema);
    free(shuffled);
    free(scattered);
    free(copies);
    matrix_free(&m);
}

static void grid_paths_match_the_general_path_mergeable(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 120; seed++)
        run_case(seed, false);
}

static void grid_paths_match_the_general_path_dense(void **state)
{
    (void)state;
    for (uint64_t seed = 500; seed <= 620; seed++)
        run_case(seed, true);
}

/* Rows that are not a grid (a step missing a rank, a step with a rank the
 * first step lacks, steps of unequal length) take the general path and
 * still agree with it. */
static void near_grids_take_the_general_path(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        struct matrix m = matrix_random(77 + variant, 6, 5, 4, 1000);
        sf_schema schema;
        numbered_schema(&schema, 4);
        sf_window_meta meta = meta_for(8);
        size_t n = 30;
        if (variant == 0) /* step 3 lacks rank 2 */
            memmove(&m.rows[17], &m.rows[18], (--n - 17) * sizeof *m.rows);
        else if (variant == 1) /* step 4's last rank is 7, which step 0 lacks */
            m.rows[4 * 5 + 4].rank = 7;
        else /* the last step stops after rank 1 */
            n = 27;
        sf_summary *general = build(&schema, &meta, m.rows, n, true, SF__BUILD_GENERAL);
        sf_summary *fast = build(&schema, &meta, m.rows, n, true, SF__BUILD_BORROW);
        assert_false(fast->dense->d_borrowed);
        assert_same_summary(general, fast);
        char *a = summary_report(general), *b = summary_report(fast);
        assert_string_equal(a, b);
        free(a);
        free(b);
        sf_summary_free(general);
        sf_summary_free(fast);
        sf_schema_clear(&schema);
        matrix_free(&m);
    }
}

/* One fault a row can carry, valid or not; the whole-step check must reach
 * the verdict the row-by-row check reaches. */
enum { FAULT_KINDS = 18 };

static void plant_fault(sf_row *rows, size_t i, uint32_t S, int kind, int64_t *elsewhere)
{
    sf_row *row = &rows[i];
    int64_t *d = (int64_t *)row->d;
    if (d == NULL && (kind <= 2 || kind == 10 || kind >= 16))
        return; /* an earlier fault took the durations */
    switch (kind) {
    case 0:
        d[S - 1] = SF_MAX_DURATION_NS;
        break;
    case 1:
        d[0] = -1;
        break;
    case 2: /* each stage below its cap, the row past the step's bound */
        d[0] = SF_MAX_STEP_NS;
        d[S - 1] += 1;
        break;
    case 3:
        row->overlap_ns = -1;
        break;
    case 4:
        row->overlap_ns = SF_MAX_STEP_NS + 1;
        break;
    case 5:
        row->event_state = 3;
        break;
    case 6:
        row->event_state = SF_EVENT_READY, row->event_cpu_ns = SF_MAX_DURATION_NS + 1;
        break;
    case 7:
        row->event_state = SF_EVENT_MISSING, row->event_gpu_ns = -1;
        break;
    case 8:
        row->rank = rows[i ? i - 1 : 1].rank;
        break; /* a duplicate, or out of order */
    case 9:
        row->d = NULL;
        break;
    case 10: /* the durations elsewhere, the array's cells changed: valid, not one array */
        memcpy(elsewhere, d, S * sizeof *d);
        row->d = elsewhere;
        for (uint32_t k = 0; k < S; k++)
            d[k] = d[k] / 2 + 1;
        break;
    case 11:
        row->step += 1;
        break; /* into the next step, or past the last */
    case 12:
        row->rank += 1;
        break; /* a rank the first step lacks (ranks step by 3) */
    case 13:
        row->flags = SF_ROW_FLAGS_ALL;
        break; /* valid */
    case 14:
        row->overlap_ns = SF_MAX_STEP_NS;
        break; /* valid: at the bound */
    case 15:   /* valid: a ready sample at the cap */
        row->event_state = SF_EVENT_READY;
        row->event_cpu_ns = row->event_gpu_ns = SF_MAX_DURATION_NS;
        break;
    case 16: /* values that wrap any sum or difference they enter */
        d[S / 2] = INT64_MAX;
        d[0] = INT64_MAX - 1;
        break;
    default:
        d[S - 1] = INT64_MIN;
        break;
    }
}

/* Stages s0, s1, ... in pairs of a group (g0 for s0 and s1, ...): group
 * candidates past the stages, whose cuts the folds sum. */
static void paired_schema(sf_schema *schema, uint32_t stages)
{
    static char buf[SF_MAX_STAGES][2][16];
    const char *names[SF_MAX_STAGES], *groups[SF_MAX_STAGES];
    for (uint32_t i = 0; i < stages; i++) {
        snprintf(buf[i][0], sizeof buf[i][0], "s%u", i);
        snprintf(buf[i][1], sizeof buf[i][1], "g%u", i / 2);
        names[i] = buf[i][0];
        groups[i] = buf[i][1];
    }
    assert_int_equal(sf_schema_init(schema, 1, stages, names, groups, 1), 0);
}

/* The verdict of the fast paths on rows, with either vector fold: the same
 * error as `want`, or a summary the same as by_row's. */
static void assert_fast_paths_agree(const sf_schema *schema, const sf_window_meta *meta,
                                    const sf_row *rows, size_t n, bool dense, int want,
                                    const sf_summary *by_row, uint64_t seed)
{
    const unsigned forms[] = {0};
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        sf_summary *by_step = NULL;
        int got = sf__summary_build(schema, meta, rows, n, dense, forms[f], &by_step);
        if (got != want)
            fail_msg("seed %llu, flags %u: %d row by row, %d by steps", (unsigned long long)seed,
                     forms[f], want, got);
        if (want == 0) {
            assert_same_summary(by_row, by_step);
            char *a = summary_report(by_row), *b = summary_report(by_step);
            assert_string_equal(a, b);
            free(a);
            free(b);
        }
        sf_summary_free(by_step);
    }
}

/* Rows of a grid with up to three faults each, anywhere: the whole-step
 * check (later steps of a grid, whose durations the grid fold checks) and
 * the row-by-row one give the same error (the first in (step, rank) order)
 * or the same summary, with either vector fold and with group candidates
 * or none. Values that wrap, among the faults, find any arithmetic that
 * meets a duration before its check (under UBSan). */
static void whole_step_checks_match_row_by_row(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 600; seed++) {
        uint64_t st = seed * 7919;
        uint32_t S = 1 + (uint32_t)rand_below(&st, 8), R = 1 + (uint32_t)rand_below(&st, 70);
        uint32_t T = 3 + (uint32_t)rand_below(&st, 8);
        struct matrix m = matrix_random(seed, T, R, S, seed % 2 ? 9 : 50000000);
        size_t n = (size_t)T * R;
        matrix_random_extras(&m, &st);
        for (size_t i = 0; i < n; i++)
            m.rows[i].rank = m.rows[i].rank * 3 + 1;
        int64_t *elsewhere = malloc(3 * S * sizeof *elsewhere);
        for (int f = 0, faults = (int)rand_below(&st, 4); f < faults; f++)
            plant_fault(m.rows, (size_t)rand_below(&st, (int64_t)n), S,
                        (int)rand_below(&st, FAULT_KINDS), &elsewhere[f * S]);
        sf_schema schema;
        if (seed % 4 == 1 && S >= 4)
            paired_schema(&schema, S);
        else
            numbered_schema(&schema, S);
        sf_window_meta meta = meta_for(3 * R + 1);
        sf_summary *by_row = NULL;
        bool dense = seed % 3 == 0;
        int want = sf__summary_build(&schema, &meta, m.rows, n, dense, SF__BUILD_GENERAL, &by_row);
        assert_fast_paths_agree(&schema, &meta, m.rows, n, dense, want, by_row, seed);
        sf_summary_free(by_row);
        sf_schema_clear(&schema);
        free(elsewhere);
        matrix_free(&m);
    }
}

/* Every form of the build (either vector fold, and the general path)
 * refuses the window with -ERANGE and returns no summary. */
static void assert_every_form_refuses(const sf_schema *schema, const sf_window_meta *meta,
                                      const sf_row *rows, size_t n, bool dense)
{
    const unsigned forms[] = {0, SF__BUILD_GENERAL};
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        sf_summary *s = NULL;
        assert_int_equal(sf__summary_build(schema, meta, rows, n, dense, forms[f], &s), -ERANGE);
        assert_null(s);
    }
}

/* A step whose last three rows hold two stages of 1.5 2^62 and one of
 * INT64_MAX: each such row's end wraps (to about 2^62), and so do a
 * group's cut of the first two and the sum of the three rows' ends. Both
 * vector folds refuse the window as the row-by-row check does, and (under
 * UBSan) no arithmetic overflows on the way. The windows' last blocks of
 * ranks hold a quad and then those three rows, which the AVX2 fold takes
 * one at a time; one window has a GRID_BLOCK of ranks before it. With
 * group candidates and without. */
static void wrapping_durations_are_refused_before_they_are_summed(void **state)
{
    (void)state;
    const uint32_t S = 6, sizes[] = {7, 39};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (int paired = 0; paired < 2; paired++) {
            uint32_t R = sizes[z];
            struct matrix m = matrix_random(R, 4, R, S, 1000);
            for (uint32_t r = R - 3; r < R; r++) {
                cell(&m, 2, r)[0] = cell(&m, 2, r)[1] = (INT64_C(1) << 62) + (INT64_C(1) << 61);
                cell(&m, 2, r)[S - 1] = INT64_MAX;
            }
            sf_schema schema;
            if (paired)
                paired_schema(&schema, S);
            else
                numbered_schema(&schema, S);
            sf_window_meta meta = meta_for(R);
            assert_every_form_refuses(&schema, &meta, m.rows, (size_t)4 * R, false);
            sf_schema_clear(&schema);
            matrix_free(&m);
        }
}

/* A rank whose steps past the first two (which are checked row by row, the
 * second showing the grid) hold INT64_MIN four times and INT64_MAX twice:
 * its median by the selection network, taken before the fold has checked
 * those durations, lies between INT64_MIN and a checked value, whose
 * difference wraps. Under UBSan nothing overflows, and every form refuses
 * the window. */
static void medians_of_unchecked_durations_are_defined(void **state)
{
    (void)state;
    const uint32_t S = 6, R = 9, T = 8;
    struct matrix m = matrix_random(T, T, R, S, 1000);
    for (uint32_t t = 2; t < T; t++)
        cell(&m, t, 1)[2] = t <= 5 ? INT64_MIN : INT64_MAX;
    sf_schema schema;
    numbered_schema(&schema, S);
    sf_window_meta meta = meta_for(R);
    assert_every_form_refuses(&schema, &meta, m.rows, (size_t)T * R, true);
    sf_schema_clear(&schema);
    matrix_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grid_paths_match_the_general_path_mergeable),
        cmocka_unit_test(grid_paths_match_the_general_path_dense),
        cmocka_unit_test(near_grids_take_the_general_path),
        cmocka_unit_test(whole_step_checks_match_row_by_row),
        cmocka_unit_test(wrapping_durations_are_refused_before_they_are_summed),
        cmocka_unit_test(medians_of_unchecked_durations_are_defined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Mergeable summaries: random matrices split across random "nodes" and
 * merged in random orders and groupings give the same report as the
 * single-process computation, byte for byte in JSON, in both modes.
 * Resends and overlaps are refused as the design says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "matrix.h"
#include "report_json.h"

static char *report_text(const sf_summary *s)
{
    sf_gates g;
    sf_gates_default(&g);
    sf_report *r = NULL;
    json_t *obj = NULL;
    assert_int_equal(sf_report_compute(s, &g, &r), 0);
    assert_int_equal(sf_report_to_json(r, &obj), 0);
    char *text = json_dumps(obj, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(obj);
    sf_report_free(r);
    return text;
}

/* Rows of the ranks assigned to one node, skipping dropped rows. */
static size_t node_rows(const struct matrix *m, const uint32_t *node_of, const bool *dropped,
                        uint32_t node, sf_row *out)
{
    size_t n = 0;
    for (size_t i = 0; i < (size_t)m->steps * m->ranks; i++)
        if (node_of[m->rows[i].rank] == node && !dropped[i])
            out[n++] = m->rows[i];
    return n;
}

/* Merges the pool down to one summary by repeatedly joining two random
 * members: random order and random grouping in one. */
static sf_summary *merge_randomly(sf_summary **pool, uint32_t n, uint64_t *st)
{
    while (n > 1) {
        uint32_t a = (uint32_t)rand_below(st, n), b = (uint32_t)rand_below(st, n - 1);
        if (b >= a)
            b++;
        assert_int_equal(sf_summary_merge(pool[a], pool[b]), 0);
        sf_summary_free(pool[b]);
        pool[b] = pool[--n];
    }
    return pool[0];
}

static void run_case(uint64_t seed, bool dense)
{
    uint64_t st = seed;
    uint32_t stages = 2 + (uint32_t)rand_below(&st, 9), ranks = 2 + (uint32_t)rand_below(&st, 40);
    uint32_t steps = 1 + (uint32_t)rand_below(&st, 25), nodes = 1 + (uint32_t)rand_below(&st, 6);
    struct matrix m = matrix_random(seed, steps, ranks, stages, seed % 2 ? 9 : 50000000);
    for (size_t i = 0; i < (size_t)steps * ranks; i++)
        m.rows[i].step += 20;
    matrix_random_extras(&m, &st);
    uint32_t *node_of = calloc(ranks, sizeof *node_of);
    bool *dropped = calloc((size_t)steps * ranks, sizeof *dropped);
    sf_row *rows = calloc((size_t)steps * ranks, sizeof *rows);
    for (uint32_t r = 0; r < ranks; r++)
        node_of[r] = (uint32_t)rand_below(&st, nodes);
    for (size_t i = 0; i < (size_t)steps * ranks; i++)
        dropped[i] = rand_below(&st, 20) == 0; /* leaves incomplete steps behind */
    sf_schema schema;
    if (seed % 3 == 0 && stages >= 3)
        synchronizing_schema(&schema, stages); /* arrival boundaries in the merge */
    else
        numbered_schema(&schema, stages);
    sf_window_meta meta = meta_for(ranks + (uint32_t)rand_below(&st, 2));

    sf_summary *pool[8];
    uint32_t n_pool = 0;
    uint64_t drops = 0;
    for (uint32_t node = 0; node < nodes; node++) {
        size_t n = node_rows(&m, node_of, dropped, node, rows);
        if (n == 0)
            continue;
        sf_window_meta node_meta = meta;
        node_meta.dropped_records = node; /* counters add up across nodes */
        drops += node;
        assert_int_equal(sf_summary_build(&schema, &node_meta, rows, n, dense, &pool[n_pool++]), 0);
    }
    if (n_pool == 0)
        goto out;
    sf_summary *merged = merge_randomly(pool, n_pool, &st);
    size_t all = 0;
    for (size_t i = 0; i < (size_t)steps * ranks; i++)
        if (!dropped[i])
            rows[all++] = m.rows[i];
    sf_summary *whole = NULL;
    meta.dropped_records = drops;
    assert_int_equal(sf_summary_build(&schema, &meta, rows, all, dense, &whole), 0);
    char *a = report_text(merged), *b = report_text(whole);
    if (strcmp(a, b) != 0)
        fail_msg("seed %llu dense %d:\nmerged %s\nwhole  %s", (unsigned long long)seed, dense, a,
                 b);
    free(a);
    free(b);
    sf_summary_free(merged);
    sf_summary_free(whole);
out:
    sf_schema_clear(&schema);
    free(node_of);
    free(dropped);
    free(rows);
    matrix_free(&m);
}

static void merged_equals_whole_mergeable(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 150; seed++)
        run_case(seed, false);
}

static void merged_equals_whole_dense(void **state)
{
    (void)state;
    for (uint64_t seed = 1000; seed <= 1150; seed++)
        run_case(seed, true);
}

static void resend_and_overlap_are_refused(void **state)
{
    (void)state;
    struct matrix m = matrix_random(5, 4, 6, 3, 100);
    sf_schema schema;
    numbered_schema(&schema, 3);
    sf_window_meta meta = meta_for(6);
    sf_summary *low = NULL, *high = NULL, *mid = NULL, *again = NULL;
    sf_row rows[24];
    size_t n = 0;
    for (size_t i = 0; i < 24; i++)
        if (m.rows[i].rank < 3)
            rows[n++] = m.rows[i];
    assert_int_equal(sf_summary_build(&schema, &meta, rows, n, false, &low), 0);
    assert_int_equal(sf_summary_build(&schema, &meta, rows, n, false, &again), 0);
    n = 0;
    for (size_t i = 0; i < 24; i++)
        if (m.rows[i].rank >= 3)
            rows[n++] = m.rows[i];
    assert_int_equal(sf_summary_build(&schema, &meta, rows, n, false, &high), 0);
    n = 0;
    for (size_t i = 0; i < 24; i++)
        if (m.rows[i].rank >= 2 && m.rows[i].rank < 4)
            rows[n++] = m.rows[i];
    assert_int_equal(sf_summary_build(&schema, &meta, rows, n, false, &mid), 0);
    assert_int_equal(sf_summary_merge(low, high), 0);
    assert_int_equal(sf_summary_covered_ranks(low), 6);
    assert_int_equal(sf_summary_merge(low, again), -EALREADY); /* identical resend */
    assert_int_equal(sf_summary_merge(high, mid), -EBUSY);     /* partial overlap */
    assert_int_equal(high->merge_conflicts, 1);
    sf_window_meta other = meta;
    other.index = 1;
    sf_summary *wrong = NULL;
    assert_int_equal(sf_summary_build(&schema, &other, rows, n, false, &wrong), 0);
    assert_int_equal(sf_summary_merge(low, wrong), -EINVAL); /* another window */
    sf_summary *copy = NULL;
    assert_int_equal(sf_summary_clone(low, &copy), 0);
    char *a = report_text(low), *b = report_text(copy);
    assert_string_equal(a, b);
    free(a);
    free(b);
    sf_summary_free(copy);
    sf_summary_free(wrong);
    sf_summary_free(low);
    sf_summary_free(high);
    sf_summary_free(mid);
    sf_summary_free(again);
    sf_schema_clear(&schema);
    matrix_free(&m);
}

static void duplicate_rows_are_rejected(void **state)
{
    (void)state;
    struct matrix m = matrix_random(7, 2, 2, 3, 100);
    m.rows[1].rank = 0;
    sf_schema schema;
    numbered_schema(&schema, 3);
    sf_window_meta meta = meta_for(2);
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), -EEXIST);
    m.rows[1].rank = 1;
    cell(&m, 0, 1)[0] = SF_MAX_DURATION_NS + 1;
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), -ERANGE);
    assert_null(s);
    cell(&m, 0, 1)[0] = -1; /* negative: out of range as well, in any stage */
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), -ERANGE);
    cell(&m, 0, 1)[0] = 0;
    cell(&m, 1, 1)[2] = INT64_MIN;
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), -ERANGE);
    cell(&m, 1, 1)[2] = SF_MAX_DURATION_NS; /* a stage at its cap overruns the step */
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), -ERANGE);
    cell(&m, 1, 1)[2] = SF_MAX_DURATION_NS * 2; /* the cap's bit clear, one above it set */
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), -ERANGE);
    /* A stage may hold the whole step bound, and a rank's step no more. */
    cell(&m, 1, 1)[0] = cell(&m, 1, 1)[1] = 0;
    cell(&m, 1, 1)[2] = SF_MAX_STEP_NS + 1;
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), -ERANGE);
    cell(&m, 1, 1)[2] = SF_MAX_STEP_NS / 2;
    cell(&m, 1, 1)[1] = SF_MAX_STEP_NS / 2 + 1; /* the stages add up past the bound */
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), -ERANGE);
    cell(&m, 1, 1)[1] = SF_MAX_STEP_NS / 2; /* the cap itself is allowed */
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, 4, false, &s), 0);
    sf_summary_free(s);
    sf_schema_clear(&schema);
    matrix_free(&m);
}

/* A row's durations are checked by their bits and their sum: on a grid and
 * without one (a rank missing), a duration at or past its cap, a negative
 * one, or a row past the step's bound is refused, and the error is the
 * first in (step, rank) order. */
static void durations_are_checked_on_every_path(void **state)
{
    (void)state;
    sf_schema schema;
    numbered_schema(&schema, 3);
    sf_window_meta meta = meta_for(4);
    for (size_t n = 12; n >= 11; n--) {
        struct matrix m = matrix_random(11, 3, 4, 3, 100);
        sf_summary *s = NULL;
        assert_int_equal(sf_summary_build(&schema, &meta, m.rows, n, false, &s), 0);
        sf_summary_free(s);
        s = NULL;
        cell(&m, 1, 2)[1] = SF_MAX_DURATION_NS;
        assert_int_equal(sf_summary_build(&schema, &meta, m.rows, n, false, &s), -ERANGE);
        cell(&m, 1, 2)[1] = -5;
        assert_int_equal(sf_summary_build(&schema, &meta, m.rows, n, false, &s), -ERANGE);
        cell(&m, 1, 2)[1] = SF_MAX_STEP_NS; /* each below its cap, the row past the step's */
        assert_int_equal(sf_summary_build(&schema, &meta, m.rows, n, false, &s), -ERANGE);
        m.rows[10].rank = m.rows[9].rank; /* a later duplicate: the durations come first */
        assert_int_equal(sf_summary_build(&schema, &meta, m.rows, n, true, &s), -ERANGE);
        m.rows[1].rank = m.rows[0].rank; /* an earlier one comes first */
        assert_int_equal(sf_summary_build(&schema, &meta, m.rows, n, false, &s), -EEXIST);
        assert_null(s);
        matrix_free(&m);
    }
    sf_schema_clear(&schema);
}

/* The rank cap is hard: a window of SF_MAX_RANKS ranks, each at the step
 * bound (the largest per-step sums over ranks there can be, 2^62), builds,
 * merges from two halves and reports exactly; a rank past the cap is
 * refused. Under UBSan an overflow anywhere in the sums fails the test. */
static void rank_cap_is_hard(void **state)
{
    (void)state;
    const uint32_t stages = 3, ranks = SF_MAX_RANKS;
    struct matrix m = matrix_new(1, ranks, stages);
    for (uint32_t r = 0; r < ranks; r++) {
        cell(&m, 0, r)[0] = SF_MAX_STEP_NS / 2;
        cell(&m, 0, r)[1] = SF_MAX_STEP_NS / 4;
        cell(&m, 0, r)[2] = SF_MAX_STEP_NS / 4;
    }
    sf_schema schema;
    numbered_schema(&schema, stages);
    sf_window_meta meta = meta_for(ranks);
    sf_summary *lo = NULL, *hi = NULL, *whole = NULL;
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, ranks / 2, false, &lo), 0);
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows + ranks / 2, ranks / 2, false, &hi),
                     0);
    assert_int_equal(sf_summary_merge(lo, hi), 0);
    assert_int_equal(lo->steps[0].n_ranks, ranks);
    assert_true(lo->steps[0].end_sum == (int64_t)ranks * SF_MAX_STEP_NS);
    assert_true(lo->steps[0].dsum[0] == (int64_t)ranks * (SF_MAX_STEP_NS / 2));
    assert_int_equal(sf_summary_build(&schema, &meta, m.rows, ranks, false, &whole), 0);
    char *a = report_text(lo), *b = report_text(whole);
    assert_string_equal(a, b);
    free(a);
    free(b);
    sf_summary_free(whole);
    sf_summary_free(hi);
    sf_summary_free(lo);
    whole = NULL;
    /* the last rank under the cap, and one past it */
    m.rows[0].rank = ranks - 1;
    assert_int_equal(sf_row_validate(&m.rows[0], &schema), 0);
    m.rows[0].rank = ranks;
    assert_int_equal(sf_row_validate(&m.rows[0], &schema), -ERANGE);
    assert_int_not_equal(sf_summary_build(&schema, &meta, m.rows, 1, false, &whole), 0);
    assert_null(whole);
    sf_schema_clear(&schema);
    matrix_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(merged_equals_whole_mergeable),
        cmocka_unit_test(merged_equals_whole_dense),
        cmocka_unit_test(resend_and_overlap_are_refused),
        cmocka_unit_test(duplicate_rows_are_rejected),
        cmocka_unit_test(rank_cap_is_hard),
        cmocka_unit_test(durations_are_checked_on_every_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

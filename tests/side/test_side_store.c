/*
 * sfd's NCCL side-evidence store (daemon/sfd/side_evidence.c) on its own:
 * filing by (segment, window), warmup, the hard bounds and their counters,
 * eviction, name sanitizing, saturating sums, and what the report JSON and
 * the human view gain (or, without evidence, do not gain).
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ingest.pb-c.h"
#include "side_evidence.h"

static sf_gates gates;

/* A batch of n aggregates; aggregate i is collective "C<i>" (distinct keys). */
struct batch {
    Stagefrontier__NcclBatch b;
    Stagefrontier__NcclAggregate a[300], *p[300];
    char names[300][8];
};

static void batch_init(struct batch *x, int64_t step, const char *comm, const char *stage, size_t n,
                       uint64_t count)
{
    stagefrontier__nccl_batch__init(&x->b);
    x->b.step = step;
    x->b.comm_name = (char *)comm;
    x->b.has_comm_hash = 1;
    x->b.comm_hash = 7;
    x->b.enclosing_stage = (char *)stage;
    for (size_t i = 0; i < n; i++) {
        stagefrontier__nccl_aggregate__init(&x->a[i]);
        snprintf(x->names[i], sizeof x->names[i], "C%u", (unsigned)(i % 1000));
        x->a[i].collective = x->names[i];
        x->a[i].has_count = x->a[i].has_bytes = 1;
        x->a[i].count = count;
        x->a[i].bytes = count * 4;
        x->p[i] = &x->a[i];
    }
    x->b.n_aggregates = n;
    x->b.aggregates = x->p;
}

static int64_t step_of_window(int64_t w)
{
    return gates.warmup_steps + w * gates.window_steps;
}

static json_t *annotate(const struct sfd_side *side, int64_t index, uint32_t segment)
{
    sf_report rep = {.meta = {.index = index, .segment = segment}};
    json_t *w = json_pack("{s:[{s:s},{s:s}]}", "stages", "name", "model.backward_cpu_wall", "name",
                          "model.fwd_loss_cpu_wall");
    assert_non_null(w);
    assert_int_equal(sfd_side_annotate_json(side, &rep, w), 0);
    return w;
}

static int setup(void **state)
{
    (void)state;
    sf_gates_default(&gates);
    gates.warmup_steps = 20;
    gates.window_steps = 100;
    return 0;
}

static void test_files_by_window_and_sums_ranks(void **state)
{
    static struct batch x;
    struct sfd_side *side = NULL;
    json_t *w, *rows, *stage;
    (void)state;
    batch_init(&x, step_of_window(3) + 5, "dp", "model.backward_cpu_wall", 1, 10);
    x.a[0].has_gpu_time_ns = x.a[0].has_timed_count = 1;
    x.a[0].gpu_time_ns = 2000000;
    x.a[0].timed_count = 10;
    assert_int_equal(sfd_side_add(&side, &gates, 0, 0, &x.b), 0);
    assert_int_equal(sfd_side_add(&side, &gates, 0, 1, &x.b), 0); /* a second rank */
    w = annotate(side, 3, 0);
    rows = json_object_get(json_object_get(json_object_get(w, "side_evidence"), "nccl"),
                           "collectives");
    assert_int_equal(json_array_size(rows), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(rows, 0), "count")), 20);
    assert_true(json_real_value(json_object_get(json_array_get(rows, 0), "gpu_time_s")) == 0.004);
    stage = json_array_get(json_object_get(w, "stages"), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(stage, "nccl"), "count")),
                     20);
    assert_null(json_object_get(json_array_get(json_object_get(w, "stages"), 1), "nccl"));
    json_decref(w);
    /* Another window, another segment: nothing there. */
    w = annotate(side, 4, 0);
    assert_null(json_object_get(w, "side_evidence"));
    json_decref(w);
    w = annotate(side, 3, 1);
    assert_null(json_object_get(w, "side_evidence"));
    json_decref(w);
    sfd_side_free(side);
}

static void test_warmup_and_no_store(void **state)
{
    static struct batch x;
    struct sfd_side *side = NULL;
    struct sfd_side_stats st;
    json_t *w;
    char *before, *after;
    (void)state;
    w = annotate(NULL, 0, 0); /* no store at all: the window is untouched */
    before = json_dumps(w, JSON_COMPACT);
    json_decref(w);
    batch_init(&x, 3, "dp", "model.backward_cpu_wall", 1, 1);
    assert_int_equal(sfd_side_add(&side, &gates, 0, 0, &x.b), 0);
    sfd_side_get_stats(side, &st);
    assert_int_equal(st.warmup_batches, 1);
    w = annotate(side, 0, 0);
    after = json_dumps(w, JSON_COMPACT);
    assert_string_equal(before, after);
    json_decref(w);
    free(before);
    free(after);
    sfd_side_free(side);
}

static void test_row_and_comm_bounds(void **state)
{
    static struct batch x;
    struct sfd_side *side = NULL;
    struct sfd_side_stats st;
    char comm[16];
    (void)state;
    batch_init(&x, step_of_window(0), "dp", "s", 266, 1);
    assert_int_equal(sfd_side_add(&side, &gates, 0, 0, &x.b), 0);
    sfd_side_get_stats(side, &st);
    assert_int_equal(st.rows_refused, 266 - SFD_SIDE_ROWS);
    for (int c = 0; c < SFD_SIDE_COMMS + 1; c++) {
        snprintf(comm, sizeof comm, "comm%d", c);
        batch_init(&x, step_of_window(1), comm, "s", 1, 1);
        assert_int_equal(sfd_side_add(&side, &gates, 0, 0, &x.b), 0);
    }
    sfd_side_get_stats(side, &st);
    assert_int_equal(st.rows_refused, 266 - SFD_SIDE_ROWS + 1); /* the 17th communicator */
    sfd_side_free(side);
}

/* The per-job row cap holds over windows; eviction frees rows again. */
static void test_job_cap_and_eviction(void **state)
{
    static struct batch x;
    struct sfd_side *side = NULL;
    struct sfd_side_stats st;
    json_t *w;
    const int full = SFD_SIDE_ROWS_PER_JOB / SFD_SIDE_ROWS; /* windows that fit */
    (void)state;
    for (int i = 0; i <= full; i++) {
        batch_init(&x, step_of_window(i), "dp", "s", SFD_SIDE_ROWS, 1);
        assert_int_equal(sfd_side_add(&side, &gates, 0, 0, &x.b), 0);
    }
    sfd_side_get_stats(side, &st);
    assert_int_equal(st.rows_refused, SFD_SIDE_ROWS);
    for (int i = full + 1; i < SFD_SIDE_WINDOWS + 5; i++) {
        batch_init(&x, step_of_window(i), "dp", "s", 1, 1);
        assert_int_equal(sfd_side_add(&side, &gates, 0, 0, &x.b), 0);
    }
    sfd_side_get_stats(side, &st);
    assert_int_equal(st.windows_evicted, 5);
    w = annotate(side, 0, 0); /* the oldest went first */
    assert_null(json_object_get(w, "side_evidence"));
    json_decref(w);
    w = annotate(side, SFD_SIDE_WINDOWS + 4, 0);
    assert_non_null(json_object_get(w, "side_evidence"));
    json_decref(w);
    sfd_side_free(side);
}

/* Client-supplied names cannot break the JSON or the terminal, and sums
 * saturate instead of wrapping. */
static void test_hostile_names_and_saturation(void **state)
{
    static struct batch x;
    struct sfd_side *side = NULL;
    sf_report rep = {.meta = {.index = 0, .segment = 0}};
    json_t *w, *row;
    char *text = NULL, *dump;
    size_t len = 0;
    FILE *f;
    (void)state;
    batch_init(&x, step_of_window(0),
               "bad\x01\xff\xfe"
               "comm",
               "st\x1b[2J", 1, UINT64_MAX - 5);
    assert_int_equal(sfd_side_add(&side, &gates, 0, 0, &x.b), 0);
    assert_int_equal(sfd_side_add(&side, &gates, 0, 0, &x.b), 0);
    w = annotate(side, 0, 0);
    dump = json_dumps(w, JSON_COMPACT);
    assert_non_null(dump);
    row =
        json_array_get(json_object_get(json_object_get(json_object_get(w, "side_evidence"), "nccl"),
                                       "collectives"),
                       0);
    assert_string_equal(json_string_value(json_object_get(row, "communicator")), "bad???comm");
    assert_string_equal(json_string_value(json_object_get(row, "enclosing_stage")), "st?[2J");
    assert_int_equal(json_integer_value(json_object_get(row, "count")), INT64_MAX);
    free(dump);
    json_decref(w);
    f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(sfd_side_write_text(side, &rep, f), 0);
    fclose(f);
    assert_non_null(strstr(text, "in st?[2J:"));
    assert_null(strchr(text, '\x1b'));
    free(text);
    sfd_side_free(side);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_files_by_window_and_sums_ranks, setup),
        cmocka_unit_test_setup(test_warmup_and_no_store, setup),
        cmocka_unit_test_setup(test_row_and_comm_bounds, setup),
        cmocka_unit_test_setup(test_job_cap_and_eviction, setup),
        cmocka_unit_test_setup(test_hostile_names_and_saturation, setup),
    };
    return cmocka_run_group_tests_name("side_store", tests, NULL, NULL);
}

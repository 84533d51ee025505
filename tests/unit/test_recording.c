/*
 * The JSON Lines recording: every line type round-trips exactly (the
 * reference with and without its sync floors), a header from before pooled
 * windows replays each window alone, and the
 * decoders refuse wrong types and out-of-range values with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "matrix.h"
#include "recording.h"

static void header_round_trips(void **state)
{
    (void)state;
    sf_schema s, back;
    sf_gates g, parsed;
    assert_int_equal(sf_schema_init_default(&s, 2), 0);
    sf_gates_default(&g);
    g.tau = 0.7;
    g.model_fit = true;
    json_t *h = sf_recording_header("job-1", &s, 8, &g);
    assert_non_null(h);
    char *text = json_dumps(h, 0);
    json_decref(h);
    h = json_loads(text, 0, NULL);
    free(text);
    uint32_t world = 0;
    char err[200];
    sf_gates_default(&parsed);
    assert_int_equal(sf_recording_parse_header(h, &back, &world, &parsed, err, sizeof err), 0);
    assert_true(sf_schema_equal(&s, &back));
    assert_int_equal(world, 8);
    assert_true(parsed.tau == 0.7 && parsed.model_fit);
    assert_int_equal(parsed.change_pool_windows, 3);
    sf_schema_clear(&back);
    /* a recording from before pooling has no such gate: it measured each
     * window alone, so its replay does too */
    json_object_del(json_object_get(h, "gates"), "change_pool_windows");
    sf_gates_default(&parsed);
    assert_int_equal(sf_recording_parse_header(h, &back, &world, &parsed, err, sizeof err), 0);
    assert_int_equal(parsed.change_pool_windows, 1);
    json_decref(h);
    sf_schema_clear(&back);
    sf_schema_clear(&s);
}

static void row_round_trips(void **state)
{
    (void)state;
    sf_schema s;
    assert_int_equal(sf_schema_init_default(&s, 1), 0);
    int64_t d[6] = {1, 2, 3, SF_MAX_DURATION_NS, 0, 7}, back_d[6];
    sf_parallel par, back_par;
    bool has = false;
    assert_int_equal(sf_parallel_parse("pp=1/2,dp=3/4,schedule=interleaved:2", &par, NULL, 0), 0);
    sf_row row = {.step = 42,
                  .parallel = &par,
                  .rank = 7,
                  .flags = SF_ROW_VIOLATION,
                  .overlap_ns = 9,
                  .d = d,
                  .role = "trainer",
                  .event_state = SF_EVENT_READY,
                  .event_cpu_ns = 100,
                  .event_gpu_ns = 80};
    json_t *o = sf_recording_row(&row, &s);
    sf_row back;
    char err[200];
    assert_int_equal(sf_recording_parse_row(o, &s, &back, back_d, err, sizeof err), 0);
    assert_int_equal(back.step, 42);
    assert_int_equal(back.rank, 7);
    assert_int_equal(back.flags, SF_ROW_VIOLATION);
    assert_int_equal(back.overlap_ns, 9);
    assert_memory_equal(back_d, d, sizeof d);
    assert_string_equal(back.role, "trainer");
    assert_int_equal(back.event_state, SF_EVENT_READY);
    assert_int_equal(back.event_gpu_ns, 80);
    assert_int_equal(sf_recording_parse_row_parallel(o, &back_par, &has, err, sizeof err), 0);
    assert_true(has);
    assert_true(sf_parallel_equal(&back_par, &par));
    json_decref(o);
    row.parallel = NULL; /* none: no key, and none read back */
    o = sf_recording_row(&row, &s);
    assert_null(json_object_get(o, "parallel"));
    assert_int_equal(sf_recording_parse_row_parallel(o, &back_par, &has, err, sizeof err), 0);
    assert_false(has);
    json_decref(o);
    static const char *const bad_par[] = {"{\"parallel\": 5}", "{\"parallel\": \"pp=2/2\"}",
                                          "{\"parallel\": \"pp=0/2,,dp=0/2\"}"};
    for (size_t i = 0; i < sizeof bad_par / sizeof bad_par[0]; i++) {
        o = json_loads(bad_par[i], 0, NULL);
        assert_non_null(o);
        assert_int_equal(sf_recording_parse_row_parallel(o, &back_par, &has, err, sizeof err),
                         -EINVAL);
        assert_non_null(strstr(err, "parallel"));
        json_decref(o);
    }
    sf_schema_clear(&s);
}

static void window_round_trips(void **state)
{
    (void)state;
    sf_window_meta m = {.index = 3,
                        .segment = 1,
                        .first_step = 320,
                        .last_step = 419,
                        .world_size = 16,
                        .flags = SF_WIN_CLOSED_EARLY | SF_WIN_NON_MONOTONIC,
                        .dropped_records = 5,
                        .contract_violations = 2,
                        .rejected_records = 1};
    json_t *o = sf_recording_window(&m);
    sf_window_meta back;
    char err[200];
    assert_int_equal(sf_recording_parse_window(o, &back, err, sizeof err), 0);
    assert_memory_equal(&back, &m, sizeof m);
    json_decref(o);
}

static void bad_rows_are_refused(void **state)
{
    (void)state;
    sf_schema s;
    assert_int_equal(sf_schema_init_default(&s, 1), 0);
    const char *bad[] = {
        "{\"step\": -1, \"rank\": 0, \"d_ns\": [0,0,0,0,0,0]}",
        "{\"step\": 1, \"rank\": 0, \"d_ns\": [0,0,0,0,0]}",
        "{\"step\": 1, \"rank\": 0, \"d_ns\": [0,0,0,0,0,-5]}",
        "{\"step\": 1, \"rank\": 0, \"d_ns\": [0,0,0,0,0,4398046511105]}",
        "{\"step\": 1, \"rank\": 2097152, \"d_ns\": [0,0,0,0,0,0]}",
        "{\"step\": \"1\", \"rank\": 0, \"d_ns\": [0,0,0,0,0,0]}",
        "{\"step\": 1, \"rank\": 0, \"d_ns\": [0,0,0,0,0,0.5]}",
        "{\"step\": 1, \"rank\": 0, \"d_ns\": [0,0,0,0,0,0], \"event\": {\"state\": \"late\"}}",
        "{\"step\": 1, \"rank\": 0, \"d_ns\": [0,0,0,0,0,0], \"role\": 5}",
        "{\"step\": 1, \"rank\": 0, \"d_ns\": [0,0,0,0,0,0], \"flags\": 64}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *o = json_loads(bad[i], 0, NULL);
        assert_non_null(o);
        sf_row row;
        int64_t d[6];
        char err[200] = "";
        assert_int_equal(sf_recording_parse_row(o, &s, &row, d, err, sizeof err), -EINVAL);
        assert_true(strlen(err) > 0);
        json_decref(o);
    }
    sf_schema_clear(&s);
}

/* A mergeable reference of two steps of two stages, with its floors, back
 * field for field; without "min_ns" (an older recording) it parses with no
 * floors; floors of the wrong shape are refused with a message. */
static void reference_round_trips(void **state)
{
    (void)state;
    sf_schema s;
    const char *names[] = {"a", "b"};
    assert_int_equal(sf_schema_init(&s, 1, 2, names, NULL, 1), 0);
    int64_t advance[4] = {5, 7, 6, 8}, min[4] = {1, 2, 3, 4};
    sf_reference ref = {.schema_hash = s.hash,
                        .n_stages = 2,
                        .world_size = 4,
                        .n_windows = 1,
                        .n_steps = 2,
                        .advance = advance,
                        .min_ns = min};
    json_t *o = sf_recording_reference(&ref);
    sf_reference *back = NULL;
    char err[200] = "";
    assert_int_equal(sf_recording_parse_reference(o, &s, 4, &back, err, sizeof err), 0);
    assert_memory_equal(back->advance, advance, sizeof advance);
    assert_memory_equal(back->min_ns, min, sizeof min);
    assert_null(back->ranks);
    sf_reference_free(back);
    json_object_del(o, "min_ns");
    assert_int_equal(sf_recording_parse_reference(o, &s, 4, &back, err, sizeof err), 0);
    assert_null(back->min_ns);
    sf_reference_free(back);
    const char *bad[] = {"[[1,2]]", "[[1,2],[3]]", "[[1,2],[3,-4]]", "7"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_object_set_new(o, "min_ns", json_loads(bad[i], JSON_DECODE_ANY, NULL));
        err[0] = 0;
        assert_int_equal(sf_recording_parse_reference(o, &s, 4, &back, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, "min_ns"));
    }
    json_decref(o);
    sf_schema_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_round_trips),    cmocka_unit_test(row_round_trips),
        cmocka_unit_test(window_round_trips),    cmocka_unit_test(bad_rows_are_refused),
        cmocka_unit_test(reference_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

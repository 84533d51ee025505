/*
 * Gates: the design's defaults, parsing of every key, rejection of bad
 * values and unknown keys, and the enumeration the JSON writer relies on.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include <stagefrontier/accounting.h>

static void defaults_match_the_design(void **state)
{
    (void)state;
    sf_gates g;
    sf_gates_default(&g);
    assert_true(g.residual_share_max == 0.10 && g.overlap_share_max == 0.02);
    assert_true(g.missing_ranks_max == 0 && g.incomplete_steps_max == 0);
    assert_true(g.event_ready_ratio_min == 0.5 && g.event_samples_min == 5);
    assert_true(g.event_support_ratio_min == 0.5 && g.event_host_ratio_max == 0.25);
    assert_true(g.dominance_share_min == 0.35 && g.gain_ratio_min == 0.5 && g.tie_tol == 0.05);
    assert_true(g.leader_gap_tol_min_s == 0.001 && g.leader_gap_tol_frac == 0.02);
    assert_true(g.leader_switch_rate_max == 0.3 && g.tau == 0.80 && !g.model_fit);
    assert_true(g.share_floor_s == 1e-6 && g.warmup_steps == 20 && g.window_steps == 100);
    assert_true(g.suspect_ranks_max == 3 && g.dense_max_ranks == 1024);
    assert_true(g.baseline_windows == 3 && g.change_alpha == 0.01 && g.change_min_frac == 0.02);
    assert_int_equal(g.change_pool_windows, 3);
    assert_true(g.straggler_alpha == 0.01 && g.straggler_last_share_min == 0 &&
                g.straggler_persist_windows == 2);
    assert_true(g.comm_lag_min_s == 0.0005 && g.comm_share_min == 0.5);
    assert_int_equal(sf_gates_validate(&g), 0);
}

static void keys_parse_and_validate(void **state)
{
    (void)state;
    sf_gates g;
    sf_gates_default(&g);
    assert_int_equal(sf_gates_set(&g, "tau", "0.9"), 0);
    assert_true(g.tau == 0.9);
    assert_int_equal(sf_gates_set(&g, "model_fit", "true"), 0);
    assert_true(g.model_fit);
    assert_int_equal(sf_gates_set(&g, "window_steps", "50"), 0);
    assert_int_equal(g.window_steps, 50);
    assert_int_equal(sf_gates_set(&g, "forward_stage", "fwd"), 0);
    assert_string_equal(g.forward_stage, "fwd");
    assert_int_equal(sf_gates_set(&g, "tau", "1.5"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "tau", "nan"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "tau", "-0.1"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "tau", "0.5x"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "window_steps", "2.5"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "window_steps", "99999999"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "model_fit", "maybe"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "no_such_gate", "1"), -ENOENT);
    assert_int_equal(sf_gates_set(NULL, "tau", "1"), -EINVAL);
    assert_true(g.tau == 0.9); /* failed sets change nothing */
    assert_int_equal(sf_gates_set(&g, "baseline_windows", "17"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "change_pool_windows", "8"), 0);
    assert_int_equal(sf_gates_set(&g, "change_pool_windows", "9"), -EINVAL);
    assert_int_equal(g.change_pool_windows, 8);
    assert_int_equal(sf_gates_set(&g, "change_alpha", "0.6"), -EINVAL);
    assert_int_equal(sf_gates_set(&g, "straggler_alpha", "0.6"), -EINVAL);
    g.straggler_alpha = 0; /* a verdict could never pass */
    assert_int_equal(sf_gates_validate(&g), -EINVAL);
    g.straggler_alpha = 0.01;
    g.baseline_windows = 0;
    assert_int_equal(sf_gates_validate(&g), -EINVAL);
    g.baseline_windows = 3;
    g.change_pool_windows = 0;
    assert_int_equal(sf_gates_validate(&g), -EINVAL);
    g.change_pool_windows = 3;
    g.window_steps = 0;
    assert_int_equal(sf_gates_validate(&g), -EINVAL);
}

static void every_key_round_trips(void **state)
{
    (void)state;
    sf_gates g, h;
    sf_gates_default(&g);
    sf_gates_default(&h);
    enum sf_gate_type type;
    double number;
    const char *text, *key;
    size_t n = 0;
    for (size_t i = 0; (key = sf_gates_describe(&g, i, &type, &number, &text)) != NULL; i++, n++) {
        assert_true((type == SF_GATE_NAME) == (text != NULL));
        char buf[80];
        if (text)
            snprintf(buf, sizeof buf, "%s", text);
        else
            snprintf(buf, sizeof buf, "%.17g", number);
        assert_int_equal(sf_gates_set(&h, key, buf), 0);
    }
    assert_int_equal(n, 32);
    assert_memory_equal(&g, &h, sizeof g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_match_the_design),
        cmocka_unit_test(keys_parse_and_validate),
        cmocka_unit_test(every_key_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The launch identity a rank reads from its launcher's environment
 * (client/lib/launch_id.c; docs/SFD.md, "Identity"): the order of the
 * sources, torchrun's "none", the restart counts, and run ids that hold
 * bytes outside the job-id alphabet or are too long.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "client_internal.h"

static const char *const launcher_vars[] = {
    "SF_RUN_ID",    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
    "SLURM_JOB_ID", "SLURM_STEP_ID",       "SLURM_RESTART_COUNT",
    "MASTER_ADDR",  "MASTER_PORT",         "SF_RESTART_COUNT",
};

static int clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        unsetenv(launcher_vars[i]);
    return 0;
}

static void expect_launch(const char *run_id, uint32_t restart)
{
    char got[SF_MAX_RUN_ID_LEN + 1];
    uint32_t n = 99;
    sf__launch_identity(got, sizeof got, &n);
    assert_string_equal(got, run_id);
    assert_int_equal(n, restart);
}

static void none_set(void **state)
{
    (void)state;
    expect_launch("", 0);
}

static void sources_in_order(void **state)
{
    (void)state;
    setenv("MASTER_ADDR", "node7", 1);
    setenv("MASTER_PORT", "29500", 1);
    expect_launch("master:node7:29500", 0);
    setenv("SLURM_JOB_ID", "4411", 1);
    expect_launch("slurm:4411.0", 0);
    setenv("SLURM_STEP_ID", "2", 1);
    setenv("SLURM_RESTART_COUNT", "1", 1);
    expect_launch("slurm:4411.2", 1);
    setenv("TORCHELASTIC_RUN_ID", "none", 1); /* torchrun without --rdzv-id */
    expect_launch("slurm:4411.2", 1);
    setenv("TORCHELASTIC_RUN_ID", "rdzv-17", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
    expect_launch("torch:rdzv-17", 3);
    setenv("SF_RUN_ID", "mine", 1);
    setenv("SF_RESTART_COUNT", "5", 1);
    expect_launch("mine", 5);
}

static void hostile_values(void **state)
{
    (void)state;
    setenv("SF_RUN_ID", "a b/c\x1b[2J", 1);
    setenv("SF_RESTART_COUNT", "-4", 1);
    expect_launch("a_b_c__2J", 0);
    setenv("SF_RESTART_COUNT", "12x", 1);
    expect_launch("a_b_c__2J", 0);
    setenv("SF_RESTART_COUNT", "99999999999", 1);
    expect_launch("a_b_c__2J", SF_MAX_RESTART_COUNT);
    char long_id[400];
    memset(long_id, 'x', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    setenv("SF_RUN_ID", long_id, 1);
    char got[SF_MAX_RUN_ID_LEN + 1];
    uint32_t n;
    sf__launch_identity(got, sizeof got, &n);
    assert_int_equal(strlen(got), SF_MAX_RUN_ID_LEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(none_set, clear_env),
        cmocka_unit_test_setup(sources_in_order, clear_env),
        cmocka_unit_test_setup(hostile_values, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Argument checks of the public client API: every rejected argument returns
 * -EINVAL (one test each), and a disabled client accepts everything as 0.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <stagefrontier/client.h>

#define NO_DAEMON "/nonexistent-stagefrontier-test/ingest.sock"

static int env_setup(void **state)
{
    (void)state;
    unsetenv("SF_JOB_ID");
    unsetenv("TORCHELASTIC_RUN_ID");
    unsetenv("SLURM_JOB_ID");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("LOCAL_RANK");
    unsetenv("SF_DISABLE");
    unsetenv("SF_ROLE");
    unsetenv("SF_EVENT_SAMPLE");
    unsetenv("SF_FLUSH_MS");
    unsetenv("SF_PARALLEL");
    setenv("SF_SOCKET", NO_DAEMON, 1);
    return 0;
}

static sf_client_options base(void)
{
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "job-1";
    return o;
}

/* Opening with o must fail with -EINVAL and leave ret untouched. */
static void expect_open_einval(const sf_client_options *o)
{
    sf_client *c = (sf_client *)(uintptr_t)0x1;
    assert_int_equal(sf_client_open(o, &c), -EINVAL);
    assert_ptr_equal(c, (sf_client *)(uintptr_t)0x1);
}

static sf_client *open_ok(void)
{
    sf_client_options o = base();
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    assert_non_null(c);
    return c;
}

static void open_null_opts(void **s)
{
    (void)s;
    sf_client *c;
    assert_int_equal(sf_client_open(NULL, &c), -EINVAL);
}
static void open_null_ret(void **s)
{
    (void)s;
    sf_client_options o = base();
    assert_int_equal(sf_client_open(&o, NULL), -EINVAL);
}
static void open_env_null_ret(void **s)
{
    (void)s;
    assert_int_equal(sf_client_open_env(NULL), -EINVAL);
}

static void open_no_job_id(void **s)
{
    (void)s;
    sf_client_options o;
    sf_client_options_init(&o);
    expect_open_einval(&o);
}

static void open_bad_job_id_chars(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.job_id = "job 1";
    expect_open_einval(&o);
}

static void open_job_id_too_long(void **s)
{
    (void)s;
    char id[SF_CLIENT_MAX_JOB_ID_LEN + 2];
    memset(id, 'j', sizeof id - 1);
    id[sizeof id - 1] = '\0';
    sf_client_options o = base();
    o.job_id = id;
    expect_open_einval(&o);
}

static void open_rank_ge_world(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.rank = 4;
    o.world_size = 4;
    expect_open_einval(&o);
}
static void open_world_zero(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.world_size = 0;
    expect_open_einval(&o);
}
static void open_world_too_big(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.world_size = SF_CLIENT_MAX_WORLD_SIZE + 1;
    expect_open_einval(&o);
}
static void open_rank_below_minus_one(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.rank = -2;
    expect_open_einval(&o);
}

static void open_env_rank_malformed(void **s)
{
    (void)s;
    setenv("RANK", "3x", 1);
    sf_client_options o = base();
    expect_open_einval(&o);
    unsetenv("RANK");
}

static void open_socket_empty(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.socket_path = "";
    expect_open_einval(&o);
}

static void open_socket_too_long(void **s)
{
    (void)s;
    char p[200];
    memset(p, 'p', sizeof p - 1);
    p[sizeof p - 1] = '\0';
    sf_client_options o = base();
    o.socket_path = p;
    expect_open_einval(&o);
}

static void open_role_too_long(void **s)
{
    (void)s;
    char r[SF_CLIENT_MAX_ROLE_LEN + 2];
    memset(r, 'r', sizeof r - 1);
    r[sizeof r - 1] = '\0';
    sf_client_options o = base();
    o.role = r;
    expect_open_einval(&o);
}

static const char *const two[] = {"a", "rest"};
static void open_one_stage(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.stage_names = two;
    o.n_stages = 1;
    expect_open_einval(&o);
}

static void open_too_many_stages(void **s)
{
    (void)s;
    char buf[SF_CLIENT_MAX_STAGES + 1][8];
    const char *names[SF_CLIENT_MAX_STAGES + 1];
    for (int i = 0; i <= SF_CLIENT_MAX_STAGES; i++) {
        snprintf(buf[i], sizeof buf[i], "s%d", i);
        names[i] = buf[i];
    }
    sf_client_options o = base();
    o.stage_names = names;
    o.n_stages = SF_CLIENT_MAX_STAGES + 1;
    expect_open_einval(&o);
}

static void open_duplicate_stage(void **s)
{
    (void)s;
    static const char *const dup[] = {"a", "a", "rest"};
    sf_client_options o = base();
    o.stage_names = dup;
    o.n_stages = 3;
    expect_open_einval(&o);
}

static void open_stage_name_space(void **s)
{
    (void)s;
    static const char *const bad[] = {"a b", "rest"};
    sf_client_options o = base();
    o.stage_names = bad;
    o.n_stages = 2;
    expect_open_einval(&o);
}

static void open_stage_name_null(void **s)
{
    (void)s;
    static const char *const bad[] = {NULL, "rest"};
    sf_client_options o = base();
    o.stage_names = bad;
    o.n_stages = 2;
    expect_open_einval(&o);
}

static void open_stage_name_too_long(void **s)
{
    (void)s;
    char n[SF_CLIENT_MAX_NAME_LEN + 2];
    memset(n, 'n', sizeof n - 1);
    n[sizeof n - 1] = '\0';
    const char *names[] = {n, "rest"};
    sf_client_options o = base();
    o.stage_names = names;
    o.n_stages = 2;
    expect_open_einval(&o);
}

static void open_bad_group(void **s)
{
    (void)s;
    static const char *const groups[] = {"g,1", ""};
    sf_client_options o = base();
    o.stage_names = two;
    o.stage_groups = groups;
    o.n_stages = 2;
    expect_open_einval(&o);
}

static void open_groups_without_names(void **s)
{
    (void)s;
    static const char *const groups[] = {"g", "h"};
    sf_client_options o = base();
    o.stage_groups = groups;
    o.n_stages = 2;
    expect_open_einval(&o);
}

static void open_accumulation_too_big(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.accumulation = SF_CLIENT_MAX_ACCUMULATION + 1;
    expect_open_einval(&o);
}
/* 3K + 3 default stages must fit in 64. */
static void open_accumulation_too_many_stages(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.accumulation = 21;
    expect_open_einval(&o);
}
static void open_buffer_too_big(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.buffer_records = SF_CLIENT_MAX_BUFFER + 1;
    expect_open_einval(&o);
}
static void open_batch_too_big(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.batch_records = SF_CLIENT_MAX_BATCH + 1;
    expect_open_einval(&o);
}
static void open_fraction_negative(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.event_sample_fraction = -0.1;
    expect_open_einval(&o);
}
static void open_fraction_above_one(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.event_sample_fraction = 1.5;
    expect_open_einval(&o);
}
static void open_fraction_nan(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.event_sample_fraction = NAN;
    expect_open_einval(&o);
}
/* Synchronizing stages: unknown, the residual, a NULL list with a count. */
static const char *const sync_unknown[] = {"no.such_stage"};
static const char *const sync_residual[] = {"step.other_cpu_wall"};
static void open_sync_unknown(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.sync_stages = sync_unknown;
    o.n_sync_stages = 1;
    expect_open_einval(&o);
}
static void open_sync_residual(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.sync_stages = sync_residual;
    o.n_sync_stages = 1;
    expect_open_einval(&o);
}
static void open_sync_null_list(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.n_sync_stages = 1;
    expect_open_einval(&o);
}

static void open_env_fraction_malformed(void **s)
{
    (void)s;
    setenv("SF_EVENT_SAMPLE", "half", 1);
    sf_client_options o = base();
    expect_open_einval(&o);
    unsetenv("SF_EVENT_SAMPLE");
}

/* The flush interval is 1..SF_CLIENT_MAX_FLUSH_MS, from the option or the
 * environment; the bounds themselves open. */
static void open_flush_bounds(void **s)
{
    (void)s;
    sf_client_options o = base();
    sf_client *c = NULL;
    o.flush_ms = 0;
    expect_open_einval(&o);
    o.flush_ms = SF_CLIENT_MAX_FLUSH_MS + 1;
    expect_open_einval(&o);
    o.flush_ms = SF_CLIENT_MAX_FLUSH_MS;
    assert_int_equal(sf_client_open(&o, &c), 0);
    sf_client_close(c);
    o.flush_ms = -1;
    setenv("SF_FLUSH_MS", "1", 1);
    assert_int_equal(sf_client_open(&o, &c), 0);
    sf_client_close(c);
    setenv("SF_FLUSH_MS", "10ms", 1);
    expect_open_einval(&o);
    setenv("SF_FLUSH_MS", "0", 1);
    expect_open_einval(&o);
    unsetenv("SF_FLUSH_MS");
}

/* A NULL client is refused by every function; close accepts it. */
static void step_begin_null(void **s)
{
    (void)s;
    assert_int_equal(sf_step_begin(NULL, 0), -EINVAL);
}
static void step_end_null(void **s)
{
    (void)s;
    assert_int_equal(sf_step_end(NULL), -EINVAL);
}
static void stage_begin_null(void **s)
{
    (void)s;
    assert_int_equal(sf_stage_begin(NULL, 0), -EINVAL);
}
static void stage_end_null(void **s)
{
    (void)s;
    assert_int_equal(sf_stage_end(NULL, 0), -EINVAL);
}
static void charge_null(void **s)
{
    (void)s;
    assert_int_equal(sf_charge_data_wait(NULL, 0, 1), -EINVAL);
}
static void probe_begin_null(void **s)
{
    (void)s;
    assert_int_equal(sf_probe_begin(NULL, "p"), -EINVAL);
}
static void probe_end_null(void **s)
{
    (void)s;
    assert_int_equal(sf_probe_end(NULL, "p"), -EINVAL);
}
static void flush_null(void **s)
{
    (void)s;
    assert_int_equal(sf_client_flush(NULL), -EINVAL);
}
static void stats_null_client(void **s)
{
    (void)s;
    sf_client_stats st;
    assert_int_equal(sf_client_get_stats(NULL, &st), -EINVAL);
}
static void stage_id_null_client(void **s)
{
    (void)s;
    assert_int_equal(sf_stage_id(NULL, "data.next_wait"), -EINVAL);
}
static void stage_count_null(void **s)
{
    (void)s;
    assert_int_equal(sf_stage_count(NULL), -EINVAL);
}
static void close_null(void **s)
{
    (void)s;
    sf_client_close(NULL);
}

static void stats_null_ret(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_client_get_stats(c, NULL), -EINVAL);
    sf_client_close(c);
}
static void stage_id_null_name(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_stage_id(c, NULL), -EINVAL);
    sf_client_close(c);
}
static void stage_id_unknown(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_stage_id(c, "nope"), -ENOENT);
    sf_client_close(c);
}
static void charge_negative_step(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_charge_data_wait(c, -1, 5), -EINVAL);
    sf_client_close(c);
}
static void charge_negative_ns(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_charge_data_wait(c, 0, -5), -EINVAL);
    sf_client_close(c);
}
static void probe_begin_null_name(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_probe_begin(c, NULL), -EINVAL);
    sf_client_close(c);
}
static void probe_end_null_name(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_probe_end(c, NULL), -EINVAL);
    sf_client_close(c);
}
static void charge_too_long(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_charge_data_wait(c, 0, (INT64_C(1) << 42) + 1), -EINVAL);
    sf_client_close(c);
}
static void probe_empty_name(void **s)
{
    (void)s;
    sf_client *c = open_ok();
    assert_int_equal(sf_probe_begin(c, ""), -EINVAL);
    sf_client_close(c);
}

static void probe_name_too_long(void **s)
{
    (void)s;
    char n[SF_CLIENT_MAX_NAME_LEN + 2];
    memset(n, 'n', sizeof n - 1);
    n[sizeof n - 1] = '\0';
    sf_client *c = open_ok();
    assert_int_equal(sf_probe_begin(c, n), -EINVAL);
    sf_client_close(c);
}

static void check_disabled(sf_client *c)
{
    assert_int_equal(sf_step_end(c), 0); /* misuse, yet 0 */
    assert_int_equal(sf_stage_begin(c, 99), 0);
    assert_int_equal(sf_step_begin(c, 0), 0);
    assert_int_equal(sf_step_begin(c, 1), 0);
    assert_int_equal(sf_stage_begin(c, 0), 0);
    assert_int_equal(sf_stage_begin(c, 1), 0);
    assert_int_equal(sf_stage_end(c, 0), 0);
    assert_int_equal(sf_charge_data_wait(c, 1000, 5), 0);
    assert_int_equal(sf_probe_end(c, "never-begun"), 0);
    assert_int_equal(sf_step_end(c), 0);
    assert_int_equal(sf_client_flush(c), 0);
    sf_client_stats st;
    assert_int_equal(sf_client_get_stats(c, &st), 0);
    assert_int_equal(st.steps, 0);
    assert_int_equal(st.violations, 0);
    assert_int_equal(st.send_syscalls, 0);
    assert_int_equal(st.connects, 0);
    sf_client_close(c);
}

static void disabled_option(void **s)
{
    (void)s;
    sf_client_options o;
    sf_client_options_init(&o); /* no job id: disabled wins anyway */
    o.disabled = 1;
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    check_disabled(c);
}

static void disabled_env(void **s)
{
    (void)s;
    setenv("SF_DISABLE", "1", 1);
    sf_client *c = NULL;
    assert_int_equal(sf_client_open_env(&c), 0);
    unsetenv("SF_DISABLE");
    check_disabled(c);
}

static void env_resolution(void **s)
{
    (void)s;
    setenv("TORCHELASTIC_RUN_ID", "te-run", 1);
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "8", 1);
    sf_client *c = NULL;
    assert_int_equal(sf_client_open_env(&c), 0);
    sf_client_close(c);
    setenv("RANK", "8", 1); /* rank == world size */
    assert_int_equal(sf_client_open_env(&c), -EINVAL);
    env_setup(NULL);
}

/* Parallel coordinates: SF_PARALLEL parsed strictly, the option's struct
 * checked the same way, both against the world size. */
static void open_parallel_env(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.rank = 3;
    o.world_size = 4;
    sf_client *c = NULL;
    setenv("SF_PARALLEL", "pp=1/2,dp=1/2,schedule=1f1b", 1);
    assert_int_equal(sf_client_open(&o, &c), 0);
    sf_client_close(c);
    static const char *const bad[] = {"pp=1/2,,dp=1/2", "pp=1/2,pp=1/2", "pp=2/2,dp=0/2",
                                      "pp=1/2,dp=1/4" /* 8 ranks in a world of 4 */};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("SF_PARALLEL", bad[i], 1);
        expect_open_einval(&o);
    }
    setenv("SF_PARALLEL", "", 1); /* empty: none */
    assert_int_equal(sf_client_open(&o, &c), 0);
    sf_client_close(c);
    unsetenv("SF_PARALLEL");
}

static void open_parallel_option(void **s)
{
    (void)s;
    sf_client_options o = base();
    o.rank = 0;
    o.world_size = 4;
    sf_parallel p;
    assert_int_equal(sf_parallel_parse("tp=0/2,dp=1/2", &p, NULL, 0), 0);
    o.parallel = &p;
    setenv("SF_PARALLEL", "garbage", 1); /* the option wins */
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    sf_client_close(c);
    unsetenv("SF_PARALLEL");
    p.index[SF_PAR_DP] = 2; /* out of range, filled by hand */
    expect_open_einval(&o);
    p.index[SF_PAR_DP] = 1;
    o.world_size = 8; /* 2 x 2 does not tile 8 */
    expect_open_einval(&o);
}

#define T(f) cmocka_unit_test_setup(f, env_setup)
int main(void)
{
    const struct CMUnitTest tests[] = {
        T(open_null_opts),
        T(open_null_ret),
        T(open_env_null_ret),
        T(open_no_job_id),
        T(open_bad_job_id_chars),
        T(open_job_id_too_long),
        T(open_rank_ge_world),
        T(open_world_zero),
        T(open_world_too_big),
        T(open_rank_below_minus_one),
        T(open_env_rank_malformed),
        T(open_socket_empty),
        T(open_socket_too_long),
        T(open_role_too_long),
        T(open_parallel_env),
        T(open_parallel_option),
        T(open_one_stage),
        T(open_too_many_stages),
        T(open_duplicate_stage),
        T(open_stage_name_space),
        T(open_stage_name_null),
        T(open_stage_name_too_long),
        T(open_bad_group),
        T(open_groups_without_names),
        T(open_accumulation_too_big),
        T(open_accumulation_too_many_stages),
        T(open_buffer_too_big),
        T(open_batch_too_big),
        T(open_fraction_negative),
        T(open_fraction_above_one),
        T(open_fraction_nan),
        T(open_sync_unknown),
        T(open_sync_residual),
        T(open_sync_null_list),
        T(open_env_fraction_malformed),
        T(open_flush_bounds),
        T(step_begin_null),
        T(step_end_null),
        T(stage_begin_null),
        T(stage_end_null),
        T(charge_null),
        T(probe_begin_null),
        T(probe_end_null),
        T(flush_null),
        T(stats_null_client),
        T(stage_id_null_client),
        T(stage_count_null),
        T(close_null),
        T(stats_null_ret),
        T(stage_id_null_name),
        T(stage_id_unknown),
        T(charge_negative_step),
        T(charge_negative_ns),
        T(probe_begin_null_name),
        T(probe_end_null_name),
        T(charge_too_long),
        T(probe_empty_name),
        T(probe_name_too_long),
        T(disabled_option),
        T(disabled_env),
        T(env_resolution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

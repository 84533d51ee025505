/*
 * Unit tests of the helpers the live sfctl commands share (sfctl_live.c):
 * reading an answer's fields, the integer parser and the usage error of
 * their arguments, sfctl_show's arguments, and sfctl_ask without a daemon.
 * No sfd runs here; the commands' output against a real sfd is tested by
 * the sfd_* scripts.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sfctl.h"
#include "sfctl_live.h"

static void test_json_fields(void **state)
{
    (void)state;
    json_t *o =
        json_pack("{s:I, s:s, s:n, s:f}", "n", (json_int_t)-7000000000LL, "s", "ok", "z", "x", 1.5);
    assert_non_null(o);
    assert_int_equal(sfctl_json_int(o, "n"), -7000000000LL);
    assert_int_equal(sfctl_json_int(o, "missing"), 0);
    assert_int_equal(sfctl_json_int(o, "s"), 0); /* a string is not a number */
    assert_int_equal(sfctl_json_int(o, "x"), 0); /* nor is a real */
    assert_string_equal(sfctl_json_str(o, "s"), "ok");
    assert_string_equal(sfctl_json_str(o, "missing"), "-");
    assert_string_equal(sfctl_json_str(o, "z"), "-");
    assert_string_equal(sfctl_json_str(o, "n"), "-");
    /* a field of an absent object: the answer lacked the whole object */
    assert_int_equal(sfctl_json_int(json_object_get(o, "none"), "n"), 0);
    assert_string_equal(sfctl_json_str(NULL, "s"), "-");
    json_decref(o);
}

static void test_parse_i64(void **state)
{
    (void)state;
    int64_t v = 99;
    assert_int_equal(sfctl_parse_i64("0", 0, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(sfctl_parse_i64("9223372036854775807", 0, &v), 0);
    assert_int_equal(v, INT64_MAX);
    assert_int_equal(sfctl_parse_i64("10", 10, &v), 0);
    assert_int_equal(v, 10);
    v = 99;
    const char *bad[] = {"", "x", "12x", "1.5", "9", "-1", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(sfctl_parse_i64(bad[i], 10, &v), -EINVAL);
        assert_int_equal(v, 99); /* untouched on failure */
    }
}

/* What fn wrote to stderr while it ran, into buf. */
static void capture_stderr(void (*fn)(void), char *buf, size_t len)
{
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    assert_true(saved >= 0 && dup2(fileno(tmp), STDERR_FILENO) >= 0);
    fn();
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, len - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
}

static int usage_ret;

static void usage_with_reason(void)
{
    usage_ret = sfctl_usage_error("capture", "JOB [--json]", "--steps takes 1..100");
}

static void usage_alone(void)
{
    usage_ret = sfctl_usage_error("ranks", "JOB [--json]", NULL);
}

static void test_usage_error(void **state)
{
    (void)state;
    char buf[256];
    capture_stderr(usage_with_reason, buf, sizeof buf);
    assert_int_equal(usage_ret, SFCTL_EXIT_USAGE);
    assert_string_equal(buf, "sfctl capture: --steps takes 1..100\n"
                             "usage: sfctl capture JOB [--json]\n");
    capture_stderr(usage_alone, buf, sizeof buf);
    assert_int_equal(usage_ret, SFCTL_EXIT_USAGE);
    assert_string_equal(buf, "usage: sfctl ranks JOB [--json]\n");
}

/* The socket path names nothing: a private directory with no socket in it. */
static char no_daemon_dir[] = "/tmp/sfctl_unit_XXXXXX";

static int no_daemon_setup(void **state)
{
    (void)state;
    static char path[64];
    if (mkdtemp(no_daemon_dir) == NULL)
        return -1;
    snprintf(path, sizeof path, "%s/absent.sock", no_daemon_dir);
    sfctl_set_socket_path(path);
    return 0;
}

static int no_daemon_teardown(void **state)
{
    (void)state;
    return rmdir(no_daemon_dir);
}

/* No daemon at the socket: the exit code says so, the outputs stay unset. */
static void test_ask_without_daemon(void **state)
{
    (void)state;
    struct sfctl_request req = {.kind = SFCTL_Q_STATUS, .window = -1};
    json_t *o = (json_t *)&req; /* any non-NULL marker */
    char *text = no_daemon_dir;
    assert_int_equal(sfctl_ask(&req, &o, &text), SFCTL_EXIT_NO_DAEMON);
    assert_ptr_equal(o, (json_t *)&req);
    assert_ptr_equal(text, no_daemon_dir);
}

static int shown;

static int count_show(json_t *answer, const char *job)
{
    (void)answer;
    (void)job;
    shown++;
    return SFCTL_EXIT_OK;
}

static int show(bool takes_job, const char *a1, const char *a2)
{
    char *argv[] = {"cmd", (char *)a1, (char *)a2, NULL};
    int argc = a1 == NULL ? 1 : a2 == NULL ? 2 : 3;
    return sfctl_show(argc, argv, "USAGE", takes_job, SFCTL_Q_STATUS, count_show);
}

/* A command takes its one JOB exactly when it says so; anything else is a
 * usage error before any query. With the arguments right, the query runs
 * (and finds no daemon here). */
/* The one-line form of a live verdict: a rank's own work or arrival names
 * the stage and the sync point it holds up; a verdict on the issue lag says
 * that the rank is late to communicate there. */
static void test_verdict_line(void **state)
{
    (void)state;
    char line[256];
    json_t *v = json_loads("{\"kind\": \"straggler\", \"rank\": 2, \"stage\": \"fwd\", "
                           "\"sync_stage\": \"bwd\", \"since_step\": 62, \"effect_s\": 0.0012, "
                           "\"evidence\": {\"test\": \"own_work\"}}",
                           0, NULL);
    assert_non_null(v);
    sfctl_verdict_line(v, line, sizeof line);
    assert_string_equal(line,
                        "straggler: rank 2 in fwd, holding up bwd, since step 62, +0.0012 s/step");
    json_object_set_new(json_object_get(v, "evidence"), "test", json_string("communication"));
    json_object_set_new(v, "stage", json_string("bwd"));
    sfctl_verdict_line(v, line, sizeof line);
    assert_string_equal(
        line, "straggler: rank 2 late to communicate in bwd, since step 62, +0.0012 s/step");
    json_decref(v);
    sfctl_verdict_line(NULL, line, sizeof line);
    assert_string_equal(line, "none");
}

static void test_show_arguments(void **state)
{
    (void)state;
    assert_int_equal(show(false, "job", NULL), SFCTL_EXIT_USAGE);
    assert_int_equal(show(true, NULL, NULL), SFCTL_EXIT_USAGE);
    assert_int_equal(show(true, "--json", NULL), SFCTL_EXIT_USAGE);
    assert_int_equal(show(true, "a", "b"), SFCTL_EXIT_USAGE);
    assert_int_equal(show(false, "--bogus", NULL), SFCTL_EXIT_USAGE);
    assert_int_equal(show(false, NULL, NULL), SFCTL_EXIT_NO_DAEMON);
    assert_int_equal(show(false, "--json", NULL), SFCTL_EXIT_NO_DAEMON);
    assert_int_equal(show(true, "job", "--json"), SFCTL_EXIT_NO_DAEMON);
    assert_int_equal(shown, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_fields),    cmocka_unit_test(test_parse_i64),
        cmocka_unit_test(test_usage_error),    cmocka_unit_test(test_ask_without_daemon),
        cmocka_unit_test(test_show_arguments), cmocka_unit_test(test_verdict_line),
    };
    return cmocka_run_group_tests(tests, no_daemon_setup, no_daemon_teardown);
}

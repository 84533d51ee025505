/*
 * cmocka tests of sfd's Prometheus textfile export: the file passes
 * `promtool check metrics`, carries the report's figures, keeps every metric
 * family's label set across windows, escapes hostile job ids, and replaces
 * the file atomically (checked with inotify and with a forced write failure).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "prom_export.h"
#include "prom_fixture.h"

#define FILE_NAME "stagefrontier.prom"

/* ---- helpers ------------------------------------------------------------- */

static char *make_dir(void)
{
    const char *base = getenv("TMPDIR");
    char *path = NULL;

    assert_true(asprintf(&path, "%s/sfprom.XXXXXX", base && base[0] ? base : "/tmp") > 0);
    assert_non_null(mkdtemp(path));
    return path;
}

static void remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char *p;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        assert_true(asprintf(&p, "%s/%s", dir, e->d_name) > 0);
        unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
    free(dir);
}

/* Names in dir other than . and .., joined by '/'. */
static char *list_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char *out = strdup("");

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char *n;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        assert_true(asprintf(&n, "%s%s/", out, e->d_name) > 0);
        free(out);
        out = n;
    }
    closedir(d);
    return out;
}

static char *read_export(const char *dir)
{
    char *path, *buf = NULL;
    size_t len = 0;
    FILE *f, *m = open_memstream(&buf, &len);
    int c;

    assert_true(asprintf(&path, "%s/" FILE_NAME, dir) > 0);
    f = fopen(path, "re");
    assert_non_null(f);
    while ((c = fgetc(f)) != EOF)
        fputc(c, m);
    fclose(f);
    fclose(m);
    free(path);
    return buf;
}

/* Runs promtool on the export; returns its exit status (0: valid and lint
 * clean), printing its complaints. Skips when promtool is not installed. */
static int promtool_check(const char *dir)
{
    char *cmd;
    int st;

    if (PROMTOOL[0] == '\0')
        skip();
    assert_true(asprintf(&cmd, "'%s' check metrics < '%s/" FILE_NAME "' 1>&2", PROMTOOL, dir) > 0);
    st = system(cmd);
    free(cmd);
    assert_true(st != -1 && WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* The value of the sample `name` + `labels` (rendered text, "" for none);
 * fails the test when the sample is absent. */
static double sample(const char *text, const char *name, const char *labels)
{
    char *needle, *at, *end;
    double v;

    assert_true(asprintf(&needle, "\n%s%s ", name, labels) > 0);
    at = strstr(text, needle);
    if (at == NULL)
        fail_msg("sample %s%s missing from:\n%s", name, labels, text);
    at += strlen(needle);
    v = strtod(at, &end);
    assert_true(end > at && *end == '\n');
    free(needle);
    return v;
}

static bool has_sample(const char *text, const char *name, const char *labels)
{
    char *needle;
    bool found;

    assert_true(asprintf(&needle, "\n%s%s ", name, labels) > 0);
    found = strstr(text, needle) != NULL;
    free(needle);
    return found;
}

/* sfd_prom_write with fixed daemon counters, so the tests of the job
 * families can say only what they are about. */
static const struct sf_prom_reject test_rejected[] = {
    {"duplicate_rank", 2},
    {"late_record", 0},
    {"uid_mismatch", 1},
};

static int prom_write(const char *dir, const struct sf_prom_job *jobs, size_t n, const char *role,
                      uint64_t term)
{
    struct sf_prom_daemon d = {
        .version = "9.8.7",
        .role = role,
        .term = term,
        .records = 1234,
        .batches = 77,
        .dropped = 5,
        .windows_closed = 8,
        .connections = 3,
        .connections_accepted = 17,
        .rejected = test_rejected,
        .n_rejected = 3,
    };
    return sfd_prom_write(dir, &d, jobs, n);
}

/* The text of sample `name` + `labels`'s value, up to the newline. */
static char *sample_text(const char *text, const char *name, const char *labels)
{
    char *needle, *at;

    assert_true(asprintf(&needle, "\n%s%s ", name, labels) > 0);
    at = strstr(text, needle);
    if (at == NULL)
        fail_msg("sample %s%s missing", name, labels);
    at += strlen(needle);
    free(needle);
    return strndup(at, strcspn(at, "\n"));
}

/* A float is printed as the shortest decimal that reads back as itself. */
static void assert_shortest(const char *printed)
{
    char shortest[40];
    double v = strtod(printed, NULL);

    for (int prec = 1; prec <= 17; prec++) {
        snprintf(shortest, sizeof shortest, "%.*g", prec, v);
        if (strtod(shortest, NULL) == v)
            break;
    }
    if (strcmp(printed, shortest) != 0)
        fail_msg("%s is not the shortest round trip %s", printed, shortest);
}

/* ---- family consistency ---------------------------------------------------- */

#define MAX_FAMILIES 64

struct family_seen {
    char name[128];
    char keys[256]; /* label keys in order, comma separated */
};

struct family_table {
    struct family_seen f[MAX_FAMILIES];
    size_t n;
};

/* Label keys of a sample line's {...} part; values may hold escaped quotes. */
static void label_keys(const char *p, char *keys, size_t cap)
{
    size_t o = 0;

    keys[0] = '\0';
    if (*p != '{')
        return;
    p++;
    while (*p && *p != '}') {
        const char *eq = strchr(p, '=');
        assert_non_null(eq);
        assert_true(eq[1] == '"');
        o += (size_t)snprintf(keys + o, cap - o, "%s%.*s", o ? "," : "", (int)(eq - p), p);
        assert_true(o < cap);
        p = eq + 2;
        while (*p && *p != '"')
            p += (*p == '\\' && p[1]) ? 2 : 1;
        assert_int_equal(*p, '"');
        p++;
        if (*p == ',')
            p++;
    }
    assert_int_equal(*p, '}');
}

/* Every sample's family has one label-key list, in this file and in every
 * file checked before with the same table; HELP and TYPE come once each,
 * before the family's first sample. */
static void check_families(const char *text, struct family_table *t)
{
    char *copy = strdup(text), *save = NULL;
    char seen_help[MAX_FAMILIES] = {0}, seen_type[MAX_FAMILIES] = {0};

    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[128], keys[256];
        size_t len, i;
        bool help = !strncmp(line, "# HELP ", 7), type = !strncmp(line, "# TYPE ", 7);
        const char *p = help || type ? line + 7 : line;

        assert_true(line[0] != '#' || help || type);
        len = strcspn(p, help || type ? " " : "{ ");
        assert_true(len > 0 && len < sizeof name);
        memcpy(name, p, len);
        name[len] = '\0';
        for (i = 0; i < t->n && strcmp(t->f[i].name, name); i++)
            ;
        if (help || type) {
            if (i == t->n) {
                assert_true(t->n < MAX_FAMILIES);
                snprintf(t->f[t->n].name, sizeof t->f[0].name, "%s", name);
                t->f[t->n].keys[0] = '\x01'; /* no sample yet */
                t->n++;
            }
            char *flag = help ? &seen_help[i] : &seen_type[i];
            assert_int_equal(*flag, 0);
            *flag = 1;
            continue;
        }
        assert_true(i < t->n);
        if (!seen_help[i] || !seen_type[i])
            fail_msg("%s: sample before HELP/TYPE", name);
        label_keys(p + len, keys, sizeof keys);
        if (t->f[i].keys[0] == '\x01')
            snprintf(t->f[i].keys, sizeof t->f[i].keys, "%s", keys);
        else if (strcmp(t->f[i].keys, keys))
            fail_msg("%s: label keys {%s} after {%s}", name, keys, t->f[i].keys);
    }
    free(copy);
}

/* ---- tests ----------------------------------------------------------------- */

/* The verdict's rank and lateness per job; nothing for a job without one. */
static void test_straggler(void **state)
{
    (void)state;
    char *dir = make_dir(), *text, *labels;
    sf_report *rep = NULL, *clean = NULL;

    assert_int_equal(fixture_report(3, 0, 20000000, &rep), 0);
    assert_int_equal(fixture_report(3, 0, 20000000, &clean), 0);
    clean->straggler.present = false;
    rep->straggler = (sf_straggler){.present = true,
                                    .rank = 2,
                                    .sync_stage = 1,
                                    .origin_stage = 0,
                                    .arrived_last_steps = 9,
                                    .eligible_steps = 10,
                                    .median_lateness_ns = 14200000,
                                    .persistence = SF_PERSIST_FIXED,
                                    .windows_in_a_row = 3};
    struct sf_prom_job jobs[] = {{.job_id = "slow", .latest = rep},
                                 {.job_id = "clean", .latest = clean}};
    assert_int_equal(prom_write(dir, jobs, 2, "standalone", 1), 0);
    assert_int_equal(promtool_check(dir), 0);
    text = read_export(dir);
    assert_true(asprintf(&labels,
                         "{job_id=\"slow\",rank=\"2\",sync_stage=\"%s\",origin_stage=\"%s\","
                         "persistence=\"fixed\"}",
                         fixture_names[1], fixture_names[0]) > 0);
    assert_true(sample(text, "stagefrontier_job_straggler_info", labels) == 1);
    assert_false(has_sample(text, "stagefrontier_job_straggler_info", "{job_id=\"clean\""));
    assert_true(fabs(sample(text, "stagefrontier_job_straggler_lateness_seconds",
                            "{job_id=\"slow\",rank=\"2\"}") -
                     0.0142) < 1e-12);
    assert_false(has_sample(text, "stagefrontier_job_straggler_lateness_seconds",
                            "{job_id=\"clean\",rank=\"2\"}"));
    free(labels);
    free(text);
    sf_report_free(rep);
    sf_report_free(clean);
    remove_dir(dir);
}

/* Captures by trigger and state, every series from zero, and the latest
 * capture's time only for a job that has one. */
/* The job's state as one series per state, the ranks' info with only the
 * labels known (an escaped host), and the time of the write. */
static void test_state_and_rank_info(void **state)
{
    (void)state;
    char *dir = make_dir(), *text;
    static const uint32_t ranks[] = {0, 7};
    static const int64_t seen[] = {INT64_C(1700000000100), INT64_C(1700000000200)};
    static const struct sf_prom_rank_info info[] = {{"node\"a", "GPU-5e1c", 0}, {"", "", -1}};
    struct sf_prom_job jobs[] = {
        {.job_id = "run",
         .state = SF_PROM_JOB_RUNNING,
         .n_ranks = 2,
         .ranks = ranks,
         .last_seen_unix_ms = seen,
         .rank_info = info},
        {.job_id = "hang", .state = SF_PROM_JOB_STALLED},
        {.job_id = "done", .state = SF_PROM_JOB_ENDED},
    };
    struct sf_prom_daemon d = {.version = "1", .write_unix_ms = INT64_C(1700000000500)};
    static const char *const states[] = {"running", "stalled", "ended"};

    assert_int_equal(sfd_prom_write(dir, &d, jobs, 3), 0);
    assert_int_equal(promtool_check(dir), 0);
    text = read_export(dir);
    for (size_t j = 0; j < 3; j++)
        for (int st = 0; st < 3; st++) {
            char *labels;
            assert_true(
                asprintf(&labels, "{job_id=\"%s\",state=\"%s\"}", jobs[j].job_id, states[st]) > 0);
            assert_true(sample(text, "stagefrontier_job_state", labels) == ((int)j == st));
            free(labels);
        }
    assert_true(sample(text, "stagefrontier_job_stalled", "{job_id=\"hang\"}") == 1);
    assert_true(sample(text, "stagefrontier_job_stalled", "{job_id=\"done\"}") == 0);
    assert_true(sample(text, "stagefrontier_rank_info",
                       "{job_id=\"run\",rank=\"0\",host=\"node\\\"a\",local_rank=\"0\","
                       "gpu=\"GPU-5e1c\"}") == 1);
    assert_true(sample(text, "stagefrontier_rank_info",
                       "{job_id=\"run\",rank=\"7\",host=\"\",local_rank=\"\",gpu=\"\"}") == 1);
    assert_true(fabs(sample(text, "stagefrontier_textfile_write_timestamp_seconds", "") -
                     1700000000.5) < 1e-6);
    free(text);
    remove_dir(dir);
}

static void test_captures(void **state)
{
    (void)state;
    char *dir = make_dir(), *text;
    struct sf_prom_job jobs[] = {{.job_id = "cap"}, {.job_id = "none"}};

    jobs[0].captures_started[SF_PROM_TRIGGER_OPERATOR] = 3;
    jobs[0].captures_started[SF_PROM_TRIGGER_AUTO] = 2;
    jobs[0].captures_done[SF_PROM_TRIGGER_OPERATOR] = 2;
    jobs[0].captures_failed[SF_PROM_TRIGGER_OPERATOR] = 1;
    jobs[0].captures_done[SF_PROM_TRIGGER_AUTO] = 1;
    jobs[0].last_capture_unix_ms = INT64_C(1700000000250);
    assert_int_equal(prom_write(dir, jobs, 2, "standalone", 1), 0);
    assert_int_equal(promtool_check(dir), 0);
    text = read_export(dir);
    assert_true(sample(text, "stagefrontier_job_captures_started_total",
                       "{job_id=\"cap\",trigger=\"operator\"}") == 3);
    assert_true(sample(text, "stagefrontier_job_captures_started_total",
                       "{job_id=\"cap\",trigger=\"auto\"}") == 2);
    assert_true(sample(text, "stagefrontier_job_captures_total",
                       "{job_id=\"cap\",trigger=\"operator\",state=\"done\"}") == 2);
    assert_true(sample(text, "stagefrontier_job_captures_total",
                       "{job_id=\"cap\",trigger=\"operator\",state=\"failed\"}") == 1);
    assert_true(sample(text, "stagefrontier_job_captures_total",
                       "{job_id=\"cap\",trigger=\"auto\",state=\"done\"}") == 1);
    assert_true(sample(text, "stagefrontier_job_captures_total",
                       "{job_id=\"none\",trigger=\"auto\",state=\"failed\"}") == 0);
    assert_true(
        fabs(sample(text, "stagefrontier_job_last_capture_timestamp_seconds", "{job_id=\"cap\"}") -
             1700000000.25) < 1e-6);
    assert_false(
        has_sample(text, "stagefrontier_job_last_capture_timestamp_seconds", "{job_id=\"none\"}"));
    free(text);
    remove_dir(dir);
}

static void test_report_figures(void **state)
{
    (void)state;
    char *dir = make_dir(), *text;
    sf_report *rep = NULL;
    double sum = 0;
    struct stat st;
    char *path;

    assert_int_equal(fixture_report(3, 0, 20000000, &rep), 0);
    struct sf_prom_job jobs[] = {
        {.job_id = "train-a",
         .latest = rep,
         .dropped = 11,
         .rejected = 4,
         .window_unix_ms = INT64_C(1700000000250)},
        {.job_id = "idle", .latest = NULL, .dropped = 0, .rejected = 9},
    };
    assert_int_equal(prom_write(dir, jobs, 2, "standalone", 7), 0);
    assert_int_equal(promtool_check(dir), 0);
    text = read_export(dir);

    assert_true(sample(text, "stagefrontier_daemon_role_info", "{role=\"standalone\"}") == 1);
    assert_true(sample(text, "stagefrontier_daemon_term", "") == 7);
    assert_true(sample(text, "stagefrontier_build_info", "{version=\"9.8.7\"}") == 1);
    assert_true(sample(text, "stagefrontier_daemon_records_total", "") == 1234);
    assert_true(sample(text, "stagefrontier_daemon_record_batches_total", "") == 77);
    assert_true(sample(text, "stagefrontier_daemon_dropped_records_total", "") == 5);
    assert_true(sample(text, "stagefrontier_daemon_windows_closed_total", "") == 8);
    assert_true(sample(text, "stagefrontier_daemon_connections", "") == 3);
    assert_true(sample(text, "stagefrontier_daemon_connections_accepted_total", "") == 17);
    assert_true(
        sample(text, "stagefrontier_daemon_rejected_total", "{reason=\"duplicate_rank\"}") == 2);
    /* Every reason is a series from the start, zeros included. */
    assert_true(sample(text, "stagefrontier_daemon_rejected_total", "{reason=\"late_record\"}") ==
                0);
    assert_true(sample(text, "stagefrontier_jobs", "") == 2);
    char *when =
        sample_text(text, "stagefrontier_job_window_timestamp_seconds", "{job_id=\"train-a\"}");
    assert_string_equal(when, "1700000000.25");
    free(when);
    assert_false(
        has_sample(text, "stagefrontier_job_window_timestamp_seconds", "{job_id=\"idle\"}"));
    /* The answer itself: the leader of the routed group and the suspects. */
    const sf_unit_figures *lead = &rep->groups[rep->routing_order[0]];
    assert_true(rep->n_routing > 0 && lead->leader_rank != SF_NO_RANK && rep->n_suspects > 0);
    char leader[64];
    snprintf(leader, sizeof leader, "{job_id=\"train-a\",group=\"data.next_wait\",rank=\"%u\"}",
             lead->leader_rank);
    assert_true(sample(text, "stagefrontier_job_leader_steps", leader) == lead->leader_steps);
    assert_null(strstr(text, "stagefrontier_job_leader_rank"));
    for (uint32_t k = 0; k < rep->n_suspects; k++) {
        char *labels;
        assert_true(asprintf(&labels, "{job_id=\"train-a\",rank=\"%u\"}", rep->suspects[k].rank) >
                    0);
        assert_true(sample(text, "stagefrontier_job_suspect_rank_steps", labels) ==
                    rep->suspects[k].steps);
        free(labels);
    }
    assert_true(sample(text, "stagefrontier_job_window_index", "{job_id=\"train-a\"}") == 3);
    assert_true(sample(text, "stagefrontier_job_window_steps", "{job_id=\"train-a\"}") ==
                rep->steps);
    assert_true(sample(text, "stagefrontier_job_window_ranks", "{job_id=\"train-a\"}") ==
                FIXTURE_RANKS);
    assert_true(sample(text, "stagefrontier_job_dropped_records_total", "{job_id=\"train-a\"}") ==
                11);
    assert_true(sample(text, "stagefrontier_job_rejected_records_total", "{job_id=\"idle\"}") == 9);
    /* A job without a closed window has counters but no window figures. */
    assert_false(has_sample(text, "stagefrontier_job_window_index", "{job_id=\"idle\"}"));

    double exposed = sample(text, "stagefrontier_job_exposed_seconds", "{job_id=\"train-a\"}");
    assert_true(fabs(exposed - (double)rep->exposed_total_ns / 1e9) < 1e-12);
    for (unsigned s = 0; s < FIXTURE_STAGES; s++) {
        char *labels;
        const char *group = fixture_groups[s] ? fixture_groups[s] : fixture_names[s];
        assert_true(asprintf(&labels, "{job_id=\"train-a\",stage=\"%s\",group=\"%s\"}",
                             fixture_names[s], group) > 0);
        double share = sample(text, "stagefrontier_job_stage_ratio", labels);
        assert_true(share == rep->stages[s].share); /* exact: a round trip */
        char *printed = sample_text(text, "stagefrontier_job_stage_ratio", labels);
        assert_shortest(printed);
        free(printed);
        sum += share;
        double adv = sample(text, "stagefrontier_job_stage_advance_seconds", labels);
        assert_true(fabs(adv - (double)rep->stages[s].advance_ns / 1e9) < 1e-12);
        free(labels);
    }
    /* Telescoping: the shares of one window add up to one. */
    assert_true(fabs(sum - 1.0) < 1e-9);
    /* The slow stage leads the routing set. */
    assert_true(sample(text, "stagefrontier_job_routing_info",
                       "{job_id=\"train-a\",position=\"1\",group=\"data.next_wait\"}") == 1);
    assert_true(sample(text, "stagefrontier_job_label_info",
                       "{job_id=\"train-a\",label=\"frontier_accounting\"}") == 1);
    for (unsigned b = 0; b < SF_DG_COUNT; b++) {
        char *labels;
        assert_true(asprintf(&labels, "{job_id=\"train-a\",reason=\"%s\"}",
                             sf_downgrade_name((enum sf_downgrade)b)) > 0);
        assert_int_equal(has_sample(text, "stagefrontier_job_downgrade_info", labels),
                         (rep->downgrades >> b) & 1);
        free(labels);
    }

    /* node_exporter runs as another user: the file must be world readable. */
    assert_true(asprintf(&path, "%s/" FILE_NAME, dir) > 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    free(path);
    free(text);
    sf_report_free(rep);
    remove_dir(dir);
}

static void test_consistent_across_windows(void **state)
{
    (void)state;
    char *dir = make_dir(), *text;
    struct family_table table = {.n = 0};
    sf_report *rep = NULL;

    /* Window 3 routes data; window 4 routes the two-member backward group. */
    for (int w = 0; w < 2; w++) {
        assert_int_equal(fixture_report(3 + w, w ? 2 : 0, w ? 30000000 : 20000000, &rep), 0);
        struct sf_prom_job jobs[] = {
            {.job_id = "train-a", .latest = rep, .dropped = 0, .rejected = 0},
            {.job_id = "train-b", .latest = w ? rep : NULL, .dropped = 3, .rejected = 0},
        };
        assert_int_equal(prom_write(dir, jobs, 2, w ? "root" : "member", 1), 0);
        assert_int_equal(promtool_check(dir), 0);
        text = read_export(dir);
        check_families(text, &table);
        assert_true(sample(text, "stagefrontier_job_window_index", "{job_id=\"train-a\"}") ==
                    3 + w);
        assert_true(sample(text, "stagefrontier_job_routing_info",
                           w ? "{job_id=\"train-a\",position=\"1\",group=\"model.bwd\"}"
                             : "{job_id=\"train-a\",position=\"1\",group=\"data.next_wait\"}") ==
                    1);
        assert_true(sample(text, "stagefrontier_daemon_role_info",
                           w ? "{role=\"root\"}" : "{role=\"member\"}") == 1);
        /* The file is replaced, not appended to. */
        assert_false(has_sample(text, "stagefrontier_daemon_role_info",
                                w ? "{role=\"member\"}" : "{role=\"root\"}"));
        free(text);
        sf_report_free(rep);
        rep = NULL;
    }
    /* Both windows went through the same table: the test checked something. */
    assert_true(table.n >= 15);
    remove_dir(dir);
}

static void test_label_escaping(void **state)
{
    (void)state;
    char *dir = make_dir(), *text, long_id[301], want[300];
    sf_report *rep = NULL;

    memset(long_id, 'z', 300);
    long_id[300] = '\0';
    assert_int_equal(fixture_report(1, 0, 20000000, &rep), 0);
    struct sf_prom_job jobs[] = {
        {.job_id = "a\"b\\c\nd", .latest = rep, .dropped = 1, .rejected = 0},
        {.job_id = "caf\xc3\xa9", .latest = NULL, .dropped = 2, .rejected = 0},
        {.job_id = "x\x01y", .latest = NULL, .dropped = 3, .rejected = 0},
        {.job_id = "bad\xff\xc3", .latest = NULL, .dropped = 4, .rejected = 0},
        {.job_id = "x\x02y", .latest = NULL, .dropped = 5, .rejected = 0}, /* collides with x?y */
        {.job_id = long_id, .latest = NULL, .dropped = 6, .rejected = 0},
        {.job_id = "", .latest = NULL, .dropped = 7, .rejected = 0},
    };
    /* One job left out: its escaped id equals an earlier one. */
    assert_int_equal(prom_write(dir, jobs, 7, "ro\"le\n", 0), 1);
    assert_int_equal(promtool_check(dir), 0);
    text = read_export(dir);

    const char *name = "stagefrontier_job_dropped_records_total";
    assert_true(sample(text, name, "{job_id=\"a\\\"b\\\\c\\nd\"}") == 1);
    assert_true(sample(text, name, "{job_id=\"caf\xc3\xa9\"}") == 2);
    assert_true(sample(text, name, "{job_id=\"x?y\"}") == 3);
    assert_true(sample(text, name, "{job_id=\"bad??\"}") == 4);
    memset(want, 0, sizeof want);
    snprintf(want, sizeof want, "{job_id=\"%.*s\"}", 256, long_id);
    assert_true(sample(text, name, want) == 6);
    assert_true(sample(text, name, "{job_id=\"\"}") == 7);
    assert_true(sample(text, "stagefrontier_jobs", "") == 6);
    assert_true(sample(text, "stagefrontier_daemon_role_info", "{role=\"ro\\\"le\\n\"}") == 1);
    assert_true(sample(text, "stagefrontier_job_window_index", "{job_id=\"a\\\"b\\\\c\\nd\"}") ==
                1);
    free(text);
    sf_report_free(rep);
    remove_dir(dir);
}

/* The final name is only ever the target of a rename: never created, opened
 * or written in place; the temporary names are invisible to the collector. */
static void test_atomic_rename(void **state)
{
    (void)state;
    char *dir = make_dir(), *names;
    char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
    int ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    unsigned moved_to_final = 0, created = 0, moved_from = 0;
    sf_report *rep = NULL;
    ssize_t n;

    assert_true(ifd >= 0);
    assert_true(inotify_add_watch(ifd, dir,
                                  IN_CREATE | IN_OPEN | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM |
                                      IN_MOVED_TO | IN_DELETE) >= 0);
    assert_int_equal(fixture_report(2, 1, 20000000, &rep), 0);
    struct sf_prom_job job = {.job_id = "train-a", .latest = rep, .dropped = 0, .rejected = 0};
    for (uint64_t i = 0; i < 3; i++)
        assert_int_equal(prom_write(dir, &job, 1, "standalone", i), 0);

    /* inotify queues events synchronously with the calls above. */
    while ((n = read(ifd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->len == 0)
                continue; /* the directory itself (its fsync) */
            size_t len = strlen(ev->name);
            if (!strcmp(ev->name, FILE_NAME)) {
                if (ev->mask != IN_MOVED_TO)
                    fail_msg("final file saw event mask 0x%x", ev->mask);
                moved_to_final++;
                continue;
            }
            assert_true(len < 5 || strcmp(ev->name + len - 5, ".prom") != 0);
            assert_int_equal(ev->name[0], '.');
            created += (ev->mask & IN_CREATE) != 0;
            moved_from += (ev->mask & IN_MOVED_FROM) != 0;
        }
    }
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(moved_to_final, 3);
    assert_int_equal(created, 3);
    assert_int_equal(moved_from, 3);
    names = list_dir(dir);
    assert_string_equal(names, FILE_NAME "/");
    free(names);
    close(ifd);
    sf_report_free(rep);
    remove_dir(dir);
}

/* A write that fails half way (file size limit) leaves the previous export
 * as it was and no temporary file behind. */
static void test_failure_keeps_previous(void **state)
{
    (void)state;
    char *dir = make_dir(), *before, *after, *names;
    struct rlimit old, small;
    sf_report *rep = NULL;
    void (*old_handler)(int);

    assert_int_equal(fixture_report(2, 1, 20000000, &rep), 0);
    struct sf_prom_job job = {.job_id = "train-a", .latest = rep, .dropped = 1, .rejected = 0};
    assert_int_equal(prom_write(dir, &job, 1, "standalone", 1), 0);
    before = read_export(dir);

    job.dropped = 2;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 64;
    old_handler = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    int r = prom_write(dir, &job, 1, "standalone", 2);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(r, -EFBIG);

    after = read_export(dir);
    assert_string_equal(before, after);
    names = list_dir(dir);
    assert_string_equal(names, FILE_NAME "/");
    free(names);
    free(before);
    free(after);
    sf_report_free(rep);
    remove_dir(dir);
}

/* Below the share floor the core leaves shares undefined (NaN) and the
 * routing set empty: the file says NaN, has no routing series, and stays
 * valid. */
static void test_undefined_shares(void **state)
{
    (void)state;
    char *dir = make_dir(), *text;
    sf_report *rep = NULL;

    assert_int_equal(fixture_report_floor(5, 0, 20000000, 1e6, &rep), 0);
    assert_int_equal(rep->n_routing, 0);
    struct sf_prom_job job = {.job_id = "tiny", .latest = rep, .dropped = 0, .rejected = 0};
    assert_int_equal(prom_write(dir, &job, 1, "single", 0), 0);
    assert_int_equal(promtool_check(dir), 0);
    text = read_export(dir);
    assert_non_null(
        strstr(text, "\nstagefrontier_job_stage_ratio{job_id=\"tiny\",stage=\"data.next_wait\","
                     "group=\"data.next_wait\"} NaN\n"));
    assert_null(strstr(text, "stagefrontier_job_routing_info"));
    assert_true(sample(text, "stagefrontier_job_window_index", "{job_id=\"tiny\"}") == 5);
    free(text);
    sf_report_free(rep);
    remove_dir(dir);
}

static void test_arguments(void **state)
{
    (void)state;
    char *dir = make_dir(), *missing, *text, *names;
    struct sf_prom_job nameless = {.job_id = NULL};

    struct sf_prom_daemon d = {.role = "x"};
    struct sf_prom_daemon no_reasons = {.role = "x", .n_rejected = 2};
    assert_int_equal(sfd_prom_write(NULL, &d, NULL, 0), -EINVAL);
    assert_int_equal(sfd_prom_write("", &d, NULL, 0), -EINVAL);
    assert_int_equal(sfd_prom_write(dir, NULL, NULL, 0), -EINVAL);
    assert_int_equal(sfd_prom_write(dir, &no_reasons, NULL, 0), -EINVAL);
    assert_int_equal(sfd_prom_write(dir, &d, NULL, 1), -EINVAL);
    assert_int_equal(sfd_prom_write(dir, &d, &nameless, 1), -EINVAL);
    names = list_dir(dir);
    assert_string_equal(names, ""); /* rejected before touching the disk */
    free(names);
    assert_true(asprintf(&missing, "%s/absent", dir) > 0);
    assert_int_equal(sfd_prom_write(missing, &d, NULL, 0), -ENOENT);
    free(missing);

    /* No jobs, no role, no version: still a valid file with the daemon's metrics. */
    d = (struct sf_prom_daemon){.term = 3};
    assert_int_equal(sfd_prom_write(dir, &d, NULL, 0), 0);
    assert_int_equal(promtool_check(dir), 0);
    text = read_export(dir);
    assert_true(sample(text, "stagefrontier_daemon_role_info", "{role=\"unknown\"}") == 1);
    assert_true(sample(text, "stagefrontier_build_info", "{version=\"unknown\"}") == 1);
    assert_true(sample(text, "stagefrontier_jobs", "") == 0);
    assert_null(strstr(text, "job_id="));
    free(text);
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_figures),
        cmocka_unit_test(test_straggler),
        cmocka_unit_test(test_captures),
        cmocka_unit_test(test_state_and_rank_info),
        cmocka_unit_test(test_consistent_across_windows),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_atomic_rename),
        cmocka_unit_test(test_failure_keeps_previous),
        cmocka_unit_test(test_undefined_shares),
        cmocka_unit_test(test_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

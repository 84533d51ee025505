/*
 * sfctl's live commands (status, jobs, ranks, report, watch, record) and
 * what every live command shares: sfctl_show, sfctl_ask, the answer-field
 * readers and the argument helpers. Each command asks sfd through
 * sfctl_query and prints; none computes anything the daemon did not send.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sfctl.h"
#include "sfctl_args.h"
#include "sfctl_live.h"
#include "text_escape.h"

/* Parses [--json] and, exactly when takes_job, one JOB argument. */
static int simple_args(int argc, char **argv, const char *usage, bool takes_job, bool *ret_json,
                       const char **ret_job)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
    char prog[64];
    snprintf(prog, sizeof prog, "sfctl %s", argv[0]);
    struct sfctl_args a;
    sfctl_args_init(&a, prog, usage, argc, argv, "j", opts);
    int c;
    bool json = false;
    while ((c = sfctl_args_next(&a)) != -1) {
        if (c == SFCTL_ARGS_BAD)
            return SFCTL_EXIT_USAGE;
        json = true;
    }
    if (takes_job && optind == argc)
        return sfctl_args_fail(&a, "name a JOB (sfctl jobs lists them)");
    if (argc - optind != (takes_job ? 1 : 0))
        return sfctl_args_fail(&a, "unexpected argument '%s'", argv[optind + (takes_job ? 1 : 0)]);
    *ret_json = json;
    *ret_job = takes_job ? argv[optind] : NULL;
    return SFCTL_EXIT_OK;
}

static json_t *escaped_string(const char *s, size_t len)
{
    size_t need = sf_text_escape(s, len, NULL, 0) + 1;
    char *buf = malloc(need);
    json_t *v = NULL;
    if (buf != NULL) {
        sf_text_escape(s, len, buf, need);
        v = json_string(buf);
    }
    free(buf);
    return v;
}

/* Every string of sfd's answer, keys included, is outside text (job ids,
 * capture paths and errors, host names): escaped once here, so no table
 * prints a control byte. 0, or -1 when out of memory. */
static int escape_tree(json_t *v)
{
    size_t i;
    json_t *item;
    if (json_is_array(v)) {
        json_array_foreach(v, i, item)
        {
            if (json_is_string(item)) {
                if (!sf_text_is_clean(json_string_value(item), json_string_length(item)) &&
                    json_array_set_new(
                        v, i, escaped_string(json_string_value(item), json_string_length(item))) !=
                        0)
                    return -1;
            } else if (escape_tree(item) != 0) {
                return -1;
            }
        }
        return 0;
    }
    if (!json_is_object(v))
        return 0;
    const char *key;
    void *tmp;
    json_object_foreach_safe(v, tmp, key, item)
    {
        if (json_is_string(item) &&
            !sf_text_is_clean(json_string_value(item), json_string_length(item))) {
            if (json_object_set_new(
                    v, key, escaped_string(json_string_value(item), json_string_length(item))) != 0)
                return -1;
            item = json_object_get(v, key);
        } else if (escape_tree(item) != 0) {
            return -1;
        }
        if (!sf_text_is_clean(key, strlen(key))) {
            char *clean = malloc(SF_TEXT_ESCAPED_SIZE(strlen(key)));
            int r = clean ? 0 : -1;
            if (clean != NULL) {
                sf_text_escape(key, strlen(key), clean, SF_TEXT_ESCAPED_SIZE(strlen(key)));
                r = json_object_set(v, clean, item) != 0 || json_object_del(v, key) != 0 ? -1 : 0;
            }
            free(clean);
            if (r != 0)
                return -1;
        }
    }
    return 0;
}

int sfctl_ask(const struct sfctl_request *req, json_t **ret_json, char **ret_text)
{
    char *text;
    size_t len;
    int ex = sfctl_query(req, &text, &len);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    json_error_t err;
    json_t *o = json_loadb(text, len, 0, &err);
    if (o == NULL) {
        fprintf(stderr, "sfctl: malformed answer from sfd: %s\n", err.text);
        free(text);
        return SFCTL_EXIT_INTERNAL;
    }
    if (escape_tree(o) != 0) {
        fprintf(stderr, "sfctl: out of memory\n");
        json_decref(o);
        free(text);
        return SFCTL_EXIT_INTERNAL;
    }
    *ret_json = o;
    *ret_text = text;
    return SFCTL_EXIT_OK;
}

static int fetch_json(const struct sfctl_request *req, json_t **ret)
{
    char *text;
    int ex = sfctl_ask(req, ret, &text);
    if (ex == SFCTL_EXIT_OK)
        free(text);
    return ex;
}

/* An answer as it came, ending in a newline. */
static void put_answer(const char *text, size_t len)
{
    fwrite(text, 1, len, stdout);
    if (len > 0 && text[len - 1] != '\n')
        fputc('\n', stdout);
}

static int print_raw(const struct sfctl_request *req)
{
    char *text;
    size_t len;
    int ex = sfctl_query(req, &text, &len);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    put_answer(text, len);
    free(text);
    return fflush(stdout) == 0 ? SFCTL_EXIT_OK : SFCTL_EXIT_INTERNAL;
}

long long sfctl_json_int(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

const char *sfctl_json_str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "-";
}

int sfctl_show(int argc, char **argv, const char *usage, bool takes_job, enum sfctl_kind kind,
               int (*show)(json_t *answer, const char *job))
{
    bool js;
    const char *job;
    int ex = simple_args(argc, argv, usage, takes_job, &js, &job);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    struct sfctl_request req = {.kind = kind, .job_id = job, .window = -1};
    if (js)
        return print_raw(&req);
    json_t *o;
    ex = fetch_json(&req, &o);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    ex = show(o, job);
    json_decref(o);
    return ex;
}

/* The history store's line, and each of its problem counters that moved. */
static void show_history(json_t *h)
{
    static const char *const problems[] = {
        "write_errors", "queue_dropped",     "open_errors",  "read_errors",   "restore_errors",
        "damaged",      "readonly_restores", "full_retries", "reopen_errors", "refused"};
    if (!json_is_object(h))
        return;
    printf("  history      %s, %lld written, %lld restored, %lld evicted\n",
           json_is_true(json_object_get(h, "enabled")) ? "on" : "off", sfctl_json_int(h, "written"),
           sfctl_json_int(h, "restored"), sfctl_json_int(h, "evicted"));
    for (size_t i = 0; i < sizeof problems / sizeof problems[0]; i++)
        if (sfctl_json_int(h, problems[i]) > 0)
            printf("    %-22s %lld\n", problems[i], sfctl_json_int(h, problems[i]));
}

static int show_status(json_t *o, const char *job)
{
    (void)job;
    const char *mode = json_string_value(json_object_get(o, "mode"));
    if (mode != NULL && strcmp(mode, "cluster") == 0)
        printf("sfd (cluster: %s, term %lld), up %llds\n",
               json_string_value(json_object_get(o, "role")), sfctl_json_int(o, "term"),
               sfctl_json_int(o, "uptime_s"));
    else
        printf("sfd (%s), up %llds\n", mode, sfctl_json_int(o, "uptime_s"));
    printf("  connections  %lld (query %lld, accepted since start %lld)\n",
           sfctl_json_int(o, "connections"), sfctl_json_int(o, "query_connections"),
           sfctl_json_int(o, "connections_accepted"));
    printf("  jobs         %lld\n", sfctl_json_int(o, "jobs"));
    printf("  records      %lld in %lld batches (warmup %lld)\n", sfctl_json_int(o, "records"),
           sfctl_json_int(o, "batches"), sfctl_json_int(o, "warmup_records"));
    printf("  windows      %lld closed\n", sfctl_json_int(o, "windows_closed"));
    printf("  dropped      %lld (reported by clients)\n", sfctl_json_int(o, "dropped"));
    printf("  rejected     %lld\n", sfctl_json_int(o, "rejected_total"));
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(o, "rejected"), k, v) if (json_integer_value(v) > 0)
        printf("    %-22s %lld\n", k, (long long)json_integer_value(v));
    show_history(json_object_get(o, "history"));
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_status(int argc, char **argv)
{
    return sfctl_show(argc, argv, "[--json]", false, SFCTL_Q_STATUS, show_status);
}

void sfctl_format_time(json_t *seconds, char *buf, size_t len)
{
    if (!json_is_number(seconds)) {
        snprintf(buf, len, "-");
        return;
    }
    double s = json_number_value(seconds);
    time_t t = (time_t)s;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "%.3f", s);
}

/* "job J stalled since ...: rank 3 (silent, last in model.fwd at step 17) ..." */
static void show_stall(json_t *j)
{
    json_t *st = json_object_get(j, "stalled");
    if (!json_is_object(st))
        return;
    char since[40];
    sfctl_format_time(json_object_get(st, "since"), since, sizeof since);
    printf("\n%s: STALLED since %s (%lld rank(s) without progress for %llds)\n",
           json_string_value(json_object_get(j, "job_id")), since,
           sfctl_json_int(st, "stalled_ranks"), sfctl_json_int(st, "after_s"));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(st, "ranks"), i, r)
    {
        const char *stage = json_string_value(json_object_get(r, "stage"));
        char step[32] = "-";
        if (json_is_integer(json_object_get(r, "step")))
            snprintf(step, sizeof step, "%lld", sfctl_json_int(r, "step"));
        printf("  rank %lld: %s%s, %s%s, step %s\n", sfctl_json_int(r, "rank"),
               json_is_true(json_object_get(r, "culprit")) ? "CULPRIT, " : "",
               json_is_true(json_object_get(r, "silent")) ? "silent" : "heartbeating",
               stage ? "in " : "last seen between steps", stage ? stage : "", step);
    }
    json_t *c = json_object_get(st, "culprits");
    if (json_array_size(c) > 0) {
        printf("  the group waits for rank");
        json_array_foreach(c, i, r)
            printf("%s %lld", i ? "," : "", (long long)json_integer_value(r));
        printf(": not where the other stalled ranks are, or silent\n");
    }
}

/* "job J live verdict straggler: rank 2 in model.fwd ..." (docs/LIVE.md) */
static void show_verdict(json_t *j)
{
    json_t *v = json_object_get(j, "verdict");
    if (!json_is_object(v) || strcmp(sfctl_json_str(v, "kind"), "stall") == 0)
        return; /* a stall has its own lines above */
    char line[512];
    sfctl_verdict_line(v, line, sizeof line);
    printf("\n%s: LIVE VERDICT %s\n", json_string_value(json_object_get(j, "job_id")), line);
}

static int show_jobs(json_t *a, const char *job)
{
    (void)job;
    size_t i;
    json_t *j;
    int width = 24; /* job ids are up to 128 characters */
    json_array_foreach(a, i, j)
    {
        const char *id = json_string_value(json_object_get(j, "job_id"));
        if (id != NULL && strlen(id) > (size_t)width)
            width = (int)strlen(id);
    }
    printf("%-*s %6s %4s %8s %11s %4s %7s %6s %10s %8s %8s\n", width, "JOB", "UID", "INC", "STATE",
           "RANKS", "SEG", "WINDOWS", "LATEST", "RECORDS", "DROPPED", "REJECTED");
    json_array_foreach(a, i, j)
    {
        char ranks[32], latest[24] = "-";
        snprintf(ranks, sizeof(ranks), "%lld/%lld", sfctl_json_int(j, "connected_ranks"),
                 sfctl_json_int(j, "world_size"));
        if (json_is_integer(json_object_get(j, "latest_window")))
            snprintf(latest, sizeof(latest), "%lld", sfctl_json_int(j, "latest_window"));
        printf("%-*s %6lld %4lld %8s %11s %4lld %7lld %6s %10lld %8lld %8lld\n", width,
               json_string_value(json_object_get(j, "job_id")), sfctl_json_int(j, "uid"),
               sfctl_json_int(j, "incarnation"), sfctl_json_str(j, "state"), ranks,
               sfctl_json_int(j, "segment"), sfctl_json_int(j, "windows"), latest,
               sfctl_json_int(j, "records"), sfctl_json_int(j, "dropped"),
               sfctl_json_int(j, "rejected"));
    }
    json_array_foreach(a, i, j) show_stall(j);
    json_array_foreach(a, i, j) show_verdict(j);
    if (json_array_size(a) == 0)
        printf("(no jobs)\n");
    return SFCTL_EXIT_OK;
}

static bool names_job(json_t *j, const char *job);

/* `sfctl jobs JOB`: the one job's object of the JOBS answer. */
static int show_one_job(int argc, char **argv)
{
    bool js;
    const char *job;
    int ex = simple_args(argc, argv, "[JOB] [--json]", true, &js, &job);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    struct sfctl_request req = {.kind = SFCTL_Q_JOBS, .window = -1};
    json_t *a, *j, *hit = NULL;
    if ((ex = fetch_json(&req, &a)) != SFCTL_EXIT_OK)
        return ex;
    size_t i;
    json_array_foreach(a, i, j) if (hit == NULL && names_job(j, job)) hit = j;
    if (hit == NULL) {
        fprintf(stderr, "sfctl: job '%s' not found (sfctl jobs lists them)\n", job);
        json_decref(a);
        return SFCTL_EXIT_NOT_FOUND;
    }
    if (js) {
        char *text = json_dumps(hit, JSON_COMPACT);
        if (text != NULL)
            printf("%s\n", text);
        free(text);
    } else {
        json_t *one = json_array();
        json_array_append(one, hit);
        show_jobs(one, NULL);
        json_decref(one);
    }
    json_decref(a);
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_jobs(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-')
            return show_one_job(argc, argv);
    return sfctl_show(argc, argv, "[JOB] [--json]", false, SFCTL_Q_JOBS, show_jobs);
}

/* A rank's integer field, "-" when the rank has not told it (pid 0 or a
 * negative step: never connected to this sfd). */
static void known_int(json_t *r, const char *key, long long unknown_below, char *buf, size_t len)
{
    json_t *v = json_object_get(r, key);
    if (json_is_integer(v) && json_integer_value(v) >= unknown_below)
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else
        snprintf(buf, len, "-");
}

static const char *or_dash(const char *s)
{
    return s[0] != '\0' ? s : "-";
}

static int show_ranks(json_t *o, const char *job)
{
    printf("job %s, world size %lld, segment %lld\n", job, sfctl_json_int(o, "world_size"),
           sfctl_json_int(o, "segment"));
    printf("%6s %9s %8s %-16s %-12s %10s %10s %-21s %8s %-24s %s\n", "RANK", "CONNECTED", "PID",
           "HOST", "ROLE", "RECORDS", "LAST_STEP", "LAST_SEEN", "AT_STEP", "OPEN_STAGE", "STATE");
    size_t i, unseen = 0;
    json_t *r;
    json_array_foreach(json_object_get(o, "ranks"), i, r)
    {
        char seen[40], at[24] = "-", pid[24], last[24];
        sfctl_format_time(json_object_get(r, "last_seen"), seen, sizeof seen);
        if (json_is_integer(json_object_get(r, "position_step")))
            snprintf(at, sizeof at, "%lld", sfctl_json_int(r, "position_step"));
        known_int(r, "pid", 1, pid, sizeof pid);
        known_int(r, "last_step", 0, last, sizeof last);
        unseen += strcmp(sfctl_json_str(r, "state"), "unseen") == 0;
        printf("%6lld %9s %8s %-16s %-12s %10lld %10s %-21s %8s %-24s %s%s\n",
               sfctl_json_int(r, "rank"),
               json_is_true(json_object_get(r, "connected")) ? "yes" : "no", pid,
               or_dash(sfctl_json_str(r, "host")), or_dash(sfctl_json_str(r, "role")),
               sfctl_json_int(r, "records"), last, seen, at, sfctl_json_str(r, "open_stage"),
               sfctl_json_str(r, "state"),
               json_is_true(json_object_get(r, "culprit")) ? " (culprit)" : "");
    }
    if (i > 0 && unseen == i)
        printf("(no rank of this job has connected since sfd started: its windows are from a "
               "previous run, restored from history)\n");
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_ranks(int argc, char **argv)
{
    return sfctl_show(argc, argv, "JOB [--json]", true, SFCTL_Q_RANKS, show_ranks);
}

/* ---- report, watch, record ------------------------------------------------ */

struct report_args {
    const char *job;
    int64_t window, count, interval_ms, last; /* last 0: the latest complete window */
    bool json, wait;                          /* wait: watch waits for the job's first Hello */
    const char *out;
};

static int report_args(int argc, char **argv, struct report_args *a, const char *usage)
{
    static const struct option opts[] = {
        {"window", required_argument, NULL, 'w'}, {"json", no_argument, NULL, 'j'},
        {"count", required_argument, NULL, 'n'},  {"interval", required_argument, NULL, 'i'},
        {"last", required_argument, NULL, 'l'},   {"output", required_argument, NULL, 'o'},
        {"wait", no_argument, NULL, 'W'},         {NULL, 0, NULL, 0},
    };
    char prog[64];
    snprintf(prog, sizeof prog, "sfctl %s", argv[0]);
    struct sfctl_args p;
    sfctl_args_init(&p, prog, usage, argc, argv, "w:jn:i:l:o:", opts);
    int c;
    bool has_last = false;
    *a = (struct report_args){.window = -1, .count = 0, .interval_ms = 1000, .last = 0};
    while ((c = sfctl_args_next(&p)) != -1) {
        int r = 0;
        switch (c) {
        case 'w':
            r = sfctl_args_i64(&p, "a window index", 0, &a->window);
            break;
        case 'j':
            a->json = true;
            break;
        case 'n':
            r = sfctl_args_i64(&p, "a count", 1, &a->count);
            break;
        case 'i':
            r = sfctl_args_i64(&p, "milliseconds", 10, &a->interval_ms);
            break;
        case 'l':
            r = sfctl_args_i64(&p, "a number of windows", 1, &a->last);
            has_last = true;
            break;
        case 'o':
            a->out = optarg;
            break;
        case 'W':
            a->wait = true;
            break;
        default:
            return SFCTL_EXIT_USAGE;
        }
        if (r != 0)
            return r;
    }
    if (optind < argc)
        a->job = argv[optind++];
    if (optind != argc)
        return sfctl_args_fail(&p, "unexpected argument '%s'", argv[optind]);
    if (has_last && a->window >= 0)
        return sfctl_args_fail(&p, "--window and --last exclude each other");
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_report(int argc, char **argv)
{
    struct report_args a;
    int ex = report_args(argc, argv, &a, "[JOB] [--window N | --last N] [--json]");
    if (ex != SFCTL_EXIT_OK)
        return ex;
    struct sfctl_request req = {.kind = SFCTL_Q_REPORT,
                                .job_id = a.job,
                                .window = a.window,
                                .limit = (uint32_t)a.last,
                                .format = a.json ? 0 : 1};
    return print_raw(&req);
}

int sfctl_cmd_record(int argc, char **argv)
{
    struct report_args a;
    int ex = report_args(argc, argv, &a, "JOB [-o FILE]");
    if (ex != SFCTL_EXIT_OK)
        return ex;
    if (a.job == NULL)
        return sfctl_usage_error(argv[0], "JOB [-o FILE]", "name a JOB (sfctl jobs lists them)");
    struct sfctl_request req = {.kind = SFCTL_Q_RECORD, .job_id = a.job, .window = -1};
    char *text;
    size_t len;
    ex = sfctl_query(&req, &text, &len);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    FILE *f = a.out ? fopen(a.out, "we") : stdout;
    if (f == NULL) {
        fprintf(stderr, "sfctl: cannot write %s: %s\n", a.out, strerror(errno));
        free(text);
        return SFCTL_EXIT_INTERNAL;
    }
    bool ok = fwrite(text, 1, len, f) == len;
    ok = (a.out ? fclose(f) == 0 : fflush(f) == 0) && ok;
    free(text);
    if (!ok) {
        fprintf(stderr, "sfctl: write failed: %s\n", strerror(errno));
        return SFCTL_EXIT_INTERNAL;
    }
    return SFCTL_EXIT_OK;
}

/* The text view leads with "step ... vs baseline (...): ... first appears
 * in STAGE" exactly when the window's change route is not empty. */
static bool changed(const char *text)
{
    const char *line = strstr(text, "\nstep ");
    if (line == NULL)
        return false;
    const char *end = strchr(line + 1, '\n');
    const char *hit = strstr(line, " first appears in ");
    return strstr(line, " vs baseline (") != NULL && hit != NULL && (end == NULL || hit < end);
}

/* One frame of watch: the screen cleared on a terminal, a banner when the
 * text view shows a change, then the report. */
static void draw(const char *text, size_t len, bool tty, bool json)
{
    if (tty)
        fputs("\033[H\033[2J", stdout);
    if (!json && changed(text))
        fputs(tty ? "\033[1m*** significant change vs baseline ***\033[0m\n"
                  : "*** significant change vs baseline ***\n",
              stdout);
    put_answer(text, len);
    fflush(stdout);
}

static volatile sig_atomic_t watch_stop;

static void on_sigint(int sig)
{
    (void)sig;
    watch_stop = 1;
}

static int job_exists(const char *job, bool quiet)
{
    struct sfctl_request req = {
        .kind = SFCTL_Q_RANKS, .job_id = job, .window = -1, .quiet_not_found = quiet};
    char *text;
    size_t len;
    int ex = sfctl_query(&req, &text, &len);
    if (ex == SFCTL_EXIT_OK)
        free(text);
    return ex;
}

/* Whether a jobs entry is the one JOB names: [UID/]ID[@N], without @N its
 * newest incarnation (docs/SFCTL.md, "Naming a job"). */
static bool names_job(json_t *j, const char *job)
{
    const char *id = json_string_value(json_object_get(j, "job_id"));
    const char *slash = strchr(job, '/'), *name = slash ? slash + 1 : job;
    const char *at = strrchr(name, '@');
    size_t len = at ? (size_t)(at - name) : strlen(name);
    if (id == NULL || strlen(id) != len || strncmp(id, name, len) != 0)
        return false;
    if (at ? strtoll(at + 1, NULL, 10) != sfctl_json_int(j, "incarnation")
           : !json_is_true(json_object_get(j, "newest")))
        return false;
    if (slash == NULL)
        return true;
    char uid[24];
    snprintf(uid, sizeof uid, "%lld", sfctl_json_int(j, "uid"));
    return (size_t)(slash - job) == strlen(uid) && strncmp(job, uid, strlen(uid)) == 0;
}

/* Whether the job has ended: no rank connected and no window open, so its
 * latest report is its last. */
static int job_ended(const char *job, bool *ret_ended, char *verdict, size_t verdict_len)
{
    struct sfctl_request req = {.kind = SFCTL_Q_JOBS, .window = -1};
    json_t *a;
    int ex = fetch_json(&req, &a);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    bool ended = false;
    size_t i;
    json_t *j;
    verdict[0] = '\0';
    json_array_foreach(a, i, j) if (names_job(j, job))
    {
        ended = strcmp(sfctl_json_str(j, "state"), "ended") == 0 &&
                sfctl_json_int(j, "open_windows") == 0;
        json_t *v = json_object_get(j, "verdict");
        if (json_is_object(v)) {
            char line[480];
            sfctl_verdict_line(v, line, sizeof line);
            snprintf(verdict, verdict_len, "*** live verdict %s ***\n", line);
        }
    }
    json_decref(a);
    *ret_ended = ended;
    return SFCTL_EXIT_OK;
}

/* One poll of watch: draws the report when it changed. *drawn counts the
 * draws; *ret_ended says the job has ended (its last report is drawn). */
struct watch_state {
    const struct report_args *a;
    bool tty;
    char *shown;
    int64_t drawn;
};

static int watch_poll(struct watch_state *w, bool *ret_ended)
{
    const struct report_args *a = w->a;
    *ret_ended = false;
    /* Until the first draw, an unknown job ends the watch (exit 5), unless
     * --wait: then its first Hello is waited for. A known job without a
     * closed window is waited for in silence. */
    if (w->shown == NULL) {
        int ex = job_exists(a->job, a->wait);
        if (ex == SFCTL_EXIT_NOT_FOUND && a->wait)
            return SFCTL_EXIT_OK;
        if (ex != SFCTL_EXIT_OK)
            return ex;
    }
    bool ended;
    char verdict[512];
    int ex = job_ended(a->job, &ended, verdict,
                       sizeof verdict); /* before the report: then the report is the last */
    if (ex != SFCTL_EXIT_OK)
        return ex;
    struct sfctl_request req = {.kind = SFCTL_Q_REPORT,
                                .job_id = a->job,
                                .window = -1,
                                .format = a->json ? 0 : 1,
                                .quiet_not_found = w->shown == NULL};
    char *text = NULL; /* sfctl_query sets it only on success */
    size_t len;
    ex = sfctl_query(&req, &text, &len);
    if (ex == SFCTL_EXIT_NOT_FOUND && w->shown == NULL) {
        if (ended) {
            fprintf(stderr, "sfctl watch: job '%s' has ended without a closed window\n", a->job);
            return SFCTL_EXIT_NOT_FOUND;
        }
        return SFCTL_EXIT_OK; /* the job's first window has not closed yet */
    }
    if (ex != SFCTL_EXIT_OK)
        return ex;
    if (!a->json && verdict[0] != '\0') { /* the live verdict heads the report */
        char *both = NULL;
        if (asprintf(&both, "%s%s", verdict, text) >= 0) {
            free(text);
            text = both;
            len = strlen(text);
        }
    }
    if (w->shown == NULL || strcmp(w->shown, text) != 0) {
        draw(text, len, w->tty, a->json);
        free(w->shown);
        w->shown = text;
        text = NULL;
        w->drawn++;
    }
    free(text);
    *ret_ended = ended;
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_watch(int argc, char **argv)
{
    struct report_args a;
    const char *usage = "JOB [--wait] [--count N] [--interval MS] [--json]";
    int ex = report_args(argc, argv, &a, usage);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    if (a.job == NULL)
        return sfctl_usage_error(argv[0], usage, "name a JOB (sfctl jobs lists them)");
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: poll() below wakes up */
    struct watch_state w = {.a = &a, .tty = isatty(STDOUT_FILENO)};
    bool ended = false;
    while (!watch_stop && (a.count == 0 || w.drawn < a.count)) {
        ex = watch_poll(&w, &ended);
        if (ex != SFCTL_EXIT_OK || ended || (a.count != 0 && w.drawn >= a.count))
            break;
        poll(NULL, 0, (int)a.interval_ms);
    }
    free(w.shown);
    return ex;
}

/*
 * `sfctl replay FILE`: offline reports from a wide CSV or a JSON Lines
 * recording, through the same accounting core as sfd. This file owns the
 * command line, the gates precedence (defaults < recording header < --gates
 * file < flags), window assembly and output; the readers own parsing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>
#include <jansson.h>

#include <stagefrontier/change.h>
#include <stagefrontier/gates_text.h>

#include "recording.h"
#include "replay.h"
#include "report_json.h"
#include "report_text.h"
#include "sfctl.h"
#include "sfctl_args.h"
#include "text_escape.h"

struct replay_opts {
    const char *path;
    const char *prog; /* prefixes messages: "sfctl replay", "sfctl plot" */
    struct sfctl_report_opts report;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sfctl replay [--json] [--window-steps N] [--warmup-steps N] [--tau X]\n"
            "                    [--gates FILE] [--baseline FILE | --baseline-windows N] FILE\n"
            "FILE is a wide CSV (step,rank,<stages...>,<residual>[,step_wall], seconds) or a\n"
            "JSON Lines recording from `sfctl record`; - reads standard input.\n"
            "The change is measured against the first N eligible windows of FILE (default 3),\n"
            "or of the --baseline recording or CSV.\n");
}

/* ---- options and gates --------------------------------------------------- */

int sfctl_report_opt(struct sfctl_report_opts *o, int c, const char *arg)
{
    switch (c) {
    case 'j':
        o->json = true;
        return 1;
    case 'g':
        o->gates_path = arg;
        return 1;
    case 'b':
        o->baseline_path = arg;
        return 1;
    case 'n':
    case 'w':
    case 'u':
    case 't':
        if (o->n_flags == 8)
            return -EINVAL;
        o->baseline_windows = o->baseline_windows || c == 'n';
        o->flag_keys[o->n_flags] = c == 'w'   ? "window_steps"
                                   : c == 'u' ? "warmup_steps"
                                   : c == 'n' ? "baseline_windows"
                                              : "tau";
        o->flag_values[o->n_flags++] = arg;
        return 1;
    default:
        return 0;
    }
}

static int parse_opts(int argc, char **argv, struct replay_opts *o)
{
    static const struct option longopts[] = {
        SFCTL_REPORT_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct sfctl_args p; /* the usage is printed by the caller */
    sfctl_args_init(&p, "sfctl replay", NULL, argc, argv, "+jh", longopts);
    int c;
    while ((c = sfctl_args_next(&p)) != -1) {
        if (c == SFCTL_ARGS_BAD)
            return -EINVAL;
        int r = sfctl_report_opt(&o->report, c, optarg);
        if (r < 0) {
            sfctl_args_fail(&p, "at most 8 gate flags");
            return r;
        }
        if (r == 1)
            continue;
        usage(stdout); /* 'h' */
        return 1;
    }
    if (optind == argc) {
        sfctl_args_fail(&p, "name the FILE to replay (- for standard input)");
        return -EINVAL;
    }
    if (optind != argc - 1) {
        sfctl_args_fail(&p, "unexpected argument '%s'", argv[optind + 1]);
        return -EINVAL;
    }
    o->path = argv[optind];
    return 0;
}

struct ini_ctx {
    sf_gates *gates;
    char err[200];
};

static int on_gate(void *user, const char *section, const char *key, const char *value)
{
    struct ini_ctx *ctx = user;
    if (section[0] != '\0' && strcmp(section, "gates") != 0) {
        snprintf(ctx->err, sizeof ctx->err, "unknown section [%s]", section);
        return 0;
    }
    int r = sf_gates_set(ctx->gates, key, value);
    char why[96] = "";
    if (r == -EINVAL)
        sf_gates_explain(key, why, sizeof why);
    if (r < 0)
        snprintf(ctx->err, sizeof ctx->err, "%s gate \"%s\"%s%s",
                 r == -ENOENT ? "unknown" : "invalid value for", key, why[0] ? ": " : "", why);
    return r == 0;
}

static int load_gates_file(const char *path, sf_gates *gates)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "sfctl replay: %s: %s\n", path, strerror(errno));
        return -EINVAL;
    }
    struct ini_ctx ctx = {.gates = gates};
    int line = ini_parse_file(f, on_gate, &ctx);
    fclose(f);
    if (line != 0) {
        fprintf(stderr, "sfctl replay: %s:%d: %s\n", path, line,
                ctx.err[0] ? ctx.err : "malformed line");
        return -EINVAL;
    }
    return 0;
}

/* Gates file, then flags, onto gates; prog prefixes the messages.
 * -EBADMSG: the gates file is bad (exit 3, bad input); -EINVAL: a flag is. */
static int apply_gates(const struct sfctl_report_opts *o, sf_gates *gates, const char *prog)
{
    if (o->gates_path && load_gates_file(o->gates_path, gates) < 0)
        return -EBADMSG;
    for (int i = 0; i < o->n_flags; i++)
        if (sf_gates_set(gates, o->flag_keys[i], o->flag_values[i]) < 0) {
            fprintf(stderr, "%s: invalid --%s value \"%s\"\n", prog, o->flag_keys[i],
                    o->flag_values[i]);
            return -EINVAL;
        }
    if (sf_gates_validate(gates) < 0) {
        fprintf(stderr,
                "%s: the gates are inconsistent (window_steps >= 1, "
                "0 < tau <= 1, baseline_windows >= 1, change_alpha > 0, "
                "straggler_alpha > 0)\n",
                prog);
        return o->gates_path != NULL ? -EBADMSG : -EINVAL;
    }
    return 0;
}

int sfctl_report_opts_check(const struct sfctl_report_opts *o, const char *prog)
{
    sf_gates probe;
    sf_gates_default(&probe);
    return apply_gates(o, &probe, prog);
}

/* ---- input --------------------------------------------------------------- */

static bool looks_like_jsonl(const char *path, FILE *f)
{
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".csv") == 0)
        return false;
    if (dot && (!strcmp(dot, ".jsonl") || !strcmp(dot, ".ndjson") || !strcmp(dot, ".json")))
        return true;
    int c;
    while ((c = getc(f)) == ' ' || c == '\n' || c == '\r' || c == '\t')
        ;
    if (c != EOF)
        ungetc(c, f);
    return c == '{';
}

int sfctl_replay_read(const char *path, const sf_gates *seed, struct replay_input *ret)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "sfctl replay: %s: %s\n", path, strerror(errno));
        return -ENOENT;
    }
    char err[400] = "";
    int r = looks_like_jsonl(path, f) ? sfctl_read_jsonl(f, seed, ret, err, sizeof err)
                                      : sfctl_read_csv(f, ret, err, sizeof err);
    if (f != stdin)
        fclose(f);
    if (r == -ENOMEM)
        fprintf(stderr, "sfctl replay: %s: out of memory\n", path);
    else if (r < 0) {
        char shown[SF_TEXT_ESCAPED_SIZE(sizeof err)]; /* the message quotes the file */
        sf_text_escape(err, strlen(err), shown, sizeof shown);
        fprintf(stderr, "sfctl replay: %s:%s\n", path, shown);
    }
    return r;
}

/* ---- window assembly ----------------------------------------------------- */

static int cmp_row_step(const void *a, const void *b)
{
    const sf_row *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int push_job(struct window_job **jobs, size_t *n, size_t *cap, struct window_job job)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        struct window_job *j = realloc(*jobs, c * sizeof *j);
        if (j == NULL)
            return -ENOMEM;
        *jobs = j;
        *cap = c;
    }
    (*jobs)[(*n)++] = job;
    return 0;
}

/* Rows not fixed by window lines are grouped by window index. A window
 * whose index continues in the next segment closed early; the input's last
 * window is partial when its range is not reached. */
static int group_open_rows(struct replay_part *p, const sf_gates *g, uint32_t segment,
                           struct window_job **jobs, size_t *n, size_t *cap)
{
    sf_row *rows = p->rows + p->open_first_row;
    size_t count = p->n_rows - p->open_first_row;
    qsort(rows, count, sizeof *rows, cmp_row_step);
    for (size_t i = 0; i < count;) {
        int64_t index = sf_window_index(rows[i].step, g->warmup_steps, g->window_steps);
        size_t j = i;
        while (j < count &&
               sf_window_index(rows[j].step, g->warmup_steps, g->window_steps) == index)
            j++;
        if (index >= 0) {
            struct window_job job = {
                .part = p, .first_row = p->open_first_row + i, .n_rows = j - i};
            job.meta =
                (sf_window_meta){.index = index, .segment = segment, .world_size = p->world_size};
            sf_window_range(index, g->warmup_steps, g->window_steps, &job.meta.first_step,
                            &job.meta.last_step);
            if (j == count && rows[j - 1].step < job.meta.last_step)
                job.meta.flags |= SF_WIN_PARTIAL;
            int r = push_job(jobs, n, cap, job);
            if (r < 0)
                return r;
        }
        i = j;
    }
    return 0;
}

/* A purely row-grouped segment that starts inside the previous segment's
 * last window continues it: that window closed early, and this one is the
 * next segment of the same index. */
static void continue_segment(struct window_job *jobs, size_t before, size_t n)
{
    if (before == 0 || n == before || jobs[before].meta.index != jobs[before - 1].meta.index)
        return;
    struct window_job *prev = &jobs[before - 1];
    prev->meta.flags = (prev->meta.flags & ~SF_WIN_PARTIAL) | SF_WIN_CLOSED_EARLY;
    jobs[before].meta.segment = prev->meta.segment + 1;
}

int sfctl_replay_assemble(struct replay_input *in, const sf_gates *g, struct window_job **ret,
                          size_t *ret_n)
{
    struct window_job *jobs = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    for (size_t i = 0; i < in->n_parts && r == 0; i++) {
        struct replay_part *p = &in->parts[i];
        size_t before = n;
        for (size_t w = 0; w < p->n_windows && r == 0; w++)
            r = push_job(&jobs, &n, &cap,
                         (struct window_job){p, p->windows[w].first_row, p->windows[w].n_rows,
                                             p->windows[w].meta});
        if (r == 0)
            r = group_open_rows(p, g, 0, &jobs, &n, &cap);
        if (r == 0 && p->n_windows == 0)
            continue_segment(jobs, before, n);
    }
    if (r < 0) {
        free(jobs);
        return r;
    }
    *ret = jobs;
    *ret_n = n;
    return 0;
}

/* ---- output -------------------------------------------------------------- */

static int window_failed(const struct window_job *job, int r, const char *path)
{
    if (r == -EEXIST) {
        fprintf(stderr, "sfctl replay: %s: duplicate (step, rank) in window %lld\n", path,
                (long long)job->meta.index);
        return -EINVAL;
    }
    fprintf(stderr, "sfctl replay: %s: window %lld: %s\n", path, (long long)job->meta.index,
            strerror(-r));
    return r == -ENOMEM ? r : -EINVAL;
}

int sfctl_replay_window(const struct window_job *job, const sf_gates *g, sf_summary **ret_summary,
                        sf_report **ret_report)
{
    sf_summary *summary = NULL;
    sf_report *report = NULL;
    bool dense = job->meta.world_size <= g->dense_max_ranks;
    int r = sf_summary_build(&job->part->schema, &job->meta, job->part->rows + job->first_row,
                             job->n_rows, dense, &summary);
    if (r == 0)
        r = sf_report_compute(summary, g, &report);
    if (r < 0) {
        sf_summary_free(summary);
        return r;
    }
    *ret_summary = summary;
    *ret_report = report;
    return 0;
}

/* The reference a window is measured against: the --baseline file's for
 * every window; else a recording's own reference line; else the input's own
 * first eligible windows once collected. Only windows after a recorded or
 * collected reference get a change, as in sfd. */
static int pick_reference(struct replay_baseline *b, const struct window_job *job,
                          const sf_summary *summary, const struct replay_opts *o,
                          const sf_reference **ret)
{
    const char *why;
    const sf_reference *ref = b->ref;
    if (!b->from_file && job->part->reference != NULL && !o->report.baseline_windows)
        ref = job->part->reference;
    if (ref != NULL &&
        sf_reference_check(ref, &summary->schema, summary->meta.world_size, &why) < 0) {
        if (b->from_file) {
            fprintf(stderr, "sfctl replay: %s: %s than window %lld of %s\n",
                    o->report.baseline_path, why, (long long)job->meta.index, o->path);
            return -EINVAL;
        }
        if (ref == b->ref) { /* the input changed shape: collect anew */
            sf_reference_free(b->ref);
            b->ref = NULL;
        }
        ref = NULL;
    }
    if (ref != NULL && !b->from_file && !sf_reference_applies(ref, &summary->meta))
        ref = NULL;
    *ret = ref;
    return 0;
}

static int attach_change(struct replay_baseline *b, const struct window_job *job,
                         sf_summary *summary, sf_report *report, const struct replay_opts *o,
                         const sf_reference **ret_ref)
{
    const sf_reference *ref;
    int r = pick_reference(b, job, summary, o, &ref);
    if (r < 0)
        return r;
    r = sf_report_attach_change(report, summary, &b->pool, ref);
    if (r < 0)
        return window_failed(job, r, o->path);
    *ret_ref = ref;
    bool recorded = job->part->reference != NULL && !o->report.baseline_windows;
    if (b->ref == NULL && !b->from_file && !recorded) {
        r = sf_reference_collect(&b->collector, summary, report, &b->ref);
        if (r < 0)
            return window_failed(job, r, o->path);
    }
    return 0;
}

/* Computes one window as sfd would (change, straggler persistence) and hands
 * it to visit. */
static int visit_window(const struct window_job *job, const sf_gates *g, struct replay_baseline *b,
                        const struct replay_opts *o, sf_straggler_history *history,
                        sfctl_window_visit visit, void *user)
{
    sf_summary *summary = NULL;
    sf_report *report = NULL;
    const sf_reference *ref = NULL;
    int r = sfctl_replay_window(job, g, &summary, &report);
    if (r < 0)
        return window_failed(job, r, o->path);
    r = attach_change(b, job, summary, report, o, &ref);
    sf_straggler_track(history, report); /* windows come in order, as sfd stores them */
    if (r == 0)
        r = visit(job, summary, report, ref, user);
    if (r == 0) /* the later windows' changes pool it (sfd does the same) */
        r = sf_change_pool_keep(&b->pool, &summary, report->gates.change_pool_windows);
    sf_report_free(report);
    sf_summary_free(summary);
    return r;
}

struct print_ctx {
    json_t *array;
    bool json;
};

static int print_window(const struct window_job *job, const sf_summary *summary,
                        const sf_report *report, const sf_reference *ref, void *user)
{
    (void)job, (void)summary, (void)ref;
    struct print_ctx *p = user;
    if (!p->json) {
        int r = sf_report_write_text(report, stdout);
        printf("\n");
        return r;
    }
    json_t *obj;
    int r = sf_report_to_json(report, &obj);
    if (r == 0)
        json_array_append_new(p->array, obj);
    return r;
}

static int each_window(const struct window_job *jobs, size_t n, const sf_gates *g,
                       struct replay_baseline *b, const struct replay_opts *o,
                       sfctl_window_visit visit, void *user)
{
    sf_straggler_history history = {0};
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++)
        r = visit_window(&jobs[i], g, b, o, &history, visit, user);
    return r;
}

static int print_reports(const struct window_job *jobs, size_t n, const sf_gates *g,
                         struct replay_baseline *b, const struct replay_opts *o)
{
    struct print_ctx p = {.array = json_array(), .json = o->report.json};
    int r = p.array == NULL ? -ENOMEM : each_window(jobs, n, g, b, o, print_window, &p);
    if (r == 0 && o->report.json) {
        char *text = sf_report_array_dumps(p.array);
        if (text == NULL)
            r = -ENOMEM;
        else
            printf("%s\n", text);
        free(text);
    }
    if (r == 0 && n == 0)
        fprintf(stderr, "sfctl replay: %s: no window: every step is within the %u warmup steps\n",
                o->path, g->warmup_steps);
    json_decref(p.array);
    return r;
}

/* Gates, windows and reports of input already read; shared with `sfctl
 * import --replay` and the pictures. With visit NULL the reports are printed.
 * Returns 0, -EINVAL (message printed), -ENOMEM or visit's error. */
static int report_input(struct replay_input *in, const struct replay_opts *o,
                        sfctl_window_visit visit, void *user, size_t *ret_n)
{
    sf_gates gates;
    sf_gates_default(&gates);
    if (in->has_gates)
        gates = in->gates;
    struct window_job *jobs = NULL;
    struct replay_baseline b = {0};
    size_t n = 0;
    int r = apply_gates(&o->report, &gates, o->prog);
    if (r == 0 && o->report.baseline_path != NULL)
        r = sfctl_baseline_load(o->report.baseline_path, &gates, &b);
    b.collector.want = gates.baseline_windows;
    if (r == 0 && (r = sfctl_replay_assemble(in, &gates, &jobs, &n)) == 0)
        r = visit ? each_window(jobs, n, &gates, &b, o, visit, user)
                  : print_reports(jobs, n, &gates, &b, o);
    if (r == 0 && ret_n != NULL)
        *ret_n = n;
    sfctl_baseline_clear(&b);
    free(jobs);
    return r;
}

int sfctl_replay_each(struct replay_input *in, const char *label, const char *prog,
                      const struct sfctl_report_opts *report, sfctl_window_visit visit, void *user,
                      size_t *ret_windows)
{
    struct replay_opts o = {.path = label, .prog = prog, .report = *report};
    return report_input(in, &o, visit, user, ret_windows);
}

int sfctl_replay_report(struct replay_input *in, const char *label,
                        const struct sfctl_report_opts *report)
{
    struct replay_opts o = {.path = label, .prog = "sfctl replay", .report = *report};
    return report_input(in, &o, NULL, NULL, NULL);
}

int sfctl_cmd_replay(int argc, char **argv)
{
    struct replay_opts o = {.prog = "sfctl replay"};
    int r = parse_opts(argc, argv, &o);
    if (r != 0) {
        if (r < 0)
            usage(stderr);
        return r < 0 ? SFCTL_EXIT_USAGE : SFCTL_EXIT_OK;
    }
    sf_gates gates;
    sf_gates_default(&gates);
    r = sfctl_report_opts_check(&o.report, "sfctl replay"); /* fail fast before reading */
    if (r < 0)
        return r == -EBADMSG ? SFCTL_EXIT_INPUT : SFCTL_EXIT_USAGE;
    struct replay_input in = {0};
    r = sfctl_replay_read(o.path, &gates, &in);
    if (r < 0)
        return r == -ENOMEM ? SFCTL_EXIT_INTERNAL : SFCTL_EXIT_INPUT;
    r = report_input(&in, &o, NULL, NULL, NULL);
    sfctl_replay_input_clear(&in);
    if (r == 0)
        return SFCTL_EXIT_OK;
    return r == -ENOMEM ? SFCTL_EXIT_INTERNAL : SFCTL_EXIT_INPUT;
}

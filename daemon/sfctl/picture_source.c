/*
 * Input, window choice and atomic output of `sfctl plot` and `sfctl export`
 * (picture_source.h). The live path asks sfd for the job's recording over the
 * query socket and reads it as `sfctl replay` would, so a live picture and a
 * replayed one are drawn from the same numbers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "picture_source.h"
#include "sfctl.h"
#include "sfctl_live.h"

/* Whether the recording is its header alone: after a restart sfd has rows
 * only for the windows whose rows its history kept (docs/PICTURES.md, "After
 * a restart"). */
static bool header_only(const char *text, size_t len)
{
    const char *nl = memchr(text, '\n', len);
    if (nl == NULL)
        return true;
    for (const char *p = nl + 1; p < text + len; p++)
        if (*p != '\n' && *p != ' ' && *p != '\r')
            return false;
    return true;
}

static int read_recording(struct picture_source *src, const char *text, size_t len)
{
    if (header_only(text, len)) {
        fprintf(stderr,
                "%s: job '%s': no rows to draw: no window has closed yet, or sfd restarted and "
                "its history kept none of this job's rows; `sfctl report %s --last N` still "
                "shows its windows\n",
                src->prog, src->job, src->job);
        return SFCTL_EXIT_NOT_FOUND;
    }
    FILE *f = fmemopen((void *)text, len, "r");
    if (f == NULL)
        return SFCTL_EXIT_INTERNAL;
    sf_gates seed;
    sf_gates_default(&seed);
    char err[400] = "";
    int r = sfctl_read_jsonl(f, &seed, &src->input, err, sizeof err);
    fclose(f);
    if (r < 0)
        fprintf(stderr, "%s: job '%s': malformed recording from sfd: %s\n", src->prog, src->job,
                r == -ENOMEM ? "out of memory" : err);
    return r < 0 ? SFCTL_EXIT_INTERNAL : SFCTL_EXIT_OK;
}

/* No JOB and no --file: the one job sfd has, as `sfctl report` does. */
static int only_job(struct picture_source *src)
{
    struct sfctl_request req = {.kind = SFCTL_Q_JOBS, .window = -1};
    json_t *a;
    char *text;
    int ex = sfctl_ask(&req, &a, &text);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    free(text);
    size_t n = json_array_size(a);
    if (n == 1) {
        const char *name = json_string_value(json_object_get(json_array_get(a, 0), "name"));
        snprintf(src->job_buf, sizeof src->job_buf, "%s", name ? name : "");
        src->job = src->job_buf;
        json_decref(a);
        return SFCTL_EXIT_OK;
    }
    if (n == 0) {
        fprintf(stderr, "%s: no jobs: name a --file to draw\n", src->prog);
        json_decref(a);
        return SFCTL_EXIT_NOT_FOUND;
    }
    fprintf(stderr, "%s: several jobs: name one of", src->prog);
    size_t i;
    json_t *j;
    json_array_foreach(a, i, j) fprintf(stderr, "%s %s", i ? "," : "", sfctl_json_str(j, "name"));
    fprintf(stderr, " (or a --file)\n");
    json_decref(a);
    return SFCTL_EXIT_USAGE;
}

int picture_source_load(struct picture_source *src)
{
    if (src->file == NULL && src->job == NULL) {
        int ex = only_job(src);
        if (ex != SFCTL_EXIT_OK)
            return ex;
    }
    if (src->file != NULL) {
        snprintf(src->label, sizeof src->label, "%s", src->file);
        sf_gates seed;
        sf_gates_default(&seed);
        int r = sfctl_replay_read(src->file, &seed, &src->input);
        if (r < 0)
            return r == -ENOMEM ? SFCTL_EXIT_INTERNAL : SFCTL_EXIT_INPUT;
        return SFCTL_EXIT_OK;
    }
    snprintf(src->label, sizeof src->label, "job '%s'", src->job);
    struct sfctl_request req = {.kind = SFCTL_Q_RECORD, .job_id = src->job, .window = -1};
    char *text;
    size_t len;
    int ex = sfctl_query(&req, &text, &len);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    ex = read_recording(src, text, len);
    free(text);
    return ex;
}

void picture_source_clear(struct picture_source *src)
{
    sfctl_replay_input_clear(&src->input);
}

/* ---- command line ---------------------------------------------------------- */

int picture_source_opt(struct picture_source *src, int c, const char *arg)
{
    if (sfctl_report_opt(&src->report, c, arg) == 1)
        return 1;
    if (c == 'o')
        src->out = arg;
    else if (c == 'f')
        src->file = arg;
    return c == 'o' || c == 'f';
}

int picture_usage_error(const struct picture_source *src, const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", src->prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", src->usage);
    return SFCTL_EXIT_USAGE;
}

int picture_source_args(struct picture_source *src, int argc, char **argv, int optind_)
{
    if (optind_ < argc)
        src->job = argv[optind_++];
    if (optind_ != argc)
        return picture_usage_error(src, "unexpected argument '%s'", argv[optind_]);
    if (src->job != NULL && src->file != NULL)
        return picture_usage_error(src, "%s", "name a JOB or a --file, not both");
    if (src->out == NULL)
        return picture_usage_error(src, "%s", "-o OUT is required");
    if (sfctl_report_opts_check(&src->report, src->prog) < 0)
        return src->report.gates_path ? SFCTL_EXIT_INPUT : SFCTL_EXIT_USAGE;
    return SFCTL_EXIT_OK;
}

/* ---- window choice ------------------------------------------------------- */

struct scan {
    int64_t latest_full, latest, first_seen, last_seen;
    size_t in_range;
    const struct picture_select *want;
};

static int scan_window(const struct window_job *job, const sf_summary *summary,
                       const sf_report *report, const sf_reference *ref, void *user)
{
    (void)summary, (void)report, (void)ref;
    struct scan *s = user;
    int64_t i = job->meta.index;
    if (!(job->meta.flags & (SF_WIN_PARTIAL | SF_WIN_CLOSED_EARLY)))
        s->latest_full = i;
    s->latest = i;
    s->first_seen = s->first_seen < 0 || i < s->first_seen ? i : s->first_seen;
    s->last_seen = i > s->last_seen ? i : s->last_seen;
    if (s->want->first >= 0 && i >= s->want->first && i <= s->want->last)
        s->in_range++;
    return 0;
}

int picture_source_select(struct picture_source *src, struct picture_select *sel)
{
    struct scan s = {
        .latest_full = -1, .latest = -1, .first_seen = -1, .last_seen = -1, .want = sel};
    size_t n = 0;
    int r =
        sfctl_replay_each(&src->input, src->label, src->prog, &src->report, scan_window, &s, &n);
    if (r < 0)
        return r == -ENOMEM ? SFCTL_EXIT_INTERNAL : SFCTL_EXIT_INPUT;
    if (n == 0) {
        fprintf(stderr, "%s: %s: no window (every step is within the warmup steps)\n", src->prog,
                src->label);
        return SFCTL_EXIT_NOT_FOUND;
    }
    if (sel->first < 0) {
        sel->first = sel->last = s.latest_full >= 0 ? s.latest_full : s.latest;
        return SFCTL_EXIT_OK;
    }
    if (s.in_range == 0) {
        fprintf(stderr, "%s: %s: no window %lld", src->prog, src->label, (long long)sel->first);
        if (sel->last != sel->first)
            fprintf(stderr, "-%lld", (long long)sel->last);
        fprintf(stderr, " (its windows are %lld-%lld)\n", (long long)s.first_seen,
                (long long)s.last_seen);
        return SFCTL_EXIT_NOT_FOUND;
    }
    return SFCTL_EXIT_OK;
}

struct each_ctx {
    const struct picture_select *sel;
    sfctl_window_visit visit;
    void *user;
};

static int each_selected(const struct window_job *job, const sf_summary *summary,
                         const sf_report *report, const sf_reference *ref, void *user)
{
    struct each_ctx *c = user;
    if (job->meta.index < c->sel->first || job->meta.index > c->sel->last)
        return 0;
    return c->visit(job, summary, report, ref, c->user);
}

int picture_source_each(struct picture_source *src, const struct picture_select *sel,
                        sfctl_window_visit visit, void *user)
{
    struct each_ctx c = {sel, visit, user};
    return sfctl_replay_each(&src->input, src->label, src->prog, &src->report, each_selected, &c,
                             NULL);
}

static int parse_index(const char *s, char **end, int64_t *ret)
{
    if (*s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    long long v = strtoll(s, end, 10);
    if (errno != 0)
        return -EINVAL;
    *ret = v;
    return 0;
}

int picture_parse_windows(const char *text, bool range_ok, struct picture_select *sel)
{
    char *end;
    if (parse_index(text, &end, &sel->first) < 0)
        return -EINVAL;
    sel->last = sel->first;
    if (*end == '-' && range_ok && parse_index(end + 1, &end, &sel->last) < 0)
        return -EINVAL;
    return *end == '\0' && sel->last >= sel->first ? 0 : -EINVAL;
}

/* ---- atomic output ------------------------------------------------------- */

/* A target that exists and is not a regular file (a terminal, a pipe,
 * /dev/stdout) is written in place: renaming over it would replace it. */
static bool write_in_place(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode);
}

int picture_out_open(struct picture_out *o, const char *prog, const char *path)
{
    *o = (struct picture_out){0};
    size_t len = strlen(path);
    o->path = strdup(path);
    if (o->path != NULL && write_in_place(path)) {
        if ((o->f = fopen(path, "we")) != NULL)
            return SFCTL_EXIT_OK;
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
        picture_out_abort(o);
        return SFCTL_EXIT_INTERNAL;
    }
    o->tmp = malloc(len + 8);
    if (o->path == NULL || o->tmp == NULL) {
        picture_out_abort(o);
        return SFCTL_EXIT_INTERNAL;
    }
    snprintf(o->tmp, len + 8, "%s.XXXXXX", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        picture_out_abort(o);
        return SFCTL_EXIT_INTERNAL;
    }
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask); /* mkstemp's 0600 is for the temp name only */
    o->f = fdopen(fd, "w");
    if (o->f == NULL) {
        close(fd);
        picture_out_abort(o);
        return SFCTL_EXIT_INTERNAL;
    }
    return SFCTL_EXIT_OK;
}

int picture_out_commit(struct picture_out *o, const char *prog)
{
    bool ok = fflush(o->f) == 0 && !ferror(o->f);
    if (ok && o->tmp != NULL)
        ok = fsync(fileno(o->f)) == 0;
    int err = errno;
    ok = fclose(o->f) == 0 && ok;
    o->f = NULL;
    if (ok && o->tmp != NULL && rename(o->tmp, o->path) < 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, o->path, strerror(err ? err : EIO));
        picture_out_abort(o);
        return SFCTL_EXIT_INTERNAL;
    }
    free(o->tmp);
    o->tmp = NULL;
    picture_out_abort(o);
    return SFCTL_EXIT_OK;
}

void picture_out_abort(struct picture_out *o)
{
    if (o->f != NULL)
        fclose(o->f);
    if (o->tmp != NULL)
        unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    *o = (struct picture_out){0};
}

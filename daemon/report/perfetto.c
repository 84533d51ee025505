/*
 * Chrome trace JSON writer (perfetto.h). Times are microseconds written with
 * three decimals, so every span is exact to the ns; each span also carries
 * its duration in integer ns. Process 1 is the frontier, process 2 the ranks
 * (thread id = rank). It formats onto a given stream and does no other I/O.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "perfetto.h"

#define PID_FRONTIER 1
#define PID_RANKS 2

/* ns as decimal microseconds: exact, and what the format's ts and dur mean. */
static const char *us(char *buf, size_t len, int64_t ns)
{
    snprintf(buf, len, "%s%lld.%03lld", ns < 0 ? "-" : "", (long long)(ns < 0 ? -ns : ns) / 1000,
             (long long)(ns < 0 ? -ns : ns) % 1000);
    return buf;
}

static void sep(sf_trace_writer *w)
{
    fputs(w->any ? ",\n" : "\n", w->out);
    w->any = true;
    w->events++;
}

/* A JSON string literal (quoted, escaped); NULL when out of memory. */
static char *quoted(const char *text)
{
    json_t *s = json_string(text);
    char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    json_decref(s);
    return q;
}

static void meta(sf_trace_writer *w, int pid, int64_t tid, const char *what, const char *qname)
{
    sep(w);
    if (tid < 0)
        fprintf(w->out, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"%s\",\"args\":{\"name\":%s}}", pid,
                what, qname);
    else
        fprintf(w->out,
                "{\"ph\":\"M\",\"pid\":%d,\"tid\":%lld,\"name\":\"%s\",\"args\":{\"name\":%s}}",
                pid, (long long)tid, what, qname);
}

int sf_trace_begin(sf_trace_writer *w, FILE *out, const char *job)
{
    *w = (sf_trace_writer){.out = out};
    char title[300];
    snprintf(title, sizeof title, "%s frontier", job);
    char *qf = quoted(title);
    snprintf(title, sizeof title, "%s ranks", job);
    char *qr = quoted(title);
    if (qf == NULL || qr == NULL) {
        free(qf);
        free(qr);
        return -ENOMEM;
    }
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
    meta(w, PID_FRONTIER, -1, "process_name", qf);
    meta(w, PID_FRONTIER, 1, "thread_name", "\"frontier\"");
    meta(w, PID_RANKS, -1, "process_name", qr);
    free(qf);
    free(qr);
    return 0;
}

/* ---- one window ------------------------------------------------------------ */

struct window_ctx {
    sf_trace_writer *w;
    const sf_summary *s;
    const sf_report *r;
    char *names[SF_MAX_STAGES]; /* quoted stage names */
    uint32_t S;
};

/* Rows in (step, rank) order, as sort keys so qsort needs no context. */
struct row_key {
    int64_t step;
    uint32_t rank;
    size_t at;
};

static int cmp_row(const void *a, const void *b)
{
    const struct row_key *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static void rank_spans(struct window_ctx *c, const sf_row *row, int64_t t0)
{
    char ts[32], dur[32];
    int64_t at = t0;
    for (uint32_t k = 0; k < c->S; k++) {
        sep(c->w);
        fprintf(c->w->out,
                "{\"ph\":\"X\",\"cat\":\"stage\",\"pid\":%d,\"tid\":%u,\"name\":%s,\"ts\":%s,"
                "\"dur\":%s,\"args\":{\"window\":%lld,\"step\":%lld,\"dur_ns\":%lld}}",
                PID_RANKS, row->rank, c->names[k], us(ts, sizeof ts, at),
                us(dur, sizeof dur, row->d[k]), (long long)c->r->meta.index, (long long)row->step,
                (long long)row->d[k]);
        at += row->d[k];
        bool arrival = (c->s->schema.sync_mask >> k) & 1u;
        if (arrival && !(row->flags & SF_ROW_ARRIVAL_MISSING)) {
            sep(c->w);
            fprintf(c->w->out,
                    "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"arrival\",\"pid\":%d,\"tid\":%u,"
                    "\"name\":\"arrival\",\"ts\":%s,\"args\":{\"stage\":%s,\"step\":%lld}}",
                    PID_RANKS, row->rank, us(ts, sizeof ts, at), c->names[k], (long long)row->step);
        }
    }
}

static void frontier_spans(struct window_ctx *c, const sf_step_summary *st, int64_t t0,
                           uint32_t n_ranks)
{
    char ts[32], dur[32], leader[16];
    int64_t before = 0;
    for (uint32_t k = 0; k < c->S; k++) {
        const sf_top2 *t = &st->prefix_top2[k];
        bool unique = t->v2 != INT64_MIN && t->v1 - t->v2 > c->r->leader_gap_tol_ns;
        if (unique)
            snprintf(leader, sizeof leader, "%u", t->r1);
        else
            snprintf(leader, sizeof leader, "null");
        sep(c->w);
        fprintf(c->w->out,
                "{\"ph\":\"X\",\"cat\":\"frontier\",\"pid\":%d,\"tid\":1,\"name\":%s,\"ts\":%s,"
                "\"dur\":%s,\"args\":{\"window\":%lld,\"step\":%lld,\"advance_ns\":%lld,"
                "\"leader\":%s,\"complete\":%s}}",
                PID_FRONTIER, c->names[k], us(ts, sizeof ts, t0 + before),
                us(dur, sizeof dur, t->v1 - before), (long long)c->r->meta.index,
                (long long)st->step, (long long)(t->v1 - before), leader,
                st->n_ranks == n_ranks ? "true" : "false");
        before = t->v1;
    }
}

static void instant(struct window_ctx *c, const char *cat, const char *qname, json_t *args)
{
    char ts[32];
    char *a = args ? json_dumps(args, JSON_COMPACT) : NULL;
    sep(c->w);
    fprintf(c->w->out,
            "{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"%s\",\"pid\":%d,\"tid\":1,\"name\":%s,\"ts\":%s,"
            "\"args\":%s}",
            cat, PID_FRONTIER, qname, us(ts, sizeof ts, c->w->t_ns), a ? a : "{}");
    free(a);
    json_decref(args);
}

/* The window's verdicts at its first step: the window itself, its labels,
 * the straggler and the change. */
static int verdicts(struct window_ctx *c)
{
    const sf_report *r = c->r;
    char text[400];
    int len = snprintf(text, sizeof text, "labels:");
    for (int b = 0; b < SF_LABEL_COUNT; b++)
        if (r->labels & (1u << b))
            len += snprintf(text + len, sizeof text - (size_t)len, " %s",
                            sf_label_name((enum sf_label)b));
    char *q = quoted(text);
    snprintf(text, sizeof text, "window %lld", (long long)r->meta.index);
    char *qw = quoted(text);
    if (q == NULL || qw == NULL) {
        free(q);
        free(qw);
        return -ENOMEM;
    }
    instant(c, "window", qw,
            json_pack("{s:I, s:I, s:I}", "window", (json_int_t)r->meta.index, "segment",
                      (json_int_t)r->meta.segment, "steps", (json_int_t)r->steps));
    instant(c, "labels", q, NULL);
    free(q);
    free(qw);
    if (r->straggler.present) {
        const sf_straggler *v = &r->straggler;
        snprintf(text, sizeof text, "straggler: rank %u", v->rank);
        q = quoted(text);
        if (q == NULL)
            return -ENOMEM;
        instant(c, "verdict", q,
                json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:s}", "rank", (json_int_t)v->rank,
                          "sync_stage", r->schema.names[v->sync_stage], "origin_stage",
                          r->schema.names[v->origin_stage], "arrived_last_steps",
                          (json_int_t)v->arrived_last_steps, "eligible_steps",
                          (json_int_t)v->eligible_steps, "median_lateness_ns",
                          (json_int_t)v->median_lateness_ns, "persistence",
                          sf_persistence_name(v->persistence)));
        free(q);
    }
    if (r->change != NULL && r->change->n_route > 0) {
        snprintf(text, sizeof text, "change: %s", r->schema.names[r->change->route[0]]);
        q = quoted(text);
        if (q == NULL)
            return -ENOMEM;
        instant(c, "verdict", q,
                json_pack("{s:f, s:I}", "slowdown", r->change->slowdown, "step_shift_ns",
                          (json_int_t)r->change->step.delta_ns));
        free(q);
    }
    return 0;
}

static void thread_names(struct window_ctx *c)
{
    char name[32];
    for (uint32_t i = 0; i < c->s->n_intervals; i++)
        for (uint64_t r = c->s->coverage[i].lo; r <= c->s->coverage[i].hi; r++) {
            snprintf(name, sizeof name, "\"rank %llu\"", (unsigned long long)r);
            meta(c->w, PID_RANKS, (int64_t)r, "thread_name", name);
            sep(c->w);
            fprintf(c->w->out,
                    "{\"ph\":\"M\",\"pid\":%d,\"tid\":%llu,\"name\":\"thread_sort_index\","
                    "\"args\":{\"sort_index\":%llu}}",
                    PID_RANKS, (unsigned long long)r, (unsigned long long)r);
        }
}

static void lay_steps(struct window_ctx *c, const sf_row *rows, const struct row_key *order,
                      size_t n_rows)
{
    uint32_t n_ranks = (uint32_t)sf_summary_covered_ranks(c->s);
    size_t at = 0;
    for (uint32_t i = 0; i < c->s->n_steps; i++) {
        const sf_step_summary *st = &c->s->steps[i];
        while (at < n_rows && order[at].step < st->step)
            at++;
        for (; at < n_rows && order[at].step == st->step; at++)
            rank_spans(c, &rows[order[at].at], c->w->t_ns);
        frontier_spans(c, st, c->w->t_ns, n_ranks);
        c->w->t_ns += st->prefix_top2[c->S - 1].v1;
    }
}

int sf_trace_window(sf_trace_writer *w, const sf_summary *summary, const sf_report *report,
                    const sf_row *rows, size_t n_rows)
{
    struct window_ctx c = {.w = w, .s = summary, .r = report, .S = summary->schema.n_stages};
    struct row_key *order = malloc((n_rows ? n_rows : 1) * sizeof *order);
    int rc = order == NULL ? -ENOMEM : 0;
    for (uint32_t k = 0; rc == 0 && k < c.S; k++)
        if ((c.names[k] = quoted(summary->schema.names[k])) == NULL)
            rc = -ENOMEM;
    if (rc == 0) {
        for (size_t i = 0; i < n_rows; i++)
            order[i] = (struct row_key){rows[i].step, rows[i].rank, i};
        qsort(order, n_rows, sizeof *order, cmp_row);
        thread_names(&c);
        rc = verdicts(&c);
    }
    if (rc == 0)
        lay_steps(&c, rows, order, n_rows);
    for (uint32_t k = 0; k < c.S; k++)
        free(c.names[k]);
    free(order);
    if (rc == 0 && ferror(w->out))
        rc = -EIO;
    return rc;
}

int sf_trace_end(sf_trace_writer *w)
{
    fputs("\n]}\n", w->out);
    return ferror(w->out) ? -EIO : 0;
}

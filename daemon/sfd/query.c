/*
 * sfd query socket: request decoding, access rules (root and operators_group
 * see every job, other users their own), the JSON answers, and chunked
 * non-blocking responses of at most 48 KiB, paced by the reader (REPORT,
 * RECORD and RANKS are produced as they are sent, query_stream.c). Never
 * changes job state.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capture.h"
#include "history.h"
#include "query.pb-c.h"
#include "sfd.h"

/* The peer's supplementary groups as the kernel saw them at connect time
 * (SO_PEERGROUPS); 0 when unavailable. */
static int peer_groups(int fd, gid_t *groups, int cap)
{
    socklen_t len = (socklen_t)(cap * (int)sizeof(gid_t));
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
        return -errno;
    return (int)(len / sizeof(gid_t));
}

bool sfd_query_is_operator(struct sfd *d, int fd, uid_t uid, gid_t gid)
{
    gid_t groups[256];
    if (uid == 0)
        return true;
    if (!d->have_operators_gid)
        return false;
    if (gid == d->operators_gid)
        return true;
    int n = peer_groups(fd, groups, 256);
    if (n < 0) {
        /* Older kernels: the group database's view of the user. */
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || res == NULL)
            return false;
        n = 256;
        if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
            return false;
    }
    for (int i = 0; i < n; i++)
        if (groups[i] == d->operators_gid)
            return true;
    return false;
}

/* ---- answers ------------------------------------------------------------- */

/* The jobs with a live verdict in force (docs/LIVE.md), by name. */
static json_t *verdicts_json(struct sfd *d)
{
    json_t *a = json_array();
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        json_t *v = sfd_verdict_json(j);
        if (json_is_null(v)) {
            json_decref(v);
            continue;
        }
        char name[SFD_JOB_NAME_MAX + 16];
        sfd_job_name(d, j, name, sizeof name);
        json_array_append_new(a, json_pack("{s:s, s:o}", "job", name, "verdict", v));
    }
    return a;
}

static json_t *status_json(struct sfd *d)
{
    json_t *rej = json_object();
    uint64_t total = 0;
    for (int i = 0; i < SFD_REJ_COUNT; i++) {
        json_object_set_new(rej, sfd_reject_name(i), json_integer((json_int_t)d->ctr.rejected[i]));
        total += d->ctr.rejected[i];
    }
    uint32_t nq = d->n_query_conns;
    struct sfd_budget_limits lim = sfd_mem_limits(d);
    json_t *mem = sfd_budget_json(&d->mem, &lim);
    uint64_t term;
    const char *role = sfd_cluster_role(d, &term);
    json_t *status = json_pack(
        "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:I, s:I, s:I, s:I, s:o, s:o}",
        "mode", sfd_cluster_mode(d), "role", role, "term", (json_int_t)term, "uptime_s",
        (json_int_t)((sfd_now_ms(d) - d->start_ms) / 1000), "connections",
        (json_int_t)(d->n_conns - nq), "query_connections", (json_int_t)nq, "connections_accepted",
        (json_int_t)d->ctr.connections_accepted, "jobs", (json_int_t)d->n_jobs, "records",
        (json_int_t)d->ctr.records, "batches", (json_int_t)d->ctr.batches, "nccl_batches",
        (json_int_t)d->ctr.nccl_batches, "enqueue_points", (json_int_t)d->ctr.enqueue_points,
        "kernel_points", (json_int_t)d->ctr.kernel_points, "kernel_issue_lags",
        (json_int_t)d->ctr.kernel_issue_lags, "warmup_records", (json_int_t)d->ctr.warmup_records,
        "dropped", (json_int_t)d->ctr.dropped, "shed_batches", (json_int_t)d->ctr.shed_batches,
        "shed_records", (json_int_t)d->ctr.shed_records, "windows_closed",
        (json_int_t)d->ctr.windows_closed, "query_requests", (json_int_t)d->ctr.query_requests,
        "rejected_total", (json_int_t)total, "rejected", rej, "memory", mem);
    if (status != NULL) {
        json_object_set_new(status, "history", sfd_history_json(d));
        json_object_set_new(status, "verdicts", verdicts_json(d));
    }
    return status;
}

static json_t *job_json(const struct sfd_job *j)
{
    json_t *stages = json_array();
    for (uint32_t i = 0; i < j->schema.n_stages; i++)
        json_array_append_new(stages, json_string(j->schema.names[i]));
    const sf_report *latest = sfd_job_latest_report(j);
    json_t *o = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, "
        "s:o, s:I, s:I, s:s}",
        "job_id", j->id, "uid", (json_int_t)j->uid, "memory_bytes",
        (json_int_t)sfd_job_mem_total(j), "evicted_windows", (json_int_t)j->evicted_windows,
        "world_size", (json_int_t)j->world_size, "connected_ranks", (json_int_t)j->n_live_ranks,
        "segment", (json_int_t)j->segment, "records", (json_int_t)j->records, "dropped",
        (json_int_t)j->dropped, "rejected", (json_int_t)j->rejected, "shed_records",
        (json_int_t)j->shed_records, "windows", (json_int_t)j->n_stored, "open_windows",
        (json_int_t)j->n_open, "accumulation", (json_int_t)j->schema.accumulation, "latest_window",
        latest ? json_integer(latest->meta.index) : json_null(), "stages", stages, "window_steps",
        (json_int_t)j->gates.window_steps, "warmup_steps", (json_int_t)j->gates.warmup_steps,
        "window_geometry",
        j->geometry_clamped ? "clamped"
        : j->geometry_asked ? "job"
                            : "daemon");
    if (o != NULL) {
        char name[SF_MAX_JOB_ID_LEN + 32];
        sfd_job_name(j->sfd, j, name, sizeof name);
        json_object_set_new(o, "name", json_string(name));
        json_object_set_new(o, "incarnation", json_integer(j->incarnation));
        json_object_set_new(o, "newest", json_boolean(sfd_job_is_newest(j->sfd, j)));
        json_object_set_new(o, "run_id", json_string(j->run_id));
        json_object_set_new(o, "restart_count", json_integer(j->restart_count));
        json_object_set_new(o, "state", json_string(sfd_job_state(j)));
        json_object_set_new(o, "stalled", sfd_job_stall_json(j));
        json_object_set_new(o, "verdict", sfd_verdict_json(j));
    }
    return o;
}

static json_t *jobs_json(struct sfd *d, uid_t uid, bool op)
{
    sfd_liveness_refresh(d); /* never a state older than the clock */
    json_t *a = json_array();
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        if (sfd_job_visible(d, j, uid, op))
            json_array_append_new(a, job_json(j));
    return a;
}

static int cmp_report(const void *a, const void *b)
{
    const sf_report *x = *(const sf_report *const *)a, *y = *(const sf_report *const *)b;
    if (x->meta.segment != y->meta.segment)
        return x->meta.segment < y->meta.segment ? -1 : 1;
    if (x->meta.index != y->meta.index)
        return x->meta.index < y->meta.index ? -1 : 1;
    return 0;
}

/* The latest window that ran its full length, else the latest: a short job's
 * last window is closed partial (or early) and says little. */
static size_t latest_complete(const sf_report **v, size_t n)
{
    for (size_t i = n; i-- > 0;)
        if (!(v[i]->meta.flags & (SF_WIN_PARTIAL | SF_WIN_CLOSED_EARLY)))
            return i;
    return n - 1;
}

/* Reports of a job in (segment, index) order: one window index (all its
 * segments), the latest `limit`, or (limit 0) the latest complete one. */
static int select_reports(const struct sfd_job *j, bool has_window, int64_t window, uint32_t limit,
                          const sf_report ***ret, size_t *ret_n)
{
    const sf_report **v = calloc(j->n_stored ? j->n_stored : 1, sizeof(*v));
    size_t n = 0;
    if (v == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < j->n_stored; i++) {
        const sf_report *r = j->stored[i].report;
        if (r != NULL && (!has_window || r->meta.index == window))
            v[n++] = r;
    }
    qsort(v, n, sizeof(*v), cmp_report);
    if (!has_window && limit == 0 && n > 0) {
        v[0] = v[latest_complete(v, n)];
        n = 1;
    } else if (!has_window && n > limit) {
        memmove(v, v + (n - limit), limit * sizeof(*v));
        n = limit;
    }
    if (n == 0) {
        free(v);
        return -ENOENT;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

/* Writes a message into err's own text and points err->msg at it. */
__attribute__((format(printf, 2, 3))) static void err_printf(struct sfd_query_err *err,
                                                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof(err->text), fmt, ap);
    va_end(ap);
    err->msg = err->text;
}

/* The one job an unqualified id names among all uids (root and operators):
 * the incarnation asked for (or the newest) of the only uid that has one,
 * or an error naming the uids to choose from. */
static int find_unqualified(struct sfd *d, const struct sfd_job_ref *jr, struct sfd_job **ret,
                            struct sfd_query_err *err)
{
    struct sfd_job *found = NULL;
    int n = 0;
    size_t len = 0;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        if (strcmp(j->id, jr->id) != 0 ||
            (jr->incarnation ? j->incarnation != jr->incarnation : !sfd_job_is_newest(d, j)))
            continue;
        found = j;
        if (n++ == 0)
            len = (size_t)snprintf(err->text, sizeof(err->text),
                                   "job id used by several uids, name one as UID/%s:", jr->id);
        if (len < sizeof(err->text))
            len +=
                (size_t)snprintf(err->text + len, sizeof(err->text) - len, " %u", (unsigned)j->uid);
    }
    if (n != 1) {
        err->msg = n == 0 ? "unknown job" : err->text;
        return n == 0 ? -ENOENT : -EINVAL;
    }
    *ret = found;
    return 0;
}

/* The only job a user can mean without naming one: the newest incarnation
 * of the only (uid, id) visible to them. */
static int find_only(struct sfd *d, uid_t uid, bool op, struct sfd_job **ret,
                     struct sfd_query_err *err)
{
    struct sfd_job *only = NULL;
    int n = 0;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        if (sfd_job_visible(d, j, uid, op) && sfd_job_is_newest(d, j)) {
            only = j;
            n++;
        }
    if (n != 1) {
        err->msg = n == 0 ? "no jobs" : "several jobs: name one";
        return n == 0 ? -ENOENT : -EINVAL;
    }
    *ret = only;
    return 0;
}

/* A user names their own jobs ("JOB"); root and operators name any job,
 * "UID/JOB" where two uids use the same id; "@N" names incarnation N. A
 * plain user's bare id never reaches another uid's job (it is looked up in
 * their own namespace), so only "UID/JOB" of another uid is a refusal. */
static int find_job(struct sfd *d, uid_t uid, bool op, const char *ref, struct sfd_job **ret,
                    struct sfd_query_err *err)
{
    if (ref == NULL || ref[0] == '\0')
        return find_only(d, uid, op, ret, err);
    struct sfd_job_ref jr;
    if (sfd_job_ref_parse(ref, &jr) < 0) {
        err->msg = "bad job name";
        return -EINVAL;
    }
    if (!jr.has_uid && (op || uid == 0))
        return find_unqualified(d, &jr, ret, err);
    struct sfd_job *j = sfd_job_lookup(d, jr.has_uid ? jr.uid : uid, jr.id, jr.incarnation);
    if (j == NULL) {
        err->msg = "unknown job";
        return -ENOENT;
    }
    if (!sfd_job_visible(d, j, uid, op)) {
        err_printf(err,
                   "access denied: job %u/%s belongs to uid %u; uid %u sees only its own jobs "
                   "(root and the members of operators_group '%s' see all)",
                   (unsigned)j->uid, j->id, (unsigned)j->uid, (unsigned)uid,
                   d->cfg.operators_group);
        return -EACCES;
    }
    *ret = j;
    return 0;
}

static int dump_json(json_t *o, char **ret, size_t *ret_len)
{
    if (o == NULL)
        return -ENOMEM;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s == NULL)
        return -ENOMEM;
    *ret = s;
    *ret_len = strlen(s);
    return 0;
}

/* BASELINE: unpin, pin a window, or only show. */
static int answer_baseline(struct sfd_job *j, const Stagefrontier__QueryRequest *q, char **ret,
                           size_t *ret_len, struct sfd_query_err *err)
{
    int r = 0;
    if (q->has_clear && q->clear)
        r = sfd_baseline_unpin(j, &err->msg);
    else if (q->has_window && q->window >= 0)
        r = sfd_baseline_pin(j, q->window, &err->msg);
    return r < 0 ? r : dump_json(sfd_baseline_json(j), ret, ret_len);
}

/* CAPTURE: asks the ranks for a trace; the answer is the new capture. */
static int answer_capture(struct sfd_job *j, uid_t uid, const Stagefrontier__QueryRequest *q,
                          char **ret, size_t *ret_len, struct sfd_query_err *err)
{
    struct sfd_capture_ask ask = {.ranks = q->ranks,
                                  .n_ranks = (uint32_t)q->n_ranks,
                                  .suspects = q->has_suspects && q->suspects,
                                  .steps = q->has_steps ? q->steps : 0,
                                  .uid = uid};
    uint64_t id;
    if (q->n_ranks > SF_MAX_CAPTURE_RANKS) {
        err->msg = "name 1..16 ranks";
        return -EINVAL;
    }
    int r = sfd_capture_ask(j, &ask, &id, &err->msg);
    return r < 0 ? r : dump_json(sfd_capture_json(j, id), ret, ret_len);
}

/* REPORT: the selected windows' reports, streamed. */
static int answer_report(struct sfd *d, struct sfd_job *j, const Stagefrontier__QueryRequest *q,
                         struct sfd_qstream **ret_stream, struct sfd_query_err *err)
{
    const sf_report **v;
    size_t n;
    bool has_window = q->has_window && q->window >= 0;
    uint32_t limit = q->has_limit ? q->limit : 0;
    int r = select_reports(j, has_window, q->window, limit, &v, &n);
    if (r < 0) {
        err->msg = has_window ? "unknown window" : "no window closed yet";
        return r;
    }
    r = sfd_qstream_open_report(d, j, v, n, q->has_format && q->format == 1, ret_stream);
    free(v);
    return r;
}

/* A whole answer in *ret, or for REPORT, RECORD and RANKS, whose size grows
 * with the job, a stream in *ret_stream to be produced as the reader drains it. */
static int answer(struct sfd *d, uid_t uid, bool op, const Stagefrontier__QueryRequest *q,
                  char **ret, size_t *ret_len, struct sfd_qstream **ret_stream,
                  struct sfd_query_err *err)
{
    struct sfd_job *j = NULL;
    int r;
    switch (q->kind) {
    case STAGEFRONTIER__QUERY_REQUEST__KIND__STATUS:
        return dump_json(status_json(d), ret, ret_len);
    case STAGEFRONTIER__QUERY_REQUEST__KIND__JOBS:
        return dump_json(jobs_json(d, uid, op), ret, ret_len);
    case STAGEFRONTIER__QUERY_REQUEST__KIND__PEERS:
        r = sfd_cluster_peers(d, ret);
        if (r == 0)
            *ret_len = strlen(*ret);
        return r;
    case STAGEFRONTIER__QUERY_REQUEST__KIND__RANKS:
        r = find_job(d, uid, op, q->job_id, &j, err);
        if (r < 0)
            return r;
        sfd_liveness_refresh_job(d, j); /* its ranks never older than the clock */
        return sfd_qstream_open_ranks(d, j, ret_stream);
    case STAGEFRONTIER__QUERY_REQUEST__KIND__RECORD:
        r = find_job(d, uid, op, q->job_id, &j, err);
        return r < 0 ? r : sfd_qstream_open_record(d, j, ret_stream);
    case STAGEFRONTIER__QUERY_REQUEST__KIND__BASELINE:
        r = find_job(d, uid, op, q->job_id, &j, err);
        return r < 0 ? r : answer_baseline(j, q, ret, ret_len, err);
    case STAGEFRONTIER__QUERY_REQUEST__KIND__CAPTURE:
        r = find_job(d, uid, op, q->job_id, &j, err);
        return r < 0 ? r : answer_capture(j, uid, q, ret, ret_len, err);
    case STAGEFRONTIER__QUERY_REQUEST__KIND__CAPTURES:
        r = find_job(d, uid, op, q->job_id, &j, err);
        return r < 0 ? r : dump_json(sfd_captures_json(j), ret, ret_len);
    case STAGEFRONTIER__QUERY_REQUEST__KIND__REPORT:
        r = find_job(d, uid, op, q->job_id, &j, err);
        return r < 0 ? r : answer_report(d, j, q, ret_stream, err);
    case STAGEFRONTIER__QUERY_REQUEST__KIND__EVENTS:
        r = find_job(d, uid, op, q->job_id, &j, err);
        if (r == 0)
            sfd_liveness_refresh_job(d, j);
        return r < 0 ? r : dump_json(sfd_verdict_events_json(j), ret, ret_len);
    default:
        err->msg = "unknown request kind";
        return -EINVAL;
    }
}

static int query_begin(struct sfd *d, uid_t uid, bool op, const uint8_t *req, size_t len,
                       char **ret_text, size_t *ret_len, struct sfd_qstream **ret_stream,
                       struct sfd_query_err *err)
{
    err->msg = "bad request";
    if (len == 0 || len > SFD_QUERY_REQ_MAX)
        return -EINVAL;
    Stagefrontier__QueryRequest *q = stagefrontier__query_request__unpack(NULL, len, req);
    if (q == NULL)
        return -EINVAL;
    int r = -EINVAL;
    struct sfd_job_ref ref;
    if (q->job_id != NULL && q->job_id[0] != '\0' && sfd_job_ref_parse(q->job_id, &ref) < 0)
        goto out;
    if (q->has_format && q->format > 1)
        goto out;
    err->msg = NULL;
    r = answer(d, uid, op, q, ret_text, ret_len, ret_stream, err);
    if (r < 0 && err->msg == NULL)
        err->msg = strerror(-r);
out:
    stagefrontier__query_request__free_unpacked(q, NULL);
    return r;
}

int sfd_query_answer(struct sfd *d, uid_t uid, bool op, const uint8_t *req, size_t len,
                     char **ret_text, size_t *ret_len, struct sfd_query_err *err)
{
    struct sfd_qstream *st = NULL;
    char *text = NULL;
    size_t n = 0, cap = 0;
    int r = query_begin(d, uid, op, req, len, &text, &n, &st, err);
    if (r < 0 || st == NULL) {
        if (r == 0) {
            *ret_text = text;
            *ret_len = n;
        }
        return r;
    }
    /* No socket to pace it: produce the whole stream. */
    bool done = false;
    while (r == 0 && !done)
        r = sfd_qstream_fill(d, st, &text, &n, &cap, n + SFD_QUERY_CHUNK, 0, &done, &err->msg);
    sfd_qstream_free(st);
    if (r == 0) {
        char *t = realloc(text, n + 1); /* NUL-terminated, like the whole answers */
        text = t != NULL ? t : text;
        r = t != NULL ? 0 : -ENOMEM;
    }
    if (r < 0) {
        free(text);
        return r;
    }
    text[n] = '\0';
    *ret_text = text;
    *ret_len = n;
    return 0;
}

/* ---- responses ------------------------------------------------------------ */

static int send_response(struct sfd_conn *c, int32_t status, const char *err, const char *chunk,
                         size_t n, bool more)
{
    Stagefrontier__QueryResponse resp = STAGEFRONTIER__QUERY_RESPONSE__INIT;
    uint8_t buf[SFD_QUERY_CHUNK + 1024];
    resp.status = status;
    resp.error = (char *)err;
    if (chunk != NULL) {
        resp.has_chunk = true;
        resp.chunk.data = (uint8_t *)chunk;
        resp.chunk.len = n;
    }
    resp.has_more = true;
    resp.more = more;
    size_t len = stagefrontier__query_response__pack(&resp, buf);
    ssize_t w = send(c->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0)
        return errno == EAGAIN ? -EAGAIN : -errno;
    return 0;
}

static void end_answer(struct sfd_conn *c)
{
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = c->out_cap = 0;
    sfd_qstream_free(c->stream);
    c->stream = NULL;
    uv_poll_start(&c->poll, UV_READABLE, c->poll.poll_cb);
}

/* Tops a streamed answer up to one chunk, moving what is unsent to the front
 * so the buffer never grows past a chunk and one item: the output cap. */
static int refill(struct sfd_conn *c, uint64_t deadline_ns, const char **ret_err)
{
    size_t left = c->out_len - c->out_off;
    if (c->stream == NULL || left >= SFD_QUERY_CHUNK)
        return 0;
    if (c->out_off > 0) {
        memmove(c->out, c->out + c->out_off, left);
        c->out_len = left;
        c->out_off = 0;
    }
    bool done;
    int r = sfd_qstream_fill(c->sfd, c->stream, &c->out, &c->out_len, &c->out_cap, SFD_QUERY_CHUNK,
                             deadline_ns, &done, ret_err);
    if (r == 0 && done) {
        sfd_qstream_free(c->stream);
        c->stream = NULL;
    }
    return r;
}

/* Sends what the socket takes, producing streamed answers as it goes, for at
 * most SFD_QUERY_TURN_NS: then the loop serves others and comes back on the
 * next writable event. A reader that stops reading stops the producing too. */
void sfd_query_writable(struct sfd_conn *c)
{
    uint64_t deadline = uv_hrtime() + SFD_QUERY_TURN_NS;
    while (c->out != NULL || c->stream != NULL) {
        const char *err = NULL;
        int r = refill(c, deadline, &err);
        if (r < 0) {
            /* Part of the answer is out: an error ends it, never a short one. */
            end_answer(c);
            if (send_response(c, r, err ? err : strerror(-r), NULL, 0, false) < 0)
                sfd_conn_close(c);
            return;
        }
        size_t left = c->out_len - c->out_off;
        if (c->stream != NULL && left < SFD_QUERY_CHUNK)
            goto yield; /* the deadline came before a full chunk */
        size_t n = left < SFD_QUERY_CHUNK ? left : SFD_QUERY_CHUNK;
        bool more = n < left || c->stream != NULL;
        r = send_response(c, 0, NULL, c->out ? c->out + c->out_off : "", n, more);
        if (r == -EAGAIN)
            goto yield;
        if (r < 0) {
            sfd_conn_close(c);
            return;
        }
        c->out_off += n;
        c->last_io_ms = sfd_now_ms(c->sfd);
        if (!more) {
            end_answer(c);
            return;
        }
        if (uv_hrtime() >= deadline)
            goto yield;
    }
    return;
yield:
    uv_poll_start(&c->poll, UV_READABLE | UV_WRITABLE, c->poll.poll_cb);
}

int sfd_query_handle(struct sfd_conn *c, const uint8_t *buf, size_t len)
{
    struct sfd *d = c->sfd;
    if (c->out != NULL || c->stream != NULL) { /* one request at a time */
        d->ctr.rejected[SFD_REJ_QUERY_BAD]++;
        return -EPROTO;
    }
    d->ctr.query_requests++;
    c->last_io_ms = sfd_now_ms(d);
    bool op = sfd_query_is_operator(d, c->fd, c->uid, c->gid);
    char *text = NULL;
    size_t n = 0;
    struct sfd_query_err err = {0};
    struct sfd_qstream *st = NULL;
    int r = query_begin(d, c->uid, op, buf, len, &text, &n, &st, &err);
    if (r < 0) {
        d->ctr.rejected[r == -EACCES ? SFD_REJ_QUERY_DENIED : SFD_REJ_QUERY_BAD] +=
            (r == -EACCES || r == -EINVAL);
        return send_response(c, r, err.msg, NULL, 0, false) < 0 ? -EIO : 0;
    }
    c->out = text;
    c->out_len = c->out_cap = n;
    c->out_off = 0;
    c->stream = st;
    sfd_query_writable(c);
    return 0;
}

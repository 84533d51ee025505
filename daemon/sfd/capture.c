/*
 * Trace captures (capture.h, docs/SFD.md "Captures"): requests sent on the
 * ranks' ingest connections, replies matched to them, the automatic trigger
 * (a persisting verdict or change, a cooldown and a daily budget), timeouts
 * and the JSON answers; in a cluster, the requests and outcomes shared with
 * the other nodes through the cluster ops (docs/CLUSTER.md, "Captures"). A
 * capture is state of its job: bounded in number and size, dropped with the
 * job. Never changes windows or reports.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "capture.h"
#include "cluster.h"
#include "ingest.pb-c.h"
#include "peer.h"
#include "sfd.h"

enum target_state {
    T_REQUESTED, /* sent, no answer yet */
    T_ACCEPTED,  /* the client will capture from its next step */
    T_DONE,
    T_FAILED,        /* the client's handler or profiler failed */
    T_UNSUPPORTED,   /* the client has no capture handler */
    T_BUSY,          /* the client was capturing already */
    T_NOT_CONNECTED, /* no step-record connection of the rank on this node */
    T_UNDELIVERABLE, /* its socket refused the request */
    T_TIMED_OUT,     /* no outcome within capture_timeout_s */
};

/* A target's state travels between nodes as CaptureResult.State, one above. */
_Static_assert(T_REQUESTED + 1 == STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__REQUESTED &&
                   T_TIMED_OUT + 1 == STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__TIMED_OUT &&
                   T_NOT_CONNECTED + 1 == STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__NOT_CONNECTED,
               "capture states match the peer protocol's");

static const char *const target_names[] = {
    "requested", "accepted",      "done",          "failed",    "unsupported",
    "busy",      "not_connected", "undeliverable", "timed_out",
};

struct target {
    uint32_t rank;
    uint8_t state;
    bool control;                  /* the healthy control rank */
    uint32_t node;                 /* the cluster node hosting it, 0: none known */
    int64_t first_step, last_step; /* -1: unknown */
    int64_t started_at_ms, finished_at_ms;
    char *text; /* done: the trace path; else the reason; NULL: none */
};

struct capture {
    uint64_t id;
    bool automatic;
    int64_t window; /* the window behind it, -1: none */
    uint32_t segment;
    uint32_t steps;
    uid_t uid;
    char reason[SF_MAX_CAPTURE_REASON + 1];
    int64_t created_at_ms; /* realtime */
    uint64_t created_mono_ms;
    bool ended; /* counted in the table's done or failed */
    uint32_t n;
    struct target t[SF_MAX_CAPTURE_RANKS];
};

struct sfd_job_captures {
    struct capture *c[SFD_CAPTURES_KEPT]; /* oldest first */
    uint32_t n;
    /* the automatic trigger */
    int64_t considered_index;    /* the last window looked at, so a replaced report */
    uint32_t considered_segment; /* of the same window is not counted twice */
    bool considered_any;
    uint32_t route_rank, route_run;         /* the fallback: a fixed routed leader */
    uint64_t last_auto_ms;                  /* monotonic; 0: never */
    uint64_t auto_ms[SFD_AUTO_CAPTURE_MAX]; /* the last day's, a ring */
    uint32_t n_auto, auto_head;
    uint64_t auto_fired, auto_suppressed_cooldown, auto_suppressed_budget;
    /* since sfd started, by trigger (0 operator, 1 auto), for the export */
    uint64_t started[2], done[2], failed[2];
    int64_t last_created_ms;
};

/* ---- validation ---------------------------------------------------------------- */

int sfd_validate_capture_reply(const Stagefrontier__CaptureReply *r)
{
    if (r == NULL || r->id == 0)
        return -EINVAL;
    switch (r->state) {
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__ACCEPTED:
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__UNSUPPORTED:
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__BUSY:
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__FAILED:
        break;
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__DONE:
        if (r->path == NULL || r->path[0] == '\0')
            return -EINVAL;
        break;
    default:
        return -EINVAL;
    }
    if (r->has_first_step != r->has_last_step)
        return -EINVAL;
    if (r->has_first_step && (r->first_step < 0 || r->last_step < r->first_step ||
                              r->last_step - r->first_step >= SF_MAX_CAPTURE_STEPS))
        return -EINVAL;
    if (r->path != NULL && strnlen(r->path, SF_MAX_CAPTURE_PATH + 1) > SF_MAX_CAPTURE_PATH)
        return -EINVAL;
    if (r->error != NULL && strnlen(r->error, SF_MAX_CAPTURE_ERROR + 1) > SF_MAX_CAPTURE_ERROR)
        return -EINVAL;
    if ((r->has_started_at_ms && r->started_at_ms < 0) ||
        (r->has_finished_at_ms && r->finished_at_ms < 0))
        return -EINVAL;
    return 0;
}

/* ---- the table -------------------------------------------------------------------- */

static struct sfd_job_captures *table(struct sfd_job *job)
{
    if (job->captures == NULL) {
        job->captures = calloc(1, sizeof *job->captures);
        if (job->captures != NULL)
            sfd_job_force(job, SFD_MEM_JOBS, sizeof *job->captures);
    }
    return job->captures;
}

static uint64_t capture_bytes(const struct capture *k)
{
    uint64_t n = sizeof *k;
    for (uint32_t i = 0; i < k->n; i++)
        n += k->t[i].text != NULL ? strlen(k->t[i].text) + 1 : 0;
    return n;
}

static void capture_free(struct sfd_job *job, struct capture *k)
{
    if (k == NULL)
        return;
    sfd_job_release(job, SFD_MEM_JOBS, capture_bytes(k));
    for (uint32_t i = 0; i < k->n; i++)
        free(k->t[i].text);
    free(k);
}

static void set_text(struct sfd_job *job, struct target *t, const char *text)
{
    if (t->text != NULL) {
        sfd_job_release(job, SFD_MEM_JOBS, strlen(t->text) + 1);
        free(t->text);
        t->text = NULL;
    }
    if (text == NULL || text[0] == '\0')
        return;
    size_t n = strnlen(text, SF_MAX_CAPTURE_PATH) + 1;
    if (sfd_job_reserve(job, SFD_MEM_JOBS, n) < 0)
        return; /* the job's budget is spent: the state stays, the text goes */
    t->text = strndup(text, n - 1);
    if (t->text == NULL)
        sfd_job_release(job, SFD_MEM_JOBS, n);
}

static struct capture *find(struct sfd_job_captures *tb, uint64_t id)
{
    for (uint32_t i = 0; tb != NULL && i < tb->n; i++)
        if (tb->c[i]->id == id)
            return tb->c[i];
    return NULL;
}

static bool running(const struct capture *k)
{
    for (uint32_t i = 0; i < k->n; i++)
        if (k->t[i].state == T_REQUESTED || k->t[i].state == T_ACCEPTED)
            return true;
    return false;
}

static const char *capture_state(const struct capture *k)
{
    bool any_done = false;
    for (uint32_t i = 0; i < k->n; i++) {
        if (k->t[i].state == T_REQUESTED || k->t[i].state == T_ACCEPTED)
            return "running";
        any_done |= k->t[i].state == T_DONE;
    }
    return any_done ? "done" : "failed";
}

/* Counts a capture once, when no rank is left running, and tells the
 * Prometheus export. */
static void settle(struct sfd_job *job, struct capture *k)
{
    if (k->ended || running(k) || job->captures == NULL)
        return;
    k->ended = true;
    if (strcmp(capture_state(k), "done") == 0)
        job->captures->done[k->automatic]++;
    else
        job->captures->failed[k->automatic]++;
    job->sfd->prom_dirty = true;
}

/* ---- requests -------------------------------------------------------------------- */

static struct sfd_conn *rank_conn(struct sfd *d, const struct sfd_job *job, uint32_t rank)
{
    for (struct sfd_conn *c = d->conns; c != NULL; c = c->next)
        if (!c->query && !c->closing && c->hello && c->job == job && c->channel == 0 &&
            c->rank == rank)
            return c;
    return NULL;
}

static void send_request(struct sfd_conn *c, const struct capture *k, struct target *t)
{
    Stagefrontier__CaptureRequest q = STAGEFRONTIER__CAPTURE_REQUEST__INIT;
    q.id = k->id;
    q.steps = k->steps;
    Stagefrontier__ControlMessage m = STAGEFRONTIER__CONTROL_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CONTROL_MESSAGE__BODY_CAPTURE;
    m.capture = &q;
    uint8_t buf[64];
    size_t len = stagefrontier__control_message__pack(&m, buf);
    /* The client reads at its next flush; a full socket is its problem, never ours. */
    if (send(c->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len) {
        t->state = T_UNDELIVERABLE;
        return;
    }
    t->state = T_REQUESTED;
}

/* ---- sharing with the other nodes (docs/CLUSTER.md, "Captures") ---------------------- */

static bool shared(const struct sfd_job *job)
{
    return sfd_cluster_capture_shared(job->sfd);
}

/* One target's state to the other nodes: a member's to the root, the root's
 * to every other member but `except`. */
static void share_outcome(struct sfd_job *job, const struct capture *k, const struct target *t,
                          uint32_t except)
{
    sfd_peer_capture_result r = {.id = k->id,
                                 .rank = t->rank,
                                 .state = t->state + 1u,
                                 .node = t->node,
                                 .first_step = t->first_step,
                                 .last_step = t->last_step,
                                 .started_at_ms = t->started_at_ms,
                                 .finished_at_ms = t->finished_at_ms};
    snprintf(r.job, sizeof r.job, "%s", job->id);
    snprintf(r.text, sizeof r.text, "%s", t->text != NULL ? t->text : "");
    if (t->state == T_DONE && r.text[0] == '\0')
        snprintf(r.text, sizeof r.text, "?"); /* its path was dropped by the memory budget */
    int rc = sfd_cluster_capture_result(job->sfd, &r, except);
    if (rc < 0)
        sfd_log(SFD_LOG_WARNING, job->id, "capture %llu: rank %u's outcome not shared: %s",
                (unsigned long long)k->id, t->rank, strerror(-rc));
}

static int share_request(struct sfd_job *job, const struct capture *k)
{
    sfd_peer_capture_request q = {.id = k->id,
                                  .control_rank = -1,
                                  .steps = k->steps,
                                  .automatic = k->automatic,
                                  .window = k->window,
                                  .segment = k->segment,
                                  .created_at_ms = k->created_at_ms};
    snprintf(q.job, sizeof q.job, "%s", job->id);
    snprintf(q.reason, sizeof q.reason, "%s", k->reason);
    for (uint32_t i = 0; i < k->n; i++) {
        q.ranks[q.n_ranks++] = k->t[i].rank;
        if (k->t[i].control)
            q.control_rank = k->t[i].rank;
    }
    return sfd_cluster_capture_request(job->sfd, &q);
}

/* Asks the ranks connected to this node. Standalone, a rank not connected
 * here is not connected anywhere; in a cluster, another node may host it,
 * and whatever this node asked is shared. */
static void ask_local(struct sfd_job *job, struct capture *k)
{
    bool cluster = shared(job);
    for (uint32_t i = 0; i < k->n; i++) {
        struct target *t = &k->t[i];
        if (t->state != T_REQUESTED || (cluster && t->node != 0))
            continue; /* claimed already, or ended */
        struct sfd_conn *c = rank_conn(job->sfd, job, t->rank);
        if (c == NULL) {
            if (!cluster)
                t->state = T_NOT_CONNECTED;
            continue;
        }
        t->node = sfd_cluster_node_id(job->sfd);
        send_request(c, k, t);
        if (cluster)
            share_outcome(job, k, t, 0);
    }
}

static struct capture *capture_new(struct sfd_job *job, uint64_t id, uint32_t steps,
                                   const char *reason, uid_t uid, bool automatic,
                                   const struct sfd_stored *s)
{
    struct sfd *d = job->sfd;
    struct sfd_job_captures *tb = table(job);
    struct capture *k = tb != NULL ? calloc(1, sizeof *k) : NULL;
    if (k == NULL)
        return NULL;
    if (sfd_job_reserve(job, SFD_MEM_JOBS, sizeof *k) < 0) {
        free(k);
        return NULL;
    }
    if (tb->n == SFD_CAPTURES_KEPT) {
        capture_free(job, tb->c[0]);
        memmove(tb->c, tb->c + 1, (SFD_CAPTURES_KEPT - 1) * sizeof tb->c[0]);
        tb->n--;
    }
    tb->c[tb->n++] = k;
    k->id = id != 0 ? id : sfd_cluster_capture_id(d);
    k->automatic = automatic;
    k->window = s != NULL ? s->meta.index : -1;
    k->segment = s != NULL ? s->meta.segment : job->segment;
    k->steps = steps;
    k->uid = uid;
    snprintf(k->reason, sizeof k->reason, "%s", reason);
    k->created_at_ms = sfd_realtime_ms();
    k->created_mono_ms = sfd_now_ms(d);
    return k;
}

static void add_target(struct capture *k, uint32_t rank, bool control)
{
    for (uint32_t i = 0; i < k->n; i++)
        if (k->t[i].rank == rank)
            return;
    if (k->n < SF_MAX_CAPTURE_RANKS)
        k->t[k->n++] = (struct target){.rank = rank,
                                       .state = T_REQUESTED,
                                       .control = control,
                                       .first_step = -1,
                                       .last_step = -1};
}

/* Counts a new capture in this node's table and logs it. */
static void note_started(struct sfd_job *job, const struct capture *k)
{
    job->sfd->captures_started++;
    job->captures->started[k->automatic]++;
    job->captures->last_created_ms = k->created_at_ms;
    job->sfd->prom_dirty = true;
    char ranks[128];
    size_t off = 0;
    for (uint32_t i = 0; i < k->n && off < sizeof ranks; i++)
        off += (size_t)snprintf(ranks + off, sizeof ranks - off, "%s%u%s", i ? "," : "",
                                k->t[i].rank, k->t[i].control ? "(control)" : "");
    sfd_log(SFD_LOG_NOTICE, job->id, "capture %llu: ranks %s, %u steps: %s",
            (unsigned long long)k->id, ranks, k->steps, k->reason);
}

/* Starts a capture decided here or asked for here: standalone, or as the
 * root, the local ranks are asked and (a cluster) every other member too; a
 * member hands an operator's capture to the root. */
static void launch(struct sfd_job *job, struct capture *k)
{
    note_started(job, k);
    if (shared(job)) {
        bool root = sfd_cluster_capture_decider(job->sfd) == 1;
        int r = share_request(job, k);
        if (r < 0 && !root) {
            for (uint32_t i = 0; i < k->n; i++) {
                k->t[i].state = T_UNDELIVERABLE;
                k->t[i].finished_at_ms = sfd_realtime_ms();
                set_text(job, &k->t[i], "the root is unreachable");
            }
            sfd_log(SFD_LOG_WARNING, job->id, "capture %llu: not handed to the root: %s",
                    (unsigned long long)k->id, strerror(-r));
        }
        if (root)
            ask_local(job, k);
    } else {
        ask_local(job, k);
    }
    settle(job, k); /* no rank could be asked */
}

/* ---- suspects and the control rank --------------------------------------------------- */

/* The ranks a window implicates, best evidence first: the straggler verdict,
 * the change's suspects, the routed stage's suspects. */
static uint32_t window_suspects(const sf_report *r, uint32_t *out, uint32_t cap)
{
    uint32_t n = 0;
    if (r->straggler.present && n < cap)
        out[n++] = r->straggler.rank;
    if (n == 0 && r->change != NULL && r->change->n_route > 0)
        for (uint32_t i = 0; i < r->change->n_suspects && n < cap; i++)
            out[n++] = r->change->suspects[i].rank;
    if (n == 0)
        for (uint32_t i = 0; i < r->n_suspects && n < cap && i < 2; i++)
            out[n++] = r->suspects[i].rank;
    return n;
}

struct rank_mean {
    uint32_t rank;
    double mean;
};

static int cmp_mean(const void *a, const void *b)
{
    const struct rank_mean *x = a, *y = b;
    if (x->mean != y->mean)
        return x->mean < y->mean ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static bool listed(const uint32_t *v, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* The healthy control: the rank (not a suspect) with the median mean step
 * time in the window's rows; without rows, the lowest rank not a suspect. */
static int64_t control_rank(const struct sfd_job *job, const struct sfd_stored *s,
                            const uint32_t *sus, uint32_t n_sus)
{
    uint32_t world = job->world_size;
    struct rank_mean *m = NULL;
    uint32_t *cnt = NULL;
    uint32_t n = 0;
    if (s != NULL && s->rows.n > 0 && !s->rows_evicted && world <= SF_MAX_RANKS) {
        m = calloc(world, sizeof *m);
        cnt = calloc(world, sizeof *cnt);
    }
    if (m != NULL && cnt != NULL) {
        uint32_t ns = job->schema.n_stages;
        for (size_t i = 0; i < s->rows.n; i++) {
            uint32_t r = s->rows.rec[i].rank;
            if (r >= world)
                continue;
            double sum = 0;
            for (uint32_t k = 0; k < ns; k++)
                sum += (double)s->rows.d[i * ns + k];
            m[r].mean += sum;
            cnt[r]++;
        }
        for (uint32_t r = 0; r < world; r++)
            if (cnt[r] > 0 && !listed(sus, n_sus, r))
                m[n++] = (struct rank_mean){r, m[r].mean / cnt[r]};
        qsort(m, n, sizeof *m, cmp_mean);
    }
    int64_t pick = -1;
    if (n > 0)
        pick = m[(n - 1) / 2].rank;
    /* In a cluster the root may host none of the ranks: any rank of the
     * world may be the control, and the node that hosts it answers. */
    bool cluster = sfd_cluster_capture_shared(job->sfd);
    for (uint32_t r = 0; pick < 0 && r < world; r++)
        if (!listed(sus, n_sus, r) && (cluster || sfd_job_rank_peek(job, r)->seen))
            pick = r;
    free(m);
    free(cnt);
    return pick;
}

/* ---- operator captures -------------------------------------------------------------- */

int sfd_capture_ask(struct sfd_job *job, const struct sfd_capture_ask *ask, uint64_t *ret_id,
                    const char **ret_err)
{
    uint32_t steps = ask->steps ? ask->steps : job->sfd->cfg.auto_capture_steps;
    if (steps == 0 || steps > SF_MAX_CAPTURE_STEPS) {
        *ret_err = "steps must be 1..100";
        return -EINVAL;
    }
    uint32_t sus[SF_MAX_CAPTURE_RANKS];
    uint32_t n_sus = 0;
    const struct sfd_stored *s = NULL;
    if (ask->suspects) {
        const sf_report *latest = sfd_job_latest_report(job);
        for (uint32_t i = 0; latest != NULL && i < job->n_stored; i++)
            if (job->stored[i].report == latest)
                s = &job->stored[i];
        n_sus = latest != NULL ? window_suspects(latest, sus, SF_MAX_CAPTURE_RANKS - 1) : 0;
        if (n_sus == 0) {
            *ret_err = "the latest window names no suspect rank";
            return -ENOENT;
        }
    } else {
        if (ask->n_ranks == 0 || ask->n_ranks > SF_MAX_CAPTURE_RANKS) {
            *ret_err = "name 1..16 ranks";
            return -EINVAL;
        }
        for (uint32_t i = 0; i < ask->n_ranks; i++)
            if (ask->ranks[i] >= job->world_size) {
                *ret_err = "rank out of the job's world size";
                return -EINVAL;
            }
    }
    char reason[96];
    snprintf(reason, sizeof reason, "operator (uid %u)%s", (unsigned)ask->uid,
             ask->suspects ? ": the latest window's suspects" : "");
    if (sfd_cluster_capture_decider(job->sfd) < 0) {
        *ret_err = "no cluster root in force: try again";
        return -EAGAIN;
    }
    struct capture *k = capture_new(job, 0, steps, reason, ask->uid, false, s);
    if (k == NULL) {
        *ret_err = "out of memory";
        return -ENOMEM;
    }
    if (ask->suspects) {
        for (uint32_t i = 0; i < n_sus; i++)
            add_target(k, sus[i], false);
        int64_t ctl = control_rank(job, s, sus, n_sus);
        if (ctl >= 0)
            add_target(k, (uint32_t)ctl, true);
    } else {
        for (uint32_t i = 0; i < ask->n_ranks; i++)
            add_target(k, ask->ranks[i], false);
    }
    launch(job, k);
    *ret_id = k->id;
    return 0;
}

/* ---- replies ---------------------------------------------------------------------- */

static int apply_reply(struct sfd_job *job, struct target *t, const Stagefrontier__CaptureReply *r)
{
    bool open = t->state == T_REQUESTED || t->state == T_ACCEPTED;
    bool ack = r->state == STAGEFRONTIER__CAPTURE_REPLY__STATE__ACCEPTED;
    if (!open || (ack && t->state != T_REQUESTED))
        return -EALREADY;
    switch (r->state) {
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__ACCEPTED:
        t->state = T_ACCEPTED;
        return 0;
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__UNSUPPORTED:
        t->state = T_UNSUPPORTED;
        break;
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__BUSY:
        t->state = T_BUSY;
        break;
    case STAGEFRONTIER__CAPTURE_REPLY__STATE__DONE:
        t->state = T_DONE;
        break;
    default:
        t->state = T_FAILED;
        break;
    }
    if (r->has_first_step) {
        t->first_step = r->first_step;
        t->last_step = r->last_step;
    }
    t->started_at_ms = r->has_started_at_ms ? r->started_at_ms : 0;
    t->finished_at_ms = r->has_finished_at_ms ? r->finished_at_ms : sfd_realtime_ms();
    set_text(job, t, t->state == T_DONE ? r->path : r->error);
    return 0;
}

void sfd_capture_reply(struct sfd_conn *c, const Stagefrontier__CaptureReply *r)
{
    struct sfd *d = c->sfd;
    struct capture *k = c->job != NULL ? find(c->job->captures, r->id) : NULL;
    struct target *t = NULL;
    for (uint32_t i = 0; k != NULL && i < k->n; i++)
        if (k->t[i].rank == c->rank)
            t = &k->t[i];
    if (c->channel != 0 || t == NULL || apply_reply(c->job, t, r) < 0) {
        sfd_count_reject_from(d, c->job, SFD_REJ_CAPTURE_REPLY, 1, c->pid, c->uid);
        return;
    }
    if (t->state != T_ACCEPTED)
        sfd_log(SFD_LOG_NOTICE, c->job->id, "capture %llu: rank %u %s%s%s",
                (unsigned long long)k->id, t->rank, target_names[t->state], t->text ? ": " : "",
                t->text ? t->text : "");
    if (shared(c->job))
        share_outcome(c->job, k, t, 0);
    settle(c->job, k);
}

/* ---- requests and outcomes from other nodes (docs/CLUSTER.md, "Captures") ----------- */

/* This node's copy of a capture decided at the root. */
static struct capture *copy_of(struct sfd_job *job, const sfd_peer_capture_request *q)
{
    struct capture *k = capture_new(job, q->id, q->steps, q->reason, 0, q->automatic, NULL);
    if (k == NULL)
        return NULL;
    k->window = q->window;
    k->segment = q->segment;
    k->created_at_ms = q->created_at_ms;
    for (uint32_t i = 0; i < q->n_ranks; i++)
        add_target(k, q->ranks[i], (int64_t)q->ranks[i] == q->control_rank);
    return k;
}

int sfd_capture_peer_request(struct sfd *d, uint32_t from, bool from_root,
                             const sfd_peer_capture_request *q)
{
    struct sfd_job *job = sfd_job_find(d, q->job);
    struct sfd_job_captures *tb = job != NULL ? table(job) : NULL;
    if (tb == NULL) {
        sfd_log(SFD_LOG_WARNING, q->job, "capture %llu from node %u: no such job here",
                (unsigned long long)q->id, from);
        return -ENOENT;
    }
    for (uint32_t i = 0; job->world_size > 0 && i < q->n_ranks; i++)
        if (q->ranks[i] >= job->world_size)
            return -EINVAL;
    struct capture *k = find(tb, q->id);
    if (!from_root) {
        /* This node is the root: a member hands it an operator's capture. */
        if (k != NULL)
            return -EALREADY;
        k = copy_of(job, q);
        if (k == NULL)
            return -ENOMEM;
        launch(job, k);
        return 0;
    }
    if (k == NULL) { /* the origin holds it already; every other member copies it */
        k = copy_of(job, q);
        if (k == NULL)
            return -ENOMEM;
        note_started(job, k);
    }
    ask_local(job, k);
    settle(job, k);
    return 0;
}

static void apply_outcome(struct sfd_job *job, struct target *t, const sfd_peer_capture_result *r)
{
    t->state = (uint8_t)(r->state - 1);
    t->node = r->node;
    t->first_step = r->first_step;
    t->last_step = r->last_step;
    t->started_at_ms = r->started_at_ms;
    t->finished_at_ms = r->finished_at_ms;
    set_text(job, t, r->text);
}

/* What a hosting member may tell the root of its rank: that it asked it, then
 * its reply, while the target is open and not another node's. */
static bool member_may(const struct target *t, uint32_t from, uint32_t state)
{
    if (t->node != 0 && t->node != from)
        return false;
    switch (state - 1) {
    case T_REQUESTED:
        return t->state == T_REQUESTED && t->node == 0;
    case T_ACCEPTED:
        return t->state == T_REQUESTED;
    case T_DONE:
    case T_FAILED:
    case T_UNSUPPORTED:
    case T_BUSY:
    case T_UNDELIVERABLE:
        return t->state == T_REQUESTED || t->state == T_ACCEPTED;
    default:
        return false; /* not connected and timed out are the root's to say */
    }
}

int sfd_capture_peer_result(struct sfd *d, uint32_t from, bool from_root,
                            const sfd_peer_capture_result *r)
{
    struct sfd_job *job = sfd_job_find(d, r->job);
    struct capture *k = job != NULL ? find(job->captures, r->id) : NULL;
    struct target *t = NULL;
    for (uint32_t i = 0; k != NULL && i < k->n; i++)
        if (k->t[i].rank == r->rank)
            t = &k->t[i];
    if (t == NULL)
        return -ENOENT;
    if (!from_root && !member_may(t, from, r->state))
        return -EPERM;
    apply_outcome(job, t, r);
    if (!from_root)
        share_outcome(job, k, t, from);
    if (t->state != T_REQUESTED && t->state != T_ACCEPTED)
        sfd_log(SFD_LOG_NOTICE, job->id, "capture %llu: rank %u on node %u %s%s%s",
                (unsigned long long)k->id, t->rank, t->node, target_names[t->state],
                t->text ? ": " : "", t->text ? t->text : "");
    settle(job, k);
    return 0;
}

/* Ends a target that got no outcome in time, and, at the root of a cluster,
 * tells the other members. */
static void expire(struct sfd_job *job, const struct capture *k, struct target *t, uint8_t state,
                   bool root)
{
    t->state = state;
    t->finished_at_ms = sfd_realtime_ms();
    if (root)
        share_outcome(job, k, t, 0);
}

void sfd_captures_tick(struct sfd *d)
{
    uint64_t now = sfd_now_ms(d);
    uint64_t limit = (uint64_t)d->cfg.capture_timeout_s * 1000;
    bool cluster = sfd_cluster_capture_shared(d);
    bool root = cluster && sfd_cluster_capture_decider(d) == 1;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        for (uint32_t i = 0; j->captures != NULL && i < j->captures->n; i++) {
            struct capture *k = j->captures->c[i];
            if (!running(k))
                continue;
            uint64_t age = now - k->created_mono_ms;
            /* The root ends what no node claimed: no node hosts the rank. */
            for (uint32_t t = 0; root && age >= SFD_CAPTURE_CLAIM_MS && t < k->n; t++)
                if (k->t[t].state == T_REQUESTED && k->t[t].node == 0)
                    expire(j, k, &k->t[t], T_NOT_CONNECTED, root);
            if (age >= limit && running(k)) {
                for (uint32_t t = 0; t < k->n; t++)
                    if (k->t[t].state == T_REQUESTED || k->t[t].state == T_ACCEPTED)
                        expire(j, k, &k->t[t], T_TIMED_OUT, root);
                sfd_log(SFD_LOG_WARNING, j->id, "capture %llu timed out after %u s",
                        (unsigned long long)k->id, d->cfg.capture_timeout_s);
            }
            settle(j, k);
        }
}

/* ---- the automatic trigger ----------------------------------------------------------- */

/* Why this window asks for a capture (the run of windows it continues), or
 * NULL. Fills the suspects. */
static const char *auto_reason(struct sfd_job *job, const sf_report *r, uint32_t *sus,
                               uint32_t *n_sus, char *buf, size_t len)
{
    struct sfd_job_captures *tb = job->captures;
    uint32_t need = job->sfd->cfg.auto_capture_windows;
    *n_sus = 0;
    if (r->straggler.present && r->straggler.windows_in_a_row >= need) {
        sus[(*n_sus)++] = r->straggler.rank;
        snprintf(buf, len, "straggler: rank %u arrived last at %s for %u windows",
                 r->straggler.rank, r->schema.names[r->straggler.sync_stage],
                 r->straggler.windows_in_a_row);
        return buf;
    }
    if (r->change != NULL && r->change->n_route > 0 && job->base.changed_run >= need) {
        for (uint32_t i = 0; i < r->change->n_suspects && *n_sus < SF_MAX_CAPTURE_RANKS - 1; i++)
            sus[(*n_sus)++] = r->change->suspects[i].rank;
        if (*n_sus > 0) {
            snprintf(buf, len, "change: %s slower than the baseline for %u windows",
                     r->schema.names[r->change->route[0]], job->base.changed_run);
            return buf;
        }
    }
    /* The fallback: the routed stage's suspect, leading most steps, fixed. */
    if (tb->route_run >= need && r->n_suspects > 0) {
        sus[(*n_sus)++] = r->suspects[0].rank;
        snprintf(buf, len, "route: rank %u led the routed stage for %u windows",
                 r->suspects[0].rank, tb->route_run);
        return buf;
    }
    return NULL;
}

static void track_route(struct sfd_job_captures *tb, const sf_report *r)
{
    /* A fixed leader: the top suspect in at least 80% of the complete steps. */
    bool fixed = r->n_suspects > 0 && r->steps > 0 &&
                 (uint64_t)r->suspects[0].steps * 5 >= (uint64_t)r->steps * 4;
    if (!fixed) {
        tb->route_run = 0;
        return;
    }
    tb->route_run = tb->route_rank == r->suspects[0].rank ? tb->route_run + 1 : 1;
    tb->route_rank = r->suspects[0].rank;
}

static bool any_running(const struct sfd_job_captures *tb)
{
    for (uint32_t i = 0; i < tb->n; i++)
        if (tb->c[i]->automatic && running(tb->c[i]))
            return true;
    return false;
}

/* Cooldown, then the budget: at most auto_capture_max in any 24 h. */
static bool auto_allowed(struct sfd_job *job, struct sfd_job_captures *tb, uint64_t now)
{
    const struct sfd_config *cfg = &job->sfd->cfg;
    if (tb->last_auto_ms != 0 &&
        now - tb->last_auto_ms < (uint64_t)cfg->auto_capture_cooldown_s * 1000) {
        tb->auto_suppressed_cooldown++;
        return false;
    }
    uint32_t recent = 0;
    for (uint32_t i = 0; i < tb->n_auto; i++)
        recent += now - tb->auto_ms[i] < UINT64_C(86400000);
    if (recent >= cfg->auto_capture_max) {
        if (tb->auto_suppressed_budget++ == 0)
            sfd_log(SFD_LOG_NOTICE, job->id, "automatic captures: daily budget of %u spent",
                    cfg->auto_capture_max);
        return false;
    }
    return true;
}

static void note_auto(struct sfd_job_captures *tb, uint64_t now)
{
    tb->last_auto_ms = now ? now : 1;
    tb->auto_ms[tb->auto_head] = now;
    tb->auto_head = (tb->auto_head + 1) % SFD_AUTO_CAPTURE_MAX;
    if (tb->n_auto < SFD_AUTO_CAPTURE_MAX)
        tb->n_auto++;
    tb->auto_fired++;
}

void sfd_capture_consider(struct sfd_job *job, const struct sfd_stored *s)
{
    struct sfd *d = job->sfd;
    const sf_report *r = s->report;
    if (!d->cfg.auto_capture || r == NULL || r != sfd_job_latest_report(job))
        return;
    if (sfd_cluster_capture_decider(d) != 1)
        return; /* in a cluster, the root decides, with its cooldown and budget */
    struct sfd_job_captures *tb = table(job);
    if (tb == NULL)
        return;
    if (tb->considered_any && tb->considered_segment == s->meta.segment &&
        tb->considered_index >= s->meta.index)
        return; /* this window was looked at already (a replaced report) */
    tb->considered_any = true;
    tb->considered_segment = s->meta.segment;
    tb->considered_index = s->meta.index;
    track_route(tb, r);
    uint32_t sus[SF_MAX_CAPTURE_RANKS];
    uint32_t n_sus;
    char why[160];
    const char *reason = auto_reason(job, r, sus, &n_sus, why, sizeof why);
    uint64_t now = sfd_now_ms(d);
    if (reason == NULL || any_running(tb) || !auto_allowed(job, tb, now))
        return;
    struct capture *k = capture_new(job, 0, d->cfg.auto_capture_steps, reason, 0, true, s);
    if (k == NULL)
        return;
    for (uint32_t i = 0; i < n_sus; i++)
        add_target(k, sus[i], false);
    int64_t ctl = control_rank(job, s, sus, n_sus);
    if (ctl >= 0)
        add_target(k, (uint32_t)ctl, true);
    note_auto(tb, now);
    d->captures_auto++;
    launch(job, k);
}

/* ---- JSON ------------------------------------------------------------------------- */

static json_t *unix_s(int64_t ms)
{
    return ms > 0 ? json_real((double)ms / 1000.0) : json_null();
}

static json_t *target_json(const struct target *t)
{
    json_t *o =
        json_pack("{s:I, s:s, s:b, s:o, s:o, s:o, s:o}", "rank", (json_int_t)t->rank, "state",
                  target_names[t->state], "control", t->control, "first_step",
                  t->first_step >= 0 ? json_integer(t->first_step) : json_null(), "last_step",
                  t->last_step >= 0 ? json_integer(t->last_step) : json_null(), "started_at",
                  unix_s(t->started_at_ms), "finished_at", unix_s(t->finished_at_ms));
    if (o != NULL) {
        json_object_set_new(o, "path",
                            t->state == T_DONE && t->text ? json_string(t->text) : json_null());
        json_object_set_new(o, "error",
                            t->state != T_DONE && t->text ? json_string(t->text) : json_null());
        json_object_set_new(o, "node", t->node != 0 ? json_integer(t->node) : json_null());
    }
    return o;
}

static json_t *one_json(const struct capture *k)
{
    json_t *targets = json_array();
    for (uint32_t i = 0; i < k->n; i++)
        json_array_append_new(targets, target_json(&k->t[i]));
    return json_pack("{s:I, s:s, s:o, s:I, s:s, s:s, s:I, s:o, s:o}", "id", (json_int_t)k->id,
                     "trigger", k->automatic ? "auto" : "operator", "window",
                     k->window >= 0 ? json_integer(k->window) : json_null(), "segment",
                     (json_int_t)k->segment, "reason", k->reason, "state", capture_state(k),
                     "steps", (json_int_t)k->steps, "created_at", unix_s(k->created_at_ms), "ranks",
                     targets);
}

json_t *sfd_captures_json(const struct sfd_job *job)
{
    json_t *a = json_array();
    for (uint32_t i = 0; job->captures != NULL && i < job->captures->n; i++)
        json_array_append_new(a, one_json(job->captures->c[i]));
    return a;
}

json_t *sfd_capture_json(const struct sfd_job *job, uint64_t id)
{
    const struct capture *k = find(job->captures, id);
    return k != NULL ? one_json(k) : json_null();
}

void sfd_captures_counts(const struct sfd_job *job, struct sfd_capture_counts *ret)
{
    const struct sfd_job_captures *tb = job->captures;
    *ret = (struct sfd_capture_counts){0};
    for (int t = 0; tb != NULL && t < 2; t++) {
        ret->started[t] = tb->started[t];
        ret->done[t] = tb->done[t];
        ret->failed[t] = tb->failed[t];
    }
    ret->last_created_ms = tb != NULL ? tb->last_created_ms : 0;
}

void sfd_captures_free(struct sfd_job *job)
{
    struct sfd_job_captures *tb = job->captures;
    if (tb == NULL)
        return;
    for (uint32_t i = 0; i < tb->n; i++)
        capture_free(job, tb->c[i]);
    sfd_job_release(job, SFD_MEM_JOBS, sizeof *tb);
    free(tb);
    job->captures = NULL;
}

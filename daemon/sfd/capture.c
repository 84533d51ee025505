/*
 * Trace captures (capture.h, docs/SFD.md "Captures"): the per-job table and
 * each capture's lifecycle: an operator's request, the requests sent on the
 * ranks' ingest connections, the replies matched to them, timeouts. A capture
 * is state of its job, bounded and dropped with it; never changes windows or reports.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "capture.h"
#include "capture_table.h"
#include "cluster.h"
#include "ingest.pb-c.h"
#include "sfd.h"

const char *const sfd__capture_target_names[] = {
    "requested", "accepted",      "done",          "failed",    "unsupported",
    "busy",      "not_connected", "undeliverable", "timed_out",
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

struct sfd_job_captures *sfd__capture_table(struct sfd_job *job)
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

void sfd__capture_set_text(struct sfd_job *job, struct target *t, const char *text)
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

struct capture *sfd__capture_find(struct sfd_job_captures *tb, uint64_t id)
{
    for (uint32_t i = 0; tb != NULL && i < tb->n; i++)
        if (tb->c[i]->id == id)
            return tb->c[i];
    return NULL;
}

bool sfd__capture_running(const struct capture *k)
{
    for (uint32_t i = 0; i < k->n; i++)
        if (sfd__target_open(&k->t[i]))
            return true;
    return false;
}

const char *sfd__capture_state(const struct capture *k)
{
    bool any_done = false;
    for (uint32_t i = 0; i < k->n; i++) {
        if (sfd__target_open(&k->t[i]))
            return "running";
        any_done |= k->t[i].state == T_DONE;
    }
    return any_done ? "done" : "failed";
}

/* Counts a capture once, when no rank is left running, and tells the
 * Prometheus export. */
void sfd__capture_settle(struct sfd_job *job, struct capture *k)
{
    if (k->ended || sfd__capture_running(k) || job->captures == NULL)
        return;
    k->ended = true;
    bool any_done = false; /* no target is open: done when one rank is */
    for (uint32_t i = 0; i < k->n; i++)
        any_done |= k->t[i].state == T_DONE;
    if (any_done)
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
    q.has_communication = k->communication; /* absent otherwise: as before the field */
    q.communication = k->communication;
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

/* Asks the ranks connected to this node. Standalone, a rank not connected
 * here is not connected anywhere; in a cluster, another node may host it,
 * and whatever this node asked is shared. */
void sfd__capture_ask_local(struct sfd_job *job, struct capture *k)
{
    bool cluster = sfd__capture_shared(job);
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
            sfd__capture_share_outcome(job, k, t, 0);
    }
}

struct capture *sfd__capture_new(struct sfd_job *job, uint64_t id, uint32_t steps,
                                 const char *reason, uid_t uid, bool automatic,
                                 const struct sfd_stored *s)
{
    struct sfd *d = job->sfd;
    struct sfd_job_captures *tb = sfd__capture_table(job);
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

void sfd__capture_add_target(struct capture *k, uint32_t rank, bool control)
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
void sfd__capture_note_started(struct sfd_job *job, const struct capture *k)
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
void sfd__capture_launch(struct sfd_job *job, struct capture *k)
{
    sfd__capture_note_started(job, k);
    if (sfd__capture_shared(job)) {
        bool root = sfd_cluster_capture_decider(job->sfd) == 1;
        int r = sfd__capture_share_request(job, k);
        if (r < 0 && !root) {
            for (uint32_t i = 0; i < k->n; i++) {
                k->t[i].state = T_UNDELIVERABLE;
                k->t[i].finished_at_ms = sfd_realtime_ms();
                sfd__capture_set_text(job, &k->t[i], "the root is unreachable");
            }
            sfd_log(SFD_LOG_WARNING, job->id, "capture %llu: not handed to the root: %s",
                    (unsigned long long)k->id, strerror(-r));
        }
        if (root)
            sfd__capture_ask_local(job, k);
    } else {
        sfd__capture_ask_local(job, k);
    }
    sfd__capture_settle(job, k); /* no rank could be asked */
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
        n_sus = latest != NULL ? sfd__capture_window_suspects(latest, sus, SF_MAX_CAPTURE_RANKS - 1)
                               : 0;
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
    /* Well formed, but the job's ranks connected here and all have gone:
     * nobody is left to take a trace. (A job known from reports alone has
     * its ranks elsewhere.) */
    if (!job->reports_only && job->n_live_ranks == 0) {
        *ret_err = "the job has ended: no rank is left to take a trace";
        return -ENOENT;
    }
    char reason[96];
    snprintf(reason, sizeof reason, "operator (uid %u)%s", (unsigned)ask->uid,
             ask->suspects ? ": the latest window's suspects" : "");
    if (sfd_cluster_capture_decider(job->sfd) < 0) {
        *ret_err = "no cluster root in force: try again";
        return -EAGAIN;
    }
    struct capture *k = sfd__capture_new(job, 0, steps, reason, ask->uid, false, s);
    if (k == NULL) {
        *ret_err = "out of memory";
        return -ENOMEM;
    }
    if (ask->suspects) {
        for (uint32_t i = 0; i < n_sus; i++)
            sfd__capture_add_target(k, sus[i], false);
        int64_t ctl = sfd__capture_control_rank(job, s, sus, n_sus);
        if (ctl >= 0)
            sfd__capture_add_target(k, (uint32_t)ctl, true);
    } else {
        for (uint32_t i = 0; i < ask->n_ranks; i++)
            sfd__capture_add_target(k, ask->ranks[i], false);
    }
    sfd__capture_launch(job, k);
    *ret_id = k->id;
    return 0;
}

/* ---- replies ---------------------------------------------------------------------- */

static int apply_reply(struct sfd_job *job, struct target *t, const Stagefrontier__CaptureReply *r)
{
    bool open = sfd__target_open(t);
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
    sfd__capture_set_text(job, t, t->state == T_DONE ? r->path : r->error);
    return 0;
}

void sfd_capture_reply(struct sfd_conn *c, const Stagefrontier__CaptureReply *r)
{
    struct sfd *d = c->sfd;
    struct capture *k = c->job != NULL ? sfd__capture_find(c->job->captures, r->id) : NULL;
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
                (unsigned long long)k->id, t->rank, sfd__capture_target_names[t->state],
                t->text ? ": " : "", t->text ? t->text : "");
    if (sfd__capture_shared(c->job))
        sfd__capture_share_outcome(c->job, k, t, 0);
    sfd__capture_settle(c->job, k);
}

/* ---- timeouts ------------------------------------------------------------------------ */

/* Ends a target that got no outcome in time, and, at the root of a cluster,
 * tells the other members. */
static void expire(struct sfd_job *job, const struct capture *k, struct target *t, uint8_t state,
                   bool root)
{
    t->state = state;
    t->finished_at_ms = sfd_realtime_ms();
    if (root)
        sfd__capture_share_outcome(job, k, t, 0);
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
            if (!sfd__capture_running(k))
                continue;
            uint64_t age = now - k->created_mono_ms;
            /* The root ends what no node claimed: no node hosts the rank. */
            for (uint32_t t = 0; root && age >= SFD_CAPTURE_CLAIM_MS && t < k->n; t++)
                if (k->t[t].state == T_REQUESTED && k->t[t].node == 0)
                    expire(j, k, &k->t[t], T_NOT_CONNECTED, root);
            if (age >= limit && sfd__capture_running(k)) {
                for (uint32_t t = 0; t < k->n; t++)
                    if (sfd__target_open(&k->t[t]))
                        expire(j, k, &k->t[t], T_TIMED_OUT, root);
                sfd_log(SFD_LOG_WARNING, j->id, "capture %llu timed out after %u s",
                        (unsigned long long)k->id, d->cfg.capture_timeout_s);
            }
            sfd__capture_settle(j, k);
        }
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

/*
 * Captures shared across a cluster (docs/CLUSTER.md, "Captures"): requests
 * and per-rank outcomes sent to and taken from the other nodes through the
 * cluster ops, and what a member may tell the root. Sends nothing on a rank's
 * connection (capture.c does) and never decides an automatic capture.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "capture.h"
#include "capture_table.h"
#include "cluster.h"
#include "peer.h"
#include "sfd.h"

/* A target's state travels between nodes as CaptureResult.State, one above. */
_Static_assert(T_REQUESTED + 1 == STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__REQUESTED &&
                   T_TIMED_OUT + 1 == STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__TIMED_OUT &&
                   T_NOT_CONNECTED + 1 == STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__NOT_CONNECTED,
               "capture states match the peer protocol's");

/* ---- sharing with the other nodes (docs/CLUSTER.md, "Captures") ---------------------- */

bool sfd__capture_shared(const struct sfd_job *job)
{
    return sfd_cluster_capture_shared(job->sfd);
}

/* One target's state to the other nodes: a member's to the root, the root's
 * to every other member but `except`. */
void sfd__capture_share_outcome(struct sfd_job *job, const struct capture *k,
                                const struct target *t, uint32_t except)
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
    r.uid = (uint32_t)job->uid;
    r.incarnation = job->incarnation;
    snprintf(r.text, sizeof r.text, "%s", t->text != NULL ? t->text : "");
    if (t->state == T_DONE && r.text[0] == '\0')
        snprintf(r.text, sizeof r.text, "?"); /* its path was dropped by the memory budget */
    int rc = sfd_cluster_capture_result(job->sfd, &r, except);
    if (rc < 0)
        sfd_log(SFD_LOG_WARNING, job->id, "capture %llu: rank %u's outcome not shared: %s",
                (unsigned long long)k->id, t->rank, strerror(-rc));
}

int sfd__capture_share_request(struct sfd_job *job, const struct capture *k)
{
    sfd_peer_capture_request q = {.id = k->id,
                                  .control_rank = -1,
                                  .steps = k->steps,
                                  .automatic = k->automatic,
                                  .communication = k->communication,
                                  .window = k->window,
                                  .segment = k->segment,
                                  .created_at_ms = k->created_at_ms};
    snprintf(q.job, sizeof q.job, "%s", job->id);
    q.uid = (uint32_t)job->uid; /* the hosting nodes ask this job's ranks only */
    q.incarnation = job->incarnation;
    snprintf(q.reason, sizeof q.reason, "%s", k->reason);
    for (uint32_t i = 0; i < k->n; i++) {
        q.ranks[q.n_ranks++] = k->t[i].rank;
        if (k->t[i].control)
            q.control_rank = k->t[i].rank;
    }
    return sfd_cluster_capture_request(job->sfd, &q);
}

/* ---- requests and outcomes from other nodes (docs/CLUSTER.md, "Captures") ----------- */

/* This node's copy of a capture decided at the root. */
static struct capture *copy_of(struct sfd_job *job, const sfd_peer_capture_request *q)
{
    struct capture *k = sfd__capture_new(job, q->id, q->steps, q->reason, 0, q->automatic, NULL);
    if (k == NULL)
        return NULL;
    k->communication = q->communication;
    k->window = q->window;
    k->segment = q->segment;
    k->created_at_ms = q->created_at_ms;
    for (uint32_t i = 0; i < q->n_ranks; i++)
        sfd__capture_add_target(k, q->ranks[i], (int64_t)q->ranks[i] == q->control_rank);
    return k;
}

int sfd_capture_peer_request(struct sfd *d, uint32_t from, bool from_root,
                             const sfd_peer_capture_request *q)
{
    /* By the whole key, never the id alone: a request for one uid's job
     * never reaches another uid's ranks of that id. */
    struct sfd_job *job = sfd_job_lookup(d, (uid_t)q->uid, q->job, q->incarnation);
    struct sfd_job_captures *tb = job != NULL ? sfd__capture_table(job) : NULL;
    if (tb == NULL) {
        sfd_log(SFD_LOG_WARNING, q->job,
                "capture %llu from node %u: no job of uid %u, incarnation %u here",
                (unsigned long long)q->id, from, q->uid, q->incarnation);
        return -ENOENT;
    }
    for (uint32_t i = 0; job->world_size > 0 && i < q->n_ranks; i++)
        if (q->ranks[i] >= job->world_size)
            return -EINVAL;
    struct capture *k = sfd__capture_find(tb, q->id);
    if (!from_root) {
        /* This node is the root: a member hands it an operator's capture. */
        if (k != NULL)
            return -EALREADY;
        k = copy_of(job, q);
        if (k == NULL)
            return -ENOMEM;
        sfd__capture_launch(job, k);
        return 0;
    }
    if (k == NULL) { /* the origin holds it already; every other member copies it */
        k = copy_of(job, q);
        if (k == NULL)
            return -ENOMEM;
        sfd__capture_note_started(job, k);
    }
    sfd__capture_ask_local(job, k);
    sfd__capture_settle(job, k);
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
    sfd__capture_set_text(job, t, r->text);
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
        return sfd__target_open(t);
    default:
        return false; /* not connected and timed out are the root's to say */
    }
}

int sfd_capture_peer_result(struct sfd *d, uint32_t from, bool from_root,
                            const sfd_peer_capture_result *r)
{
    struct sfd_job *job = sfd_job_lookup(d, (uid_t)r->uid, r->job, r->incarnation);
    struct capture *k = job != NULL ? sfd__capture_find(job->captures, r->id) : NULL;
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
        sfd__capture_share_outcome(job, k, t, from);
    if (t->state != T_REQUESTED && t->state != T_ACCEPTED)
        sfd_log(SFD_LOG_NOTICE, job->id, "capture %llu: rank %u on node %u %s%s%s",
                (unsigned long long)k->id, t->rank, t->node, sfd__capture_target_names[t->state],
                t->text ? ": " : "", t->text ? t->text : "");
    sfd__capture_settle(job, k);
    return 0;
}

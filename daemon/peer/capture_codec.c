/*
 * The capture messages between nodes (docs/CLUSTER.md, "Captures"):
 * PeerCaptureRequest and PeerCaptureResult to and from their checked C forms. Every
 * field is bounded on decode and on encode, so nothing out of bounds leaves
 * or enters a node; the job is named by its whole key (owner uid, id,
 * incarnation), so a node asks only that job's ranks. Pure: no I/O, no node
 * state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

/* Printable ASCII only: what an operator reads in `sfctl captures`. */
static bool text_ok(const char *s, size_t max, bool empty_ok)
{
    if (s == NULL)
        return empty_ok;
    size_t n = strnlen(s, max + 1);
    if (n > max || (n == 0 && !empty_ok))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

static bool job_ok(const char *job)
{
    return job != NULL && sfd_peer_job_id_valid(job, strnlen(job, SF_MAX_JOB_ID_LEN + 1));
}

static bool id_ok(uint64_t id)
{
    return id > 0 && id <= SF_MAX_CAPTURE_ID;
}

static bool ranks_ok(const uint32_t *ranks, size_t n, int64_t control)
{
    if (n == 0 || n > SF_MAX_CAPTURE_RANKS)
        return false;
    bool control_listed = control < 0;
    for (size_t i = 0; i < n; i++) {
        if (ranks[i] >= SF_MAX_RANKS)
            return false;
        for (size_t j = 0; j < i; j++)
            if (ranks[j] == ranks[i])
                return false;
        control_listed |= (int64_t)ranks[i] == control;
    }
    return control_listed;
}

static bool owner_ok(uint32_t uid, uint32_t incarnation)
{
    return sfd_peer_owner_check(true, uid, true, incarnation) == 0;
}

static bool request_ok(const sfd_peer_capture_request *q)
{
    return job_ok(q->job) && owner_ok(q->uid, q->incarnation) && id_ok(q->id) &&
           ranks_ok(q->ranks, q->n_ranks, q->control_rank) && q->steps >= 1 &&
           q->steps <= SF_MAX_CAPTURE_STEPS && text_ok(q->reason, SF_MAX_CAPTURE_REASON, true) &&
           (q->automatic || !q->communication) && /* only the automatic trigger sets it */
           q->window >= -1 && q->window <= (INT64_C(1) << 62) && q->created_at_ms >= 0;
}

static bool state_ok(uint32_t state)
{
    return state >= STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__REQUESTED &&
           state <= STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__TIMED_OUT;
}

static bool steps_ok(int64_t first, int64_t last)
{
    if (first == -1 && last == -1)
        return true;
    return first >= 0 && last >= first && last - first < SF_MAX_CAPTURE_STEPS;
}

static bool result_ok(const sfd_peer_capture_result *r)
{
    bool done = r->state == STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__DONE;
    return job_ok(r->job) && owner_ok(r->uid, r->incarnation) && id_ok(r->id) &&
           r->rank < SF_MAX_RANKS && state_ok(r->state) && r->node <= SFD_PEER_ID_MAX &&
           steps_ok(r->first_step, r->last_step) && r->started_at_ms >= 0 &&
           r->finished_at_ms >= 0 && text_ok(r->text, SF_MAX_CAPTURE_PATH, !done);
}

int sfd_peer_capture_request_pack(const sfd_peer_capture_request *q, uint8_t **ret_buf,
                                  size_t *ret_len)
{
    if (q == NULL || !request_ok(q))
        return -EINVAL;
    Stagefrontier__PeerCaptureRequest m = STAGEFRONTIER__PEER_CAPTURE_REQUEST__INIT;
    m.job_id = (char *)q->job;
    m.has_owner_uid = m.has_incarnation = true;
    m.owner_uid = q->uid;
    m.incarnation = q->incarnation;
    m.capture_id = q->id;
    m.n_ranks = q->n_ranks;
    m.ranks = (uint32_t *)q->ranks;
    m.has_control_rank = q->control_rank >= 0;
    m.control_rank = q->control_rank >= 0 ? (uint32_t)q->control_rank : 0;
    m.steps = q->steps;
    m.has_automatic = true;
    m.automatic = q->automatic;
    m.has_communication = q->communication; /* absent otherwise: as before the field */
    m.communication = q->communication;
    m.reason = (char *)q->reason;
    m.has_window = m.has_segment = m.has_created_at_ms = true;
    m.window = q->window;
    m.segment = q->segment;
    m.created_at_ms = q->created_at_ms;
    return sfd_peer_pack(&m.base, ret_buf, ret_len);
}

int sfd_peer_capture_request_unpack(const uint8_t *buf, size_t len, sfd_peer_capture_request *ret)
{
    Stagefrontier__PeerCaptureRequest *m =
        stagefrontier__peer_capture_request__unpack(NULL, len, buf);
    if (m == NULL)
        return -EBADMSG;
    int r = -EBADMSG;
    sfd_peer_capture_request q = {.control_rank = -1, .window = -1};
    if (!job_ok(m->job_id) || m->n_ranks == 0 || m->n_ranks > SF_MAX_CAPTURE_RANKS ||
        !text_ok(m->reason, SF_MAX_CAPTURE_REASON, true))
        goto out;
    if ((r = sfd_peer_owner_check(m->has_owner_uid, m->owner_uid, m->has_incarnation,
                                  m->incarnation)) < 0)
        goto out; /* -EPROTO */
    r = -EBADMSG;
    snprintf(q.job, sizeof q.job, "%s", m->job_id);
    q.uid = m->owner_uid;
    q.incarnation = m->incarnation;
    q.id = m->capture_id;
    q.n_ranks = (uint32_t)m->n_ranks;
    memcpy(q.ranks, m->ranks, m->n_ranks * sizeof q.ranks[0]);
    if (m->has_control_rank)
        q.control_rank = m->control_rank;
    q.steps = m->steps;
    q.automatic = m->has_automatic && m->automatic;
    q.communication = m->has_communication && m->communication;
    if (m->reason != NULL)
        snprintf(q.reason, sizeof q.reason, "%s", m->reason);
    if (m->has_window)
        q.window = m->window;
    q.segment = m->has_segment ? m->segment : 0;
    q.created_at_ms = m->has_created_at_ms ? m->created_at_ms : 0;
    if (!request_ok(&q))
        goto out;
    *ret = q;
    r = 0;
out:
    stagefrontier__peer_capture_request__free_unpacked(m, NULL);
    return r;
}

int sfd_peer_capture_result_pack(const sfd_peer_capture_result *r, uint8_t **ret_buf,
                                 size_t *ret_len)
{
    if (r == NULL || !result_ok(r))
        return -EINVAL;
    Stagefrontier__PeerCaptureResult m = STAGEFRONTIER__PEER_CAPTURE_RESULT__INIT;
    m.job_id = (char *)r->job;
    m.has_owner_uid = m.has_incarnation = true;
    m.owner_uid = r->uid;
    m.incarnation = r->incarnation;
    m.capture_id = r->id;
    m.rank = r->rank;
    m.state = (Stagefrontier__PeerCaptureResult__State)r->state;
    m.node_id = r->node;
    m.has_first_step = m.has_last_step = r->first_step >= 0;
    m.first_step = r->first_step;
    m.last_step = r->last_step;
    m.has_started_at_ms = r->started_at_ms > 0;
    m.started_at_ms = r->started_at_ms;
    m.has_finished_at_ms = r->finished_at_ms > 0;
    m.finished_at_ms = r->finished_at_ms;
    m.text = r->text[0] != '\0' ? (char *)r->text : NULL;
    return sfd_peer_pack(&m.base, ret_buf, ret_len);
}

int sfd_peer_capture_result_unpack(const uint8_t *buf, size_t len, sfd_peer_capture_result *ret)
{
    Stagefrontier__PeerCaptureResult *m =
        stagefrontier__peer_capture_result__unpack(NULL, len, buf);
    if (m == NULL)
        return -EBADMSG;
    int rc = -EBADMSG;
    sfd_peer_capture_result r = {.first_step = -1, .last_step = -1};
    if (!job_ok(m->job_id) || m->has_first_step != m->has_last_step ||
        (m->has_first_step && (m->first_step < 0 || m->last_step < 0)) ||
        !text_ok(m->text, SF_MAX_CAPTURE_PATH, true))
        goto out;
    if ((rc = sfd_peer_owner_check(m->has_owner_uid, m->owner_uid, m->has_incarnation,
                                   m->incarnation)) < 0)
        goto out; /* -EPROTO */
    rc = -EBADMSG;
    snprintf(r.job, sizeof r.job, "%s", m->job_id);
    r.uid = m->owner_uid;
    r.incarnation = m->incarnation;
    r.id = m->capture_id;
    r.rank = m->rank;
    r.state = (uint32_t)m->state;
    r.node = m->node_id;
    if (m->has_first_step) {
        r.first_step = m->first_step;
        r.last_step = m->last_step;
    }
    r.started_at_ms = m->has_started_at_ms ? m->started_at_ms : 0;
    r.finished_at_ms = m->has_finished_at_ms ? m->finished_at_ms : 0;
    if (m->text != NULL)
        snprintf(r.text, sizeof r.text, "%s", m->text);
    if (!result_ok(&r))
        goto out;
    *ret = r;
    rc = 0;
out:
    stagefrontier__peer_capture_result__free_unpacked(m, NULL);
    return rc;
}

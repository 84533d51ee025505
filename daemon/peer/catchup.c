/*
 * Catch-up after a restart: a node that has just started holds no report of
 * the windows finished while it was away. Once it follows a root, it asks
 * the root (or, when it is the root itself, another live member) for them:
 * for each job, the newest keep_windows final reports the other holds,
 * oldest first, as REPORT envelopes, then CATCHUP_DONE. They go through the
 * receiver's report store like any final report, so each is delivered to
 * the host once. It owns the request, the answer and their checks; the
 * report store is report_store.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "node_internal.h"

#define T(x) STAGEFRONTIER__PEER_ENVELOPE__TYPE__##x
#define CATCHUP_RETRY_MS 1000u
/* A member is answered at most once a second: a request costs its sender
 * one small frame and the answerer up to SFD_PEER_REPORTS_KEPT reports. */
#define CATCHUP_SERVE_GAP_MS 1000u

/* Whom to ask: the root in force, or, at the root, the first other live
 * member (a restarted node may be elected before it has caught up). */
static uint32_t catchup_source(const sfd_peer_node *node, uint64_t now)
{
    uint32_t root = sfd_elect_root(&node->elect, now);
    if (root == 0)
        return 0;
    if (root != node->cfg.node_id)
        return root;
    for (uint32_t i = 0; i < node->elect.n_members; i++)
        if (node->elect.ids[i] != node->cfg.node_id && sfd_elect_member_live(&node->elect, now, i))
            return node->elect.ids[i];
    return 0;
}

void sfd_peer_catchup_tick(sfd_peer_node *node, uint64_t now)
{
    if (node->caught_up || node->cfg.n_members < 2)
        return;
    if (node->catchup_asked_ms != 0 && now - node->catchup_asked_ms < CATCHUP_RETRY_MS)
        return;
    uint32_t from = catchup_source(node, now);
    if (from == 0)
        return;
    Stagefrontier__CatchUpRequest q = STAGEFRONTIER__CATCH_UP_REQUEST__INIT;
    q.keep_windows = node->cfg.keep_windows;
    if (sfd_peer_send(node, from, T(CATCHUP_REQUEST), &q.base) < 0)
        return;
    node->catchup_from = from;
    node->catchup_asked_ms = now;
    node->c.catchups_requested++;
}

static bool same_job(const sfd_window_key *a, const sfd_window_key *b)
{
    return a->uid == b->uid && a->incarnation == b->incarnation && strcmp(a->job, b->job) == 0;
}

/* Whether r is among the newest `keep` final reports of its job: those
 * filed before it (earlier in the newest-first list) count against it. */
static bool among_newest(const sfd_peer_node *node, const sfd_peer_report *r, uint32_t keep)
{
    uint32_t newer = 0;
    for (const sfd_peer_report *o = node->reports; o != r; o = o->next)
        if (o->committed && same_job(&o->key, &r->key) && ++newer >= keep)
            return false;
    return true;
}

/* The final reports to send, oldest first (the list is newest first), so
 * that the receiver's kept windows end with the newest. */
static uint32_t send_reports(sfd_peer_node *node, uint32_t dest, uint32_t keep)
{
    const sfd_peer_report *pick[SFD_PEER_REPORTS_KEPT];
    uint32_t n = 0;
    for (const sfd_peer_report *r = node->reports; r && n < SFD_PEER_REPORTS_KEPT; r = r->next)
        if (r->committed && among_newest(node, r, keep))
            pick[n++] = r;
    uint32_t sent = 0;
    while (n-- > 0)
        if (sfd_peer_report_send(node, dest, pick[n]) == 0)
            sent++;
    return sent;
}

static void refuse(sfd_peer_node *node, const sfd_peer_msg *msg, const char *why)
{
    uint64_t n = ++node->c.rejected_catchup;
    if ((n & (n - 1)) == 0)
        sfd_peer_logf(node, SFD_PEER_LOG_WARNING,
                      "peer: refused a catch-up message from node %u: %s (%" PRIu64 " so far)",
                      msg->from, why, n);
}

int sfd_peer_catchup_request_unpack(const uint8_t *buf, size_t len, uint32_t *ret_keep)
{
    Stagefrontier__CatchUpRequest *q = stagefrontier__catch_up_request__unpack(NULL, len, buf);
    if (q == NULL)
        return -EBADMSG;
    uint32_t keep = q->keep_windows;
    stagefrontier__catch_up_request__free_unpacked(q, NULL);
    if (keep == 0 || keep > SFD_PEER_CATCHUP_KEEP_MAX)
        return -ERANGE;
    *ret_keep = keep;
    return 0;
}

int sfd_peer_catchup_done_unpack(const uint8_t *buf, size_t len, uint32_t *ret_reports)
{
    Stagefrontier__CatchUpDone *d = stagefrontier__catch_up_done__unpack(NULL, len, buf);
    if (d == NULL)
        return -EBADMSG;
    uint32_t n = d->reports;
    stagefrontier__catch_up_done__free_unpacked(d, NULL);
    if (n > SFD_PEER_CATCHUP_REPORTS_MAX)
        return -ERANGE;
    *ret_reports = n;
    return 0;
}

void sfd_peer_on_catchup_request(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    if (sfd_peer_msg_stale(node, msg, now, "a catch-up request"))
        return;
    uint32_t keep = 0;
    int r = sfd_peer_catchup_request_unpack(msg->payload, msg->payload_len, &keep);
    sfd_peer_link *l = sfd_peer_link_find(node, msg->from);
    if (r == -EBADMSG) {
        node->c.rejected_decode++;
        refuse(node, msg, "undecodable");
    } else if (r < 0) {
        refuse(node, msg, "keep_windows out of 1..4096");
    } else if (l == NULL) {
        refuse(node, msg, "not a member");
    } else if (l->catchup_served_ms != 0 && now - l->catchup_served_ms < CATCHUP_SERVE_GAP_MS) {
        refuse(node, msg, "asked again within a second");
    } else {
        l->catchup_served_ms = now;
        uint32_t sent = send_reports(node, msg->from, keep);
        Stagefrontier__CatchUpDone d = STAGEFRONTIER__CATCH_UP_DONE__INIT;
        d.reports = sent;
        sfd_peer_send(node, msg->from, T(CATCHUP_DONE), &d.base);
        node->c.catchups_served++;
        node->c.catchup_reports_sent += sent;
        sfd_peer_logf(node, SFD_PEER_LOG_INFO, "peer: node %u caught up with %u reports", msg->from,
                      sent);
    }
}

void sfd_peer_on_catchup_done(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    if (sfd_peer_msg_stale(node, msg, now, "a catch-up answer"))
        return;
    uint32_t n = 0;
    int r = sfd_peer_catchup_done_unpack(msg->payload, msg->payload_len, &n);
    if (r == -EBADMSG) {
        node->c.rejected_decode++;
        refuse(node, msg, "undecodable");
    } else if (r < 0) {
        refuse(node, msg, "more reports than a node keeps");
    } else if (node->caught_up || msg->from != node->catchup_from) {
        refuse(node, msg, "not asked of it");
    } else {
        node->caught_up = true;
        node->c.catchups_done++;
        sfd_peer_logf(node, SFD_PEER_LOG_NOTICE, "peer: caught up from node %u: %u reports",
                      msg->from, n);
    }
}

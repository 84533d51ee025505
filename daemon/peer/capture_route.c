/*
 * Captures between the nodes (docs/CLUSTER.md, "Captures"): who decides (the
 * root in force), where a request or an outcome goes (a member to the root,
 * the root to every other member), and the routing rule on receipt: only to
 * the root, or from it. What a capture is stays the host's (the hooks).
 */
#include <errno.h>
#include <stdlib.h>

#include "node_internal.h"

int sfd_peer_capture_decider(sfd_peer_node *node)
{
    uint32_t root = sfd_elect_root(&node->elect, sfd_peer_now(node));
    if (root == 0)
        return -EAGAIN;
    return root == node->cfg.node_id ? 1 : 0;
}

/* The root to every other member but `except`; a member to the root. */
static int route(sfd_peer_node *node, uint32_t type, const uint8_t *buf, size_t len,
                 uint32_t except)
{
    uint32_t root = sfd_elect_root(&node->elect, sfd_peer_now(node));
    if (root == 0)
        return -EAGAIN;
    if (root != node->cfg.node_id) {
        node->c.captures_sent++;
        return sfd_peer_send_raw(node, root, type, buf, len);
    }
    int first = 0;
    for (uint32_t i = 0; i < node->n_links; i++) {
        if (node->links[i].id == except)
            continue;
        node->c.captures_sent++;
        int r = sfd_peer_send_raw(node, node->links[i].id, type, buf, len);
        if (r < 0 && first == 0)
            first = r; /* a member down now: counted as send_dropped */
    }
    return first == -ENOTCONN ? 0 : first;
}

int sfd_peer_capture_request_send(sfd_peer_node *node, const sfd_peer_capture_request *q)
{
    uint8_t *buf;
    size_t len;
    int r = sfd_peer_capture_request_pack(q, &buf, &len);
    if (r < 0)
        return r;
    r = route(node, STAGEFRONTIER__PEER_ENVELOPE__TYPE__CAPTURE_REQUEST, buf, len, 0);
    free(buf);
    return r;
}

int sfd_peer_capture_result_send(sfd_peer_node *node, const sfd_peer_capture_result *res,
                                 uint32_t except)
{
    uint8_t *buf;
    size_t len;
    int r = sfd_peer_capture_result_pack(res, &buf, &len);
    if (r < 0)
        return r;
    r = route(node, STAGEFRONTIER__PEER_ENVELOPE__TYPE__CAPTURE_RESULT, buf, len, except);
    free(buf);
    return r;
}

static void rejected(sfd_peer_node *node, const sfd_peer_msg *msg, const char *why)
{
    uint64_t n = ++node->c.rejected_capture;
    if ((n & (n - 1)) == 0) /* 1, 2, 4, ...: a flood cannot fill the log */
        sfd_peer_logf(node, SFD_PEER_LOG_WARNING,
                      "peer: rejected a capture message from node %u: %s (%llu so far)", msg->from,
                      why, (unsigned long long)n);
}

/* The routing rule: a member writes to the root, the root to the members.
 * Returns 1 from the root, 0 to this node as the root, -1 otherwise. */
static int direction(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    uint32_t root = sfd_elect_root(&node->elect, now);
    if (root == 0)
        return -1;
    if (root == node->cfg.node_id)
        return 0;
    return msg->from == root ? 1 : -1;
}

void sfd_peer_on_capture_request(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    if (sfd_peer_msg_stale(node, msg, now, "a capture request"))
        return;
    sfd_peer_capture_request q;
    int r = sfd_peer_capture_request_unpack(msg->payload, msg->payload_len, &q);
    if (r == -EPROTO) {
        sfd_peer_owner_rejected(node, msg, "a capture request");
        return;
    }
    if (r < 0) {
        rejected(node, msg, "undecodable or out of bounds");
        return;
    }
    int dir = direction(node, msg, now);
    if (dir < 0) {
        rejected(node, msg, "neither to nor from the root");
        return;
    }
    node->c.captures_received++;
    if (node->hooks.capture_request == NULL ||
        node->hooks.capture_request(node->hooks.ctx, msg->from, dir == 1, &q) < 0)
        rejected(node, msg, "refused by this node (no job of that key, or a duplicate id)");
}

void sfd_peer_on_capture_result(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    if (sfd_peer_msg_stale(node, msg, now, "a capture result"))
        return;
    sfd_peer_capture_result r;
    int rc = sfd_peer_capture_result_unpack(msg->payload, msg->payload_len, &r);
    if (rc == -EPROTO) {
        sfd_peer_owner_rejected(node, msg, "a capture result");
        return;
    }
    if (rc < 0) {
        rejected(node, msg, "undecodable or out of bounds");
        return;
    }
    int dir = direction(node, msg, now);
    if (dir < 0 || (dir == 0 && r.node != msg->from)) {
        rejected(node, msg,
                 dir < 0 ? "neither to nor from the root" : "for a rank of another node");
        return;
    }
    node->c.captures_received++;
    if (node->hooks.capture_result == NULL ||
        node->hooks.capture_result(node->hooks.ctx, msg->from, dir == 1, &r) < 0)
        rejected(node, msg, "no such capture or rank, or it has ended");
}

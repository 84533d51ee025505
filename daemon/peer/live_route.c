/*
 * The live verdict's rows between the nodes (docs/LIVE.md, "In a cluster"):
 * a member sends its ranks' rows of complete steps straight to the root in
 * force, not up the fan-in tree, since each part is needed once, by the root
 * alone, and as soon as it is complete. On receipt only the root takes them;
 * what they are is the host's (the live_rows hook).
 */
#include <errno.h>
#include <stdlib.h>

#include "node_internal.h"

int sfd_peer_live_rows_send(sfd_peer_node *node, const sfd_peer_live_rows *b)
{
    uint32_t root = sfd_elect_root(&node->elect, sfd_peer_now(node));
    if (root == 0)
        return -EAGAIN;
    if (root == node->cfg.node_id)
        return -EALREADY;
    uint8_t *buf;
    size_t len;
    int r = sfd_peer_live_rows_pack(b, &buf, &len);
    if (r < 0)
        return r;
    r = sfd_peer_send_raw(node, root, STAGEFRONTIER__PEER_ENVELOPE__TYPE__LIVE_ROWS, buf, len);
    free(buf);
    if (r == 0)
        node->c.live_rows_sent++;
    return r;
}

static void rejected(sfd_peer_node *node, const sfd_peer_msg *msg, const char *why)
{
    uint64_t n = ++node->c.rejected_live;
    if ((n & (n - 1)) == 0) /* 1, 2, 4, ...: a flood cannot fill the log */
        sfd_peer_logf(node, SFD_PEER_LOG_WARNING,
                      "peer: rejected live rows from node %u: %s (%llu so far)", msg->from, why,
                      (unsigned long long)n);
}

void sfd_peer_on_live_rows(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    if (sfd_peer_msg_stale(node, msg, now, "live rows"))
        return;
    sfd_peer_live_rows b;
    int r = sfd_peer_live_rows_unpack(msg->payload, msg->payload_len, &b);
    if (r == -EPROTO) {
        sfd_peer_owner_rejected(node, msg, "live rows");
        return;
    }
    if (r < 0) {
        rejected(node, msg, "undecodable or out of bounds");
        return;
    }
    if (sfd_elect_root(&node->elect, now) != node->cfg.node_id)
        rejected(node, msg, "this node is not the root");
    else if (node->hooks.live_rows == NULL ||
             node->hooks.live_rows(node->hooks.ctx, msg->from, &b) < 0)
        rejected(node, msg, "refused by this node (no such job, another shape, or late)");
    else
        node->c.live_rows_received++;
    sfd_peer_live_rows_free(&b);
}

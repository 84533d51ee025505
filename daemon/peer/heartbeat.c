/*
 * Heartbeats and the liveness view, carried along the fan-in tree so that a
 * member's cost does not grow with the cluster: each tick a node sends one
 * heartbeat up to its parent (the members of its subtree it heard) and one
 * down to each child (the root's view). Only while no root is in force does
 * a node heartbeat every member, so an election sees what it always saw.
 * Owns heartbeat messages only; election rules stay in election.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "node_internal.h"

#define T(x) STAGEFRONTIER__PEER_ENVELOPE__TYPE__##x

/* ---- bitmaps over the members in id order ---------------------------------- */

static void bit_set(uint8_t *b, uint32_t i)
{
    b[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* Marks every member of a set heard at `at` (never later than it was). */
static void stamp(sfd_peer_node *node, const uint8_t *set, uint64_t at)
{
    for (uint32_t byte = 0; byte < node->live_bytes; byte++)
        for (uint32_t bits = set[byte]; bits != 0; bits &= bits - 1)
            sfd_elect_member_heard(&node->elect, at, byte * 8 + (uint32_t)__builtin_ctz(bits));
}

/* The root's view: every member it counts as live. */
static void build_view(sfd_peer_node *node, uint64_t now)
{
    memset(node->view, 0, node->live_bytes);
    for (uint32_t i = 0; i < node->elect.n_members; i++)
        if (sfd_elect_member_live(&node->elect, now, i))
            bit_set(node->view, i);
    node->view_root = node->cfg.node_id;
}

/* This node and what its subtree reported within the failure timeout. Built
 * from the senders' own sets only, never from the view pushed down, so a
 * member that dies drops out of the root's view. */
static void build_up(sfd_peer_node *node, uint64_t now)
{
    memset(node->up, 0, node->live_bytes);
    for (uint32_t i = 0; i < node->elect.n_members; i++)
        if (node->elect.ids[i] == node->cfg.node_id)
            bit_set(node->up, i);
    for (uint32_t k = 0; k < node->n_links; k++) {
        const sfd_peer_link *l = &node->links[k];
        if (l->subtree == NULL || now - l->subtree_ms > node->cfg.failure_timeout_ms)
            continue;
        for (uint32_t b = 0; b < node->live_bytes; b++)
            node->up[b] |= l->subtree[b];
    }
}

int sfd_peer_liveness_init(sfd_peer_node *node)
{
    node->live_bytes = (node->cfg.n_members + 7) / 8;
    node->view = calloc(node->live_bytes, 1);
    node->up = calloc(node->live_bytes, 1);
    node->kids = calloc(node->cfg.n_members, sizeof *node->kids);
    return node->view && node->up && node->kids ? 0 : -ENOMEM;
}

void sfd_peer_liveness_free(sfd_peer_node *node)
{
    for (uint32_t k = 0; node->links != NULL && k < node->n_links; k++) {
        free(node->links[k].subtree);
        node->links[k].subtree = NULL;
    }
    free(node->view);
    free(node->up);
    free(node->kids);
    node->view = node->up = NULL;
    node->kids = NULL;
}

/* ---- sending ------------------------------------------------------------- */

/* The fields every heartbeat carries. */
static void heartbeat_init(sfd_peer_node *node, uint64_t now, Stagefrontier__Heartbeat *hb)
{
    stagefrontier__heartbeat__init(hb);
    hb->node_id = node->cfg.node_id;
    hb->term = node->elect.term;
    hb->has_root_id = hb->has_is_root = hb->has_summaries_in_flight = true;
    hb->root_id = sfd_elect_root(&node->elect, now);
    hb->is_root = node->elect.role == SFD_ELECT_ROOT;
    hb->summaries_in_flight = node->n_retained;
    hb->has_epoch_seen = hb->has_epoch_closed = true;
}

/* Sends a heartbeat to one member, with the replay state held for it. */
static void heartbeat_to(sfd_peer_node *node, const sfd_peer_link *l, Stagefrontier__Heartbeat *hb)
{
    hb->epoch_seen = l->replay.epoch;
    hb->epoch_closed = l->replay.closed;
    sfd_peer_send(node, l->id, T(HEARTBEAT), &hb->base);
}

static void heartbeat_to_id(sfd_peer_node *node, uint32_t id, Stagefrontier__Heartbeat *hb)
{
    const sfd_peer_link *l = sfd_peer_link_find(node, id);
    if (l != NULL)
        heartbeat_to(node, l, hb);
}

/* Without the window list, so it fits the receiver's 4 KiB cap on frames of
 * a connection that has not authenticated yet. */
void sfd_peer_send_hello(sfd_peer_node *node, uint32_t dest)
{
    Stagefrontier__Heartbeat hb;
    heartbeat_init(node, sfd_peer_now(node), &hb);
    heartbeat_to_id(node, dest, &hb);
}

/* A window key in its wire form (views into k). */
static void key_msg(const sfd_window_key *k, Stagefrontier__WindowKey *m)
{
    stagefrontier__window_key__init(m);
    m->job_id = (char *)k->job;
    m->has_owner_uid = m->has_incarnation = true;
    m->owner_uid = k->uid;
    m->incarnation = k->incarnation;
    m->window = k->window;
    m->segment = k->segment;
}

/* The window list of a down heartbeat: the root's own, or what it relayed. */
static size_t window_list(sfd_peer_node *node, bool root, Stagefrontier__WindowKey *keys,
                          Stagefrontier__WindowKey **kp)
{
    size_t n = 0;
    for (sfd_peer_pending *p = root ? node->pending : NULL; p && n < SFD_PEER_PENDING_MAX;
         p = p->next)
        key_msg(&p->key, &keys[n++]);
    for (size_t i = 0; !root && i < node->n_view_pending; i++)
        key_msg(&node->view_pending[i], &keys[n++]);
    for (size_t i = 0; i < n; i++)
        kp[i] = &keys[i];
    return n;
}

void sfd_peer_heartbeat_all(sfd_peer_node *node, uint64_t now)
{
    Stagefrontier__Heartbeat hb;
    Stagefrontier__WindowKey keys[SFD_PEER_PENDING_MAX];
    Stagefrontier__WindowKey *kp[SFD_PEER_PENDING_MAX];
    heartbeat_init(node, now, &hb);
    if (hb.is_root) {
        hb.n_pending = window_list(node, true, keys, kp);
        hb.pending = kp;
    }
    for (uint32_t i = 0; i < node->n_links; i++)
        heartbeat_to(node, &node->links[i], &hb);
}

/* To the children: the root's view and window list, stamped with how long
 * ago the root was heard, so a dead root times out at every depth at once. */
static void send_down(sfd_peer_node *node, uint64_t now, uint32_t root)
{
    bool is_root = root == node->cfg.node_id;
    if (is_root)
        build_view(node, now);
    else if (node->view_root != root)
        return; /* no view of this root yet */
    uint32_t n = sfd_peer_tree_child_ids(&node->elect, now, node->cfg.fanout, node->kids,
                                         node->cfg.n_members);
    if (n == 0)
        return;
    Stagefrontier__Heartbeat hb;
    Stagefrontier__WindowKey keys[SFD_PEER_PENDING_MAX];
    Stagefrontier__WindowKey *kp[SFD_PEER_PENDING_MAX];
    heartbeat_init(node, now, &hb);
    hb.n_pending = window_list(node, is_root, keys, kp);
    hb.pending = kp;
    hb.has_root_view = hb.has_root_age_ms = true;
    hb.root_view = (ProtobufCBinaryData){node->live_bytes, node->view};
    hb.root_age_ms = is_root ? 0 : (uint32_t)(now - node->elect.root_heard);
    for (uint32_t i = 0; i < n; i++)
        heartbeat_to_id(node, node->kids[i], &hb);
}

void sfd_peer_heartbeat_tick(sfd_peer_node *node, uint64_t now)
{
    uint32_t root = sfd_elect_root(&node->elect, now);
    if (root == 0) {
        sfd_peer_heartbeat_all(node, now);
        return;
    }
    if (root != node->cfg.node_id) {
        uint32_t parent = sfd_peer_tree_parent(&node->elect, now, node->cfg.fanout);
        Stagefrontier__Heartbeat hb;
        heartbeat_init(node, now, &hb);
        build_up(node, now);
        hb.has_subtree_live = true;
        hb.subtree_live = (ProtobufCBinaryData){node->live_bytes, node->up};
        heartbeat_to_id(node, parent, &hb);
    }
    send_down(node, now, root);
}

/* ---- receiving ----------------------------------------------------------- */

/* A member holds our epoch as closed (it restarted) or holds a higher one
 * (accepted from a forger): start a new epoch above it. */
static void follow_epoch(sfd_peer_node *node, uint32_t from, uint64_t seen, bool closed)
{
    uint64_t next = sfd_peer_epoch_after(node->epoch, seen, closed);
    if (next == 0)
        return;
    sfd_peer_logf(node, SFD_PEER_LOG_NOTICE,
                  "peer: node %u holds epoch %" PRIu64 "%s; "
                  "starting epoch %" PRIu64,
                  from, seen, closed ? " (closed)" : "", next);
    node->epoch = next;
    node->seq = 0;
    node->c.epoch_bumps++;
    sfd_peer_state_changed(node);
}

/* Subtree sets are kept for at most this many senders: a node's children,
 * with room for a tree that is changing. */
static uint32_t subtree_cap(const sfd_peer_node *node)
{
    uint64_t cap = 2 * (uint64_t)node->cfg.fanout + 16;
    return cap < node->n_links ? (uint32_t)cap : node->n_links;
}

/* Keeps a sender's subtree set for this node's own up heartbeat. */
static void keep_subtree(sfd_peer_node *node, sfd_peer_link *l, const uint8_t *set, uint64_t now)
{
    if (l->subtree == NULL) {
        sfd_peer_link *stalest = NULL;
        if (node->n_subtrees >= subtree_cap(node)) {
            for (uint32_t k = 0; k < node->n_links; k++) {
                sfd_peer_link *o = &node->links[k];
                if (o->subtree != NULL && (stalest == NULL || o->subtree_ms < stalest->subtree_ms))
                    stalest = o;
            }
            if (stalest == NULL || now - stalest->subtree_ms <= node->cfg.failure_timeout_ms)
                return; /* every kept set is fresh: this one only counts as heard */
            l->subtree = stalest->subtree;
            stalest->subtree = NULL;
        } else if ((l->subtree = malloc(node->live_bytes)) == NULL) {
            return;
        } else {
            node->n_subtrees++;
        }
    }
    memcpy(l->subtree, set, node->live_bytes);
    l->subtree_ms = now;
}

/* A window of the root's list, by its whole key: 0, -EBADMSG, or -EPROTO
 * for an owner or incarnation missing or out of bounds. */
static int pending_key(const Stagefrontier__WindowKey *k, sfd_window_key *ret)
{
    return sfd_peer_window_key_make(k->job_id, k->has_owner_uid, k->owner_uid, k->has_incarnation,
                                    k->incarnation, k->window, k->segment, ret);
}

/* A down heartbeat: follow its root (heard root_age_ms ago), take its view
 * and its window list (an entry that does not check is skipped). */
static void take_view(sfd_peer_node *node, const sfd_peer_msg *msg,
                      const Stagefrontier__Heartbeat *hb, uint64_t now)
{
    uint32_t root = hb->root_id;
    uint64_t at = now > hb->root_age_ms ? now - hb->root_age_ms : 1;
    if (root == 0 || root == node->cfg.node_id)
        return;
    if (root != msg->from) {
        sfd_elect_out eo = {0};
        sfd_elect_on_heartbeat(&node->elect, at, root, msg->term, true, &eo);
        sfd_peer_apply(node, &eo, now);
    }
    if (sfd_elect_root(&node->elect, now) != root)
        return;
    memcpy(node->view, hb->root_view.data, node->live_bytes);
    node->view_root = root;
    stamp(node, node->view, at);
    node->n_view_pending = 0;
    for (size_t i = 0; i < hb->n_pending; i++) {
        if (pending_key(hb->pending[i], &node->view_pending[node->n_view_pending]) == 0)
            node->n_view_pending++;
    }
}

/* The root is collecting windows we already hold reports of: hand them back
 * so it adopts them instead of reporting twice. */
static void hand_back(sfd_peer_node *node, const Stagefrontier__Heartbeat *hb, uint32_t root)
{
    for (size_t i = 0; i < hb->n_pending; i++) {
        sfd_window_key key;
        if (pending_key(hb->pending[i], &key) < 0)
            continue;
        const sfd_peer_report *r = sfd_peer_report_find(node, &key);
        if (r != NULL)
            sfd_peer_report_send(node, root, r);
    }
}

bool sfd_peer_heartbeat_valid(const Stagefrontier__Heartbeat *hb, uint32_t from, uint32_t n_members,
                              uint32_t failure_timeout_ms)
{
    size_t live_bytes = ((size_t)n_members + 7) / 8;
    if (hb == NULL || hb->node_id != from || hb->n_pending > SFD_PEER_PENDING_MAX)
        return false;
    if (hb->has_subtree_live && hb->subtree_live.len != live_bytes)
        return false;
    if (hb->has_root_view && (hb->root_view.len != live_bytes || !hb->has_root_age_ms ||
                              hb->root_age_ms > failure_timeout_ms || !hb->has_root_id))
        return false;
    return true;
}

void sfd_peer_on_heartbeat(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    Stagefrontier__Heartbeat *hb =
        stagefrontier__heartbeat__unpack(NULL, msg->payload_len, msg->payload);
    if (!sfd_peer_heartbeat_valid(hb, msg->from, node->cfg.n_members,
                                  node->cfg.failure_timeout_ms)) {
        node->c.rejected_decode++;
        goto out;
    }
    for (size_t i = 0; i < hb->n_pending; i++) {
        sfd_window_key key;
        if (pending_key(hb->pending[i], &key) == -EPROTO) {
            sfd_peer_owner_rejected(node, msg, "a heartbeat's window list"); /* skipped below */
            break;
        }
    }
    sfd_peer_link *l = sfd_peer_link_find(node, msg->from);
    if (hb->has_epoch_seen)
        follow_epoch(node, msg->from, hb->epoch_seen, hb->has_epoch_closed && hb->epoch_closed);
    l->last_heartbeat_ms = now;
    l->in_flight = hb->summaries_in_flight;
    l->term_seen = msg->term;
    l->root_seen = hb->root_id;
    sfd_elect_out eo = {0};
    sfd_elect_on_heartbeat(&node->elect, now, msg->from, msg->term, hb->is_root, &eo);
    sfd_peer_apply(node, &eo, now);
    if (hb->has_subtree_live) {
        keep_subtree(node, l, hb->subtree_live.data, now);
        stamp(node, hb->subtree_live.data, now);
    }
    if (hb->has_root_view)
        take_view(node, msg, hb, now);
    uint32_t root = sfd_elect_root(&node->elect, now);
    if (root == node->cfg.node_id && hb->root_id != root) {
        /* A member without our root (restarted, or cut off and healed)
         * hears it from us at once, not when the tree reaches it. */
        Stagefrontier__Heartbeat me;
        heartbeat_init(node, now, &me);
        heartbeat_to(node, l, &me);
    }
    bool from_root_line = hb->is_root ? msg->from == root : hb->root_id == root;
    if (root != 0 && root != node->cfg.node_id && from_root_line)
        hand_back(node, hb, root);
out:
    stagefrontier__heartbeat__free_unpacked(hb, NULL);
}

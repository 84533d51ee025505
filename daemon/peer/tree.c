/*
 * The fan-in tree over the live members, rooted at the root in force: the
 * root, then the other live members in id order; the parent of position p
 * is position (p - 1) / fanout. Pure: derived from the election state and a
 * timestamp. Parents always come earlier in the order, so no view of
 * liveness can make a cycle; a fanout of at least the member count is a star.
 * Each query is one pass over the members (heartbeats ask every tick).
 */
#include "peer.h"

/* Position of `id` in the order (root first), or -1 when it is not live. */
static int64_t position(const sfd_elect *e, uint64_t now, uint32_t root, uint32_t id)
{
    if (id == root)
        return 0;
    int64_t p = 1;
    for (uint32_t i = 0; i < e->n_members; i++) {
        uint32_t m = e->ids[i];
        bool live = sfd_elect_member_live(e, now, i);
        if (m == id)
            return live ? p : -1;
        if (m != root && live)
            p++;
    }
    return -1;
}

/* Writes the members at positions [first, first + n) (fewer when the order
 * ends first) and returns how many. */
static uint32_t at_positions(const sfd_elect *e, uint64_t now, uint32_t root, int64_t first,
                             uint32_t n, uint32_t *ret_ids)
{
    if (first == 0 && n > 0) {
        ret_ids[0] = root;
        return 1 + at_positions(e, now, root, 1, n - 1, ret_ids + 1);
    }
    uint32_t k = 0;
    int64_t p = 1;
    for (uint32_t i = 0; i < e->n_members && k < n; i++) {
        if (e->ids[i] == root || !sfd_elect_member_live(e, now, i))
            continue;
        if (p >= first)
            ret_ids[k++] = e->ids[i];
        p++;
    }
    return k;
}

uint32_t sfd_peer_tree_parent(const sfd_elect *e, uint64_t now, uint32_t fanout)
{
    uint32_t root = sfd_elect_root(e, now);
    if (root == 0 || root == e->self)
        return 0;
    if (fanout == 0)
        fanout = 1;
    int64_t p = position(e, now, root, e->self);
    uint32_t parent = root;
    if (p > 0)
        at_positions(e, now, root, (p - 1) / fanout, 1, &parent);
    return parent;
}

/* The position of this node's first child (*ret_root the root in force), or
 * -1 without a root. */
static int64_t first_child(const sfd_elect *e, uint64_t now, uint32_t fanout, uint32_t *ret_root)
{
    uint32_t root = sfd_elect_root(e, now);
    if (root == 0)
        return -1;
    int64_t p = position(e, now, root, e->self);
    if (p < 0)
        return -1;
    *ret_root = root;
    return p * (int64_t)fanout + 1;
}

uint32_t sfd_peer_tree_child_ids(const sfd_elect *e, uint64_t now, uint32_t fanout,
                                 uint32_t *ret_ids, uint32_t max)
{
    if (fanout == 0)
        fanout = 1;
    uint32_t root;
    int64_t first = first_child(e, now, fanout, &root);
    if (first < 0)
        return 0;
    return at_positions(e, now, root, first, fanout < max ? fanout : max, ret_ids);
}

uint32_t sfd_peer_tree_children(const sfd_elect *e, uint64_t now, uint32_t fanout)
{
    if (fanout == 0)
        fanout = 1;
    uint32_t root;
    int64_t first = first_child(e, now, fanout, &root);
    if (first < 0)
        return 0;
    uint32_t live = 1;
    for (uint32_t i = 0; i < e->n_members; i++)
        if (e->ids[i] != root && sfd_elect_member_live(e, now, i))
            live++;
    if (first >= live)
        return 0;
    int64_t last = first + fanout - 1;
    if (last > (int64_t)live - 1)
        last = live - 1;
    return (uint32_t)(last - first + 1);
}

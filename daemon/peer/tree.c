/*
 * The fan-in tree over the live members, rooted at the root in force: the
 * root, then the other live members in id order; the parent of position p
 * is position (p - 1) / fanout. Pure: derived from the election state and a
 * timestamp. Parents always come earlier in the order, so no view of
 * liveness can make a cycle; a fanout of at least the member count is a star.
 */
#include "peer.h"

/* Position of `id` in the order (root first), or -1 when it is not live. */
static int64_t position(const sfd_elect *e, uint64_t now, uint32_t root, uint32_t id)
{
    if (id == root)
        return 0;
    if (!sfd_elect_is_live(e, now, id))
        return -1;
    int64_t p = 1;
    for (uint32_t i = 0; i < e->n_members; i++) {
        uint32_t m = e->ids[i];
        if (m == id)
            return p;
        if (m != root && sfd_elect_is_live(e, now, m))
            p++;
    }
    return -1;
}

static uint32_t at_position(const sfd_elect *e, uint64_t now, uint32_t root, int64_t pos)
{
    if (pos == 0)
        return root;
    int64_t p = 1;
    for (uint32_t i = 0; i < e->n_members; i++) {
        uint32_t m = e->ids[i];
        if (m == root || !sfd_elect_is_live(e, now, m))
            continue;
        if (p == pos)
            return m;
        p++;
    }
    return root;
}

uint32_t sfd_peer_tree_parent(const sfd_elect *e, uint64_t now, uint32_t fanout)
{
    uint32_t root = sfd_elect_root(e, now);
    if (root == 0 || root == e->self)
        return 0;
    if (fanout == 0)
        fanout = 1;
    int64_t p = position(e, now, root, e->self);
    if (p <= 0)
        return root;
    return at_position(e, now, root, (p - 1) / fanout);
}

uint32_t sfd_peer_tree_child_ids(const sfd_elect *e, uint64_t now, uint32_t fanout,
                                 uint32_t *ret_ids, uint32_t max)
{
    uint32_t n = sfd_peer_tree_children(e, now, fanout);
    uint32_t root = sfd_elect_root(e, now);
    if (n == 0)
        return 0;
    if (fanout == 0)
        fanout = 1;
    int64_t first = position(e, now, root, e->self) * (int64_t)fanout + 1;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n && k < max; i++)
        ret_ids[k++] = at_position(e, now, root, first + i);
    return k;
}

uint32_t sfd_peer_tree_children(const sfd_elect *e, uint64_t now, uint32_t fanout)
{
    uint32_t root = sfd_elect_root(e, now);
    if (root == 0)
        return 0;
    if (fanout == 0)
        fanout = 1;
    int64_t p = position(e, now, root, e->self);
    if (p < 0)
        return 0;
    uint32_t live = 1;
    for (uint32_t i = 0; i < e->n_members; i++)
        if (e->ids[i] != root && sfd_elect_is_live(e, now, e->ids[i]))
            live++;
    int64_t first = p * (int64_t)fanout + 1;
    if (first >= live)
        return 0;
    int64_t last = first + fanout - 1;
    if (last > (int64_t)live - 1)
        last = live - 1;
    return (uint32_t)(last - first + 1);
}

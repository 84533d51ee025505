/*
 * The root's side of summaries: merging the windows it collects (dedup by
 * rank coverage), closing each when coverage reaches the world size or at
 * its deadline, and proposing the window's report to the members. The
 * report store (report_store.c) takes it from there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node_internal.h"

void sfd_peer_root_pending_remove(sfd_peer_node *node, const sfd_window_key *key)
{
    for (sfd_peer_pending **p = &node->pending; *p; p = &(*p)->next) {
        if (sfd_window_key_equal(&(*p)->key, key)) {
            sfd_peer_pending *x = *p;
            *p = x->next;
            sf_summary_free(x->s);
            free(x);
            node->n_pending--;
            return;
        }
    }
}

static void close_window(sfd_peer_node *node, sfd_peer_pending *p)
{
    sfd_window_key key = p->key;
    if (sfd_peer_report_find(node, &key) != NULL) {
        sfd_peer_root_pending_remove(node, &key); /* decided already: a proposal is held */
        return;
    }
    if (sf_summary_covered_ranks(p->s) < p->s->meta.world_size || p->late) {
        p->s->meta.flags |= SF_WIN_LATE_SUMMARY;
        node->c.windows_late++;
    }
    uint8_t *packed = NULL;
    size_t len = 0;
    int r = sfd_peer_summary_pack(p->s, &key, false, node->cfg.node_id, &packed, &len);
    if (r < 0) {
        sfd_peer_logf(node, SFD_PEER_LOG_ERR, "peer: %s window %lld cannot be packed: %s", key.job,
                      (long long)key.window, strerror(-r));
        sfd_peer_root_pending_remove(node, &key);
        return;
    }
    node->c.reports_computed++;
    /* Tentative until a majority holds it: pushed now, final on the acks. */
    sfd_peer_report *rep =
        sfd_peer_report_insert(node, &key, node->cfg.node_id, node->elect.term, packed, len);
    free(packed);
    if (rep != NULL)
        sfd_peer_report_propose(node, rep); /* frees p if it commits at once */
    sfd_peer_root_pending_remove(node, &key);
}

static sfd_peer_pending *pending_find(sfd_peer_node *node, const sfd_window_key *key)
{
    for (sfd_peer_pending *p = node->pending; p; p = p->next)
        if (sfd_window_key_equal(&p->key, key))
            return p;
    return NULL;
}

static sfd_peer_pending *pending_open(sfd_peer_node *node, const sfd_window_key *key,
                                      const sf_summary *s, bool resent)
{
    if (node->n_pending >= SFD_PEER_PENDING_KEPT)
        return NULL;
    sfd_peer_pending *p = calloc(1, sizeof *p);
    if (p == NULL || sf_summary_clone(s, &p->s) < 0) {
        free(p);
        return NULL;
    }
    p->key = *key;
    p->late = resent;
    p->deadline_ms = sfd_peer_now(node) + node->cfg.summary_deadline_ms;
    /* Appended: the heartbeat lists the oldest windows first. */
    sfd_peer_pending **tail = &node->pending;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = p;
    node->n_pending++;
    return p;
}

void sfd_peer_root_accept(sfd_peer_node *node, const sfd_window_key *key, const sf_summary *s,
                          bool resent, uint32_t from)
{
    const sfd_peer_report *done = sfd_peer_report_find(node, key);
    if (done != NULL) {
        if (from != node->cfg.node_id)
            sfd_peer_report_send(node, from, done);
        else if (done->committed)
            sfd_peer_retained_drop_key(node, key); /* our own, already reported */
        return;
    }
    sfd_peer_pending *p = pending_find(node, key);
    if (p == NULL) {
        p = pending_open(node, key, s, resent);
        if (p == NULL) {
            node->c.retained_dropped++;
            return;
        }
    } else {
        int r = sf_summary_merge(p->s, s);
        if (r == -EALREADY)
            node->c.merge_duplicates++;
        else if (r == -EBUSY)
            node->c.merge_conflicts++;
        else if (r < 0)
            node->c.merge_mismatches++;
        else if (resent)
            p->late = true;
    }
    if (sf_summary_covered_ranks(p->s) >= p->s->meta.world_size)
        close_window(node, p);
}

void sfd_peer_root_tick(sfd_peer_node *node, uint64_t now)
{
    sfd_peer_pending *p = node->pending;
    while (p != NULL) {
        sfd_peer_pending *next = p->next;
        if (now >= p->deadline_ms)
            close_window(node, p);
        p = next;
    }
}

void sfd_peer_root_drop_all(sfd_peer_node *node)
{
    while (node->pending != NULL) {
        sfd_peer_pending *p = node->pending;
        node->pending = p->next;
        sf_summary_free(p->s);
        free(p);
    }
    node->n_pending = 0;
}

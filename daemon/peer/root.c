/*
 * The root's side of summaries: merging the windows it collects (dedup by
 * rank coverage), closing each when coverage reaches the world size or at
 * its deadline, computing the report through the host's hook and pushing
 * it to every member; and every node's store of reports, which makes each
 * window's report reach the host exactly once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node_internal.h"

const sfd_peer_report *sfd_peer_report_find(const sfd_peer_node *node,
                                            const sfd_window_key *key)
{
    for (const sfd_peer_report *r = node->reports; r; r = r->next)
        if (sfd_window_key_equal(&r->key, key))
            return r;
    return NULL;
}

static void report_free(sfd_peer_report *r)
{
    if (r == NULL)
        return;
    free(r->acks);
    free(r->packed);
    free(r);
}

void sfd_peer_reports_free(sfd_peer_node *node)
{
    while (node->reports != NULL) {
        sfd_peer_report *r = node->reports;
        node->reports = r->next;
        report_free(r);
    }
    node->n_reports = 0;
}

static void evict_oldest_report(sfd_peer_node *node)
{
    sfd_peer_report **p = &node->reports;
    while (*p != NULL && (*p)->next != NULL)
        p = &(*p)->next;
    report_free(*p);
    *p = NULL;
    node->n_reports--;
}

void sfd_peer_retained_drop_key(sfd_peer_node *node, const sfd_window_key *key)
{
    sfd_peer_retained **p = &node->retained;
    while (*p != NULL) {
        sfd_peer_retained *r = *p;
        if (sfd_window_key_equal(&r->key, key)) {
            *p = r->next;
            sf_summary_free(r->s);
            free(r);
            node->n_retained--;
        } else {
            p = &r->next;
        }
    }
}

static void pending_remove(sfd_peer_node *node, const sfd_window_key *key)
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

static sfd_peer_report *report_insert(sfd_peer_node *node, const sfd_window_key *key,
                                      uint32_t root_id, uint64_t term, const uint8_t *packed,
                                      size_t len)
{
    sfd_peer_report *r = calloc(1, sizeof *r);
    if (r == NULL || (r->packed = malloc(len ? len : 1)) == NULL) {
        free(r);
        return NULL;
    }
    memcpy(r->packed, packed, len);
    r->len = len;
    r->key = *key;
    r->root_id = root_id;
    r->root_term = term;
    r->next = node->reports;
    node->reports = r;
    if (++node->n_reports > SFD_PEER_REPORTS_KEPT)
        evict_oldest_report(node);
    return r;
}

/* Makes a report final: the host gets it, once, and the summaries of its
 * window are dropped. `merged` may be NULL: it is decoded from the packed
 * form then. */
static int report_commit(sfd_peer_node *node, sfd_peer_report *r, const sf_summary *merged)
{
    sf_summary *decoded = NULL;
    if (merged == NULL) {
        int rc = sfd_peer_summary_unpack(r->packed, r->len, &decoded, NULL, NULL);
        if (rc < 0)
            return rc;
        merged = decoded;
    }
    sfd_window_key key = r->key;
    r->committed = true;
    free(r->acks);
    r->acks = NULL;
    /* Deliver first: `merged` may be the pending window's own summary. */
    if (node->hooks.deliver != NULL)
        node->hooks.deliver(node->hooks.ctx, &key, r->root_id, r->root_term, merged);
    sf_summary_free(decoded);
    sfd_peer_retained_drop_key(node, &key);
    pending_remove(node, &key);
    return 1;
}

/* A report reaching this node (pushed, relayed, or handed back): a
 * proposal is held, a final one is delivered. A later proposal of a higher
 * term, or a final one, replaces a proposal held. Returns 1 when something
 * changed (the caller relays it), 0 when not, or a negative errno. */
int sfd_peer_report_receive(sfd_peer_node *node, const sfd_window_key *key, uint32_t root_id,
                            uint64_t term, const uint8_t *packed, size_t len, bool final)
{
    sfd_peer_report *r = (sfd_peer_report *)sfd_peer_report_find(node, key);
    if (r != NULL && (r->committed || (!final && term <= r->root_term)))
        return 0;
    sf_summary *decoded = NULL;
    sfd_window_key inner;
    int rc = sfd_peer_summary_unpack(packed, len, &decoded, &inner, NULL);
    if (rc < 0)
        return rc;
    if (!sfd_window_key_equal(&inner, key)) {
        sf_summary_free(decoded);
        return -EBADMSG;
    }
    if (r != NULL) {
        uint8_t *copy = malloc(len ? len : 1);
        if (copy == NULL) {
            sf_summary_free(decoded);
            return -ENOMEM;
        }
        memcpy(copy, packed, len);
        free(r->packed);
        r->packed = copy;
        r->len = len;
        r->root_id = root_id;
        r->root_term = term;
        r->n_acks = 0;
    } else if ((r = report_insert(node, key, root_id, term, packed, len)) == NULL) {
        sf_summary_free(decoded);
        return -ENOMEM;
    }
    rc = final ? report_commit(node, r, decoded) : 1;
    sf_summary_free(decoded);
    return rc;
}

/* Hands a final report to the host again, for a window the host closed
 * after the report had arrived. */
void sfd_peer_report_redeliver(sfd_peer_node *node, const sfd_window_key *key)
{
    const sfd_peer_report *r = sfd_peer_report_find(node, key);
    sf_summary *s = NULL;
    if (r == NULL || !r->committed || node->hooks.deliver == NULL ||
        sfd_peer_summary_unpack(r->packed, r->len, &s, NULL, NULL) < 0)
        return;
    node->hooks.deliver(node->hooks.ctx, key, r->root_id, r->root_term, s);
    sf_summary_free(s);
}

bool sfd_peer_report_committed(const sfd_peer_node *node, const sfd_window_key *key)
{
    const sfd_peer_report *r = sfd_peer_report_find(node, key);
    return r != NULL && r->committed;
}

static void push_report(sfd_peer_node *node, const sfd_peer_report *r);

/* Final once a majority (the root included) holds it: delivered here, and
 * announced down the tree so the members deliver it too. */
static void maybe_commit(sfd_peer_node *node, sfd_peer_report *r)
{
    if (r->committed || r->n_acks + 1 < sfd_elect_majority(&node->elect))
        return;
    sfd_window_key key = r->key;
    if (report_commit(node, r, NULL) < 0)
        return;
    const sfd_peer_report *done = sfd_peer_report_find(node, &key);
    if (done != NULL)
        push_report(node, done);
}

void sfd_peer_report_acked(sfd_peer_node *node, const sfd_window_key *key, uint32_t from)
{
    sfd_peer_report *r = (sfd_peer_report *)sfd_peer_report_find(node, key);
    if (r == NULL || r->committed || r->acks == NULL || node->elect.role != SFD_ELECT_ROOT)
        return;
    for (uint32_t i = 0; i < r->n_acks; i++)
        if (r->acks[i] == from)
            return;
    if (r->n_acks < node->cfg.n_members)
        r->acks[r->n_acks++] = from;
    maybe_commit(node, r);
}

/* Puts a held proposal (computed here, handed back by a member, or held
 * from an earlier root) to the members' vote as this root's. */
void sfd_peer_report_propose(sfd_peer_node *node, sfd_peer_report *r)
{
    if (r->committed || node->elect.role != SFD_ELECT_ROOT)
        return;
    if (r->acks == NULL && (r->acks = calloc(node->cfg.n_members, sizeof *r->acks)) == NULL)
        return;
    r->n_acks = 0;
    push_report(node, r);
    maybe_commit(node, r);
}

/* A new root puts every proposal it holds to the vote again: a report an
 * earlier root proposed survives that root, so no window gets a second. */
void sfd_peer_reports_repropose(sfd_peer_node *node)
{
    sfd_peer_report *r = node->reports;
    while (r != NULL) {
        sfd_peer_report *next = r->next;    /* a commit may drop others' entries */
        if (!r->committed)
            sfd_peer_report_propose(node, r);
        r = next;
    }
}

int sfd_peer_report_send(sfd_peer_node *node, uint32_t dest, const sfd_peer_report *r)
{
    Stagefrontier__Report m = STAGEFRONTIER__REPORT__INIT;
    m.job_id = (char *)r->key.job;
    m.window = r->key.window;
    m.segment = r->key.segment;
    m.root_id = r->root_id;
    m.root_term = r->root_term;
    m.merged.data = r->packed;
    m.merged.len = r->len;
    m.has_final = true;
    m.final = r->committed;
    return sfd_peer_send(node, dest, STAGEFRONTIER__PEER_ENVELOPE__TYPE__REPORT, &m.base);
}

/* Reports travel down the fan-in tree: each node sends them to its own
 * children, so the root sends `fanout` copies, not one per member. A member
 * missed by a stale view still gets its report: it keeps resending its
 * summary, and the root answers a summary of a reported window with the
 * report. With a fanout of at least the member count this is a star. */
void sfd_peer_report_relay(sfd_peer_node *node, const sfd_peer_report *r)
{
    uint64_t now = sfd_peer_now(node);
    if (sfd_elect_root(&node->elect, now) == 0)
        return;
    uint32_t ids[256];
    uint32_t fanout = node->cfg.fanout < 256 ? node->cfg.fanout : 256;
    if (node->cfg.fanout >= node->cfg.n_members) {
        for (uint32_t i = 0; i < node->n_links; i++)
            sfd_peer_report_send(node, node->links[i].id, r);
        return;
    }
    uint32_t n = sfd_peer_tree_child_ids(&node->elect, now, fanout, ids, 256);
    for (uint32_t i = 0; i < n; i++)
        sfd_peer_report_send(node, ids[i], r);
}

static void push_report(sfd_peer_node *node, const sfd_peer_report *r)
{
    sfd_peer_report_relay(node, r);
}


static void close_window(sfd_peer_node *node, sfd_peer_pending *p)
{
    sfd_window_key key = p->key;
    if (sfd_peer_report_find(node, &key) != NULL) {
        pending_remove(node, &key);     /* decided already: a proposal is held */
        return;
    }
    if (sf_summary_covered_ranks(p->s) < p->s->meta.world_size || p->late) {
        p->s->meta.flags |= SF_WIN_LATE_SUMMARY;
        node->c.windows_late++;
    }
    uint8_t *packed = NULL;
    size_t len = 0;
    int r = sfd_peer_summary_pack(p->s, key.job, false, node->cfg.node_id, &packed, &len);
    if (r < 0) {
        sfd_peer_logf(node, SFD_PEER_LOG_ERR, "peer: %s window %lld cannot be packed: %s",
                      key.job, (long long)key.window, strerror(-r));
        pending_remove(node, &key);
        return;
    }
    node->c.reports_computed++;
    /* Tentative until a majority holds it: pushed now, final on the acks. */
    sfd_peer_report *rep = report_insert(node, &key, node->cfg.node_id, node->elect.term,
                                         packed, len);
    free(packed);
    if (rep != NULL)
        sfd_peer_report_propose(node, rep);  /* frees p if it commits at once */
    pending_remove(node, &key);
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

void sfd_peer_root_accept(sfd_peer_node *node, const sfd_window_key *key,
                          const sf_summary *s, bool resent, uint32_t from)
{
    const sfd_peer_report *done = sfd_peer_report_find(node, key);
    if (done != NULL) {
        if (from != node->cfg.node_id)
            sfd_peer_report_send(node, from, done);
        else if (done->committed)
            sfd_peer_retained_drop_key(node, key);     /* our own, already reported */
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

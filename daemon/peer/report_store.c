/*
 * Every node's store of window reports: proposals and final reports by
 * window key, the majority vote on a root's proposal, relaying down the
 * fan-in tree, and delivery to the host exactly once per window. The root's
 * merging of summaries is root.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node_internal.h"

/* The acknowledgements of a root's report: a bit per member. */
static size_t acked_bytes(const sfd_peer_node *node)
{
    return ((size_t)node->cfg.n_members + 7) / 8;
}

static void acks_clear(const sfd_peer_node *node, sfd_peer_report *r)
{
    if (r->acked != NULL)
        memset(r->acked, 0, acked_bytes(node));
    r->n_acks = 0;
}

const sfd_peer_report *sfd_peer_report_find(const sfd_peer_node *node, const sfd_window_key *key)
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
    free(r->acked);
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

sfd_peer_report *sfd_peer_report_insert(sfd_peer_node *node, const sfd_window_key *key,
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
    free(r->acked);
    r->acked = NULL;
    /* Deliver first: `merged` may be the pending window's own summary. */
    if (node->hooks.deliver != NULL)
        node->hooks.deliver(node->hooks.ctx, &key, r->root_id, r->root_term, merged);
    sf_summary_free(decoded);
    sfd_peer_retained_drop_key(node, &key);
    sfd_peer_root_pending_remove(node, &key);
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
        r->ack_due_ms = 0;
        acks_clear(node, r);
    } else if ((r = sfd_peer_report_insert(node, key, root_id, term, packed, len)) == NULL) {
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

/* An acknowledgement counts once per member: a bit by the member's index,
 * so the count costs the same at any member count (a list searched per
 * acknowledgement made a window's commit quadratic in the members). The
 * root's own hold is counted apart (maybe_commit), never as a bit. */
void sfd_peer_report_acked(sfd_peer_node *node, const sfd_window_key *key, uint32_t from)
{
    sfd_peer_report *r = (sfd_peer_report *)sfd_peer_report_find(node, key);
    int i = sfd_elect_index(&node->elect, from);
    if (r == NULL || r->committed || r->acked == NULL || node->elect.role != SFD_ELECT_ROOT ||
        i < 0 || from == node->cfg.node_id || (r->acked[i >> 3] >> (i & 7)) & 1)
        return;
    r->acked[i >> 3] |= (uint8_t)(1u << (i & 7));
    r->n_acks++;
    maybe_commit(node, r);
}

/* Which members acknowledge a proposal at once: those below the returned
 * index, which holds a majority of the members this root counts live (the
 * root included) and a margin of a sixteenth of the members and two for
 * the slow. The others acknowledge only when the report is not final two
 * heartbeat periods later (sfd_peer_report_held), so a commit needs about
 * half the acknowledgements, each still the member's own, at any member
 * count; a named member that died after the root last heard it costs
 * that wait, not the commit. Below seven members every member is named. */
static uint32_t prompt_bound(const sfd_peer_node *node, uint64_t now)
{
    const sfd_elect *e = &node->elect;
    uint32_t need = sfd_elect_majority(e) - 1 + e->n_members / 16 + 2, have = 0;
    for (uint32_t i = 0; i < e->n_members; i++)
        if (e->ids[i] != e->self && sfd_elect_member_live(e, now, i) && ++have >= need)
            return i + 1;
    return e->n_members;
}

/* A member holds a proposal of `root`: it acknowledges at once when its
 * index is below the proposal's bound, else it sets the time at which it
 * will, should the report not be final by then. */
void sfd_peer_report_held(sfd_peer_node *node, sfd_peer_report *r, uint32_t root, uint64_t now)
{
    if (r->committed)
        return;
    int i = sfd_elect_index(&node->elect, node->cfg.node_id);
    if (i >= 0 && (uint32_t)i < r->prompt_acks_below) {
        sfd_peer_send_ack(node, root, &r->key, 0, true);
    } else if (r->ack_due_ms == 0) {
        r->ack_due_ms = now + 2 * node->cfg.heartbeat_ms;
        node->c.report_acks_deferred++;
    }
}

/* The acknowledgements held back that are due: their reports are still
 * not final, so the prompt ones did not make a majority (a final report,
 * or a newer proposal, clears the one due: sfd_peer_report_receive). */
void sfd_peer_reports_tick(sfd_peer_node *node, uint64_t now)
{
    uint32_t root = sfd_elect_root(&node->elect, now);
    if (root == 0 || root == node->cfg.node_id)
        return;
    for (sfd_peer_report *r = node->reports; r; r = r->next) {
        if (r->ack_due_ms == 0 || now < r->ack_due_ms)
            continue;
        r->ack_due_ms = 0;
        sfd_peer_send_ack(node, root, &r->key, 0, true);
        node->c.report_acks_late++;
    }
}

/* Puts a held proposal (computed here, handed back by a member, or held
 * from an earlier root) to the members' vote as this root's. */
void sfd_peer_report_propose(sfd_peer_node *node, sfd_peer_report *r)
{
    if (r->committed || node->elect.role != SFD_ELECT_ROOT)
        return;
    if (r->acked == NULL && (r->acked = calloc(acked_bytes(node), 1)) == NULL)
        return;
    acks_clear(node, r);
    r->prompt_acks_below = prompt_bound(node, sfd_peer_now(node));
    push_report(node, r);
    maybe_commit(node, r);
}

/* A new root puts every proposal it holds to the vote again: a report an
 * earlier root proposed survives that root, so no window gets a second. */
void sfd_peer_reports_repropose(sfd_peer_node *node)
{
    sfd_peer_report *r = node->reports;
    while (r != NULL) {
        sfd_peer_report *next = r->next; /* a commit may drop others' entries */
        if (!r->committed)
            sfd_peer_report_propose(node, r);
        r = next;
    }
}

int sfd_peer_report_send(sfd_peer_node *node, uint32_t dest, const sfd_peer_report *r)
{
    Stagefrontier__Report m = STAGEFRONTIER__REPORT__INIT;
    m.job_id = (char *)r->key.job;
    m.has_owner_uid = m.has_incarnation = true;
    m.owner_uid = r->key.uid;
    m.incarnation = r->key.incarnation;
    m.window = r->key.window;
    m.segment = r->key.segment;
    m.root_id = r->root_id;
    m.root_term = r->root_term;
    m.merged.data = r->packed;
    m.merged.len = r->len;
    m.has_final = true;
    m.final = r->committed;
    m.has_prompt_acks_below = !r->committed;
    m.prompt_acks_below = r->prompt_acks_below;
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
    if (node->cfg.fanout >= node->cfg.n_members) {
        for (uint32_t i = 0; i < node->n_links; i++)
            sfd_peer_report_send(node, node->links[i].id, r);
        return;
    }
    /* The whole fanout: the children are the same ones heartbeats go to. */
    uint32_t n = sfd_peer_tree_child_ids(&node->elect, now, node->cfg.fanout, node->kids,
                                         node->cfg.n_members);
    for (uint32_t i = 0; i < n; i++)
        sfd_peer_report_send(node, node->kids[i], r);
}

static void push_report(sfd_peer_node *node, const sfd_peer_report *r)
{
    sfd_peer_report_relay(node, r);
}

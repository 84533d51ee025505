/*
 * One node of the cluster: the tick that drives election, heartbeats and
 * routing; the summaries it holds until their reports arrive (its own, and
 * the merges it forwards for its children in the fan-in tree); and the
 * dispatch of authenticated messages. Sockets live in link.c, heartbeats and
 * liveness in heartbeat.c, the root's merge in root.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "node_internal.h"

#define T(x) STAGEFRONTIER__PEER_ENVELOPE__TYPE__##x

uint64_t sfd_peer_now(sfd_peer_node *node)
{
    return uv_now(node->loop);
}

void sfd_peer_logf(sfd_peer_node *node, int prio, const char *fmt, ...)
{
    if (node->hooks.log == NULL)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    node->hooks.log(node->hooks.ctx, prio, buf);
}

/* ---- election actions --------------------------------------------------- */

static void root_changed(sfd_peer_node *node, uint32_t root)
{
    node->c.root_changes++;
    sfd_peer_logf(node, SFD_PEER_LOG_NOTICE, "peer: root is now %u (term %llu)", root,
                  (unsigned long long)node->elect.term);
    if (root != node->cfg.node_id)
        sfd_peer_root_drop_all(node);
    else
        sfd_peer_reports_repropose(node);
}

void sfd_peer_apply(sfd_peer_node *node, const sfd_elect_out *out, uint64_t now)
{
    for (uint32_t i = 0; i < out->n; i++) {
        const sfd_elect_action *a = &out->a[i];
        if (a->type == SFD_ELECT_SEND_CLAIM) {
            Stagefrontier__RootClaim m = STAGEFRONTIER__ROOT_CLAIM__INIT;
            m.candidate_id = a->candidate;
            m.term = a->term;
            for (uint32_t k = 0; k < node->n_links; k++)
                sfd_peer_send(node, node->links[k].id, T(ROOT_CLAIM), &m.base);
        } else if (a->type == SFD_ELECT_SEND_VOTE) {
            Stagefrontier__RootVote m = STAGEFRONTIER__ROOT_VOTE__INIT;
            m.candidate_id = a->candidate;
            m.term = a->term;
            m.granted = a->granted;
            sfd_peer_send(node, a->to, T(ROOT_VOTE), &m.base);
        } else if (a->type == SFD_ELECT_SEND_HEARTBEAT) {
            sfd_peer_heartbeat_all(node, now); /* a new root announces itself */
        } else if (a->type == SFD_ELECT_ROOT_CHANGED) {
            root_changed(node, a->root);
        }
    }
}

/* ---- retained summaries and the fan-in tree ------------------------------ */

static bool flush_ready(sfd_peer_node *node, const sfd_peer_retained *r, uint64_t now)
{
    if (!r->holding)
        return true;
    uint32_t kids = sfd_peer_tree_children(&node->elect, now, node->cfg.fanout);
    return r->children >= kids || now - r->created_ms >= node->cfg.tree_hold_ms;
}

static void send_retained(sfd_peer_node *node, sfd_peer_retained *r, uint32_t target, uint64_t now)
{
    bool resent =
        r->sent_to != 0 || r->resent || now - r->created_ms > node->cfg.summary_deadline_ms;
    uint32_t was = r->sent_to;
    r->sent_to = target;
    r->sent_term = node->elect.term;
    r->sent_ms = now;
    if (resent)
        node->c.summaries_resent++;
    else
        node->c.summaries_sent++;
    if (target == node->cfg.node_id) {
        /* May publish the report, which frees r: r is not touched after. */
        sfd_peer_root_accept(node, &r->key, r->s, resent, target);
        return;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = sfd_peer_summary_pack(r->s, &r->key, resent, node->cfg.node_id, &buf, &len);
    if (rc == 0)
        rc = sfd_peer_send_raw(node, target, T(SUMMARY), buf, len);
    free(buf);
    if (rc < 0)
        r->sent_to = was; /* not sent: due again on the next tick */
}

static bool is_due(const sfd_peer_node *node, const sfd_peer_retained *r, uint32_t target,
                   uint64_t now)
{
    return r->sent_to != target || r->sent_term != node->elect.term ||
           now - r->sent_ms >= 2 * (uint64_t)node->cfg.summary_deadline_ms;
}

/* Sends what is due: first sends, resends after a root or parent change,
 * and periodic resends of summaries whose report never came. */
static void route_retained(sfd_peer_node *node, uint64_t now)
{
    uint32_t root = sfd_elect_root(&node->elect, now);
    uint32_t self = node->cfg.node_id;
    uint32_t target =
        root == self ? root : sfd_peer_tree_parent(&node->elect, now, node->cfg.fanout);
    if (root == 0 || target == 0)
        return;
restart:
    for (sfd_peer_retained *r = node->retained; r; r = r->next) {
        if (!flush_ready(node, r, now))
            continue;
        r->holding = false;
        if (!is_due(node, r, target, now))
            continue;
        send_retained(node, r, target, now);
        /* Merging into our own pending window may have freed entries; each
         * pass leaves one more entry not due, so this ends. */
        if (target == self)
            goto restart;
    }
}

static void retained_add(sfd_peer_node *node, sfd_peer_retained *r)
{
    if (node->n_retained >= node->cfg.retained_max) {
        /* Drop the oldest: its report is overdue and the bound is firm. */
        sfd_peer_retained **p = &node->retained;
        while ((*p)->next != NULL)
            p = &(*p)->next;
        sf_summary_free((*p)->s);
        free(*p);
        *p = NULL;
        node->n_retained--;
        node->c.retained_dropped++;
    }
    r->next = node->retained;
    node->retained = r;
    node->n_retained++;
}

int sfd_peer_submit(sfd_peer_node *node, const char *job, uint32_t uid, uint32_t incarnation,
                    sf_summary *s)
{
    sfd_window_key key;
    if (node == NULL || s == NULL ||
        sfd_peer_window_key_make(job, true, uid, true, incarnation, s->meta.index, s->meta.segment,
                                 &key) < 0) {
        sf_summary_free(s);
        return -EINVAL;
    }
    if (sfd_peer_report_committed(node, &key)) {
        /* The window closed here after its report arrived (this node was
         * late or cut off): the host stores the report now. */
        sf_summary_free(s);
        sfd_peer_report_redeliver(node, &key);
        return -EALREADY;
    }
    sfd_peer_retained *r = calloc(1, sizeof *r);
    if (r == NULL) {
        sf_summary_free(s);
        return -ENOMEM;
    }
    r->key = key;
    r->s = s;
    r->own = true;
    r->created_ms = sfd_peer_now(node);
    retained_add(node, r);
    route_retained(node, sfd_peer_now(node));
    return 0;
}

/* A child's summary on its way to the root: merged into the forward buffer
 * for its window while that still holds, else kept as its own entry. */
static void forward_child(sfd_peer_node *node, const sfd_window_key *key, sf_summary *s,
                          bool resent)
{
    for (sfd_peer_retained *r = node->retained; r; r = r->next) {
        if (r->own || !r->holding || !sfd_window_key_equal(&r->key, key))
            continue;
        int rc = sf_summary_merge(r->s, s);
        if (rc == 0) {
            r->children++;
            r->resent |= resent;
        } else if (rc == -EALREADY) {
            node->c.merge_duplicates++;
        } else {
            continue;
        }
        sf_summary_free(s);
        return;
    }
    sfd_peer_retained *r = calloc(1, sizeof *r);
    if (r == NULL) {
        sf_summary_free(s);
        return;
    }
    r->key = *key;
    r->s = s;
    r->holding = true;
    r->resent = resent;
    r->children = 1;
    r->created_ms = sfd_peer_now(node);
    retained_add(node, r);
}

/* ---- dispatch ----------------------------------------------------------- */

static bool stale(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now, const char *what)
{
    sfd_elect_out out = {0};
    int r = sfd_elect_on_term(&node->elect, now, msg->from, msg->term, &out);
    sfd_peer_apply(node, &out, now);
    if (r == 0)
        return false;
    node->c.rejected_stale_term++;
    sfd_peer_logf(node, SFD_PEER_LOG_WARNING,
                  "peer: rejected %s from node %u: stale term %llu < %llu", what, msg->from,
                  (unsigned long long)msg->term, (unsigned long long)node->elect.term);
    return true;
}

bool sfd_peer_msg_stale(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now,
                        const char *what)
{
    return stale(node, msg, now, what);
}

void sfd_peer_owner_rejected(sfd_peer_node *node, const sfd_peer_msg *msg, const char *what)
{
    uint64_t n = ++node->c.rejected_owner;
    if ((n & (n - 1)) == 0) /* 1, 2, 4, ...: a flood cannot fill the log */
        sfd_peer_logf(node, SFD_PEER_LOG_WARNING,
                      "peer: rejected %s from node %u: it names a job without a valid owner uid "
                      "and incarnation (a member of an older version?) (%llu so far)",
                      what, msg->from, (unsigned long long)n);
}

static void on_claim(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    Stagefrontier__RootClaim *m =
        stagefrontier__root_claim__unpack(NULL, msg->payload_len, msg->payload);
    if (m == NULL || m->candidate_id != msg->from || m->term != msg->term) {
        node->c.rejected_decode++;
    } else {
        sfd_elect_out eo = {0};
        sfd_elect_on_claim(&node->elect, now, msg->from, msg->term, &eo);
        sfd_peer_apply(node, &eo, now);
    }
    stagefrontier__root_claim__free_unpacked(m, NULL);
}

static void on_vote(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    Stagefrontier__RootVote *m =
        stagefrontier__root_vote__unpack(NULL, msg->payload_len, msg->payload);
    if (m == NULL || m->candidate_id != node->cfg.node_id || m->term != msg->term) {
        node->c.rejected_decode++;
    } else {
        sfd_elect_out eo = {0};
        sfd_elect_on_vote(&node->elect, now, msg->from, msg->term, m->granted, &eo);
        sfd_peer_apply(node, &eo, now);
    }
    stagefrontier__root_vote__free_unpacked(m, NULL);
}

void sfd_peer_send_ack(sfd_peer_node *node, uint32_t to, const sfd_window_key *key, int status,
                       bool report)
{
    Stagefrontier__SummaryAck a = STAGEFRONTIER__SUMMARY_ACK__INIT;
    a.job_id = (char *)key->job;
    a.has_owner_uid = a.has_incarnation = true;
    a.owner_uid = key->uid;
    a.incarnation = key->incarnation;
    a.window = key->window;
    a.segment = key->segment;
    a.status = status;
    a.has_report = report;
    a.report = report;
    sfd_peer_send(node, to, T(SUMMARY_ACK), &a.base);
}

static void on_summary(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    if (stale(node, msg, now, "a summary"))
        return;
    sf_summary *s = NULL;
    sfd_window_key key;
    bool resent = false;
    int r = sfd_peer_summary_unpack(msg->payload, msg->payload_len, &s, &key, &resent);
    if (r == -EPROTO) {
        sfd_peer_owner_rejected(node, msg, "a summary");
        return;
    }
    if (r < 0) {
        node->c.rejected_decode++;
        sfd_peer_logf(node, SFD_PEER_LOG_WARNING, "peer: rejected a malformed summary from node %u",
                      msg->from);
        return;
    }
    node->c.summaries_received++;
    const sfd_peer_report *done = sfd_peer_report_find(node, &key);
    if (done != NULL) {
        sfd_peer_report_send(node, msg->from, done);
        sf_summary_free(s);
        return;
    }
    if (node->elect.role == SFD_ELECT_ROOT) {
        sfd_peer_root_accept(node, &key, s, resent, msg->from);
        sf_summary_free(s);
    } else {
        forward_child(node, &key, s, resent);
        route_retained(node, now);
    }
    sfd_peer_send_ack(node, msg->from, &key, 0, false);
}

/* A proposal's prompt acknowledgers (proto/peer.proto): any bound is
 * safe, since it only times acknowledgements; unset or past the members,
 * every member. */
static uint32_t prompt_bound_of(const sfd_peer_node *node, const Stagefrontier__Report *m)
{
    uint32_t members = node->cfg.n_members;
    return m->has_prompt_acks_below && m->prompt_acks_below < members ? m->prompt_acks_below
                                                                      : members;
}

static void on_report(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    if (stale(node, msg, now, "a report"))
        return;
    Stagefrontier__Report *m = stagefrontier__report__unpack(NULL, msg->payload_len, msg->payload);
    sfd_window_key key;
    int r = m == NULL ? -EBADMSG
                      : sfd_peer_window_key_make(m->job_id, m->has_owner_uid, m->owner_uid,
                                                 m->has_incarnation, m->incarnation, m->window,
                                                 m->segment, &key);
    if (r == -EPROTO) {
        sfd_peer_owner_rejected(node, msg, "a report");
        goto out;
    }
    /* The root it names must be a member: the host logs and keeps it. */
    if (r < 0 || m->merged.len == 0 || sfd_elect_index(&node->elect, m->root_id) < 0) {
        node->c.rejected_decode++;
        goto out;
    }
    node->c.reports_received++;
    bool final = m->has_final && m->final;
    bool had = sfd_peer_report_find(node, &key) != NULL;
    r = sfd_peer_report_receive(node, &key, m->root_id, m->root_term, m->merged.data, m->merged.len,
                                final);
    if (r == -EPROTO) {
        sfd_peer_owner_rejected(node, msg, "a report's merged summary");
        goto out;
    }
    if (r < 0) {
        node->c.rejected_decode++;
        goto out;
    }
    sfd_peer_report *rep = (sfd_peer_report *)sfd_peer_report_find(node, &key);
    if (r > 0 && rep != NULL)
        rep->prompt_acks_below = prompt_bound_of(node, m);
    if (node->elect.role == SFD_ELECT_ROOT) {
        /* Handed back by a member that holds it: this root adopts it rather
         * than report the window a second time. */
        if (!had)
            node->c.reports_adopted++;
        if (rep != NULL && !rep->committed)
            sfd_peer_report_propose(node, rep);
        else if (r > 0 && rep != NULL)
            sfd_peer_report_relay(node, rep);
    } else {
        uint32_t root = sfd_elect_root(&node->elect, now);
        if (!final && root != 0 && root != node->cfg.node_id && rep != NULL)
            sfd_peer_report_held(node, rep, root, now); /* counts toward final */
        if (r > 0 && rep != NULL)
            sfd_peer_report_relay(node, rep);
    }
out:
    stagefrontier__report__free_unpacked(m, NULL);
}

static void on_ack(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now)
{
    if (stale(node, msg, now, "an acknowledgement"))
        return;
    Stagefrontier__SummaryAck *a =
        stagefrontier__summary_ack__unpack(NULL, msg->payload_len, msg->payload);
    sfd_window_key key;
    int r = a == NULL ? -EBADMSG
                      : sfd_peer_window_key_make(a->job_id, a->has_owner_uid, a->owner_uid,
                                                 a->has_incarnation, a->incarnation, a->window,
                                                 a->segment, &key);
    if (r == -EPROTO)
        sfd_peer_owner_rejected(node, msg, "an acknowledgement");
    else if (r < 0)
        node->c.rejected_decode++;
    else if (a->report)
        sfd_peer_report_acked(node, &key, msg->from);
    stagefrontier__summary_ack__free_unpacked(a, NULL);
}

void sfd_peer_dispatch(sfd_peer_node *node, const sfd_peer_msg *msg)
{
    uint64_t now = sfd_peer_now(node);
    sfd_elect_heard(&node->elect, now, msg->from);
    sfd_elect_out out = {0};
    bool ok = sfd_elect_term_ok(&node->elect, now, msg->from, msg->term, &out);
    sfd_peer_apply(node, &out, now);
    if (!ok) {
        uint64_t n = ++node->c.rejected_term_jump;
        if ((n & (n - 1)) == 0)
            sfd_peer_logf(node, SFD_PEER_LOG_WARNING,
                          "peer: rejected a message from node %u: "
                          "term %" PRIu64 " jumps past ours (%" PRIu64 ") by more than %u, and "
                          "no majority backs it (%" PRIu64 " so far)",
                          msg->from, msg->term, node->elect.term, SFD_PEER_TERM_STEP, n);
        return;
    }
    switch (msg->type) {
    case T(HEARTBEAT):
        sfd_peer_on_heartbeat(node, msg, now);
        break;
    case T(ROOT_CLAIM):
        on_claim(node, msg, now);
        break;
    case T(ROOT_VOTE):
        on_vote(node, msg, now);
        break;
    case T(SUMMARY):
        on_summary(node, msg, now);
        break;
    case T(REPORT):
        on_report(node, msg, now);
        break;
    case T(SUMMARY_ACK):
        on_ack(node, msg, now);
        break;
    case T(CAPTURE_REQUEST):
        sfd_peer_on_capture_request(node, msg, now);
        break;
    case T(CAPTURE_RESULT):
        sfd_peer_on_capture_result(node, msg, now);
        break;
    case T(CATCHUP_REQUEST):
        sfd_peer_on_catchup_request(node, msg, now);
        break;
    case T(CATCHUP_DONE):
        sfd_peer_on_catchup_done(node, msg, now);
        break;
    case T(LIVE_ROWS):
        sfd_peer_on_live_rows(node, msg, now);
        break;
    default:
        break; /* QUERY_FORWARD: answered from pushed reports instead */
    }
}

/* ---- lifecycle ---------------------------------------------------------- */

static void on_tick(uv_timer_t *t)
{
    sfd_peer_node *node = t->data;
    uint64_t now = sfd_peer_now(node);
    sfd_peer_links_tick(node, now);
    sfd_elect_out out = {0};
    sfd_elect_tick(&node->elect, now, &out);
    sfd_peer_apply(node, &out, now);
    sfd_peer_heartbeat_tick(node, now);
    route_retained(node, now);
    if (node->elect.role == SFD_ELECT_ROOT)
        sfd_peer_root_tick(node, now);
    else
        sfd_peer_reports_tick(node, now);
    sfd_peer_catchup_tick(node, now);
    if (node->state_dirty)
        sfd_peer_state_changed(node);
}

/* ---- replay state across restarts ------------------------------------------ */

/* Writes this node's epoch and every member's last accepted epoch. A failed
 * write is counted and logged, never fatal: members tell a node whose state
 * is lost which epoch to start (follow_epoch), so it only costs a round. */
static void state_save(sfd_peer_node *node)
{
    if (node->state_path[0] == '\0')
        return;
    sfd_peer_state_entry *e = calloc(node->n_links ? node->n_links : 1, sizeof *e);
    sfd_peer_state st = {.boot_epoch = node->epoch, .peers = e};
    int r = e == NULL ? -ENOMEM : 0;
    for (uint32_t i = 0; e != NULL && i < node->n_links; i++)
        if (node->links[i].replay.epoch != 0)
            e[st.n++] = (sfd_peer_state_entry){node->links[i].id, node->links[i].replay.epoch};
    if (r == 0)
        r = sfd_peer_state_save(node->state_path, &st);
    free(e);
    node->state_dirty = r < 0;
    if (r < 0) {
        uint64_t n = ++node->c.state_errors;
        if ((n & (n - 1)) == 0)
            sfd_peer_logf(node, SFD_PEER_LOG_ERR,
                          "peer: cannot save replay state %s: %s "
                          "(%" PRIu64 " failures)",
                          node->state_path, strerror(-r), n);
        return;
    }
    node->c.state_writes++;
}

/* Epochs change on restarts, not per frame, so each change is saved at
 * once (a few ms of fsync). Only a flood of forged epoch changes, which
 * takes the key, could make that frequent: past 10 saves in a second the
 * rest wait for the tick. */
#define STATE_SAVES_PER_SECOND 10

void sfd_peer_state_changed(sfd_peer_node *node)
{
    uint64_t now = sfd_peer_now(node);
    if (now - node->state_saved_ms >= 1000) {
        node->state_saved_ms = now;
        node->state_saves_in_second = 0;
    }
    if (node->state_saves_in_second >= STATE_SAVES_PER_SECOND) {
        node->state_dirty = true;
        return;
    }
    node->state_saves_in_second++;
    state_save(node);
}

/* Reads the state: the next boot epoch, and every member's last accepted
 * epoch, closed (the sequence numbers within it were not kept, so the rest
 * of it is refused: a replay of recorded frames gets nothing). */
static void state_restore(sfd_peer_node *node)
{
    sfd_peer_state st = {0};
    node->epoch = 1;
    if (node->cfg.state_dir[0] == '\0')
        return;
    if (snprintf(node->state_path, sizeof node->state_path, "%s/peer-%" PRIu32 ".state",
                 node->cfg.state_dir, node->cfg.node_id) >= (int)sizeof node->state_path) {
        node->state_path[0] = '\0';
        node->c.state_errors++;
        return;
    }
    int r = sfd_peer_state_load(node->state_path, &st);
    if (r < 0) {
        node->c.state_errors++;
        sfd_peer_logf(node, SFD_PEER_LOG_ERR,
                      "peer: replay state %s unreadable (%s): starting "
                      "afresh; members will name the epoch to use",
                      node->state_path, strerror(-r));
    }
    if (st.boot_epoch > 0 && st.boot_epoch < SFD_PEER_EPOCH_MAX - 1)
        node->epoch = st.boot_epoch + 1;
    for (uint32_t i = 0; i < st.n; i++) {
        sfd_peer_link *l = sfd_peer_link_find(node, st.peers[i].id);
        if (l != NULL && st.peers[i].epoch < SFD_PEER_EPOCH_MAX)
            l->replay = (sfd_peer_replay){.epoch = st.peers[i].epoch, .closed = true};
    }
    sfd_peer_state_clear(&st);
    state_save(node);
}

static int config_copy(sfd_peer_config *dst, const sfd_peer_config *src)
{
    *dst = *src;
    dst->members = malloc(src->n_members * sizeof *src->members);
    if (dst->members == NULL)
        return -ENOMEM;
    memcpy(dst->members, src->members, src->n_members * sizeof *src->members);
    return 0;
}

int sfd_peer_node_new(uv_loop_t *loop, const sfd_peer_config *cfg, const sfd_peer_key *key,
                      const sfd_peer_hooks *hooks, sfd_peer_node **ret)
{
    if (loop == NULL || cfg == NULL || key == NULL || ret == NULL ||
        sfd_peer_config_validate(cfg) < 0)
        return -EINVAL;
    sfd_peer_node *node = calloc(1, sizeof *node);
    uint32_t *ids = calloc(cfg->n_members, sizeof *ids);
    int r = -ENOMEM;
    if (node == NULL || ids == NULL || config_copy(&node->cfg, cfg) < 0)
        goto fail;
    for (uint32_t i = 0; i < cfg->n_members; i++)
        ids[i] = cfg->members[i].id;
    node->loop = loop;
    node->key = *key;
    if (hooks != NULL)
        node->hooks = *hooks;
    if ((r = sfd_elect_init(&node->elect, cfg->node_id, ids, cfg->n_members, cfg->heartbeat_ms,
                            cfg->failure_timeout_ms)) < 0 ||
        (r = sfd_peer_links_init(node)) < 0 || (r = sfd_peer_liveness_init(node)) < 0)
        goto fail;
    state_restore(node);
    free(ids);
    *ret = node;
    return 0;
fail:
    free(ids);
    if (node != NULL) {
        sfd_peer_liveness_free(node);
        sfd_elect_clear(&node->elect);
        free(node->links);
        free(node->cfg.members);
        free(node);
    }
    return r;
}

int sfd_peer_node_start(sfd_peer_node *node, int listen_fd)
{
    int r = sfd_peer_listen(node, listen_fd);
    if (r < 0)
        return r;
    if ((r = uv_timer_init(node->loop, &node->tick)) < 0)
        return r;
    node->open_handles++;
    node->tick.data = node;
    return uv_timer_start(&node->tick, on_tick, 0, node->cfg.heartbeat_ms);
}

static void node_free(sfd_peer_node *node)
{
    while (node->retained != NULL) {
        sfd_peer_retained *r = node->retained;
        node->retained = r->next;
        sf_summary_free(r->s);
        free(r);
    }
    sfd_peer_root_drop_all(node);
    sfd_peer_reports_free(node);
    sfd_peer_liveness_free(node);
    sfd_elect_clear(&node->elect);
    free(node->links);
    free(node->cfg.members);
    void (*done)(void *) = node->close_done;
    void *ctx = node->close_ctx;
    free(node);
    if (done != NULL)
        done(ctx);
}

void sfd_peer_handle_closed(sfd_peer_node *node)
{
    if (--node->open_handles == 0 && node->closing)
        node_free(node);
}

static void on_tick_closed(uv_handle_t *h)
{
    sfd_peer_handle_closed(h->data);
}

void sfd_peer_node_close(sfd_peer_node *node, void (*done)(void *ctx), void *ctx)
{
    if (node == NULL) {
        if (done != NULL)
            done(ctx);
        return;
    }
    node->closing = true;
    node->close_done = done;
    node->close_ctx = ctx;
    if (node->open_handles == 0) {
        node_free(node);
        return;
    }
    if (uv_is_active((uv_handle_t *)&node->tick) || node->tick.data == node)
        uv_close((uv_handle_t *)&node->tick, on_tick_closed);
    sfd_peer_links_close(node);
}

const sfd_peer_counters *sfd_peer_node_counters(const sfd_peer_node *node)
{
    return &node->c;
}

uint32_t sfd_peer_node_id(const sfd_peer_node *node)
{
    return node->cfg.node_id;
}

uint32_t sfd_peer_node_root(sfd_peer_node *node)
{
    return sfd_elect_root(&node->elect, sfd_peer_now(node));
}

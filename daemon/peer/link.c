/*
 * Peer links over libuv TCP. Each node dials every other member and sends
 * only on its own outbound connection (so one sender's sequence numbers
 * arrive in order), and reads only from inbound ones. Owns connect, backoff,
 * framing of reads, authentication and replay checks of each frame, the
 * limits on connections that have not proved themselves yet, and bounded
 * write queues. It must not interpret payloads: node.c does.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "node_internal.h"

#define BACKOFF_MIN_MS 50

typedef struct write_req {
    uv_write_t req;
    uint8_t *buf;
} write_req;

static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ret)
{
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    memset(ret, 0, sizeof *ret);
    if (uv_ip4_addr(host, port, &v4) == 0) {
        memcpy(ret, &v4, sizeof v4);
        return 0;
    }
    if (uv_ip6_addr(host, port, &v6) == 0) {
        memcpy(ret, &v6, sizeof v6);
        return 0;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
        return -EHOSTUNREACH;
    memcpy(ret, res->ai_addr, res->ai_addrlen);
    if (ret->ss_family == AF_INET)
        ((struct sockaddr_in *)ret)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ret)->sin6_port = htons(port);
    freeaddrinfo(res);
    return 0;
}

int sfd_peer_links_init(sfd_peer_node *node)
{
    const sfd_peer_config *cfg = &node->cfg;
    node->links = calloc(cfg->n_members, sizeof *node->links);
    if (node->links == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < cfg->n_members; i++) {
        const sfd_peer_member *m = &cfg->members[i];
        if (m->id == cfg->node_id)
            continue;
        int member = sfd_elect_index(&node->elect, m->id);
        if (member < 0) /* the election holds the same members: never */
            return -EINVAL;
        sfd_peer_link *l = &node->links[node->n_links++];
        l->id = m->id;
        l->member = (uint32_t)member;
        l->addr_ok = resolve(m->host, m->port, &l->addr) == 0;
        l->backoff_ms = BACKOFF_MIN_MS;
        l->tx_key = l->rx_key = node->key;
        if (cfg->member_key_file[0] != '\0') {
            int r = sfd_peer_pair_keys(cfg->member_key_file, cfg->member_pub_dir, cfg->node_id,
                                       m->id, &l->tx_key, &l->rx_key);
            if (r < 0) {
                sfd_peer_logf(node, SFD_PEER_LOG_ERR,
                              "peer: keys of the link with member "
                              "%u (%s/%u.pub): %s",
                              m->id, cfg->member_pub_dir, m->id, strerror(-r));
                return r;
            }
        }
    }
    return 0;
}

sfd_peer_link *sfd_peer_link_find(sfd_peer_node *node, uint32_t id)
{
    uint32_t lo = 0, hi = node->n_links;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (node->links[mid].id == id)
            return &node->links[mid];
        if (node->links[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- closing ------------------------------------------------------------ */

static void on_conn_closed(uv_handle_t *h)
{
    sfd_peer_conn *conn = h->data;
    sfd_peer_node *node = conn->node;
    sfd_peer_framer_clear(&conn->framer);
    free(conn);
    sfd_peer_handle_closed(node);
}

/* Takes an unauthenticated connection out of the pool's list. */
static void preauth_unlink(sfd_peer_node *node, sfd_peer_conn *conn)
{
    for (sfd_peer_conn **p = &node->preauth; *p; p = &(*p)->next)
        if (*p == conn) {
            *p = conn->next;
            node->n_preauth--;
            return;
        }
}

/* A closing outbound connection leaves its link, which dials again after
 * a backoff that doubles up to the failure timeout. */
static void out_closed(sfd_peer_node *node, sfd_peer_conn *conn)
{
    sfd_peer_link *l = sfd_peer_link_find(node, conn->peer_id);
    if (l == NULL || l->out != conn)
        return;
    l->out = NULL;
    l->out_connected = false;
    l->next_attempt_ms = sfd_peer_now(node) + l->backoff_ms;
    l->backoff_ms *= 2;
    if (l->backoff_ms > node->cfg.failure_timeout_ms)
        l->backoff_ms = node->cfg.failure_timeout_ms;
}

/* A closing inbound connection leaves the unauthenticated pool (peer 0) or
 * its member's link, and the inbound count. */
static void in_closed(sfd_peer_node *node, sfd_peer_conn *conn)
{
    if (conn->peer_id == 0) {
        preauth_unlink(node, conn);
    } else {
        sfd_peer_link *l = sfd_peer_link_find(node, conn->peer_id);
        if (l != NULL && l->in == conn)
            l->in = NULL;
    }
    node->n_inbound--;
}

void sfd_peer_conn_close(sfd_peer_conn *conn)
{
    if (conn == NULL || conn->closing)
        return;
    conn->closing = true;
    if (conn->outbound)
        out_closed(conn->node, conn);
    else
        in_closed(conn->node, conn);
    uv_close((uv_handle_t *)&conn->tcp, on_conn_closed);
}

static sfd_peer_conn *conn_new(sfd_peer_node *node, bool outbound)
{
    sfd_peer_conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL)
        return NULL;
    if (uv_tcp_init(node->loop, &conn->tcp) < 0) {
        free(conn);
        return NULL;
    }
    node->open_handles++;
    conn->tcp.data = conn;
    conn->node = node;
    conn->outbound = outbound;
    conn->opened_ms = sfd_peer_now(node);
    sfd_peer_framer_init(&conn->framer, SFD_PEER_PREAUTH_FRAME_MAX);
    uv_tcp_nodelay(&conn->tcp, 1);
    return conn;
}

/* ---- reading ------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

static const char *addr_text(const struct sockaddr_storage *a, char *buf, size_t size)
{
    buf[0] = '\0';
    if (a->ss_family == AF_INET)
        uv_ip4_name((const struct sockaddr_in *)a, buf, size);
    else if (a->ss_family == AF_INET6)
        uv_ip6_name((const struct sockaddr_in6 *)a, buf, size);
    return buf[0] ? buf : "?";
}

static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
    return false;
}

/* A connection carries one sender; a newer connection from the same sender
 * replaces the older one, which a cut link may have left half open. Once
 * authenticated it leaves the pre-authentication pool and may carry frames
 * up to the full cap. The link holds it, so this costs the same at any
 * member count (a walk of every inbound connection here made a root's
 * start or failover quadratic in the members). */
static void adopt_sender(sfd_peer_conn *conn, sfd_peer_link *l)
{
    preauth_unlink(conn->node, conn);
    conn->peer_id = l->id;
    conn->framer.max = SFD_PEER_FRAME_MAX;
    sfd_peer_conn_close(l->in);
    l->in = conn;
}

static int reject(sfd_peer_conn *conn, uint64_t *counter, const char *what, int r)
{
    (*counter)++;
    char host[64];
    if ((*counter & (*counter - 1)) == 0) {
        if (conn->peer_id != 0)
            sfd_peer_logf(conn->node, SFD_PEER_LOG_WARNING,
                          "peer: rejected %s from node %u (%llu so far)", what, conn->peer_id,
                          (unsigned long long)*counter);
        else
            sfd_peer_logf(conn->node, SFD_PEER_LOG_WARNING,
                          "peer: rejected %s from unauthenticated %s (%llu so far)", what,
                          addr_text(&conn->src, host, sizeof host), (unsigned long long)*counter);
    }
    return r;
}

/* Replay check of an authenticated frame. 0 accept, 1 drop (counted), <0
 * drop and close: a connection that has not proved itself must do so with
 * a fresh frame. */
static int check_fresh(sfd_peer_conn *conn, sfd_peer_link *l, const sfd_peer_msg *msg)
{
    sfd_peer_node *node = conn->node;
    enum sfd_replay_verdict v = sfd_peer_replay_check(&l->replay, msg->epoch, msg->seq);
    int drop = conn->peer_id == 0 ? -EPERM : 1;
    if (v == SFD_REPLAY_OLD)
        return reject(conn, &node->c.rejected_replay, "a replayed message", drop);
    if (v == SFD_REPLAY_FAR)
        return reject(conn, &node->c.rejected_epoch, "a boot epoch beyond the allowed step", drop);
    bool new_epoch = msg->epoch != l->replay.epoch;
    sfd_peer_replay_commit(&l->replay, msg->epoch, msg->seq);
    if (new_epoch) {
        /* A member that restarted is a new asker: its catch-up must not wait
         * out the gap left by the one its earlier run made. */
        l->catchup_served_ms = 0;
        sfd_peer_state_changed(node);
    }
    return 0;
}

/* One frame: the claimed sender picks the key, the MAC is checked, and only
 * then is the envelope decoded. Any failure before the replay check closes
 * the connection, so a flood costs one MAC per connection at most. */
static int on_frame(void *ctx, uint8_t *body, uint32_t len)
{
    sfd_peer_conn *conn = ctx;
    sfd_peer_node *node = conn->node;
    Stagefrontier__PeerEnvelope *env = NULL;
    sfd_peer_msg msg;
    uint32_t from = 0;
    node->c.frames_in++;
    if (sfd_peer_frame_sender(body, len, &from) < 0)
        return reject(conn, &node->c.rejected_decode, "an undecodable frame", -EBADMSG);
    sfd_peer_link *l = sfd_peer_link_find(node, from);
    if (l == NULL || (conn->peer_id != 0 && conn->peer_id != from))
        return reject(conn, &node->c.rejected_member, "a message from a non-member", -EPERM);
    int r = sfd_peer_open(&l->rx_key, body, len, &env, &msg);
    if (r == -EPERM)
        return reject(conn, &node->c.rejected_mac, "a message with a wrong MAC", -EPERM);
    if (r < 0)
        return reject(conn, &node->c.rejected_decode, "an undecodable envelope", r);
    if (msg.dest != node->cfg.node_id) {
        stagefrontier__peer_envelope__free_unpacked(env, NULL);
        return reject(conn, &node->c.rejected_member, "a message for another node", -EPERM);
    }
    r = check_fresh(conn, l, &msg);
    if (r == 0) {
        if (conn->peer_id == 0)
            adopt_sender(conn, l);
        sfd_peer_dispatch(node, &msg);
    }
    stagefrontier__peer_envelope__free_unpacked(env, NULL);
    return r < 0 ? r : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    sfd_peer_conn *conn = s->data;
    sfd_peer_node *node = conn->node;
    if (n > 0 && conn->outbound) {
        /* Outbound links carry no replies: whatever arrives is ignored. */
    } else if (n > 0 && !conn->closing) {
        node->c.bytes_in += (uint64_t)n;
        int r = sfd_peer_framer_feed(&conn->framer, (const uint8_t *)buf->base, (size_t)n, on_frame,
                                     conn);
        if (r == -EMSGSIZE)
            reject(conn, &node->c.rejected_frame, "an oversized or empty frame", r);
        if (r < 0)
            sfd_peer_conn_close(conn);
    } else if (n < 0) {
        sfd_peer_conn_close(conn);
    }
    free(buf->base);
}

/* The oldest unauthenticated connection, from `src`'s host or any. */
static sfd_peer_conn *oldest_preauth(sfd_peer_node *node, const struct sockaddr_storage *src,
                                     uint32_t *ret_count)
{
    sfd_peer_conn *oldest = NULL;
    uint32_t n = 0;
    for (sfd_peer_conn *c = node->preauth; c; c = c->next) {
        if (c->closing || (src != NULL && !same_host(&c->src, src)))
            continue;
        n++;
        oldest = c; /* the list is newest first */
    }
    *ret_count = n;
    return oldest;
}

/* Makes room for one more unauthenticated connection from `src`. The pool
 * is apart from members' authenticated links, so it never locks a member
 * out. Its own limits evict the oldest first: one source address can only
 * ever push out its own connections, and a stalled or silent connection
 * gives way to a newer one, whose first frame arrives within a round trip
 * if it comes from a member. */
static void make_preauth_room(sfd_peer_node *node, const struct sockaddr_storage *src)
{
    uint32_t n;
    sfd_peer_conn *c = oldest_preauth(node, src, &n);
    if (n >= node->cfg.preauth_per_addr && c != NULL) {
        reject(c, &node->c.rejected_preauth, "a connection over the per-address limit", 0);
        sfd_peer_conn_close(c);
    }
    c = oldest_preauth(node, NULL, &n);
    if (n >= node->cfg.preauth_max && c != NULL) {
        reject(c, &node->c.rejected_preauth, "a connection over the unauthenticated limit", 0);
        sfd_peer_conn_close(c);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    sfd_peer_node *node = server->data;
    if (status < 0 || node->closing)
        return;
    sfd_peer_conn *conn = conn_new(node, false);
    if (conn == NULL)
        return;
    int len = sizeof conn->src;
    if (uv_accept(server, (uv_stream_t *)&conn->tcp) < 0 ||
        uv_tcp_getpeername(&conn->tcp, (struct sockaddr *)&conn->src, &len) < 0) {
        node->c.rejected_conns++;
        conn->closing = true;
        uv_close((uv_handle_t *)&conn->tcp, on_conn_closed);
        return;
    }
    make_preauth_room(node, &conn->src);
    conn->next = node->preauth;
    node->preauth = conn;
    node->n_inbound++;
    node->n_preauth++;
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
}

/* Closes unauthenticated connections past peer_auth_timeout_ms. */
static void on_auth_timer(uv_timer_t *t)
{
    sfd_peer_node *node = t->data;
    uint64_t now = sfd_peer_now(node);
    sfd_peer_conn *c = node->preauth;
    while (c != NULL) {
        sfd_peer_conn *next = c->next;
        if (!c->closing && now - c->opened_ms >= node->cfg.auth_timeout_ms) {
            reject(c, &node->c.rejected_auth_timeout,
                   "a connection silent past the "
                   "authentication timeout",
                   0);
            sfd_peer_conn_close(c);
        }
        c = next;
    }
}

static void on_listener_closed(uv_handle_t *h)
{
    sfd_peer_handle_closed(h->data);
}

static int start_auth_timer(sfd_peer_node *node)
{
    int r = uv_timer_init(node->loop, &node->auth_timer);
    if (r < 0)
        return r;
    node->open_handles++;
    node->auth_timer.data = node;
    uint64_t every = node->cfg.auth_timeout_ms / 4;
    return uv_timer_start(&node->auth_timer, on_auth_timer, every, every < 10 ? 10 : every);
}

int sfd_peer_listen(sfd_peer_node *node, int listen_fd)
{
    int r = uv_tcp_init(node->loop, &node->listener);
    if (r < 0)
        return r;
    node->open_handles++;
    node->listening = true;
    node->listener.data = node;
    if (listen_fd >= 0) {
        r = uv_tcp_open(&node->listener, listen_fd);
    } else {
        const sfd_peer_config *cfg = &node->cfg;
        const sfd_peer_member *self = &cfg->members[sfd_peer_config_index(cfg, cfg->node_id)];
        struct sockaddr_storage addr;
        r = resolve(cfg->listen_host[0] ? cfg->listen_host : self->host,
                    cfg->listen_port ? cfg->listen_port : self->port, &addr);
        if (r == 0)
            r = uv_tcp_bind(&node->listener, (struct sockaddr *)&addr, 0);
    }
    if (r == 0)
        r = uv_listen((uv_stream_t *)&node->listener, SOMAXCONN, on_connection);
    if (r == 0)
        r = start_auth_timer(node);
    return r;
}

/* ---- dialling ------------------------------------------------------------ */

static void on_connect(uv_connect_t *req, int status)
{
    sfd_peer_conn *conn = req->data;
    if (conn->closing)
        return;
    if (status < 0) {
        sfd_peer_conn_close(conn);
        return;
    }
    sfd_peer_link *l = sfd_peer_link_find(conn->node, conn->peer_id);
    if (l != NULL) {
        l->backoff_ms = BACKOFF_MIN_MS;
        if (l->out == conn)
            l->out_connected = true;
    }
    /* Outbound links carry no replies; reading only notices the close. */
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
    sfd_peer_send_hello(conn->node, conn->peer_id);
}

static void dial(sfd_peer_node *node, sfd_peer_link *l)
{
    sfd_peer_conn *conn = conn_new(node, true);
    if (conn == NULL)
        return;
    conn->peer_id = l->id;
    conn->connect_req.data = conn;
    l->out = conn;
    l->out_opened_ms = conn->opened_ms;
    node->c.links_dialled++;
    if (uv_tcp_connect(&conn->connect_req, &conn->tcp, (struct sockaddr *)&l->addr, on_connect) < 0)
        sfd_peer_conn_close(conn);
}

void sfd_peer_links_tick(sfd_peer_node *node, uint64_t now)
{
    for (uint32_t i = 0; i < node->n_links; i++) {
        sfd_peer_link *l = &node->links[i];
        if (!l->addr_ok)
            continue;
        if (l->out == NULL && now >= l->next_attempt_ms) {
            dial(node, l);
            continue;
        }
        /* A link to a member we have not heard from may be a dead TCP
         * connection across a cut; dial afresh so a heal is noticed. */
        if (l->out != NULL && now - l->out_opened_ms > node->cfg.failure_timeout_ms &&
            (!l->out_connected || !sfd_elect_member_live(&node->elect, now, l->member)))
            sfd_peer_conn_close(l->out);
    }
}

/* ---- writing ------------------------------------------------------------ */

static void on_write(uv_write_t *req, int status)
{
    write_req *w = (write_req *)req;
    (void)status;
    free(w->buf);
    free(w);
}

int sfd_peer_send_raw(sfd_peer_node *node, uint32_t dest, uint32_t type, const uint8_t *payload,
                      size_t len)
{
    sfd_peer_link *l = sfd_peer_link_find(node, dest);
    if (l == NULL)
        return -EINVAL;
    sfd_peer_conn *c = l->out;
    if (!l->out_connected || c->closing ||
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > SFD_PEER_WRITE_QUEUE_MAX) {
        node->c.send_dropped++;
        return -ENOTCONN;
    }
    sfd_peer_msg msg = {.from = node->cfg.node_id,
                        .dest = dest,
                        .epoch = node->epoch,
                        .seq = ++node->seq,
                        .term = node->elect.term,
                        .type = type,
                        .payload = payload,
                        .payload_len = len};
    write_req *w = calloc(1, sizeof *w);
    size_t n = 0;
    int r = w ? sfd_peer_seal(&l->tx_key, &msg, &w->buf, &n) : -ENOMEM;
    if (r < 0) {
        free(w);
        return r;
    }
    uv_buf_t buf = uv_buf_init((char *)w->buf, (unsigned)n);
    r = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_write);
    if (r < 0) {
        free(w->buf);
        free(w);
        sfd_peer_conn_close(c);
        return r;
    }
    node->c.frames_out++;
    node->c.bytes_out += n;
    return 0;
}

int sfd_peer_send(sfd_peer_node *node, uint32_t dest, uint32_t type,
                  const ProtobufCMessage *payload)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int r = sfd_peer_pack(payload, &buf, &len);
    if (r < 0)
        return r;
    r = sfd_peer_send_raw(node, dest, type, buf, len);
    free(buf);
    return r;
}

void sfd_peer_links_close(sfd_peer_node *node)
{
    for (uint32_t i = 0; i < node->n_links; i++) {
        sfd_peer_conn_close(node->links[i].out);
        sfd_peer_conn_close(node->links[i].in);
    }
    while (node->preauth != NULL)
        sfd_peer_conn_close(node->preauth);
    if (node->listening) {
        node->listening = false;
        uv_close((uv_handle_t *)&node->listener, on_listener_closed);
    }
    if (node->auth_timer.data == node && !uv_is_closing((uv_handle_t *)&node->auth_timer))
        uv_close((uv_handle_t *)&node->auth_timer, on_listener_closed);
}

/*
 * The running peer layer's shared state: links (link.c), the node's routing
 * of summaries and reports (node.c) and the root's window merge (root.c).
 * Private to daemon/peer.
 */
#ifndef SFD_PEER_NODE_INTERNAL_H
#define SFD_PEER_NODE_INTERNAL_H

#include <sys/socket.h>
#include <uv.h>

#include "peer.h"

#define SFD_PEER_WRITE_QUEUE_MAX (64u << 20)
#define SFD_PEER_REPORTS_KEPT 1024
_Static_assert(SFD_PEER_REPORTS_KEPT == SFD_PEER_CATCHUP_REPORTS_MAX,
               "a catch-up answer carries at most the reports a node keeps");
#define SFD_PEER_PENDING_KEPT 256 /* windows a root collects at once */

typedef struct sfd_peer_conn {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    struct sfd_peer_node *node;
    sfd_peer_framer framer;
    uint32_t peer_id;       /* outbound: target; inbound: sender once authenticated */
    bool outbound, closing; /* an outbound one's connect state is its link's */
    uint64_t opened_ms;
    struct sockaddr_storage src; /* inbound: the source address */
    struct sfd_peer_conn *next;  /* inbound, not yet authenticated: the pool's list */
} sfd_peer_conn;

/* What every tick reads of every link comes first, within one cache line:
 * sfd_peer_links_tick passes over all of them, and at 8 192 members a cache
 * miss on each outbound connection, every tick, was a tenth of an idle
 * root's CPU, so the link keeps what the tick needs of the connection. */
typedef struct sfd_peer_link {
    uint32_t id;
    uint32_t member; /* its index in the election's ids */
    bool addr_ok;
    bool out_connected; /* out is set and its connect completed */
    sfd_peer_conn *out;
    sfd_peer_conn *in;      /* the member's authenticated inbound connection: one at most */
    uint64_t out_opened_ms; /* when out was dialled */
    uint64_t backoff_ms, next_attempt_ms;
    struct sockaddr_storage addr;
    sfd_peer_replay replay;
    sfd_peer_key tx_key, rx_key; /* the cluster key, or this link's pair keys */
    uint64_t last_heartbeat_ms;
    uint32_t in_flight; /* as its last heartbeat said */
    uint64_t term_seen;
    uint32_t root_seen;
    uint8_t *subtree;           /* its last up heartbeat's subtree set (heartbeat.c) */
    uint64_t subtree_ms;        /* when it came; 0 none */
    uint64_t catchup_served_ms; /* its last catch-up request answered; 0 none */
} sfd_peer_link;

/* A summary this node holds until its window's report arrives: its own, or
 * a merge of its children's that it forwards toward the root. */
typedef struct sfd_peer_retained {
    sfd_window_key key;
    sf_summary *s;
    bool own;
    bool holding;      /* forward buffer still taking children */
    bool resent;       /* carries a late/resent contribution */
    uint32_t children; /* contributions merged while holding */
    uint64_t created_ms;
    uint32_t sent_to; /* 0 not yet sent */
    uint64_t sent_term;
    uint64_t sent_ms;
    struct sfd_peer_retained *next;
} sfd_peer_retained;

/* A window the root is collecting. */
typedef struct sfd_peer_pending {
    sfd_window_key key;
    sf_summary *s;
    bool late;
    uint64_t deadline_ms;
    struct sfd_peer_pending *next;
} sfd_peer_pending;

typedef struct sfd_peer_report {
    sfd_window_key key;
    uint32_t root_id;
    uint64_t root_term;
    uint8_t *packed; /* the merged summary, packed Summary */
    size_t len;
    /* A root's own report is final (delivered, summaries dropped) once a
     * majority holds it; until then it is tentative and dies with the
     * root's term. Reports received from a root are final on arrival. */
    bool committed;
    uint32_t n_acks;
    uint8_t *acked; /* the members that acknowledged it: a bit each, by index in id order */
    /* Members below this index acknowledge a proposal at once, the others
     * only if it is still not final at ack_due_ms (0: no acknowledgement
     * due). See prompt_bound in report_store.c. */
    uint32_t prompt_acks_below;
    uint64_t ack_due_ms;
    struct sfd_peer_report *next;
} sfd_peer_report;

struct sfd_peer_node {
    uv_loop_t *loop;
    sfd_peer_config cfg;
    sfd_peer_key key;
    sfd_peer_hooks hooks;
    sfd_elect elect;
    uint64_t epoch, seq;
    char state_path[4200]; /* "" keeps no state */
    uint64_t state_saved_ms;
    uint32_t state_saves_in_second;
    bool state_dirty;
    uv_tcp_t listener;
    bool listening;
    uv_timer_t tick;
    uint32_t n_links; /* other members, id order */
    sfd_peer_link *links;
    /* Inbound connections not yet authenticated, newest first: at most
     * peer_preauth_max, so a walk of them stays short whatever the member
     * count. An authenticated one is its member's link's `in`. */
    sfd_peer_conn *preauth;
    uint32_t n_inbound;
    uint32_t n_preauth;
    uv_timer_t auth_timer; /* closes those past auth_timeout_ms */
    sfd_peer_retained *retained;
    uint32_t n_retained;
    sfd_peer_pending *pending;
    uint32_t n_pending;
    sfd_peer_report *reports; /* newest first */
    uint32_t n_reports;
    uint32_t last_root;
    /* heartbeat.c: bitmaps over the members in id order, live_bytes each */
    uint32_t live_bytes;
    uint8_t *view;           /* the root's view, as last pushed down (or built, at the root) */
    uint32_t view_root;      /* the root it came from; 0 none */
    uint8_t *up;             /* scratch: this node's subtree set */
    uint32_t *kids;          /* scratch: tree children */
    uint32_t n_subtrees;     /* links holding a subtree set */
    uint32_t n_view_pending; /* the root's window list, relayed down */
    sfd_window_key view_pending[SFD_PEER_PENDING_MAX];
    sfd_peer_counters c;
    /* catchup.c: whether this boot's catch-up is done, whom it was asked of
     * and when (asked again every second until answered) */
    bool caught_up;
    uint32_t catchup_from;
    uint64_t catchup_asked_ms;
    uint32_t open_handles;
    bool closing;
    void (*close_done)(void *ctx);
    void *close_ctx;
};

/* link.c */
int sfd_peer_links_init(sfd_peer_node *node);
int sfd_peer_listen(sfd_peer_node *node, int listen_fd);
void sfd_peer_links_tick(sfd_peer_node *node, uint64_t now);
sfd_peer_link *sfd_peer_link_find(sfd_peer_node *node, uint32_t id);
/* Seals and queues one message to a member; counted, never blocks. */
int sfd_peer_send(sfd_peer_node *node, uint32_t dest, uint32_t type,
                  const ProtobufCMessage *payload);
int sfd_peer_send_raw(sfd_peer_node *node, uint32_t dest, uint32_t type, const uint8_t *payload,
                      size_t len);
void sfd_peer_conn_close(sfd_peer_conn *conn);
void sfd_peer_links_close(sfd_peer_node *node);
void sfd_peer_handle_closed(sfd_peer_node *node);

/* heartbeat.c */
int sfd_peer_liveness_init(sfd_peer_node *node);
void sfd_peer_liveness_free(sfd_peer_node *node);
/* The first message of a new outbound link: a heartbeat small enough for
 * the receiver's pre-authentication frame cap. */
void sfd_peer_send_hello(sfd_peer_node *node, uint32_t dest);
/* Every tick: up to the tree parent, down to the children; to every member
 * while no root is in force. */
void sfd_peer_heartbeat_tick(sfd_peer_node *node, uint64_t now);
/* Once, to every member: a new root announces itself. */
void sfd_peer_heartbeat_all(sfd_peer_node *node, uint64_t now);
void sfd_peer_on_heartbeat(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now);

/* node.c */
void sfd_peer_apply(sfd_peer_node *node, const sfd_elect_out *out, uint64_t now);
/* A new epoch of `l` was accepted or this node's own epoch changed: save the
 * replay state (rate limited; the rest is saved from the tick). */
void sfd_peer_state_changed(sfd_peer_node *node);
void sfd_peer_dispatch(sfd_peer_node *node, const sfd_peer_msg *msg);
/* A termed message below this node's term: counted, logged, true (drop it). */
bool sfd_peer_msg_stale(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now,
                        const char *what);
/* A message naming a job without a valid owner uid and incarnation (the
 * codecs' -EPROTO): counted as rejected_owner and logged (1, 2, 4, ...). */
void sfd_peer_owner_rejected(sfd_peer_node *node, const sfd_peer_msg *msg, const char *what);
void sfd_peer_logf(sfd_peer_node *node, int prio, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t sfd_peer_now(sfd_peer_node *node);

/* capture_route.c: CAPTURE_REQUEST and CAPTURE_RESULT envelopes */
void sfd_peer_on_capture_request(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now);
void sfd_peer_on_capture_result(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now);

/* live_route.c: LIVE_ROWS envelopes, to the root */
void sfd_peer_on_live_rows(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now);

/* catchup.c: CATCHUP_REQUEST and CATCHUP_DONE envelopes */
void sfd_peer_catchup_tick(sfd_peer_node *node, uint64_t now);
void sfd_peer_on_catchup_request(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now);
void sfd_peer_on_catchup_done(sfd_peer_node *node, const sfd_peer_msg *msg, uint64_t now);

/* root.c */
void sfd_peer_root_accept(sfd_peer_node *node, const sfd_window_key *key, const sf_summary *s,
                          bool resent, uint32_t from);
void sfd_peer_root_tick(sfd_peer_node *node, uint64_t now);
void sfd_peer_root_drop_all(sfd_peer_node *node);
/* Forgets the root's pending merge of a window (decided, or given up). */
void sfd_peer_root_pending_remove(sfd_peer_node *node, const sfd_window_key *key);
/* report_store.c: */
/* Files a report (a proposal until committed); NULL when out of memory. */
sfd_peer_report *sfd_peer_report_insert(sfd_peer_node *node, const sfd_window_key *key,
                                        uint32_t root_id, uint64_t term, const uint8_t *packed,
                                        size_t len);
int sfd_peer_report_receive(sfd_peer_node *node, const sfd_window_key *key, uint32_t root_id,
                            uint64_t term, const uint8_t *packed, size_t len, bool final);
void sfd_peer_report_propose(sfd_peer_node *node, sfd_peer_report *r);
const sfd_peer_report *sfd_peer_report_find(const sfd_peer_node *node, const sfd_window_key *key);
int sfd_peer_report_send(sfd_peer_node *node, uint32_t dest, const sfd_peer_report *r);
void sfd_peer_reports_free(sfd_peer_node *node);
void sfd_peer_report_relay(sfd_peer_node *node, const sfd_peer_report *r);
bool sfd_peer_report_committed(const sfd_peer_node *node, const sfd_window_key *key);
void sfd_peer_report_acked(sfd_peer_node *node, const sfd_window_key *key, uint32_t from);
void sfd_peer_report_held(sfd_peer_node *node, sfd_peer_report *r, uint32_t root, uint64_t now);
void sfd_peer_reports_tick(sfd_peer_node *node, uint64_t now);
void sfd_peer_send_ack(sfd_peer_node *node, uint32_t to, const sfd_window_key *key, int status,
                       bool report);
void sfd_peer_reports_repropose(sfd_peer_node *node);
void sfd_peer_report_redeliver(sfd_peer_node *node, const sfd_window_key *key);
void sfd_peer_retained_drop_key(sfd_peer_node *node, const sfd_window_key *key);

#endif

/*
 * Fuzz target: a peer node's state machine across a session of messages
 * with valid MACs. The input is a sequence of records
 *   [type u8][sender u8][term u8][length u16 LE][payload]
 * sent to node 1 of a three-node cluster by node 2 or 3 (sender bit 0).
 * Each record is sealed with the cluster key and opened again through the
 * envelope (so the MAC passes), goes through the replay check of the
 * sender's link (type bit 7 reuses the last sequence number: a replay), and
 * is dispatched to the node: heartbeats (also the hello), root claims and
 * votes, summaries, acks, reports, captures and catch-ups, in any order, with
 * the election's terms from the input. Type 0 ticks the node's timers'
 * work instead. Its deliveries are checked as they come and counted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "node_internal.h"
#include "peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const sfd_peer_key fuzz_key = {{0x5f}};

#define RECORD_HEAD 5
#define TYPE_REPLAY 0x80u
#define N_TYPES 11u /* STAGEFRONTIER__PEER_ENVELOPE__TYPE__HEARTBEAT .. CATCHUP_DONE */

struct session {
    uint64_t delivered;
    uint64_t seq[4]; /* per sender */
};

static void on_deliver(void *ctx, const sfd_window_key *key, uint32_t root_id, uint64_t root_term,
                       const sf_summary *merged)
{
    struct session *s = ctx;
    if (key == NULL || merged == NULL || root_id == 0 || root_id > 3)
        __builtin_trap(); /* a delivery names a member and carries a summary */
    (void)root_term;
    s->delivered++;
}

static void on_log(void *ctx, int priority, const char *msg)
{
    (void)ctx, (void)priority, (void)msg;
}

static int on_capture_request(void *ctx, uint32_t from, bool from_root,
                              const sfd_peer_capture_request *q)
{
    (void)ctx, (void)from, (void)from_root, (void)q;
    return 0;
}

static int on_capture_result(void *ctx, uint32_t from, bool from_root,
                             const sfd_peer_capture_result *r)
{
    (void)ctx, (void)from, (void)from_root, (void)r;
    return 0;
}

static sfd_peer_node *new_node(uv_loop_t *loop, struct session *s)
{
    sfd_peer_config cfg;
    sfd_peer_config_init(&cfg);
    sfd_peer_node *node = NULL;
    if (sfd_peer_config_set(&cfg, "node_id", "1") == 0 &&
        sfd_peer_config_set(&cfg, "peers", "1@127.0.0.1:1, 2@127.0.0.1:2, 3@127.0.0.1:3") == 0 &&
        sfd_peer_config_set(&cfg, "cluster_key_file", "/nonexistent/fuzz.key") == 0) {
        sfd_peer_hooks hooks = {.ctx = s,
                                .deliver = on_deliver,
                                .log = on_log,
                                .capture_request = on_capture_request,
                                .capture_result = on_capture_result};
        if (sfd_peer_node_new(loop, &cfg, &fuzz_key, &hooks, &node) < 0)
            node = NULL;
    }
    sfd_peer_config_clear(&cfg);
    return node;
}

/* The work the node's timer does, at the loop's (fixed) time. */
static void tick(sfd_peer_node *node)
{
    uint64_t now = sfd_peer_now(node);
    sfd_peer_heartbeat_tick(node, now);
    sfd_peer_root_tick(node, now);
    sfd_peer_reports_tick(node, now);
    sfd_peer_catchup_tick(node, now);
}

/* Seals, opens and checks one record as link.c's on_frame does. */
static void deliver_record(sfd_peer_node *node, struct session *s, const uint8_t *head,
                           const uint8_t *payload, size_t len)
{
    uint32_t from = 2 + (head[1] & 1u);
    uint32_t type = 1 + (head[0] & 0x7fu) % N_TYPES;
    if (!(head[0] & TYPE_REPLAY) || s->seq[from] == 0)
        s->seq[from]++;
    sfd_peer_msg out = {.from = from,
                        .dest = 1,
                        .epoch = 1,
                        .seq = s->seq[from],
                        .term = head[2],
                        .type = type,
                        .payload = payload,
                        .payload_len = len};
    uint8_t *frame = NULL;
    size_t flen = 0;
    if (sfd_peer_seal(&fuzz_key, &out, &frame, &flen) < 0)
        return;
    Stagefrontier__PeerEnvelope *env = NULL;
    sfd_peer_msg msg;
    sfd_peer_link *l = sfd_peer_link_find(node, from);
    node->c.frames_in++;
    /* the frame is length-prefixed: the body follows 4 bytes */
    if (l != NULL && flen > 4 && sfd_peer_open(&l->rx_key, frame + 4, flen - 4, &env, &msg) == 0) {
        if (msg.from != from || msg.type != type || msg.payload_len != len)
            __builtin_trap(); /* what was sealed opens unchanged */
        if (sfd_peer_replay_check(&l->replay, msg.epoch, msg.seq) == SFD_REPLAY_FRESH) {
            sfd_peer_replay_commit(&l->replay, msg.epoch, msg.seq);
            sfd_peer_dispatch(node, &msg);
        } else {
            node->c.rejected_replay++;
        }
        stagefrontier__peer_envelope__free_unpacked(env, NULL);
    } else {
        __builtin_trap(); /* a frame sealed with the key always opens */
    }
    free(frame);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0)
        return 0;
    struct session s = {0};
    sfd_peer_node *node = new_node(&loop, &s);
    if (node == NULL)
        __builtin_trap(); /* the fixed configuration is valid */
    size_t at = 0, records = 0;
    while (at + RECORD_HEAD <= size && records++ < 256) {
        const uint8_t *head = data + at;
        size_t len = (size_t)head[3] | (size_t)head[4] << 8;
        if (len > size - at - RECORD_HEAD)
            len = size - at - RECORD_HEAD;
        if ((head[0] & 0x7fu) == 0)
            tick(node);
        else
            deliver_record(node, &s, head, data + at + RECORD_HEAD, len);
        at += RECORD_HEAD + len;
    }
    if (s.delivered > records)
        __builtin_trap(); /* one delivery per window key, at most one per record */
    char *json = NULL;
    if (sfd_peer_status_json(node, &json) == 0)
        free(json);
    sfd_peer_node_close(node, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}

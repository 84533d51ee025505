/*
 * Fuzz target: the peer link's read path. The first byte picks the layer:
 * even, the bytes are a TCP stream for the framer, and every frame goes
 * through envelope opening (length checks, decode, MAC) with a fixed key;
 * odd, the rest is a payload handed to every payload decoder, past the MAC
 * a fuzzer could not forge, and every job key in it (owner uid, job id,
 * incarnation) through the key check the node applies.
 */
#include <stdint.h>
#include <stdlib.h>

#include "peer.h"

static const sfd_peer_key fuzz_key = {{0x5f}};

static int on_frame(void *ctx, uint8_t *body, uint32_t len)
{
    (void)ctx;
    Stagefrontier__PeerEnvelope *env = NULL;
    sfd_peer_msg msg;
    if (sfd_peer_open(&fuzz_key, body, len, &env, &msg) == 0)
        stagefrontier__peer_envelope__free_unpacked(env, NULL);
    return 0;
}

static void payloads(const uint8_t *p, size_t n)
{
    sfd_window_key key;
    Stagefrontier__Heartbeat *hb = stagefrontier__heartbeat__unpack(NULL, n, p);
    if (hb != NULL) {
        /* the cluster size the sets must fit: from the sender's id */
        uint32_t members = 1 + hb->node_id % SFD_PEER_MAX_MEMBERS;
        if (sfd_peer_heartbeat_valid(hb, hb->node_id, members, 1000) && hb->has_root_view) {
            unsigned live = 0;
            for (size_t i = 0; i < hb->root_view.len; i++)
                live += (unsigned)__builtin_popcount(hb->root_view.data[i]);
            (void)live;
        }
        for (size_t i = 0; i < hb->n_pending && i < SFD_PEER_PENDING_MAX; i++) {
            const Stagefrontier__WindowKey *k = hb->pending[i];
            (void)sfd_peer_window_key_make(k->job_id, k->has_owner_uid, k->owner_uid,
                                           k->has_incarnation, k->incarnation, k->window,
                                           k->segment, &key);
        }
    }
    stagefrontier__heartbeat__free_unpacked(hb, NULL);
    Stagefrontier__RootClaim *c = stagefrontier__root_claim__unpack(NULL, n, p);
    stagefrontier__root_claim__free_unpacked(c, NULL);
    Stagefrontier__RootVote *v = stagefrontier__root_vote__unpack(NULL, n, p);
    stagefrontier__root_vote__free_unpacked(v, NULL);
    Stagefrontier__SummaryAck *a = stagefrontier__summary_ack__unpack(NULL, n, p);
    if (a != NULL)
        (void)sfd_peer_window_key_make(a->job_id, a->has_owner_uid, a->owner_uid,
                                       a->has_incarnation, a->incarnation, a->window, a->segment,
                                       &key);
    stagefrontier__summary_ack__free_unpacked(a, NULL);
    uint32_t count;
    (void)sfd_peer_catchup_request_unpack(p, n, &count);
    (void)sfd_peer_catchup_done_unpack(p, n, &count);
    sfd_peer_capture_request q;
    (void)sfd_peer_capture_request_unpack(p, n, &q);
    sfd_peer_capture_result cr;
    (void)sfd_peer_capture_result_unpack(p, n, &cr);
    Stagefrontier__Report *r = stagefrontier__report__unpack(NULL, n, p);
    if (r != NULL) {
        sf_summary *s = NULL;
        sfd_window_key inner;
        (void)sfd_peer_window_key_make(r->job_id, r->has_owner_uid, r->owner_uid,
                                       r->has_incarnation, r->incarnation, r->window, r->segment,
                                       &key);
        if (sfd_peer_summary_unpack(r->merged.data, r->merged.len, &s, &inner, NULL) == 0)
            sf_summary_free(s);
        stagefrontier__report__free_unpacked(r, NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        payloads(data + 1, size - 1);
        return 0;
    }
    sfd_peer_framer f;
    sfd_peer_framer_init(&f, SFD_PEER_FRAME_MAX);
    sfd_peer_framer_feed(&f, data + 1, size - 1, on_frame, NULL);
    sfd_peer_framer_clear(&f);
    return 0;
}

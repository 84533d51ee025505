/*
 * Peer envelopes: sealing a payload into an authenticated, length-prefixed
 * frame and opening one back, plus per-sender replay protection. The MAC
 * covers a canonical byte form of every field except the MAC itself, so it
 * never depends on how a protobuf encoder orders or pads fields.
 */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

static void put_u32(crypto_auth_hmacsha256_state *st, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    crypto_auth_hmacsha256_update(st, b, sizeof b);
}

static void put_u64(crypto_auth_hmacsha256_state *st, uint64_t v)
{
    put_u32(st, (uint32_t)(v >> 32));
    put_u32(st, (uint32_t)v);
}

static void compute_mac(const sfd_peer_key *key, const sfd_peer_msg *m,
                        uint8_t mac[SFD_PEER_MAC_LEN])
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key->k, sizeof key->k);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)"SFPEER1", 7);
    put_u32(&st, m->from);
    put_u32(&st, m->dest);
    put_u64(&st, m->epoch);
    put_u64(&st, m->seq);
    put_u64(&st, m->term);
    put_u32(&st, m->type);
    put_u32(&st, (uint32_t)m->payload_len);
    if (m->payload_len > 0)
        crypto_auth_hmacsha256_update(&st, m->payload, m->payload_len);
    crypto_auth_hmacsha256_final(&st, mac);
}

int sfd_peer_pack(const ProtobufCMessage *m, uint8_t **ret_buf, size_t *ret_len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > SFD_PEER_FRAME_MAX)
        return -EMSGSIZE;
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        return -ENOMEM;
    protobuf_c_message_pack(m, buf);
    *ret_buf = buf;
    *ret_len = n;
    return 0;
}

int sfd_peer_seal(const sfd_peer_key *key, const sfd_peer_msg *msg,
                  uint8_t **ret_frame, size_t *ret_len)
{
    if (key == NULL || msg == NULL || msg->payload_len > SFD_PEER_FRAME_MAX)
        return -EINVAL;
    uint8_t mac[SFD_PEER_MAC_LEN];
    compute_mac(key, msg, mac);
    Stagefrontier__PeerEnvelope env = STAGEFRONTIER__PEER_ENVELOPE__INIT;
    env.node_id = msg->from;
    env.dest_id = msg->dest;
    env.boot_epoch = msg->epoch;
    env.seq = msg->seq;
    env.term = msg->term;
    env.type = (Stagefrontier__PeerEnvelope__Type)msg->type;
    env.has_payload = msg->payload_len > 0;
    env.payload.data = (uint8_t *)msg->payload;
    env.payload.len = msg->payload_len;
    env.mac.data = mac;
    env.mac.len = sizeof mac;
    size_t n = stagefrontier__peer_envelope__get_packed_size(&env);
    if (n > SFD_PEER_FRAME_MAX)
        return -EMSGSIZE;
    uint8_t *frame = malloc(n + 4);
    if (frame == NULL)
        return -ENOMEM;
    frame[0] = (uint8_t)(n >> 24);
    frame[1] = (uint8_t)(n >> 16);
    frame[2] = (uint8_t)(n >> 8);
    frame[3] = (uint8_t)n;
    stagefrontier__peer_envelope__pack(&env, frame + 4);
    *ret_frame = frame;
    *ret_len = n + 4;
    return 0;
}

static bool type_valid(uint32_t t)
{
    return t >= STAGEFRONTIER__PEER_ENVELOPE__TYPE__HEARTBEAT &&
           t <= STAGEFRONTIER__PEER_ENVELOPE__TYPE__QUERY_FORWARD;
}

int sfd_peer_open(const sfd_peer_key *key, const uint8_t *body, size_t len,
                  Stagefrontier__PeerEnvelope **ret_env, sfd_peer_msg *ret_msg)
{
    if (key == NULL || body == NULL || len == 0 || len > SFD_PEER_FRAME_MAX)
        return -EBADMSG;
    Stagefrontier__PeerEnvelope *env = stagefrontier__peer_envelope__unpack(NULL, len, body);
    if (env == NULL)
        return -EBADMSG;
    int r = -EBADMSG;
    if (env->node_id == 0 || env->node_id > SFD_PEER_ID_MAX || env->dest_id == 0 ||
        env->dest_id > SFD_PEER_ID_MAX || env->boot_epoch == 0 ||
        !type_valid((uint32_t)env->type) || env->mac.len != SFD_PEER_MAC_LEN)
        goto fail;
    sfd_peer_msg m = {
        .from = env->node_id, .dest = env->dest_id, .epoch = env->boot_epoch,
        .seq = env->seq, .term = env->term, .type = (uint32_t)env->type,
        .payload = env->has_payload ? env->payload.data : NULL,
        .payload_len = env->has_payload ? env->payload.len : 0,
    };
    uint8_t mac[SFD_PEER_MAC_LEN];
    compute_mac(key, &m, mac);
    if (sodium_memcmp(mac, env->mac.data, SFD_PEER_MAC_LEN) != 0) {
        r = -EPERM;
        goto fail;
    }
    *ret_env = env;
    *ret_msg = m;
    return 0;
fail:
    stagefrontier__peer_envelope__free_unpacked(env, NULL);
    return r;
}

bool sfd_peer_replay_fresh(const sfd_peer_replay *r, uint64_t epoch, uint64_t seq)
{
    if (epoch != r->epoch)
        return epoch > r->epoch;
    return seq > r->seq;
}

void sfd_peer_replay_commit(sfd_peer_replay *r, uint64_t epoch, uint64_t seq)
{
    r->epoch = epoch;
    r->seq = seq;
}

bool sfd_peer_job_id_valid(const char *job, size_t len)
{
    if (job == NULL || len == 0 || len > SFD_PEER_JOB_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = job[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

bool sfd_window_key_equal(const sfd_window_key *a, const sfd_window_key *b)
{
    return a->window == b->window && a->segment == b->segment &&
           strcmp(a->job, b->job) == 0;
}

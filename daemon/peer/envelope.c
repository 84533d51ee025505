/*
 * Peer envelopes: sealing a payload into an authenticated, length-prefixed
 * frame and opening one back, plus per-sender replay protection. A frame
 * body is the sender id, the MAC, then the packed envelope; the MAC covers
 * the sender id and the envelope's bytes as they travel, so it is checked
 * before a single byte of the envelope is decoded (docs/CLUSTER.md).
 */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

static const uint8_t mac_domain[7] = {'S', 'F', 'P', 'E', 'E', 'R', '2'};

static void compute_mac(const sfd_peer_key *key, const uint8_t sender[4], const uint8_t *env,
                        size_t env_len, uint8_t mac[SFD_PEER_MAC_LEN])
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key->k, sizeof key->k);
    crypto_auth_hmacsha256_update(&st, mac_domain, sizeof mac_domain);
    crypto_auth_hmacsha256_update(&st, sender, 4);
    crypto_auth_hmacsha256_update(&st, env, env_len);
    crypto_auth_hmacsha256_final(&st, mac);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
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

int sfd_peer_seal(const sfd_peer_key *key, const sfd_peer_msg *msg, uint8_t **ret_frame,
                  size_t *ret_len)
{
    if (key == NULL || msg == NULL || msg->payload_len > SFD_PEER_FRAME_MAX)
        return -EINVAL;
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
    size_t n = stagefrontier__peer_envelope__get_packed_size(&env);
    size_t body = SFD_PEER_BODY_HEADER + n;
    if (body > SFD_PEER_FRAME_MAX)
        return -EMSGSIZE;
    uint8_t *frame = malloc(4 + body);
    if (frame == NULL)
        return -ENOMEM;
    put_be32(frame, (uint32_t)body);
    put_be32(frame + 4, msg->from);
    uint8_t *packed = frame + 4 + SFD_PEER_BODY_HEADER;
    stagefrontier__peer_envelope__pack(&env, packed);
    compute_mac(key, frame + 4, packed, n, frame + 8);
    *ret_frame = frame;
    *ret_len = 4 + body;
    return 0;
}

int sfd_peer_frame_sender(const uint8_t *body, size_t len, uint32_t *ret_from)
{
    if (body == NULL || len <= SFD_PEER_BODY_HEADER || len > SFD_PEER_FRAME_MAX)
        return -EBADMSG;
    uint32_t from =
        (uint32_t)body[0] << 24 | (uint32_t)body[1] << 16 | (uint32_t)body[2] << 8 | body[3];
    if (from == 0 || from > SFD_PEER_ID_MAX)
        return -EBADMSG;
    *ret_from = from;
    return 0;
}

static bool type_valid(uint32_t t)
{
    return t >= STAGEFRONTIER__PEER_ENVELOPE__TYPE__HEARTBEAT &&
           t <= STAGEFRONTIER__PEER_ENVELOPE__TYPE__LIVE_ROWS;
}

int sfd_peer_open(const sfd_peer_key *key, const uint8_t *body, size_t len,
                  Stagefrontier__PeerEnvelope **ret_env, sfd_peer_msg *ret_msg)
{
    uint32_t from;
    if (key == NULL || sfd_peer_frame_sender(body, len, &from) < 0)
        return -EBADMSG;
    const uint8_t *packed = body + SFD_PEER_BODY_HEADER;
    size_t n = len - SFD_PEER_BODY_HEADER;
    uint8_t mac[SFD_PEER_MAC_LEN];
    compute_mac(key, body, packed, n, mac);
    if (sodium_memcmp(mac, body + 4, SFD_PEER_MAC_LEN) != 0)
        return -EPERM;
    Stagefrontier__PeerEnvelope *env = stagefrontier__peer_envelope__unpack(NULL, n, packed);
    if (env == NULL)
        return -EBADMSG;
    if (env->node_id != from || env->dest_id == 0 || env->dest_id > SFD_PEER_ID_MAX ||
        env->boot_epoch == 0 || !type_valid((uint32_t)env->type)) {
        stagefrontier__peer_envelope__free_unpacked(env, NULL);
        return -EBADMSG;
    }
    *ret_msg = (sfd_peer_msg){
        .from = env->node_id,
        .dest = env->dest_id,
        .epoch = env->boot_epoch,
        .seq = env->seq,
        .term = env->term,
        .type = (uint32_t)env->type,
        .payload = env->has_payload ? env->payload.data : NULL,
        .payload_len = env->has_payload ? env->payload.len : 0,
    };
    *ret_env = env;
    return 0;
}

enum sfd_replay_verdict sfd_peer_replay_check(const sfd_peer_replay *r, uint64_t epoch,
                                              uint64_t seq)
{
    if (epoch == r->epoch)
        return !r->closed && seq > r->seq ? SFD_REPLAY_FRESH : SFD_REPLAY_OLD;
    if (epoch < r->epoch)
        return SFD_REPLAY_OLD;
    uint64_t step = r->epoch == 0 ? SFD_PEER_EPOCH_FIRST : SFD_PEER_EPOCH_STEP;
    if (epoch >= SFD_PEER_EPOCH_MAX || epoch - r->epoch > step)
        return SFD_REPLAY_FAR;
    return SFD_REPLAY_FRESH;
}

bool sfd_peer_replay_fresh(const sfd_peer_replay *r, uint64_t epoch, uint64_t seq)
{
    return sfd_peer_replay_check(r, epoch, seq) == SFD_REPLAY_FRESH;
}

void sfd_peer_replay_commit(sfd_peer_replay *r, uint64_t epoch, uint64_t seq)
{
    r->epoch = epoch;
    r->seq = seq;
    r->closed = false;
}

uint64_t sfd_peer_epoch_after(uint64_t mine, uint64_t seen, bool closed)
{
    if (seen < mine || (seen == mine && !closed))
        return 0;
    /* A receiver holds an epoch at or above ours: one it accepted from a
     * forger, or ours closed by its restart. Start above it, but never more
     * than the step every other receiver accepts: if it is further ahead,
     * climb one step per heartbeat until past it. */
    if (seen >= SFD_PEER_EPOCH_MAX - 1 || mine >= SFD_PEER_EPOCH_MAX - SFD_PEER_EPOCH_STEP)
        return 0;
    return seen - mine < SFD_PEER_EPOCH_STEP ? seen + 1 : mine + SFD_PEER_EPOCH_STEP;
}

bool sfd_peer_job_id_valid(const char *job, size_t len)
{
    if (job == NULL || len == 0 || len > SF_MAX_JOB_ID_LEN)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = job[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

bool sfd_window_key_equal(const sfd_window_key *a, const sfd_window_key *b)
{
    return a->window == b->window && a->segment == b->segment && a->uid == b->uid &&
           a->incarnation == b->incarnation && strcmp(a->job, b->job) == 0;
}

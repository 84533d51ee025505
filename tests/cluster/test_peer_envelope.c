/*
 * Unit tests of envelopes, framing, replay protection, the key file and
 * the membership config: wrong keys, tampering, replays and oversize frames
 * are refused with their own errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "peer.h"

static const sfd_peer_key key_a = {{1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                    12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                    23, 24, 25, 26, 27, 28, 29, 30, 31, 32}};
static const sfd_peer_key key_b = {{9}};

static sfd_peer_msg sample(const uint8_t *payload, size_t len)
{
    return (sfd_peer_msg){.from = 2,
                          .dest = 1,
                          .epoch = 77,
                          .seq = 5,
                          .term = 3,
                          .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__HEARTBEAT,
                          .payload = payload,
                          .payload_len = len};
}

static void test_seal_open(void **state)
{
    (void)state;
    const uint8_t payload[] = "hello peer";
    sfd_peer_msg m = sample(payload, sizeof payload);
    uint8_t *frame = NULL;
    size_t len = 0;
    assert_int_equal(sfd_peer_seal(&key_a, &m, &frame, &len), 0);
    uint32_t n = (uint32_t)frame[0] << 24 | frame[1] << 16 | frame[2] << 8 | frame[3];
    assert_int_equal(n + 4, len);
    Stagefrontier__PeerEnvelope *env = NULL;
    sfd_peer_msg got;
    assert_int_equal(sfd_peer_open(&key_a, frame + 4, n, &env, &got), 0);
    assert_int_equal(got.from, 2);
    assert_int_equal(got.dest, 1);
    assert_int_equal(got.seq, 5);
    assert_int_equal(got.term, 3);
    assert_int_equal(got.payload_len, sizeof payload);
    assert_memory_equal(got.payload, payload, sizeof payload);
    stagefrontier__peer_envelope__free_unpacked(env, NULL);
    /* the wrong key */
    assert_int_equal(sfd_peer_open(&key_b, frame + 4, n, &env, &got), -EPERM);
    /* any flipped byte: refused (MAC or decode), never accepted */
    for (size_t i = 4; i < len; i++) {
        frame[i] ^= 0x40;
        int r = sfd_peer_open(&key_a, frame + 4, n, &env, &got);
        assert_true(r == -EPERM || r == -EBADMSG);
        frame[i] ^= 0x40;
    }
    /* truncated: the MAC no longer matches, so nothing is decoded */
    assert_int_equal(sfd_peer_open(&key_a, frame + 4, n - 3, &env, &got), -EPERM);
    /* shorter than the sender and MAC header */
    assert_int_equal(sfd_peer_open(&key_a, frame + 4, SFD_PEER_BODY_HEADER, &env, &got), -EBADMSG);
    free(frame);
}

static void test_redirect_is_detected(void **state)
{
    (void)state;
    /* A message re-addressed to another node fails the MAC: dest is covered. */
    sfd_peer_msg m = sample(NULL, 0);
    uint8_t *frame = NULL;
    size_t len = 0;
    assert_int_equal(sfd_peer_seal(&key_a, &m, &frame, &len), 0);
    Stagefrontier__PeerEnvelope *env = stagefrontier__peer_envelope__unpack(
        NULL, len - 4 - SFD_PEER_BODY_HEADER, frame + 4 + SFD_PEER_BODY_HEADER);
    assert_non_null(env);
    env->dest_id = 3;
    uint8_t buf[256];
    memcpy(buf, frame + 4, SFD_PEER_BODY_HEADER); /* the sender and the old MAC */
    size_t n =
        SFD_PEER_BODY_HEADER + stagefrontier__peer_envelope__pack(env, buf + SFD_PEER_BODY_HEADER);
    stagefrontier__peer_envelope__free_unpacked(env, NULL);
    sfd_peer_msg got;
    assert_int_equal(sfd_peer_open(&key_a, buf, n, &env, &got), -EPERM);
    /* a claimed sender other than the envelope's: the MAC covers it too */
    memcpy(buf, frame + 4, len - 4);
    buf[3] ^= 1;
    assert_int_equal(sfd_peer_open(&key_a, buf, len - 4, &env, &got), -EPERM);
    free(frame);
}

static int count_frames(void *ctx, uint8_t *body, uint32_t len)
{
    (void)body;
    (void)len;
    (*(int *)ctx)++;
    return 0;
}

static void test_framer(void **state)
{
    (void)state;
    sfd_peer_framer f;
    sfd_peer_framer_init(&f, SFD_PEER_FRAME_MAX);
    uint8_t *frame = NULL;
    size_t len = 0;
    sfd_peer_msg m = sample((const uint8_t *)"x", 1);
    assert_int_equal(sfd_peer_seal(&key_a, &m, &frame, &len), 0);
    int frames = 0;
    for (int rep = 0; rep < 3; rep++)
        for (size_t i = 0; i < len; i++)
            assert_int_equal(sfd_peer_framer_feed(&f, frame + i, 1, count_frames, &frames), 0);
    assert_int_equal(frames, 3);
    free(frame);
    const uint8_t huge[4] = {0x7f, 0xff, 0xff, 0xff};
    assert_int_equal(sfd_peer_framer_feed(&f, huge, 4, count_frames, &frames), -EMSGSIZE);
    sfd_peer_framer_clear(&f);
    const uint8_t zero[4] = {0, 0, 0, 0};
    assert_int_equal(sfd_peer_framer_feed(&f, zero, 4, count_frames, &frames), -EMSGSIZE);
    sfd_peer_framer_clear(&f);
}

/* The MAC is checked before the envelope is decoded: garbage with a wrong
 * MAC is -EPERM (never reaches the decoder), garbage with a right MAC is
 * -EBADMSG, and the claimed sender is readable without decoding. */
static void test_mac_before_decode(void **state)
{
    (void)state;
    uint8_t body[64];
    memset(body, 0xff, sizeof body); /* not a valid protobuf envelope */
    body[0] = 0, body[1] = 0, body[2] = 0, body[3] = 2;
    Stagefrontier__PeerEnvelope *env = NULL;
    sfd_peer_msg got;
    uint32_t from = 0;
    assert_int_equal(sfd_peer_frame_sender(body, sizeof body, &from), 0);
    assert_int_equal(from, 2);
    assert_int_equal(sfd_peer_open(&key_a, body, sizeof body, &env, &got), -EPERM);
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key_a.k, sizeof key_a.k);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)"SFPEER2", 7);
    crypto_auth_hmacsha256_update(&st, body, 4);
    crypto_auth_hmacsha256_update(&st, body + SFD_PEER_BODY_HEADER,
                                  sizeof body - SFD_PEER_BODY_HEADER);
    crypto_auth_hmacsha256_final(&st, body + 4);
    assert_int_equal(sfd_peer_open(&key_a, body, sizeof body, &env, &got), -EBADMSG);
    body[3] = 0; /* sender 0 */
    assert_int_equal(sfd_peer_frame_sender(body, sizeof body, &from), -EBADMSG);
}

/* A stream's cap applies to the announced length; a stalled frame holds
 * what arrived (rounded up to the next power of two), not what it announced. */
static void test_framer_caps(void **state)
{
    (void)state;
    sfd_peer_framer f;
    int frames = 0;
    sfd_peer_framer_init(&f, SFD_PEER_PREAUTH_FRAME_MAX);
    const uint8_t over[4] = {0, 0, 0x10, 0x01}; /* 4097 */
    assert_int_equal(sfd_peer_framer_feed(&f, over, 4, count_frames, &frames), -EMSGSIZE);
    sfd_peer_framer_clear(&f);
    sfd_peer_framer_init(&f, SFD_PEER_FRAME_MAX);
    const uint8_t big[4] = {0, 0xff, 0xff, 0xff}; /* 16 MiB - 1 announced */
    assert_int_equal(sfd_peer_framer_feed(&f, big, 4, count_frames, &frames), 0);
    static uint8_t chunk[100000];
    assert_int_equal(sfd_peer_framer_feed(&f, chunk, sizeof chunk, count_frames, &frames), 0);
    assert_true(sfd_peer_framer_held(&f) >= sizeof chunk);
    assert_true(sfd_peer_framer_held(&f) <= 2 * sizeof chunk);
    assert_int_equal(frames, 0);
    sfd_peer_framer_clear(&f);
    assert_int_equal(sfd_peer_framer_held(&f), 0);
}

static void test_replay(void **state)
{
    (void)state;
    sfd_peer_replay r = {0};
    /* a member this node holds nothing of: a wider first step */
    assert_true(sfd_peer_replay_fresh(&r, SFD_PEER_EPOCH_FIRST, 1));
    assert_int_equal(sfd_peer_replay_check(&r, SFD_PEER_EPOCH_FIRST + 1, 1), SFD_REPLAY_FAR);
    assert_true(sfd_peer_replay_fresh(&r, 10, 1));
    sfd_peer_replay_commit(&r, 10, 1);
    assert_false(sfd_peer_replay_fresh(&r, 10, 1));  /* the same message */
    assert_false(sfd_peer_replay_fresh(&r, 9, 100)); /* an older boot */
    assert_true(sfd_peer_replay_fresh(&r, 10, 2));
    assert_true(sfd_peer_replay_fresh(&r, 11, 1)); /* a restart resets seq */
    sfd_peer_replay_commit(&r, 11, 1);
    assert_false(sfd_peer_replay_fresh(&r, 10, 3));
    /* a bounded step per new epoch, and a ceiling: 2^64-1 is never taken */
    assert_int_equal(sfd_peer_replay_check(&r, UINT64_MAX, 1), SFD_REPLAY_FAR);
    assert_int_equal(sfd_peer_replay_check(&r, 11 + SFD_PEER_EPOCH_STEP + 1, 1), SFD_REPLAY_FAR);
    assert_int_equal(sfd_peer_replay_check(&r, 11 + SFD_PEER_EPOCH_STEP, 1), SFD_REPLAY_FRESH);
    /* read back after a restart: the rest of that epoch is closed */
    sfd_peer_replay closed = {.epoch = 11, .seq = 0, .closed = true};
    assert_int_equal(sfd_peer_replay_check(&closed, 11, 1000), SFD_REPLAY_OLD);
    assert_int_equal(sfd_peer_replay_check(&closed, 12, 1), SFD_REPLAY_FRESH);
}

/* How a sender follows what a receiver holds of it. */
static void test_epoch_after(void **state)
{
    (void)state;
    assert_int_equal(sfd_peer_epoch_after(5, 5, false), 0);  /* in step */
    assert_int_equal(sfd_peer_epoch_after(5, 4, true), 0);   /* older: ours is new */
    assert_int_equal(sfd_peer_epoch_after(5, 5, true), 6);   /* closed by a restart */
    assert_int_equal(sfd_peer_epoch_after(5, 9, false), 10); /* a forged higher one */
    /* far ahead: climb one accepted step at a time, never past the ceiling */
    assert_int_equal(sfd_peer_epoch_after(5, 5 + 3 * SFD_PEER_EPOCH_STEP, false),
                     5 + SFD_PEER_EPOCH_STEP);
    assert_int_equal(sfd_peer_epoch_after(5, UINT64_MAX, false), 0);
}

static void test_state_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sf-peer-state-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/peer-1.state", dir);
    sfd_peer_state st = {0};
    assert_int_equal(sfd_peer_state_load(path, &st), 0); /* none yet: empty */
    assert_int_equal(st.boot_epoch, 0);
    sfd_peer_state_entry e[2] = {{3, 42}, {2, 7}};
    sfd_peer_state w = {.boot_epoch = 9, .n = 2, .peers = e};
    assert_int_equal(sfd_peer_state_save(path, &w), 0);
    assert_int_equal(sfd_peer_state_load(path, &st), 0);
    assert_int_equal(st.boot_epoch, 9);
    assert_int_equal(st.n, 2);
    assert_int_equal(st.peers[0].id, 2);
    assert_int_equal(st.peers[0].epoch, 7);
    assert_int_equal(st.peers[1].epoch, 42);
    sfd_peer_state_clear(&st);
    FILE *f = fopen(path, "w");
    fputs("sfpeer-state 1\nboot 9\npeer x 1\n", f);
    fclose(f);
    assert_int_equal(sfd_peer_state_load(path, &st), -EBADMSG);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
    unlink(path);
    /* an unwritable place is an error, not a crash */
    assert_true(sfd_peer_state_save("/nonexistent/dir/peer-1.state", &w) < 0);
    /* a temporary name someone linked elsewhere is replaced, not written through */
    char victim[160], link_dir[160], via_link[200];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    f = fopen(victim, "w");
    fputs("untouched\n", f);
    fclose(f);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(sfd_peer_state_save(path, &w), 0);
    f = fopen(victim, "r");
    char line[32] = {0};
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_string_equal(line, "untouched\n");
    assert_int_equal(access(tmp, F_OK), -1);
    /* a state directory reached through a link is refused */
    snprintf(link_dir, sizeof link_dir, "%s/link", dir);
    assert_int_equal(symlink(dir, link_dir), 0);
    snprintf(via_link, sizeof via_link, "%s/peer-2.state", link_dir);
    assert_int_equal(sfd_peer_state_save(via_link, &w), -ELOOP);
    snprintf(via_link, sizeof via_link, "%s/peer-2.state", dir);
    assert_int_equal(access(via_link, F_OK), -1);
    unlink(link_dir);
    unlink(victim);
    unlink(path);
    rmdir(dir);
}

static void write_bytes(const char *path, const uint8_t *b, size_t n, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, n), (ssize_t)n);
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
}

/* Per-member keys: both ends of a link derive the same directional keys,
 * and each link's keys differ, so member 3 cannot seal as member 2. */
static void test_pair_keys(void **state)
{
    (void)state;
    char dir[] = "/tmp/sf-peer-pair-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sk_path[3][128], pub[128];
    for (uint32_t id = 1; id <= 3; id++) {
        uint8_t sk[32], pk[32];
        randombytes_buf(sk, sizeof sk);
        crypto_scalarmult_base(pk, sk);
        snprintf(sk_path[id - 1], sizeof sk_path[0], "%s/%u.key", dir, id);
        write_bytes(sk_path[id - 1], sk, sizeof sk, 0400);
        snprintf(pub, sizeof pub, "%s/%u.pub", dir, id);
        write_bytes(pub, pk, sizeof pk, 0644);
    }
    sfd_peer_key tx12, rx12, tx21, rx21, tx31, rx31;
    assert_int_equal(sfd_peer_pair_keys(sk_path[0], dir, 1, 2, &tx12, &rx12), 0);
    assert_int_equal(sfd_peer_pair_keys(sk_path[1], dir, 2, 1, &tx21, &rx21), 0);
    assert_int_equal(sfd_peer_pair_keys(sk_path[2], dir, 3, 1, &tx31, &rx31), 0);
    assert_memory_equal(tx12.k, rx21.k, 32);
    assert_memory_equal(tx21.k, rx12.k, 32);
    assert_memory_not_equal(tx21.k, tx31.k, 32);
    /* a message node 3 seals as node 2 fails at node 1 */
    sfd_peer_msg m = sample(NULL, 0);
    uint8_t *frame = NULL;
    size_t len = 0;
    Stagefrontier__PeerEnvelope *env = NULL;
    sfd_peer_msg got;
    assert_int_equal(sfd_peer_seal(&tx31, &m, &frame, &len), 0);
    assert_int_equal(sfd_peer_open(&rx12, frame + 4, len - 4, &env, &got), -EPERM);
    free(frame);
    assert_int_equal(sfd_peer_seal(&tx21, &m, &frame, &len), 0);
    assert_int_equal(sfd_peer_open(&rx12, frame + 4, len - 4, &env, &got), 0);
    stagefrontier__peer_envelope__free_unpacked(env, NULL);
    free(frame);
    /* a public key others may rewrite is refused */
    snprintf(pub, sizeof pub, "%s/2.pub", dir);
    assert_int_equal(chmod(pub, 0666), 0);
    assert_int_equal(sfd_peer_pair_keys(sk_path[0], dir, 1, 2, &tx12, &rx12), -EPERM);
    assert_int_equal(sfd_peer_pair_keys(sk_path[0], dir, 1, 4, &tx12, &rx12), -ENOENT);
    for (uint32_t id = 1; id <= 3; id++) {
        unlink(sk_path[id - 1]);
        snprintf(pub, sizeof pub, "%s/%u.pub", dir, id);
        unlink(pub);
    }
    rmdir(dir);
}

static void test_key_path(void **state)
{
    (void)state;
    char p[256];
    assert_int_equal(sfd_peer_key_path("/etc/k", p, sizeof p), 0);
    assert_string_equal(p, "/etc/k");
    unsetenv("CREDENTIALS_DIRECTORY");
    assert_int_equal(sfd_peer_key_path("cluster.key", p, sizeof p), -ENOENT);
    setenv("CREDENTIALS_DIRECTORY", "/run/credentials/sfd.service", 1);
    assert_int_equal(sfd_peer_key_path("cluster.key", p, sizeof p), 0);
    assert_string_equal(p, "/run/credentials/sfd.service/cluster.key");
    assert_int_equal(sfd_peer_key_path("cluster.key", p, 10), -ENAMETOOLONG);
    unsetenv("CREDENTIALS_DIRECTORY");
}

static void write_key(const char *path, mode_t mode, size_t n)
{
    uint8_t buf[64] = {7};
    write_bytes(path, buf, n, mode);
}

static void test_key_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sf-peer-key-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/key", dir);
    sfd_peer_key k;
    write_key(path, 0600, 32);
    assert_int_equal(sfd_peer_key_load(path, &k), 0);
    assert_int_equal(k.k[0], 7);
    write_key(path, 0400, 32);
    assert_int_equal(sfd_peer_key_load(path, &k), 0);
    write_key(path, 0644, 32);
    assert_int_equal(sfd_peer_key_load(path, &k), -EPERM);
    write_key(path, 0640, 32);
    assert_int_equal(sfd_peer_key_load(path, &k), -EPERM);
    write_key(path, 0600, 31);
    assert_int_equal(sfd_peer_key_load(path, &k), -EINVAL);
    write_key(path, 0600, 33);
    assert_int_equal(sfd_peer_key_load(path, &k), -EINVAL);
    assert_int_equal(sfd_peer_key_load("/nonexistent/key", &k), -ENOENT);
    unlink(path);
    rmdir(dir);
}

/* `peers` spans lines (each adds members) up to the hard member cap. */
static void test_config_member_cap(void **state)
{
    (void)state;
    sfd_peer_config c;
    sfd_peer_config_init(&c);
    char line[256];
    uint32_t id = 1;
    while (id <= SFD_PEER_MAX_MEMBERS) {
        size_t o = 0;
        for (int k = 0; k < 8 && id <= SFD_PEER_MAX_MEMBERS; k++, id++)
            o += (size_t)snprintf(line + o, sizeof line - o, "%s%u@10.0.%u.%u:7100", k ? ", " : "",
                                  id, id >> 8, id & 255);
        assert_int_equal(sfd_peer_config_set(&c, "peers", line), 0);
    }
    assert_int_equal(c.n_members, SFD_PEER_MAX_MEMBERS);
    assert_int_equal(c.members[SFD_PEER_MAX_MEMBERS - 1].id, SFD_PEER_MAX_MEMBERS);
    assert_int_equal(sfd_peer_config_set(&c, "peers", "1@h:1"), -EINVAL); /* duplicate */
    snprintf(line, sizeof line, "%u@h:1", SFD_PEER_MAX_MEMBERS + 1);
    assert_int_equal(sfd_peer_config_set(&c, "peers", line), -EINVAL); /* one past the cap */
    assert_int_equal(c.n_members, SFD_PEER_MAX_MEMBERS);
    assert_int_equal(sfd_peer_config_set(&c, "node_id", "65536"), 0);
    assert_int_equal(sfd_peer_config_set(&c, "cluster_key_file", "/k"), 0);
    assert_int_equal(sfd_peer_config_validate(&c), 0);
    sfd_peer_config_clear(&c);
}

static void test_config(void **state)
{
    (void)state;
    sfd_peer_config c;
    sfd_peer_config_init(&c);
    assert_int_equal(c.heartbeat_ms, 200);
    assert_int_equal(c.failure_timeout_ms, 1000);
    assert_int_equal(c.fanout, 8);
    assert_int_equal(sfd_peer_config_set(&c, "peers",
                                         "3@127.0.0.1:7003, 1@127.0.0.1:7001,"
                                         "2@[::1]:7002"),
                     0);
    assert_int_equal(c.n_members, 3);
    assert_int_equal(c.members[0].id, 1);
    assert_string_equal(c.members[2].host, "127.0.0.1");
    assert_string_equal(c.members[1].host, "::1");
    assert_int_equal(c.members[1].port, 7002);
    assert_int_equal(sfd_peer_config_validate(&c), -EINVAL); /* no node id, no key */
    assert_int_equal(sfd_peer_config_set(&c, "node_id", "2"), 0);
    assert_int_equal(sfd_peer_config_set(&c, "cluster_key_file", "/k"), 0);
    assert_int_equal(sfd_peer_config_validate(&c), 0);
    assert_int_equal(sfd_peer_config_set(&c, "node_id", "9"), 0);
    assert_int_equal(sfd_peer_config_validate(&c), -EINVAL); /* not a member */
    assert_int_equal(sfd_peer_config_set(&c, "peers", "1@h:1,1@h:2"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "peers", "1@h"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "peers", "0@h:1"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "peers", "1@h:70000"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "heartbeat_ms", "-5"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "fanout", "0"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "nonsense", "1"), -ENOENT);
    /* per-member keys replace the cluster key; mixing both is refused */
    assert_int_equal(sfd_peer_config_set(&c, "node_id", "2"), 0);
    assert_int_equal(sfd_peer_config_set(&c, "member_key_file", "/k2"), 0);
    assert_int_equal(sfd_peer_config_validate(&c), -EINVAL);
    c.key_file[0] = '\0';
    assert_int_equal(sfd_peer_config_validate(&c), -EINVAL); /* no public keys */
    assert_int_equal(sfd_peer_config_set(&c, "member_pub_dir", "/pub"), 0);
    assert_int_equal(sfd_peer_config_validate(&c), 0);
    assert_int_equal(c.auth_timeout_ms, 2000);
    assert_int_equal(sfd_peer_config_set(&c, "peer_auth_timeout_ms", "10"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "peer_preauth_per_addr", "0"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "peer_preauth_max", "128"), 0);
    sfd_peer_config_clear(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal_open),
        cmocka_unit_test(test_redirect_is_detected),
        cmocka_unit_test(test_framer),
        cmocka_unit_test(test_mac_before_decode),
        cmocka_unit_test(test_framer_caps),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_epoch_after),
        cmocka_unit_test(test_state_file),
        cmocka_unit_test(test_pair_keys),
        cmocka_unit_test(test_key_path),
        cmocka_unit_test(test_key_file),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_config_member_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

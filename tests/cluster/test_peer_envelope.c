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

#include "peer.h"

static const sfd_peer_key key_a = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
                                    31, 32}};
static const sfd_peer_key key_b = {{9}};

static sfd_peer_msg sample(const uint8_t *payload, size_t len)
{
    return (sfd_peer_msg){.from = 2, .dest = 1, .epoch = 77, .seq = 5, .term = 3,
                          .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__HEARTBEAT,
                          .payload = payload, .payload_len = len};
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
    /* truncated */
    assert_int_equal(sfd_peer_open(&key_a, frame + 4, n - 3, &env, &got), -EBADMSG);
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
    Stagefrontier__PeerEnvelope *env =
        stagefrontier__peer_envelope__unpack(NULL, len - 4, frame + 4);
    assert_non_null(env);
    env->dest_id = 3;
    uint8_t buf[256];
    size_t n = stagefrontier__peer_envelope__pack(env, buf);
    stagefrontier__peer_envelope__free_unpacked(env, NULL);
    sfd_peer_msg got;
    assert_int_equal(sfd_peer_open(&key_a, buf, n, &env, &got), -EPERM);
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
    sfd_peer_framer_init(&f);
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

static void test_replay(void **state)
{
    (void)state;
    sfd_peer_replay r = {0};
    assert_true(sfd_peer_replay_fresh(&r, 10, 1));
    sfd_peer_replay_commit(&r, 10, 1);
    assert_false(sfd_peer_replay_fresh(&r, 10, 1));     /* the same message */
    assert_false(sfd_peer_replay_fresh(&r, 9, 100));    /* an older boot */
    assert_true(sfd_peer_replay_fresh(&r, 10, 2));
    assert_true(sfd_peer_replay_fresh(&r, 11, 1));      /* a restart resets seq */
    sfd_peer_replay_commit(&r, 11, 1);
    assert_false(sfd_peer_replay_fresh(&r, 10, 3));
}

static void write_key(const char *path, mode_t mode, size_t n)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    uint8_t buf[64] = {7};
    assert_int_equal(write(fd, buf, n), (ssize_t)n);
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
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

static void test_config(void **state)
{
    (void)state;
    sfd_peer_config c;
    sfd_peer_config_init(&c);
    assert_int_equal(c.heartbeat_ms, 200);
    assert_int_equal(c.failure_timeout_ms, 1000);
    assert_int_equal(c.fanout, 8);
    assert_int_equal(sfd_peer_config_set(&c, "peers", "3@127.0.0.1:7003, 1@127.0.0.1:7001,"
                                                      "2@[::1]:7002"), 0);
    assert_int_equal(c.n_members, 3);
    assert_int_equal(c.members[0].id, 1);
    assert_string_equal(c.members[2].host, "127.0.0.1");
    assert_string_equal(c.members[1].host, "::1");
    assert_int_equal(c.members[1].port, 7002);
    assert_int_equal(sfd_peer_config_validate(&c), -EINVAL);     /* no node id, no key */
    assert_int_equal(sfd_peer_config_set(&c, "node_id", "2"), 0);
    assert_int_equal(sfd_peer_config_set(&c, "cluster_key_file", "/k"), 0);
    assert_int_equal(sfd_peer_config_validate(&c), 0);
    assert_int_equal(sfd_peer_config_set(&c, "node_id", "9"), 0);
    assert_int_equal(sfd_peer_config_validate(&c), -EINVAL);     /* not a member */
    assert_int_equal(sfd_peer_config_set(&c, "peers", "1@h:1,1@h:2"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "peers", "1@h"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "peers", "0@h:1"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "peers", "1@h:70000"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "heartbeat_ms", "-5"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "fanout", "0"), -EINVAL);
    assert_int_equal(sfd_peer_config_set(&c, "nonsense", "1"), -ENOENT);
    sfd_peer_config_clear(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal_open),
        cmocka_unit_test(test_redirect_is_detected),
        cmocka_unit_test(test_framer),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_key_file),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

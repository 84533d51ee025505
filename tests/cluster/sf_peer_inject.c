/*
 * Hostile peer for the cluster tests: connects to a member's peer port as
 * a configured member id and sends one kind of bad message.
 *   wrongkey  a heartbeat sealed with a key other than the cluster's
 *   replay    a valid heartbeat, then the very same frame again
 *   stale     a validly sealed summary of JOB window 0 with term 0
 *   garbage   an oversized length prefix
 * usage: sf_peer_inject HOST PORT KEY_FILE FROM DEST MODE [JOB WORLD]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "peer.h"

static int dial(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        exit(1);
    }
    return fd;
}

static void put(int fd, const uint8_t *p, size_t n)
{
    if (write(fd, p, n) != (ssize_t)n) {
        perror("write");
        exit(1);
    }
}

static void heartbeat_frame(const sfd_peer_key *key, uint32_t from, uint32_t dest, uint64_t epoch,
                            uint8_t **frame, size_t *len)
{
    Stagefrontier__Heartbeat hb = STAGEFRONTIER__HEARTBEAT__INIT;
    hb.node_id = from;
    uint8_t *p;
    size_t n;
    sfd_peer_pack(&hb.base, &p, &n);
    sfd_peer_msg m = {.from = from, .dest = dest, .epoch = epoch, .seq = 1, .term = 0,
                      .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__HEARTBEAT,
                      .payload = p, .payload_len = n};
    if (sfd_peer_seal(key, &m, frame, len) < 0)
        exit(1);
    free(p);
}

static void stale_summary(const sfd_peer_key *key, uint32_t from, uint32_t dest, uint64_t epoch,
                          const char *job, uint32_t world, uint8_t **frame, size_t *len)
{
    sf_schema sc;
    sf_schema_init_default(&sc, 1);
    sf_window_meta meta = {.index = 0, .first_step = 2, .last_step = 11, .world_size = world};
    int64_t d[6] = {900000000, 1, 1, 1, 1, 1};     /* a huge data wait, if it ever counted */
    sf_row row = {.step = 2, .rank = world - 1, .d = d};
    sf_summary *s = NULL;
    uint8_t *p;
    size_t n;
    if (sf_summary_build(&sc, &meta, &row, 1, false, &s) < 0 ||
        sfd_peer_summary_pack(s, job, false, from, &p, &n) < 0)
        exit(1);
    sfd_peer_msg m = {.from = from, .dest = dest, .epoch = epoch, .seq = 2, .term = 0,
                      .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__SUMMARY,
                      .payload = p, .payload_len = n};
    if (sfd_peer_seal(key, &m, frame, len) < 0)
        exit(1);
    free(p);
    sf_summary_free(s);
    sf_schema_clear(&sc);
}

int main(int argc, char **argv)
{
    if (argc < 7)
        return 2;
    sfd_peer_key key;
    if (sfd_peer_key_load(argv[3], &key) < 0) {
        fprintf(stderr, "cannot load key\n");
        return 1;
    }
    uint32_t from = (uint32_t)atoi(argv[4]), dest = (uint32_t)atoi(argv[5]);
    const char *mode = argv[6];
    uint64_t epoch = (uint64_t)time(NULL) * 1000000u;
    int fd = dial(argv[1], atoi(argv[2]));
    uint8_t *frame = NULL;
    size_t len = 0;
    if (strcmp(mode, "wrongkey") == 0) {
        sfd_peer_key bad = key;
        bad.k[0] ^= 1;
        heartbeat_frame(&bad, from, dest, epoch, &frame, &len);
        put(fd, frame, len);
    } else if (strcmp(mode, "replay") == 0) {
        heartbeat_frame(&key, from, dest, epoch, &frame, &len);
        put(fd, frame, len);
        put(fd, frame, len);
    } else if (strcmp(mode, "stale") == 0 && argc >= 9) {
        stale_summary(&key, from, dest, epoch + 1, argv[7], (uint32_t)atoi(argv[8]), &frame, &len);
        put(fd, frame, len);
    } else if (strcmp(mode, "garbage") == 0) {
        const uint8_t huge[8] = {0x7f, 0xff, 0xff, 0xff, 1, 2, 3, 4};
        put(fd, huge, sizeof huge);
    } else {
        return 2;
    }
    free(frame);
    /* Wait for the daemon to act on it: it closes bad links, and we close
     * ours once it has read everything. */
    shutdown(fd, SHUT_WR);
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
    return 0;
}

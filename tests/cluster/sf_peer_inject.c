/*
 * Hostile peer for the cluster tests: connects to a member's peer port as
 * a configured member id and sends one kind of bad message.
 *   wrongkey  a heartbeat sealed with a key other than the cluster's
 *   replay    a valid heartbeat, then the very same frame again
 *   stale     a validly sealed summary of JOB window 0 with term 0
 *   garbage   an oversized length prefix
 *   term      a validly sealed heartbeat with term 2^64-1
 *   epoch     a validly sealed heartbeat with boot epoch 2^64-1
 *   record    valid heartbeats (epoch EPOCH, seq 1..COUNT) sent, and written
 *             to FILE as they went over the wire
 *   playback  the bytes of FILE sent again, as a recorded stream replayed
 *   capture   a validly sealed capture outcome (DONE, a forged trace path) of
 *             JOB's capture ID, rank RANK, claiming node NODE, at term TERM
 *   catchup   a validly sealed catch-up request (keep_windows VALUE) or,
 *   catchupdone  answer (VALUE reports), at term TERM, sequence number
 *             SF_INJECT_SEQ (default 1)
 *   unowned   a validly sealed summary of JOB window 0 at term TERM that
 *             leaves out its owner uid and incarnation (an older member)
 *   live      validly sealed live rows (LiveRows) of JOB at term TERM: KIND
 *             shape (a schema hash no job has) or outside (rank WORLD)
 *   hold      a valid heartbeat (sequence number SF_INJECT_SEQ, default 1),
 *             then the connection held open for SF_INJECT_HOLD_S seconds
 *             (default 10): prints "closed" if the daemon closed it, "open"
 * SF_INJECT_EPOCH sets the boot epoch (default 1); SF_INJECT_PAIR seals with
 * a per-member link key instead of KEY_FILE. JOB is owned by SF_INJECT_UID
 * (default: the injector's uid), in incarnation SF_INJECT_INCARNATION
 * (default 1).
 * usage: sf_peer_inject HOST PORT KEY_FILE FROM DEST MODE [JOB WORLD]
 *        sf_peer_inject HOST PORT KEY_FILE FROM DEST record|playback FILE [EPOCH COUNT]
 *        sf_peer_inject HOST PORT KEY_FILE FROM DEST capture JOB ID RANK NODE TERM
 *        sf_peer_inject HOST PORT KEY_FILE FROM DEST unowned JOB WORLD TERM
 *        sf_peer_inject HOST PORT KEY_FILE FROM DEST catchup|catchupdone VALUE TERM
 *        sf_peer_inject HOST PORT KEY_FILE FROM DEST live JOB WORLD STAGES TERM KIND
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

static void heartbeat_at(const sfd_peer_key *key, uint32_t from, uint32_t dest, uint64_t epoch,
                         uint64_t seq, uint64_t term, uint8_t **frame, size_t *len)
{
    Stagefrontier__Heartbeat hb = STAGEFRONTIER__HEARTBEAT__INIT;
    hb.node_id = from;
    hb.term = term;
    uint8_t *p;
    size_t n;
    sfd_peer_pack(&hb.base, &p, &n);
    sfd_peer_msg m = {.from = from,
                      .dest = dest,
                      .epoch = epoch,
                      .seq = seq,
                      .term = term,
                      .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__HEARTBEAT,
                      .payload = p,
                      .payload_len = n};
    if (sfd_peer_seal(key, &m, frame, len) < 0)
        exit(1);
    free(p);
}

static void heartbeat_frame(const sfd_peer_key *key, uint32_t from, uint32_t dest, uint64_t epoch,
                            uint8_t **frame, size_t *len)
{
    heartbeat_at(key, from, dest, epoch, 1, 0, frame, len);
}

static void record(int fd, const sfd_peer_key *key, uint32_t from, uint32_t dest, const char *path,
                   uint64_t epoch, unsigned count)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    for (unsigned i = 1; i <= count; i++) {
        uint8_t *frame;
        size_t len;
        heartbeat_at(key, from, dest, epoch, i, 0, &frame, &len);
        put(fd, frame, len);
        if (fwrite(frame, 1, len, f) != len)
            exit(1);
        free(frame);
    }
    fclose(f);
}

static void playback(int fd, const char *path)
{
    uint8_t buf[65536];
    FILE *f = fopen(path, "rb");
    size_t n;
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        put(fd, buf, n);
    fclose(f);
}

/* The key JOB goes by: its owner and incarnation from the environment. */
static void job_key(const char *job, sfd_window_key *ret)
{
    const char *uid = getenv("SF_INJECT_UID"), *inc = getenv("SF_INJECT_INCARNATION");
    *ret = (sfd_window_key){.uid = uid ? (uint32_t)strtoul(uid, NULL, 10) : (uint32_t)getuid(),
                            .incarnation = inc ? (uint32_t)strtoul(inc, NULL, 10) : 1};
    snprintf(ret->job, sizeof ret->job, "%s", job);
}

/* A summary of JOB window 0 at `term`: of one rank, with a data wait that
 * would show in any report it reached; without its owner when `unowned`. */
static void summary_at(const sfd_peer_key *key, uint32_t from, uint32_t dest, uint64_t epoch,
                       const char *job, uint32_t world, uint64_t term, bool unowned,
                       uint8_t **frame, size_t *len)
{
    sf_schema sc;
    sf_schema_init_default(&sc, 1);
    sf_window_meta meta = {.index = 0, .first_step = 2, .last_step = 11, .world_size = world};
    int64_t d[6] = {900000000, 1, 1, 1, 1, 1}; /* a huge data wait, if it ever counted */
    sf_row row = {.step = 2, .rank = world - 1, .d = d};
    sf_summary *s = NULL;
    sfd_window_key wk;
    job_key(job, &wk);
    uint8_t *p;
    size_t n;
    Stagefrontier__Summary *msg = NULL;
    if (sf_summary_build(&sc, &meta, &row, 1, false, &s) < 0 ||
        sfd_peer_summary_encode(s, &wk, &msg) < 0)
        exit(1);
    if (unowned)
        msg->has_owner_uid = msg->has_incarnation = false;
    if (sfd_peer_pack(&msg->base, &p, &n) < 0)
        exit(1);
    sfd_peer_summary_msg_free(msg);
    sfd_peer_msg m = {.from = from,
                      .dest = dest,
                      .epoch = epoch,
                      .seq = 2,
                      .term = term,
                      .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__SUMMARY,
                      .payload = p,
                      .payload_len = n};
    if (sfd_peer_seal(key, &m, frame, len) < 0)
        exit(1);
    free(p);
    sf_summary_free(s);
    sf_schema_clear(&sc);
}

static void capture_result(const sfd_peer_key *key, uint32_t from, uint32_t dest, uint64_t epoch,
                           char **arg, uint8_t **frame, size_t *len)
{
    sfd_peer_capture_result r = {.id = strtoull(arg[1], NULL, 10),
                                 .rank = (uint32_t)atoi(arg[2]),
                                 .state = STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__DONE,
                                 .node = (uint32_t)atoi(arg[3]),
                                 .first_step = -1,
                                 .last_step = -1};
    sfd_window_key wk;
    job_key(arg[0], &wk);
    snprintf(r.job, sizeof r.job, "%s", wk.job);
    r.uid = wk.uid;
    r.incarnation = wk.incarnation;
    snprintf(r.text, sizeof r.text, "/tmp/forged-trace.json.gz");
    uint8_t *p;
    size_t n;
    if (sfd_peer_capture_result_pack(&r, &p, &n) < 0)
        exit(1);
    sfd_peer_msg m = {.from = from,
                      .dest = dest,
                      .epoch = epoch,
                      .seq = 1,
                      .term = strtoull(arg[4], NULL, 10),
                      .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__CAPTURE_RESULT,
                      .payload = p,
                      .payload_len = n};
    if (sfd_peer_seal(key, &m, frame, len) < 0)
        exit(1);
    free(p);
}

/* SF_INJECT_SEQ, default 1: a later message of the same boot epoch. */
static uint64_t inject_seq(void)
{
    const char *seq = getenv("SF_INJECT_SEQ");
    return seq ? strtoull(seq, NULL, 10) : 1;
}

static void catchup_msg(const sfd_peer_key *key, uint32_t from, uint32_t dest, uint64_t epoch,
                        bool request, char **arg, uint8_t **frame, size_t *len)
{
    Stagefrontier__CatchUpRequest q = STAGEFRONTIER__CATCH_UP_REQUEST__INIT;
    Stagefrontier__CatchUpDone d = STAGEFRONTIER__CATCH_UP_DONE__INIT;
    q.keep_windows = d.reports = (uint32_t)strtoul(arg[0], NULL, 10);
    uint8_t *p;
    size_t n;
    if (sfd_peer_pack(request ? &q.base : &d.base, &p, &n) < 0)
        exit(1);
    sfd_peer_msg m = {.from = from,
                      .dest = dest,
                      .epoch = epoch,
                      .seq = inject_seq(),
                      .term = strtoull(arg[1], NULL, 10),
                      .type = request ? STAGEFRONTIER__PEER_ENVELOPE__TYPE__CATCHUP_REQUEST
                                      : STAGEFRONTIER__PEER_ENVELOPE__TYPE__CATCHUP_DONE,
                      .payload = p,
                      .payload_len = n};
    if (sfd_peer_seal(key, &m, frame, len) < 0)
        exit(1);
    free(p);
}

/* LiveRows of JOB (world WORLD, STAGES stages) at term TERM, one step of
 * rank 0: KIND "shape" under a schema hash no job has, "outside" naming rank
 * WORLD (packed without the encoder's checks, as a forging member would). */
static void live_rows(const sfd_peer_key *key, uint32_t from, uint32_t dest, uint64_t epoch,
                      char **arg, uint8_t **frame, size_t *len)
{
    sfd_window_key wk;
    job_key(arg[0], &wk);
    uint32_t world = (uint32_t)atoi(arg[1]), stages = (uint32_t)atoi(arg[2]);
    bool outside = strcmp(arg[4], "outside") == 0;
    int64_t step = 1000000, d[SF_MAX_STAGES] = {0};
    uint32_t rank = outside ? world : 0;
    Stagefrontier__LiveRows m = STAGEFRONTIER__LIVE_ROWS__INIT;
    m.job_id = wk.job;
    m.has_owner_uid = m.has_incarnation = true;
    m.owner_uid = wk.uid;
    m.incarnation = wk.incarnation;
    m.schema_hash = outside ? 0 : 1; /* no schema hashes to 1 by chance in a test */
    m.world_size = world;
    m.n_stages = stages;
    m.n_steps = 1;
    m.steps = &step;
    m.n_ranks = 1;
    m.ranks = &rank;
    m.n_d = stages;
    m.d = d;
    uint8_t *p;
    size_t n;
    if (stages > SF_MAX_STAGES || sfd_peer_pack(&m.base, &p, &n) < 0)
        exit(1);
    sfd_peer_msg msg = {.from = from,
                        .dest = dest,
                        .epoch = epoch,
                        .seq = inject_seq(),
                        .term = strtoull(arg[3], NULL, 10),
                        .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__LIVE_ROWS,
                        .payload = p,
                        .payload_len = n};
    if (sfd_peer_seal(key, &msg, frame, len) < 0)
        exit(1);
    free(p);
}

/* Whether the daemon closes fd within `seconds`, this end left open. */
static bool closed_within(int fd, int seconds)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char buf[64];
    return poll(&p, 1, seconds * 1000) == 1 && read(fd, buf, sizeof buf) <= 0;
}

int main(int argc, char **argv)
{
    if (argc < 7)
        return 2;
    sfd_peer_key key;
    uint32_t from = (uint32_t)atoi(argv[4]), dest = (uint32_t)atoi(argv[5]);
    /* SF_INJECT_PAIR=SECRET:PUBDIR:SELF seals with the per-member key of the
     * link SELF -> DEST instead of KEY_FILE (a member holding its own key
     * trying to pass as another). */
    const char *pair = getenv("SF_INJECT_PAIR");
    if (pair != NULL) {
        char buf[8192], *dir, *self;
        snprintf(buf, sizeof buf, "%s", pair);
        if ((dir = strchr(buf, ':')) == NULL || (self = strchr(dir + 1, ':')) == NULL)
            return 2;
        *dir++ = '\0';
        *self++ = '\0';
        sfd_peer_key rx;
        if (sfd_peer_pair_keys(buf, dir, (uint32_t)atoi(self), dest, &key, &rx) < 0) {
            fprintf(stderr, "cannot derive the pair key\n");
            return 1;
        }
    } else if (sfd_peer_key_load(argv[3], &key) < 0) {
        fprintf(stderr, "cannot load key\n");
        return 1;
    }
    const char *mode = argv[6];
    /* The sender's boot epoch; each run that must be fresh names its own. */
    const char *e = getenv("SF_INJECT_EPOCH");
    uint64_t epoch = e ? strtoull(e, NULL, 10) : 1;
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
        summary_at(&key, from, dest, epoch + 1, argv[7], (uint32_t)atoi(argv[8]), 0, false, &frame,
                   &len);
        put(fd, frame, len);
    } else if (strcmp(mode, "unowned") == 0 && argc >= 10) {
        summary_at(&key, from, dest, epoch, argv[7], (uint32_t)atoi(argv[8]),
                   strtoull(argv[9], NULL, 10), true, &frame, &len);
        put(fd, frame, len);
    } else if (strcmp(mode, "term") == 0) {
        heartbeat_at(&key, from, dest, epoch, 1, UINT64_MAX, &frame, &len);
        put(fd, frame, len);
    } else if (strcmp(mode, "epoch") == 0) {
        heartbeat_at(&key, from, dest, UINT64_MAX, 1, 0, &frame, &len);
        put(fd, frame, len);
    } else if (strcmp(mode, "record") == 0 && argc >= 10) {
        record(fd, &key, from, dest, argv[7], strtoull(argv[8], NULL, 10), (unsigned)atoi(argv[9]));
    } else if (strcmp(mode, "playback") == 0 && argc >= 8) {
        playback(fd, argv[7]);
    } else if (strcmp(mode, "capture") == 0 && argc >= 12) {
        capture_result(&key, from, dest, epoch, argv + 7, &frame, &len);
        put(fd, frame, len);
    } else if ((strcmp(mode, "catchup") == 0 || strcmp(mode, "catchupdone") == 0) && argc >= 9) {
        catchup_msg(&key, from, dest, epoch, strcmp(mode, "catchup") == 0, argv + 7, &frame, &len);
        put(fd, frame, len);
    } else if (strcmp(mode, "live") == 0 && argc >= 12) {
        live_rows(&key, from, dest, epoch, argv + 7, &frame, &len);
        put(fd, frame, len);
    } else if (strcmp(mode, "hold") == 0) {
        const char *hold = getenv("SF_INJECT_HOLD_S");
        heartbeat_at(&key, from, dest, epoch, inject_seq(), 0, &frame, &len);
        put(fd, frame, len);
        free(frame);
        puts(closed_within(fd, hold ? atoi(hold) : 10) ? "closed" : "open");
        close(fd);
        return 0;
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

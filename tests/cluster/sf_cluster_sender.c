/*
 * Test sender for the cluster tests: plays a range of ranks of one job into
 * one sfd over its ingest socket (one SOCK_SEQPACKET connection per rank,
 * a hello, then one batch per step), with deterministic durations, and
 * writes the same records as wide CSV for `sfctl replay`.
 *
 * usage: sf_cluster_sender SOCKET JOB WORLD FIRST_RANK LAST_RANK STEPS SEED CSV_OUT
 *        [SLOW_RANK] [GATE_FILE|-] [COMM_RANK] [PP|tp=T]
 * With GATE_FILE, it waits before each step until the file holds a number
 * greater than or equal to that step (the test paces it without sleeps).
 * With COMM_RANK, stage SYNC is a synchronizing stage and every record
 * carries its arrival and issue marks: every rank issues its collective
 * 20..80 us after it arrives, COMM_RANK 3 ms after (none when COMM_RANK is
 * not a rank), and every rank leaves 0.5 ms after the last issue, so the
 * stage holds the wait (no CSV row: replay has no marks).
 * With PP >= 2 after COMM_RANK, a pipeline x data-parallel job: rank r is
 * pipeline stage r / (WORLD / PP) and data-parallel replica r mod (WORLD /
 * PP), declared in its hello; pipeline stage p does p x 6 ms more forward
 * work by its role, SLOW_RANK's backward (stage SYNC) is 8 ms longer
 * instead of its data wait, each pipeline stage's ranks leave SYNC
 * together (their data-parallel all-reduce) 0.5 ms after the last of them
 * arrived, and no record carries an issue mark.
 * With tp=T in place of PP, a tensor x data-parallel job: rank r is tensor
 * rank r / (WORLD / T) and data-parallel replica r mod (WORLD / T), so that
 * a tp group (the ranks of one replica) spans the senders of consecutive
 * ranges; stage SYNC spans the tp group (sync_groups in the hello) and
 * holds TP_LAYERS all-reduces, each left by the group's members together
 * when the last arrives; SLOW_RANK's second layer is 6 ms longer, and its
 * first tp peer's last layer 1 ms longer (so the victim is the last to
 * reach the stage's last sync point). Every record carries its arrival at
 * the last sync point and its accumulated wait over the TP_LAYERS, and no
 * issue mark.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <unistd.h>

#include <stagefrontier/accounting.h>

#include "ingest.pb-c.h"

#define S 6
#define SYNC 2 /* the synchronizing stage of COMM_RANK runs */
#define COMM_LAG_NS 3000000

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdu;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53u;
    x ^= x >> 33;
    return x;
}

static uint32_t pipe_stages, pipe_dp; /* PP and WORLD / PP; 0: no pipeline */
static uint32_t tp_size, tp_dp;       /* T and WORLD / T; 0: no tensor parallelism */
#define TP_LAYERS 4

static int64_t duration(uint64_t seed, int64_t step, uint32_t rank, uint32_t s, uint32_t slow)
{
    int64_t d = 200000 +
                (int64_t)(mix(seed ^ ((uint64_t)step << 24) ^ ((uint64_t)rank << 8) ^ s) % 3000000);
    if (pipe_stages) {
        d += s == 1 ? 6000000 * (int64_t)(rank / pipe_dp) : 0;
        d += rank == slow && s == SYNC ? 8000000 : 0;
    } else if (tp_size == 0 && rank == slow && s == 0) {
        d += 4000000;
    }
    return d;
}

static int64_t issue_lag(uint64_t seed, int64_t step, uint32_t rank, uint32_t comm)
{
    if (rank == comm)
        return COMM_LAG_NS;
    return 20000 + (int64_t)(mix(seed ^ 0x5eedu ^ ((uint64_t)step << 24) ^ rank) % 60000);
}

/* Where every rank leaves the synchronizing stage, from its start: 0.5 ms
 * after the last rank of the world issued its collective. Every sender
 * computes the same from the seed. */
static int64_t sync_end(uint64_t seed, int64_t step, uint32_t world, uint32_t slow, uint32_t comm)
{
    int64_t end = 0;
    for (uint32_t r = 0; r < world; r++) {
        if (pipe_stages) { /* the data-parallel all-reduce of one pipeline stage */
            int64_t own = duration(seed, step, r, SYNC, slow);
            end = r / pipe_dp == comm / pipe_dp && own > end ? own : end;
            continue;
        }
        int64_t issued = duration(seed, step, r, SYNC, slow) + issue_lag(seed, step, r, comm);
        end = issued > end ? issued : end;
    }
    return end + 500000;
}

/* One layer's compute on a tensor-parallel rank. */
static int64_t tp_layer(uint64_t seed, int64_t step, uint32_t rank, uint32_t l, uint32_t slow)
{
    int64_t c = 1000000 +
                (int64_t)(mix(seed ^ 0x7e17u ^ ((uint64_t)step << 24) ^ ((uint64_t)rank << 8) ^ l) %
                          500000);
    uint32_t peer = slow < tp_dp * tp_size ? (slow + tp_dp) % (tp_dp * tp_size) : UINT32_MAX;
    c += rank == slow && l == 1 ? 6000000 : 0;
    c += rank == peer && l == TP_LAYERS - 1 ? 1000000 : 0;
    return c;
}

/* Rank's tensor-parallel stage: its arrival at the last sync point, its
 * accumulated wait over the TP_LAYERS all-reduces of its group, and the
 * stage's end (0.2 ms after the last all-reduce), all from the stage's
 * start. Every member's sender computes the same from the seed. */
static void tp_stage(uint64_t seed, int64_t step, uint32_t rank, uint32_t slow, int64_t *ret_own,
                     int64_t *ret_wait, int64_t *ret_end)
{
    uint32_t g = rank % tp_dp;
    int64_t cur = 0, wait = 0, arrive = 0;
    for (uint32_t l = 0; l < TP_LAYERS; l++) {
        int64_t exit = 0;
        for (uint32_t q = 0; q < tp_size; q++) {
            int64_t a = cur + tp_layer(seed, step, g + q * tp_dp, l, slow);
            exit = a > exit ? a : exit;
            arrive = g + q * tp_dp == rank ? a : arrive;
        }
        wait += exit - arrive;
        cur = exit;
    }
    *ret_own = arrive;
    *ret_wait = wait;
    *ret_end = cur + 200000;
}

static int send_msg(int fd, const Stagefrontier__ClientMessage *m)
{
    uint8_t buf[65536];
    size_t n = stagefrontier__client_message__get_packed_size(m);
    if (n > sizeof buf)
        return -EMSGSIZE;
    stagefrontier__client_message__pack(m, buf);
    for (;;) {
        if (send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n)
            return 0;
        if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
            return -errno;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, 100);
    }
}

static int open_rank(const char *path, const char *job, uint32_t world, uint32_t rank,
                     const sf_schema *sc, const sf_schema *recorded, bool comm)
{
    static uint32_t sync_stage = SYNC, sync_group = 2; /* tp */
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        exit(1);
    }
    Stagefrontier__Hello h = STAGEFRONTIER__HELLO__INIT;
    h.protocol_version = 1;
    h.job_id = (char *)job;
    h.rank = rank;
    h.world_size = world;
    h.n_stage_names = S;
    h.stage_names = (char **)recorded->names; /* unsplit: sfd splits the sync stage */
    h.schema_hash = sc->hash;
    h.has_schema_version = true;
    h.schema_version = sc->version;
    h.has_pid = true;
    h.pid = (uint32_t)getpid();
    if (comm) {
        h.n_sync_stages = 1;
        h.sync_stages = &sync_stage;
    }
    if (tp_size) {
        h.n_sync_groups = 1;
        h.sync_groups = &sync_group;
    }
    Stagefrontier__Parallel par = STAGEFRONTIER__PARALLEL__INIT;
    Stagefrontier__ParallelCoord pp = STAGEFRONTIER__PARALLEL_COORD__INIT;
    Stagefrontier__ParallelCoord dp = STAGEFRONTIER__PARALLEL_COORD__INIT;
    Stagefrontier__ParallelCoord tp = STAGEFRONTIER__PARALLEL_COORD__INIT;
    if (pipe_stages) {
        pp.index = rank / pipe_dp;
        pp.size = pipe_stages;
        dp.index = rank % pipe_dp;
        dp.size = pipe_dp;
        par.pp = &pp;
        par.dp = &dp;
        h.parallel = &par;
    }
    if (tp_size) {
        tp.index = rank / tp_dp;
        tp.size = tp_size;
        dp.index = rank % tp_dp;
        dp.size = tp_dp;
        par.tp = &tp;
        par.dp = &dp;
        h.parallel = &par;
    }
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
    m.hello = &h;
    if (send_msg(fd, &m) < 0)
        exit(1);
    return fd;
}

static void wait_gate(const char *gate, int64_t step)
{
    for (;;) {
        FILE *f = fopen(gate, "r");
        long long v = -1;
        if (f != NULL) {
            if (fscanf(f, "%lld", &v) != 1)
                v = -1;
            fclose(f);
        }
        if (v >= step)
            return;
        poll(NULL, 0, 20); /* the gate file is the test's pacing signal */
    }
}

int main(int argc, char **argv)
{
    if (argc < 9) {
        fprintf(stderr, "usage: %s SOCKET JOB WORLD FIRST LAST STEPS SEED CSV [SLOW] [GATE]\n",
                argv[0]);
        return 2;
    }
    const char *path = argv[1], *job = argv[2];
    uint32_t world = (uint32_t)atoi(argv[3]), first = (uint32_t)atoi(argv[4]);
    uint32_t last = (uint32_t)atoi(argv[5]);
    int64_t steps = atoll(argv[6]);
    uint64_t seed = strtoull(argv[7], NULL, 10);
    uint32_t slow = argc > 9 ? (uint32_t)atoi(argv[9]) : UINT32_MAX;
    const char *gate = argc > 10 && strcmp(argv[10], "-") != 0 ? argv[10] : NULL;
    bool comm = argc > 11;
    uint32_t comm_rank = comm ? (uint32_t)strtoul(argv[11], NULL, 10) : UINT32_MAX;
    if (argc > 12 && strncmp(argv[12], "tp=", 3) == 0) {
        tp_size = (uint32_t)strtoul(argv[12] + 3, NULL, 10);
        if (tp_size < 2 || world % tp_size != 0)
            return 2;
        tp_dp = world / tp_size;
    } else if (argc > 12) {
        pipe_stages = (uint32_t)strtoul(argv[12], NULL, 10);
        if (pipe_stages < 2 || world % pipe_stages != 0)
            return 2;
        pipe_dp = world / pipe_stages;
    }
    sf_schema sc, def;
    if (sf_schema_init_default(&def, 1) < 0 ||
        sf_schema_init_sync(&sc, 1, S, (const char *const *)def.names, NULL, 1,
                            comm ? UINT64_C(1) << SYNC : 0) < 0)
        return 1;
    FILE *csv = fopen(argv[8], "w");
    if (csv == NULL)
        return 1;
    int fds[1024];
    uint32_t n = last - first + 1;
    if (n > 1024)
        return 2;
    for (uint32_t i = 0; i < n; i++)
        fds[i] = open_rank(path, job, world, first + i, &sc, &def, comm);
    for (int64_t t = 0; t < steps; t++) {
        if (gate != NULL)
            wait_gate(gate, t);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t rank = first + i;
            int64_t d[S];
            fprintf(csv, "%lld,%u", (long long)t, rank);
            for (uint32_t s = 0; s < S; s++) {
                d[s] = duration(seed, t, rank, s, slow);
                fprintf(csv, ",%lld.%09lld", (long long)(d[s] / 1000000000),
                        (long long)(d[s] % 1000000000));
            }
            fputc('\n', csv);
            Stagefrontier__StepRecord rec = STAGEFRONTIER__STEP_RECORD__INIT, *rp = &rec;
            rec.step = t;
            rec.n_durations_ns = S;
            rec.durations_ns = d;
            Stagefrontier__Arrival arr = STAGEFRONTIER__ARRIVAL__INIT, *ap = &arr;
            if (comm && tp_size) {
                int64_t own, wait, end;
                tp_stage(seed, t, rank, slow, &own, &wait, &end);
                arr.stage = SYNC;
                arr.own_ns = own;
                arr.has_wait_ns = arr.has_waits = true;
                arr.wait_ns = wait;
                arr.waits = TP_LAYERS;
                d[SYNC] = end;
                rec.n_arrivals = 1;
                rec.arrivals = &ap;
            } else if (comm) {
                arr.stage = SYNC;
                arr.own_ns = d[SYNC];
                arr.has_issue_ns = pipe_stages == 0;
                arr.issue_ns = d[SYNC] + issue_lag(seed, t, rank, comm_rank);
                /* in a pipeline, comm_rank's place is taken by this rank:
                 * its own stage's all-reduce */
                d[SYNC] = sync_end(seed, t, world, slow, pipe_stages ? rank : comm_rank);
                rec.n_arrivals = 1;
                rec.arrivals = &ap;
            }
            Stagefrontier__RecordBatch b = STAGEFRONTIER__RECORD_BATCH__INIT;
            b.n_records = 1;
            b.records = &rp;
            b.schema_hash = sc.hash;
            Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
            m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
            m.batch = &b;
            /* A killed daemon is part of some tests: its ranks' records
             * are lost, like a real client's drops, and the sender goes on. */
            if (fds[i] >= 0 && send_msg(fds[i], &m) < 0) {
                close(fds[i]);
                fds[i] = -1;
            }
        }
    }
    fclose(csv);
    /* Hold the connections until told to go, so no window closes early. */
    char c;
    if (read(0, &c, 1) < 0)
        return 1;
    for (uint32_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    sf_schema_clear(&sc);
    sf_schema_clear(&def);
    return 0;
}

/*
 * Test and benchmark sender for sfd's ingest socket, built on protobuf-c the
 * way a client frames its messages. Normal mode streams deterministic step
 * records like a client (non-blocking sends, drops counted, reconnect with
 * hello generation); hostile modes send one kind of bad input and report
 * whether the daemon closed the connection. Never part of the product.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ingest.pb-c.h"
#include "stagefrontier/accounting.h"

struct opts {
    const char *socket, *job, *mode, *role;
    const char *gpu;      /* NULL: not sent */
    const char *parallel; /* NULL: no coordinates; raw, unchecked (hostile) */
    int64_t local_rank;   /* -1: not sent */
    uint32_t rank, world, batch, acc, storm, hold_ms;
    uint32_t generation; /* > 0: hellos as a process that connected before */
    int64_t pause_every;
    double rate; /* records/s, 0: as fast as possible */
    int64_t start, steps, step_us, skip_step, violation_step, fake_drop_step;
    int64_t slow_rank, slow_stage, slow_ns, slow_from, slow_until, size;
    uint32_t stages;     /* 0: the default schema */
    uint64_t drop_total; /* a drop notice on the first batch (hostile totals) */
    int64_t drop_first, drop_last;
    bool distinct_jobs; /* storm: each connection its own job id */
    bool bench;
};

struct sender {
    struct opts o;
    sf_schema schema;
    int fd;
    uint32_t generation;
    int64_t last_sent; /* last step handed to the daemon */
    uint64_t sent, dropped, reconnects;
    int64_t drop_first, drop_last; /* pending drop range, -1: none */
    uint64_t extra_drops;
    bool blocking;         /* memflood: every record delivered */
    uint32_t *sync_groups; /* the sync hello's groups (hostile modes), or NULL */
    size_t n_sync_groups;
    char job_buf[160];
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int send_msg(int fd, const Stagefrontier__ClientMessage *m, bool dontwait)
{
    size_t len = stagefrontier__client_message__get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return -ENOMEM;
    stagefrontier__client_message__pack(m, buf);
    ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0));
    free(buf);
    return w == (ssize_t)len ? 0 : -errno;
}

/* --parallel "pp=1/2,dp=0/2,schedule=2,virtual=4" as sent, unchecked, so
 * that a test can send what the client's parser would refuse. */
static Stagefrontier__Parallel *raw_parallel(const char *text)
{
    static Stagefrontier__Parallel par;
    static Stagefrontier__ParallelCoord coord[5];
    static const char *const names[5] = {"pp", "tp", "dp", "cp", "ep"};
    Stagefrontier__ParallelCoord **slot[5] = {&par.pp, &par.tp, &par.dp, &par.cp, &par.ep};
    stagefrontier__parallel__init(&par);
    for (const char *p = text; p != NULL && *p != '\0';) {
        unsigned a = 0, b = 0;
        for (int d = 0; d < 5; d++)
            if (strncmp(p, names[d], 2) == 0 && p[2] == '=' &&
                sscanf(p + 3, "%u/%u", &a, &b) == 2) {
                stagefrontier__parallel_coord__init(&coord[d]);
                coord[d].index = a, coord[d].size = b;
                *slot[d] = &coord[d];
            }
        if (sscanf(p, "schedule=%u", &a) == 1)
            par.has_schedule = true, par.schedule = (Stagefrontier__Parallel__Schedule)a;
        if (sscanf(p, "virtual=%u", &a) == 1)
            par.has_virtual_stages = true, par.virtual_stages = a;
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    return &par;
}

static void fill_hello(const struct sender *s, Stagefrontier__Hello *h, uint32_t world,
                       uint64_t hash)
{
    stagefrontier__hello__init(h);
    h->protocol_version = 1;
    h->job_id = (char *)s->o.job;
    h->rank = s->o.rank;
    h->world_size = world;
    h->has_pid = true;
    h->pid = (uint32_t)getpid();
    h->host = (char *)"testhost";
    h->n_stage_names = s->schema.n_stages;
    h->stage_names = (char **)s->schema.names;
    h->schema_hash = hash;
    h->has_schema_version = true;
    h->schema_version = s->schema.version;
    h->has_accumulation = true;
    h->accumulation = s->schema.accumulation;
    h->role = (char *)s->o.role;
    if (s->o.local_rank >= 0)
        h->has_local_rank = true, h->local_rank = (uint32_t)s->o.local_rank;
    h->gpu = (char *)s->o.gpu;
    if (s->o.parallel != NULL)
        h->parallel = raw_parallel(s->o.parallel);
    if (s->generation > 0) {
        h->has_connection_generation = true;
        h->connection_generation = s->generation;
        h->has_last_sent_step = true;
        h->last_sent_step = s->last_sent;
    }
}

static int send_hello(struct sender *s, int fd, uint32_t world, uint64_t hash)
{
    Stagefrontier__Hello h;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    fill_hello(s, &h, world, hash);
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
    m.hello = &h;
    return send_msg(fd, &m, false);
}

/* Deterministic durations: a base per stage, a small per-rank/step jitter,
 * and the injected slow stage on one rank. */
static void durations(const struct sender *s, int64_t step, int64_t *d)
{
    uint32_t n = s->schema.n_stages;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)step * 2654435761u ^ (uint64_t)(s->o.rank + 1) * 40503u ^ i * 97u;
        d[i] = 1000000 + (int64_t)(i + 1) * 500000 + (int64_t)(x % 100000);
    }
    d[n - 1] = 100000; /* small residual */
    if ((int64_t)s->o.rank == s->o.slow_rank && s->o.slow_stage >= 0 &&
        s->o.slow_stage < (int64_t)n - 1 && step >= s->o.slow_from &&
        (s->o.slow_until <= 0 || step < s->o.slow_until))
        d[s->o.slow_stage] += s->o.slow_ns;
}

static int do_connect(struct sender *s)
{
    int fd = connect_to(s->o.socket);
    if (fd < 0)
        return fd;
    int r = send_hello(s, fd, s->o.world, s->schema.hash);
    if (r < 0) {
        close(fd);
        return r;
    }
    s->fd = fd;
    return 0;
}

/* Sends one batch of steps [first, first + n); on failure the records count
 * as dropped and the connection is dropped for a later reconnect. */
static void send_batch(struct sender *s, int64_t first, uint32_t n)
{
    uint32_t S = s->schema.n_stages;
    Stagefrontier__StepRecord recs[1024], *ptrs[1024];
    int64_t d[1024][SF_MAX_STAGES];
    Stagefrontier__EventSample ev[1024];
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        int64_t step = first + i;
        if (step == s->o.skip_step)
            continue;
        stagefrontier__step_record__init(&recs[k]);
        durations(s, step, d[k]);
        recs[k].step = step;
        recs[k].n_durations_ns = S;
        recs[k].durations_ns = d[k];
        int64_t wall = 0;
        for (uint32_t j = 0; j < S; j++)
            wall += d[k][j];
        recs[k].has_step_wall_ns = true;
        recs[k].step_wall_ns = wall;
        if (step == s->o.violation_step) {
            recs[k].has_violations = true;
            recs[k].violations = 2;
        }
        stagefrontier__event_sample__init(&ev[k]);
        ev[k].state = STAGEFRONTIER__EVENT_SAMPLE__STATE__NONE;
        recs[k].event = &ev[k];
        ptrs[k] = &recs[k];
        k++;
    }
    if (k == 0)
        return;
    if (first <= s->o.fake_drop_step && s->o.fake_drop_step < first + n) {
        /* pretend the client lost one record of this range earlier */
        s->extra_drops++;
        s->drop_first = s->drop_first < 0 ? s->o.fake_drop_step : s->drop_first;
        s->drop_last = s->o.fake_drop_step;
    }
    if (s->fd < 0 && do_connect(s) == 0)
        s->reconnects += s->generation > 0;
    Stagefrontier__RecordBatch b = STAGEFRONTIER__RECORD_BATCH__INIT;
    b.n_records = k;
    b.records = ptrs;
    b.schema_hash = s->schema.hash;
    b.has_dropped_total = true;
    b.dropped_total = s->dropped + s->extra_drops;
    if (s->drop_first >= 0) {
        b.has_dropped_first_step = b.has_dropped_last_step = true;
        b.dropped_first_step = s->drop_first;
        b.dropped_last_step = s->drop_last;
    }
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
    m.batch = &b;
    int r = s->fd >= 0 ? send_msg(s->fd, &m, !s->blocking) : -ENOTCONN;
    if (r == 0) {
        s->sent += k;
        s->last_sent = first + n - 1;
        s->drop_first = s->drop_last = -1;
        return;
    }
    s->dropped += k;
    if (s->drop_first < 0)
        s->drop_first = first;
    s->drop_last = first + n - 1;
    if (r != -EAGAIN && s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
        s->generation++;
    }
}

/* Tells the test driver we are in position, then waits for it to close stdin. */
static void hold_until_eof(const char *what)
{
    char b[64];
    printf("%s\n", what);
    fflush(stdout);
    while (read(STDIN_FILENO, b, sizeof(b)) > 0)
        ;
}

/* Waits until `at` seconds after t0 (absolute pacing, no drift). */
static void pace(int64_t t0, double at)
{
    int64_t due = t0 + (int64_t)(at * 1e9);
    struct timespec ts = {due / 1000000000, due % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* Test-driven phases: report the step reached, then wait for a line (or EOF). */
static void wait_line(int64_t step)
{
    char b;
    printf("paused %lld\n", (long long)step);
    fflush(stdout);
    while (read(STDIN_FILENO, &b, 1) == 1 && b != '\n')
        ;
}

static int run_normal(struct sender *s)
{
    s->fd = -1;
    s->drop_first = s->drop_last = -1;
    if (s->o.drop_total > 0 || s->o.drop_first >= 0) {
        /* a notice of drops the daemon must bound, sent with the first batch */
        s->extra_drops = s->o.drop_total;
        s->drop_first = s->o.drop_first;
        s->drop_last = s->o.drop_last;
    }
    s->last_sent = s->o.start - 1;
    if (do_connect(s) < 0) {
        s->generation = 1; /* daemon absent: records drop until it appears */
    }
    int64_t t0 = now_ns();
    int64_t end = s->o.start + s->o.steps;
    for (int64_t step = s->o.start; step < end; step += s->o.batch) {
        uint32_t n = (uint32_t)(end - step < s->o.batch ? end - step : s->o.batch);
        if (s->o.step_us > 0)
            usleep((useconds_t)(s->o.step_us * n));
        if (s->o.rate > 0)
            pace(t0, (double)(step - s->o.start) / s->o.rate);
        if (s->o.pause_every > 0 && step > s->o.start &&
            (step - s->o.start) % s->o.pause_every == 0)
            wait_line(step);
        send_batch(s, step, n);
    }
    int64_t t1 = now_ns();
    if (s->o.hold_ms > 0)
        hold_until_eof("holding");
    if (s->fd >= 0)
        close(s->fd);
    printf("steps=%lld sent=%llu dropped=%llu reconnects=%llu seconds=%.6f\n",
           (long long)s->o.steps, (unsigned long long)s->sent, (unsigned long long)s->dropped,
           (unsigned long long)s->reconnects, (double)(t1 - t0) / 1e9);
    return 0;
}

/* ---- --mode capture-peer: a scripted client of the control channel ---- */

static int send_reply(int fd, uint64_t id, const char *state, const char *path)
{
    static const struct {
        const char *name;
        int state;
    } states[] = {
        {"accepted", STAGEFRONTIER__CAPTURE_REPLY__STATE__ACCEPTED},
        {"unsupported", STAGEFRONTIER__CAPTURE_REPLY__STATE__UNSUPPORTED},
        {"busy", STAGEFRONTIER__CAPTURE_REPLY__STATE__BUSY},
        {"done", STAGEFRONTIER__CAPTURE_REPLY__STATE__DONE},
        {"failed", STAGEFRONTIER__CAPTURE_REPLY__STATE__FAILED},
        {"bogus", 99},
    };
    Stagefrontier__CaptureReply r = STAGEFRONTIER__CAPTURE_REPLY__INIT;
    r.id = id;
    r.state = STAGEFRONTIER__CAPTURE_REPLY__STATE__FAILED;
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
        if (!strcmp(states[i].name, state))
            r.state = (Stagefrontier__CaptureReply__State)states[i].state;
    if (path != NULL && path[0] != '\0')
        r.path = (char *)path;
    if (r.state == STAGEFRONTIER__CAPTURE_REPLY__STATE__DONE) {
        r.has_first_step = r.has_last_step = true;
        r.first_step = 100;
        r.last_step = 102;
    }
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_CAPTURE_REPLY;
    m.capture_reply = &r;
    return send_msg(fd, &m, false);
}

static int send_heartbeat(int fd, int64_t step, int32_t stage)
{
    Stagefrontier__RankHeartbeat h = STAGEFRONTIER__RANK_HEARTBEAT__INIT;
    h.step = step;
    h.has_stage = h.has_in_step = true;
    h.stage = stage;
    h.in_step = true;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HEARTBEAT;
    m.heartbeat = &h;
    return send_msg(fd, &m, false);
}

/* Waits up to 10 s for one control message and prints it. */
static void recv_request(int fd)
{
    uint8_t buf[512];
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) {
        printf("norequest\n");
        return;
    }
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    Stagefrontier__ControlMessage *m =
        n > 0 ? stagefrontier__control_message__unpack(NULL, (size_t)n, buf) : NULL;
    if (m != NULL && m->body_case == STAGEFRONTIER__CONTROL_MESSAGE__BODY_CAPTURE)
        printf("request %llu %u\n", (unsigned long long)m->capture->id, m->capture->steps);
    else
        printf("badrequest\n");
    if (m != NULL)
        stagefrontier__control_message__free_unpacked(m, NULL);
}

/* Hello and --steps records, then one command per stdin line:
 *   recv | reply ID STATE [PATH] | flood N ID | heartbeat STEP STAGE | records N
 * each answered "ok" (or by recv's line) once done. */
static int run_capture_peer(struct sender *s)
{
    s->last_sent = s->o.start - 1;
    if (do_connect(s) < 0)
        return 1;
    int64_t next = s->o.start;
    for (; next < s->o.start + s->o.steps; next += s->o.batch)
        send_batch(s, next, s->o.batch);
    printf("ready\n");
    fflush(stdout);
    char line[1200], a[1100], b[64];
    while (fgets(line, sizeof(line), stdin) != NULL) {
        unsigned long long id, n;
        long long step;
        int stage;
        a[0] = '\0';
        if (!strncmp(line, "recv", 4)) {
            recv_request(s->fd);
        } else if (sscanf(line, "reply %llu %63s %1099s", &id, b, a) >= 2) {
            printf(send_reply(s->fd, id, b, a) == 0 ? "ok\n" : "sendfail\n");
        } else if (sscanf(line, "flood %llu %llu", &n, &id) == 2) {
            for (unsigned long long i = 0; i < n; i++)
                send_reply(s->fd, id, "done", "/flood");
            printf("ok\n");
        } else if (sscanf(line, "heartbeat %lld %d", &step, &stage) == 2) {
            printf(send_heartbeat(s->fd, step, stage) == 0 ? "ok\n" : "sendfail\n");
        } else if (sscanf(line, "records %llu", &n) == 1) {
            send_batch(s, next, (uint32_t)n);
            next += (int64_t)n;
            printf("ok\n");
        } else {
            printf("what\n");
        }
        fflush(stdout);
    }
    close(s->fd);
    return 0;
}

/* 0 when the daemon closes the connection within 10 s, 3 otherwise. */
static int expect_closed(int fd)
{
    char b[64];
    struct pollfd p = {fd, POLLIN, 0};
    int64_t deadline = now_ns() + INT64_C(10000000000);
    while (now_ns() < deadline) {
        if (poll(&p, 1, 1000) > 0) {
            ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN))
                return 0;
        }
    }
    return 3;
}

/* The hello of a job whose stage 1 is synchronizing, on channel 0 or 1. */
static int send_sync_hello(struct sender *s, int fd, uint32_t channel, sf_schema *split)
{
    static uint32_t sync_ids[1] = {1};
    Stagefrontier__Hello h;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    memset(split, 0, sizeof *split); /* clearing it is safe on failure too */
    if (sf_schema_init_sync(split, 1, s->schema.n_stages, (const char *const *)s->schema.names,
                            NULL, 1, 1u << 1) < 0)
        return -ENOMEM;
    fill_hello(s, &h, s->o.world, split->hash);
    h.n_sync_stages = 1;
    h.sync_stages = sync_ids;
    h.n_sync_groups = s->n_sync_groups;
    h.sync_groups = s->sync_groups;
    h.has_channel = channel != 0;
    h.channel = channel;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
    m.hello = &h;
    return send_msg(fd, &m, false);
}

/* Channel 1, stage 1 synchronizing: NCCL enqueue points for steps start..
 * start+3: past stage 1's end (kept; counted when its record comes), in
 * stage 0 (not synchronizing: counted), two in range; start+3's point again
 * with its kernel starting 1000 ns after that record's explicit arrival;
 * then one beyond any stage's bound (the batch is rejected and the
 * connection closed). With bad_kernel, only one point whose kernel starts
 * before its enqueue (rejected). */
static int send_enqueue_points(struct sender *s, int fd, bool bad_kernel)
{
    sf_schema split;
    int r = send_sync_hello(s, fd, 1, &split);
    int64_t d[SF_MAX_STAGES];
    uint64_t off[6], kernel[6] = {0};
    uint32_t stage[6] = {1, 0, 1, 1, 1, 1};
    int64_t step[6] = {0, 1, 2, 3, 3, 2};
    for (int64_t i = 0; i < 4; i++) {
        durations(s, s->o.start + i, d);
        off[i] = (uint64_t)(i == 0 ? d[1] + 1 : i == 1 ? 5 : i == 2 ? d[1] / 2 : d[1] / 4);
    }
    off[4] = off[3];
    kernel[4] = (uint64_t)(d[1] / 2 + 1000); /* d: step start+3's, as its record's arrival */
    off[5] = (uint64_t)SF_MAX_DURATION_NS + 1;
    int first = 0, n = 6;
    if (bad_kernel) {
        first = 2, n = 3;
        kernel[2] = off[2] - 1;
    }
    for (int i = first; i < n && r == 0; i++) {
        Stagefrontier__NcclBatch b = STAGEFRONTIER__NCCL_BATCH__INIT;
        Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
        b.step = s->o.start + step[i];
        b.comm_name = (char *)"comm";
        b.enclosing_stage = split.names[stage[i] == 1 ? 1 : 0];
        b.has_last_enqueue_ns = true;
        b.last_enqueue_ns = off[i];
        if (kernel[i]) {
            b.has_kernel_start_ns = b.has_kernel_end_ns = true;
            b.kernel_start_ns = kernel[i];
            b.kernel_end_ns = kernel[i] + 5000;
        }
        m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL;
        m.nccl = &b;
        r = send_msg(fd, &m, false);
    }
    sf_schema_clear(&split);
    printf("sent=%d\n", r == 0 ? n - first : 0);
    return r == 0 ? 0 : 2;
}

/* Records start..start+3 (durations d) of that job in one batch; record i
 * carries the arrival arr[i] unless it is NULL. */
static int send_sync_records(struct sender *s, int fd, uint64_t hash, Stagefrontier__Arrival **arr,
                             int64_t (*d)[SF_MAX_STAGES])
{
    Stagefrontier__StepRecord recs[4], *ptrs[4];
    Stagefrontier__RecordBatch b = STAGEFRONTIER__RECORD_BATCH__INIT;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    for (uint32_t i = 0; i < 4; i++) {
        stagefrontier__step_record__init(&recs[i]);
        recs[i].step = s->o.start + i;
        recs[i].n_durations_ns = s->schema.n_stages;
        recs[i].durations_ns = d[i];
        recs[i].n_arrivals = arr[i] != NULL;
        recs[i].arrivals = &arr[i];
        ptrs[i] = &recs[i];
    }
    b.n_records = 4;
    b.records = ptrs;
    b.schema_hash = hash;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
    m.batch = &b;
    return send_msg(fd, &m, false);
}

/* Stage 1 synchronizing: one record whose arrival lies past its stage's
 * end, one with an arrival in stage 0 (not synchronizing), one valid and
 * one without a mark. sfd rejects the first two, counted, and keeps the
 * connection and the others. */
static int send_bad_arrivals(struct sender *s, int fd)
{
    sf_schema split;
    int64_t d[4][SF_MAX_STAGES];
    Stagefrontier__Arrival arr[3];
    Stagefrontier__Arrival *ap[4] = {&arr[0], &arr[1], &arr[2], NULL};
    int r = send_sync_hello(s, fd, 0, &split);
    for (uint32_t i = 0; i < 4; i++)
        durations(s, s->o.start + i, d[i]);
    for (uint32_t i = 0; i < 3; i++)
        stagefrontier__arrival__init(&arr[i]);
    arr[0].stage = 1, arr[0].own_ns = d[0][1] + 1; /* out of range */
    arr[1].stage = 0, arr[1].own_ns = 0;           /* not synchronizing */
    arr[2].stage = 1, arr[2].own_ns = d[2][1] / 2; /* valid */
    if (r == 0)
        r = send_sync_records(s, fd, split.hash, ap, d);
    sf_schema_clear(&split);
    printf("sent=%d\n", r == 0 ? 4 : 0);
    return r == 0 ? 0 : 2;
}

/* Stage 1 synchronizing in the tp group: one record whose accumulated wait
 * lies past its stage's end, one with a wait but no count, one valid with
 * three sync points and one without waits. sfd rejects the first two
 * (sync_wait_out_of_range) and keeps the others. */
static int send_bad_sync_waits(struct sender *s, int fd)
{
    static uint32_t groups[1] = {2};
    sf_schema split;
    int64_t d[4][SF_MAX_STAGES];
    Stagefrontier__Arrival arr[4];
    Stagefrontier__Arrival *ap[4] = {&arr[0], &arr[1], &arr[2], &arr[3]};
    s->sync_groups = groups;
    s->n_sync_groups = 1;
    int r = send_sync_hello(s, fd, 0, &split);
    for (uint32_t i = 0; i < 4; i++) {
        durations(s, s->o.start + i, d[i]);
        stagefrontier__arrival__init(&arr[i]);
        arr[i].stage = 1;
        arr[i].own_ns = d[i][1] / 2;
    }
    arr[0].has_wait_ns = arr[0].has_waits = true;
    arr[0].wait_ns = d[0][1] + 1, arr[0].waits = 2; /* past the stage */
    arr[1].has_wait_ns = true, arr[1].wait_ns = 1;  /* no count */
    arr[2].has_wait_ns = arr[2].has_waits = true;
    arr[2].wait_ns = d[2][1] / 4, arr[2].waits = 3; /* valid */
    if (r == 0)
        r = send_sync_records(s, fd, split.hash, ap, d);
    sf_schema_clear(&split);
    printf("sent=%d\n", r == 0 ? 4 : 0);
    return r == 0 ? 0 : 2;
}

/* A hello whose sync_groups are not one per synchronizing stage (two for
 * one), then one with a group past pp: both refused (sync_group_invalid). */
static int send_bad_sync_groups(struct sender *s, int fd, bool past_pp)
{
    static uint32_t two[2] = {2, 1}, bad[1] = {4};
    sf_schema split;
    s->sync_groups = past_pp ? bad : two;
    s->n_sync_groups = past_pp ? 1 : 2;
    int r = send_sync_hello(s, fd, 0, &split);
    sf_schema_clear(&split);
    printf("sent=0\n");
    return r == 0 ? 0 : 2;
}

/* Channel 0 of the enqueue-point job: steps start..start+3 without arrivals
 * except the last, whose explicit mark wins over its enqueue point. */
static int send_enqueue_records(struct sender *s, int fd)
{
    sf_schema split;
    int64_t d[4][SF_MAX_STAGES];
    Stagefrontier__Arrival arr;
    Stagefrontier__Arrival *ap[4] = {NULL, NULL, NULL, &arr};
    int r = send_sync_hello(s, fd, 0, &split);
    for (uint32_t i = 0; i < 4; i++)
        durations(s, s->o.start + i, d[i]);
    stagefrontier__arrival__init(&arr);
    arr.stage = 1;
    arr.own_ns = d[3][1] / 2;
    if (r == 0)
        r = send_sync_records(s, fd, split.hash, ap, d);
    sf_schema_clear(&split);
    printf("sent=%d\n", r == 0 ? 4 : 0);
    return r == 0 ? 0 : 2;
}

static int run_hostile(struct sender *s)
{
    const char *m = s->o.mode;
    int fd = connect_to(s->o.socket);
    if (fd < 0) {
        fprintf(stderr, "connect: %s\n", strerror(-fd));
        return 2;
    }
    s->fd = fd;
    if (!strcmp(m, "sync_waits") || !strcmp(m, "sync_groups") || !strcmp(m, "sync_group_pp")) {
        int r = !strcmp(m, "sync_waits")    ? send_bad_sync_waits(s, fd)
                : !strcmp(m, "sync_groups") ? send_bad_sync_groups(s, fd, false)
                                            : send_bad_sync_groups(s, fd, true);
        close(fd);
        return r;
    }
    if (!strcmp(m, "arrivals") || !strcmp(m, "enqueue_points") || !strcmp(m, "kernel_bad") ||
        !strcmp(m, "enqueue_records")) {
        int r = !strcmp(m, "arrivals")         ? send_bad_arrivals(s, fd)
                : !strcmp(m, "enqueue_points") ? send_enqueue_points(s, fd, false)
                : !strcmp(m, "kernel_bad")     ? send_enqueue_points(s, fd, true)
                                               : send_enqueue_records(s, fd);
        close(fd);
        return r;
    }
    if (!strcmp(m, "garbage")) {
        uint8_t g[300];
        for (size_t i = 0; i < sizeof(g); i++)
            g[i] = (uint8_t)(i * 37 + 11) | 0x80;
        send(fd, g, sizeof(g), MSG_NOSIGNAL);
    } else if (!strcmp(m, "truncated") || !strcmp(m, "midbatch")) {
        Stagefrontier__Hello h;
        Stagefrontier__ClientMessage msg = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
        /* the batch's parts live as long as msg, which is packed below */
        Stagefrontier__StepRecord r = STAGEFRONTIER__STEP_RECORD__INIT, *rp = &r;
        Stagefrontier__RecordBatch b = STAGEFRONTIER__RECORD_BATCH__INIT;
        int64_t d[SF_MAX_STAGES];
        fill_hello(s, &h, s->o.world, s->schema.hash);
        msg.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
        msg.hello = &h;
        if (!strcmp(m, "midbatch")) {
            send_msg(fd, &msg, false);
            s->o.steps = 8;
            /* half a batch datagram, then the client goes away */
            durations(s, s->o.start, d);
            r.step = s->o.start;
            r.n_durations_ns = s->schema.n_stages;
            r.durations_ns = d;
            b.n_records = 1;
            b.records = &rp;
            b.schema_hash = s->schema.hash;
            msg.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
            msg.batch = &b;
        }
        uint8_t buf[8192];
        size_t len = stagefrontier__client_message__pack(&msg, buf);
        send(fd, buf, len / 2, MSG_NOSIGNAL);
        if (!strcmp(m, "midbatch")) {
            close(fd);
            return 0;
        }
    } else if (!strcmp(m, "oversized")) {
        size_t n = (size_t)s->o.size;
        uint8_t *b = calloc(1, n);
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        free(b);
        if (w < 0) {
            fprintf(stderr, "oversized send: %s\n", strerror(errno));
            return 2;
        }
    } else if (!strcmp(m, "badhash")) {
        send_hello(s, fd, s->o.world, s->schema.hash ^ 0x5a5a);
    } else if (!strcmp(m, "batchhash")) {
        send_hello(s, fd, s->o.world, s->schema.hash);
        s->schema.hash ^= 1;
        s->fd = fd;
        send_batch(s, s->o.start, 1);
    } else if (!strcmp(m, "hello")) {
        /* a plain hello: duplicate rank, world-size conflict, other uid */
        send_hello(s, fd, s->o.world, s->schema.hash);
    } else {
        fprintf(stderr, "unknown mode %s\n", m);
        return 2;
    }
    int r = expect_closed(fd);
    printf("closed=%s\n", r == 0 ? "yes" : "no");
    close(fd);
    return r;
}

/* One process as a whole job: --world connections, one per rank, each sending
 * --steps steps in --batch records, blocking, rank after rank. Then holds
 * them open until stdin closes. Prints the records sent and, per rank, how
 * many connections the daemon closed. */
static int run_memflood(struct sender *s)
{
    uint32_t n = s->o.world;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int *fds = calloc(n, sizeof(int));
    uint32_t refused = 0;
    s->blocking = true;
    for (uint32_t i = 0; i < n; i++) {
        s->o.rank = i;
        fds[i] = connect_to(s->o.socket);
        if (fds[i] < 0 || send_hello(s, fds[i], n, s->schema.hash) < 0)
            refused++;
    }
    int64_t end = s->o.start + s->o.steps;
    for (int64_t step = s->o.start; step < end; step += s->o.batch) {
        uint32_t k = (uint32_t)(end - step < s->o.batch ? end - step : s->o.batch);
        for (uint32_t i = 0; i < n; i++) {
            if (fds[i] < 0)
                continue;
            s->o.rank = i;
            s->fd = fds[i];
            send_batch(s, step, k);
            if (s->fd < 0)
                fds[i] = -1; /* the daemon closed it */
        }
    }
    printf("sent=%llu refused=%u\n", (unsigned long long)s->sent, refused);
    hold_until_eof("ready");
    for (uint32_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    s->fd = -1;
    return 0;
}

/* Opens many connections, each with a hello of its own rank, and holds them.
 * Prints how many the daemon kept open. */
static int run_storm(struct sender *s)
{
    uint32_t n = s->o.storm;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int *fds = calloc(n, sizeof(int));
    uint32_t ok = 0, refused = 0;
    for (uint32_t i = 0; i < n; i++) {
        fds[i] = connect_to(s->o.socket);
        if (fds[i] < 0) {
            refused++;
            continue;
        }
        s->o.rank = i % s->o.world;
        if (s->o.distinct_jobs) {
            snprintf(s->job_buf, sizeof(s->job_buf), "%.100s-%u", s->o.job, i);
            s->o.rank = 0;
        }
        const char *job = s->o.job;
        if (s->o.distinct_jobs)
            s->o.job = s->job_buf;
        send_hello(s, fds[i], s->o.world, s->schema.hash);
        s->o.job = job;
    }
    /* The test checks the daemon's counters, then closes our stdin. */
    hold_until_eof("ready");
    uint32_t closed = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (fds[i] < 0)
            continue;
        char b;
        ssize_t r = recv(fds[i], &b, 1, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN))
            closed++;
        else
            ok++;
        close(fds[i]);
    }
    free(fds);
    printf("storm=%u open=%u closed=%u refused=%u\n", n, ok, closed, refused);
    return 0;
}

static void write_file(const char *dir, const char *name, const uint8_t *b, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f != NULL) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

/* Writes seed frames for the ingest fuzz target into the --job directory. */
static int run_seeds(struct sender *s)
{
    static uint8_t buf[1 << 16];
    Stagefrontier__Hello h;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    const char *dir = s->o.job;
    s->o.job = "seed-job";
    s->o.role = "trainer";
    fill_hello(s, &h, 4, s->schema.hash);
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
    m.hello = &h;
    size_t n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello", buf, n);
    write_file(dir, "hello_truncated", buf, n / 2);
    h.schema_hash ^= 1;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_badhash", buf, n);
    h.schema_hash ^= 1;
    h.run_id = "torch:rdzv-17";
    h.has_restart_count = true;
    h.restart_count = 3;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_run_id", buf, n);
    h.run_id = "bad run id";
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_run_id_bad", buf, n);
    h.run_id = NULL;
    h.has_restart_count = false;
    h.has_local_rank = true;
    h.local_rank = 1;
    h.gpu = "GPU-8d0a6c1e-2b7f-4f53-9d0e-6a1b2c3d4e5f";
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_gpu", buf, n);
    h.gpu = "0,1";
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_gpu_bad", buf, n);
    h.gpu = NULL;
    h.has_local_rank = false;
    /* Parallel coordinates: a 2 x 2 tile, one that does not tile the world,
     * an index out of range and a schedule past the enum. */
    h.parallel = raw_parallel("pp=1/2,dp=0/2,schedule=2");
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_parallel", buf, n);
    h.parallel = raw_parallel("pp=1/2,tp=0/4,dp=0/2,schedule=3,virtual=4");
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_parallel_untiled", buf, n);
    h.parallel = raw_parallel("pp=2/2,dp=0/2");
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_parallel_range", buf, n);
    h.parallel = raw_parallel("pp=0/2,dp=1/2,schedule=9,virtual=0");
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_parallel_schedule", buf, n);
    h.parallel = NULL;

    Stagefrontier__StepRecord r[3], *rp[3];
    int64_t d[3][SF_MAX_STAGES];
    Stagefrontier__EventSample ev = STAGEFRONTIER__EVENT_SAMPLE__INIT;
    ev.state = STAGEFRONTIER__EVENT_SAMPLE__STATE__READY;
    ev.has_cpu_ns = ev.has_gpu_ns = true;
    ev.cpu_ns = 5000;
    ev.gpu_ns = 4000;
    for (int i = 0; i < 3; i++) {
        stagefrontier__step_record__init(&r[i]);
        durations(s, i, d[i]);
        r[i].step = i;
        r[i].n_durations_ns = s->schema.n_stages;
        r[i].durations_ns = d[i];
        r[i].has_violations = i == 1;
        r[i].violations = 1;
        r[i].event = i == 2 ? &ev : NULL;
        rp[i] = &r[i];
    }
    Stagefrontier__RecordBatch b = STAGEFRONTIER__RECORD_BATCH__INIT;
    b.n_records = 3;
    b.records = rp;
    b.schema_hash = s->schema.hash;
    b.has_dropped_total = b.has_dropped_first_step = b.has_dropped_last_step = true;
    b.dropped_total = 2;
    b.dropped_first_step = 0;
    b.dropped_last_step = 1;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
    m.batch = &b;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "batch", buf, n);
    d[0][0] = -5;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "batch_negative", buf, n);
    d[0][0] = 1000;
    /* Arrival points: a hello marking backward synchronizing, and a batch
     * with one arrival in range, one past its stage's end. */
    uint32_t sync_ids[1] = {2};
    h.n_sync_stages = 1;
    h.sync_stages = sync_ids;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
    m.hello = &h;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_sync", buf, n);
    Stagefrontier__Arrival a[2], *ap[2] = {&a[0], &a[1]};
    for (int i = 0; i < 2; i++) {
        stagefrontier__arrival__init(&a[i]);
        a[i].stage = 2;
        a[i].own_ns = i == 0 ? d[i][2] / 2 : d[i][2] + 1;
        r[i].n_arrivals = 1;
        r[i].arrivals = &ap[i];
    }
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
    m.batch = &b;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "batch_arrivals", buf, n);
    /* Synchronizing groups: the hello naming backward's group (tp), one
     * with a group past pp; a batch whose arrivals carry accumulated waits,
     * one in range, one past its stage's end. */
    uint32_t groups[1] = {2};
    h.n_sync_groups = 1;
    h.sync_groups = groups;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
    m.hello = &h;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_sync_groups", buf, n);
    groups[0] = 7;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "hello_sync_groups_bad", buf, n);
    for (int i = 0; i < 2; i++) {
        a[i].own_ns = d[i][2] / 2;
        a[i].has_wait_ns = a[i].has_waits = true;
        a[i].wait_ns = i == 0 ? d[i][2] / 4 : d[i][2] + 1;
        a[i].waits = 4;
    }
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
    m.batch = &b;
    n = stagefrontier__client_message__pack(&m, buf);
    write_file(dir, "batch_sync_waits", buf, n);
    return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option opts[] = {
        {"socket", 1, NULL, 's'},         {"job", 1, NULL, 'j'},
        {"rank", 1, NULL, 'r'},           {"world", 1, NULL, 'w'},
        {"steps", 1, NULL, 'n'},          {"start", 1, NULL, 'S'},
        {"batch", 1, NULL, 'b'},          {"mode", 1, NULL, 'm'},
        {"step-us", 1, NULL, 'u'},        {"skip-step", 1, NULL, 'k'},
        {"violation-step", 1, NULL, 'v'}, {"fake-drop-step", 1, NULL, 'd'},
        {"slow-rank", 1, NULL, 'R'},      {"slow-stage", 1, NULL, 'T'},
        {"slow-ns", 1, NULL, 'N'},        {"size", 1, NULL, 'z'},
        {"storm", 1, NULL, 'x'},          {"hold", 0, NULL, 'H'},
        {"role", 1, NULL, 'o'},           {"accumulation", 1, NULL, 'a'},
        {"pause-every", 1, NULL, 'P'},    {"rate", 1, NULL, 'Q'},
        {"stages", 1, NULL, 'G'},         {"drop-total", 1, NULL, 'D'},
        {"drop-first", 1, NULL, 'F'},     {"drop-last", 1, NULL, 'L'},
        {"distinct-jobs", 0, NULL, 'J'},  {"slow-from", 1, NULL, 'W'},
        {"slow-until", 1, NULL, 'Y'},     {"generation", 1, NULL, 'g'},
        {"local-rank", 1, NULL, 'l'},     {"gpu", 1, NULL, 'U'},
        {"parallel", 1, NULL, 'p'},       {NULL, 0, NULL, 0},
    };
    *o = (struct opts){.job = "job",
                       .mode = "normal",
                       .role = "",
                       .world = 1,
                       .batch = 16,
                       .acc = 1,
                       .steps = 100,
                       .skip_step = -1,
                       .violation_step = -1,
                       .fake_drop_step = -1,
                       .slow_rank = -1,
                       .slow_stage = -1,
                       .size = 0,
                       .drop_first = -1,
                       .drop_last = -1,
                       .local_rank = -1};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        long long v = optarg ? strtoll(optarg, NULL, 10) : 0;
        switch (c) {
        case 's':
            o->socket = optarg;
            break;
        case 'j':
            o->job = optarg;
            break;
        case 'm':
            o->mode = optarg;
            break;
        case 'o':
            o->role = optarg;
            break;
        case 'l':
            o->local_rank = v;
            break;
        case 'U':
            o->gpu = optarg;
            break;
        case 'p':
            o->parallel = optarg;
            break;
        case 'r':
            o->rank = (uint32_t)v;
            break;
        case 'w':
            o->world = (uint32_t)v;
            break;
        case 'n':
            o->steps = v;
            break;
        case 'S':
            o->start = v;
            break;
        case 'b':
            o->batch = v < 1 ? 1 : v > 1024 ? 1024 : (uint32_t)v;
            break;
        case 'u':
            o->step_us = v;
            break;
        case 'k':
            o->skip_step = v;
            break;
        case 'v':
            o->violation_step = v;
            break;
        case 'd':
            o->fake_drop_step = v;
            break;
        case 'R':
            o->slow_rank = v;
            break;
        case 'T':
            o->slow_stage = v;
            break;
        case 'N':
            o->slow_ns = v;
            break;
        case 'z':
            o->size = v;
            break;
        case 'x':
            o->storm = (uint32_t)v;
            break;
        case 'H':
            o->hold_ms = 1;
            break;
        case 'a':
            o->acc = (uint32_t)v;
            break;
        case 'P':
            o->pause_every = v;
            break;
        case 'Q':
            o->rate = strtod(optarg, NULL);
            break;
        case 'G':
            o->stages = (uint32_t)v;
            break;
        case 'D':
            o->drop_total = strtoull(optarg, NULL, 10);
            break;
        case 'F':
            o->drop_first = v;
            break;
        case 'L':
            o->drop_last = v;
            break;
        case 'J':
            o->distinct_jobs = true;
            break;
        case 'W':
            o->slow_from = v;
            break;
        case 'Y':
            o->slow_until = v; /* first step back at the base durations; 0: never */
            break;
        case 'g':
            o->generation = (uint32_t)v;
            break;
        default:
            return -EINVAL;
        }
    }
    return o->socket ? 0 : -EINVAL;
}

/* The default schema, or --stages N stages named st0.. (the last residual). */
static int init_schema(struct sender *s)
{
    if (s->o.stages == 0)
        return sf_schema_init_default(&s->schema, s->o.acc);
    if (s->o.stages < 2 || s->o.stages > SF_MAX_STAGES)
        return -EINVAL;
    static char names[SF_MAX_STAGES][16];
    const char *ptrs[SF_MAX_STAGES];
    for (uint32_t i = 0; i < s->o.stages; i++) {
        snprintf(names[i], sizeof(names[i]), "st%u", i);
        ptrs[i] = names[i];
    }
    return sf_schema_init(&s->schema, 1, s->o.stages, ptrs, NULL, s->o.acc);
}

int main(int argc, char **argv)
{
    struct sender s = {.fd = -1};
    if (parse(argc, argv, &s.o) < 0) {
        fprintf(stderr, "usage: sf_test_sender --socket PATH [--job ID --rank R --world W "
                        "--steps N --mode MODE ...]\n");
        return 2;
    }
    if (init_schema(&s) < 0)
        return 2;
    s.generation = s.o.generation;
    int r;
    if (!strcmp(s.o.mode, "normal"))
        r = run_normal(&s);
    else if (!strcmp(s.o.mode, "seeds"))
        r = run_seeds(&s);
    else if (!strcmp(s.o.mode, "storm"))
        r = run_storm(&s);
    else if (!strcmp(s.o.mode, "memflood"))
        r = run_memflood(&s);
    else if (!strcmp(s.o.mode, "capture-peer"))
        r = run_capture_peer(&s);
    else
        r = run_hostile(&s);
    fflush(stdout);
    sf_schema_clear(&s.schema);
    return r;
}

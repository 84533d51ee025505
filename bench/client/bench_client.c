/*
 * libsfclient hot-path benchmark: ns per stage boundary (a stage's begin and
 * end are two boundaries) and send syscalls per step, with no daemon and with
 * a receiver process that drains the socket; a bare clock_gettime loop runs
 * side by side as the floor, and so does sf_stage_arrive (an arrival mark
 * inside an open synchronizing stage). The draining receiver runs twice:
 * with the liveness thread on (the default, 1 s) and off, so what the
 * heartbeat and the control poll at flush cost shows side by side.
 * Usage: bench_client [steps] [mode]
 * mode: all (default), none (no daemon only), drain (draining receiver only),
 * enqueue (the enqueue points' stores and per-collective reads, steps x 20
 * calls each).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stagefrontier/client.h>

#include "nccl_beacon.h"

#define STAGES_PER_STEP 5

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double bench_clock(long n)
{
    volatile int64_t sink = 0;
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++)
        sink += now_ns();
    (void)sink;
    return (double)(now_ns() - t0) / (double)n;
}

struct result {
    double ns_stage_boundary, ns_step_boundary, syscalls_per_step;
    sf_client_stats st;
};

static struct result run(const char *socket_path, long steps, int heartbeat_ms)
{
    sf_client_options o;
    sf_client_options_init(&o);
    o.heartbeat_ms = heartbeat_ms;
    o.job_id = "bench";
    o.socket_path = socket_path;
    o.rank = 0, o.world_size = 1, o.local_rank = 0;
    sf_client *c = NULL;
    if (sf_client_open(&o, &c) < 0) {
        fprintf(stderr, "open failed\n");
        exit(1);
    }
    struct result r = {0};
    /* Stage boundaries alone: many re-entries inside one step. */
    long pairs = steps * STAGES_PER_STEP;
    sf_step_begin(c, -1);
    int64_t t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        sf_stage_begin(c, (int)(i % STAGES_PER_STEP));
        sf_stage_end(c, (int)(i % STAGES_PER_STEP));
    }
    r.ns_stage_boundary = (double)(now_ns() - t0) / (double)(2 * pairs);
    sf_step_end(c);
    sf_client_flush(c);
    sf_client_stats before;
    sf_client_get_stats(c, &before);
    /* Whole steps: step begin/end (batching and sends included) plus five stages. */
    t0 = now_ns();
    for (long s = 0; s < steps; s++) {
        sf_step_begin(c, -1);
        for (int i = 0; i < STAGES_PER_STEP; i++) {
            sf_stage_begin(c, i);
            sf_stage_end(c, i);
        }
        sf_step_end(c);
    }
    int64_t dt = now_ns() - t0;
    r.ns_step_boundary = (double)dt / (double)(steps * (2 * STAGES_PER_STEP + 2));
    sf_client_get_stats(c, &r.st);
    r.syscalls_per_step = (double)(r.st.send_syscalls - before.send_syscalls) / (double)steps;
    sf_client_close(c);
    return r;
}

/* A client with no daemon whose synchronizing stage (2, backward) is open. */
static sf_client *open_in_sync_stage(void)
{
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "bench";
    o.socket_path = "/nonexistent-stagefrontier-bench/ingest.sock";
    o.rank = 0, o.world_size = 1, o.local_rank = 0;
    const char *sync[] = {"model.backward_cpu_wall"};
    o.sync_stages = sync;
    o.n_sync_stages = 1;
    sf_client *c = NULL;
    if (sf_client_open(&o, &c) < 0) {
        fprintf(stderr, "open failed\n");
        exit(1);
    }
    sf_step_begin(c, -1);
    sf_stage_begin(c, 2);
    return c;
}

/* ns per sf_stage_arrive: marks inside one open synchronizing stage. */
static double bench_arrive(long n)
{
    sf_client *c = open_in_sync_stage();
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++)
        sf_stage_arrive(c);
    double ns = (double)(now_ns() - t0) / (double)n;
    sf_stage_end(c, 2);
    sf_step_end(c);
    sf_client_stats st;
    sf_client_get_stats(c, &st);
    if (st.violations != 0)
        fprintf(stderr, "arrive: %llu violations\n", (unsigned long long)st.violations);
    sf_client_close(c);
    return ns;
}

/* The beacon's stores at a stage begin, on a beacon of the same layout: the
 * stage id alone (release), as before enqueue points, and with the stage's
 * start time before it (relaxed), as now. noinline keeps the loop honest. */
static struct sf_side_beacon local;

__attribute__((noinline)) static void publish_id(int32_t id, int64_t start)
{
    (void)start;
    atomic_store_explicit(&local.stage, id, memory_order_release);
}

__attribute__((noinline)) static void publish_id_and_start(int32_t id, int64_t start)
{
    atomic_store_explicit(&local.stage_start_ns, start, memory_order_relaxed);
    atomic_store_explicit(&local.stage, id, memory_order_release);
}

static double bench_publish(void (*publish)(int32_t, int64_t), long n)
{
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++)
        publish((int32_t)(i & 7), i);
    return (double)(now_ns() - t0) / (double)n;
}

/* Per collective the plugin reads the clock and the beacon's sync point. */
static double bench_enqueue_point(long n, long *ret_points)
{
    long points = 0;
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        int32_t stage;
        int64_t offset;
        points += sf__nccl_current_sync_point(&stage, now_ns(), &offset);
    }
    double ns = (double)(now_ns() - t0) / (double)n;
    *ret_points = points;
    return ns;
}

/* Enqueue points (docs/SIDE_EVIDENCE.md): the beacon's stores at stage begin
 * and the NCCL plugin's per-collective reads, against a bare clock read. */
static int bench_enqueue(long n)
{
    sf_client *c = open_in_sync_stage(); /* open while NCCL enqueues */
    sf__nccl_beacon_lookup();
    if (sf__nccl_beacon() == NULL) {
        fprintf(stderr, "no beacon found in the loaded libsfclient\n");
        return 1;
    }
    long points = 0;
    printf("clock_gettime(CLOCK_MONOTONIC):          %6.2f ns per call\n", bench_clock(n));
    printf("stage begin, stage id only (release):     %6.2f ns per call\n",
           bench_publish(publish_id, n));
    printf("stage begin, start time + id (now):       %6.2f ns per call\n",
           bench_publish(publish_id_and_start, n));
    printf("plugin per collective, clock + sync point: %5.2f ns per call\n",
           bench_enqueue_point(n, &points));
    printf("clock_gettime(CLOCK_MONOTONIC) (again):  %6.2f ns per call\n", bench_clock(n));
    printf("enqueue points found: %ld of %ld\n", points, n);
    sf_stage_end(c, 2);
    sf_step_end(c);
    sf_client_close(c);
    return points == n ? 0 : 1;
}

/* A child that accepts one connection and drains it until EOF. */
static pid_t start_drainer(const char *path)
{
    int l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 4) < 0) {
        perror("listener");
        exit(1);
    }
    pid_t pid = fork();
    if (pid == 0) {
        int cfd = accept(l, NULL, NULL);
        static char buf[1 << 17];
        uint64_t msgs = 0;
        while (cfd >= 0 && recv(cfd, buf, sizeof buf, 0) > 0)
            msgs++;
        _exit(msgs > 0 ? 0 : 1);
    }
    close(l);
    return pid;
}

static void print(const char *name, const struct result *r)
{
    printf("%-16s %10.1f %10.1f %10.4f %10llu %10llu %10llu\n", name, r->ns_stage_boundary,
           r->ns_step_boundary, r->syscalls_per_step, (unsigned long long)r->st.steps,
           (unsigned long long)r->st.records_sent, (unsigned long long)r->st.records_dropped);
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 1000000;
    const char *mode = argc > 2 ? argv[2] : "all";
    if (steps <= 0)
        steps = 1000000;
    if (strcmp(mode, "enqueue") == 0)
        return bench_enqueue(steps * 20);
    char dir[] = "/tmp/sfbench-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char path[108];
    snprintf(path, sizeof path, "%s/ingest.sock", dir);

    printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns per call\n", bench_clock(steps * 4));
    printf("sf_stage_arrive:                %.1f ns per call\n", bench_arrive(steps * 4));
    printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns per call (again)\n", bench_clock(steps * 4));
    printf("%-16s %10s %10s %10s %10s %10s %10s\n", "receiver", "ns/stage", "ns/bound", "sys/step",
           "steps", "sent", "dropped");
    if (strcmp(mode, "drain") != 0) {
        struct result r = run(path, steps, -1); /* nothing listens at path */
        print("none", &r);
    }
    if (strcmp(mode, "none") != 0) {
        for (int hb = 0; hb < 2; hb++) {
            pid_t pid = start_drainer(path);
            struct result r = run(path, steps, hb ? 0 : -1);
            int status;
            waitpid(pid, &status, 0);
            unlink(path);
            print(hb ? "draining,no-hb" : "draining", &r);
        }
    }
    rmdir(dir);
    return 0;
}

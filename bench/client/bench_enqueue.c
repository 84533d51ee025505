/*
 * The cost of enqueue points (docs/SIDE_EVIDENCE.md, "Enqueue points"), side
 * by side with a bare clock read: the stores libsfclient makes at every
 * ordered stage begin, with and without the stage's start time, and what the
 * NCCL plugin adds per collective (a clock read and the beacon's sync point,
 * read from a real libsfclient's beacon). Usage: bench_enqueue [calls]
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <stagefrontier/client.h>

#include "nccl_beacon.h"

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

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    if (n <= 0)
        n = 20000000;
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
        return 1;
    }
    sf_step_begin(c, -1);
    sf_stage_begin(c, 2); /* the synchronizing stage is open while NCCL enqueues */
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

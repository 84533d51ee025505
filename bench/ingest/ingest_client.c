/*
 * Ingest benchmark sender built on libsfclient: one rank of a synthetic job
 * that runs STEPS steps of the default stages (no work inside them), paced
 * to RATE records/s (0: unpaced), then flushes until every record is sent or
 * counted as dropped. Prints the client's own counters.
 * usage: ingest_client SOCKET JOB RANK WORLD STEPS RATE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "stagefrontier/client.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

static void sleep_until(int64_t due)
{
    struct timespec ts = {due / 1000000000, due % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: ingest_client SOCKET JOB RANK WORLD STEPS RATE\n");
        return 2;
    }
    sf_client_options o;
    sf_client_options_init(&o);
    o.socket_path = argv[1];
    o.job_id = argv[2];
    o.rank = atoi(argv[3]);
    o.world_size = atoi(argv[4]);
    o.local_rank = 0;
    long steps = atol(argv[5]);
    double rate = atof(argv[6]);
    sf_client *c;
    if (sf_client_open(&o, &c) < 0)
        return 1;
    int n = sf_stage_count(c);
    int64_t t0 = now_ns();
    for (long s = 0; s < steps; s++) {
        if (rate > 0 && s % 64 == 0)
            sleep_until(t0 + (int64_t)((double)s / rate * 1e9));
        sf_step_begin(c, -1);
        for (int st = 0; st < n - 1; st++) {
            sf_stage_begin(c, st);
            sf_stage_end(c, st);
        }
        sf_step_end(c);
    }
    sf_client_stats stats;
    for (int i = 0; i < 20000; i++) {
        sf_client_get_stats(c, &stats);
        if (stats.records_sent + stats.records_dropped >= (uint64_t)steps)
            break;
        sf_client_flush(c);
        sleep_until(now_ns() + 500000);
    }
    sf_client_get_stats(c, &stats);
    printf("sent=%llu dropped=%llu\n", (unsigned long long)stats.records_sent,
           (unsigned long long)(steps - (long)stats.records_sent));
    sf_client_close(c);
    return 0;
}

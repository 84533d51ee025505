/*
 * One rank of a small synthetic job driven through libsfclient: timed stages
 * with real sleeps, one rank slow in a chosen stage. Used by the sfd tests
 * that exercise the real client against the real daemon.
 * usage: sf_client_job SOCKET JOB RANK WORLD STEPS SLOW_RANK SLOW_STAGE SLOW_US [BASE_US FLUSH]
 * BASE_US (default 100) is each stage's sleep; FLUSH 0 skips the final wait
 * for the ring to drain (for a daemon that is stopped). JOB "-" and RANK or
 * WORLD -1 leave the identity to the environment, as a launcher sets it.
 * With SF_TEST_CAPTURE_DIR set, a capture handler writes one line per
 * captured step into <dir>/capture-ID-rankR.txt (the C handler API), and
 * prints "capture ID rank R: communication 0|1" on stderr at its start. With
 * SF_TEST_SLOW_FROM=N the slow stage is slow from step N only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stagefrontier/client.h"

/* The smallest real handler: the steps it saw, in a file it names. */
struct capture_file {
    char path[512];
    FILE *f;
};

static int capture_handler(void *arg, enum sf_capture_phase phase, const sf_capture_request *req,
                           char *out, size_t out_cap)
{
    struct capture_file *cf = arg;
    switch (phase) {
    case SF_CAPTURE_START:
        snprintf(cf->path, sizeof cf->path, "%s/capture-%llu-rank%u.txt",
                 getenv("SF_TEST_CAPTURE_DIR"), (unsigned long long)req->id, req->rank);
        cf->f = fopen(cf->path, "w");
        if (cf->f == NULL) {
            snprintf(out, out_cap, "cannot open %s: %s", cf->path, strerror(errno));
            return -errno;
        }
        fprintf(stderr, "capture %llu rank %u: communication %u\n", (unsigned long long)req->id,
                req->rank, req->communication);
        return 0;
    case SF_CAPTURE_STEP_BEGIN:
        fprintf(cf->f, "step %lld\n", (long long)req->step);
        return 0;
    case SF_CAPTURE_STEP_END:
        return 0;
    case SF_CAPTURE_STOP:
        if (fclose(cf->f) != 0)
            return -EIO;
        snprintf(out, out_cap, "%s", cf->path);
        return 0;
    }
    return -EINVAL;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    if (argc != 9 && argc != 11) {
        fprintf(stderr, "usage: sf_client_job SOCKET JOB RANK WORLD STEPS SLOW_RANK SLOW_STAGE "
                        "SLOW_US\n");
        return 2;
    }
    sf_client_options o;
    sf_client_options_init(&o);
    o.socket_path = argv[1];
    o.job_id = strcmp(argv[2], "-") == 0 ? NULL : argv[2];
    o.rank = atoi(argv[3]);
    o.world_size = atoi(argv[4]);
    o.local_rank = o.rank;
    o.batch_records = 8;
    long steps = atol(argv[5]);
    int slow_rank = atoi(argv[6]), slow_stage = atoi(argv[7]);
    long slow_us = atol(argv[8]);
    long base_us = argc == 11 ? atol(argv[9]) : 100;
    int flush = argc == 11 ? atoi(argv[10]) : 1;
    sf_client *c;
    int r = sf_client_open(&o, &c);
    if (r < 0) {
        fprintf(stderr, "sf_client_open: %d\n", r);
        return 1;
    }
    static struct capture_file cf;
    if (getenv("SF_TEST_CAPTURE_DIR") != NULL)
        sf_client_set_capture_handler(c, capture_handler, &cf);
    int n = sf_stage_count(c);
    /* SF_TEST_SLOW_FROM: the first slow step (a fault with a known onset). */
    long slow_from = getenv("SF_TEST_SLOW_FROM") ? atol(getenv("SF_TEST_SLOW_FROM")) : 0;
    for (long s = 0; s < steps; s++) {
        sf_step_begin(c, -1);
        for (int st = 0; st < n - 1; st++) {
            sf_stage_begin(c, st);
            long us =
                base_us + (o.rank == slow_rank && st == slow_stage && s >= slow_from ? slow_us : 0);
            if (us > 0)
                sleep_us(us);
            sf_stage_end(c, st);
        }
        sf_step_end(c);
    }
    sf_client_stats stats;
    /* Hand the tail of the ring to the daemon: flush until all is sent or
     * dropped (each flush is one non-blocking attempt). */
    for (int i = 0; flush && i < 10000; i++) {
        sf_client_get_stats(c, &stats);
        if (stats.records_sent + stats.records_dropped >= (uint64_t)steps)
            break;
        sf_client_flush(c);
        sleep_us(1000);
    }
    sf_client_get_stats(c, &stats);
    printf("steps=%llu sent=%llu dropped=%llu violations=%llu reconnects=%llu "
           "captures_done=%llu captures_unsupported=%llu\n",
           (unsigned long long)stats.steps, (unsigned long long)stats.records_sent,
           (unsigned long long)stats.records_dropped, (unsigned long long)stats.violations,
           (unsigned long long)stats.reconnects, (unsigned long long)stats.captures_done,
           (unsigned long long)stats.captures_unsupported);
    sf_client_close(c);
    return 0;
}

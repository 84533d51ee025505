/*
 * Ingest benchmark sender built on libsfclient: one rank of a synthetic job
 * that runs STEPS steps of the default stages (no work inside them), paced
 * to RATE records/s (0: unpaced), then flushes until every record is sent or
 * counted as dropped. Prints the client's own counters.
 * START, when given, is the CLOCK_MONOTONIC time (ns) at which every sender
 * of a run begins its first step, so that the ranks run side by side as a
 * training job's do, whatever the order in which their processes started;
 * late=1 is printed if this one was not ready by then. LOCKSTEP, when given,
 * is a file of WORLD 64-byte slots, zeroed, that the senders of a run share:
 * every LOCKSTEP_STEPS steps a sender publishes its step there and waits
 * while another rank is more than LOCKSTEP_STEPS steps behind it, as a job's
 * collectives keep its ranks together (without it, the scheduler alone can
 * put one sender hundreds of windows behind the others at these rates).
 * usage: ingest_client SOCKET JOB RANK WORLD STEPS RATE [START [LOCKSTEP]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

#define LOCKSTEP_STEPS 1024
#define SLOT_WORDS 8 /* one 64-byte line per rank */

struct lockstep {
    _Atomic int64_t *steps; /* NULL: the senders run free */
    int world, rank;
};

static int lockstep_open(struct lockstep *ls, const char *path, int world, int rank)
{
    *ls = (struct lockstep){.world = world, .rank = rank};
    if (path == NULL)
        return 0;
    size_t len = (size_t)world * SLOT_WORDS * sizeof(int64_t);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || lseek(fd, 0, SEEK_END) < (off_t)len) {
        fprintf(stderr, "ingest_client: %s: not a lockstep file for %d ranks\n", path, world);
        return -1;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    ls->steps = p;
    return 0;
}

static void lockstep_publish(const struct lockstep *ls, int64_t step)
{
    if (ls->steps != NULL)
        atomic_store_explicit(&ls->steps[ls->rank * SLOT_WORDS], step, memory_order_release);
}

/* Publishes the step reached, then waits for the ranks too far behind. */
static void lockstep_wait(const struct lockstep *ls, int64_t step)
{
    if (ls->steps == NULL)
        return;
    lockstep_publish(ls, step);
    for (int r = 0; r < ls->world; r++)
        while (atomic_load_explicit(&ls->steps[r * SLOT_WORDS], memory_order_acquire) <
               step - LOCKSTEP_STEPS)
            sleep_until(now_ns() + 20000);
}

int main(int argc, char **argv)
{
    if (argc < 7 || argc > 9) {
        fprintf(stderr,
                "usage: ingest_client SOCKET JOB RANK WORLD STEPS RATE [START [LOCKSTEP]]\n");
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
    struct lockstep ls;
    if (lockstep_open(&ls, argc == 9 ? argv[8] : NULL, o.world_size, o.rank) < 0)
        return 1;
    sf_client *c;
    if (sf_client_open(&o, &c) < 0) {
        lockstep_publish(&ls, INT64_MAX); /* the others must not wait for this rank */
        return 1;
    }
    int n = sf_stage_count(c);
    int64_t t0 = argc >= 8 ? atoll(argv[7]) : now_ns();
    int late = now_ns() > t0;
    sleep_until(t0);
    for (long s = 0; s < steps; s++) {
        if (rate > 0 && s % 64 == 0)
            sleep_until(t0 + (int64_t)((double)s / rate * 1e9));
        if (s % LOCKSTEP_STEPS == 0)
            lockstep_wait(&ls, s);
        sf_step_begin(c, -1);
        for (int st = 0; st < n - 1; st++) {
            sf_stage_begin(c, st);
            sf_stage_end(c, st);
        }
        sf_step_end(c);
    }
    lockstep_publish(&ls, INT64_MAX); /* done: nobody waits for this rank */
    sf_client_stats stats;
    for (int i = 0; i < 20000; i++) {
        sf_client_get_stats(c, &stats);
        if (stats.records_sent + stats.records_dropped >= (uint64_t)steps)
            break;
        sf_client_flush(c);
        sleep_until(now_ns() + 500000);
    }
    sf_client_get_stats(c, &stats);
    printf("sent=%llu dropped=%llu late=%d\n", (unsigned long long)stats.records_sent,
           (unsigned long long)(steps - (long)stats.records_sent), late);
    sf_client_close(c);
    return 0;
}

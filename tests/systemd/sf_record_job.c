/*
 * sf_record_job SOCKET JOB WORLD STEPS SLOW_STAGE: a small training job for
 * the service tests. It forks WORLD rank processes; each opens libsfclient on
 * SOCKET, times STEPS steps of the five default explicit stages, where the
 * last rank sleeps longer in SLOW_STAGE, and flushes until every record is
 * sent. Exits 0 only when no rank dropped a record.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stagefrontier/client.h>

#define FLUSH_TIMEOUT_MS 60000

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int run_rank(const char *socket, const char *job, int rank, int world, int steps, int slow)
{
    sf_client_options o;
    sf_client *c = NULL;
    sf_client_stats st;
    int r;

    sf_client_options_init(&o);
    o.job_id = job;
    o.socket_path = socket;
    o.rank = rank;
    o.world_size = world;
    o.local_rank = rank;
    r = sf_client_open(&o, &c);
    if (r < 0) {
        fprintf(stderr, "rank %d: sf_client_open: %s\n", rank, strerror(-r));
        return 1;
    }
    int n_explicit = sf_stage_count(c) - 1; /* the residual is never timed */
    for (int t = 0; t < steps; t++) {
        sf_step_begin(c, t);
        for (int s = 0; s < n_explicit; s++) {
            sf_stage_begin(c, s);
            /* The workload: a stage that is slower on the last rank. */
            sleep_us(s == slow && rank == world - 1 ? 40000 : 200);
            sf_stage_end(c, s);
        }
        sf_step_end(c);
    }
    /* Sending never blocks; wait for the socket to drain, bounded. */
    for (int waited = 0; waited < FLUSH_TIMEOUT_MS; waited += 10) {
        sf_client_flush(c);
        if (sf_client_get_stats(c, &st) == 0 &&
            st.records_sent + st.records_dropped >= (uint64_t)steps)
            break;
        poll(NULL, 0, 10);
    }
    sf_client_get_stats(c, &st);
    sf_client_close(c);
    if (st.records_sent != (uint64_t)steps || st.records_dropped != 0) {
        fprintf(stderr, "rank %d: sent %llu dropped %llu of %d\n", rank,
                (unsigned long long)st.records_sent, (unsigned long long)st.records_dropped, steps);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int world, steps, slow, failed = 0;

    if (argc != 6) {
        fprintf(stderr, "usage: sf_record_job SOCKET JOB WORLD STEPS SLOW_STAGE\n");
        return 2;
    }
    world = atoi(argv[3]);
    steps = atoi(argv[4]);
    slow = atoi(argv[5]);
    if (world < 1 || world > 64 || steps < 1 || slow < 0) {
        fprintf(stderr, "sf_record_job: bad arguments\n");
        return 2;
    }
    for (int k = 0; k < world; k++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            _exit(run_rank(argv[1], argv[2], k, world, steps, slow));
    }
    for (int k = 0; k < world; k++) {
        int st;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
    }
    return failed;
}

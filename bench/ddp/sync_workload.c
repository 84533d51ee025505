/*
 * sf_sync_workload: a multi-process stand-in for a data-parallel training job,
 * used by bench/ddp/demo.sh where python3-torch is absent. N forked ranks run
 * the default stages; backward ends in a real process-shared barrier (the
 * allreduce), and one hidden rank, chosen by seed, carries an injected delay.
 * It times only through libsfclient and computes no accounting itself.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stagefrontier/client.h"

#define MAX_RANKS 64

enum fault { F_NONE, F_DATA, F_FORWARD, F_BACKWARD, F_CALLBACK_BARRIER };

struct config {
    int ranks, steps, seed;
    int print_hidden; /* print the hidden rank and exit (for the demo's reveal) */
    enum fault fault;
    double delay_ms;
    const char *job_id;
};

struct shared {
    pthread_barrier_t barrier;
};

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Deterministic per-step jitter (0..range_us) so ranks take turns leading. */
static long jitter_us(unsigned *state, long range_us)
{
    *state = *state * 1103515245u + 12345u;
    return (long)((*state >> 8) % (unsigned)(range_us + 1));
}

static const char *const fault_names[] = {"none", "data_wait", "forward_host", "backward_compute",
                                          "callback_barrier"};

static int parse_fault(const char *s, enum fault *ret)
{
    for (int i = 0; i < (int)(sizeof(fault_names) / sizeof(fault_names[0])); i++) {
        if (strcmp(s, fault_names[i]) == 0) {
            *ret = (enum fault)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* The hidden rank: a seed-driven pick the accounting never sees. */
static int hidden_rank(int seed, int ranks)
{
    unsigned s = 0x5F00u + (unsigned)seed;
    (void)jitter_us(&s, 0);
    return (int)((s >> 8) % (unsigned)ranks);
}

struct stage_ids {
    int data, fwd, bwd, cb, opt;
};

static int lookup_ids(sf_client *c, struct stage_ids *ids)
{
    ids->data = sf_stage_id(c, "data.next_wait");
    ids->fwd = sf_stage_id(c, "model.fwd_loss_cpu_wall");
    ids->bwd = sf_stage_id(c, "model.backward_cpu_wall");
    ids->cb = sf_stage_id(c, "callbacks.cpu_wall");
    ids->opt = sf_stage_id(c, "optim.step_cpu_wall");
    if (ids->data < 0 || ids->fwd < 0 || ids->bwd < 0 || ids->cb < 0 || ids->opt < 0)
        return -ENOENT;
    return 0;
}

/* One rank's training loop. Returns a process exit code. */
static int run_rank(const struct config *cfg, struct shared *sh, int rank)
{
    sf_client_options o;
    sf_client *c = NULL;
    struct stage_ids id;
    unsigned rng = 77u + (unsigned)rank * 7919u;
    long delay = (rank == hidden_rank(cfg->seed, cfg->ranks)) ? (long)(cfg->delay_ms * 1000) : 0;

    /* Both barriers are synchronizing: each rank marks its arrival first. */
    const char *sync[] = {"model.backward_cpu_wall", "callbacks.cpu_wall"};
    sf_client_options_init(&o);
    o.sync_stages = sync;
    o.n_sync_stages = cfg->fault == F_CALLBACK_BARRIER ? 2 : 1;
    o.rank = rank;
    o.world_size = cfg->ranks;
    o.local_rank = rank;
    o.job_id = cfg->job_id;
    if (sf_client_open(&o, &c) < 0 || lookup_ids(c, &id) < 0) {
        fprintf(stderr, "rank %d: cannot open the stagefrontier client\n", rank);
        sf_client_close(c);
        return 1;
    }
    for (int t = 0; t < cfg->steps; t++) {
        sf_step_begin(c, -1);
        sf_stage_begin(c, id.data);
        sleep_us(300 + jitter_us(&rng, 200) + (cfg->fault == F_DATA ? delay : 0));
        sf_stage_end(c, id.data);
        sf_stage_begin(c, id.fwd);
        sleep_us(3000 + jitter_us(&rng, 1000) + (cfg->fault == F_FORWARD ? delay : 0));
        sf_stage_end(c, id.fwd);
        sf_stage_begin(c, id.bwd);
        sleep_us(5000 + jitter_us(&rng, 1500) + (cfg->fault == F_BACKWARD ? delay : 0));
        sf_stage_arrive(c);
        pthread_barrier_wait(&sh->barrier); /* the gradient allreduce */
        sf_stage_end(c, id.bwd);
        sf_stage_begin(c, id.cb);
        if (cfg->fault == F_CALLBACK_BARRIER) {
            sleep_us(delay);
            sf_stage_arrive(c);
            pthread_barrier_wait(&sh->barrier);
        }
        sf_stage_end(c, id.cb);
        sf_stage_begin(c, id.opt);
        sleep_us(500 + jitter_us(&rng, 100));
        sf_stage_end(c, id.opt);
        sf_step_end(c);
    }
    sf_client_flush(c);
    sf_client_close(c);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sf_sync_workload [--ranks N] [--steps N] [--seed N]\n"
               "         [--fault none|data_wait|forward_host|backward_compute|callback_barrier]\n"
               "         [--delay-ms MS] [--job-id ID] [--print-hidden-rank]\n"
               "Environment: SF_SOCKET (the ingest socket), SF_JOB_ID.\n");
}

static int parse_args(int argc, char **argv, struct config *cfg)
{
    static const struct option opts[] = {
        {"ranks", required_argument, NULL, 'n'},
        {"steps", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {"fault", required_argument, NULL, 'f'},
        {"delay-ms", required_argument, NULL, 'd'},
        {"job-id", required_argument, NULL, 'j'},
        {"print-hidden-rank", no_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'n':
            cfg->ranks = atoi(optarg);
            break;
        case 's':
            cfg->steps = atoi(optarg);
            break;
        case 'S':
            cfg->seed = atoi(optarg);
            break;
        case 'd':
            cfg->delay_ms = atof(optarg);
            break;
        case 'j':
            cfg->job_id = optarg;
            break;
        case 'f':
            if (parse_fault(optarg, &cfg->fault) < 0)
                return -EINVAL;
            break;
        case 'H':
            cfg->print_hidden = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return -EINVAL;
        }
    }
    if (cfg->ranks < 2 || cfg->ranks > MAX_RANKS || cfg->steps < 1 || cfg->steps > 100000 ||
        cfg->delay_ms < 0 || cfg->delay_ms > 10000)
        return -EINVAL;
    return 0;
}

int main(int argc, char **argv)
{
    struct config cfg = {
        .ranks = 4, .steps = 140, .seed = 1, .fault = F_DATA, .delay_ms = 8.0, .job_id = NULL};
    pthread_barrierattr_t attr;
    struct shared *sh;
    pid_t pids[MAX_RANKS];
    int rc = 0;

    if (parse_args(argc, argv, &cfg) < 0) {
        usage(stderr);
        return 2;
    }
    if (cfg.print_hidden) {
        printf("%d\n", hidden_rank(cfg.seed, cfg.ranks));
        return 0;
    }
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (pthread_barrier_init(&sh->barrier, &attr, (unsigned)cfg.ranks) != 0) {
        fprintf(stderr, "cannot create the shared barrier\n");
        return 1;
    }
    for (int r = 0; r < cfg.ranks; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            for (int q = 0; q < r; q++)
                kill(pids[q], SIGTERM);
            return 1;
        }
        if (pids[r] == 0)
            _exit(run_rank(&cfg, sh, r));
    }
    /* A rank that dies would leave the others stuck in the barrier. */
    for (int left = cfg.ranks; left > 0; left--) {
        int status;
        pid_t p = wait(&status);
        if (p < 0)
            break;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            rc = 1;
            for (int q = 0; q < cfg.ranks; q++)
                kill(pids[q], SIGTERM);
        }
    }
    printf("sf_sync_workload: %d ranks, %d steps, fault %s on a hidden rank (seed %d)\n", cfg.ranks,
           cfg.steps, fault_names[cfg.fault], cfg.seed);
    pthread_barrier_destroy(&sh->barrier);
    munmap(sh, sizeof(*sh));
    return rc;
}

/*
 * False verdicts of the live test (docs/LIVE.md) on long clean streams:
 * each replicate takes one real clean recording (`sfctl record` JSON Lines,
 * e.g. the DDP runs under bench/ddp/results), estimates the baseline from its
 * first complete steps exactly as sfd does (sf_live_calibrate), then feeds
 * sf_live_step --replicate-steps steps drawn as blocks of consecutive steps of the
 * same recording (a moving-block bootstrap: serial correlation within a block
 * stays real). Verdict starts are false verdicts. Prints one JSON line: the
 * count, its rate per 86,400 steps with an exact (Garwood) 95 % interval, and
 * the test's cost per record.
 * usage: live_false_alarms [--steps N] [--replicate-steps N] [--block N] [--seed S]
 *        [--false-alarm-steps X] [--shift-sigmas X] [--min-effect-frac X] [--slow-effect-frac X]
 *        [--calibration N] FILE.jsonl...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/bench_rng.h"
#include "recording.h"
#include "stagefrontier/live.h"

/* P(X <= k) for X ~ Poisson(lambda), summed in log space so that a large
 * lambda does not underflow. */
static double poisson_cdf(uint64_t k, double lambda)
{
    double sum = 0;
    for (uint64_t i = 0; i <= k; i++)
        sum += exp(-lambda + (double)i * log(lambda) - lgamma((double)i + 1));
    return sum;
}

/* The lambda at which poisson_cdf(k, lambda) = p (decreasing in lambda). */
static double poisson_quantile(uint64_t k, double p)
{
    double lo = 0, hi = (double)k + 50 + 10 * sqrt((double)k + 1);
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2;
        if (poisson_cdf(k, mid) > p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

struct opts {
    uint64_t steps, day, block, seed;
    sf_live_config cfg;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    struct opts o = {.steps = 1000000, .day = 86400, .block = 50, .seed = 1};
    sf_live_config_default(&o.cfg);
    static const struct option lo[] = {{"steps", 1, NULL, 'n'}, {"replicate-steps", 1, NULL, 'd'},
                                       {"block", 1, NULL, 'b'}, {"seed", 1, NULL, 's'},
                                       LIVE_CONFIG_OPTIONS,     {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        double v = optarg ? strtod(optarg, NULL) : 0;
        switch (c) {
        case 'n':
            o.steps = (uint64_t)v;
            break;
        case 'd':
            o.day = (uint64_t)v;
            break;
        case 'b':
            o.block = (uint64_t)v;
            break;
        case 's':
            o.seed = (uint64_t)v;
            break;
        default:
            if (!live_config_option(c, v, &o.cfg))
                return 2;
        }
    }
    int nf = argc - optind;
    if (nf <= 0 || sf_live_config_validate(&o.cfg) < 0 || o.block < 1 || o.day < 1) {
        fprintf(stderr, "usage: live_false_alarms [options] FILE.jsonl...\n");
        return 2;
    }
    struct recording *recs = calloc((size_t)nf, sizeof(*recs));
    int n = 0;
    for (int i = 0; i < nf; i++) {
        int r = recording_load(argv[optind + i], &recs[n]);
        if (r < 0 || recs[n].n_steps < o.cfg.calibration_steps + o.block) {
            fprintf(stderr, "skipped %s: %s\n", argv[optind + i],
                    r < 0 ? strerror(-r) : "too few complete steps");
            recording_free(&recs[n]);
            continue;
        }
        n++;
    }
    if (n == 0)
        return 1;
    uint64_t rng = o.seed, done = 0, verdicts = 0, replicates = 0, records = 0;
    double spent = 0;
    while (done < o.steps) {
        struct recording *rec = &recs[replicates % (uint64_t)n];
        sf_live *l;
        if (sf_live_new(&rec->schema, rec->world, &o.cfg, &l) < 0)
            return 1;
        size_t per = (size_t)rec->world * rec->n_stages;
        for (uint32_t t = 0; t < o.cfg.calibration_steps; t++)
            sf_live_calibrate(l, rec->d + t * per);
        uint64_t pool = rec->n_steps - o.cfg.calibration_steps - o.block + 1;
        double t0 = now_s();
        for (uint64_t s = 0; s < o.day && done < o.steps;) {
            uint64_t from = o.cfg.calibration_steps + splitmix64(&rng) % pool;
            for (uint64_t b = 0; b < o.block && s < o.day && done < o.steps; b++, s++, done++) {
                enum sf_live_event ev;
                sf_live_step(l, (int64_t)s, rec->d + (from + b) * per, 0, &ev, NULL);
                if (ev == SF_LIVE_STARTED || ev == SF_LIVE_REPLACED) {
                    const sf_live_verdict *v = sf_live_verdict_get(l);
                    verdicts++;
                    fprintf(stderr, "false verdict: %s step %llu: %s rank %d stage %s\n", rec->path,
                            (unsigned long long)s, sf_live_kind_name(v->kind),
                            v->rank == SF_NO_RANK ? -1 : (int)v->rank, rec->schema.names[v->stage]);
                }
            }
        }
        spent += now_s() - t0;
        records += (uint64_t)sf_live_steps_tested(l) * rec->world;
        sf_live_free(l);
        replicates++;
    }
    double lo_ci = verdicts ? poisson_quantile(verdicts - 1, 0.975) : 0;
    double hi_ci = poisson_quantile(verdicts, 0.025);
    printf("{\"recordings\": %d, \"replicates\": %llu, \"steps\": %llu, \"block\": %llu, "
           "\"false_alarm_steps\": %g, \"shift_sigmas\": %g, \"min_effect_frac\": %g, "
           "\"change_min_frac\": %g, \"replicate_steps\": %llu, \"halflife_steps\": %g, "
           "\"calibration_steps\": %u, "
           "\"false_verdicts\": %llu, \"per_86400_steps\": %.4f, "
           "\"ci95\": [%.4f, %.4f], \"ns_per_record\": %.1f}\n",
           n, (unsigned long long)replicates, (unsigned long long)done, (unsigned long long)o.block,
           o.cfg.false_alarm_steps, o.cfg.shift_sigmas, o.cfg.min_effect_frac,
           o.cfg.change_min_frac, (unsigned long long)o.day, o.cfg.baseline_halflife_steps,
           o.cfg.calibration_steps, (unsigned long long)verdicts,
           (double)verdicts * 86400.0 / (double)done, lo_ci * 86400.0 / (double)done,
           hi_ci * 86400.0 / (double)done, spent * 1e9 / (double)(records ? records : 1));
    for (int i = 0; i < n; i++) {
        recording_free(&recs[i]);
    }
    free(recs);
    return 0;
}

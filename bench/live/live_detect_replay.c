/*
 * Detection delay of the live test (docs/LIVE.md) on real fault recordings:
 * each SPEC names a recording (`sfctl record` JSON Lines of a job whose hidden
 * rank was slowed from a known step, e.g. the change matrix's runs under
 * bench/ddp/results), the hidden rank, the faulted stage and the onset step.
 * The baseline comes from the recording's first complete steps exactly as
 * sfd takes it (sf_live_calibrate), then every later complete step goes
 * through sf_live_step. Prints one JSON line a recording: the first straggler
 * verdict at or after the onset, whether it names the rank and the stage,
 * its delay in steps, and the straggler verdicts before the onset (false
 * verdicts); then one summary line.
 * usage: live_detect_replay [--false-alarm-steps X] [--shift-sigmas X]
 *        [--min-effect-frac X] [--slow-effect-frac X] [--change-min-frac X] [--halflife X]
 *        [--calibration N] [--bound-steps N] RANK:STAGE:ONSET:FILE...
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recording.h"
#include "stagefrontier/live.h"

struct spec {
    uint32_t rank;
    char stage[128];
    int64_t onset;
    const char *path;
};

static int parse_spec(char *arg, struct spec *s)
{
    char *a = strtok(arg, ":"), *b = strtok(NULL, ":"), *c = strtok(NULL, ":");
    char *p = strtok(NULL, "");
    if (a == NULL || b == NULL || c == NULL || p == NULL || strlen(b) >= sizeof s->stage)
        return -1;
    s->rank = (uint32_t)strtoul(a, NULL, 10);
    strcpy(s->stage, b);
    s->onset = strtoll(c, NULL, 10);
    s->path = p;
    return 0;
}

struct outcome {
    int hit;          /* right rank and stage at or after the onset */
    int64_t bound;    /* issue 48's: 10 steps or 30 s of median steps, whichever is later */
    int64_t delay;    /* of the first straggler verdict at or after the onset, -1: none */
    int false_before; /* straggler verdicts before the onset */
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* 10 steps or 30 s, whichever is later, in the baseline's median steps (the
 * median over its steps of the median total over the ranks). */
static int64_t bound_steps(const struct recording *rec, uint32_t n)
{
    int64_t *tot = calloc(n, sizeof(*tot)), *col = calloc(rec->world, sizeof(*col));
    for (uint32_t t = 0; t < n; t++) {
        for (uint32_t r = 0; r < rec->world; r++) {
            col[r] = 0;
            for (uint32_t k = 0; k < rec->n_stages; k++)
                col[r] += rec->d[((size_t)t * rec->world + r) * rec->n_stages + k];
        }
        qsort(col, rec->world, sizeof(*col), cmp_i64);
        tot[t] = col[rec->world / 2];
    }
    qsort(tot, n, sizeof(*tot), cmp_i64);
    int64_t step = tot[n / 2] > 0 ? tot[n / 2] : 1, b = (int64_t)(30e9 / (double)step);
    free(tot);
    free(col);
    return b > 10 ? b : 10;
}

static int replay(const struct spec *sp, const sf_live_config *cfg, struct outcome *out)
{
    struct recording rec;
    int r = recording_load(sp->path, &rec);
    if (r < 0 || rec.n_steps <= cfg->calibration_steps) {
        fprintf(stderr, "skipped %s\n", sp->path);
        recording_free(&rec);
        return -1;
    }
    sf_live *l;
    if (sf_live_new(&rec.schema, rec.world, cfg, &l) < 0)
        return -1;
    size_t per = (size_t)rec.world * rec.n_stages;
    uint32_t t = 0;
    for (; t < cfg->calibration_steps; t++)
        sf_live_calibrate(l, rec.d + t * per);
    *out = (struct outcome){.delay = -1, .bound = bound_steps(&rec, cfg->calibration_steps)};
    sf_live_verdict first = {0};
    for (; t < rec.n_steps && out->delay < 0; t++) {
        enum sf_live_event ev;
        sf_live_step(l, rec.step[t], rec.d + t * per, 0, &ev, NULL);
        const sf_live_verdict *v = sf_live_verdict_get(l);
        if ((ev != SF_LIVE_STARTED && ev != SF_LIVE_REPLACED) || v->kind != SF_LIVE_STRAGGLER)
            continue;
        if (rec.step[t] < sp->onset) {
            out->false_before++;
            fprintf(stderr, "before the onset: %s step %lld: rank %d stage %s (%s) since %lld\n",
                    sp->path, (long long)rec.step[t], (int)v->rank, rec.schema.names[v->stage],
                    v->arrival ? "arrival" : "own_work", (long long)v->since_step);
            continue;
        }
        first = *v;
        out->delay = rec.step[t] - sp->onset;
        out->hit = v->rank == sp->rank && !strcmp(rec.schema.names[v->stage], sp->stage);
    }
    printf("{\"path\": \"%s\", \"rank\": %u, \"stage\": \"%s\", \"onset\": %lld, "
           "\"false_before\": %d, \"bound_steps\": %lld, \"delay_steps\": %lld, \"hit\": %s",
           sp->path, sp->rank, sp->stage, (long long)sp->onset, out->false_before,
           (long long)out->bound, (long long)out->delay, out->hit ? "true" : "false");
    if (out->delay >= 0)
        printf(", \"verdict\": {\"rank\": %d, \"stage\": \"%s\", \"test\": \"%s\", "
               "\"since_step\": %lld, \"statistic\": %.3f, \"sigma_s\": %.6g}",
               first.rank == SF_NO_RANK ? -1 : (int)first.rank, rec.schema.names[first.stage],
               first.communication ? "communication"
               : first.arrival     ? "arrival"
                                   : "own_work",
               (long long)first.since_step, first.statistic, first.sigma_ns / 1e9);
    printf("}\n");
    sf_live_free(l);
    recording_free(&rec);
    return 0;
}

int main(int argc, char **argv)
{
    sf_live_config cfg;
    sf_live_config_default(&cfg);
    long bound = 10;
    static const struct option lo[] = {
        LIVE_CONFIG_OPTIONS, {"bound-steps", 1, NULL, 'b'}, {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        double v = optarg ? strtod(optarg, NULL) : 0;
        switch (c) {
        case 'b':
            bound = (long)v;
            break;
        default:
            if (!live_config_option(c, v, &cfg))
                return 2;
        }
    }
    if (optind >= argc || sf_live_config_validate(&cfg) < 0) {
        fprintf(stderr, "usage: live_detect_replay [options] RANK:STAGE:ONSET:FILE...\n");
        return 2;
    }
    int runs = 0, hits = 0, within = 0, in_bound = 0, named = 0, false_runs = 0;
    int64_t delays[4096];
    for (int i = optind; i < argc; i++) {
        struct spec sp;
        struct outcome o;
        if (parse_spec(argv[i], &sp) < 0 || replay(&sp, &cfg, &o) < 0)
            continue;
        runs++;
        false_runs += o.false_before > 0;
        named += o.delay >= 0;
        hits += o.hit;
        within += o.hit && o.delay < bound;
        in_bound += o.hit && o.delay < o.bound;
        if (o.hit && hits <= 4096)
            delays[hits - 1] = o.delay;
    }
    /* The median delay of the hits. */
    for (int i = 1; i < hits && i < 4096; i++)
        for (int j = i; j > 0 && delays[j - 1] > delays[j]; j--) {
            int64_t x = delays[j];
            delays[j] = delays[j - 1];
            delays[j - 1] = x;
        }
    printf("{\"runs\": %d, \"named_after_onset\": %d, \"hits\": %d, \"hits_within_bound\": %d, "
           "\"bound_steps\": %ld, \"hits_within_issue_bound\": %d, \"median_delay_steps\": %lld, "
           "\"runs_with_false_before\": %d}\n",
           runs, named, hits, within, bound, in_bound,
           hits ? (long long)delays[(hits - 1) / 2] : -1LL, false_runs);
    return 0;
}

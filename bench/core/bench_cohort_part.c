/*
 * The cost of the cohort part (docs/ACCOUNTING.md, "Cohorts in a mergeable
 * summary"): one window of R ranks x 100 steps x 6 stages built into a
 * summary with and without parallel coordinates (pp=P x dp=R/P), built
 * alternately (without, with, without, ...) REPS times each, so that a drift
 * of a shared machine's load falls on both alike: the best build and report
 * of each, their cost a row, and the ratio with / without of the build and
 * of build + report. R=8 P=2 dense is the shape of the ingest benchmark's
 * windows (bench/ingest/cohort_cost.sh).
 *
 * usage: bench_cohort_part [RANKS [PP [dense|mergeable [REPS]]]]
 *        (default 16384 8 mergeable 5)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stagefrontier/accounting.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    uint32_t R = argc > 1 ? (uint32_t)atoi(argv[1]) : 16384, T = 100, S = 6;
    uint32_t pp = argc > 2 ? (uint32_t)atoi(argv[2]) : 8;
    bool dense = argc > 3 && strcmp(argv[3], "dense") == 0;
    int reps = argc > 4 ? atoi(argv[4]) : 5;
    if (R < 2 || pp < 2 || R % pp != 0 || reps < 1)
        return 2;
    sf_schema sc;
    sf_schema_init_default(&sc, 1);
    sf_window_meta m = {.index = 0, .first_step = 0, .last_step = T - 1, .world_size = R};
    int64_t *d = malloc((size_t)R * T * S * sizeof *d);
    sf_row *rows = calloc((size_t)R * T, sizeof *rows);
    sf_parallel *par = malloc(R * sizeof *par);
    if (d == NULL || rows == NULL || par == NULL)
        return 1;
    for (uint32_t r = 0; r < R; r++) {
        char b[64];
        snprintf(b, sizeof b, "pp=%u/%u,dp=%u/%u", r / (R / pp), pp, r % (R / pp), R / pp);
        if (sf_parallel_parse(b, &par[r], NULL, 0) < 0)
            return 1;
    }
    uint64_t x = 1;
    for (size_t i = 0; i < (size_t)R * T * S; i++) {
        x = x * 6364136223846793005u + 1;
        d[i] = 1000000 + (int64_t)((x >> 33) % 1000000);
    }
    sf_gates g;
    sf_gates_default(&g);
    double build[2] = {1e9, 1e9}, report[2] = {1e9, 1e9};
    for (int k = 0; k < reps; k++)
        for (int with = 0; with < 2; with++) {
            for (uint32_t t = 0; t < T; t++)
                for (uint32_t r = 0; r < R; r++) {
                    size_t i = (size_t)t * R + r;
                    rows[i] = (sf_row){
                        .step = t, .rank = r, .d = &d[i * S], .parallel = with ? &par[r] : NULL};
                }
            sf_summary *s = NULL;
            sf_report *rp = NULL;
            double a = now();
            if (sf_summary_build(&sc, &m, rows, (size_t)R * T, dense, &s) < 0)
                return 1;
            double b = now();
            if (sf_report_compute(s, &g, &rp) < 0)
                return 1;
            double c = now();
            build[with] = b - a < build[with] ? b - a : build[with];
            report[with] = c - b < report[with] ? c - b : report[with];
            if (k == 0 && with)
                printf("cohorts %s, pipeline view %s\n", sf_cohort_state_name(rp->cohorts),
                       rp->pipeline.present ? "present" : "absent");
            sf_report_free(rp);
            sf_summary_free(s);
        }
    double n_rows = (double)R * T;
    for (int with = 0; with < 2; with++)
        printf("%s coordinates: %s build %.3f ms (%.1f ns a row, %.3g cells/s), report %.3f ms"
               " (%.1f ns a row)\n",
               with ? "with" : "without", dense ? "dense" : "mergeable", build[with] * 1e3,
               build[with] / n_rows * 1e9, n_rows * S / build[with], report[with] * 1e3,
               report[with] / n_rows * 1e9);
    printf("with/without (best of %d each, alternated): build %.2f, build + report %.2f;"
           " with - without: %.1f ns a row\n",
           reps, build[1] / build[0], (build[1] + report[1]) / (build[0] + report[0]),
           (build[1] + report[1] - build[0] - report[0]) / n_rows * 1e9);
    sf_schema_clear(&sc);
    free(d);
    free(rows);
    free(par);
    return 0;
}

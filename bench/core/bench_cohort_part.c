/*
 * The cost of the cohort part (docs/ACCOUNTING.md, "Cohorts in a mergeable
 * summary"): one window of R ranks x 100 steps x 6 stages built into a
 * summary with and without parallel coordinates (pp=P x dp=R/P), the best
 * of 5 builds and reports each.
 *
 * usage: bench_cohort_part [RANKS [PP [dense]]]   (default 16384 8, mergeable)
 */
#include <stdio.h>
#include <stdlib.h>
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
    bool dense = argc > 3;
    if (R < 2 || pp < 2 || R % pp != 0)
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
    for (int with = 0; with < 2; with++) {
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t r = 0; r < R; r++) {
                size_t i = (size_t)t * R + r;
                rows[i] = (sf_row){
                    .step = t, .rank = r, .d = &d[i * S], .parallel = with ? &par[r] : NULL};
            }
        double build = 1e9, report = 1e9;
        for (int k = 0; k < 5; k++) {
            sf_summary *s = NULL;
            sf_report *rp = NULL;
            double a = now();
            if (sf_summary_build(&sc, &m, rows, (size_t)R * T, dense, &s) < 0)
                return 1;
            double b = now();
            if (sf_report_compute(s, &g, &rp) < 0)
                return 1;
            double c = now();
            build = b - a < build ? b - a : build;
            report = c - b < report ? c - b : report;
            if (k == 0 && with)
                printf("cohorts %s, pipeline view %s\n", sf_cohort_state_name(rp->cohorts),
                       rp->pipeline.present ? "present" : "absent");
            sf_report_free(rp);
            sf_summary_free(s);
        }
        printf("%s coordinates: %s build %.1f ms (%.3g cells/s), report %.1f ms\n",
               with ? "with" : "without", dense ? "dense" : "mergeable", build * 1e3,
               (double)R * T * S / build, report * 1e3);
    }
    sf_schema_clear(&sc);
    free(d);
    free(rows);
    free(par);
    return 0;
}

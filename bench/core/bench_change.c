/*
 * Cost of the change and the what-if against the report they join
 * (docs/PERFORMANCE.md): at (ranks, 100 steps, 6 stages), the dense report
 * of one window (summary build + report compute, the anchor), then
 * sf_report_attach_change on it against a reference of three windows,
 * measured alone and pooled with the windows before it (change_pool_windows,
 * docs/CHANGE.md), timed side by side in one run, best of N. Also the one-off reference build.
 * Each size runs twice: the default schema, and a synchronizing one (the
 * backward split at its arrival: 5 recorded stages, 6 in all) where the
 * change also tests every (rank, own-work stage) and the what-if uses the
 * sync model.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stagefrontier/change.h>

#include "bench_rng.h"
#include "core_internal.h"

#define STEPS 100
#define STAGES 6

/* Training-like steps (the stage mix of bench_core); slow_ns extra data wait
 * on rank R/3, which the others see as backward wait. */
static void generate(uint32_t R, uint64_t seed, int64_t slow_ns, int64_t *d)
{
    static const double base_ns[STAGES] = {3e6, 40e6, 80e6, 1e6, 12e6, 0.4e6};
    uint64_t st = seed;
    for (uint32_t t = 0; t < STEPS; t++)
        for (uint32_t r = 0; r < R; r++) {
            int64_t *row = &d[((size_t)t * R + r) * STAGES];
            for (uint32_t s = 0; s < STAGES; s++)
                row[s] = (int64_t)(base_ns[s] * (1.0 + 0.02 * uniform_pm1(&st)));
            if (r == R / 3)
                row[0] += slow_ns;
            else
                row[2] += slow_ns;
        }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct window {
    int64_t *d;
    sf_row *rows;
    sf_window_meta meta;
    sf_summary *summary;
};

static int window_make(uint32_t R, int64_t index, int64_t slow_ns, const sf_schema *schema,
                       struct window *w)
{
    size_t n = (size_t)STEPS * R;
    w->d = malloc(n * STAGES * sizeof *w->d);
    w->rows = malloc(n * sizeof *w->rows);
    if (w->d == NULL || w->rows == NULL)
        return -ENOMEM;
    generate(R, 1000 + (uint64_t)index, slow_ns, w->d);
    for (size_t i = 0; i < n; i++)
        w->rows[i] = (sf_row){.step = index * STEPS + (int64_t)(i / R),
                              .rank = (uint32_t)(i % R),
                              .d = &w->d[i * STAGES]};
    w->meta = (sf_window_meta){.index = index,
                               .first_step = index * STEPS,
                               .last_step = index * STEPS + STEPS - 1,
                               .world_size = R};
    return sf_summary_build(schema, &w->meta, w->rows, n, true, &w->summary);
}

static void window_free(struct window *w)
{
    sf_summary_free(w->summary);
    free(w->d);
    free(w->rows);
}

/* Seconds of one dense report (build + compute, as sf_report_from_rows
 * does it) and of the change and what-if on it, best of reps each,
 * interleaved so both see the same load. The change reads the summary the
 * report was just computed from, as sfd's window close does. */
static int time_pair(const sf_schema *schema, struct window *cur, const sf_gates *g,
                     const sf_reference *ref, sf_change_pool *pool, int reps, double *ret_report,
                     double *ret_change, sf_report **ret_last)
{
    double best_r = 1e9, best_c = 1e9;
    for (int i = 0; i < reps; i++) {
        sf_report *rep = NULL;
        sf_summary *sum = NULL;
        double t0 = now_s();
        int r =
            sf__summary_build(schema, &cur->meta, cur->rows, (size_t)STEPS * cur->meta.world_size,
                              cur->meta.world_size <= g->dense_max_ranks, SF__BUILD_BORROW, &sum);
        if (r == 0)
            r = sf_report_compute(sum, g, &rep);
        double t1 = now_s();
        if (r == 0)
            r = sf_report_attach_change(rep, sum, pool, ref);
        double t2 = now_s();
        sf_summary_free(sum);
        if (r < 0) {
            sf_report_free(rep);
            return r;
        }
        best_r = t1 - t0 < best_r ? t1 - t0 : best_r;
        best_c = t2 - t1 < best_c ? t2 - t1 : best_c;
        sf_report_free(*ret_last);
        *ret_last = rep;
    }
    *ret_report = best_r;
    *ret_change = best_c;
    return 0;
}

/* The synchronizing schema: data, forward, backward (own work) and its
 * .sync_wait, optimizer, residual; the generated stage 3 is the wait. */
static int sync_schema(sf_schema *ret)
{
    static const char *const names[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                        "model.backward_cpu_wall", "optim.step_cpu_wall",
                                        "step.other_cpu_wall"};
    return sf_schema_init_sync(ret, 1, 5, names, NULL, 1, UINT64_C(1) << 2);
}

#define WINDOWS (3 + SF_POOL_MAX_WINDOWS) /* the reference's, then the measured ones */

/* The reference of windows 0-2; the windows after it slowed, those before
 * the last measured and kept in pool as sfd does at each close. */
static int windows_make(uint32_t R, const sf_schema *schema, const sf_gates *g, struct window *w,
                        sf_reference **ret_ref, sf_change_pool *pool, double *ret_ref_s)
{
    int last = 3 + (int)g->change_pool_windows - 1, r = 0;
    for (int j = 0; j <= last && r == 0; j++)
        r = window_make(R, j, j >= 3 ? 8000000 : 0, schema, &w[j]);
    double t0 = now_s();
    const sf_summary *refw[3] = {w[0].summary, w[1].summary, w[2].summary};
    if (r == 0)
        r = sf_reference_build(refw, 3, ret_ref);
    *ret_ref_s = now_s() - t0;
    for (int j = 3; j < last && r == 0; j++) {
        sf_report *rep = NULL;
        r = sf_report_compute(w[j].summary, g, &rep);
        if (r == 0)
            r = sf_report_attach_change(rep, w[j].summary, pool, *ret_ref);
        if (r == 0) /* the pool takes it */
            r = sf_change_pool_keep(pool, &w[j].summary, g->change_pool_windows);
        sf_report_free(rep);
    }
    return r < 0 ? r : last;
}

static int run(uint32_t R, int reps, bool sync, uint32_t pool_windows)
{
    sf_schema schema;
    sf_gates g;
    sf_gates_default(&g);
    g.change_pool_windows = pool_windows;
    int r = sync ? sync_schema(&schema) : sf_schema_init_default(&schema, 1);
    struct window w[WINDOWS] = {0};
    sf_reference *ref = NULL;
    sf_change_pool pool = {0};
    sf_report *last = NULL;
    double ref_s = 0, report_s = 0, change_s = 0;
    int cur = r < 0 ? r : windows_make(R, &schema, &g, w, &ref, &pool, &ref_s);
    r = cur < 0 ? cur
                : time_pair(&schema, &w[cur], &g, ref, &pool, reps, &report_s, &change_s, &last);
    if (r == 0)
        printf("%5u x %u x %u %-5s %4u %10.3f %10.3f %9.1f %%  %12.3f   route[0] %s, suspect %u\n",
               R, STEPS, STAGES, sync ? "sync" : "plain", last->change->n_measured, report_s * 1e3,
               change_s * 1e3, 100 * change_s / report_s, ref_s * 1e3,
               last->change->n_route ? schema.names[last->change->route[0]] : "none",
               last->change->n_suspects ? last->change->suspects[0].rank : SF_NO_RANK);
    sf_report_free(last);
    sf_reference_free(ref);
    sf_change_pool_clear(&pool);
    for (int j = 0; j < WINDOWS; j++)
        window_free(&w[j]);
    sf_schema_clear(&schema);
    if (r < 0)
        fprintf(stderr, "bench_change: %s\n", strerror(-r));
    return r;
}

/* bench_change [REPS [RANKS plain|sync [POOL]]]: one configuration alone,
 * for a profiler that counts instructions (docs/PERFORMANCE.md); POOL is
 * change_pool_windows, the default's if not given. */
int main(int argc, char **argv)
{
    sf_gates g;
    sf_gates_default(&g);
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    int only_ranks = argc > 2 ? atoi(argv[2]) : 0;
    const char *only_schema = argc > 3 ? argv[3] : NULL;
    int pool = argc > 4 ? atoi(argv[4]) : (int)g.change_pool_windows;
    if (reps < 1 || argc == 3 || argc > 5 || (argc >= 4 && only_ranks < 2) || pool < 1 ||
        pool > SF_POOL_MAX_WINDOWS ||
        (only_schema && strcmp(only_schema, "plain") != 0 && strcmp(only_schema, "sync") != 0)) {
        fprintf(stderr, "usage: bench_change [REPS [RANKS plain|sync [POOL]]]\n");
        return 2;
    }
    printf("ranks x steps x st schema pool  report ms  change+whatif ms  added   reference build "
           "ms\n");
    if (only_schema)
        return run((uint32_t)only_ranks, reps, strcmp(only_schema, "sync") == 0, (uint32_t)pool) <
               0;
    static const uint32_t ranks[] = {8, 1024};
    const uint32_t pools[] = {1, g.change_pool_windows}; /* alone, and as the default pools */
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
        for (int sync = 0; sync < 2; sync++)
            for (size_t p = 0; p < (pools[1] > 1 ? 2u : 1u); p++)
                if (run(ranks[i], reps, sync, pools[p]) < 0)
                    return 1;
    return 0;
}

/*
 * Cost of sfctl plot's heatmap at (ranks, 100 steps, 6 stages): the window's
 * summary and report (the anchor: the accounting sfctl computes anyway), then
 * the heatmap model (lead counts, and mean slack, which reads every row) and
 * its cairo rendering to PNG and SVG in memory, side by side in one run, best
 * of N. Also checks that the hottest cell is the slow rank's data stage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_rng.h"
#include "picture.h"
#include "plot_cairo.h"

#define STEPS 100
#define STAGES 6
#define REPEAT 5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Training-like steps; rank R/3 waits 20 ms longer for data, which the
 * others see as backward wait. */
static void generate(uint32_t R, int64_t *d, sf_row *rows)
{
    static const double base_ns[STAGES] = {3e6, 40e6, 80e6, 1e6, 12e6, 0.4e6};
    uint64_t st = 0x5eed + R;
    for (uint32_t t = 0; t < STEPS; t++)
        for (uint32_t r = 0; r < R; r++) {
            size_t i = (size_t)t * R + r;
            int64_t *row = &d[i * STAGES];
            for (uint32_t s = 0; s < STAGES; s++)
                row[s] = (int64_t)(base_ns[s] * (1.0 + 0.02 * uniform_pm1(&st)));
            row[r == R / 3 ? 0 : 2] += 20000000;
            rows[i] = (sf_row){.step = t, .rank = r, .d = row};
        }
}

struct timing {
    double report, leads, slack, png, svg;
};

static double render(const sf_heatmap *h, enum plot_format f, size_t *ret_bytes)
{
    char *buf = NULL, err[100];
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    struct plot_picture p = {.title = "bench", .heatmap = h};
    double t0 = now_s();
    int r = plot_render(&p, f, out, err, sizeof err);
    fclose(out);
    double t = now_s() - t0;
    free(buf);
    *ret_bytes = len;
    return r == 0 ? t : -1;
}

static int run(uint32_t R, struct timing *best, uint32_t *ret_hot)
{
    size_t n = (size_t)STEPS * R;
    int64_t *d = malloc(n * STAGES * sizeof *d);
    sf_row *rows = malloc(n * sizeof *rows);
    if (d == NULL || rows == NULL)
        return -ENOMEM;
    generate(R, d, rows);
    sf_schema schema;
    sf_gates gates;
    sf_schema_init_default(&schema, 1);
    sf_gates_default(&gates);
    sf_window_meta meta = {.index = 0, .first_step = 0, .last_step = STEPS - 1, .world_size = R};
    *best = (struct timing){1e9, 1e9, 1e9, 1e9, 1e9};
    for (int rep = 0; rep < REPEAT; rep++) {
        sf_summary *s = NULL;
        sf_report *rep_ = NULL;
        bool dense = R <= gates.dense_max_ranks;
        double t0 = now_s();
        if (sf_summary_build(&schema, &meta, rows, n, dense, &s) < 0 ||
            sf_report_compute(s, &gates, &rep_) < 0)
            return -EINVAL;
        double t1 = now_s();
        sf_heatmap *lead = NULL, *slack = NULL;
        if (sf_heatmap_build(s, rep_, NULL, rows, n, SF_HEAT_LEADS, SF_HEATMAP_MAX_ROWS, &lead) < 0)
            return -EINVAL;
        double t2 = now_s();
        if (sf_heatmap_build(s, rep_, NULL, rows, n, SF_HEAT_SLACK, SF_HEATMAP_MAX_ROWS, &slack) <
            0)
            return -EINVAL;
        double t3 = now_s();
        size_t png_bytes, svg_bytes;
        double png = render(lead, PLOT_PNG, &png_bytes), svg = render(lead, PLOT_SVG, &svg_bytes);
        if (png < 0 || svg < 0)
            return -EIO;
        best->report = t1 - t0 < best->report ? t1 - t0 : best->report;
        best->leads = t2 - t1 < best->leads ? t2 - t1 : best->leads;
        best->slack = t3 - t2 < best->slack ? t3 - t2 : best->slack;
        best->png = png < best->png ? png : best->png;
        best->svg = svg < best->svg ? svg : best->svg;
        *ret_hot = lead->hot_stage == 0 && lead->row_first[lead->hot_row] <= R / 3 &&
                   R / 3 <= lead->row_last[lead->hot_row];
        sf_heatmap_free(lead);
        sf_heatmap_free(slack);
        sf_report_free(rep_);
        sf_summary_free(s);
    }
    sf_schema_clear(&schema);
    free(d);
    free(rows);
    return 0;
}

int main(void)
{
    static const uint32_t sizes[] = {256, 1024, 16384};
    printf("best of %d; times in ms; total = report + model + PNG (leads; slack)\n", REPEAT);
    printf("%-18s %8s %8s %8s %8s %8s %8s %8s  %s\n", "ranks x steps x st", "report", "leads",
           "slack", "png", "svg", "total", "(slack)", "hottest cell");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct timing t;
        uint32_t hot = 0;
        int r = run(sizes[i], &t, &hot);
        if (r < 0) {
            fprintf(stderr, "bench_plot: %u ranks: %s\n", sizes[i], strerror(-r));
            return 1;
        }
        double total = t.report + t.leads + t.png, total_slack = t.report + t.slack + t.png;
        printf("%5u x %3d x %d %11.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f  %s (%s 1 s)\n", sizes[i],
               STEPS, STAGES, t.report * 1e3, t.leads * 1e3, t.slack * 1e3, t.png * 1e3,
               t.svg * 1e3, total * 1e3, total_slack * 1e3, hot ? "slow rank x data" : "WRONG",
               total_slack < 1.0 ? "under" : "OVER");
    }
    plot_release();
    return 0;
}

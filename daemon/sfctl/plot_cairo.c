/*
 * Cairo drawing of sfctl's pictures (plot_cairo.h). Cairo writes SVG, PNG and
 * PDF from the same drawing calls, so the three formats show the same
 * picture. Layout, colours and text only: the numbers come from the models.
 */
#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_cairo.h"

#define FONT "DejaVu Sans"
#define TITLE_H 46.0
#define STAGE_LABEL_H 150.0
#define RANK_LABEL_W 130.0
#define MARK_W 16.0
#define LEGEND_W 270.0
#define MIN_WIDTH 760.0
#define MARGIN 16.0

/* Stage colours (colour-blind friendly), cycled past ten stages. */
static const double palette[][3] = {
    {0.27, 0.47, 0.67}, {0.93, 0.40, 0.47}, {0.13, 0.53, 0.20}, {0.80, 0.73, 0.27},
    {0.40, 0.80, 0.93}, {0.67, 0.20, 0.47}, {0.73, 0.73, 0.73}, {0.55, 0.35, 0.16},
    {0.47, 0.27, 0.80}, {0.20, 0.20, 0.20},
};
#define N_PALETTE (sizeof palette / sizeof palette[0])

static void stage_colour(cairo_t *cr, uint32_t k)
{
    const double *c = palette[k % N_PALETTE];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
}

/* White through yellow and orange to dark red. */
static void heat_colour(cairo_t *cr, double heat)
{
    static const double stops[][3] = {
        {1.0, 1.0, 1.0}, {1.0, 0.86, 0.45}, {0.94, 0.42, 0.15}, {0.55, 0.0, 0.05}};
    double x = fmin(fmax(heat, 0), 1) * 3;
    int i = x >= 3 ? 2 : (int)x;
    double f = x - i;
    cairo_set_source_rgb(cr, stops[i][0] + f * (stops[i + 1][0] - stops[i][0]),
                         stops[i][1] + f * (stops[i + 1][1] - stops[i][1]),
                         stops[i][2] + f * (stops[i + 1][2] - stops[i][2]));
}

static void text_at(cairo_t *cr, double x, double y, double size, const char *text)
{
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_move_to(cr, x, y);
    cairo_show_text(cr, text);
}

static double text_width(cairo_t *cr, double size, const char *text)
{
    cairo_text_extents_t e;
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_text_extents(cr, text, &e);
    return e.x_advance;
}

static void text_right(cairo_t *cr, double x, double y, double size, const char *text)
{
    text_at(cr, x - text_width(cr, size, text), y, size, text);
}

/* Stage names above columns, slanted so long names fit. */
static void slanted(cairo_t *cr, double x, double y, const char *name)
{
    char cut[40];
    snprintf(cut, sizeof cut, "%.36s", name);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, -M_PI / 4);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, 0, 0, 11, cut);
    cairo_restore(cr);
}

static void title(cairo_t *cr, const char *text, const char *sub)
{
    cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
    text_at(cr, MARGIN, 22, 15, text);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    text_at(cr, MARGIN, 39, 11, sub);
}

static void fmt_seconds(char *buf, size_t len, double s)
{
    double a = fabs(s);
    if (a == 0)
        snprintf(buf, len, "0");
    else if (a >= 1)
        snprintf(buf, len, "%.2f s", s);
    else if (a >= 1e-3)
        snprintf(buf, len, "%.1f ms", s * 1e3);
    else
        snprintf(buf, len, "%.0f us", s * 1e6);
}

static void fmt_value(char *buf, size_t len, enum sf_heat_metric m, double v)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else if (m == SF_HEAT_LEADS)
        snprintf(buf, len, "%.0f", v);
    else
        fmt_seconds(buf, len, v);
}

/* ---- heatmap ---------------------------------------------------------------- */

static void heatmap_measure(const sf_heatmap *h, struct plot_layout *l)
{
    l->cell_w = h->n_stages > 12 ? 48 : 96;
    l->cell_h = h->n_rows <= 32 ? 22 : fmax(3.0, 704.0 / h->n_rows);
    l->grid_x = MARGIN + RANK_LABEL_W + MARK_W;
    l->grid_y = TITLE_H + STAGE_LABEL_H;
    l->width = ceil(l->grid_x + h->n_stages * l->cell_w + LEGEND_W);
    l->height = ceil(l->grid_y + fmax(h->n_rows * l->cell_h, 240) + 40);
}

static void row_label(char *buf, size_t len, const sf_heatmap *h, uint32_t row)
{
    if (h->row_first[row] == h->row_last[row])
        snprintf(buf, len, "rank %u", h->row_first[row]);
    else
        snprintf(buf, len, "ranks %u-%u", h->row_first[row], h->row_last[row]);
}

static void heatmap_marks(cairo_t *cr, const sf_heatmap *h, const struct plot_layout *l,
                          uint32_t row)
{
    double y = l->grid_y + row * l->cell_h, cy = y + l->cell_h / 2;
    double r = fmin(5, fmax(2, l->cell_h / 2 - 1));
    if (h->marks[row] & SF_HEAT_SUSPECT) {
        cairo_set_source_rgb(cr, 0.95, 0.55, 0.0);
        cairo_arc(cr, l->grid_x - MARK_W / 2, cy, r, 0, 2 * M_PI);
        cairo_fill(cr);
    }
    if (h->marks[row] & SF_HEAT_STRAGGLER) {
        cairo_set_source_rgb(cr, 0.0, 0.35, 0.9);
        cairo_set_line_width(cr, 2.5);
        cairo_rectangle(cr, l->grid_x, y, h->n_stages * l->cell_w, l->cell_h);
        cairo_stroke(cr);
        double gx = l->grid_x + h->n_stages * l->cell_w;
        cairo_move_to(cr, gx + 4, cy);
        cairo_line_to(cr, gx + 14, cy - 6);
        cairo_line_to(cr, gx + 14, cy + 6);
        cairo_close_path(cr);
        cairo_fill(cr);
        text_at(cr, gx + 18, cy + 4, 11, "straggler");
    }
}

static void heatmap_cells(cairo_t *cr, const sf_heatmap *h, const struct plot_layout *l)
{
    char buf[64];
    bool values = l->cell_h >= 16;
    for (uint32_t row = 0; row < h->n_rows; row++)
        for (uint32_t k = 0; k < h->n_stages; k++) {
            size_t c = (size_t)row * h->n_stages + k;
            double x = l->grid_x + k * l->cell_w, y = l->grid_y + row * l->cell_h;
            if (isnan(h->value[c]))
                cairo_set_source_rgb(cr, 0.86, 0.86, 0.86);
            else
                heat_colour(cr, h->heat[c]);
            cairo_rectangle(cr, x, y, l->cell_w, l->cell_h);
            cairo_fill(cr);
            if (!values)
                continue;
            fmt_value(buf, sizeof buf, h->metric, h->value[c]);
            double grey = h->heat[c] > 0.6 ? 1.0 : 0.1;
            cairo_set_source_rgb(cr, grey, grey, grey);
            text_right(cr, x + l->cell_w - 6, y + l->cell_h / 2 + 4, 11, buf);
        }
}

static void heatmap_axes(cairo_t *cr, const sf_heatmap *h, const struct plot_layout *l)
{
    char buf[64];
    for (uint32_t k = 0; k < h->n_stages; k++)
        slanted(cr, l->grid_x + (k + 0.5) * l->cell_w, l->grid_y - 6, h->names[k]);
    uint32_t every = (uint32_t)ceil(12.0 / l->cell_h);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (uint32_t row = 0; row < h->n_rows; row += every) {
        row_label(buf, sizeof buf, h, row);
        text_right(cr, l->grid_x - MARK_W - 4, l->grid_y + row * l->cell_h + l->cell_h / 2 + 4, 11,
                   buf);
    }
    cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, l->grid_x, l->grid_y, h->n_stages * l->cell_w, h->n_rows * l->cell_h);
    cairo_stroke(cr);
}

static void heatmap_legend(cairo_t *cr, const sf_heatmap *h, const struct plot_layout *l)
{
    char lo[64], hi[64];
    double x = l->grid_x + h->n_stages * l->cell_w + 90, y = l->grid_y, bar_h = 160;
    for (int i = 0; i < 64; i++) {
        heat_colour(cr, 1 - i / 63.0);
        cairo_rectangle(cr, x, y + i * bar_h / 64, 16, bar_h / 64 + 0.5);
        cairo_fill(cr);
    }
    bool cooler_high = h->metric == SF_HEAT_SLACK; /* less slack is hotter */
    fmt_value(hi, sizeof hi, h->metric, cooler_high ? h->lo : h->hi);
    fmt_value(lo, sizeof lo, h->metric,
              cooler_high ? h->hi : (h->metric == SF_HEAT_LEADS ? 0 : h->lo));
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, x + 22, y + 10, 11, hi);
    text_at(cr, x + 22, y + bar_h, 11, lo);
    double ky = y + bar_h + 30;
    cairo_set_source_rgb(cr, 0.95, 0.55, 0.0);
    cairo_arc(cr, x + 8, ky - 4, 5, 0, 2 * M_PI);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, x + 22, ky, 11, "suspect");
    cairo_set_source_rgb(cr, 0.0, 0.35, 0.9);
    cairo_rectangle(cr, x + 2, ky + 10, 12, 10);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, x + 22, ky + 20, 11, "straggler");
}

static const char *metric_caption(enum sf_heat_metric m)
{
    switch (m) {
    case SF_HEAT_LEADS:
        return "lead counts: complete steps the rank alone led the stage's boundary";
    case SF_HEAT_SLACK:
        return "mean slack: frontier minus the rank's time at the boundary (less is hotter)";
    case SF_HEAT_CHANGE:
        return "change: the rank's median stage time minus its baseline median";
    }
    return "";
}

static void draw_heatmap(cairo_t *cr, const struct plot_picture *p, const struct plot_layout *l)
{
    const sf_heatmap *h = p->heatmap;
    char sub[300];
    int n = snprintf(sub, sizeof sub, "%s; %u complete steps, %u ranks", metric_caption(h->metric),
                     h->steps, h->n_ranks);
    if (h->ranks_per_row > 1)
        snprintf(sub + n, sizeof sub - (size_t)n, "; rows binned, %u ranks per row (%s)",
                 h->ranks_per_row,
                 h->metric == SF_HEAT_LEADS   ? "summed"
                 : h->metric == SF_HEAT_SLACK ? "smallest"
                                              : "largest");
    title(cr, p->title, sub);
    heatmap_cells(cr, h, l);
    heatmap_axes(cr, h, l);
    for (uint32_t row = 0; row < h->n_rows; row++)
        heatmap_marks(cr, h, l, row);
    heatmap_legend(cr, h, l);
}

/* ---- shared: stage legend and a time axis ---------------------------------- */

static void stage_legend(cairo_t *cr, double x, double y, const char (*names)[SF_MAX_NAME_LEN + 1],
                         uint32_t n)
{
    char cut[40];
    for (uint32_t k = 0; k < n; k++) {
        stage_colour(cr, k);
        cairo_rectangle(cr, x, y + k * 18 - 10, 12, 12);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        snprintf(cut, sizeof cut, "%.36s", names[k]);
        text_at(cr, x + 18, y + k * 18, 11, cut);
    }
}

static void time_axis(cairo_t *cr, double x, double y0, double h, double max_s)
{
    char buf[64];
    cairo_set_line_width(cr, 1);
    for (int i = 0; i <= 4; i++) {
        double y = y0 + h - i * h / 4;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + 4, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        fmt_seconds(buf, sizeof buf, max_s * i / 4);
        text_right(cr, x - 4, y + 4, 10, buf);
    }
}

/* ---- frontier ledger -------------------------------------------------------- */

#define PLOT_H 360.0
#define PLOT_X (MARGIN + 70.0)
#define PLOT_Y (TITLE_H + 14.0)

static void ledger_measure(const sf_ledger *g, struct plot_layout *l)
{
    l->cell_w = fmin(24, fmax(3, 960.0 / (g->n_steps ? g->n_steps : 1)));
    l->cell_h = 14;
    l->grid_x = PLOT_X;
    l->grid_y = PLOT_Y;
    l->width = ceil(fmax(MIN_WIDTH, PLOT_X + g->n_steps * l->cell_w + LEGEND_W));
    l->height = ceil(PLOT_Y + PLOT_H + 40 + g->n_stages * l->cell_h + 50);
}

/* A rank's colour in the leader strip: rank ids spread over hues. */
static void rank_colour(cairo_t *cr, uint32_t rank)
{
    double hue = fmod(rank * 0.61803398875, 1.0) * 6;
    int i = (int)hue;
    double f = hue - i, q = 1 - f;
    double rgb[6][3] = {{1, f, 0}, {q, 1, 0}, {0, 1, f}, {0, q, 1}, {f, 0, 1}, {1, 0, q}};
    cairo_set_source_rgb(cr, 0.35 + 0.5 * rgb[i][0], 0.35 + 0.5 * rgb[i][1],
                         0.35 + 0.5 * rgb[i][2]);
}

static void ledger_bars(cairo_t *cr, const sf_ledger *g, const struct plot_layout *l, double scale)
{
    for (uint32_t i = 0; i < g->n_steps; i++) {
        double x = PLOT_X + i * l->cell_w, y = PLOT_Y + PLOT_H;
        for (uint32_t k = 0; k < g->n_stages; k++) {
            double h = g->advance[(size_t)i * g->n_stages + k] * scale;
            stage_colour(cr, k);
            cairo_rectangle(cr, x, y - h, fmax(1, l->cell_w - 1), h);
            cairo_fill(cr);
            y -= h;
        }
    }
}

static void ledger_leaders(cairo_t *cr, const sf_ledger *g, const struct plot_layout *l)
{
    char buf[16];
    double y0 = PLOT_Y + PLOT_H + 40;
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, PLOT_X, y0 - 8, 11, "leader rank at each boundary (blank: no unique leader)");
    for (uint32_t k = 0; k < g->n_stages; k++) {
        double y = y0 + k * l->cell_h;
        stage_colour(cr, k);
        cairo_rectangle(cr, PLOT_X - 12, y + 2, 8, l->cell_h - 4);
        cairo_fill(cr);
        for (uint32_t i = 0; i < g->n_steps; i++) {
            uint32_t r = g->leader[(size_t)i * g->n_stages + k];
            if (r == SF_NO_RANK)
                continue;
            double x = PLOT_X + i * l->cell_w;
            rank_colour(cr, r);
            cairo_rectangle(cr, x, y, fmax(1, l->cell_w - 1), l->cell_h - 1);
            cairo_fill(cr);
            if (l->cell_w >= 14) {
                snprintf(buf, sizeof buf, "%u", r);
                cairo_set_source_rgb(cr, 0, 0, 0);
                text_at(cr, x + 1, y + l->cell_h - 3, 8, buf);
            }
        }
    }
}

static void draw_ledger(cairo_t *cr, const struct plot_picture *p, const struct plot_layout *l)
{
    const sf_ledger *g = p->ledger;
    char sub[200];
    snprintf(sub, sizeof sub,
             "frontier advances per complete step, stacked by stage: a bar is the step's exposed "
             "time; %u steps",
             g->n_steps);
    title(cr, p->title, sub);
    double max_s = g->max_step_ns / 1e9;
    double scale = g->max_step_ns > 0 ? PLOT_H / g->max_step_ns : 0;
    time_axis(cr, PLOT_X, PLOT_Y, PLOT_H, max_s);
    ledger_bars(cr, g, l, scale);
    ledger_leaders(cr, g, l);
    char buf[64];
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    if (g->n_steps > 0) {
        snprintf(buf, sizeof buf, "step %lld", (long long)g->step[0]);
        text_at(cr, PLOT_X, PLOT_Y + PLOT_H + 14, 10, buf);
        snprintf(buf, sizeof buf, "step %lld", (long long)g->step[g->n_steps - 1]);
        text_right(cr, PLOT_X + g->n_steps * l->cell_w, PLOT_Y + PLOT_H + 14, 10, buf);
    }
    stage_legend(cr, PLOT_X + g->n_steps * l->cell_w + 20, PLOT_Y + 10, g->names, g->n_stages);
}

/* ---- window series ---------------------------------------------------------- */

#define LINE_H 200.0
#define SHARE_H 200.0

static void series_measure(const sf_window_series *w, struct plot_layout *l)
{
    l->cell_w = fmin(60, fmax(6, 960.0 / (w->n_points ? w->n_points : 1)));
    l->cell_h = SHARE_H;
    l->grid_x = PLOT_X;
    l->grid_y = PLOT_Y;
    l->width = ceil(fmax(MIN_WIDTH, PLOT_X + w->n_points * l->cell_w + LEGEND_W));
    l->height = ceil(PLOT_Y + LINE_H + 30 + SHARE_H + 170);
}

static void series_line(cairo_t *cr, const sf_window_series *w, const struct plot_layout *l)
{
    int64_t max = 1;
    for (uint32_t i = 0; i < w->n_points; i++)
        if (w->points[i].mean_step_ns > max)
            max = w->points[i].mean_step_ns;
    time_axis(cr, PLOT_X, PLOT_Y, LINE_H, max / 1e9);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_set_line_width(cr, 2);
    for (uint32_t i = 0; i < w->n_points; i++) {
        double x = PLOT_X + (i + 0.5) * l->cell_w;
        double y = PLOT_Y + LINE_H - LINE_H * w->points[i].mean_step_ns / max;
        if (i == 0)
            cairo_move_to(cr, x, y);
        else
            cairo_line_to(cr, x, y);
    }
    cairo_stroke(cr);
    char buf[48];
    for (uint32_t i = 0; i < w->n_points; i++) {
        const sf_window_point *pt = &w->points[i];
        double x = PLOT_X + (i + 0.5) * l->cell_w;
        double y = PLOT_Y + LINE_H - LINE_H * pt->mean_step_ns / max;
        cairo_set_source_rgb(cr, pt->changed ? 0.85 : 0.1, 0.1, 0.1);
        cairo_arc(cr, x, y, pt->changed ? 5 : 3, 0, 2 * M_PI);
        cairo_fill(cr);
        if (pt->changed && !isnan(pt->slowdown)) {
            snprintf(buf, sizeof buf, "x%.2f", pt->slowdown);
            text_at(cr, x - 12, y - 9, 10, buf);
        }
    }
}

static void series_shares(cairo_t *cr, const sf_window_series *w, const struct plot_layout *l)
{
    double y0 = PLOT_Y + LINE_H + 30;
    char buf[400];
    for (uint32_t i = 0; i < w->n_points; i++) {
        const sf_window_point *pt = &w->points[i];
        double x = PLOT_X + i * l->cell_w, y = y0 + SHARE_H;
        for (uint32_t k = 0; k < w->n_stages; k++) {
            if (isnan(pt->share[k]))
                continue;
            double h = SHARE_H * pt->share[k];
            stage_colour(cr, k);
            cairo_rectangle(cr, x, y - h, fmax(1, l->cell_w - 2), h);
            cairo_fill(cr);
            y -= h;
        }
        int n = snprintf(buf, sizeof buf, "w%lld", (long long)pt->index);
        if (pt->straggler != SF_NO_RANK)
            n += snprintf(buf + n, sizeof buf - (size_t)n, " straggler %u", pt->straggler);
        for (int b = 0; b < SF_LABEL_COUNT && n < (int)sizeof buf; b++)
            if (pt->labels & (1u << b))
                n += snprintf(buf + n, sizeof buf - (size_t)n, " %s",
                              sf_label_name((enum sf_label)b));
        cairo_save(cr);
        cairo_translate(cr, x + l->cell_w / 2 + 3, y0 + SHARE_H + 6);
        cairo_rotate(cr, M_PI / 2);
        cairo_set_source_rgb(cr, pt->changed ? 0.85 : 0.2, 0.1, 0.1);
        text_at(cr, 0, 0, l->cell_w >= 12 ? 9 : 7, buf);
        cairo_restore(cr);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    text_right(cr, PLOT_X - 4, y0 + 10, 10, "100%");
    text_right(cr, PLOT_X - 4, y0 + SHARE_H, 10, "0%");
}

static void draw_series(cairo_t *cr, const struct plot_picture *p, const struct plot_layout *l)
{
    const sf_window_series *w = p->series;
    title(cr, p->title,
          "exposed step time per window (red: changed against the baseline, with the "
          "slowdown); stage shares and labels below");
    series_line(cr, w, l);
    series_shares(cr, w, l);
    stage_legend(cr, PLOT_X + w->n_points * l->cell_w + 20, PLOT_Y + 10, w->names, w->n_stages);
}

/* ---- surfaces --------------------------------------------------------------- */

/* ---- pipeline stage x step ---------------------------------------------------- */

#define PIPE_X (MARGIN + 120.0)
#define PIPE_Y (TITLE_H + 30.0)

static void pipeline_measure(const sf_pipeline_picture *g, struct plot_layout *l)
{
    l->cell_w = fmin(24, fmax(3, 960.0 / (g->n_steps ? g->n_steps : 1)));
    l->cell_h = fmin(40, fmax(4, 480.0 / (g->n_stages ? g->n_stages : 1)));
    l->grid_x = PIPE_X;
    l->grid_y = PIPE_Y;
    l->width = ceil(fmax(MIN_WIDTH, PIPE_X + g->n_steps * l->cell_w + LEGEND_W));
    l->height = ceil(PIPE_Y + g->n_stages * l->cell_h + 70);
}

/* Cells: each stage's largest lateness against its cohorts at the step, on
 * the heat scale up to the window's largest; the first delay of each step
 * framed in blue. */
static void pipeline_cells(cairo_t *cr, const sf_pipeline_picture *g, const struct plot_layout *l)
{
    double max = g->max_delay_ns > 0 ? (double)g->max_delay_ns : 1;
    for (uint32_t i = 0; i < g->n_steps; i++)
        for (uint32_t q = 0; q < g->n_stages; q++) {
            double x = l->grid_x + i * l->cell_w, y = l->grid_y + q * l->cell_h;
            heat_colour(cr, g->delay[(size_t)i * g->n_stages + q] / max);
            cairo_rectangle(cr, x, y, l->cell_w, l->cell_h);
            cairo_fill(cr);
        }
    cairo_set_source_rgb(cr, 0.0, 0.35, 0.9);
    cairo_set_line_width(cr, fmin(2.5, fmax(1, l->cell_w / 6)));
    for (uint32_t i = 0; i < g->n_steps; i++) {
        if (g->origin[i] == SF_NO_RANK)
            continue;
        double x = l->grid_x + i * l->cell_w, y = l->grid_y + g->origin[i] * l->cell_h;
        cairo_rectangle(cr, x + 1, y + 1, l->cell_w - 2, l->cell_h - 2);
        cairo_stroke(cr);
    }
}

static void draw_pipeline(cairo_t *cr, const struct plot_picture *p, const struct plot_layout *l)
{
    const sf_pipeline_picture *g = p->pipeline;
    char sub[300], buf[64];
    if (g->has_origin)
        snprintf(sub, sizeof sub,
                 "lateness against the cohort per pipeline stage and complete step; framed: the "
                 "step's first delay. Origin: stage %u, rank %u, %s",
                 g->origin_pp, g->origin_rank, g->origin_stage);
    else
        snprintf(sub, sizeof sub,
                 "lateness against the cohort per pipeline stage and complete step; no step had "
                 "a delay");
    title(cr, p->title, sub);
    pipeline_cells(cr, g, l);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    uint32_t every = (uint32_t)ceil(12.0 / l->cell_h);
    for (uint32_t q = 0; q < g->n_stages; q += every) {
        snprintf(buf, sizeof buf, "pipeline stage %u", q);
        text_right(cr, l->grid_x - 6, l->grid_y + q * l->cell_h + l->cell_h / 2 + 4, 11, buf);
    }
    double below = l->grid_y + g->n_stages * l->cell_h + 16;
    if (g->n_steps > 0) {
        snprintf(buf, sizeof buf, "step %lld", (long long)g->step[0]);
        text_at(cr, l->grid_x, below, 10, buf);
        snprintf(buf, sizeof buf, "step %lld", (long long)g->step[g->n_steps - 1]);
        text_right(cr, l->grid_x + g->n_steps * l->cell_w, below, 10, buf);
    }
    double lx = l->grid_x + g->n_steps * l->cell_w + 20;
    for (int i = 0; i <= 10; i++) {
        heat_colour(cr, i / 10.0);
        cairo_rectangle(cr, lx, l->grid_y + (10 - i) * 12, 16, 12);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    fmt_seconds(buf, sizeof buf, g->max_delay_ns / 1e9);
    text_at(cr, lx + 22, l->grid_y + 10, 10, buf);
    text_at(cr, lx + 22, l->grid_y + 130, 10, "0");
}

void plot_measure(const struct plot_picture *p, struct plot_layout *ret)
{
    *ret = (struct plot_layout){0};
    if (p->heatmap)
        heatmap_measure(p->heatmap, ret);
    else if (p->pipeline)
        pipeline_measure(p->pipeline, ret);
    else if (p->ledger)
        ledger_measure(p->ledger, ret);
    else
        series_measure(p->series, ret);
}

static cairo_status_t write_stream(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

static void draw(cairo_t *cr, const struct plot_picture *p, const struct plot_layout *l)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    if (p->heatmap)
        draw_heatmap(cr, p, l);
    else if (p->pipeline)
        draw_pipeline(cr, p, l);
    else if (p->ledger)
        draw_ledger(cr, p, l);
    else
        draw_series(cr, p, l);
}

static cairo_surface_t *make_surface(enum plot_format f, FILE *out, const struct plot_layout *l)
{
    cairo_surface_t *s;
    switch (f) {
    case PLOT_SVG:
        s = cairo_svg_surface_create_for_stream(write_stream, out, l->width, l->height);
        cairo_svg_surface_set_document_unit(s, CAIRO_SVG_UNIT_PX);
        return s;
    case PLOT_PDF:
        return cairo_pdf_surface_create_for_stream(write_stream, out, l->width, l->height);
    case PLOT_PNG:
        return cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)l->width, (int)l->height);
    }
    return NULL;
}

int plot_render(const struct plot_picture *p, enum plot_format format, FILE *out, char *errbuf,
                size_t errlen)
{
    struct plot_layout l;
    plot_measure(p, &l);
    cairo_surface_t *s = make_surface(format, out, &l);
    cairo_t *cr = cairo_create(s);
    draw(cr, p, &l);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS && format == PLOT_PNG)
        st = cairo_surface_write_to_png_stream(s, write_stream, out);
    cairo_surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (st == CAIRO_STATUS_NO_MEMORY)
        return -ENOMEM;
    if (st != CAIRO_STATUS_SUCCESS) {
        snprintf(errbuf, errlen, "%s", cairo_status_to_string(st));
        return -EIO;
    }
    return 0;
}

void plot_release(void)
{
    cairo_debug_reset_static_data();
    FcFini();
}

/*
 * Cairo drawing of the picture models (daemon/report/picture.h) into SVG, PNG
 * or PDF from one drawing. Computes nothing about the job: every number comes
 * from the model; this file owns layout, colour and text only.
 */
#ifndef SFCTL_PLOT_CAIRO_H
#define SFCTL_PLOT_CAIRO_H

#include <stdio.h>

#include "picture.h"

enum plot_format { PLOT_SVG, PLOT_PNG, PLOT_PDF };

/* One picture to draw: exactly one model is set. */
struct plot_picture {
    const char *title;
    const sf_heatmap *heatmap;
    const sf_ledger *ledger;
    const sf_window_series *series;
    const sf_pipeline_picture *pipeline;
};

/* Where things landed, for the --data JSON (pixels, origin top left). */
struct plot_layout {
    double width, height;
    double grid_x, grid_y, cell_w, cell_h; /* heatmap cells; bars for the others */
};

void plot_measure(const struct plot_picture *p, struct plot_layout *ret);
/* Draws onto out in the given format. -EIO when cairo or the stream failed
 * (the reason is in errbuf), -ENOMEM. */
int plot_render(const struct plot_picture *p, enum plot_format format, FILE *out, char *errbuf,
                size_t errlen);

/* Frees cairo's and fontconfig's process-wide caches (font lists), so leak
 * checkers see a clean exit; call once, after the last render. */
void plot_release(void);

#endif

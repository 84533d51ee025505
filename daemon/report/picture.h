/*
 * The numbers behind sfctl's pictures (docs/PICTURES.md): a window's rank x
 * stage heatmap, its per-step frontier ledger, and a job's windows. Pure:
 * built from a window's rows, summary and report, no drawing and no I/O, so
 * the picture and its --data JSON come from one model.
 */
#ifndef SF_REPORT_PICTURE_H
#define SF_REPORT_PICTURE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <stagefrontier/accounting.h>
#include <stagefrontier/change.h>

/* Heatmap rows beyond this are binned: consecutive ranks share a row. */
#define SF_HEATMAP_MAX_ROWS 256

enum sf_heat_metric { SF_HEAT_LEADS, SF_HEAT_SLACK, SF_HEAT_CHANGE };
const char *sf_heat_metric_name(enum sf_heat_metric m);
/* -ENOENT for an unknown name. */
int sf_heat_metric_parse(const char *name, enum sf_heat_metric *ret);

#define SF_HEAT_SUSPECT 1u
#define SF_HEAT_STRAGGLER 2u

typedef struct sf_heatmap {
    enum sf_heat_metric metric;
    int64_t window;
    uint32_t segment;
    uint32_t steps; /* complete steps the cells are computed over */
    uint32_t n_stages;
    char names[SF_MAX_STAGES][SF_MAX_NAME_LEN + 1];
    uint32_t n_ranks;               /* ranks in the window */
    uint32_t n_rows;                /* drawn rows: n_ranks, or bins above max_rows */
    uint32_t ranks_per_row;         /* 1 unless binned */
    uint32_t *row_first, *row_last; /* rank ids each row covers (inclusive) */
    double *value;  /* [n_rows][n_stages]: leads (steps), slack or change (s); NaN: none */
    double *heat;   /* [n_rows][n_stages] in 0..1, the colour; 0 for NaN cells */
    uint8_t *marks; /* [n_rows] SF_HEAT_* */
    double lo, hi;  /* range of the defined values */
    uint32_t hot_row, hot_stage; /* the hottest cell (largest heat, first in order) */
    bool has_straggler;
    uint32_t straggler_rank, straggler_stage;
} sf_heatmap;

/* The heatmap of one window. leads: complete steps the rank led the stage's
 * boundary alone (bins: summed); slack: mean of frontier minus the rank's
 * prefix at the boundary over complete steps, in s (bins: the smallest, the
 * rank nearest the frontier; hotter when smaller); change: the rank's median
 * stage duration minus its baseline median, in s (bins: the largest).
 * rows/n_rows are the window's rows (slack and change read them). -ENODATA
 * without a complete step, -ENOENT for change without a baseline, -ENOTSUP
 * for change against a baseline without per-rank medians (mergeable mode). */
int sf_heatmap_build(const sf_summary *summary, const sf_report *report, const sf_reference *ref,
                     const sf_row *rows, size_t n_rows, enum sf_heat_metric metric,
                     uint32_t max_rows, sf_heatmap **ret);
void sf_heatmap_free(sf_heatmap *h);

/* The exposed-time ledger of a window: per complete step the frontier
 * advance of every stage (they sum to the step's exposed time) and the
 * unique leader at every boundary (SF_NO_RANK on a tie within tolerance). */
typedef struct sf_ledger {
    int64_t window;
    uint32_t segment;
    uint32_t n_stages;
    char names[SF_MAX_STAGES][SF_MAX_NAME_LEN + 1];
    uint32_t n_steps;
    int64_t *step;    /* [n_steps] step index */
    int64_t *advance; /* [n_steps][n_stages] ns */
    uint32_t *leader; /* [n_steps][n_stages] */
    int64_t max_step_ns;
} sf_ledger;

int sf_ledger_build(const sf_summary *summary, const sf_report *report, sf_ledger **ret);
void sf_ledger_free(sf_ledger *l);

/* The pipeline view of a window (docs/ACCOUNTING.md, "Pipeline view") as
 * pipeline stage x complete step: each cell the largest lateness the
 * stage's ranks had against their cohorts at that step, and per step the
 * pipeline stage of its first delay. */
typedef struct sf_pipeline_picture {
    int64_t window;
    uint32_t segment;
    uint32_t n_stages; /* pipeline stages */
    uint32_t n_steps;
    int64_t *step;    /* [n_steps] step index */
    int64_t *delay;   /* [n_steps][n_stages] ns */
    uint32_t *origin; /* [n_steps] pipeline stage of the first delay, or SF_NO_RANK */
    int64_t max_delay_ns;
    uint32_t hot_step, hot_stage; /* the largest cell (first step, then first stage, on ties) */
    bool has_origin;              /* the window's origin (report->pipeline) */
    uint32_t origin_pp, origin_rank;
    char origin_stage[SF_MAX_NAME_LEN + 1];
} sf_pipeline_picture;

/* -ENODATA without a complete step, -ENOENT when the report has no pipeline
 * view (no coordinates that make cohorts, or one pipeline stage). */
int sf_pipeline_picture_build(const sf_summary *summary, const sf_report *report,
                              sf_pipeline_picture **ret);
void sf_pipeline_picture_free(sf_pipeline_picture *p);

/* A job's windows: exposed step time and stage shares per window, with its
 * labels and change. Stages are the union of the windows' stage names. */
typedef struct sf_window_point {
    int64_t index;
    uint32_t segment;
    uint32_t steps;
    int64_t mean_step_ns;        /* exposed time over complete steps; 0 without steps */
    uint32_t labels;             /* enum sf_label bits */
    bool changed;                /* the change has a non-empty route */
    double slowdown;             /* NaN without a change */
    uint32_t straggler;          /* SF_NO_RANK when no verdict */
    double share[SF_MAX_STAGES]; /* by union stage index; NaN when absent */
} sf_window_point;

typedef struct sf_window_series {
    uint32_t n_stages;
    char names[SF_MAX_STAGES][SF_MAX_NAME_LEN + 1];
    uint32_t n_points, cap_points;
    sf_window_point *points;
} sf_window_series;

/* Appends a window (in order). -ENOMEM; -E2BIG past SF_MAX_STAGES stage names. */
int sf_window_series_add(sf_window_series *w, const sf_report *report);
void sf_window_series_clear(sf_window_series *w);

/* The --data JSON of each model. */
int sf_heatmap_to_json(const sf_heatmap *h, json_t **ret);
int sf_ledger_to_json(const sf_ledger *l, json_t **ret);
int sf_window_series_to_json(const sf_window_series *w, json_t **ret);
int sf_pipeline_picture_to_json(const sf_pipeline_picture *p, json_t **ret);

#endif

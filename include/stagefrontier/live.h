/*
 * StageFrontier live verdict (docs/LIVE.md): a sequential test run at every
 * complete step, so that a slow rank is named within a few steps of its onset
 * instead of at the close of its window. Pure like the rest of the core: no
 * I/O, no clocks (the caller passes the wall time it wants stamped), no
 * globals, deterministic; memory O(ranks x stages) once calibrated.
 *
 * Flow: sf_live_new -> sf_live_calibrate (the job's first clean complete
 * steps, e.g. the dense rows of its reference windows) -> sf_live_step at
 * every complete step -> sf_live_verdict / the event it returns.
 */
#ifndef STAGEFRONTIER_LIVE_H
#define STAGEFRONTIER_LIVE_H

#include <stagefrontier/accounting.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SF_LIVE_MAX_CALIBRATION_STEPS 4096

typedef struct sf_live_config {
    /* The gate: expected complete steps between two false verdicts of one
     * job. Each cell's CUSUM threshold is derived from it (sf_live_threshold),
     * with the job's rate split evenly over its cells. */
    double false_alarm_steps;
    /* The design shift, in baseline standard deviations: the allowance of
     * each CUSUM is half of it. */
    double shift_sigmas;
    /* The smallest effect worth a verdict, as a fraction of the baseline's
     * median step: the allowance is at least half of it, so a real but
     * negligible shift never alarms. */
    double min_effect_frac;
    /* The effect a rank's noisy cells are still tested for, as a fraction
     * of the baseline's median step (docs/LIVE.md, "The slow test"): where
     * half the design shift in sigmas is above half of this effect (sigma
     * larger than this share of the step / shift_sigmas), the cell runs a
     * second CUSUM with this allowance, so a shift smaller than its sigma
     * still accumulates. 0: none; below min_effect_frac, that floor. */
    double slow_effect_frac;
    /* The same for a change of the whole job (a stage's median over the
     * ranks): larger, since a shared machine's load moves every rank's
     * speed by tens of percent between hours, which is no fault. */
    double change_min_frac;
    /* Complete steps the baseline is estimated from, 8..4096. */
    uint32_t calibration_steps;
    /* Half-life, in steps, of the tracker that lets a quiet cell's baseline
     * follow a slow drift (docs/LIVE.md, "Drift"); 0 keeps it fixed. */
    double baseline_halflife_steps;
} sf_live_config;

void sf_live_config_default(sf_live_config *ret);
int sf_live_config_validate(const sf_live_config *c);

/* The threshold h (in standard deviations) of a one-sided CUSUM with
 * allowance k (standard deviations) whose in-control average run length
 * is arl0 steps, from Siegmund's approximation
 *   ARL0(h) = (exp(2k(h + 1.166)) - 2k(h + 1.166) - 1) / (2 k^2),
 * solved by bisection. NaN for k <= 0 or arl0 < 1. */
double sf_live_threshold(double k, double arl0);

enum sf_live_kind { SF_LIVE_NONE = 0, SF_LIVE_STRAGGLER, SF_LIVE_CHANGE, SF_LIVE_STALL };
const char *sf_live_kind_name(enum sf_live_kind kind);

/* A verdict: present while kind != SF_LIVE_NONE. */
typedef struct sf_live_verdict {
    enum sf_live_kind kind;
    uint32_t rank;       /* SF_NO_RANK for a change of the whole job */
    uint32_t stage;      /* the own-work stage the delay comes from */
    uint32_t sync_stage; /* the synchronizing stage it holds up; UINT32_MAX: none */
    int64_t since_step;  /* the change point: first step of the current excursion */
    int64_t detected_step;
    int64_t detected_at_ms; /* wall clock as given to sf_live_step */
    double effect_s;        /* mean shift since since_step, seconds */
    /* Evidence, in standard deviations of the cell's baseline. */
    double statistic, threshold;
    int64_t baseline_ns, sigma_ns; /* the cell's baseline median and scale */
    uint32_t cell_steps;           /* steps since since_step */
    bool arrival;                  /* detected at an arrival point (else own work) */
    /* Detected on the rank's issue lag at sync_stage (its collective
     * started late after an on-time arrival); stage is then sync_stage. */
    bool communication;
} sf_live_verdict;

/* What one step did to the verdict. */
enum sf_live_event { SF_LIVE_NO_EVENT = 0, SF_LIVE_STARTED, SF_LIVE_ENDED, SF_LIVE_REPLACED };

typedef struct sf_live sf_live;

/* A live test for one job shape. -EINVAL for a bad config or world size 0. */
int sf_live_new(const sf_schema *schema, uint32_t world_size, const sf_live_config *config,
                sf_live **ret);
void sf_live_free(sf_live *live);
/* Offers one clean complete step to the baseline: d holds world_size rows of
 * n_stages durations, rank-major (rank 0 first). Returns 1 when the baseline
 * became complete with this step, 0 while collecting or once complete. */
int sf_live_calibrate(sf_live *live, const int64_t *d);
/* The same with the step's issue lags (docs/LIVE.md, "What is tested"):
 * lag holds world_size rows of one lag per synchronizing stage in stage
 * order (as sf_row.issue_lag), -1 where a rank's stage carried no issue
 * mark; NULL for a step without any. */
int sf_live_calibrate_lags(sf_live *live, const int64_t *d, const int64_t *lag);
/* The complete steps of a dense summary, in step order (the windows of the
 * job's reference). Returns 1 when the baseline became complete. */
int sf_live_calibrate_summary(sf_live *live, const sf_summary *summary);
/* The same with the issue lags of the summary's steps: lags is
 * [summary->n_steps][world_size][synchronizing stages], laid out as the
 * dense durations, -1 unmarked; NULL for none. */
int sf_live_calibrate_summary_lags(sf_live *live, const sf_summary *summary, const int64_t *lags);
bool sf_live_calibrated(const sf_live *live);
/* Tests one complete step (layout as sf_live_calibrate; steps ascending).
 * Before calibration it does nothing. *ret_event says whether a verdict
 * started, ended, or ended and another started; *ret_ended (may be NULL)
 * receives the verdict that ended. -EINVAL for a step not after the last. */
int sf_live_step(sf_live *live, int64_t step, const int64_t *d, int64_t wall_ms,
                 enum sf_live_event *ret_event, sf_live_verdict *ret_ended);
/* The same with the step's issue lags (layout as sf_live_calibrate_lags;
 * NULL: none). A step where some rank carried no mark at a synchronizing
 * stage leaves that stage's issue-lag cells as they were. */
int sf_live_step_lags(sf_live *live, int64_t step, const int64_t *d, const int64_t *lag,
                      int64_t wall_ms, enum sf_live_event *ret_event, sf_live_verdict *ret_ended);
/* Number of synchronizing stages (the width of a rank's issue lags). */
uint32_t sf_live_sync_stages(const sf_live *live);
/* The verdict in force, or NULL. */
const sf_live_verdict *sf_live_verdict_get(const sf_live *live);
/* Number of cells tested (per-rank own work, per-rank arrivals, job-wide
 * stages, and the per-rank issue lags whose baseline had marks). */
uint32_t sf_live_cells(const sf_live *live);
uint64_t sf_live_steps_tested(const sf_live *live);
size_t sf_live_bytes(const sf_live *live);

#ifdef __cplusplus
}
#endif

#endif

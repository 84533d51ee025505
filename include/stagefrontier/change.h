/*
 * StageFrontier change against a reference, and the counterfactual what-if
 * (docs/CHANGE.md). Pure like the rest of the core: no I/O, no clocks, no
 * globals, deterministic. The reference is built from the summaries of the
 * job's reference windows; the change and the what-if are computed from one
 * window's summary and attached to its report.
 */
#ifndef STAGEFRONTIER_CHANGE_H
#define STAGEFRONTIER_CHANGE_H

#include <stagefrontier/accounting.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SF_REF_MAX_WINDOWS 16
#define SF_REF_MAX_STEPS 8192 /* complete steps kept in a reference */
#define SF_POOL_MAX_WINDOWS 8 /* the change_pool_windows gate's bound */
#define SF_CHANGE_MAX_SUSPECTS 8
#define SF_WHATIF_MAX_RANKS 8  /* ranks listed, largest saving first */
#define SF_WHATIF_MAX_CELLS 16 /* (rank, stage) pairs listed */

/* The compact, bounded reference of a job: per complete step the frontier
 * advance of every stage and its shortest duration over the ranks (at a
 * ".sync_wait" stage, the wait of the rank that arrived last), and in
 * dense mode per (rank, stage) the median duration, the number of steps the
 * rank uniquely led the stage's boundary and, for own-work stages
 * (sf_change_own_work_stage), the median of the rank's contrast (its
 * duration minus the median of the other ranks' in the same step). In
 * mergeable mode the per-rank arrays are NULL: nothing about a single rank
 * can be exact there. */
typedef struct sf_reference {
    uint64_t schema_hash;
    uint32_t n_stages;
    uint32_t world_size;
    uint32_t n_windows;
    int64_t windows[SF_REF_MAX_WINDOWS]; /* window indices, as given */
    uint32_t segment;                    /* of the last window */
    uint32_t n_steps;
    int64_t *advance;       /* [n_steps][n_stages] */
    int64_t *min_ns;        /* [n_steps][n_stages] the summary's dmin; NULL when unknown
                             * (a recording from before it was kept): no floor test */
    int64_t median_step_ns; /* median exposed step (F at the last boundary) */
    uint32_t n_ranks;       /* 0 in mergeable mode */
    uint32_t *ranks;        /* sorted */
    int64_t *median_ns;     /* [n_ranks][n_stages], SF_NULL_NS where never seen */
    uint32_t *lead_steps;   /* [n_ranks][n_stages] complete steps led uniquely */
    int64_t *contrast_ns;   /* [n_ranks][n_stages] median contrast over complete steps;
                             * SF_NULL_NS for other stages; NULL when unknown */
    /* The issue-lag baseline (docs/CHANGE.md, "Communication"): per
     * synchronizing stage (comm_n_sync of them, in schema order), the
     * largest issue lag of each baseline step where every rank carried a
     * mark, comm_n[j] of them from comm_lag_ns + comm_at[j]. NULL when
     * unknown (no marks, a recording): no communication test. */
    uint32_t comm_n_sync;
    uint32_t comm_n[SF_MAX_STAGES];
    uint32_t comm_at[SF_MAX_STAGES];
    int64_t *comm_lag_ns;
    /* Derived by sf_reference_finish from the advances: what the change's
     * frontier tests read of the reference on every window, sorted once.
     * Owned; opaque; NULL makes each window derive it again. */
    struct sf_reference_columns *columns;
} sf_reference;

/* Builds the reference from the summaries of its windows (any order, at most
 * SF_REF_MAX_WINDOWS). All must share schema hash and world size (-EINVAL);
 * -ENODATA when no window has a complete step. Dense iff every summary is. */
int sf_reference_build(const sf_summary *const *windows, uint32_t n, sf_reference **ret);
void sf_reference_free(sf_reference *ref);
/* Collects the first `want` eligible windows of a job, in the order offered,
 * and builds their reference. A window of another schema or world size than
 * the ones collected so far starts the collection over. */
typedef struct sf_reference_collector {
    uint32_t want; /* 1..SF_REF_MAX_WINDOWS (the baseline_windows gate) */
    uint32_t n;
    sf_summary *pending[SF_REF_MAX_WINDOWS];
} sf_reference_collector;

/* Offers one window (the summary is copied when kept): 1 with *ret set when
 * the reference is complete, 0 while collecting or for an ineligible window,
 * or -errno. */
int sf_reference_collect(sf_reference_collector *c, const sf_summary *summary,
                         const sf_report *report, sf_reference **ret);
void sf_reference_collector_clear(sf_reference_collector *c);

/* Whether a window may serve as a reference: it has complete steps and no
 * downgrade that marks its data incomplete (missing ranks, incomplete steps,
 * drops, violations, non-monotonic time, late summary, closed early, partial). */
bool sf_reference_eligible(const sf_report *report);
/* Whether a window comes after the reference (a later window of its last
 * segment, or a later segment): only those get a change, in sfd and replay. */
bool sf_reference_applies(const sf_reference *ref, const sf_window_meta *meta);
/* Derives median_step_ns and the sorted columns from the advances (after
 * decoding a reference): 0, -ENODATA without steps, -ENOMEM. */
int sf_reference_finish(sf_reference *ref);
/* Checks that a reference fits a window's schema and world size: 0, or
 * -EINVAL with a static reason in *ret_why. */
int sf_reference_check(const sf_reference *ref, const sf_schema *schema, uint32_t world_size,
                       const char **ret_why);

/* ---- shift estimation ------------------------------------------------- */

typedef struct sf_shift {
    int64_t delta_ns;              /* Hodges-Lehmann shift of y against x */
    int64_t ci_low_ns, ci_high_ns; /* rank-based (Moses) interval at 1 - alpha */
    double p_value;                /* two-sided Mann-Whitney, normal approximation */
} sf_shift;

/* The shift of sample y against sample x. Both need at least one value;
 * the inputs are not modified. -EINVAL on bad arguments, -ENOMEM. */
int sf_shift_estimate(const int64_t *x, size_t m, const int64_t *y, size_t n, double alpha,
                      sf_shift *ret);

/* The two-sided Wilcoxon signed-rank test of the differences z against 0
 * (zeros dropped, normal approximation with tie and continuity corrections):
 * its p-value, 1 when every z is 0. z is not modified. -EINVAL, -ENOMEM. */
int sf_signed_rank_p(const int64_t *z, size_t n, double *ret_p);

/* ---- change of one window ---------------------------------------------- */

/* Whether stage k is an own-work stage: not a ".sync_wait" stage, and a
 * synchronizing stage comes at or after it in the step, so a rank's delay
 * there holds up the group at that sync point (docs/CHANGE.md). */
bool sf_change_own_work_stage(const sf_schema *schema, uint32_t k);

typedef struct sf_stage_change {
    sf_shift shift;       /* of the frontier advance */
    double share_p_value; /* Mann-Whitney of the advance's share of the exposed step */
    /* The share's size: the delay that this stage alone must have gained,
     * in the reference's time, to move its median share from x to y while
     * the rest of the step scaled alike, T (y - x) / (1 - y) with T the
     * reference's median step (docs/CHANGE.md); SF_NULL_NS in reports
     * stored before it. */
    int64_t share_delay_ns;
    /* Sync floor test (".sync_wait" stages, when the reference has min_ns):
     * the shift of the last arrival's wait (the step's shortest wait over
     * the ranks), which no rank's late arrival moves, and the Mann-Whitney
     * p-value and size of its share of the exposed step. floor_tested is
     * false, the shift zero, the p-value NaN and the size SF_NULL_NS
     * elsewhere. */
    bool floor_tested;
    sf_shift floor;
    double floor_share_p_value;
    int64_t floor_share_delay_ns;
    bool floor_significant; /* floor_share_p < the level below, floor.delta > 0 and
                             * floor_share_delay >= the minimum effect */
    bool significant;       /* floor_significant, or share_p < change_alpha / (stages + floor
                             * tests), |share_delay| >= change_min_frac x ref step and shift
                             * of the same sign */
    /* Own-work test (dense mode, own-work stages): the rank whose contrast
     * shifted most, its shift (median of the window's contrasts minus the
     * reference's median contrast) and p-value; own_delta_ns is SF_NULL_NS
     * when the stage was not tested. */
    int64_t own_delta_ns;
    uint32_t own_rank;
    double own_p_value;
    bool own_significant; /* own_p < change_alpha / (ranks x own-work stages), positive,
                           * and >= the minimum effect */
} sf_stage_change;

/* The shift a stage is routed by when its frontier change is significant:
 * its sync floor's where that test is significant (the delay is inside the
 * collective), else its advance's (docs/CHANGE.md, "Route"). */
const sf_shift *sf_change_frontier_shift(const sf_stage_change *stage);

typedef struct sf_change_suspect {
    uint32_t rank;
    int64_t delta_ns; /* SF_NULL_NS when only leadership is known (mergeable mode) */
} sf_change_suspect;

/* The communication test (docs/CHANGE.md, "Communication"): at each
 * synchronizing stage, the shift of the step's largest issue lag against
 * the baseline's; the stage with the smallest p-value is kept. */
typedef struct sf_comm_change {
    bool tested;         /* the baseline and the window both have eligible steps */
    uint32_t sync_stage; /* own-work stage index of the synchronizing stage */
    sf_shift shift;      /* of the largest issue lag per eligible step */
    /* The rank that had the largest lag in most of the window's eligible
     * steps, and in how many. */
    uint32_t rank;
    uint32_t led_steps, eligible_steps;
    bool significant; /* p < change_alpha / synchronizing stages, delta >= comm_lag_min_s */
} sf_comm_change;

typedef struct sf_change {
    uint32_t n_stages;
    uint32_t baseline_n_windows;
    int64_t baseline_windows[SF_REF_MAX_WINDOWS];
    uint32_t baseline_steps;
    uint32_t n_measured; /* the windows measured: this one and those pooled with it */
    int64_t measured_windows[SF_POOL_MAX_WINDOWS]; /* oldest first */
    uint32_t steps;                                /* complete steps of the windows measured */
    sf_shift step;                                 /* shift of the exposed step time */
    double slowdown; /* median step over the reference median step; NaN if undefined */
    int64_t min_effect_ns;
    sf_stage_change stages[SF_MAX_STAGES];
    uint32_t n_route;
    uint32_t route[SF_MAX_STAGES]; /* significant positive shifts, largest first */
    bool suspects_dense;           /* false: top-2 leaders of route[0] (mergeable mode) */
    uint32_t n_suspects;
    sf_change_suspect suspects[SF_CHANGE_MAX_SUSPECTS];
    sf_comm_change comm;
} sf_change;

/* The change of a window against the reference. -EINVAL when the reference
 * does not fit the window (see sf_reference_check), -ENODATA when the window
 * has no complete step. */
int sf_change_compute(const sf_reference *ref, const sf_summary *summary, const sf_gates *gates,
                      sf_change **ret);
void sf_change_free(sf_change *change);

/* ---- pooled windows ----------------------------------------------------- */

/* The windows just before the current one that its change is measured
 * together with (gate change_pool_windows, docs/CHANGE.md "Pooled
 * windows"): the latest closed windows, oldest first, each taken from
 * its caller (sf_change_pool_keep). Owned by whoever keeps the job;
 * zero-initialised is empty; sf_change_pool_clear frees it. */
typedef struct sf_change_pool {
    uint32_t n;
    sf_summary *recent[SF_POOL_MAX_WINDOWS]; /* at most want - 1 between calls */
    /* Private to the core: what the change computed of each kept window
     * and of the window measured last, so that pooling it later does not
     * compute it again (its own-work contrasts). */
    void *derived[SF_POOL_MAX_WINDOWS];
    size_t derived_bytes[SF_POOL_MAX_WINDOWS];
    void *pending;
    size_t pending_bytes;
    sf_window_meta pending_meta;
} sf_change_pool;

/* Takes a closed window for the windows after it: when kept, *summary
 * becomes the pool's and is set to NULL; otherwise it stays the caller's.
 * At most want - 1 of the latest windows are kept; a window older than
 * every kept one of a full pool, or one already kept, is not taken.
 * 0 or -EINVAL. */
int sf_change_pool_keep(sf_change_pool *p, sf_summary **summary, uint32_t want);
/* The windows the change of `summary` is measured over, oldest first, into
 * ret_parts (SF_POOL_MAX_WINDOWS slots): the newest kept windows of its
 * segment among the want - 1 window indices before it that come after the
 * reference, back to the first that covers other ranks than the window
 * after it, then summary itself. Returns their count (1..want), -EINVAL. */
int sf_change_pool_view(const sf_change_pool *p, const sf_summary *summary, const sf_reference *ref,
                        uint32_t want, const sf_summary **ret_parts);
/* The change over windows as sf_change_pool_view lists them (the last the
 * window it belongs to): the change of all their complete steps, read where
 * they lie, except that a rank's own duration in the suspects' scores is
 * the median of its medians in each window (docs/CHANGE.md, "Pooled
 * windows"). -EINVAL when the windows do not line up (one segment, shape
 * and set of ranks, rising steps), or as sf_change_compute. */
int sf_change_compute_pooled(const sf_reference *ref, const sf_summary *const *parts, uint32_t n,
                             const sf_gates *gates, sf_change **ret);
void sf_change_pool_clear(sf_change_pool *p);
/* The heap bytes the pool holds (its windows and what it derived of them),
 * for a holder's memory budget. */
size_t sf_change_pool_bytes(const sf_change_pool *p);

/* ---- counterfactual what-if -------------------------------------------- */

enum sf_whatif_basis { SF_WHATIF_REFERENCE, SF_WHATIF_COHORT };

typedef struct sf_whatif_rank {
    uint32_t rank;
    int64_t saved_ns;
    double slowdown; /* S_r: exposed over exposed with r at its basis */
} sf_whatif_rank;

typedef struct sf_whatif_cell {
    uint32_t rank, stage;
    int64_t saved_ns;
} sf_whatif_cell;

typedef struct sf_whatif {
    enum sf_whatif_basis basis;
    bool lower_bound; /* the clipped model: other ranks' sync waits are kept;
                       * false for the sync model (docs/CHANGE.md) */
    __int128 exposed_ns, ideal_ns;
    double slowdown;     /* S = exposed / ideal */
    double waste_rank_s; /* (1 - 1/S) x ranks x window seconds */
    uint32_t n_ranks;
    sf_whatif_rank ranks[SF_WHATIF_MAX_RANKS];
    uint32_t n_cells;
    sf_whatif_cell cells[SF_WHATIF_MAX_CELLS];
} sf_whatif;

/* The what-if of a dense window: each rank, and each (rank, stage) of the
 * change's route, with its durations clipped to its reference medians, or to
 * the per-step cohort median when ref is NULL. With synchronizing stages
 * whose arrivals every complete step carried, sync waits are recomputed
 * from the new arrivals (lower_bound false). -ENOTSUP in mergeable mode,
 * -ENODATA without a complete step. change may be NULL. */
int sf_whatif_compute(const sf_summary *summary, const sf_reference *ref, const sf_change *change,
                      sf_whatif **ret);
void sf_whatif_free(sf_whatif *whatif);

/* Attaches the change (when ref is not NULL) and the what-if (dense mode)
 * of the window the report was computed from, replacing any earlier ones.
 * The change is measured over the window and the windows of pool that
 * sf_change_pool_view pools with it (pool may be NULL: the window alone),
 * and the pool holds what it computed of the window until
 * sf_change_pool_keep is offered the window; the what-if is the window's
 * own. On error the report is left as it was. */
int sf_report_attach_change(sf_report *report, const sf_summary *summary, sf_change_pool *pool,
                            const sf_reference *ref);

#ifdef __cplusplus
}
#endif
#endif

/*
 * StageFrontier accounting core: the pure computation that turns per-rank stage
 * vectors into the frontier report (docs/SPEC.md sections 1 and 2). No I/O, no clocks,
 * no globals. sfd and `sfctl replay` call exactly this code, so a live report
 * equals the replay of its records.
 *
 * Flow: rows --sf_summary_build--> summary --sf_summary_merge--> summary
 *       --sf_report_compute--> report.
 * A dense computation is simply one summary built from every row with
 * dense = true. Functions return 0 or a negative errno; ret_ outputs are set
 * only on success; every _free accepts NULL.
 */
#ifndef STAGEFRONTIER_ACCOUNTING_H
#define STAGEFRONTIER_ACCOUNTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stagefrontier/limits.h"
#include "stagefrontier/parallel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hard bounds: stages, ranks and durations are limits.h's; these are the
 * core's own. */
#define SF_MAX_WINDOW_STEPS 16384 /* window sums of prefixes stay below 2^62 */
#define SF_MAX_NAME_LEN 64
#define SF_MAX_ROLES 16
#define SF_MAX_ACCUMULATION 64

#define SF_NO_RANK UINT32_MAX
#define SF_NULL_NS INT64_MIN /* an undefined duration figure (JSON null) */

/* ---- schema ----------------------------------------------------------- */

/* Ordered stages, residual last. groups[i] is never NULL: a stage without a
 * group reports as its own group, and "x@k" defaults to group "x". */
typedef struct sf_schema {
    uint32_t version;
    uint32_t n_stages;
    uint32_t accumulation;  /* gradient accumulation factor K >= 1 */
    bool microstep_indexed; /* some stage name carries an @k suffix */
    uint64_t hash;          /* FNV-1a over version, names and groups */
    char *names[SF_MAX_STAGES];
    char *groups[SF_MAX_STAGES];
    /* Reporting groups in order of first appearance. */
    uint32_t n_groups;
    char *group_names[SF_MAX_STAGES];
    uint32_t group_of[SF_MAX_STAGES]; /* stage -> group index */
    /* Synchronizing stages (docs/ACCOUNTING.md, "Arrival points"): bit k set
     * when stage k ends in a collective and was split at the rank's arrival.
     * Stage k is then the rank's own work up to the arrival and stage k + 1,
     * named "<name k>.sync_wait" in the same group, its wait for the peers;
     * the boundary after stage k is the arrival boundary. Derived from the
     * names, so the split is part of the hash. */
    uint64_t sync_mask;
    /* Per stage k with bit k of sync_mask: the communicator group its
     * collectives span (enum sf_sync_group; docs/ACCOUNTING.md,
     * "Synchronizing groups"); 0 (world) elsewhere and for old clients. Not
     * hashed: it says how ranks are compared, not which stages exist.
     * sf_schema_copy keeps it; sf_schema_set_sync_groups sets it. */
    uint8_t sync_group[SF_MAX_STAGES];
} sf_schema;

/* The group a synchronizing stage's collectives span: the whole world, or
 * the ranks whose parallel coordinates differ only in dp, tp or pp. */
enum sf_sync_group { SF_SYNC_WORLD = 0, SF_SYNC_DP = 1, SF_SYNC_TP = 2, SF_SYNC_PP = 3 };
#define SF_SYNC_GROUP_MAX SF_SYNC_PP
const char *sf_sync_group_name(enum sf_sync_group g);
/* "world", "dp", "tp", "pp" -> the group, or -EINVAL. */
int sf_sync_group_parse(const char *name);
/* Sets the group of each synchronizing stage, in stage order (n must be the
 * number of synchronizing stages, groups[j] <= SF_SYNC_GROUP_MAX); -EINVAL
 * otherwise. n = 0 sets every one to world. */
int sf_schema_set_sync_groups(sf_schema *schema, const uint8_t *groups, uint32_t n);
/* Most sync points one rank may accumulate in one stage of one step:
 * SF_MAX_SYNC_WAITS (limits.h). */

#define SF_SYNC_WAIT_SUFFIX ".sync_wait"

/* Copies names; groups may be NULL or hold NULL/"" entries. -EINVAL on an
 * empty, oversized, duplicate or malformed name list. */
int sf_schema_init(sf_schema *ret, uint32_t version, uint32_t n_stages, const char *const *names,
                   const char *const *groups, uint32_t accumulation);
/* A schema from recorded (unsplit) stages and the mask of those that are
 * synchronizing: each marked stage k gains "<name k>.sync_wait" right after
 * it, in its group. -EINVAL when a marked stage is the last (the residual),
 * a split name is too long, or the split exceeds SF_MAX_STAGES stages. */
int sf_schema_init_sync(sf_schema *ret, uint32_t version, uint32_t n_recorded,
                        const char *const *names, const char *const *groups, uint32_t accumulation,
                        uint64_t recorded_sync_mask);
/* Number of recorded (unsplit) stages: n_stages minus the split stages. */
uint32_t sf_schema_recorded_stages(const sf_schema *schema);
/* Splits one recorded duration vector into the schema's stages. arrival_ns
 * holds, per recorded stage, the own work before the arrival (0..duration)
 * or -1 for no mark; it may be NULL (no marks). A synchronizing stage
 * without a mark keeps its whole duration as own work, a zero wait, and sets
 * *ret_missing. -EINVAL for a mark in a stage that is not synchronizing,
 * -ERANGE for an offset outside 0..duration. */
int sf_schema_split(const sf_schema *schema, const int64_t *recorded, const int64_t *arrival_ns,
                    int64_t *ret_d, bool *ret_missing);

/* The default six stages, or their @k expansion when accumulation > 1. */
int sf_schema_init_default(sf_schema *ret, uint32_t accumulation);
void sf_schema_clear(sf_schema *schema);
int sf_schema_copy(sf_schema *ret, const sf_schema *src);
bool sf_schema_equal(const sf_schema *a, const sf_schema *b);
/* Index of a stage name, or -ENOENT. */
int sf_schema_stage_index(const sf_schema *schema, const char *name);

extern const char *const sf_default_stage_names[6];

/* ---- rows and windows --------------------------------------------------- */

enum sf_event_state { SF_EVENT_NONE = 0, SF_EVENT_READY = 1, SF_EVENT_MISSING = 2 };

/* Row flags: contract violations the client counted for this step. */
#define SF_ROW_VIOLATION (1u << 0)
#define SF_ROW_NON_MONOTONIC (1u << 1)
/* A synchronizing stage of this step carried no arrival mark: its whole
 * duration counts as own work and the step is not eligible for the
 * straggler verdict. Counted per window as arrival_missing_steps. */
#define SF_ROW_ARRIVAL_MISSING (1u << 2)
#define SF_ROW_FLAGS_ALL (SF_ROW_VIOLATION | SF_ROW_NON_MONOTONIC | SF_ROW_ARRIVAL_MISSING)

/* One (step, rank) record. d points at n_stages durations, residual last. */
typedef struct sf_row {
    int64_t step;
    uint32_t rank;
    uint32_t flags;
    int64_t overlap_ns; /* max(0, sum explicit - step_wall), >= 0 */
    const int64_t *d;
    const char *role;     /* NULL counts as "" */
    uint8_t event_state;  /* enum sf_event_state */
    int64_t event_cpu_ns; /* CPU-wall forward of the sampled step */
    int64_t event_gpu_ns; /* CUDA-event forward, when ready */
    /* Issue lags (docs/ACCOUNTING.md, "Issue lag"): NULL when the row has
     * none, else one per synchronizing stage in stage order: the time from
     * the rank's arrival to the start of its collective, 0..2^42 (an
     * issue mark's lies within the stage's sync wait; a GPU kernel's
     * start may come after the host left the stage), or -1 where the
     * stage carried neither. */
    const int64_t *issue_lag;
    /* Accumulated sync waits (docs/ACCOUNTING.md, "Synchronizing groups"):
     * NULL when the row has none, else 2 * n_sync values: per synchronizing
     * stage in stage order the time the rank spent waiting inside that
     * stage's collectives (entry to exit of each, summed), 0..the recorded
     * stage's duration, or -1 where none was marked; then per stage the
     * number of sync points summed, 1..SF_MAX_SYNC_WAITS, or 0 with -1. */
    const int64_t *sync_wait;
    /* The rank's parallel coordinates (stagefrontier/parallel.h), NULL when
     * it declared none (never a struct with nothing declared): ranks are
     * then compared inside their cohort (docs/ACCOUNTING.md, "Cohorts").
     * Borrowed, like d. */
    const sf_parallel *parallel;
} sf_row;

/* Window-level flags, set by whoever assembled the window. */
#define SF_WIN_CLOSED_EARLY (1u << 0)
#define SF_WIN_PARTIAL (1u << 1)
#define SF_WIN_LATE_SUMMARY (1u << 2)
#define SF_WIN_NON_MONOTONIC (1u << 3)

typedef struct sf_window_meta {
    int64_t index;
    uint32_t segment;
    int64_t first_step; /* first step index of the window's range */
    int64_t last_step;  /* last step index of the range (inclusive) */
    uint32_t world_size;
    uint32_t flags; /* SF_WIN_* */
    uint64_t dropped_records;
    uint64_t contract_violations;
    uint64_t rejected_records;
    /* Wall clock (realtime, ms since the epoch) when the window opened and
     * closed; 0 when unknown (a replayed CSV). Carried, never computed on:
     * the accounting stays on the monotonic clock. */
    int64_t opened_at_ms, closed_at_ms;
} sf_window_meta;

/* Window index of a step: floor((step - warmup) / window_steps), or -1 for a
 * warmup step. */
int64_t sf_window_index(int64_t step, int64_t warmup_steps, int64_t window_steps);
void sf_window_range(int64_t index, int64_t warmup_steps, int64_t window_steps, int64_t *ret_first,
                     int64_t *ret_last);

/* Checks one row against the schema and the bounds: -EINVAL/-ERANGE. */
int sf_row_validate(const sf_row *row, const sf_schema *schema);

/* ---- mergeable summary (docs/SPEC.md section 4) ------------------------------- */

/* A candidate for direct exposure: every stage, then every group that has
 * more than one member. */
typedef struct sf_candidate_set {
    uint32_t n;
    uint32_t n_stage; /* the first n_stage candidates are stages */
    uint64_t member_mask[SF_MAX_STAGES * 2];
} sf_candidate_set;

typedef struct sf_top2 {
    int64_t v1, v2;  /* v1 >= v2; v2 = INT64_MIN when absent */
    uint32_t r1, r2; /* ranks; SF_NO_RANK when absent */
} sf_top2;

/* Per-step data. Arrays are views into sf_summary storage, sized by S and C. */
typedef struct sf_step_summary {
    int64_t step;
    uint32_t n_ranks;            /* ranks contributing to this step */
    sf_top2 *prefix_top2;        /* [S] boundaries 1..S */
    int64_t *dmax, *dmin, *dsum; /* [S] per stage over ranks */
    int64_t slowest_total;
    uint32_t slowest_rank;
    int64_t *slowest_d; /* [S] */
    bool has_rank0;
    int64_t *rank0_d;     /* [S] */
    int64_t *clipped_end; /* [C] max_r of P[S] with candidate clipped to the rank median */
    int64_t residual_sum, overlap_sum, end_sum;
    uint32_t arrival_missing; /* rows of this step flagged SF_ROW_ARRIVAL_MISSING */
} sf_step_summary;

typedef struct sf_rank_interval {
    uint32_t lo, hi;
} sf_rank_interval; /* inclusive */

/* Dense rows, kept for jobs up to dense_max_ranks: exact cohort gains and slack. */
typedef struct sf_dense {
    uint32_t n_ranks;
    uint32_t *ranks; /* sorted */
    char **roles;    /* [n_ranks], owned */
    /* [n_ranks] each rank's parallel coordinates (declared == 0: none), or
     * NULL when no row of the window carried any. Owned. */
    sf_parallel *parallel;
    /* For each summary step, each rank's durations, or absent. */
    int64_t *d;       /* [n_steps][n_ranks][S] */
    uint8_t *present; /* [n_steps][n_ranks] */
    bool d_borrowed;  /* d is the caller's step-major rows: never written, not freed */
    /* Each rank's median duration per stage over its rows of the window (the
     * report's rank medians), [n_ranks][S]; NULL where not kept (a merged or
     * decoded summary). */
    int64_t *rank_median;
    /* Accumulated sync waits (sf_row.sync_wait), [n_steps][n_ranks][2 *
     * n_sync] (-1 and 0 where absent), or NULL when no row carried any.
     * Owned. */
    int64_t *sync_wait;
} sf_dense;

/* The communication part of a summary (docs/ACCOUNTING.md, "Issue lag"):
 * per step and synchronizing stage the two largest issue lags with their
 * ranks and the rows that carried a mark, and per rank and synchronizing
 * stage the maximum and median of its lags. Both merge exactly over
 * disjoint ranks. */
typedef struct sf_comm_summary {
    uint32_t n_sync;                    /* synchronizing stages of the schema */
    uint32_t sync_stage[SF_MAX_STAGES]; /* [n_sync] their own-work stage index */
    uint32_t n_steps;
    int64_t *steps;    /* [n_steps] ascending: the steps with a row */
    sf_top2 *lag_top2; /* [n_steps][n_sync] */
    uint32_t *marked;  /* [n_steps][n_sync] rows with an issue mark */
    uint32_t n_ranks;
    uint32_t *ranks;                 /* [n_ranks] ascending: the ranks with a row */
    int64_t *rank_max, *rank_median; /* [n_ranks][n_sync], SF_NULL_NS without a mark */
    uint64_t rows, marked_rows;      /* rows, and rows with an issue mark */
} sf_comm_summary;

/* An empty communication part shaped for schema's synchronizing stages,
 * n_steps steps and n_ranks ranks (for a decoder to fill): its top-2s
 * absent, its marks 0. -EINVAL without synchronizing stages. */
int sf_comm_summary_alloc(const sf_schema *schema, uint32_t n_steps, uint32_t n_ranks,
                          sf_comm_summary **ret);
void sf_comm_summary_free(sf_comm_summary *c);

/* The cohort part of a summary (docs/ACCOUNTING.md, "Cohorts in a
 * mergeable summary"), kept in both modes when rows carry parallel
 * coordinates: each rank's coordinates, and per step and cohort the ranks
 * that reported and the two largest prefixes of every boundary among them.
 * Cohorts are ordered by pipeline index, then by their cohort number
 * (sf_parallel_cohort). It merges exactly over disjoint ranks, so a merged
 * summary judges cohorts as the dense rows of one node do. */
typedef struct sf_cohort_summary {
    uint32_t n_stages;
    uint32_t n_ranks;
    uint32_t *ranks;       /* [n_ranks] ascending: the ranks whose rows carried coordinates */
    sf_parallel *parallel; /* [n_ranks] their coordinates */
    uint32_t n_cohorts;
    uint32_t *cohort_pp;  /* [n_cohorts] pipeline index */
    uint64_t *cohort_key; /* [n_cohorts] sf_parallel_cohort */
    uint32_t n_steps;
    int64_t *steps;       /* [n_steps] ascending */
    uint32_t *count;      /* [n_steps][n_cohorts] ranks of the cohort with a row at the step */
    sf_top2 *prefix_top2; /* [n_steps][n_cohorts][n_stages] boundaries 1..S */
} sf_cohort_summary;

/* The most cells (steps x cohorts x stages) a cohort part holds (its wire
 * form stays within a peer frame, about 24 bytes a cell); a window
 * with more keeps none, and its report says cohorts inconsistent. */
#define SF_COHORT_PART_MAX_CELLS (UINT32_C(1) << 18)

/* An empty part of these sizes (for a decoder to fill): top-2s absent,
 * counts 0. -EINVAL beyond SF_COHORT_PART_MAX_CELLS. */
int sf_cohort_summary_alloc(uint32_t n_stages, uint32_t n_ranks, uint32_t n_cohorts,
                            uint32_t n_steps, sf_cohort_summary **ret);
void sf_cohort_summary_free(sf_cohort_summary *c);

typedef struct sf_summary {
    sf_schema schema;
    sf_window_meta meta;
    sf_candidate_set cand;
    uint32_t n_steps; /* sorted by step */
    sf_step_summary *steps;
    uint32_t n_roles;
    char *roles[SF_MAX_ROLES]; /* sorted set; "" for unset */
    bool roles_overflow;       /* more distinct roles than SF_MAX_ROLES */
    /* Parallel coordinates (docs/ACCOUNTING.md, "Cohorts"): some row carried
     * them; some rank's rows disagreed (coordinates on some rows only, or
     * two sets). Both merge by or, parallel_rows by sum. */
    bool parallel_declared, parallel_conflict;
    uint64_t parallel_rows; /* rows that carried coordinates (sf_row.parallel set) */
    uint64_t event_samples, event_ready;
    int64_t event_cpu_ns, event_gpu_ns; /* over ready samples */
    uint32_t n_intervals;
    sf_rank_interval *coverage; /* sorted, disjoint, coalesced */
    uint64_t merge_conflicts;
    uint64_t violation_rows;     /* rows flagged SF_ROW_VIOLATION */
    uint64_t non_monotonic_rows; /* rows flagged SF_ROW_NON_MONOTONIC */
    sf_dense *dense;             /* NULL in mergeable mode */
    sf_comm_summary *comm;       /* NULL without synchronizing stages or when lost in a merge */
    sf_cohort_summary *cohort;   /* NULL without coordinates, or when lost in a merge */
    int64_t *storage;            /* backing store for the step arrays */
    sf_top2 *top2_storage;
} sf_summary;

/* Builds the summary of one node's rows for one window (or the whole window
 * when the caller holds every row). Rows may come in any order; duplicate
 * (step, rank) pairs are -EEXIST, invalid rows -EINVAL/-ERANGE. */
int sf_summary_build(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                     size_t n_rows, bool dense, sf_summary **ret);
void sf_summary_free(sf_summary *s);
/* The heap bytes a summary holds (its step arrays and dense rows; role
 * strings not counted), for a holder's memory budget. */
size_t sf_summary_bytes(const sf_summary *s);
int sf_summary_clone(const sf_summary *s, sf_summary **ret);

/* Merges src into dst. Both must share schema hash, window index and segment.
 * Returns 0 on merge, -EALREADY when src's coverage equals part of dst's
 * exactly (an identical resend: dropped), -EBUSY on a partial overlap (counted
 * in dst->merge_conflicts, dst unchanged), -EINVAL on a mismatch. Dense rows
 * survive only when both sides carry them. */
int sf_summary_merge(sf_summary *dst, const sf_summary *src);
uint64_t sf_summary_covered_ranks(const sf_summary *s);
/* Index of a step in the summary's sorted steps, or -1. */
int64_t sf_summary_step_index(const sf_summary *s, int64_t step);

/* Allocates empty step arrays for the given step indices (used by decoders
 * of the wire form). */
int sf_summary_alloc(const sf_schema *schema, const sf_window_meta *meta, uint32_t n_steps,
                     sf_summary **ret);

/* ---- cohorts (docs/ACCOUNTING.md, "Cohorts") ------------------------------ */

/* Ranks with the same parallel coordinates except dp and ep do the same work:
 * a cohort. APPLIED: every rank declared coordinates of one shape whose
 * sizes multiply to the world size, each tuple once, so ranks are compared
 * inside their cohort only. INCONSISTENT: coordinates were declared but do
 * not say that (a rank without, two shapes, a tuple twice, a rank whose rows
 * disagree): no comparison across ranks may be trusted, so none is made. */
enum sf_cohort_state { SF_COHORTS_NONE, SF_COHORTS_APPLIED, SF_COHORTS_INCONSISTENT };
const char *sf_cohort_state_name(enum sf_cohort_state state);

/* Cohorts of n ranks from their coordinates (coords[i].declared == 0: rank i
 * declared none). On APPLIED, ret_cohort[i] is rank i's cohort, numbered
 * 0.. in order of first appearance, and *ret_n_cohorts their count; on the
 * other states both are left alone. world_size 0 skips the product check.
 * Returns the state, or -ENOMEM. */
int sf_cohorts_build(const sf_parallel *coords, uint32_t n, uint32_t world_size,
                     uint32_t *ret_cohort, uint32_t *ret_n_cohorts);

/* ---- gates ------------------------------------------------------------ */

typedef struct sf_gates {
    double residual_share_max, overlap_share_max;
    uint32_t missing_ranks_max, incomplete_steps_max;
    double event_ready_ratio_min;
    uint32_t event_samples_min;
    double event_support_ratio_min, event_host_ratio_max;
    double dominance_share_min, gain_ratio_min, tie_tol;
    double leader_gap_tol_min_s, leader_gap_tol_frac;
    double leader_switch_rate_max;
    double tau;
    bool model_fit;
    double share_floor_s;
    uint32_t warmup_steps, window_steps;
    uint32_t suspect_ranks_max, dense_max_ranks;
    double straggler_alpha;          /* adjusted p-value a straggler verdict must reach */
    double straggler_last_share_min; /* share of eligible steps a rank must arrive last */
    /* The communication verdict (docs/ACCOUNTING.md, "Communication verdict"):
     * a step counts for the rank with the largest issue lag when it leads
     * the next by at least comm_lag_min_s; the rank must lead in more than
     * comm_share_min of the eligible steps. */
    double comm_lag_min_s;
    double comm_share_min;
    uint32_t straggler_persist_windows; /* windows in a row that make a verdict "fixed" */
    /* Change against the job's reference (docs/CHANGE.md). */
    uint32_t baseline_windows;
    uint32_t change_pool_windows; /* windows the change test pools, 1..SF_POOL_MAX_WINDOWS */
    double change_alpha, change_min_frac;
    char forward_stage[SF_MAX_NAME_LEN + 1];
    char backward_stage[SF_MAX_NAME_LEN + 1];
} sf_gates;

void sf_gates_default(sf_gates *ret);
enum sf_gate_type { SF_GATE_NUMBER, SF_GATE_COUNT, SF_GATE_BOOL, SF_GATE_NAME };
/* Enumerates the gate keys in table order, i from 0; NULL past the end. Sets
 * *ret_type, and *ret_number to a number, count or boolean (0/1) gate's
 * value, or *ret_text to a name gate's value (and *ret_number to NaN). */
const char *sf_gates_describe(const sf_gates *gates, size_t i, enum sf_gate_type *ret_type,
                              double *ret_number, const char **ret_text);
/* Sets one gate from its config key and text value: -ENOENT for an unknown
 * key, -EINVAL for a malformed or out-of-range value. */
int sf_gates_set(sf_gates *gates, const char *key, const char *value);
int sf_gates_validate(const sf_gates *gates);

/* ---- report ----------------------------------------------------------- */

/* Labels (bit positions) in report order. */
enum sf_label {
    SF_LABEL_FRONTIER_ACCOUNTING,
    SF_LABEL_TELEMETRY_LIMITED,
    SF_LABEL_ROLE_AWARE_NEEDED,
    SF_LABEL_CO_CRITICAL,
    SF_LABEL_DIRECT_EXPOSURE,
    SF_LABEL_SYNC_WAIT_DEPENDENT,
    SF_LABEL_LIKELY_SYNC_WAIT,
    SF_LABEL_FORWARD_EVENT_SCOPE_LIMITED,
    SF_LABEL_FORWARD_DEVICE_SUPPORTED,
    SF_LABEL_FORWARD_HOST_OVERHEAD_SUSPECTED,
    SF_LABEL_FORWARD_SPILLOVER_SUSPECTED,
    SF_LABEL_GRADIENT_ACCUMULATION_AMBIGUOUS,
    /* Every rank declared consistent parallel coordinates: ranks were
     * compared inside their cohorts (replaces role_aware_needed). Last, so
     * the bit positions of the labels before it never move. */
    SF_LABEL_ROLE_AWARE_APPLIED,
    SF_LABEL_COUNT
};
const char *sf_label_name(enum sf_label label);

enum sf_downgrade {
    SF_DG_RESIDUAL_SHARE,
    SF_DG_OVERLAP_SHARE,
    SF_DG_MISSING_RANKS,
    SF_DG_INCOMPLETE_STEPS,
    SF_DG_DROPPED_RECORDS,
    SF_DG_CONTRACT_VIOLATIONS,
    SF_DG_NON_MONOTONIC_TIME,
    SF_DG_LATE_OR_FAILED_SUMMARY,
    SF_DG_WINDOW_CLOSED_EARLY,
    SF_DG_WINDOW_PARTIAL,
    SF_DG_BELOW_SHARE_FLOOR,
    SF_DG_SINGLE_RANK,
    SF_DG_COUNT
};
const char *sf_downgrade_name(enum sf_downgrade reason);

/* Figures of one stage or one reporting group. Durations are window sums in
 * ns; ratios are NaN where undefined (reported as null). */
typedef struct sf_unit_figures {
    const char *name; /* view into the report's schema */
    const char *group;
    int64_t advance_ns, max_ns, mean_ns, spread_ns, slowest_rank_ns;
    int64_t rank0_ns;     /* SF_NULL_NS when rank 0 is not in the window */
    int64_t lag_ns;       /* stages: sum over steps of F - mean_r P; groups: INT64_MIN (null) */
    int64_t delta_lag_ns; /* advance - mean: positive when the frontier outruns the average rank */
    int64_t gain_rank_median_ns;
    int64_t gain_cohort_median_ns; /* SF_NULL_NS in mergeable mode */
    double share, gain;
    uint32_t leader_rank; /* SF_NO_RANK when none */
    uint32_t leader_steps;
    uint32_t evidence_stage; /* stage whose leader evidence this unit uses */
} sf_unit_figures;

typedef struct sf_rank_evidence {
    uint32_t rank;
    const char *role;       /* owned copy; NULL when unknown (mergeable mode) */
    uint32_t *leader_steps; /* [S] */
    int64_t *median_gap_ns; /* [S], SF_NULL_NS when it never led */
    int64_t mean_slack_ns;  /* SF_NULL_NS in mergeable mode */
} sf_rank_evidence;

typedef struct sf_suspect {
    uint32_t rank, steps;
} sf_suspect;

/* The per-window straggler verdict (docs/ACCOUNTING.md, "Straggler verdict"):
 * the rank that arrived last at a synchronizing stage's arrival boundary. */
enum sf_persistence { SF_PERSIST_NONE, SF_PERSIST_FIXED, SF_PERSIST_ROTATING };
const char *sf_persistence_name(enum sf_persistence p);

typedef struct sf_straggler {
    bool present; /* false: the verdict is null */
    uint32_t rank;
    uint32_t sync_stage;   /* the synchronizing stage (own-work part) */
    uint32_t origin_stage; /* earliest stage whose boundary rank led in most such steps */
    /* The origin is the communication of sync_stage (the communication
     * verdict, report->comm): the counts and the lateness are its led and
     * eligible steps and its median issue lag. */
    bool communication;
    uint32_t arrived_last_steps; /* eligible steps where rank led the arrival boundary */
    uint32_t eligible_steps;     /* complete steps with every arrival marked */
    int64_t median_lateness_ns;  /* over those steps: frontier minus second prefix */
    /* The group of sync_stage. For tp and pp the verdict is the wait rule
     * (docs/ACCOUNTING.md, "Synchronizing groups"): rank waited least in its
     * group and did the most own work; arrived_last_steps then counts the
     * steps it was the one waited for, median_lateness_ns the median of how
     * much less it waited than the next member there, and victim_rank is
     * the member of its group that waited longest in total over those steps
     * (set only for tp and pp). */
    enum sf_sync_group group;
    bool wait_rule; /* named by the wait rule (a tp or pp stage with waits) */
    uint32_t victim_rank;
    /* Filled by sf_straggler_track from the windows before this one; a
     * report fresh from sf_report_compute says none and 1. */
    enum sf_persistence persistence;
    uint32_t windows_in_a_row;
} sf_straggler;

/* Whether communication lateness can be seen in a window: it needs a
 * synchronizing stage and issue marks (sf_stage_issue, the binding's DDP
 * hook or rec.sync()). */
enum sf_comm_visibility { SF_COMM_SEEN, SF_COMM_NO_SYNC_STAGE, SF_COMM_NO_ISSUE_MARKS };
const char *sf_comm_visibility_name(enum sf_comm_visibility v);

/* The communication verdict: the rank whose collective started latest after
 * its arrival, in most of the eligible steps. */
typedef struct sf_comm_verdict {
    enum sf_comm_visibility visibility;
    uint64_t rows, marked_rows; /* rows of the window, and those with an issue mark */
    bool present;
    uint32_t rank;
    uint32_t sync_stage;      /* own-work stage index of the synchronizing stage */
    uint32_t led_steps;       /* eligible steps where rank's lag led by the gate */
    uint32_t eligible_steps;  /* steps where every rank marked its issue */
    int64_t median_lag_ns;    /* rank's lag over its led steps */
    int64_t others_median_ns; /* the median of the other ranks' median lags */
} sf_comm_verdict;

/* The most frequent chain of boundary leaders of the window's complete steps. */
typedef struct sf_critical_path {
    uint32_t steps;  /* complete steps that followed exactly this chain */
    uint32_t *chain; /* [S] unique leader per boundary or SF_NO_RANK; NULL with no step */
} sf_critical_path;

/* A stall: one complete step whose exposed time above the window's median
 * step is at least dominance_share_min of the window's exposed time (a hang,
 * a pause). Every line of the human view then leads with it: the typical
 * step's figures (leader counts, the verdict, the change test) cannot. */
typedef struct sf_stall {
    bool present;
    int64_t step;
    uint32_t stage;    /* the largest frontier advance at that step */
    uint32_t group;    /* the stage's reporting group */
    uint32_t rank;     /* the last rank to reach the end of that stage */
    int64_t excess_ns; /* that step's exposed time above the median step's */
    double share;      /* excess_ns over the window's exposed time */
} sf_stall;

/* The pipeline view (docs/ACCOUNTING.md, "Pipeline view"), with cohorts
 * applied and two or more pipeline stages: per complete step, the first
 * (pipeline stage, ordered stage) where a rank arrived later than the
 * others of its cohort, and per pipeline stage its bubble and what
 * restoring it saves. Computed from the cohort part, so exact in both
 * modes. */
#define SF_PIPELINE_MAX_STAGES 1024 /* a deeper pipeline gets no view */

typedef struct sf_pipeline_stage {
    uint32_t ranks;           /* ranks of the stage in the window */
    uint32_t origin_steps;    /* complete steps whose first delay appeared here */
    int64_t bubble_ns;        /* sum over complete steps of the frontier's end minus the stage's */
    int64_t restore_saved_ns; /* what-if: each of its cohorts ends its largest lateness earlier */
} sf_pipeline_stage;

typedef struct sf_pipeline_view {
    bool present;
    uint32_t n_stages;         /* pipeline stages (the pp size) */
    sf_pipeline_stage *stages; /* [n_stages], owned */
    bool origin;               /* some complete step had a delay */
    uint32_t origin_pp, origin_rank, origin_stage, origin_steps;
    int64_t median_delay_ns; /* the origin's lateness against its cohort, over its steps */
    int64_t median_cost_ns;  /* what the step would save without it passed on (at most the delay) */
    /* Per complete step (the report's steps): the origin's pipeline stage
     * or SF_NO_RANK, and [steps][n_stages] each stage's largest lateness
     * against its cohort over the boundaries (0 when none). Owned. */
    uint32_t *step_origin;
    int64_t *step_delay;
} sf_pipeline_view;

typedef struct sf_report {
    sf_schema schema;
    sf_window_meta meta;
    sf_gates gates;
    bool dense;
    uint32_t steps; /* complete steps in the accounting */
    uint32_t ranks; /* ranks seen */
    uint32_t missing_ranks;
    uint32_t incomplete_steps;
    int64_t first_step, last_step; /* of the complete steps, -1 if none */
    bool rank0_present;
    __int128 exposed_total_ns;
    int64_t telescoping_max_abs_err_ns;
    int64_t leader_gap_tol_ns;
    double residual_share, overlap_share;
    double leader_switch_rate; /* at the leading unit */
    uint64_t event_samples, event_ready;
    double event_ready_ratio, event_ratio; /* NaN when undefined */
    sf_unit_figures stages[SF_MAX_STAGES];
    sf_unit_figures groups[SF_MAX_STAGES];
    uint32_t routing_order[SF_MAX_STAGES]; /* group indices */
    uint32_t n_routing;                    /* routing set length (0 below the share floor) */
    uint32_t n_co_critical;
    uint32_t co_critical[4]; /* group indices, schema order */
    uint32_t *step_leaders;  /* [steps][S] unique leader per complete step, or SF_NO_RANK */
    uint32_t labels;         /* bit set of enum sf_label */
    uint32_t downgrades;     /* bit set of enum sf_downgrade */
    uint32_t n_suspects;
    sf_suspect *suspects;
    uint32_t n_rank_evidence;
    sf_rank_evidence *rank_evidence;
    uint64_t dropped_records, contract_violations, rejected_records, merge_conflicts;
    uint64_t arrival_missing_steps; /* rank-steps without an arrival mark */
    sf_straggler straggler;
    sf_comm_verdict comm;
    sf_critical_path critical_path;
    /* Attached after sf_report_compute by whoever holds the job's reference
     * (stagefrontier/change.h); owned, freed with the report. */
    struct sf_change *change; /* NULL until the job has a reference */
    struct sf_whatif *whatif; /* NULL in mergeable mode */
    sf_stall stall;           /* one step that holds most of the window's exposed time */
    /* Cohorts of the window's ranks (docs/ACCOUNTING.md, "Cohorts"). */
    enum sf_cohort_state cohorts;
    uint32_t n_cohorts; /* APPLIED: how many */
    sf_pipeline_view pipeline;
} sf_report;

/* The straggler history of one job across consecutive windows, held by the
 * caller (sfd per job, replay per run) so the core stays stateless. Zero it
 * to start. */
typedef struct sf_straggler_history {
    bool any;           /* a window has been tracked */
    int64_t last_index; /* window index of the last tracked window */
    uint32_t segment;
    uint32_t last_rank; /* SF_NO_RANK after a window without verdict */
    uint32_t run;       /* windows in a row with a verdict naming last_rank */
    /* The state before the last window, so a replaced report of that same
     * window (a cluster report after the local one) is tracked once. */
    bool prev_any;
    int64_t prev_index;
    uint32_t prev_rank, prev_run;
} sf_straggler_history;

/* Folds report's verdict into h and sets its persistence and
 * windows_in_a_row. Windows must come in index order; a gap in the index or
 * a new segment starts a new run; a second report of the last window
 * replaces the first one's effect. */
void sf_straggler_track(sf_straggler_history *h, sf_report *report);

int sf_report_compute(const sf_summary *summary, const sf_gates *gates, sf_report **ret);
void sf_report_free(sf_report *report);

/* Convenience: the report of a full window, dense when the window's world
 * size is at most gates->dense_max_ranks (the rule sfd applies too). */
int sf_report_from_rows(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                        size_t n_rows, const sf_gates *gates, sf_report **ret);

/* Exactness of report fields in a given mode. */
bool sf_report_field_exact(const sf_report *report, const char *field);

/* Number of distinct ranks among rows (a CSV file's world size), or -errno. */
int sf_distinct_ranks(const sf_row *rows, size_t n_rows);

/* Integer-ns median of a multiset, lo + (hi - lo) / 2 for even counts.
 * Reorders values. n must be > 0. */
int64_t sf_median_i64(int64_t *values, size_t n);

/* The form of the core's vector kernels this process runs: "generic" (plain
 * C), "avx2" or "avx512", each giving the same figures. The environment's
 * SF_CORE_ISA forces one; unset or empty, the best this CPU has. Chosen once,
 * on the first call (every core function that runs a kernel makes it). A
 * name the core does not know, or a form this CPU lacks, is refused: a
 * message on stderr and exit status SF_CORE_ISA_REFUSED (the status test
 * harnesses read as "skipped"). Programs call it at start, so that a
 * refusal comes then. */
#define SF_CORE_ISA_REFUSED 77
const char *sf_core_isa(void);

#ifdef __cplusplus
}
#endif
#endif

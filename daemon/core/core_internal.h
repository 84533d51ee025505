/*
 * Declarations shared between the accounting core's files. Nothing here is
 * part of the public interface in include/stagefrontier/accounting.h.
 */
#ifndef SF_CORE_INTERNAL_H
#define SF_CORE_INTERNAL_H

#include <errno.h>
#include <stdlib.h>

#include <stagefrontier/accounting.h>
#include <stagefrontier/change.h>

/* Adding SF__OVER_STEP to a value in [0, SF_MAX_STEP_NS] leaves its top
 * bit clear, and to any larger one below 2^63 sets it; a negative int64 has
 * it set already. So one or of x | x + SF__OVER_STEP per value, and one test
 * of the top bit at the end, bound them all. */
#define SF__OVER_STEP ((UINT64_C(1) << 63) - (uint64_t)SF_MAX_STEP_NS - 1)

/* The bounds of a row's durations, with no branch: ors its durations into
 * *bits and its step's end + SF__OVER_STEP into *over, over any number of
 * rows; sf__durations_fit then tests them all at once. No duration may have
 * a bit at or above the cap's (a power of two; a negative one has its sign
 * bit), so a row's sum cannot wrap (SF_MAX_STAGES of them stay below
 * 2^48), and it may not pass SF_MAX_STEP_NS. A duration of exactly the
 * cap, which the first test lets through on its own, fails the second: the
 * cap lies above the step's bound. */
_Static_assert((SF_MAX_DURATION_NS & (SF_MAX_DURATION_NS - 1)) == 0, "the cap is one bit");
_Static_assert(SF_MAX_STEP_NS < SF_MAX_DURATION_NS, "a duration at the cap overruns a step");
static inline __attribute__((always_inline)) void
sf__durations_bound(const int64_t *d, uint32_t n_stages, uint64_t *bits, uint64_t *over)
{
    uint64_t total = 0;
    for (uint32_t k = 0; k < n_stages; k++) {
        *bits |= (uint64_t)d[k];
        total += (uint64_t)d[k];
    }
    *over |= total + SF__OVER_STEP;
}

static inline bool sf__durations_fit(uint64_t bits, uint64_t over)
{
    return bits < (uint64_t)SF_MAX_DURATION_NS && over >> 63 == 0;
}

/* window.c: the bounds of one row (sf_row_validate), inlined where rows are
 * checked in bulk. */
static inline int sf__row_check(const sf_row *row, uint32_t n_stages)
{
    if (row->step < 0 || row->rank >= SF_MAX_RANKS)
        return -ERANGE;
    uint64_t bits = 0, over = 0;
    sf__durations_bound(row->d, n_stages, &bits, &over);
    if (!sf__durations_fit(bits, over))
        return -ERANGE;
    if (row->overlap_ns < 0 || row->overlap_ns > SF_MAX_STEP_NS)
        return -ERANGE;
    if (row->event_state > SF_EVENT_MISSING)
        return -EINVAL;
    if (row->event_state != SF_EVENT_NONE &&
        (row->event_cpu_ns < 0 || row->event_cpu_ns > SF_MAX_DURATION_NS || row->event_gpu_ns < 0 ||
         row->event_gpu_ns > SF_MAX_DURATION_NS))
        return -ERANGE;
    return 0;
}

/* Runs `call`, an expression that names S, with S a constant for the stage
 * counts schemas usually have (the default six; seven or eight with arrival
 * splits), so that the always-inlined loops over stages it reaches unroll;
 * any other count runs it with S = count. The one place that chooses them. */
#define SF__BY_STAGE_COUNT(count, S, call)                                                         \
    switch (count) {                                                                               \
    case 6: {                                                                                      \
        const uint32_t S = 6;                                                                      \
        call;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    case 7: {                                                                                      \
        const uint32_t S = 7;                                                                      \
        call;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    case 8: {                                                                                      \
        const uint32_t S = 8;                                                                      \
        call;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    default: {                                                                                     \
        const uint32_t S = (count);                                                                \
        call;                                                                                      \
        break;                                                                                     \
    }                                                                                              \
    }

/* max(d - b, 0), branch-free: whether a duration lies above its median is a
 * coin flip no branch predictor learns. Both are checked durations (or
 * medians of them), so d - b cannot overflow. */
static inline int64_t sf__excess(int64_t d, int64_t b)
{
    int64_t x = d - b;
    return x & ~(x >> 63);
}

/* reference.c: qsort/bsearch order of rank numbers. */
int sf__cmp_u32(const void *a, const void *b);
/* One window's own-work contrasts, [K][complete steps][ranks] at its K
 * own-work stages (each rank's duration minus the median of the others'),
 * which do not depend on the reference: a change that pools the window
 * later reads them instead of computing them again. */
struct sf_contrasts {
    int64_t *v;
    size_t bytes;
};
/* change.c: the change over consecutive windows of one segment that cover
 * the same ranks, dense in one layout or none dense (pool.c chooses them),
 * the last the window measured. cached[j] (or cached NULL): part j's
 * contrasts from an earlier change, or NULL. ret_fresh (may be NULL): the
 * last part's contrasts, computed here, for the caller to keep ({0} when
 * the own-work test did not run). */
int sf__change_of_parts(const sf_reference *ref, const sf_summary *const *parts, uint32_t n_parts,
                        const int64_t *const *cached, struct sf_contrasts *ret_fresh,
                        const sf_gates *gates, sf_change **ret);
/* pool.c: the change of summary over it and the windows of pool (NULL:
 * alone), which keeps its contrasts until sf_change_pool_keep takes it. */
int sf__change_pool_measure(sf_change_pool *pool, const sf_summary *summary,
                            const sf_reference *ref, const sf_gates *gates, sf_change **ret);
/* The slot of rank in the sorted ranks[0..n), NULL where absent: slot hint
 * first, where two sorted lists of the same ranks put it (a window's dense
 * ranks and its reference's, nearly always), else a binary search. */
static inline const uint32_t *sf__find_rank(const uint32_t *ranks, uint32_t n, uint32_t rank,
                                            uint32_t hint)
{
    if (hint < n && ranks[hint] == rank)
        return &ranks[hint];
    return bsearch(&rank, ranks, n, sizeof rank, sf__cmp_u32);
}
/* The first index of sorted v[0..n) whose value is not below x (n when
 * none): where x is, or would go. */
static inline uint32_t sf__lower_bound_i64(const int64_t *v, uint32_t n, int64_t x)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
static inline uint32_t sf__lower_bound_u32(const uint32_t *v, uint32_t n, uint32_t x)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
/* The same answers for sorted, distinct values, first trying where x is
 * when the values run consecutively from v[0] (a window's steps, a job's
 * ranks: the usual case), which spares a search a step or a row. */
static inline uint32_t sf__index_i64(const int64_t *v, uint32_t n, int64_t x)
{
    if (n > 0 && x >= v[0]) {
        uint64_t at = (uint64_t)x - (uint64_t)v[0];
        if (at < n && v[at] == x)
            return (uint32_t)at;
    }
    return sf__lower_bound_i64(v, n, x);
}
static inline uint32_t sf__index_u32(const uint32_t *v, uint32_t n, uint32_t x)
{
    if (n > 0 && x >= v[0]) {
        uint32_t at = x - v[0];
        if (at < n && v[at] == x)
            return at;
    }
    return sf__lower_bound_u32(v, n, x);
}
/* reference.c: the contrast of each of n >= 2 values, v[x] minus the median
 * (sf_median_i64's) of the other n - 1, in O(n); scratch holds n values. */
void sf__contrasts(const int64_t *v, uint32_t n, int64_t *scratch, int64_t *ret);
/* reference.c: what every value's median of the others follows from, the
 * order statistics h - 1, h and h + 1 (h = (n - 2) / 2) of n >= 2 values
 * v[0], v[stride], ..., found in O(n) (scratch holds n values); a caller
 * that reads a column in place applies sf__contrast itself. */
typedef struct sf__middle {
    int64_t below, mid, above; /* INT64_MIN / INT64_MAX outside the values */
    bool even;                 /* n - 1 others: the median is a midpoint */
} sf__middle;
void sf__middle_of(const int64_t *v, size_t stride, uint32_t n, int64_t *scratch, sf__middle *ret);
/* v minus the median of the others, for a value v of the n. Leaving v out
 * moves the median only among the three order statistics, by whether v
 * lies below them. */
static inline int64_t sf__contrast(const sf__middle *m, int64_t v)
{
    /* Masks, not a branch the compiler may choose: whether v lies below the
     * middle is a coin flip over the ranks. */
    int64_t past_mid = -(int64_t)(m->mid < v), past_below = -(int64_t)(m->below < v);
    int64_t hi = (m->mid & past_mid) | (m->above & ~past_mid); /* order statistic h of the rest */
    if (!m->even)
        return v - hi;
    int64_t lo = (m->below & past_below) | (m->mid & ~past_below); /* h - 1 of the rest */
    return v - (lo + (hi - lo) / 2);
}

#define SF_PPM 1000000 /* a share's unit: parts per million of the exposed step */

/* The advance of a stage as its share of the step's exposed time, in parts
 * per million: a machine that slows every stage alike leaves it where it
 * was (the change's share test, docs/CHANGE.md). */
static inline int64_t sf__share_ppm(int64_t advance, int64_t exposed)
{
    return exposed > 0 ? (int64_t)((__int128)advance * SF_PPM / exposed) : 0;
}

/* reference.c: the reference's side of the change's frontier tests, the
 * same for every window: sorted once instead of once per window. */
struct sf_reference_columns {
    int64_t *advance_sorted; /* [n_stages + 1][n_steps]: each stage's advance, then the
                              * exposed step, sorted */
    int64_t *share_sorted;   /* [n_stages][n_steps]: each stage's sf__share_ppm, sorted */
    double *share_rho;       /* [n_stages]: the share's lag-1 rank autocorrelation in time
                              * order (serial.c) */
    /* The same of the step's shortest duration (min_ns), for the sync floor
     * test; NULL when the reference has no min_ns. */
    int64_t *floor_sorted, *floor_share_sorted; /* [n_stages][n_steps] */
    double *floor_rho;                          /* [n_stages] */
};
/* reference.c: the share series of n advances against their steps' exposed
 * ends, in time order (share) and sorted (sorted), and its lag-1 rank
 * autocorrelation; rank is n doubles of scratch. */
double sf__share_series(const int64_t *advance, const int64_t *ends, uint32_t n, int64_t *share,
                        int64_t *sorted, double *rank);
int sf__reference_columns_build(const sf_reference *ref, struct sf_reference_columns **ret);
void sf__reference_columns_free(struct sf_reference_columns *c);

/* shift.c: the p-value of sf_shift_estimate alone, without the shift and
 * its interval (their searches cost most of the estimate), with the U
 * statistic's variance multiplied by variance_factor (>= 1, serial.c). */
int sf__mann_whitney_p(const int64_t *x, size_t m, const int64_t *y, size_t n,
                       double variance_factor, double *ret_p);
/* shift.c: sf__mann_whitney_p of samples already sorted, allocating nothing. */
double sf__mann_whitney_sorted_p(const int64_t *xs, size_t m, const int64_t *ys, size_t n,
                                 double variance_factor);
/* shift.c: z with P(Z > z) = p / 2 for a standard normal Z: the interval's
 * width in sigmas at level p, computed once for a family of estimates. */
double sf__normal_two_sided_quantile(double p);
/* shift.c: sf_shift_estimate of samples already sorted, its interval at
 * z = sf__normal_two_sided_quantile(alpha); allocates nothing: scratch holds
 * SF__SHIFT_SCRATCH_WORDS(m, n) words, the caller's. */
#define SF__SHIFT_SCRATCH_WORDS(m, n) (2 * ((size_t)(m) + (size_t)(n) + 1))
void sf__shift_estimate_sorted(const int64_t *xs, size_t m, const int64_t *ys, size_t n, double z,
                               int64_t *scratch, sf_shift *ret);
/* shift.c: sf_signed_rank_p on z itself (z is reordered and overwritten),
 * with the statistic's variance multiplied by variance_factor (>= 1). */
double sf__signed_rank_p_inplace(int64_t *z, size_t n, double variance_factor);
/* serial.c: the lag-1 autocorrelation of the midranks of v in time order
 * (0 for n < 3 or a constant series). */
int sf__rank_lag1_autocorrelation(const int64_t *v, size_t n, double *ret_rho);
/* serial.c: v (n values) sorted into sorted, and the same autocorrelation,
 * with n doubles of scratch in rank; allocates nothing. */
double sf__sort_and_rank_lag1(const int64_t *v, size_t n, int64_t *sorted, double *rank);
/* serial.c: the AR(1) variance factor (1 + rho) / (1 - rho) of a rank
 * statistic over a series with lag-1 autocorrelation rho; 1 when rho <= 0,
 * rho capped at 0.9. */
double sf__serial_variance_factor(double rho);
/* window.c: puts the k-th smallest at values[k], no larger before it and no
 * smaller after it. */
void sf__select_kth(int64_t *values, size_t n, size_t k);
/* window.c: sf_median_i64 of n >= 1 values already sorted ascending. */
int64_t sf__median_sorted(const int64_t *sorted, size_t n);
/* window.c: sorts values ascending (the selection's branchless partitions,
 * heap sort where they split badly). */
void sf__sort_i64(int64_t *values, size_t n);
/* window.c: the selection's pivot for values[0..n), n >= 1: a value of the
 * range (median of three, or Tukey's ninther on large ranges). */
int64_t sf__pivot(const int64_t *values, size_t n);
/* summary.c. SF__BUILD_BORROW: a dense summary of rows laid out as one
 * step-major array views that array instead of copying it, so the summary
 * must not outlive the rows (sf_report_from_rows). SF__BUILD_GENERAL: the
 * general path whatever the layout, every row checked on its own (the
 * tests' reference for the fast ones). */
enum { SF__BUILD_BORROW = 1u << 0, SF__BUILD_GENERAL = 1u << 1 };
int sf__summary_build(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                      size_t n_rows, bool dense, unsigned flags, sf_summary **ret);
void sf__top2_insert(sf_top2 *t, int64_t v, uint32_t rank);
/* The folds take a step's rows in ascending rank order, so an equal value
 * never displaces the rank already held (sf__top2_insert's tie rule). */
static inline __attribute__((always_inline)) void sf__top2_insert_ascending(sf_top2 *t, int64_t v,
                                                                            uint32_t rank)
{
    if (v <= t->v2) /* nearly every row: one compare */
        return;
    if (v > t->v1) {
        t->v2 = t->v1;
        t->r2 = t->r1;
        t->v1 = v;
        t->r1 = rank;
    } else {
        t->v2 = v;
        t->r2 = rank;
    }
}
int sf__roles_add(sf_summary *s, const char *role);
/* cohort.c: the rows' coordinates into s (its flags, and its dense rows'
 * per-rank coordinates); then the report's cohorts: *ret_state, and on
 * APPLIED each dense rank's cohort in cohort_of [dense ranks] and their
 * count in *ret_n. */
int sf__parallel_gather(sf_summary *s, const sf_row *rows, size_t n_rows);
int sf__report_cohorts(const sf_summary *s, uint32_t *cohort_of, enum sf_cohort_state *ret_state,
                       uint32_t *ret_n);
/* Each of n values col[0], col[stride], ... minus the median of the others
 * of its cohort (sf__contrasts inside each cohort; 0 for a rank alone in
 * its cohort); scratch holds 2 n values. */
void sf__cohort_contrasts(const int64_t *col, size_t stride, uint32_t n, const uint32_t *cohort_of,
                          uint32_t n_cohorts, int64_t *scratch, int64_t *out);
void sf__dense_free(sf_dense *d);

/* pipeline.c: the cohort part of a summary (built from the rows that carry
 * coordinates; s->parallel_rows counted), its exact merge (*dst dropped
 * unless both carry one), clone and size; the report's cohorts from it (a
 * summary whose dense rows keep no coordinates, or none); one cohort's
 * top-2 prefixes at a step (NULL, *ret_count 0, where no row of it); and
 * the pipeline view of a report whose cohorts are set. */
int sf__cohort_part_build(sf_summary *s, const sf_row *rows, size_t n_rows);
int sf__cohort_merge(sf_cohort_summary **dst, const sf_cohort_summary *src);
int sf__cohort_clone(const sf_cohort_summary *c, sf_cohort_summary **ret);
size_t sf__cohort_bytes(const sf_cohort_summary *c);
int sf__cohort_part_state(const sf_summary *s, uint32_t *cohort_of, enum sf_cohort_state *ret_state,
                          uint32_t *ret_n);
const sf_top2 *sf__cohort_top2(const sf_cohort_summary *c, int64_t step, uint32_t q,
                               uint32_t *ret_count);
int sf__pipeline_view(sf_report *r, const sf_summary *s, const uint32_t *complete,
                      uint32_t n_complete);
void sf__pipeline_view_free(sf_pipeline_view *v);

/* exposure.c: direct-exposure gains from dense rows (cohort-median baseline). */
int sf__cohort_gains(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                     int64_t *ret_gain);
/* Mean slack per dense rank over complete steps and boundaries 1..S. */
int sf__mean_slack(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                   int64_t *ret_slack);

/* labels.c: routing, co-critical set, labels and downgrades of a report whose
 * unit figures are filled in. */
struct sf__cohort_view {      /* the report's cohorts over the summary's dense ranks */
    const uint32_t *complete; /* [n_complete] summary step indices */
    uint32_t n_complete;
    const uint32_t *cohort_of; /* [dense ranks], r->cohorts APPLIED; else NULL */
};
void sf__report_route_and_label(sf_report *r, const sf_summary *s, uint32_t n_ranks,
                                const struct sf__cohort_view *cv);

/* straggler.c: the verdict (needs step_leaders and leader_gap_tol_ns; before
 * routing, which puts its rank first among the suspects) and the critical
 * path (from step_leaders). */
int sf__straggler_verdict(sf_report *r, const sf_summary *s, const uint32_t *complete,
                          uint32_t n_complete, const uint32_t *cohort_of);
int sf__critical_path(sf_report *r);

/* comm.c: the communication part of a summary and its verdict. A schema
 * without synchronizing stages has none (*ret NULL). */
int sf__comm_row_check(const sf_row *row, const sf_schema *schema);
/* syncwait.c: accumulated sync waits (sf_row.sync_wait) checked (-ERANGE
 * out of bounds, -EINVAL without a synchronizing stage) and gathered into
 * the dense rows (sf_dense.sync_wait). */
int sf__sync_wait_row_check(const sf_row *row, const sf_schema *schema);
int sf__sync_wait_gather(sf_summary *s, const sf_row *rows, size_t n_rows);
int sf__comm_build(const sf_schema *schema, const sf_row *rows, size_t n_rows,
                   sf_comm_summary **ret);
/* Folds src into *dst; *dst is dropped (NULL) unless both carry one. */
int sf__comm_merge(sf_comm_summary **dst, const sf_comm_summary *src);
int sf__comm_clone(const sf_comm_summary *c, sf_comm_summary **ret);
void sf__comm_free(sf_comm_summary *c);
size_t sf__comm_bytes(const sf_comm_summary *c);
int sf__comm_verdict(const sf_summary *s, const sf_gates *g, sf_comm_verdict *ret);
/* The verdict as the window's straggler, its origin the communication. */
/* The issue-lag baseline of a reference, and the communication test of a
 * window against it (daemon/core/comm_change.c). */
int sf__comm_reference_collect(sf_reference *ref, const sf_summary *const *w, uint32_t n);
int sf__comm_change(sf_change *c, const sf_reference *ref, const sf_summary *s,
                    const sf_gates *gates);
void sf__comm_as_straggler(const sf_comm_verdict *v, sf_straggler *ret);

#endif

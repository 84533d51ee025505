/*
 * The accounting core's vector kernels: one table of function pointers per
 * form (generic, AVX2, AVX-512), chosen once per process (choose.c, the one
 * place that asks the CPU) and read by the files that call kernels. Every
 * intrinsic of the core lives in this folder; each form computes the same
 * integers as the plain C reference it stands in for, which the tests check
 * form by form on the same inputs.
 */
#ifndef SF_CORE_VEC_H
#define SF_CORE_VEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stagefrontier/accounting.h>
#include <stagefrontier/change.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SF_VEC_X86 1 /* the AVX2 and AVX-512 forms are compiled */
#endif

enum sf__isa { SF__ISA_GENERIC, SF__ISA_AVX2, SF__ISA_AVX512, SF__ISA_COUNT };

/* ---- the median network (median_net*.c) ------------------------------ */

/* The median of each of `lanes` series of n values at once, v holding value
 * t of every series at v + t lanes (overwritten). Exact, the same as
 * sf_median_i64 on each series. Only a form with net_pays makes it faster
 * than sf_median_i64 per series. */
#define SF__MEDIAN_NET_MAX 256 /* values per series; the network grows as n log^2 n */
typedef struct sf__median_net sf__median_net;
int sf__median_net_new(uint32_t n, sf__median_net **ret);
void sf__median_net_free(sf__median_net *net);

/* The register passes of the forms on offsets, on a column of 16 series
 * whose wire i, series l is col[16 i + l]: TILE sorts wires [0, wires) for
 * wires <= 16 (AVX2 and AVX-512), PAIR for wires <= 32 and ROUND32 merges
 * [0, 32) and [32, wires), each sorted, for 32 < wires <= 64 (AVX-512).
 * Wires from `wires` on are neither read nor written. */
enum sf__net_pass { SF__NET_PASS_TILE, SF__NET_PASS_PAIR, SF__NET_PASS_ROUND32 };

/* ---- the wide median (median_wide*.c) -------------------------------- */

/* One partition pass: splits src[0..n) into the values below p (to lt) and
 * the rest (to ge), each store a whole vector, so a store may run up to 7
 * values past its part's end, which the buffers leave room for. Returns the
 * count below; *below_max is raised to the largest of them. */
typedef size_t sf__split_fn(const int64_t *src, size_t n, int64_t p, int64_t *lt, int64_t *ge,
                            int64_t *below_max);
/* Splits the values not below p into those equal to it (counted) and those
 * above (to gt). Returns the count above. */
typedef size_t sf__split_equal_fn(const int64_t *src, size_t n, int64_t p, int64_t *gt,
                                  size_t *ret_equal);

/* ---- the grid fold (fold*.c) ----------------------------------------- */

/* The fold of one step of a grid window, its rows' stages in vectors, into
 * st. Only the durations: the rows' other fields are the caller's, checked.
 * The durations need not be: the fold checks sf__row_check's bounds on
 * them as it goes, and returns false where one fails, with the step left
 * unfinished and no unchecked value in any sum that outlives the call.
 * Until then its arithmetic is defined for any values: vector lanes wrap,
 * and its scalar sums are unsigned (docs/ACCOUNTING.md, "Exactness"). */
struct sf__grid_step {
    const sf_row *rows;        /* row r is rows[r], */
    const sf_row *const *ptrs; /* or *ptrs[r] where ptrs is not NULL, */
    const int64_t *matrix;     /* and its durations at matrix + r S where that is not NULL */
    uint32_t n;                /* rows */
    const uint32_t *ranks;     /* ranks[r], ascending */
    const int64_t *baseline;   /* baseline[r S + k]: the rank medians */
    /* NULL, or the same medians four ranks at a time for a form with
     * fold_quads: stage k of ranks 4q..4q+3 at baseline_quads[(q S + k) 4 ..] */
    const int64_t *baseline_quads;
};
/* baseline (n ranks, S stages each) into the layout of baseline_quads;
 * the last n % 4 ranks are left out. */
void sf__baseline_quads(const int64_t *baseline, uint32_t n, uint32_t S, int64_t *out);

/* ---- the what-if's clipped pass -------------------------------------- */

/* Per lane of a vector pass over one step (each lane its own ranks, in
 * order): the largest end, the second one, the rank holding the largest
 * (the first of equals), its clipped end, and the largest clipped end. */
struct sf__whatif_lanes {
    int64_t first[8], second[8], top[8], top_q[8], ideal[8];
};

/* ---- the table -------------------------------------------------------- */

typedef struct sf__vec {
    enum sf__isa isa;
    const char *name; /* as SF_CORE_ISA spells it */
    /* The network on 64-bit values: sorts every column of v in place. */
    void (*net_sort)(const sf__median_net *net, int64_t *v, size_t lanes);
    /* The network on 32-bit offsets from each series' first value, v only
     * read, series l at v[t stride + l] (stride >= lanes): false where a
     * value lies 2^31 or more from its series' first (the medians written so
     * far are right). NULL: no such form. */
    bool (*net_narrow)(const sf__median_net *net, const int64_t *v, size_t stride, size_t lanes,
                       int64_t *ret_median);
    /* One register pass (wires already in its range): false where this form
     * lacks it. NULL: none. */
    bool (*net_pass)(enum sf__net_pass pass, uint32_t *col, uint32_t wires);
    bool net_pays; /* the network beats sf_median_i64 per series */
    /* The wide median's partitions; NULL: sf_median_i64 instead. */
    sf__split_fn *split_below;
    sf__split_equal_fn *split_above;
    /* The grid fold and the cohort clipping for rows of 1 to 8 stages
     * (sf__vec_folds); NULL: summary.c's scalar fold, the reference. */
    bool (*fold_grid)(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g);
    /* The end frontier of one step's n rows (rows[r S + k]) with each
     * candidate's stages clipped to baseline[k], maxed into clipped[c]
     * (whose group candidates, past the first S, the caller sets); the first
     * S are written. */
    void (*clip_rows)(const sf_summary *s, const int64_t *rows, uint32_t n, const int64_t *baseline,
                      int64_t *clipped);
    bool fold_quads; /* fold_grid reads g->baseline_quads */
    /* The what-if's clipped pass over one step of R ranks of S <= 8 stages
     * (rows[x S + k], basis the same layout): fills the first `lanes` lanes
     * of *ret and returns lanes. NULL: whatif.c's scalar pass. */
    uint32_t (*whatif_step)(const int64_t *rows, const int64_t *basis, uint32_t R, uint32_t S,
                            struct sf__whatif_lanes *ret);
} sf__vec;

/* The form this process runs (choose.c): SF_CORE_ISA's, else the best this
 * CPU has; chosen on the first call. */
const sf__vec *sf__vec_chosen(void);
/* Form isa, or NULL where this CPU (or this build) lacks it: the tests' way
 * to run every form side by side. */
const sf__vec *sf__vec_form(enum sf__isa isa);

/* Whether v has a vector grid fold for rows of n_stages stages. */
static inline bool sf__vec_folds(const sf__vec *v, uint32_t n_stages)
{
    return v->fold_grid != NULL && n_stages >= 1 && n_stages <= 8;
}

/* The medians of net's series with form v (median_net.c). */
void sf__median_net_run(const sf__median_net *net, const sf__vec *v, int64_t *values, size_t lanes,
                        int64_t *ret_median);
/* v's form on 32-bit offsets (see net_narrow): -ERANGE where a value lies
 * too far, -ENOTSUP where v has none or stride < lanes. */
int sf__median_net_narrow(const sf__median_net *net, const sf__vec *v, const int64_t *values,
                          size_t stride, size_t lanes, int64_t *ret_median);
/* One register pass of v on col (see enum sf__net_pass), exposed so that
 * test_fold checks each pass as a sorter on every 0-1 input it must sort:
 * the medians alone miss a comparator wrong near a block's ends. -EINVAL for
 * a count the pass does not take, -ENOTSUP where v lacks the pass. */
int sf__median_net_pass(const sf__vec *v, enum sf__net_pass pass, uint32_t *col, uint32_t wires);

/* median_wide.c: sf_median_i64 of one large multiset, by v's partitions
 * (sf_median_i64 itself where v has none). values is overwritten; tmp holds
 * 3 n + 24 values. */
int64_t sf__median_wide(const sf__vec *v, int64_t *values, size_t n, int64_t *tmp);

/* whatif.c: sf_whatif_compute with form v, the tests' way to compare every
 * form's clipped pass with the scalar one on the same window. */
int sf__whatif_compute_form(const sf_summary *summary, const sf_reference *ref,
                            const sf_change *change, const sf__vec *v, sf_whatif **ret);

#endif

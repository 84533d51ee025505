/*
 * Building the mergeable window summary from one node's rows (docs/SPEC.md
 * section 4): per step and boundary the top-2 prefixes, per stage the
 * max/sum/min, the slowest rank, rank 0, and the end frontier with each
 * candidate clipped to its rank-median baseline. Pure: memory only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "vec/vec.h"

/* ---- allocation --------------------------------------------------------- */

static void candidates_init(sf_candidate_set *cand, const sf_schema *schema)
{
    memset(cand, 0, sizeof *cand);
    for (uint32_t s = 0; s < schema->n_stages; s++)
        cand->member_mask[cand->n++] = UINT64_C(1) << s;
    cand->n_stage = cand->n;
    for (uint32_t g = 0; g < schema->n_groups; g++) {
        uint64_t mask = 0;
        for (uint32_t s = 0; s < schema->n_stages; s++)
            if (schema->group_of[s] == g)
                mask |= UINT64_C(1) << s;
        if (__builtin_popcountll(mask) > 1)
            cand->member_mask[cand->n++] = mask;
    }
}

/* Int64 slots per step: dmax, dmin, dsum, slowest_d, rank0_d (S each) and C
 * clipped end frontiers. */
static size_t step_slots(const sf_summary *s)
{
    return 5 * (size_t)s->schema.n_stages + s->cand.n;
}

static void step_bind(sf_summary *s, uint32_t i)
{
    size_t S = s->schema.n_stages;
    sf_step_summary *st = &s->steps[i];
    int64_t *base = s->storage + (size_t)i * step_slots(s);
    st->prefix_top2 = s->top2_storage + (size_t)i * S;
    st->dmax = base;
    st->dmin = base + S;
    st->dsum = base + 2 * S;
    st->slowest_d = base + 3 * S;
    st->rank0_d = base + 4 * S;
    st->clipped_end = base + 5 * S;
}

static void step_reset(sf_summary *s, uint32_t i)
{
    sf_step_summary *st = &s->steps[i];
    for (uint32_t k = 0; k < s->schema.n_stages; k++) {
        st->prefix_top2[k] = (sf_top2){INT64_MIN, INT64_MIN, SF_NO_RANK, SF_NO_RANK};
        st->dmax[k] = INT64_MIN;
        st->dmin[k] = INT64_MAX;
        st->dsum[k] = 0;
    }
    for (uint32_t c = 0; c < s->cand.n; c++)
        st->clipped_end[c] = INT64_MIN;
    st->n_ranks = 0;
    st->slowest_total = INT64_MIN;
    st->slowest_rank = SF_NO_RANK;
    st->has_rank0 = false;
    st->residual_sum = st->overlap_sum = st->end_sum = 0;
    st->arrival_missing = 0;
}

int sf_summary_alloc(const sf_schema *schema, const sf_window_meta *meta, uint32_t n_steps,
                     sf_summary **ret)
{
    if (schema == NULL || meta == NULL || ret == NULL || n_steps > SF_MAX_WINDOW_STEPS)
        return -EINVAL;
    sf_summary *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    int r = sf_schema_copy(&s->schema, schema);
    if (r < 0) {
        free(s);
        return r;
    }
    s->meta = *meta;
    candidates_init(&s->cand, &s->schema);
    s->n_steps = n_steps;
    size_t n = n_steps ? n_steps : 1;
    s->steps = calloc(n, sizeof *s->steps);
    s->storage = calloc(n * step_slots(s), sizeof *s->storage);
    s->top2_storage = calloc(n * s->schema.n_stages, sizeof *s->top2_storage);
    if (s->steps == NULL || s->storage == NULL || s->top2_storage == NULL) {
        sf_summary_free(s);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n_steps; i++) {
        step_bind(s, i);
        step_reset(s, i);
    }
    *ret = s;
    return 0;
}

void sf__dense_free(sf_dense *d)
{
    if (d == NULL)
        return;
    for (uint32_t i = 0; i < d->n_ranks && d->roles; i++)
        free(d->roles[i]);
    free(d->roles);
    free(d->parallel);
    free(d->sync_wait);
    free(d->ranks);
    if (!d->d_borrowed)
        free(d->d);
    free(d->present);
    free(d->rank_median);
    free(d);
}

size_t sf_summary_bytes(const sf_summary *s)
{
    size_t n = (size_t)(s->n_steps ? s->n_steps : 1), bytes = sizeof *s;
    bytes += n * (sizeof *s->steps + step_slots(s) * sizeof *s->storage +
                  s->schema.n_stages * sizeof *s->top2_storage);
    bytes += (size_t)s->n_intervals * sizeof *s->coverage;
    if (s->dense != NULL) {
        size_t R = s->dense->n_ranks, S = s->schema.n_stages;
        bytes += sizeof *s->dense + R * (sizeof *s->dense->ranks + sizeof(char *));
        bytes += n * R * (S * sizeof(int64_t) * !s->dense->d_borrowed + 1);
        bytes += s->dense->rank_median ? R * S * sizeof(int64_t) : 0;
        bytes += s->dense->parallel ? R * sizeof(sf_parallel) : 0;
        bytes +=
            s->dense->sync_wait
                ? n * R * 2 * (size_t)__builtin_popcountll(s->schema.sync_mask) * sizeof(int64_t)
                : 0;
    }
    return bytes + sf__comm_bytes(s->comm) + sf__cohort_bytes(s->cohort);
}

void sf_summary_free(sf_summary *s)
{
    if (s == NULL)
        return;
    sf_schema_clear(&s->schema);
    for (uint32_t i = 0; i < s->n_roles; i++)
        free(s->roles[i]);
    sf__dense_free(s->dense);
    sf__comm_free(s->comm);
    sf_cohort_summary_free(s->cohort);
    free(s->coverage);
    free(s->steps);
    free(s->storage);
    free(s->top2_storage);
    free(s);
}

/* ---- the per-row fold ------------------------------------------------- */

void sf__top2_insert(sf_top2 *t, int64_t v, uint32_t rank)
{
    if (v > t->v1 || (v == t->v1 && rank < t->r1)) {
        t->v2 = t->v1;
        t->r2 = t->r1;
        t->v1 = v;
        t->r1 = rank;
    } else if (v > t->v2 || (v == t->v2 && rank < t->r2)) {
        t->v2 = v;
        t->r2 = rank;
    }
}

/* One step's accumulators, local to the fold so that nothing the compiler
 * sees can alias the rows' durations: they stay in registers or L1 while a
 * step's rows stream by, and are stored into the summary once per step. */
struct step_acc {
    sf_top2 top2[SF_MAX_STAGES];
    int64_t dmax[SF_MAX_STAGES], dmin[SF_MAX_STAGES], dsum[SF_MAX_STAGES];
    int64_t clipped[2 * SF_MAX_STAGES];
};

static inline __attribute__((always_inline)) void
acc_start(struct step_acc *a, const sf_step_summary *st, uint32_t S, uint32_t C)
{
    for (uint32_t k = 0; k < S; k++) {
        a->top2[k] = st->prefix_top2[k];
        a->dmax[k] = st->dmax[k];
        a->dmin[k] = st->dmin[k];
        a->dsum[k] = st->dsum[k];
    }
    for (uint32_t c = 0; c < C; c++)
        a->clipped[c] = st->clipped_end[c];
}

/* Also the residual and end sums, which the stage sums hold: the rows'
 * totals summed stage by stage are the same integers. */
static inline __attribute__((always_inline)) void
acc_store(const struct step_acc *a, sf_step_summary *st, uint32_t S, uint32_t C)
{
    st->residual_sum += a->dsum[S - 1] - st->dsum[S - 1];
    for (uint32_t k = 0; k < S; k++) {
        st->end_sum += a->dsum[k] - st->dsum[k];
        st->prefix_top2[k] = a->top2[k];
        st->dmax[k] = a->dmax[k];
        st->dmin[k] = a->dmin[k];
        st->dsum[k] = a->dsum[k];
    }
    for (uint32_t c = 0; c < C; c++)
        st->clipped_end[c] = a->clipped[c];
}

/* Adds one rank's durations to a step. baseline holds the rank's median per
 * stage (the clip level for the rank-median gain). Always inlined, so that
 * callers passing a constant S get the stage loops unrolled. The first S
 * candidates are the single stages (candidates_init), so their cut is one
 * saving; only group candidates walk their member masks. */
static inline __attribute__((always_inline)) void
step_add_row_s(const sf_candidate_set *cand, struct step_acc *restrict a, sf_step_summary *st,
               const sf_row *row, const int64_t *restrict baseline, uint32_t S)
{
    const int64_t *restrict d = row->d;
    int64_t p = 0;
    int64_t saving[SF_MAX_STAGES];
    for (uint32_t k = 0; k < S; k++) {
        p += d[k];
        sf__top2_insert_ascending(&a->top2[k], p, row->rank);
        a->dmax[k] = d[k] > a->dmax[k] ? d[k] : a->dmax[k];
        a->dmin[k] = d[k] < a->dmin[k] ? d[k] : a->dmin[k];
        a->dsum[k] += d[k];
        saving[k] = sf__excess(d[k], baseline[k]);
    }
    for (uint32_t c = 0; c < S; c++) {
        int64_t end = p - saving[c];
        a->clipped[c] = end > a->clipped[c] ? end : a->clipped[c];
    }
    for (uint32_t c = S; c < cand->n; c++) {
        int64_t cut = 0;
        for (uint64_t m = cand->member_mask[c]; m; m &= m - 1)
            cut += saving[__builtin_ctzll(m)];
        a->clipped[c] = p - cut > a->clipped[c] ? p - cut : a->clipped[c];
    }
    if (p > st->slowest_total) { /* ascending ranks: the first of equals stays */
        st->slowest_total = p;
        st->slowest_rank = row->rank;
        memcpy(st->slowest_d, d, S * sizeof *d);
    }
    if (row->rank == 0) {
        st->has_rank0 = true;
        memcpy(st->rank0_d, d, S * sizeof *d);
    }
    st->n_ranks++;
}

/* ---- ordering helpers ------------------------------------------------- */

static int cmp_step_rank(const void *a, const void *b)
{
    const sf_row *x = *(const sf_row *const *)a, *y = *(const sf_row *const *)b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* How the caller laid its rows out. Rows that every step holds for the
 * same ranks (a grid) need no rank lookups; a grid whose durations are one
 * step-major array (sfd's windows, replay's files, the benchmark) is read
 * straight from that array, and need not be copied for dense mode. */
struct layout {
    bool sorted;           /* the rows came in (step, rank) order */
    uint32_t grid_ranks;   /* non-zero: rows = steps x grid_ranks, same ranks each step */
    const int64_t *matrix; /* non-NULL: a sorted grid, row i's durations at matrix + i S */
    const sf__vec *fold;   /* the form of a grid's vector fold (vec/vec.h), or NULL: none */
};

/* The rows in (step, rank) order: the caller's array itself when it came in
 * that order (the common case, which then needs no array of pointers), or
 * pointers to its rows, sorted. */
struct view {
    const sf_row *rows;
    const sf_row **sorted; /* NULL when rows came in order */
};

static inline const sf_row *at(const struct view *v, size_t i)
{
    return v->sorted ? v->sorted[i] : &v->rows[i];
}

/* ---- rank medians, coverage and roles ---------------------------------- */

struct rank_info {
    uint32_t n;
    uint32_t *ranks;    /* distinct, ascending */
    uint32_t *slot_of;  /* [max rank + 1]: rank -> slot, a table not a search */
    int64_t *baseline;  /* [n][S] rank-median per stage */
    const char **roles; /* [n], the role of the rank's lowest step */
};

static void rank_info_clear(struct rank_info *ri)
{
    free(ri->ranks);
    free(ri->slot_of);
    free(ri->baseline);
    free((void *)ri->roles);
}

/* Slots in ascending rank order, from a presence table: O(rows + max rank). */
static int assign_slots(const struct view *rows, size_t n_rows, struct rank_info *ri)
{
    uint32_t max_rank = 0;
    for (size_t i = 0; i < n_rows; i++)
        if (at(rows, i)->rank > max_rank)
            max_rank = at(rows, i)->rank;
    ri->slot_of = malloc(((size_t)max_rank + 1) * sizeof *ri->slot_of);
    ri->ranks = malloc((n_rows ? n_rows : 1) * sizeof *ri->ranks);
    if (ri->slot_of == NULL || ri->ranks == NULL)
        return -ENOMEM;
    memset(ri->slot_of, 0xff, ((size_t)max_rank + 1) * sizeof *ri->slot_of);
    for (size_t i = 0; i < n_rows; i++)
        ri->slot_of[at(rows, i)->rank] = 0;
    for (uint32_t r = 0; n_rows && r <= max_rank; r++)
        if (ri->slot_of[r] == 0) {
            ri->slot_of[r] = ri->n;
            ri->ranks[ri->n++] = r;
        }
    return 0;
}

/* On a grid the first step lists every rank, in order. */
static int assign_slots_grid(const struct view *rows, uint32_t n_ranks, struct rank_info *ri)
{
    uint32_t max_rank = at(rows, n_ranks - 1)->rank;
    ri->slot_of = malloc(((size_t)max_rank + 1) * sizeof *ri->slot_of);
    ri->ranks = malloc(n_ranks * sizeof *ri->ranks);
    if (ri->slot_of == NULL || ri->ranks == NULL)
        return -ENOMEM;
    memset(ri->slot_of, 0xff, ((size_t)max_rank + 1) * sizeof *ri->slot_of);
    for (uint32_t i = 0; i < n_ranks; i++) {
        ri->ranks[i] = at(rows, i)->rank;
        ri->slot_of[at(rows, i)->rank] = i;
    }
    ri->n = n_ranks;
    return 0;
}

/* Rows arrive step by step, medians need rank by rank. A block of ranks at a
 * time is gathered (ranks ascend within each step, so one cursor per step
 * walks forward), keeping the transpose inside the cache. */
struct gather {
    const struct view *rows; /* sorted by (step, rank) */
    size_t n_rows;
    size_t *cursor;   /* per step: the next row not yet gathered */
    size_t *step_end; /* per step: one past its last row */
    uint32_t n_steps;
};

static uint32_t block_medians(const struct gather *g, struct rank_info *ri, uint32_t S, uint32_t lo,
                              uint32_t hi, int64_t *values, uint32_t *count)
{
    memset(count, 0, (hi - lo) * sizeof *count);
    for (uint32_t t = 0; t < g->n_steps; t++)
        for (size_t i = g->cursor[t]; i < g->step_end[t]; i = ++g->cursor[t]) {
            const sf_row *row = at(g->rows, i);
            uint32_t slot = ri->slot_of[row->rank];
            if (slot >= hi)
                break;
            uint32_t at = count[slot - lo]++;
            int64_t *v = &values[(size_t)(slot - lo) * S * g->n_steps];
            for (uint32_t k = 0; k < S; k++)
                v[(size_t)k * g->n_steps + at] = row->d[k];
            if (at == 0) /* steps ascend: the first row is the rank's lowest step */
                ri->roles[slot] = row->role ? row->role : "";
        }
    for (uint32_t slot = lo; slot < hi; slot++)
        for (uint32_t k = 0; k < S; k++)
            ri->baseline[(size_t)slot * S + k] = sf_median_i64(
                &values[((size_t)(slot - lo) * S + k) * g->n_steps], count[slot - lo]);
    return hi;
}

/* The grid's transpose: row (t, slot) is row t R + slot, so no cursor and no
 * lookup; from the step-major array, a block of ranks of one step is one
 * contiguous run. The block is small enough that the lines being filled
 * (one per rank and stage) stay in L1 while the steps go by. */
enum { GRID_BLOCK = 32, GRID_AHEAD = 4 };

static void grid_block_medians(const struct view *rows, const struct layout *lay, uint32_t n_steps,
                               struct rank_info *ri, uint32_t S, uint32_t lo, uint32_t hi,
                               int64_t *values)
{
    size_t R = lay->grid_ranks, T = n_steps;
    for (size_t t = 0; t < T; t++)
        for (uint32_t slot = lo; slot < hi; slot++) {
            const int64_t *d =
                lay->matrix ? lay->matrix + (t * R + slot) * S : at(rows, t * R + slot)->d;
            /* Steps lie a whole step of rows apart: fetch a few steps ahead,
             * which the hardware's stream detection does not do. */
            if (lay->matrix && t + GRID_AHEAD < T)
                __builtin_prefetch(d + GRID_AHEAD * R * S);
            int64_t *v = &values[(size_t)(slot - lo) * S * T + t];
            for (uint32_t k = 0; k < S; k++)
                v[k * T] = d[k];
        }
    for (uint32_t slot = lo; slot < hi; slot++) {
        ri->roles[slot] = at(rows, slot)->role ? at(rows, slot)->role : "";
        for (uint32_t k = 0; k < S; k++)
            ri->baseline[(size_t)slot * S + k] =
                sf_median_i64(&values[((size_t)(slot - lo) * S + k) * T], T);
    }
}

/* The same block through a selection network (vec/median_net.c), NET_RANKS
 * ranks at a time: each group's values lie step by step, every (rank, stage)
 * series in its own lane, so a step of a step-major array is one copy. */
enum { NET_RANKS = 8 };

/* Steps lie a whole step of rows apart, and a block's run of one step is
 * too short for the hardware's stream detection: its lines are fetched
 * ahead, into L1 (near: a few steps ahead) or into L2 (a block to come). */
static inline void prefetch_block(const struct layout *lay, size_t t, size_t S, uint32_t lo,
                                  uint32_t hi, bool near)
{
    if (lay->matrix == NULL)
        return;
    const char *run = (const char *)(lay->matrix + (t * lay->grid_ranks + lo) * S);
    for (size_t b = 0; b < (hi - lo) * S * sizeof(int64_t); b += 64) {
        if (near)
            __builtin_prefetch(run + b);
        else
            __builtin_prefetch(run + b, 0, 2);
    }
}

/* The block's medians read from the step-major array where it lies, with
 * no copy: the forms on offsets only read their series, a step of rows
 * apart. False where some series does not fit offsets (or without AVX2);
 * the block is then copied into groups. */
static bool net_block_in_place(const struct layout *lay, struct rank_info *ri, uint32_t S,
                               uint32_t lo, uint32_t hi, const sf__median_net *net,
                               const sf__vec *vec)
{
    return sf__median_net_narrow(net, vec, lay->matrix + (size_t)lo * S,
                                 (size_t)lay->grid_ranks * S, (size_t)(hi - lo) * S,
                                 &ri->baseline[(size_t)lo * S]) == 0;
}

static void grid_block_net(const struct view *rows, const struct layout *lay, uint32_t n_steps,
                           struct rank_info *ri, uint32_t S, uint32_t lo, uint32_t hi,
                           int64_t *values, const sf__median_net *net, const sf__vec *vec)
{
    size_t R = lay->grid_ranks, T = n_steps, group = (size_t)NET_RANKS * S * T;
    for (uint32_t slot = lo; slot < hi; slot++)
        ri->roles[slot] = at(rows, slot)->role ? at(rows, slot)->role : "";
    if (lay->matrix && net_block_in_place(lay, ri, S, lo, hi, net, vec))
        return;
    for (size_t t = 0; t < T; t++) {
        if (t + GRID_AHEAD < T)
            prefetch_block(lay, t + GRID_AHEAD, S, lo, hi, true);
        for (uint32_t g = lo; g < hi; g += NET_RANKS) {
            uint32_t n = hi - g < NET_RANKS ? hi - g : NET_RANKS;
            int64_t *v = &values[(g - lo) / NET_RANKS * group + t * n * S];
            if (lay->matrix) {
                memcpy(v, lay->matrix + (t * R + g) * S, (size_t)n * S * sizeof *v);
                continue;
            }
            for (uint32_t i = 0; i < n; i++)
                memcpy(v + (size_t)i * S, at(rows, t * R + g + i)->d, S * sizeof *v);
        }
    }
    for (uint32_t g = lo; g < hi; g += NET_RANKS) {
        uint32_t n = hi - g < NET_RANKS ? hi - g : NET_RANKS;
        sf__median_net_run(net, vec, &values[(g - lo) / NET_RANKS * group], (size_t)n * S,
                           &ri->baseline[(size_t)g * S]);
    }
}

/* The durations of ranks [lo, hi) into every step of fold_into, right after
 * their medians: the block's rows are still in cache (vec/vec.h). On the
 * way, the next block's rows are fetched into L2, so that its medians,
 * which read them first, a step of rows apart, wait on L2 rather than on
 * memory: at 16 384 ranks that made the build 15 to 20 % faster.
 * Where a step of rows spans a multiple of L2's sets (a power of two of
 * ranks), a block's steps share a set and its lines wait on L3 instead:
 * the build is about 5 % slower at 16 384 ranks than at 16 383. The rows
 * are the caller's, read in place, so their stride cannot be padded.
 * False where some duration is out of its bounds (the fold checks them). */
static bool fold_grid_block(sf_summary *fold_into, const struct rank_info *ri,
                            const struct view *rows, const struct layout *lay, uint32_t lo,
                            uint32_t hi)
{
    size_t R = lay->grid_ranks, S = fold_into->schema.n_stages;
    int64_t quads[GRID_BLOCK * 8]; /* the vector folds take at most 8 stages */
    if (lay->fold->fold_quads)
        sf__baseline_quads(ri->baseline + lo * S, hi - lo, (uint32_t)S, quads);
    uint32_t next_hi = hi + GRID_BLOCK < R ? hi + GRID_BLOCK : (uint32_t)R;
    for (uint32_t t = 0; t < fold_into->n_steps; t++) {
        prefetch_block(lay, t, S, hi, next_hi, false);
        struct sf__grid_step g = {.rows = rows->sorted ? NULL : rows->rows + t * R + lo,
                                  .ptrs = rows->sorted ? rows->sorted + t * R + lo : NULL,
                                  .matrix = lay->matrix ? lay->matrix + (t * R + lo) * S : NULL,
                                  .n = hi - lo,
                                  .ranks = ri->ranks + lo,
                                  .baseline = ri->baseline + lo * S,
                                  .baseline_quads = lay->fold->fold_quads ? quads : NULL};
        if (!lay->fold->fold_grid(fold_into, &fold_into->steps[t], &g))
            return false;
    }
    return true;
}

/* Whether a grid's rank medians are taken by the selection network, which
 * is defined for any values, so that they may be taken before the grid fold
 * has checked them (vec/median_net.c); else by sf_median_i64. */
static bool medians_by_network(size_t n_steps)
{
    return n_steps <= SF__MEDIAN_NET_MAX && sf__vec_chosen()->net_pays;
}

static int rank_medians_grid(const sf_schema *schema, const struct view *rows,
                             const struct layout *lay, uint32_t n_steps, struct rank_info *ri,
                             sf_summary *fold_into)
{
    uint32_t S = schema->n_stages;
    sf__median_net *net = NULL;
    const sf__vec *vec = sf__vec_chosen();
    if (medians_by_network(n_steps) && sf__median_net_new(n_steps, &net) < 0)
        return -ENOMEM;
    int64_t *values = malloc((size_t)GRID_BLOCK * S * n_steps * sizeof *values);
    int r = values ? 0 : -ENOMEM;
    for (uint32_t lo = 0; lo < ri->n && r == 0; lo += GRID_BLOCK) {
        uint32_t hi = lo + GRID_BLOCK < ri->n ? lo + GRID_BLOCK : ri->n;
        if (net != NULL)
            grid_block_net(rows, lay, n_steps, ri, S, lo, hi, values, net, vec);
        else
            grid_block_medians(rows, lay, n_steps, ri, S, lo, hi, values);
        if (fold_into != NULL && !fold_grid_block(fold_into, ri, rows, lay, lo, hi))
            r = -ERANGE;
    }
    free(values);
    sf__median_net_free(net);
    return r;
}

static int rank_medians(const sf_schema *schema, const struct view *rows, size_t n_rows,
                        uint32_t n_steps, struct rank_info *ri)
{
    uint32_t S = schema->n_stages;
    uint32_t block = (uint32_t)((1u << 16) / ((size_t)S * (n_steps ? n_steps : 1)));
    block = block ? block : 1;
    struct gather g = {.rows = rows, .n_rows = n_rows, .n_steps = n_steps};
    g.cursor = malloc((n_steps ? n_steps : 1) * sizeof *g.cursor);
    g.step_end = malloc((n_steps ? n_steps : 1) * sizeof *g.step_end);
    int64_t *values = malloc((size_t)block * S * (n_steps ? n_steps : 1) * sizeof *values);
    uint32_t *count = malloc(block * sizeof *count);
    int r = -ENOMEM;
    if (!g.cursor || !g.step_end || !values || !count)
        goto out;
    for (size_t i = 0, t = 0; i < n_rows; i++) {
        if (i == 0 || at(rows, i)->step != at(rows, i - 1)->step)
            g.cursor[t++] = i;
        g.step_end[t - 1] = i + 1;
    }
    for (uint32_t lo = 0; lo < ri->n;)
        lo = block_medians(&g, ri, S, lo, lo + block < ri->n ? lo + block : ri->n, values, count);
    r = 0;
out:
    free(g.cursor);
    free(g.step_end);
    free(values);
    free(count);
    return r;
}

/* Whether a grid's durations are folded block by block while its medians
 * are taken (fold_grid_block), rather than by fold_rows. */
static bool grid_fold_vec(const struct layout *lay)
{
    return lay->grid_ranks && lay->fold != NULL;
}

static int rank_info_build(sf_summary *s, const struct view *rows, size_t n_rows, uint32_t n_steps,
                           const struct layout *lay, struct rank_info *ri)
{
    const sf_schema *schema = &s->schema;
    memset(ri, 0, sizeof *ri);
    int r = lay->grid_ranks ? assign_slots_grid(rows, lay->grid_ranks, ri)
                            : assign_slots(rows, n_rows, ri);
    if (r < 0)
        return r;
    ri->baseline = malloc((ri->n ? ri->n : 1) * schema->n_stages * sizeof *ri->baseline);
    ri->roles = malloc((ri->n ? ri->n : 1) * sizeof *ri->roles);
    if (ri->baseline == NULL || ri->roles == NULL)
        return -ENOMEM;
    if (lay->grid_ranks)
        return rank_medians_grid(schema, rows, lay, n_steps, ri, grid_fold_vec(lay) ? s : NULL);
    return rank_medians(schema, rows, n_rows, n_steps, ri);
}

static uint32_t rank_slot(const struct rank_info *ri, uint32_t rank)
{
    return ri->slot_of[rank];
}

static int coverage_from_ranks(sf_summary *s, const struct rank_info *ri)
{
    s->coverage = malloc((ri->n ? ri->n : 1) * sizeof *s->coverage);
    if (s->coverage == NULL)
        return -ENOMEM;
    s->n_intervals = 0;
    for (uint32_t i = 0; i < ri->n; i++) {
        sf_rank_interval *last = s->n_intervals ? &s->coverage[s->n_intervals - 1] : NULL;
        if (last && last->hi + 1 == ri->ranks[i])
            last->hi = ri->ranks[i];
        else
            s->coverage[s->n_intervals++] = (sf_rank_interval){ri->ranks[i], ri->ranks[i]};
    }
    return 0;
}

int sf__roles_add(sf_summary *s, const char *role)
{
    uint32_t i = 0;
    while (i < s->n_roles && strcmp(s->roles[i], role) < 0)
        i++;
    if (i < s->n_roles && strcmp(s->roles[i], role) == 0)
        return 0;
    if (s->n_roles == SF_MAX_ROLES) {
        s->roles_overflow = true;
        return 0;
    }
    char *copy = strdup(role);
    if (copy == NULL)
        return -ENOMEM;
    memmove(&s->roles[i + 1], &s->roles[i], (s->n_roles - i) * sizeof s->roles[0]);
    s->roles[i] = copy;
    s->n_roles++;
    return 0;
}

/* ---- dense rows --------------------------------------------------------- */

/* A grid's dense rows are its rows in order: one copy, or none at all when
 * the caller's step-major array outlives the summary (borrow). */
static void dense_fill_grid(sf_dense *d, const struct layout *lay, const struct view *by_step,
                            size_t n_rows, uint32_t S)
{
    memset(d->present, 1, n_rows);
    if (lay->matrix != NULL) {
        memcpy(d->d, lay->matrix, n_rows * S * sizeof *d->d);
        return;
    }
    for (size_t i = 0; i < n_rows; i++)
        memcpy(&d->d[i * S], at(by_step, i)->d, S * sizeof *d->d);
}

/* The last use of ri: its rank medians move to the dense rows. */
static int dense_build(sf_summary *s, struct rank_info *ri, const struct view *by_step,
                       size_t n_rows, const struct layout *lay, bool borrow)
{
    uint32_t S = s->schema.n_stages;
    sf_dense *d = calloc(1, sizeof *d);
    if (d == NULL)
        return -ENOMEM;
    s->dense = d;
    d->n_ranks = ri->n;
    size_t cells = (size_t)s->n_steps * ri->n;
    d->ranks = malloc((ri->n ? ri->n : 1) * sizeof *d->ranks);
    d->roles = calloc(ri->n ? ri->n : 1, sizeof *d->roles);
    d->d_borrowed = borrow && lay->matrix != NULL && cells > 0;
    if (d->d_borrowed)
        d->d = (int64_t *)lay->matrix; /* read-only from here on: see d_borrowed */
    else if (lay->grid_ranks)
        d->d = malloc(cells ? cells * S * sizeof *d->d : 1);
    else
        d->d = calloc(cells ? cells * S : 1, sizeof *d->d);
    d->present = lay->grid_ranks ? malloc(cells ? cells : 1) : calloc(cells ? cells : 1, 1);
    if (!d->ranks || !d->roles || !d->d || !d->present)
        return -ENOMEM;
    for (uint32_t i = 0; i < ri->n; i++) {
        d->ranks[i] = ri->ranks[i];
        if ((d->roles[i] = strdup(ri->roles[i])) == NULL)
            return -ENOMEM;
    }
    d->rank_median = ri->baseline;
    ri->baseline = NULL;
    if (lay->grid_ranks) {
        if (d->d_borrowed)
            memset(d->present, 1, cells);
        else
            dense_fill_grid(d, lay, by_step, n_rows, S);
        return 0;
    }
    uint32_t step_i = 0;
    for (size_t i = 0; i < n_rows; i++) {
        while (s->steps[step_i].step != at(by_step, i)->step)
            step_i++;
        size_t cell = (size_t)step_i * ri->n + rank_slot(ri, at(by_step, i)->rank);
        memcpy(&d->d[cell * S], at(by_step, i)->d, S * sizeof(int64_t));
        d->present[cell] = 1;
    }
    return 0;
}

/* ---- build -------------------------------------------------------------- */

static uint32_t count_steps(const struct view *by_step, size_t n_rows)
{
    uint32_t n = 0;
    for (size_t i = 0; i < n_rows; i++)
        if (i == 0 || at(by_step, i)->step != at(by_step, i - 1)->step)
            n++;
    return n;
}

/* The window-level counts of the rows' flags and event samples. */
struct window_sums {
    uint64_t violation_rows, non_monotonic_rows, event_samples, event_ready;
    int64_t event_cpu_ns, event_gpu_ns;
    uint64_t parallel_rows; /* rows with coordinates: the cohort pass runs only then */
};

static inline void window_sums_add(struct window_sums *w, const sf_row *row)
{
    w->violation_rows += (row->flags & SF_ROW_VIOLATION) != 0;
    w->non_monotonic_rows += (row->flags & SF_ROW_NON_MONOTONIC) != 0;
    w->parallel_rows += row->parallel != NULL;
    if (row->event_state != SF_EVENT_NONE) {
        w->event_samples++;
        if (row->event_state == SF_EVENT_READY) {
            w->event_ready++;
            w->event_cpu_ns += row->event_cpu_ns;
            w->event_gpu_ns += row->event_gpu_ns;
        }
    }
}

static void window_sums_store(sf_summary *s, const struct window_sums *w)
{
    s->violation_rows += w->violation_rows;
    s->non_monotonic_rows += w->non_monotonic_rows;
    s->event_samples += w->event_samples;
    s->event_ready += w->event_ready;
    s->event_cpu_ns += w->event_cpu_ns;
    s->event_gpu_ns += w->event_gpu_ns;
    s->parallel_rows += w->parallel_rows;
}

/* Checks rows and, in the same pass, finds the layout: a grid when every
 * step starts exactly one first-step's length after the previous one and
 * repeats its ranks; a step-major array when the sorted rows' durations
 * follow one another in memory. One row at a time (check_row), so that
 * view_and_check can run it while it builds the view. */
struct row_scan {
    size_t per_step, col, row_bytes;
    bool grid, contiguous;
    uintptr_t next_d;     /* where a step-major array holds the next row's durations */
    int64_t step_overlap; /* the current step's sums, stored when it ends */
    uint32_t step_arrival;
    struct window_sums win;
};

/* The scan's state is copied into a local for the loop (check_loop_begin),
 * where nothing can alias it: it stays in registers, and a store to the
 * per-step sums, which could alias the rows, comes once a step. */
struct row_check {
    struct row_scan scan;
    /* The rows' other fields, summed on the way, so that every fold
     * (fold_row_fields) takes them from here and never sums them again: per
     * step, in order. */
    int64_t *overlap;
    uint32_t *arrival;
    size_t n_steps, cap;
    /* The first step's ranks, which every later step of a grid repeats:
     * packed, they stay in cache where the first step's rows would not. */
    uint32_t *first_ranks;
    /* Rows before fold_to hold every step whose durations were left to the
     * grid fold (view_and_check); none where fold_to is 0. */
    size_t fold_to;
};

static void check_free(struct row_check *c)
{
    free(c->overlap);
    free(c->arrival);
    free(c->first_ranks);
}

/* The sums of the step that ends, into its slot. */
static inline void check_step_end(struct row_check *c, const struct row_scan *sc)
{
    if (c->n_steps) {
        c->overlap[c->n_steps - 1] = sc->step_overlap;
        c->arrival[c->n_steps - 1] = sc->step_arrival;
    }
}

/* Room for one more step's sums: rarely taken, kept out of line. */
static __attribute__((noinline)) int check_grow(struct row_check *c)
{
    size_t cap = c->cap ? 2 * c->cap : 64;
    int64_t *overlap = realloc(c->overlap, cap * sizeof *overlap);
    if (overlap == NULL)
        return -ENOMEM;
    c->overlap = overlap;
    uint32_t *arrival = realloc(c->arrival, cap * sizeof *arrival);
    if (arrival == NULL)
        return -ENOMEM;
    c->arrival = arrival;
    c->cap = cap;
    return 0;
}

static inline __attribute__((always_inline)) int check_new_step(struct row_check *c,
                                                                struct row_scan *sc)
{
    check_step_end(c, sc);
    sc->step_overlap = 0;
    sc->step_arrival = 0;
    int r = c->n_steps == c->cap ? check_grow(c) : 0;
    if (r < 0)
        return r;
    c->n_steps++;
    return 0;
}

static void check_begin(struct row_check *c, const sf_schema *schema, const sf_row *first,
                        size_t n_rows, bool sorted)
{
    check_free(c);
    *c = (struct row_check){.scan = {.row_bytes = schema->n_stages * sizeof(int64_t),
                                     .grid = n_rows > 0,
                                     .contiguous = sorted && n_rows > 0,
                                     .next_d = n_rows ? (uintptr_t)first->d : 0}};
}

static inline __attribute__((always_inline)) int check_row(struct row_check *c, struct row_scan *sc,
                                                           uint32_t n_stages,
                                                           const struct view *by_step, size_t i)
{
    const sf_row *row = at(by_step, i);
    if (row->d == NULL)
        return -EINVAL;
    int r = sf__row_check(row, n_stages);
    if (r < 0)
        return r;
    bool new_step = i && row->step != at(by_step, i - 1)->step;
    if (i && !new_step && row->rank == at(by_step, i - 1)->rank)
        return -EEXIST;
    if ((i == 0 || new_step) && (r = check_new_step(c, sc)) < 0)
        return r;
    sc->step_overlap += row->overlap_ns;
    sc->step_arrival += (row->flags & SF_ROW_ARRIVAL_MISSING) != 0;
    window_sums_add(&sc->win, row);
    if (new_step && sc->per_step == 0) {
        sc->per_step = i;
        sc->col = 0;
    } else if (sc->per_step) {
        sc->col = sc->col + 1 == sc->per_step ? 0 : sc->col + 1;
    }
    if (sc->per_step) /* col is i % per_step, kept without a division */
        sc->grid &= new_step == (sc->col == 0) && row->rank == at(by_step, sc->col)->rank;
    sc->contiguous &= (uintptr_t)row->d == sc->next_d;
    sc->next_d += sc->row_bytes;
    return 0;
}

static void check_end(struct row_check *c, const struct view *by_step, size_t n_rows,
                      struct layout *lay)
{
    const struct row_scan *sc = &c->scan;
    check_step_end(c, sc);
    size_t per_step = sc->per_step ? sc->per_step : n_rows;
    bool grid = sc->grid && per_step > 0 && n_rows % per_step == 0;
    lay->grid_ranks = grid ? (uint32_t)per_step : 0;
    lay->matrix = grid && sc->contiguous ? at(by_step, 0)->d : NULL;
}

static int check_rows(const sf_schema *schema, const struct view *by_step, size_t n_rows,
                      struct layout *lay, struct row_check *c)
{
    check_begin(c, schema, n_rows ? at(by_step, 0) : NULL, n_rows, lay->sorted);
    struct row_scan scan = c->scan;
    for (size_t i = 0; i < n_rows; i++) {
        int r = check_row(c, &scan, schema->n_stages, by_step, i);
        if (r < 0)
            return r;
    }
    c->scan = scan;
    check_end(c, by_step, n_rows, lay);
    return 0;
}

/* The rows are read once, in order; a row is a cache line, and the hardware
 * fetches a line or two ahead on its own, a few rows' work too late. A
 * row's durations lie elsewhere: they are fetched once the row's own line,
 * fetched earlier, says where. */
enum { ROWS_AHEAD = 64, DURATIONS_AHEAD = 32 };

static bool in_order(const sf_row *a, const sf_row *b)
{
    return a->step < b->step || (a->step == b->step && a->rank <= b->rank);
}

/* What grid_step_fast learns of a step it passes. */
struct step_sums {
    int64_t overlap;
    bool contiguous; /* the durations lie where the scan expects them */
    bool marked;     /* some row carries a flag or an event sample */
};

/* The event samples' fields of a step that has any: a second, rarer pass. */
static __attribute__((noinline)) bool step_events_valid(const sf_row *row, size_t R)
{
    bool valid = true;
    for (const sf_row *end = row + R; row < end; row++)
        valid &= row->event_state == SF_EVENT_NONE ||
                 (row->event_state <= SF_EVENT_MISSING &&
                  (uint64_t)row->event_cpu_ns <= (uint64_t)SF_MAX_DURATION_NS &&
                  (uint64_t)row->event_gpu_ns <= (uint64_t)SF_MAX_DURATION_NS);
    return valid;
}

/* Whether the durations of rows [0, to) of the view are within bounds:
 * those left to a grid fold that did not take them, and the rows before. */
static bool durations_in_bounds(const struct view *v, size_t to, uint32_t S)
{
    uint64_t bits = 0, over = 0;
    for (size_t i = 0; i < to; i++)
        sf__durations_bound(at(v, i)->d, S, &bits, &over);
    return sf__durations_fit(bits, over);
}

/* Whether the rows of one step, [i, i + R) of a grid that the scan has
 * followed so far, repeat the first step's ranks with valid fields: the
 * common case, checked with no branch per row on the data. Rows that match
 * the first step's ranks are in order and distinct (the first step was
 * checked row by row), and a step above the last one passes the step's own
 * bounds, so what is left of check_row is the fields: the durations too,
 * unless `durations` is false (the grid fold will check them). On success
 * the step's sums are in *sum; on any doubt it returns false and the step
 * is checked row by row, which finds the first error, if any. */
static inline __attribute__((always_inline)) bool
grid_step_fast(const sf_row *rows, size_t i, size_t n, size_t R, const uint32_t *first_ranks,
               uintptr_t next_d, bool contiguous, bool durations, uint32_t S, struct step_sums *sum)
{
    const sf_row *row = &rows[i], *end = row + R;
    const uint32_t *rank = first_ranks;
    const int64_t step = row->step;
    /* how far ahead to fetch without passing the last row */
    const size_t rows_ahead = i + R + ROWS_AHEAD <= n ? ROWS_AHEAD : 0;
    const size_t d_ahead = i + R + DURATIONS_AHEAD <= n ? DURATIONS_AHEAD : 0;
    uint64_t bits = 0, over = 0, differ = (uint64_t)(step <= row[-1].step), marks = 0;
    uintptr_t expect_d = next_d, scattered = 0;
    uint64_t overlap = 0; /* unsigned: summed before it is checked */
    for (; row < end; row++, rank++, expect_d += S * sizeof(int64_t)) {
        __builtin_prefetch(&row[rows_ahead]);
        const int64_t *d = row->d;
        if (__builtin_expect(d == NULL, 0))
            return false;
        if (durations) {
            if (contiguous) /* no load of a row ahead for its pointer */
                __builtin_prefetch((const char *)expect_d + d_ahead * S * sizeof(int64_t));
            else
                __builtin_prefetch(row[d_ahead].d);
            sf__durations_bound(d, S, &bits, &over);
        }
        over |= (uint64_t)row->overlap_ns | ((uint64_t)row->overlap_ns + SF__OVER_STEP);
        differ |= (uint64_t)(row->step ^ step) | (row->rank ^ *rank);
        scattered |= (uintptr_t)d ^ expect_d;
        overlap += (uint64_t)row->overlap_ns;
        marks |= row->flags | row->event_state | (row->parallel != NULL);
    }
    if (differ || !sf__durations_fit(bits, over) || (marks && !step_events_valid(&rows[i], R)))
        return false;
    *sum = (struct step_sums){.overlap = (int64_t)overlap, /* R values of at most 2^41 */
                              .contiguous = scattered == 0,
                              .marked = marks != 0};
    return true;
}

/* The scan past the step of R rows at `step` that grid_step_fast passed, as
 * check_row would have left it row by row: flags and event samples are
 * counted in a second pass, only where the step has any. */
static int grid_step_take(struct row_check *c, struct row_scan *sc, const sf_row *step, size_t R,
                          const struct step_sums *sum)
{
    int r = check_new_step(c, sc);
    if (r < 0)
        return r;
    sc->step_overlap = sum->overlap;
    if (sum->marked)
        for (size_t col = 0; col < R; col++) {
            sc->step_arrival += (step[col].flags & SF_ROW_ARRIVAL_MISSING) != 0;
            window_sums_add(&sc->win, &step[col]);
        }
    sc->contiguous &= sum->contiguous;
    sc->next_d += R * sc->row_bytes;
    return 0;
}

/* The first step's ranks, packed at the first call; false where there is
 * no memory for them (the steps are then checked row by row). */
static bool first_ranks_of(struct row_check *c, const sf_row *first, size_t R)
{
    if (c->first_ranks)
        return true;
    if ((c->first_ranks = malloc(R * sizeof *c->first_ranks)) == NULL)
        return false;
    for (size_t col = 0; col < R; col++)
        c->first_ranks[col] = first[col].rank;
    return true;
}

/* The one pass of view_and_check over rows as they came: whether they are
 * in (step, rank) order, and the first error among them if they are. Once
 * the first step has shown a grid, each later step is tried whole
 * (grid_step_fast) before row by row; with fold_checks, such a step's
 * durations are left to the grid fold, where its medians are taken by the
 * network (medians_by_network). */
static inline __attribute__((always_inline)) bool view_check_s(struct row_check *c,
                                                               const struct view *v, size_t n,
                                                               bool whole_steps, bool fold_checks,
                                                               int *err, uint32_t S)
{
    struct row_scan scan = c->scan;
    size_t i = 0;
    for (; i < n && *err == 0; i++) {
        size_t R = scan.per_step;
        struct step_sums sum;
        if (whole_steps && R && scan.grid && scan.col + 1 == R && i + R <= n &&
            first_ranks_of(c, v->rows, R)) {
            bool to_fold = fold_checks && medians_by_network(n / R);
            if (grid_step_fast(v->rows, i, n, R, c->first_ranks, scan.next_d, scan.contiguous,
                               !to_fold, S, &sum)) {
                if (to_fold)
                    c->fold_to = i + R;
                *err = grid_step_take(c, &scan, &v->rows[i], R, &sum);
                i += R - 1;
                continue;
            }
        }
        if (i + ROWS_AHEAD < n)
            __builtin_prefetch(&v->rows[i + ROWS_AHEAD]);
        if (i + DURATIONS_AHEAD < n)
            __builtin_prefetch(v->rows[i + DURATIONS_AHEAD].d);
        if (i > 0 && !in_order(&v->rows[i - 1], &v->rows[i]))
            return false;
        *err = check_row(c, &scan, S, v, i);
    }
    c->scan = scan;
    for (; i < n; i++) /* past an error, only whether the rows came in order */
        if (!in_order(&v->rows[i - 1], &v->rows[i]))
            return false;
    return true;
}

/* The rows viewed in (step, rank) order and checked into c (zeroed, or from
 * an earlier call). Rows that came in that order (the common case) are
 * viewed in place and checked in one pass. Others are sorted and checked
 * again, so the error returned is always the first in (step, rank) order,
 * whichever order the rows came in. With fold_checks, the durations of a
 * grid's later steps may be left to the grid fold (c->fold_to):
 * the error returned is then the first but for them. On success the caller
 * frees ret->sorted. */
static int view_and_check(const sf_schema *schema, const sf_row *rows, size_t n, bool whole_steps,
                          bool fold_checks, struct view *ret, struct layout *lay,
                          struct row_check *c)
{
    struct view v = {.rows = rows};
    check_begin(c, schema, rows, n, true);
    int err = 0;
    bool sorted;
    /* constant stage counts unroll the duration checks */
    SF__BY_STAGE_COUNT(schema->n_stages, S,
                       sorted = view_check_s(c, &v, n, whole_steps, fold_checks, &err, S))
    lay->sorted = sorted;
    if (sorted) {
        if (err < 0)
            return err;
        check_end(c, &v, n, lay);
        *ret = v;
        return 0;
    }
    const sf_row **p = malloc(n * sizeof *p); /* n >= 2: one row is always in order */
    if (p == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        p[i] = &rows[i];
    qsort(p, n, sizeof *p, cmp_step_rank);
    v.sorted = p;
    if ((err = check_rows(schema, &v, n, lay, c)) < 0) {
        free(p);
        return err;
    }
    *ret = v;
    return 0;
}

/* Every row into its step, in (step, rank) order, one step at a time;
 * inlined per stage count. */
static inline __attribute__((always_inline)) void fold_rows_s(sf_summary *s,
                                                              const struct rank_info *ri,
                                                              const struct view *by_step,
                                                              size_t n_rows, uint32_t S)
{
    uint32_t C = s->cand.n;
    struct step_acc acc;
    for (size_t i = 0, step_i = 0; i < n_rows; step_i++) {
        sf_step_summary *st = &s->steps[step_i];
        st->step = at(by_step, i)->step;
        acc_start(&acc, st, S, C);
        for (; i < n_rows && at(by_step, i)->step == st->step; i++) {
            const int64_t *baseline =
                &ri->baseline[(size_t)rank_slot(ri, at(by_step, i)->rank) * S];
            step_add_row_s(&s->cand, &acc, st, at(by_step, i), baseline, S);
        }
        acc_store(&acc, st, S, C);
    }
}

/* A grid whose durations fold_grid_block has folded: each step's number. */
static void fold_grid_steps(sf_summary *s, const struct view *by_step, const struct layout *lay)
{
    for (uint32_t t = 0; t < s->n_steps; t++)
        s->steps[t].step = at(by_step, (size_t)t * lay->grid_ranks)->step;
}

/* The rows' other fields, as check_row summed them on its way: whichever
 * fold took the durations, no row is read for them again. */
static void fold_row_fields(sf_summary *s, const struct row_check *c)
{
    for (uint32_t t = 0; t < s->n_steps; t++) {
        s->steps[t].overlap_sum += c->overlap[t];
        s->steps[t].arrival_missing += c->arrival[t];
    }
    window_sums_store(s, &c->scan.win);
}

/* The durations by the grid fold or by rows, unrolled for the usual stage
 * counts; then the rows' other fields and the roles. */
static int fold_rows(sf_summary *s, const struct rank_info *ri, const struct view *by_step,
                     size_t n_rows, const struct layout *lay, const struct row_check *c)
{
    if (grid_fold_vec(lay))
        fold_grid_steps(s, by_step, lay);
    else
        SF__BY_STAGE_COUNT(s->schema.n_stages, S, fold_rows_s(s, ri, by_step, n_rows, S))
    fold_row_fields(s, c);
    for (uint32_t i = 0; i < ri->n; i++) {
        int r = sf__roles_add(s, ri->roles[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The form whose vector fold takes rows of n_stages, or NULL: none. */
static const sf__vec *grid_fold(uint32_t n_stages)
{
    const sf__vec *v = sf__vec_chosen();
    return sf__vec_folds(v, n_stages) ? v : NULL;
}

/* One build. With fold_checks, the row check may leave durations to the
 * grid fold (*to_fold); where the layout then turns out to be one that the
 * fold does not take (a grid that breaks late), they are checked here. */
static int summary_build_once(const sf_schema *schema, const sf_window_meta *meta,
                              const sf_row *rows, size_t n_rows, bool dense, unsigned flags,
                              bool fold_checks, bool *to_fold, sf_summary **ret)
{
    struct view by_step = {0};
    struct rank_info ri = {0};
    struct layout lay = {0};
    struct row_check check = {0};
    sf_summary *s = NULL;
    int r = view_and_check(schema, rows, n_rows, !(flags & SF__BUILD_GENERAL), fold_checks,
                           &by_step, &lay, &check);
    *to_fold = check.fold_to != 0;
    if (r < 0)
        goto out;
    if (flags & SF__BUILD_GENERAL)
        lay = (struct layout){.sorted = lay.sorted};
    if (lay.grid_ranks)
        lay.fold = grid_fold(schema->n_stages);
    size_t n_steps_z = lay.grid_ranks ? n_rows / lay.grid_ranks : count_steps(&by_step, n_rows);
    uint32_t n_steps = (uint32_t)n_steps_z;
    if (n_steps_z > SF_MAX_WINDOW_STEPS) {
        r = -E2BIG;
        goto out;
    }
    if (check.fold_to && !(grid_fold_vec(&lay) && medians_by_network(n_steps)) &&
        !durations_in_bounds(&by_step, check.fold_to, schema->n_stages)) {
        r = -ERANGE;
        goto out;
    }
    if ((r = sf_summary_alloc(schema, meta, n_steps, &s)) < 0 ||
        (r = rank_info_build(s, &by_step, n_rows, n_steps, &lay, &ri)) < 0 ||
        (r = coverage_from_ranks(s, &ri)) < 0 ||
        (r = fold_rows(s, &ri, &by_step, n_rows, &lay, &check)) < 0)
        goto out;
    if (dense && (r = dense_build(s, &ri, &by_step, n_rows, &lay, flags & SF__BUILD_BORROW)) < 0)
        goto out;
    if ((r = sf__comm_build(schema, rows, n_rows, &s->comm)) < 0 ||
        (r = sf__parallel_gather(s, rows, n_rows)) < 0 ||
        (r = sf__sync_wait_gather(s, rows, n_rows)) < 0 ||
        (r = sf__cohort_part_build(s, rows, n_rows)) < 0)
        goto out;
    *ret = s;
    s = NULL;
out:
    sf_summary_free(s);
    rank_info_clear(&ri);
    check_free(&check);
    free(by_step.sorted);
    return r;
}

/* A grid's durations are read from memory once, where the grid fold folds
 * them, rather than by the row check and again there: the row check leaves
 * the durations of a grid's later steps to the fold, which checks their
 * bounds as it goes (vec/vec.h, struct sf__grid_step; docs/ACCOUNTING.md,
 * "Exactness"). A build that left them
 * so and failed, for any reason, is built again with every duration checked
 * by the row check, which returns the first error in (step, rank) order:
 * the errors are those of a build that leaves nothing to the fold. */
int sf__summary_build(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                      size_t n_rows, bool dense, unsigned flags, sf_summary **ret)
{
    if (schema == NULL || meta == NULL || ret == NULL || (rows == NULL && n_rows > 0))
        return -EINVAL;
    bool fold_checks = !(flags & SF__BUILD_GENERAL) && grid_fold(schema->n_stages) != NULL;
    bool to_fold;
    int r =
        summary_build_once(schema, meta, rows, n_rows, dense, flags, fold_checks, &to_fold, ret);
    if (r < 0 && to_fold)
        r = summary_build_once(schema, meta, rows, n_rows, dense, flags, false, &to_fold, ret);
    return r;
}

int sf_summary_build(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                     size_t n_rows, bool dense, sf_summary **ret)
{
    return sf__summary_build(schema, meta, rows, n_rows, dense, 0, ret);
}

uint64_t sf_summary_covered_ranks(const sf_summary *s)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->n_intervals; i++)
        n += (uint64_t)s->coverage[i].hi - s->coverage[i].lo + 1;
    return n;
}

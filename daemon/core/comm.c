/*
 * The communication part of a window (docs/ACCOUNTING.md, "Issue lag" and
 * "Communication verdict"): each rank's issue lag per synchronizing stage,
 * kept as per-step top-2s and per-rank maximum and median, their exact
 * merge over disjoint ranks, and the verdict that names the rank whose
 * collective starts late. Pure: plain arrays in, plain structs out.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

const char *sf_comm_visibility_name(enum sf_comm_visibility v)
{
    switch (v) {
    case SF_COMM_NO_SYNC_STAGE:
        return "no_sync_stage";
    case SF_COMM_NO_ISSUE_MARKS:
        return "no_issue_marks";
    case SF_COMM_SEEN:
        break;
    }
    return "seen";
}

static uint32_t sync_stages(const sf_schema *schema, uint32_t *out)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < schema->n_stages; k++)
        if (schema->sync_mask >> k & 1)
            out[n++] = k;
    return n;
}

int sf__comm_row_check(const sf_row *row, const sf_schema *schema)
{
    if (row->issue_lag == NULL)
        return 0;
    for (uint32_t k = 0, j = 0; k < schema->n_stages; k++) {
        if (!(schema->sync_mask >> k & 1))
            continue;
        int64_t v = row->issue_lag[j++];
        /* An issue mark lies within the stage's sync wait, but a GPU
         * kernel may start after the host has left the stage: any lag
         * up to a stage's bound. */
        if (v < -1 || v > SF_MAX_DURATION_NS)
            return -ERANGE;
    }
    return 0;
}

void sf__comm_free(sf_comm_summary *c)
{
    if (c == NULL)
        return;
    free(c->steps);
    free(c->lag_top2);
    free(c->marked);
    free(c->ranks);
    free(c->rank_max);
    free(c->rank_median);
    free(c);
}

size_t sf__comm_bytes(const sf_comm_summary *c)
{
    if (c == NULL)
        return 0;
    size_t J = c->n_sync;
    return sizeof *c + c->n_steps * (sizeof *c->steps + J * (sizeof(sf_top2) + sizeof(uint32_t))) +
           c->n_ranks * (sizeof *c->ranks + 2 * J * sizeof(int64_t));
}

static sf_comm_summary *comm_alloc(uint32_t n_sync, const uint32_t *sync_stage, uint32_t n_steps,
                                   uint32_t n_ranks)
{
    sf_comm_summary *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    size_t J = n_sync, T = n_steps, R = n_ranks;
    c->n_sync = n_sync;
    memcpy(c->sync_stage, sync_stage, J * sizeof *sync_stage);
    c->n_steps = n_steps;
    c->n_ranks = n_ranks;
    c->steps = malloc((T + 1) * sizeof *c->steps);
    c->lag_top2 = malloc((T * J + 1) * sizeof *c->lag_top2);
    c->marked = calloc(T * J + 1, sizeof *c->marked);
    c->ranks = malloc((R + 1) * sizeof *c->ranks);
    c->rank_max = malloc((R * J + 1) * sizeof *c->rank_max);
    c->rank_median = malloc((R * J + 1) * sizeof *c->rank_median);
    if (!c->steps || !c->lag_top2 || !c->marked || !c->ranks || !c->rank_max || !c->rank_median) {
        sf__comm_free(c);
        return NULL;
    }
    for (size_t i = 0; i < T * J; i++)
        c->lag_top2[i] = (sf_top2){INT64_MIN, INT64_MIN, SF_NO_RANK, SF_NO_RANK};
    return c;
}

int sf_comm_summary_alloc(const sf_schema *schema, uint32_t n_steps, uint32_t n_ranks,
                          sf_comm_summary **ret)
{
    *ret = NULL;
    uint32_t sync[SF_MAX_STAGES];
    uint32_t J = sync_stages(schema, sync);
    if (J == 0)
        return -EINVAL;
    *ret = comm_alloc(J, sync, n_steps, n_ranks);
    return *ret ? 0 : -ENOMEM;
}

void sf_comm_summary_free(sf_comm_summary *c)
{
    sf__comm_free(c);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static size_t unique_i64(int64_t *v, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    return m;
}

static size_t unique_u32(uint32_t *v, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    return m;
}

static uint32_t find_step(const sf_comm_summary *c, int64_t step)
{
    const int64_t *p = bsearch(&step, c->steps, c->n_steps, sizeof *p, cmp_i64);
    return (uint32_t)(p - c->steps);
}

static uint32_t find_rank(const sf_comm_summary *c, uint32_t rank)
{
    const uint32_t *p = bsearch(&rank, c->ranks, c->n_ranks, sizeof *p, cmp_u32);
    return (uint32_t)(p - c->ranks);
}

/* The distinct steps and ranks of the rows, sorted. */
static sf_comm_summary *comm_shape(const sf_schema *schema, const sf_row *rows, size_t n_rows)
{
    uint32_t sync[SF_MAX_STAGES];
    uint32_t J = sync_stages(schema, sync);
    int64_t *steps = malloc((n_rows + 1) * sizeof *steps);
    uint32_t *ranks = malloc((n_rows + 1) * sizeof *ranks);
    sf_comm_summary *c = NULL;
    if (steps == NULL || ranks == NULL)
        goto out;
    for (size_t i = 0; i < n_rows; i++)
        steps[i] = rows[i].step, ranks[i] = rows[i].rank;
    qsort(steps, n_rows, sizeof *steps, cmp_i64);
    qsort(ranks, n_rows, sizeof *ranks, cmp_u32);
    size_t T = unique_i64(steps, n_rows), R = unique_u32(ranks, n_rows);
    c = comm_alloc(J, sync, (uint32_t)T, (uint32_t)R);
    if (c != NULL) {
        memcpy(c->steps, steps, T * sizeof *steps);
        memcpy(c->ranks, ranks, R * sizeof *ranks);
    }
out:
    free(steps);
    free(ranks);
    return c;
}

/* Each rank's maximum and median lag per synchronizing stage: the rows'
 * lags bucketed by rank (start[] the buckets' offsets), one stage at a time. */
static int rank_figures(sf_comm_summary *c, const sf_row *rows, size_t n_rows)
{
    size_t R = c->n_ranks, J = c->n_sync;
    size_t *start = calloc(R + 2, sizeof *start);
    uint32_t *at = malloc((n_rows + 1) * sizeof *at);
    int64_t *lag = malloc((n_rows + 1) * sizeof *lag);
    size_t *fill = calloc(R + 1, sizeof *fill);
    int rc = -ENOMEM;
    if (start == NULL || at == NULL || lag == NULL || fill == NULL)
        goto out;
    for (size_t i = 0; i < n_rows; i++) {
        at[i] = find_rank(c, rows[i].rank);
        start[at[i] + 1]++;
    }
    for (size_t r = 0; r < R; r++)
        start[r + 1] += start[r];
    for (size_t j = 0; j < J; j++) {
        memset(fill, 0, R * sizeof *fill);
        for (size_t i = 0; i < n_rows; i++) {
            int64_t v = rows[i].issue_lag ? rows[i].issue_lag[j] : -1;
            if (v >= 0)
                lag[start[at[i]] + fill[at[i]]++] = v;
        }
        for (size_t r = 0; r < R; r++) {
            int64_t *v = lag + start[r], hi = SF_NULL_NS;
            for (size_t k = 0; k < fill[r]; k++)
                hi = v[k] > hi ? v[k] : hi;
            c->rank_max[r * J + j] = hi;
            c->rank_median[r * J + j] = fill[r] ? sf_median_i64(v, fill[r]) : SF_NULL_NS;
        }
    }
    rc = 0;
out:
    free(start);
    free(at);
    free(lag);
    free(fill);
    return rc;
}

int sf__comm_build(const sf_schema *schema, const sf_row *rows, size_t n_rows,
                   sf_comm_summary **ret)
{
    *ret = NULL;
    if (schema->sync_mask == 0)
        return 0;
    for (size_t i = 0; i < n_rows; i++) {
        int rc = sf__comm_row_check(&rows[i], schema);
        if (rc < 0)
            return rc;
    }
    sf_comm_summary *c = comm_shape(schema, rows, n_rows);
    if (c == NULL)
        return -ENOMEM;
    size_t J = c->n_sync;
    for (size_t i = 0; i < n_rows; i++) {
        const sf_row *row = &rows[i];
        size_t t = find_step(c, row->step);
        bool any = false;
        for (size_t j = 0; row->issue_lag && j < J; j++) {
            int64_t v = row->issue_lag[j];
            if (v < 0)
                continue;
            sf__top2_insert(&c->lag_top2[t * J + j], v, row->rank);
            c->marked[t * J + j]++;
            any = true;
        }
        c->rows++;
        c->marked_rows += any;
    }
    int rc = rank_figures(c, rows, n_rows);
    if (rc < 0) {
        sf__comm_free(c);
        return rc;
    }
    *ret = c;
    return 0;
}

static void fold_step(sf_comm_summary *m, size_t to, const sf_comm_summary *a, size_t from)
{
    size_t J = m->n_sync;
    for (size_t j = 0; j < J; j++) {
        const sf_top2 *t = &a->lag_top2[from * J + j];
        if (t->r1 != SF_NO_RANK)
            sf__top2_insert(&m->lag_top2[to * J + j], t->v1, t->r1);
        if (t->r2 != SF_NO_RANK)
            sf__top2_insert(&m->lag_top2[to * J + j], t->v2, t->r2);
        m->marked[to * J + j] += a->marked[from * J + j];
    }
}

static void copy_rank(sf_comm_summary *m, size_t to, const sf_comm_summary *a, size_t from)
{
    size_t J = m->n_sync;
    m->ranks[to] = a->ranks[from];
    memcpy(m->rank_max + to * J, a->rank_max + from * J, J * sizeof(int64_t));
    memcpy(m->rank_median + to * J, a->rank_median + from * J, J * sizeof(int64_t));
}

/* The union of a's and b's steps (folded where both have one) and of their
 * ranks (disjoint: a rank in both keeps a's figures). */
static sf_comm_summary *comm_union(const sf_comm_summary *a, const sf_comm_summary *b)
{
    uint32_t T = 0, R = 0;
    for (uint32_t i = 0, j = 0; i < a->n_steps || j < b->n_steps; T++) {
        bool take_a = j == b->n_steps || (i < a->n_steps && a->steps[i] <= b->steps[j]);
        bool take_b = i == a->n_steps || (j < b->n_steps && b->steps[j] <= a->steps[i]);
        i += take_a, j += take_b;
    }
    for (uint32_t i = 0, j = 0; i < a->n_ranks || j < b->n_ranks; R++) {
        bool take_a = j == b->n_ranks || (i < a->n_ranks && a->ranks[i] <= b->ranks[j]);
        bool take_b = i == a->n_ranks || (j < b->n_ranks && b->ranks[j] <= a->ranks[i]);
        i += take_a, j += take_b;
    }
    sf_comm_summary *m = comm_alloc(a->n_sync, a->sync_stage, T, R);
    if (m == NULL)
        return NULL;
    for (uint32_t i = 0, j = 0, k = 0; k < T; k++) {
        bool take_a = j == b->n_steps || (i < a->n_steps && a->steps[i] <= b->steps[j]);
        bool take_b = i == a->n_steps || (j < b->n_steps && b->steps[j] <= a->steps[i]);
        m->steps[k] = take_a ? a->steps[i] : b->steps[j];
        if (take_a)
            fold_step(m, k, a, i++);
        if (take_b)
            fold_step(m, k, b, j++);
    }
    for (uint32_t i = 0, j = 0, k = 0; k < R; k++) {
        bool take_a = j == b->n_ranks || (i < a->n_ranks && a->ranks[i] <= b->ranks[j]);
        bool take_b = i == a->n_ranks || (j < b->n_ranks && b->ranks[j] <= a->ranks[i]);
        copy_rank(m, k, take_a ? a : b, take_a ? i : j);
        i += take_a, j += take_b;
    }
    m->rows = a->rows + b->rows;
    m->marked_rows = a->marked_rows + b->marked_rows;
    return m;
}

int sf__comm_merge(sf_comm_summary **dst, const sf_comm_summary *src)
{
    if (*dst == NULL || src == NULL || (*dst)->n_sync != src->n_sync) {
        sf__comm_free(*dst); /* kept only when both sides carry it */
        *dst = NULL;
        return 0;
    }
    sf_comm_summary *m = comm_union(*dst, src);
    if (m == NULL)
        return -ENOMEM;
    sf__comm_free(*dst);
    *dst = m;
    return 0;
}

int sf__comm_clone(const sf_comm_summary *c, sf_comm_summary **ret)
{
    *ret = NULL;
    if (c == NULL)
        return 0;
    sf_comm_summary none = {.n_sync = c->n_sync};
    *ret = comm_union(c, &none);
    return *ret ? 0 : -ENOMEM;
}

/* ---- the verdict ---------------------------------------------------------- */

struct lead { /* one led step: who, by how much */
    uint32_t rank;
    int64_t lag;
};

static int cmp_lead(const void *a, const void *b)
{
    const struct lead *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->lag > y->lag) - (x->lag < y->lag);
}

/* The rank that led the most of one stage's eligible steps: *ret_n its led
 * steps, *ret_lag their median lag. leads holds n_steps entries. */
static uint32_t stage_leader(const sf_comm_summary *c, size_t j, uint32_t world, int64_t gap,
                             struct lead *leads, uint32_t *ret_eligible, uint32_t *ret_n,
                             int64_t *ret_lag)
{
    size_t J = c->n_sync, n = 0;
    uint32_t eligible = 0;
    for (size_t t = 0; t < c->n_steps; t++) {
        const sf_top2 *top = &c->lag_top2[t * J + j];
        if (c->marked[t * J + j] != world)
            continue;
        eligible++;
        if (top->v1 - top->v2 >= gap)
            leads[n++] = (struct lead){top->r1, top->v1};
    }
    qsort(leads, n, sizeof *leads, cmp_lead);
    uint32_t best = SF_NO_RANK, best_n = 0;
    size_t best_at = 0;
    for (size_t i = 0, run; i < n; i += run) {
        for (run = 1; i + run < n && leads[i + run].rank == leads[i].rank; run++)
            ;
        if (run > best_n)
            best = leads[i].rank, best_n = (uint32_t)run, best_at = i;
    }
    *ret_eligible = eligible;
    *ret_n = best_n;
    /* The run is sorted by lag: its middle is the median (lo + (hi - lo) / 2). */
    if (best_n) {
        int64_t lo = leads[best_at + (best_n - 1) / 2].lag, hi = leads[best_at + best_n / 2].lag;
        *ret_lag = lo + (hi - lo) / 2;
    }
    return best;
}

/* The median over the other ranks of their median lag at stage j. */
static int64_t others_median(const sf_comm_summary *c, size_t j, uint32_t rank, int64_t *scratch)
{
    size_t n = 0;
    for (size_t r = 0; r < c->n_ranks; r++)
        if (c->ranks[r] != rank && c->rank_median[r * c->n_sync + j] != SF_NULL_NS)
            scratch[n++] = c->rank_median[r * c->n_sync + j];
    return n ? sf_median_i64(scratch, n) : SF_NULL_NS;
}

int sf__comm_verdict(const sf_summary *s, const sf_gates *g, sf_comm_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->rank = SF_NO_RANK;
    const sf_comm_summary *c = s->comm;
    if (s->schema.sync_mask == 0) {
        v->visibility = SF_COMM_NO_SYNC_STAGE;
        return 0;
    }
    v->rows = c ? c->rows : 0;
    v->marked_rows = c ? c->marked_rows : 0;
    if (c == NULL || c->marked_rows == 0) {
        v->visibility = SF_COMM_NO_ISSUE_MARKS;
        return 0;
    }
    v->visibility = SF_COMM_SEEN;
    uint32_t world = s->meta.world_size;
    if (world < 2 || c->n_steps == 0)
        return 0;
    struct lead *leads = malloc(c->n_steps * sizeof *leads);
    int64_t *scratch = malloc((c->n_ranks + 1) * sizeof *scratch);
    if (leads == NULL || scratch == NULL) {
        free(leads);
        free(scratch);
        return -ENOMEM;
    }
    int64_t gap = (int64_t)llround(g->comm_lag_min_s * 1e9);
    for (size_t j = 0; j < c->n_sync; j++) {
        uint32_t eligible, n;
        int64_t lag = 0;
        uint32_t rank = stage_leader(c, j, world, gap, leads, &eligible, &n, &lag);
        if (n == 0 || !((double)n > g->comm_share_min * eligible) || n <= v->led_steps)
            continue;
        v->present = true;
        v->rank = rank;
        v->sync_stage = c->sync_stage[j];
        v->led_steps = n;
        v->eligible_steps = eligible;
        v->median_lag_ns = lag;
        v->others_median_ns = others_median(c, j, rank, scratch);
    }
    free(leads);
    free(scratch);
    return 0;
}

void sf__comm_as_straggler(const sf_comm_verdict *v, sf_straggler *ret)
{
    *ret = (sf_straggler){
        .present = true,
        .rank = v->rank,
        .sync_stage = v->sync_stage,
        .origin_stage = v->sync_stage,
        .communication = true,
        .arrived_last_steps = v->led_steps,
        .eligible_steps = v->eligible_steps,
        .median_lateness_ns = v->median_lag_ns,
        .persistence = SF_PERSIST_NONE,
        .windows_in_a_row = 1,
    };
}

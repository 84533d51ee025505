/*
 * The cohort part of a summary and the pipeline view (docs/ACCOUNTING.md,
 * "Cohorts in a mergeable summary" and "Pipeline view"): each rank's
 * coordinates, per step and cohort the two largest prefixes of every
 * boundary, their exact merge over disjoint ranks, and the view that reads
 * them: where in the pipeline a rank first fell behind the others of its
 * cohort, what it cost the step, each pipeline stage's bubble and what
 * restoring it saves. Pure and deterministic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

void sf_cohort_summary_free(sf_cohort_summary *c)
{
    if (c == NULL)
        return;
    free(c->ranks);
    free(c->parallel);
    free(c->cohort_pp);
    free(c->cohort_key);
    free(c->steps);
    free(c->count);
    free(c->prefix_top2);
    free(c);
}

int sf_cohort_summary_alloc(uint32_t n_stages, uint32_t n_ranks, uint32_t n_cohorts,
                            uint32_t n_steps, sf_cohort_summary **ret)
{
    *ret = NULL;
    uint64_t cells = (uint64_t)n_steps * n_cohorts * n_stages;
    if (n_stages == 0 || n_stages > SF_MAX_STAGES || n_ranks > SF_MAX_RANKS ||
        n_cohorts > n_ranks || cells > SF_COHORT_PART_MAX_CELLS)
        return -EINVAL;
    sf_cohort_summary *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    size_t R = n_ranks, K = n_cohorts, T = n_steps;
    *c = (sf_cohort_summary){.n_stages = n_stages,
                             .n_ranks = n_ranks,
                             .n_cohorts = n_cohorts,
                             .n_steps = n_steps,
                             .ranks = malloc((R + 1) * sizeof(uint32_t)),
                             .parallel = calloc(R + 1, sizeof(sf_parallel)),
                             .cohort_pp = malloc((K + 1) * sizeof(uint32_t)),
                             .cohort_key = malloc((K + 1) * sizeof(uint64_t)),
                             .steps = malloc((T + 1) * sizeof(int64_t)),
                             .count = calloc(T * K + 1, sizeof(uint32_t)),
                             .prefix_top2 = malloc((cells + 1) * sizeof(sf_top2))};
    if (!c->ranks || !c->parallel || !c->cohort_pp || !c->cohort_key || !c->steps || !c->count ||
        !c->prefix_top2) {
        sf_cohort_summary_free(c);
        return -ENOMEM;
    }
    for (size_t i = 0; i < cells; i++)
        c->prefix_top2[i] = (sf_top2){INT64_MIN, INT64_MIN, SF_NO_RANK, SF_NO_RANK};
    *ret = c;
    return 0;
}

size_t sf__cohort_bytes(const sf_cohort_summary *c)
{
    if (c == NULL)
        return 0;
    size_t cells = (size_t)c->n_steps * c->n_cohorts;
    return sizeof *c + c->n_ranks * (sizeof(uint32_t) + sizeof(sf_parallel)) +
           c->n_cohorts * (sizeof(uint32_t) + sizeof(uint64_t)) + c->n_steps * sizeof(int64_t) +
           cells * (sizeof(uint32_t) + c->n_stages * sizeof(sf_top2));
}

/* ---- build ---------------------------------------------------------------- */

struct cohort_id {
    uint32_t pp;
    uint64_t key;
};

static struct cohort_id id_of(const sf_parallel *p)
{
    return (struct cohort_id){p->index[SF_PAR_PP], sf_parallel_cohort(p)};
}

static int cmp_id(const void *a, const void *b)
{
    const struct cohort_id *x = a, *y = b;
    if (x->pp != y->pp)
        return x->pp < y->pp ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static uint32_t find_cohort(const sf_cohort_summary *c, struct cohort_id id)
{
    uint32_t lo = 0, hi = c->n_cohorts;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        struct cohort_id m = {c->cohort_pp[mid], c->cohort_key[mid]};
        if (cmp_id(&m, &id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* sf__top2_insert inlined, the same rule (a larger prefix, or an equal one
 * of a lower rank, goes first), as selects rather than a call behind a
 * branch: in a cohort of a few ranks with noisy durations, whether a prefix
 * is among the two largest is a coin flip. With `ascending` (every cell's
 * rows come in rising rank) an equal prefix never goes first, so the rank
 * compares drop out; prefixes of checked durations are never INT64_MIN, the
 * empty slot's value, so an empty slot still takes the first. */
static inline __attribute__((always_inline)) void top2_insert(sf_top2 *t, int64_t v, uint32_t rank,
                                                              bool ascending)
{
    int64_t v1 = t->v1, v2 = t->v2;
    uint32_t r1 = t->r1, r2 = t->r2;
    bool above1 = ascending ? v > v1 : (v > v1) | ((v == v1) & (rank < r1));
    bool above2 = ascending ? v > v2 : (v > v2) | ((v == v2) & (rank < r2));
    t->v2 = above1 ? v1 : above2 ? v : v2;
    t->r2 = above1 ? r1 : above2 ? rank : r2;
    t->v1 = above1 ? v : v1;
    t->r1 = above1 ? rank : r1;
}

/* The fold of the rows with coordinates into c, in their order (each
 * step's rows usually together, so the step's index is looked up once), for
 * S stages: SF__BY_STAGE_COUNT unrolls the usual counts. */
static inline __attribute__((always_inline)) void
fold_part_s(sf_cohort_summary *c, const sf_row *rows, size_t n_rows, const uint32_t *cohort_of,
            uint32_t lo, uint32_t S, bool ascending)
{
    uint32_t K = c->n_cohorts, t = 0;
    for (size_t i = 0; i < n_rows; i++) {
        const sf_row *row = &rows[i];
        if (row->parallel == NULL)
            continue;
        if (c->steps[t] != row->step)
            t = sf__index_i64(c->steps, c->n_steps, row->step);
        size_t cell = (size_t)t * K + cohort_of[row->rank - lo];
        c->count[cell]++;
        sf_top2 *top = &c->prefix_top2[cell * S];
        const int64_t *d = row->d;
        int64_t p = 0;
        for (uint32_t j = 0; j < S; j++) {
            p += d[j];
            top2_insert(&top[j], p, row->rank, ascending);
        }
    }
}

/* The sorted, distinct steps of the rows with coordinates: the summary's
 * own steps when every row carries them (the usual case), else sorted
 * here. Returns their count, or -ENOMEM. */
static int64_t part_steps(const sf_summary *s, const sf_row *rows, size_t n_rows, int64_t **ret)
{
    size_t m = (size_t)s->parallel_rows;
    int64_t *steps = malloc((m + 1) * sizeof *steps);
    if (steps == NULL)
        return -ENOMEM;
    *ret = steps;
    if (m == n_rows) {
        for (uint32_t i = 0; i < s->n_steps; i++)
            steps[i] = s->steps[i].step;
        return s->n_steps;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_rows; i++)
        if (rows[i].parallel != NULL)
            steps[k++] = rows[i].step;
    qsort(steps, k, sizeof *steps, cmp_i64);
    size_t T = 0;
    for (size_t i = 0; i < k; i++)
        if (T == 0 || steps[i] != steps[T - 1])
            steps[T++] = steps[i];
    return (int64_t)T;
}

/* Each rank's coordinates and cohort, the steps, then one fold of the rows
 * with coordinates (fold_part_s). slot[rank] is the rank's first row
 * with coordinates + 1 (0: none); a rank whose rows carry two sets sets
 * the summary's parallel_conflict (its first row's set is kept). */
static int cohort_build(sf_summary *s, const sf_row *rows, size_t n_rows, size_t *slot, uint32_t lo,
                        uint32_t span, struct cohort_id *ids, uint32_t *cohort_of)
{
    uint32_t S = s->schema.n_stages, R = 0;
    bool ascending = true; /* the rows with coordinates in rising (step, rank) */
    const sf_row *last = NULL;
    for (size_t i = 0; i < n_rows; i++) {
        const sf_parallel *p = rows[i].parallel;
        if (p == NULL)
            continue;
        if (last != NULL)
            ascending &= last->step < rows[i].step ||
                         (last->step == rows[i].step && last->rank < rows[i].rank);
        last = &rows[i];
        size_t *at = &slot[rows[i].rank - lo];
        if (*at == 0)
            *at = i + 1, R++;
        else if (rows[*at - 1].parallel != p && !sf_parallel_equal(rows[*at - 1].parallel, p))
            s->parallel_conflict = true;
    }
    uint32_t n = 0;
    for (uint32_t r = 0; r < span; r++)
        if (slot[r] != 0)
            ids[n++] = id_of(rows[slot[r] - 1].parallel);
    qsort(ids, R, sizeof *ids, cmp_id);
    uint32_t K = 0;
    for (uint32_t i = 0; i < R; i++)
        if (K == 0 || cmp_id(&ids[i], &ids[K - 1]) != 0)
            ids[K++] = ids[i];
    int64_t *steps = NULL;
    int64_t T = part_steps(s, rows, n_rows, &steps);
    if (T < 0)
        return (int)T;
    sf_cohort_summary *c = NULL;
    int rc = (uint64_t)T * K * S > SF_COHORT_PART_MAX_CELLS
                 ? 0 /* too large to carry: no part, and the report refuses cohorts */
                 : sf_cohort_summary_alloc(S, R, K, (uint32_t)T, &c);
    if (rc < 0 || c == NULL) {
        free(steps);
        return rc;
    }
    memcpy(c->steps, steps, (size_t)T * sizeof *steps);
    free(steps);
    for (uint32_t i = 0; i < K; i++) {
        c->cohort_pp[i] = ids[i].pp;
        c->cohort_key[i] = ids[i].key;
    }
    for (uint32_t r = 0, x = 0; r < span; r++) {
        if (slot[r] == 0)
            continue;
        const sf_parallel *p = rows[slot[r] - 1].parallel;
        c->ranks[x] = lo + r;
        c->parallel[x] = *p;
        cohort_of[r] = find_cohort(c, id_of(p));
        x++;
    }
    if (ascending)
        SF__BY_STAGE_COUNT(S, S_, fold_part_s(c, rows, n_rows, cohort_of, lo, S_, true))
    else
        SF__BY_STAGE_COUNT(S, S_, fold_part_s(c, rows, n_rows, cohort_of, lo, S_, false))
    s->cohort = c;
    return 0;
}

int sf__cohort_part_build(sf_summary *s, const sf_row *rows, size_t n_rows)
{
    if (s->parallel_rows == 0)
        return 0;
    uint32_t lo = UINT32_MAX, hi = 0; /* the rows' rank range (checked < SF_MAX_RANKS) */
    for (size_t i = 0; i < n_rows; i++) {
        lo = rows[i].rank < lo ? rows[i].rank : lo;
        hi = rows[i].rank > hi ? rows[i].rank : hi;
    }
    if (lo > hi)
        return 0;
    size_t span = (size_t)hi - lo + 1;
    size_t *slot = calloc(span, sizeof *slot);
    uint32_t *cohort_of = malloc(span * sizeof *cohort_of);
    struct cohort_id *ids = malloc(span * sizeof *ids);
    int r = slot && cohort_of && ids
                ? cohort_build(s, rows, n_rows, slot, lo, (uint32_t)span, ids, cohort_of)
                : -ENOMEM;
    free(slot);
    free(cohort_of);
    free(ids);
    return r;
}

/* ---- merge ---------------------------------------------------------------- */

static void top2_fold(sf_top2 *dst, const sf_top2 *src)
{
    if (src->r1 != SF_NO_RANK)
        sf__top2_insert(dst, src->v1, src->r1);
    if (src->r2 != SF_NO_RANK)
        sf__top2_insert(dst, src->v2, src->r2);
}

static void fold_into(sf_cohort_summary *m, const sf_cohort_summary *c)
{
    uint32_t S = m->n_stages;
    for (uint32_t t = 0; t < c->n_steps; t++) {
        uint32_t mt = sf__lower_bound_i64(m->steps, m->n_steps, c->steps[t]);
        for (uint32_t q = 0; q < c->n_cohorts; q++) {
            uint32_t mq = find_cohort(m, (struct cohort_id){c->cohort_pp[q], c->cohort_key[q]});
            size_t from = (size_t)t * c->n_cohorts + q, to = (size_t)mt * m->n_cohorts + mq;
            m->count[to] += c->count[from];
            for (uint32_t j = 0; j < S; j++)
                top2_fold(&m->prefix_top2[to * S + j], &c->prefix_top2[from * S + j]);
        }
    }
}

/* The union of a's and b's sorted, distinct lists. */
static uint32_t union_steps(const sf_cohort_summary *a, const sf_cohort_summary *b, int64_t *out)
{
    uint32_t i = 0, j = 0, n = 0;
    while (i < a->n_steps || j < b->n_steps) {
        int64_t x = j >= b->n_steps || (i < a->n_steps && a->steps[i] <= b->steps[j]) ? a->steps[i]
                                                                                      : b->steps[j];
        out[n++] = x;
        i += i < a->n_steps && a->steps[i] == x;
        j += j < b->n_steps && b->steps[j] == x;
    }
    return n;
}

static uint32_t union_cohorts(const sf_cohort_summary *a, const sf_cohort_summary *b,
                              struct cohort_id *out)
{
    uint32_t i = 0, j = 0, n = 0;
    while (i < a->n_cohorts || j < b->n_cohorts) {
        struct cohort_id x = {0}, ai = {0}, bj = {0};
        if (i < a->n_cohorts)
            ai = (struct cohort_id){a->cohort_pp[i], a->cohort_key[i]};
        if (j < b->n_cohorts)
            bj = (struct cohort_id){b->cohort_pp[j], b->cohort_key[j]};
        x = j >= b->n_cohorts || (i < a->n_cohorts && cmp_id(&ai, &bj) <= 0) ? ai : bj;
        out[n++] = x;
        i += i < a->n_cohorts && cmp_id(&ai, &x) == 0;
        j += j < b->n_cohorts && cmp_id(&bj, &x) == 0;
    }
    return n;
}

static int cohort_union(const sf_cohort_summary *a, const sf_cohort_summary *b,
                        sf_cohort_summary **ret)
{
    *ret = NULL;
    int64_t *steps = malloc(((size_t)a->n_steps + b->n_steps + 1) * sizeof *steps);
    struct cohort_id *ids = malloc(((size_t)a->n_cohorts + b->n_cohorts + 1) * sizeof *ids);
    if (steps == NULL || ids == NULL) {
        free(steps);
        free(ids);
        return -ENOMEM;
    }
    uint32_t T = union_steps(a, b, steps), K = union_cohorts(a, b, ids);
    uint64_t R = (uint64_t)a->n_ranks + b->n_ranks;
    sf_cohort_summary *m = NULL;
    int r =
        R > SF_MAX_RANKS ? -EINVAL : sf_cohort_summary_alloc(a->n_stages, (uint32_t)R, K, T, &m);
    if (r == 0) {
        memcpy(m->steps, steps, T * sizeof *steps);
        for (uint32_t i = 0; i < K; i++) {
            m->cohort_pp[i] = ids[i].pp;
            m->cohort_key[i] = ids[i].key;
        }
        uint32_t i = 0, j = 0, n = 0;
        while (i < a->n_ranks || j < b->n_ranks) {
            bool from_a = j >= b->n_ranks || (i < a->n_ranks && a->ranks[i] <= b->ranks[j]);
            m->ranks[n] = from_a ? a->ranks[i] : b->ranks[j];
            m->parallel[n++] = from_a ? a->parallel[i++] : b->parallel[j++];
        }
        fold_into(m, a);
        fold_into(m, b);
        *ret = m;
    }
    free(steps);
    free(ids);
    return r;
}

int sf__cohort_merge(sf_cohort_summary **dst, const sf_cohort_summary *src)
{
    if (*dst == NULL || src == NULL || (*dst)->n_stages != src->n_stages) {
        sf_cohort_summary_free(*dst); /* one side lacks it: no cohort can be judged */
        *dst = NULL;
        return 0;
    }
    sf_cohort_summary *m;
    int r = cohort_union(*dst, src, &m);
    if (r == -EINVAL) {
        sf_cohort_summary_free(*dst);
        *dst = NULL;
        return 0;
    }
    if (r < 0)
        return r;
    sf_cohort_summary_free(*dst);
    *dst = m;
    return 0;
}

int sf__cohort_clone(const sf_cohort_summary *c, sf_cohort_summary **ret)
{
    *ret = NULL;
    if (c == NULL)
        return 0;
    sf_cohort_summary empty = {.n_stages = c->n_stages};
    return cohort_union(c, &empty, ret);
}

/* ---- the report's cohorts from the part ------------------------------------ */

int sf__cohort_part_state(const sf_summary *s, uint32_t *cohort_of, enum sf_cohort_state *ret_state,
                          uint32_t *ret_n)
{
    const sf_cohort_summary *c = s->cohort;
    *ret_state = SF_COHORTS_INCONSISTENT;
    uint32_t *of = malloc(((size_t)c->n_ranks + 1) * sizeof *of);
    if (of == NULL)
        return -ENOMEM;
    int r = sf_cohorts_build(c->parallel, c->n_ranks, s->meta.world_size, of, ret_n);
    if (r < 0 || r != SF_COHORTS_APPLIED || c->n_ranks != sf_summary_covered_ranks(s)) {
        free(of);
        *ret_n = 0;
        return r < 0 ? r : 0;
    }
    const sf_dense *d = s->dense;
    for (uint32_t i = 0; d != NULL && i < d->n_ranks; i++) {
        uint32_t x = sf__lower_bound_u32(c->ranks, c->n_ranks, d->ranks[i]);
        if (x == c->n_ranks || c->ranks[x] != d->ranks[i]) {
            free(of);
            *ret_n = 0;
            return 0;
        }
        cohort_of[i] = of[x];
    }
    free(of);
    *ret_state = SF_COHORTS_APPLIED;
    return 0;
}

const sf_top2 *sf__cohort_top2(const sf_cohort_summary *c, int64_t step, uint32_t q,
                               uint32_t *ret_count)
{
    uint32_t t = sf__index_i64(c->steps, c->n_steps, step);
    if (t == c->n_steps || c->steps[t] != step) {
        *ret_count = 0;
        return NULL;
    }
    size_t cell = (size_t)t * c->n_cohorts + q;
    *ret_count = c->count[cell];
    return &c->prefix_top2[cell * c->n_stages];
}

/* ---- the pipeline view ----------------------------------------------------- */

void sf__pipeline_view_free(sf_pipeline_view *v)
{
    free(v->stages);
    free(v->step_origin);
    free(v->step_delay);
    memset(v, 0, sizeof *v);
}

struct origin_tally {
    uint32_t pp, stage, rank;
};

static int cmp_origin(const void *a, const void *b)
{
    const struct origin_tally *x = a, *y = b;
    if (x->pp != y->pp)
        return x->pp < y->pp ? -1 : 1;
    if (x->stage != y->stage)
        return x->stage < y->stage ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The lateness a cohort's last rank added at boundary j: its lateness
 * there (its prefix minus the runner-up's) less what it already had at the
 * boundary before when it was last there too. */
static int64_t added(const sf_top2 *t, uint32_t j)
{
    int64_t late = t[j].v1 - t[j].v2;
    if (j > 0 && t[j - 1].r1 == t[j].r1)
        late -= t[j - 1].v1 - t[j - 1].v2;
    return late;
}

/* One complete step. At every boundary each cohort's last rank is late
 * against its runner-up, and adds some of that lateness at the boundary;
 * a delay is an addition beyond the tolerance and at least 3/4 of the
 * step's largest one (a victim that waits for the culprit adds as much,
 * noise much less). The first delay is the one whose arrival came first
 * (ties: the earlier boundary, then the lower pipeline stage): the arrival
 * order says which came before the other. Its cost is what the step would
 * save had the delay not been passed on to its cohort's end: min(delay,
 * frontier minus the latest end of every other cohort). Adds the stages'
 * bubbles, and what restoring each stage saves: every cohort of it ending
 * its largest lateness earlier. */
static bool view_step(sf_pipeline_view *v, const sf_cohort_summary *c, const sf_step_summary *st,
                      int64_t tol, int64_t *delay, struct origin_tally *ret, int64_t *ret_late,
                      int64_t *ret_cost, int64_t *end_q, int64_t *late_q, int64_t *end_p)
{
    uint32_t S = c->n_stages, P = v->n_stages, K = c->n_cohorts, best_q = 0;
    bool found = false;
    int64_t best_at = 0, most = 0;
    for (uint32_t p = 0; p < P; p++)
        end_p[p] = INT64_MIN;
    for (uint32_t q = 0; q < K; q++) {
        uint32_t n, p = c->cohort_pp[q];
        const sf_top2 *t = sf__cohort_top2(c, st->step, q, &n);
        end_q[q] = INT64_MIN;
        late_q[q] = 0;
        if (t == NULL || n == 0)
            continue;
        end_q[q] = t[S - 1].v1;
        end_p[p] = end_q[q] > end_p[p] ? end_q[q] : end_p[p];
        for (uint32_t j = 0; n >= 2 && j < S; j++) {
            int64_t late = t[j].v1 - t[j].v2, a = added(t, j);
            late_q[q] = late > late_q[q] ? late : late_q[q];
            most = a > most ? a : most;
        }
        delay[p] = late_q[q] > delay[p] ? late_q[q] : delay[p];
    }
    for (uint32_t q = 0; q < K && most > tol; q++) {
        uint32_t n, p = c->cohort_pp[q];
        const sf_top2 *t = sf__cohort_top2(c, st->step, q, &n);
        for (uint32_t j = 0; t != NULL && n >= 2 && j < S; j++) {
            int64_t a = added(t, j);
            if (a <= tol || (__int128)4 * a < (__int128)3 * most)
                continue;
            bool earlier =
                !found || t[j].v1 < best_at ||
                (t[j].v1 == best_at && (j < ret->stage || (j == ret->stage && p < ret->pp)));
            if (earlier) {
                found = true;
                best_at = t[j].v1;
                best_q = q;
                *ret = (struct origin_tally){p, j, t[j].r1};
                *ret_late = a;
            }
        }
    }
    int64_t F = st->prefix_top2[S - 1].v1;
    for (uint32_t p = 0; p < P; p++) {
        if (end_p[p] == INT64_MIN)
            continue;
        v->stages[p].bubble_ns += F - end_p[p];
        int64_t now = INT64_MIN;
        for (uint32_t q = 0; q < K; q++) {
            int64_t e = c->cohort_pp[q] == p ? end_q[q] - late_q[q] : end_q[q];
            now = e > now ? e : now;
        }
        v->stages[p].restore_saved_ns += F - now;
    }
    if (found) {
        int64_t others = INT64_MIN;
        for (uint32_t q = 0; q < K; q++)
            if (q != best_q && end_q[q] > others)
                others = end_q[q];
        int64_t room = others == INT64_MIN ? *ret_late : F - others;
        *ret_cost = room < *ret_late ? room : *ret_late;
    }
    return found;
}

int sf__pipeline_view(sf_report *r, const sf_summary *s, const uint32_t *complete,
                      uint32_t n_complete)
{
    sf_pipeline_view *v = &r->pipeline;
    memset(v, 0, sizeof *v);
    const sf_cohort_summary *c = s->cohort;
    if (r->cohorts != SF_COHORTS_APPLIED || c == NULL || c->n_ranks == 0 || n_complete == 0)
        return 0;
    uint32_t P = c->parallel[0].size[SF_PAR_PP];
    if (P < 2 || P > SF_PIPELINE_MAX_STAGES)
        return 0;
    v->n_stages = P;
    v->stages = calloc(P, sizeof *v->stages);
    v->step_origin = malloc(n_complete * sizeof *v->step_origin);
    v->step_delay = calloc((size_t)n_complete * P, sizeof *v->step_delay);
    struct origin_tally *ot = malloc(n_complete * sizeof *ot);
    int64_t *late = malloc(n_complete * sizeof *late), *cost = malloc(n_complete * sizeof *cost);
    int64_t *end_p = malloc(((size_t)P + 2 * (size_t)c->n_cohorts) * sizeof *end_p);
    int rc = 0;
    if (!v->stages || !v->step_origin || !v->step_delay || !ot || !late || !cost || !end_p) {
        rc = -ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < c->n_ranks; i++)
        v->stages[c->parallel[i].index[SF_PAR_PP]].ranks++;
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_complete; i++) {
        const sf_step_summary *st = &s->steps[complete[i]];
        struct origin_tally o;
        int64_t d, k;
        v->step_origin[i] = SF_NO_RANK;
        if (!view_step(v, c, st, r->leader_gap_tol_ns, &v->step_delay[(size_t)i * P], &o, &d, &k,
                       end_p + P, end_p + P + c->n_cohorts, end_p))
            continue;
        v->step_origin[i] = o.pp;
        v->stages[o.pp].origin_steps++;
        ot[n] = o;
        late[n] = d;
        cost[n++] = k;
    }
    v->present = true;
    if (n == 0)
        goto out;
    /* The (pipeline stage, ordered stage) that was first most often (ties:
     * the lower stage, then the earlier boundary), and its most frequent
     * rank (ties: the lower rank). */
    struct origin_tally *sorted = malloc(n * sizeof *sorted);
    if (sorted == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    memcpy(sorted, ot, n * sizeof *ot);
    qsort(sorted, n, sizeof *sorted, cmp_origin);
    uint32_t best = 0, best_len = 0, best_rank = 0, best_rank_len = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i, rank_len = 0, rank = 0;
        while (j < n && sorted[j].pp == sorted[i].pp && sorted[j].stage == sorted[i].stage) {
            uint32_t k = j;
            while (k < n && sorted[k].pp == sorted[j].pp && sorted[k].stage == sorted[j].stage &&
                   sorted[k].rank == sorted[j].rank)
                k++;
            if (k - j > rank_len)
                rank_len = k - j, rank = sorted[j].rank;
            j = k;
        }
        if (j - i > best_len)
            best = i, best_len = j - i, best_rank = rank, best_rank_len = rank_len;
        i = j;
    }
    (void)best_rank_len;
    v->origin = true;
    v->origin_pp = sorted[best].pp;
    v->origin_stage = sorted[best].stage;
    v->origin_rank = best_rank;
    v->origin_steps = best_len;
    free(sorted);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (ot[i].pp == v->origin_pp && ot[i].stage == v->origin_stage) {
            late[m] = late[i];
            cost[m++] = cost[i];
        }
    v->median_delay_ns = sf_median_i64(late, m);
    v->median_cost_ns = sf_median_i64(cost, m);
out:
    free(ot);
    free(late);
    free(cost);
    free(end_p);
    if (rc < 0)
        sf__pipeline_view_free(v);
    return rc;
}

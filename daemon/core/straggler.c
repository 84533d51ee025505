/*
 * Arrival-point evidence of one window (docs/ACCOUNTING.md, "Straggler
 * verdict" and "Critical path"): the rank that arrived late at a
 * synchronizing stage, where its lateness began, its persistence across
 * windows, and the most frequent chain of boundary leaders. Pure: reads the
 * summary's dense rows or top-2 prefixes and the report's per-step leaders.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

const char *sf_persistence_name(enum sf_persistence p)
{
    switch (p) {
    case SF_PERSIST_FIXED:
        return "fixed";
    case SF_PERSIST_ROTATING:
        return "rotating";
    case SF_PERSIST_NONE:
        break;
    }
    return "none";
}

/* ---- the verdict ---------------------------------------------------------- */

/* The test (docs/ACCOUNTING.md, "Straggler verdict"): under the null, the
 * ranks are exchangeable at a step, so a rank's place in the step's order of
 * own work over a run of stages is uniform. With dense rows each
 * synchronizing stage tests, from its alignment boundary, the work up to
 * every boundary through it and each of those stages' own work alone: a
 * delay shows first where it happened, may be partly evened out before the
 * collective (ranks sharing cores), and the noise of earlier stages can bury
 * it in a prefix. Each step adds a centred score per rank and its null
 * variance; a test's candidate is the rank with the largest score sum, and
 * its one-sided normal p-value, Bonferroni-adjusted over ranks and every
 * test of the schema, must be at most straggler_alpha. Without dense rows
 * only the last arrival at the synchronizing stage's boundary is known. */

struct arrival { /* one eligible step: who arrived last, by how much */
    uint32_t rank, at;
    int64_t lateness;
};

struct tally {        /* the place test at one boundary */
    uint32_t n;       /* eligible steps */
    uint32_t cand;    /* candidate: dense index, rank id without dense rows */
    double score;     /* the candidate's centred score sum */
    double var;       /* the null variance of that sum */
    uint32_t n_ranks; /* ranks of the Bonferroni adjustment */
};

struct candidate {  /* one test's verdict-to-be */
    uint32_t rank;  /* rank id */
    double z;       /* its score in standard deviations */
    int64_t effect; /* its median contrast; INT64_MAX without dense rows */
};

struct place { /* one rank's own work up to a boundary at one step */
    int64_t late;
    uint32_t r; /* dense index */
};

struct scratch {
    /* The dense ranks compared: all of them, or one cohort's
     * (docs/ACCOUNTING.md, "Cohorts"). */
    const uint32_t *mem;
    uint32_t n_mem;
    /* Without dense rows, the cohort of the summary's cohort part whose
     * ranks are compared, or UINT32_MAX for every rank. */
    uint32_t part_cohort;
    struct arrival *arr; /* [n_complete] arrivals at the synchronizing stage */
    uint32_t *at;        /* [n_complete] */
    double *score;       /* [dense ranks] */
    struct place *place; /* [dense ranks] */
    int64_t *value;      /* [dense ranks] one step's own work */
    int64_t *select;     /* [dense ranks] sf__middle_of's scratch */
    int64_t *one;        /* [n_complete] one rank's contrasts */
    /* The wait rule: each dense rank's cohort (NULL: none), and a second
     * scratch of [dense ranks]. */
    const uint32_t *cohort_of;
    int64_t *one2;
};

static int cmp_arrival(const void *a, const void *b)
{
    const struct arrival *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->lateness != y->lateness)
        return x->lateness < y->lateness ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

static int cmp_u32_asc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Ascending lateness; among equals the higher dense index first, so that the
 * last place goes to the lowest rank. */
static int cmp_place(const void *a, const void *b)
{
    const struct place *x = a, *y = b;
    if (x->late != y->late)
        return x->late < y->late ? -1 : 1;
    return (x->r < y->r) - (x->r > y->r);
}

/* The first stage after the previous synchronizing stage's wait: every rank
 * left that collective together, so lateness is timed from there (from the
 * step's start for the first synchronizing stage). */
static uint32_t aligned_from(uint64_t sync_mask, uint32_t k)
{
    uint64_t before = sync_mask & ((UINT64_C(1) << k) - 1);
    return before ? (uint32_t)(63 - __builtin_clzll(before)) + 2 : 0;
}

static bool eligible(const sf_step_summary *st)
{
    return st->arrival_missing == 0 && st->n_ranks >= 2;
}

static bool has_dense(const sf_summary *s)
{
    return s->dense != NULL && s->dense->n_ranks >= 2;
}

/* A tp or pp stage where some row carries an accumulated wait takes the
 * wait rule; the others, and a tp or pp stage without any (old clients),
 * the arrival rule. */
static bool by_waits(const sf_summary *s, uint32_t k)
{
    uint8_t g = s->schema.sync_group[k];
    const sf_dense *dn = s->dense;
    if ((g != SF_SYNC_TP && g != SF_SYNC_PP) || dn == NULL || dn->sync_wait == NULL)
        return false;
    size_t J = (size_t)__builtin_popcountll(s->schema.sync_mask),
           cells = (size_t)s->n_steps * dn->n_ranks;
    size_t j = (size_t)__builtin_popcountll(s->schema.sync_mask & ((UINT64_C(1) << k) - 1));
    for (size_t c = 0; c < cells; c++)
        if (dn->sync_wait[c * 2 * J + j] >= 0)
            return true;
    return false;
}

/* The tests of the schema, the Bonferroni count besides the ranks: with
 * dense rows, per synchronizing stage spanning n stages from its alignment,
 * n prefixes and the n - 1 stages after the first alone; without, one per
 * synchronizing stage. */
static uint32_t tests_per_rank(const sf_summary *s)
{
    uint32_t n = 0;
    for (uint64_t m = s->schema.sync_mask; m; m &= m - 1) {
        uint32_t k = (uint32_t)__builtin_ctzll(m);
        bool waits = has_dense(s) && by_waits(s, k);
        n += has_dense(s) && !waits ? 2 * (k - aligned_from(s->schema.sync_mask, k)) + 1 : 1;
    }
    return n;
}

/* Dense rows: every rank's own work from stage b through k, placed by mid-rank
 * among the step's ranks (ties share their places). With arrivals, w->arr
 * records who was last at each step and by how much. */
static void tally_dense(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                        uint32_t b, uint32_t k, bool arrivals, struct scratch *w, struct tally *t)
{
    const sf_dense *dn = s->dense;
    uint32_t S = s->schema.n_stages, m = w->n_mem, all = dn->n_ranks;
    memset(w->score, 0, all * sizeof *w->score);
    for (uint32_t i = 0; i < n_complete; i++) {
        const sf_step_summary *st = &s->steps[complete[i]];
        if (!eligible(st))
            continue;
        const int64_t *rows = &dn->d[(size_t)complete[i] * all * S];
        struct place *pl = w->place;
        for (uint32_t q = 0; q < m; q++) {
            uint32_t r = w->mem[q];
            pl[q] = (struct place){0, r};
            for (uint32_t j = b; j <= k; j++)
                pl[q].late += rows[(size_t)r * S + j];
        }
        qsort(pl, m, sizeof *pl, cmp_place);
        for (uint32_t lo = 0; lo < m;) {
            uint32_t hi = lo + 1;
            while (hi < m && pl[hi].late == pl[lo].late)
                hi++;
            double centred = (double)(lo + hi - 1) / 2 - (double)(m - 1) / 2;
            for (uint32_t p = lo; p < hi; p++)
                w->score[pl[p].r] += centred;
            lo = hi;
        }
        t->var += ((double)m * m - 1) / 12;
        if (arrivals)
            w->arr[t->n] =
                (struct arrival){dn->ranks[pl[m - 1].r], i, pl[m - 1].late - pl[m - 2].late};
        t->n++;
    }
    uint32_t best = w->mem[0];
    for (uint32_t q = 1; q < m; q++)
        if (w->score[w->mem[q]] > w->score[best])
            best = w->mem[q];
    t->cand = best;
    t->score = w->score[best];
    /* Bonferroni over every rank that could have been named, in any cohort. */
    t->n_ranks = all;
}

/* Top-2 only (mergeable mode): the score is the last place alone, on the
 * prefixes from the step's start; inside one cohort of the cohort part, the
 * last place among that cohort's ranks. */
static void tally_top2(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                       uint32_t k, struct scratch *w, struct tally *t)
{
    double expected = 0;
    t->n_ranks = 0;
    for (uint32_t i = 0; i < n_complete; i++) {
        const sf_step_summary *st = &s->steps[complete[i]];
        if (!eligible(st))
            continue;
        const sf_top2 *p = &st->prefix_top2[k];
        uint32_t m = st->n_ranks;
        if (w->part_cohort != UINT32_MAX) {
            const sf_top2 *c = sf__cohort_top2(s->cohort, st->step, w->part_cohort, &m);
            if (c == NULL || m < 2)
                continue;
            p = &c[k];
        }
        double q = 1.0 / m;
        expected += q;
        t->var += q * (1 - q);
        t->n_ranks = st->n_ranks > t->n_ranks ? st->n_ranks : t->n_ranks;
        w->arr[t->n++] = (struct arrival){p->r1, i, p->v1 - p->v2};
    }
    uint32_t count = 0;
    qsort(w->arr, t->n, sizeof *w->arr, cmp_arrival);
    for (uint32_t i = 0; i < t->n;) {
        uint32_t j = i;
        while (j < t->n && w->arr[j].rank == w->arr[i].rank)
            j++;
        if (j - i > count) { /* strict: the lowest rank wins ties */
            count = j - i;
            t->cand = w->arr[i].rank;
        }
        i = j;
    }
    t->score = count - expected;
}

/* The median over the eligible steps of dense rank c's own work from stage b
 * through j minus the median of the other ranks' at the step: how much more
 * work the rank typically had there, whichever rank was last. */
static int64_t median_contrast(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                               uint32_t b, uint32_t j, uint32_t c, struct scratch *w)
{
    const sf_dense *dn = s->dense;
    uint32_t S = s->schema.n_stages, m = w->n_mem, n = 0, at_c = 0;
    for (uint32_t q = 0; q < m; q++)
        if (w->mem[q] == c)
            at_c = q;
    for (uint32_t i = 0; i < n_complete; i++) {
        if (!eligible(&s->steps[complete[i]]))
            continue;
        const int64_t *rows = &dn->d[(size_t)complete[i] * dn->n_ranks * S];
        for (uint32_t q = 0; q < m; q++) {
            w->value[q] = 0;
            for (uint32_t p = b; p <= j; p++)
                w->value[q] += rows[(size_t)w->mem[q] * S + p];
        }
        sf__middle mid;
        sf__middle_of(w->value, 1, m, w->select, &mid);
        w->one[n++] = sf__contrast(&mid, w->value[at_c]);
    }
    return sf_median_i64(w->one, n);
}

/* The earliest stage from b up to k whose boundary rank led (uniquely, beyond
 * the gap tolerance) in more than half of the steps it arrived last; k itself
 * when no earlier one does. at[] holds complete-step positions. */
static uint32_t origin_stage(const sf_report *r, uint32_t rank, uint32_t b, uint32_t k,
                             const uint32_t *at, uint32_t n)
{
    uint32_t S = r->schema.n_stages;
    for (uint32_t j = b; j < k; j++) {
        uint32_t led = 0;
        for (uint32_t i = 0; i < n; i++)
            led += r->step_leaders[(size_t)at[i] * S + j] == rank;
        if (2 * (uint64_t)led > n)
            return j;
    }
    return k;
}

static bool significant(const sf_report *r, const struct tally *t, double z, uint32_t n_tests)
{
    return 0.5 * erfc(z / sqrt(2.0)) * t->n_ranks * n_tests <= r->gates.straggler_alpha;
}

/* The magnitude gates of a significant candidate at synchronizing stage k
 * (t the tally at k, w->arr sorted by rank): its median contrast and the
 * median lateness of its own last arrivals above the gap tolerance, and the
 * optional share floor. On success *ret_first and *ret_len locate its last
 * arrivals in w->arr. */
static bool late_enough(const sf_report *r, const struct scratch *w, const struct tally *t,
                        const struct candidate *c, uint32_t *ret_first, uint32_t *ret_len)
{
    if (c->effect <= r->leader_gap_tol_ns)
        return false;
    uint32_t first = 0, len = 0;
    while (first < t->n && w->arr[first].rank != c->rank)
        first++;
    while (first + len < t->n && w->arr[first + len].rank == c->rank)
        len++;
    if (len == 0 || (double)len < r->gates.straggler_last_share_min * t->n)
        return false;
    int64_t lo = w->arr[first + (len - 1) / 2].lateness, hi = w->arr[first + len / 2].lateness;
    if (lo + (hi - lo) / 2 <= r->leader_gap_tol_ns)
        return false;
    *ret_first = first;
    *ret_len = len;
    return true;
}

/* Over the tests of synchronizing stage k (span from b; at_k its arrival
 * tally, w->arr sorted by rank), the passing candidate with the largest z;
 * false when none passes. Test i covers stages from..j: the prefix b..j at
 * even i, stage j alone at odd i; the earliest test wins ties. */
static bool best_test(const sf_report *r, const sf_summary *s, const uint32_t *complete,
                      uint32_t n_complete, uint32_t b, uint32_t k, const struct tally *at_k,
                      uint32_t n_tests, struct scratch *w, struct candidate *ret,
                      uint32_t *ret_first, uint32_t *ret_len)
{
    bool dense = has_dense(s), found = false;
    for (uint32_t i = dense ? 0 : 2 * (k - b); i <= 2 * (k - b); i++) {
        uint32_t j = b + (i + 1) / 2, from = i % 2 ? j : b, f, l;
        struct tally t = *at_k;
        if (j < k || from > b) {
            t = (struct tally){0};
            tally_dense(s, complete, n_complete, from, j, false, w, &t);
        }
        struct candidate c = {.rank = dense ? s->dense->ranks[t.cand] : t.cand,
                              .z = t.score / sqrt(t.var),
                              .effect = INT64_MAX};
        if ((found && c.z <= ret->z) || !significant(r, at_k, c.z, n_tests))
            continue;
        if (dense)
            c.effect = median_contrast(s, complete, n_complete, from, j, t.cand, w);
        if (late_enough(r, w, at_k, &c, &f, &l))
            *ret = c, *ret_first = f, *ret_len = l, found = true;
    }
    return found;
}

/* The verdict at synchronizing stage k, or present = false; *ret_z is its
 * score in standard deviations. */
static void verdict_at(const sf_report *r, const sf_summary *s, const uint32_t *complete,
                       uint32_t n_complete, uint32_t k, uint32_t n_tests, struct scratch *w,
                       sf_straggler *ret, double *ret_z)
{
    struct tally at_k = {0};
    uint32_t b = aligned_from(s->schema.sync_mask, k);
    memset(ret, 0, sizeof *ret);
    *ret_z = 0;
    if (has_dense(s))
        tally_dense(s, complete, n_complete, b, k, true, w, &at_k);
    else
        tally_top2(s, complete, n_complete, k, w, &at_k);
    ret->eligible_steps = at_k.n;
    if (at_k.n == 0 || at_k.var <= 0)
        return;
    qsort(w->arr, at_k.n, sizeof *w->arr, cmp_arrival);
    struct candidate best = {0};
    uint32_t first = 0, len = 0;
    if (!best_test(r, s, complete, n_complete, b, k, &at_k, n_tests, w, &best, &first, &len))
        return;
    int64_t lo = w->arr[first + (len - 1) / 2].lateness, hi = w->arr[first + len / 2].lateness;
    for (uint32_t i = 0; i < len; i++)
        w->at[i] = w->arr[first + i].at;
    qsort(w->at, len, sizeof *w->at, cmp_u32_asc);
    *ret_z = best.z;
    *ret = (sf_straggler){.present = true,
                          .rank = best.rank,
                          .sync_stage = k,
                          .origin_stage = origin_stage(r, best.rank, b, k, w->at, len),
                          .arrived_last_steps = len,
                          .eligible_steps = at_k.n,
                          .median_lateness_ns = lo + (hi - lo) / 2,
                          .persistence = SF_PERSIST_NONE,
                          .windows_in_a_row = 1,
                          .group = s->schema.sync_group[k]};
}

/* ---- the wait rule (docs/ACCOUNTING.md, "Synchronizing groups") ------------
 * Inside a tp or pp group every member leaves each collective together, so
 * arrival order at the stage's last sync point says little, and the rank the
 * others wait for is the one that waits least: per step each member's blame
 * is its own work in the stage minus its accumulated wait, and the place test
 * above runs on it. */

static const int64_t *wait_cell(const sf_summary *s, uint32_t step, uint32_t r)
{
    const sf_dense *dn = s->dense;
    size_t J = (size_t)__builtin_popcountll(s->schema.sync_mask);
    return &dn->sync_wait[((size_t)step * dn->n_ranks + r) * 2 * J];
}

static uint32_t sync_slot(const sf_schema *schema, uint32_t k)
{
    return (uint32_t)__builtin_popcountll(schema->sync_mask & ((UINT64_C(1) << k) - 1));
}

/* A rank's wait and own work at stage k and step `step`, or false without
 * a wait mark. */
static bool wait_own(const sf_summary *s, uint32_t step, uint32_t k, uint32_t r, int64_t *ret_wait,
                     int64_t *ret_own)
{
    const sf_dense *dn = s->dense;
    int64_t wait = wait_cell(s, step, r)[sync_slot(&s->schema, k)];
    if (!dn->present[(size_t)step * dn->n_ranks + r] || wait < 0)
        return false;
    const int64_t *d = &dn->d[((size_t)step * dn->n_ranks + r) * s->schema.n_stages];
    *ret_wait = wait;
    *ret_own = d[k] + d[k + 1] - wait;
    return true;
}

/* The median over rank r's cohort peers (w->cohort_of) with a wait mark at
 * the step of their wait and own work; false when it has none (then its
 * own figures are taken as they are). */
static bool peer_medians(const sf_summary *s, uint32_t step, uint32_t k, uint32_t r,
                         struct scratch *w, int64_t *ret_wait, int64_t *ret_own)
{
    if (w->cohort_of == NULL)
        return false;
    uint32_t n = 0, all = s->dense->n_ranks;
    for (uint32_t q = 0; q < all; q++) {
        int64_t wait, own;
        if (q != r && w->cohort_of[q] == w->cohort_of[r] && wait_own(s, step, k, q, &wait, &own)) {
            w->select[n] = wait;
            w->one2[n++] = own;
        }
    }
    if (n == 0)
        return false;
    *ret_wait = sf_median_i64(w->select, n);
    *ret_own = sf_median_i64(w->one2, n);
    return true;
}

/* The step's figures of every member at stage k: its wait into w->value and
 * its blame (own work minus wait) into w->place, both relative to the
 * median of its cohort's (docs/ACCOUNTING.md, "Synchronizing groups": a
 * pipeline's later stage waits for the earlier one by structure); false
 * when a member has no wait mark there, or when the member with the largest
 * blame did not work longer than its replicas by more than tol: a rank that
 * only waited less than its replica (its upstream replica was the slow one)
 * is nobody's culprit. Selecting instead the steps where some member waited
 * longer than its replicas would select, in a pipeline (where only the later
 * stage waits), the steps its upstream member happened to be slow, and name
 * that member in a clean job. */
static bool group_step(const sf_summary *s, uint32_t step, uint32_t k, int64_t tol,
                       struct scratch *w)
{
    int64_t most = INT64_MIN, most_own = 0;
    for (uint32_t q = 0; q < w->n_mem; q++) {
        uint32_t r = w->mem[q];
        int64_t wait, own, peer_wait, peer_own;
        if (!wait_own(s, step, k, r, &wait, &own))
            return false;
        if (peer_medians(s, step, k, r, w, &peer_wait, &peer_own)) {
            wait -= peer_wait;
            own -= peer_own;
        }
        w->value[q] = wait;
        w->place[q] = (struct place){own - wait, r};
        if (own - wait > most) {
            most = own - wait;
            most_own = own;
        }
    }
    return most_own > tol;
}

/* Whether dense rank `best` did more own work at stage k than its replicas
 * (the median of its cohort's other members) in significantly more complete
 * steps than less, each by more than tol: a one-sided sign test at
 * straggler_alpha with the verdict's Bonferroni factor (every rank, every
 * test of the schema). The group test compares members through their replicas,
 * so a fault on a replica of one member (its figures turn negative) leaves
 * the other member the most blamed in every step, and the steps its own
 * work was high by chance eligible: measured, a pipeline stage 0 rank was
 * named for its stage 1 peer's slowed replica. A member without replicas
 * (no cohorts, a cohort of one) has nothing to be tested against. Only pp
 * groups take the test: there a stage 0 member's wait is 0 by structure, so
 * its blame is its own-work noise alone. In a tp group the bystander's
 * replica is the slowed rank's tp peer, which waits for it and whose own
 * work read short on a loaded host, so the bystander passed the test while
 * the slowed rank, at that noise, often did not: measured, the test lost
 * more tp hits than it removed wrong answers. */
static bool outworks_replicas(const sf_report *r, const sf_summary *s, const uint32_t *complete,
                              uint32_t n_complete, uint32_t k, uint32_t best, uint32_t n_tests,
                              struct scratch *w)
{
    if (s->schema.sync_group[k] != SF_SYNC_PP)
        return true;
    uint32_t more = 0, less = 0;
    bool compared = false;
    int64_t tol = r->leader_gap_tol_ns;
    for (uint32_t i = 0; i < n_complete; i++) {
        int64_t wait, own, peer_wait, peer_own;
        if (!wait_own(s, complete[i], k, best, &wait, &own) ||
            !peer_medians(s, complete[i], k, best, w, &peer_wait, &peer_own))
            continue;
        compared = true;
        more += own - peer_own > tol;
        less += own - peer_own < -tol;
    }
    if (!compared)
        return true;
    if (more <= less)
        return false;
    struct tally t = {.n_ranks = s->dense->n_ranks};
    return significant(r, &t, ((double)more - less) / sqrt((double)more + less), n_tests);
}

static int64_t least_other(const struct scratch *w, uint32_t r)
{
    int64_t lo = INT64_MAX;
    for (uint32_t q = 0; q < w->n_mem; q++)
        if (w->mem[q] != r && w->value[q] < lo)
            lo = w->value[q];
    return lo;
}

/* The wait-rule verdict of the group w->mem at synchronizing stage k. */
static void group_verdict_at(const sf_report *r, const sf_summary *s, const uint32_t *complete,
                             uint32_t n_complete, uint32_t k, uint32_t n_tests, struct scratch *w,
                             sf_straggler *ret, double *ret_z)
{
    const sf_dense *dn = s->dense;
    uint32_t m = w->n_mem, all = dn->n_ranks;
    struct tally t = {.n_ranks = all};
    memset(ret, 0, sizeof *ret);
    *ret_z = 0;
    memset(w->score, 0, all * sizeof *w->score);
    for (uint32_t i = 0; i < n_complete; i++) {
        if (s->steps[complete[i]].n_ranks < 2 ||
            !group_step(s, complete[i], k, r->leader_gap_tol_ns, w))
            continue;
        qsort(w->place, m, sizeof *w->place, cmp_place);
        for (uint32_t lo = 0; lo < m;) {
            uint32_t hi = lo + 1;
            while (hi < m && w->place[hi].late == w->place[lo].late)
                hi++;
            double centred = (double)(lo + hi - 1) / 2 - (double)(m - 1) / 2;
            for (uint32_t p = lo; p < hi; p++)
                w->score[w->place[p].r] += centred;
            lo = hi;
        }
        t.var += ((double)m * m - 1) / 12;
        uint32_t culprit = w->place[m - 1].r, at_c = 0;
        for (uint32_t q = 0; q < m; q++)
            at_c = w->mem[q] == culprit ? q : at_c;
        w->arr[t.n++] =
            (struct arrival){dn->ranks[culprit], i, least_other(w, culprit) - w->value[at_c]};
    }
    ret->eligible_steps = t.n;
    ret->group = s->schema.sync_group[k];
    if (t.n == 0 || t.var <= 0)
        return;
    uint32_t best = w->mem[0];
    for (uint32_t q = 1; q < m; q++)
        if (w->score[w->mem[q]] > w->score[best])
            best = w->mem[q];
    struct candidate c = {.rank = dn->ranks[best], .z = w->score[best] / sqrt(t.var)};
    if (!significant(r, &t, c.z, n_tests) ||
        !outworks_replicas(r, s, complete, n_complete, k, best, n_tests, w))
        return;
    /* The median contrast: how much less it waited than the median of the
     * others, over the eligible steps. */
    uint32_t n = 0, at_best = 0;
    for (uint32_t q = 0; q < m; q++)
        at_best = w->mem[q] == best ? q : at_best;
    for (uint32_t i = 0; i < n_complete; i++) {
        if (s->steps[complete[i]].n_ranks < 2 ||
            !group_step(s, complete[i], k, r->leader_gap_tol_ns, w))
            continue;
        for (uint32_t q = 0; q < m; q++)
            w->value[q] = -w->value[q];
        sf__middle mid;
        sf__middle_of(w->value, 1, m, w->select, &mid);
        w->one[n++] = sf__contrast(&mid, w->value[at_best]);
    }
    c.effect = sf_median_i64(w->one, n);
    qsort(w->arr, t.n, sizeof *w->arr, cmp_arrival);
    uint32_t first, len;
    if (!late_enough(r, w, &t, &c, &first, &len))
        return;
    int64_t lo = w->arr[first + (len - 1) / 2].lateness, hi = w->arr[first + len / 2].lateness;
    /* Its victim: the member that waited longest over the steps it was
     * waited for (the lowest rank on ties). */
    uint32_t victim = SF_NO_RANK;
    int64_t victim_wait = -1;
    for (uint32_t q = 0; q < m; q++) {
        if (w->mem[q] == best)
            continue;
        int64_t sum = 0;
        for (uint32_t i = 0; i < len; i++) {
            const int64_t *cell = wait_cell(s, complete[w->arr[first + i].at], w->mem[q]);
            sum += cell[sync_slot(&s->schema, k)];
        }
        if (sum > victim_wait) {
            victim_wait = sum;
            victim = dn->ranks[w->mem[q]];
        }
    }
    *ret_z = c.z;
    *ret = (sf_straggler){.present = true,
                          .rank = c.rank,
                          .sync_stage = k,
                          .origin_stage = k,
                          .arrived_last_steps = len,
                          .eligible_steps = t.n,
                          .median_lateness_ns = lo + (hi - lo) / 2,
                          .persistence = SF_PERSIST_NONE,
                          .windows_in_a_row = 1,
                          .group = s->schema.sync_group[k],
                          .wait_rule = true,
                          .victim_rank = victim};
}

/* Dense rank i's coordinates: the dense rows' own, or, in a decoded or
 * merged summary (whose dense rows keep none), the cohort part's, which
 * covers the same ranks (sf__report_cohorts checked it); NULL when no row
 * declared any. A rank the part lacks reads as undeclared. */
static const sf_parallel *coords_of(const sf_summary *s, uint32_t i)
{
    static const sf_parallel undeclared;
    const sf_dense *dn = s->dense;
    if (dn->parallel != NULL)
        return &dn->parallel[i];
    const sf_cohort_summary *c = s->cohort;
    if (c == NULL || c->n_ranks == 0)
        return NULL;
    uint32_t x = sf__lower_bound_u32(c->ranks, c->n_ranks, dn->ranks[i]);
    return x < c->n_ranks && c->ranks[x] == dn->ranks[i] ? &c->parallel[x] : &undeclared;
}

/* Dense index -> its group at stage k: the ranks whose coordinates differ
 * only in the group's dimension; one group of every rank without
 * coordinates. Group ids are the lowest dense index of the group. */
static void groups_of(const sf_summary *s, uint32_t k, uint32_t *ret)
{
    const sf_dense *dn = s->dense;
    enum sf_parallel_dim dim = s->schema.sync_group[k] == SF_SYNC_TP ? SF_PAR_TP : SF_PAR_PP;
    for (uint32_t i = 0; i < dn->n_ranks; i++) {
        ret[i] = i;
        const sf_parallel *pi = coords_of(s, i);
        if (pi == NULL) {
            ret[i] = 0;
            continue;
        }
        for (uint32_t q = 0; q < i; q++) {
            sf_parallel a = *pi, b = *coords_of(s, q);
            a.index[dim] = b.index[dim] = 0;
            if (sf_parallel_equal(&a, &b)) {
                ret[i] = ret[q];
                break;
            }
        }
    }
}

/* Over the tp and pp stages that take the wait rule, each group of two or
 * more members tested alone; the verdict with the largest z beats the
 * arrival rule's (*best_z) as in verdict_over. */
static int group_verdicts(sf_report *r, const sf_summary *s, const uint32_t *complete,
                          uint32_t n_complete, struct scratch *w, uint32_t *mem, bool *first,
                          double *best_z)
{
    uint32_t all = s->dense->n_ranks, n_tests = tests_per_rank(s);
    uint32_t *group = malloc(all * sizeof *group);
    if (group == NULL)
        return -ENOMEM;
    for (uint64_t mask = s->schema.sync_mask; mask; mask &= mask - 1) {
        uint32_t k = (uint32_t)__builtin_ctzll(mask);
        if (!by_waits(s, k))
            continue;
        groups_of(s, k, group);
        for (uint32_t g = 0; g < all; g++) {
            w->n_mem = 0;
            for (uint32_t i = 0; i < all; i++)
                if (group[i] == g)
                    mem[w->n_mem++] = i;
            if (w->n_mem < 2)
                continue;
            w->mem = mem;
            sf_straggler v;
            double z;
            group_verdict_at(r, s, complete, n_complete, k, n_tests, w, &v, &z);
            if (*first || (v.present && (!r->straggler.present || z > *best_z))) {
                r->straggler = v;
                *best_z = z;
            }
            *first = false;
        }
    }
    free(group);
    return 0;
}

static void scratch_free(struct scratch *w)
{
    free(w->arr);
    free(w->at);
    free(w->score);
    free(w->place);
    free(w->value);
    free(w->select);
    free(w->one);
    free(w->one2);
}

static int scratch_init(struct scratch *w, const sf_summary *s, uint32_t n_complete)
{
    size_t m = has_dense(s) ? s->dense->n_ranks : 1;
    *w = (struct scratch){.arr = malloc(n_complete * sizeof *w->arr),
                          .at = malloc(n_complete * sizeof *w->at),
                          .score = malloc(m * sizeof *w->score),
                          .place = malloc(m * sizeof *w->place),
                          .value = malloc(m * sizeof *w->value),
                          .select = malloc(m * sizeof *w->select),
                          .one = malloc(n_complete * sizeof *w->one),
                          .one2 = malloc(m * sizeof *w->one2)};
    if (w->arr == NULL || w->at == NULL || w->score == NULL || w->place == NULL ||
        w->value == NULL || w->select == NULL || w->one == NULL || w->one2 == NULL) {
        scratch_free(w);
        return -ENOMEM;
    }
    return 0;
}

/* Over every synchronizing stage, the verdict whose candidate scored the most
 * standard deviations among the ranks in w->mem; the earliest stage on ties.
 * *best_z and *first carry the best so far across calls (one per cohort). */
static void verdict_over(sf_report *r, const sf_summary *s, const uint32_t *complete,
                         uint32_t n_complete, struct scratch *w, bool *first, double *best_z)
{
    uint32_t n_tests = tests_per_rank(s);
    for (uint64_t m = s->schema.sync_mask; m; m &= m - 1) {
        if (has_dense(s) && by_waits(s, (uint32_t)__builtin_ctzll(m)))
            continue; /* the wait rule, in group_verdicts */
        sf_straggler v;
        double z;
        verdict_at(r, s, complete, n_complete, (uint32_t)__builtin_ctzll(m), n_tests, w, &v, &z);
        if (*first || (v.present && (!r->straggler.present || z > *best_z))) {
            r->straggler = v;
            *best_z = z;
        }
        *first = false;
    }
}

/* Without cohorts every dense rank is compared with every other; with them
 * (cohort_of, r->cohorts APPLIED) each cohort of two or more ranks is tested
 * alone and the verdict is the best over cohorts. Coordinates that do not
 * make cohorts (INCONSISTENT) give no verdict: ranks doing different work
 * cannot be told apart by their arrival. Without one, eligible_steps still
 * says how many steps the first synchronizing stage could judge. */
int sf__straggler_verdict(sf_report *r, const sf_summary *s, const uint32_t *complete,
                          uint32_t n_complete, const uint32_t *cohort_of)
{
    memset(&r->straggler, 0, sizeof r->straggler);
    if (s->schema.sync_mask == 0 || n_complete == 0 || r->cohorts == SF_COHORTS_INCONSISTENT)
        return 0;
    struct scratch w;
    if (scratch_init(&w, s, n_complete) < 0)
        return -ENOMEM;
    uint32_t all = has_dense(s) ? s->dense->n_ranks : 0;
    uint32_t *mem = malloc((all ? all : 1) * sizeof *mem);
    if (mem == NULL) {
        scratch_free(&w);
        return -ENOMEM;
    }
    bool first = true;
    double best_z = 0;
    w.part_cohort = UINT32_MAX;
    if (!has_dense(s) && r->cohorts == SF_COHORTS_APPLIED && s->cohort != NULL) {
        /* Mergeable mode inside cohorts: each cohort of the part alone. */
        for (uint32_t c = 0; c < s->cohort->n_cohorts; c++) {
            w.part_cohort = c;
            verdict_over(r, s, complete, n_complete, &w, &first, &best_z);
        }
        free(mem);
        scratch_free(&w);
        return 0;
    }
    bool by_cohort = r->cohorts == SF_COHORTS_APPLIED && cohort_of != NULL && all > 0;
    for (uint32_t c = 0; c < (by_cohort ? r->n_cohorts : 1); c++) {
        w.n_mem = 0;
        for (uint32_t i = 0; i < all; i++)
            if (!by_cohort || cohort_of[i] == c)
                mem[w.n_mem++] = i;
        w.mem = mem;
        if (has_dense(s) && w.n_mem < 2)
            continue; /* a cohort of one has no peer to be late against */
        verdict_over(r, s, complete, n_complete, &w, &first, &best_z);
    }
    w.cohort_of = by_cohort ? cohort_of : NULL;
    int rc =
        has_dense(s) ? group_verdicts(r, s, complete, n_complete, &w, mem, &first, &best_z) : 0;
    free(mem);
    scratch_free(&w);
    return rc;
}

/* ---- persistence ---------------------------------------------------------- */

void sf_straggler_track(sf_straggler_history *h, sf_report *report)
{
    if (h == NULL || report == NULL)
        return;
    if (h->any && h->segment == report->meta.segment && h->last_index == report->meta.index) {
        h->any = h->prev_any; /* the same window again: undo its first report */
        h->last_index = h->prev_index;
        h->last_rank = h->prev_rank;
        h->run = h->prev_run;
    }
    h->prev_any = h->any;
    h->prev_index = h->last_index;
    h->prev_rank = h->last_rank;
    h->prev_run = h->run;
    bool consecutive =
        h->any && h->segment == report->meta.segment && h->last_index + 1 == report->meta.index;
    if (!consecutive) {
        h->last_rank = SF_NO_RANK;
        h->run = 0;
    }
    h->any = true;
    h->last_index = report->meta.index;
    h->segment = report->meta.segment;
    sf_straggler *v = &report->straggler;
    if (!v->present) {
        h->last_rank = SF_NO_RANK;
        h->run = 0;
        return;
    }
    bool same = h->last_rank == v->rank;
    bool after_other = !same && h->last_rank != SF_NO_RANK;
    h->run = same ? h->run + 1 : 1;
    h->last_rank = v->rank;
    v->windows_in_a_row = h->run;
    if (h->run >= report->gates.straggler_persist_windows)
        v->persistence = SF_PERSIST_FIXED;
    else if (after_other)
        v->persistence = SF_PERSIST_ROTATING;
    else
        v->persistence = SF_PERSIST_NONE;
}

/* ---- the critical path ------------------------------------------------------ */

struct chain_ref {
    const uint32_t *row;
    uint32_t len;
};

static int cmp_chain(const void *a, const void *b)
{
    const struct chain_ref *x = a, *y = b;
    for (uint32_t k = 0; k < x->len; k++)
        if (x->row[k] != y->row[k])
            return x->row[k] < y->row[k] ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row); /* equal chains: by position */
}

static bool same_chain(const struct chain_ref *x, const struct chain_ref *y)
{
    return memcmp(x->row, y->row, x->len * sizeof *x->row) == 0;
}

/* Most frequent row of step_leaders; the smallest chain (rank ids in
 * boundary order, SF_NO_RANK last) on ties. */
int sf__critical_path(sf_report *r)
{
    uint32_t S = r->schema.n_stages, n = r->steps;
    r->critical_path = (sf_critical_path){0};
    if (n == 0)
        return 0;
    struct chain_ref *refs = malloc(n * sizeof *refs);
    uint32_t *chain = malloc(S * sizeof *chain);
    if (refs == NULL || chain == NULL) {
        free(refs);
        free(chain);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        refs[i] = (struct chain_ref){&r->step_leaders[(size_t)i * S], S};
    qsort(refs, n, sizeof *refs, cmp_chain);
    uint32_t best = 0, best_len = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && same_chain(&refs[j], &refs[i]))
            j++;
        if (j - i > best_len) {
            best = i;
            best_len = j - i;
        }
        i = j;
    }
    memcpy(chain, refs[best].row, S * sizeof *chain);
    free(refs);
    r->critical_path = (sf_critical_path){.steps = best_len, .chain = chain};
    return 0;
}

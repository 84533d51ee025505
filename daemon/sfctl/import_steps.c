/*
 * Step and stage reduction for `sfctl import` (docs/IMPORT.md). Each stage
 * keeps the union of its matched ranges as sorted disjoint intervals,
 * compacted as it grows, so memory follows the distinct busy intervals of
 * the mapped stages, never the trace. A moment inside a step covered by
 * several stages is charged to the first of them in mapping order; the
 * residual is the rest of the step.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_steps.h"

void step_acc_init(struct step_acc *acc, struct import_map *map)
{
    memset(acc, 0, sizeof *acc);
    acc->map = map;
    acc->t_min = INT64_MAX;
    acc->t_max = INT64_MIN;
}

void step_acc_clear(struct step_acc *acc)
{
    if (acc == NULL)
        return;
    free(acc->steps);
    for (size_t i = 0; i < SF_MAX_STAGES; i++)
        free(acc->stage[i].v);
    memset(acc, 0, sizeof *acc);
}

/* Room for one more element of *v (holding n of *cap). */
static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 64;
    void *p = realloc(*v, c * elem);
    if (p == NULL)
        return -ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

static int cmp_interval(const void *x, const void *y)
{
    const struct interval *a = x, *b = y;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* Sorts and merges in place: overlapping or touching intervals become one. */
static void compact(struct interval_set *s)
{
    if (s->n == s->merged)
        return;
    qsort(s->v, s->n, sizeof *s->v, cmp_interval);
    size_t out = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (out > 0 && s->v[i].a <= s->v[out - 1].b) {
            if (s->v[i].b > s->v[out - 1].b)
                s->v[out - 1].b = s->v[i].b;
        } else {
            s->v[out++] = s->v[i];
        }
    }
    s->n = s->merged = out;
}

static int set_add(struct interval_set *s, int64_t a, int64_t b)
{
    /* Traces are mostly in time order: extend the last interval in place. */
    if (s->n > 0 && s->n == s->merged && a >= s->v[s->n - 1].a && a <= s->v[s->n - 1].b) {
        if (b > s->v[s->n - 1].b)
            s->v[s->n - 1].b = b;
        return 0;
    }
    if (s->n == s->cap) {
        compact(s); /* grow only when merging freed less than half */
        if (s->n * 2 > s->cap && grow((void **)&s->v, &s->cap, s->n, sizeof *s->v) < 0)
            return -ENOMEM;
    }
    if (s->n == s->cap && grow((void **)&s->v, &s->cap, s->n, sizeof *s->v) < 0)
        return -ENOMEM;
    if (s->n == s->merged && (s->n == 0 || a > s->v[s->n - 1].b))
        s->merged++; /* appending past the end keeps the prefix sorted */
    s->v[s->n++] = (struct interval){a, b};
    return 0;
}

int64_t step_number(const char *name)
{
    const char *end = NULL;
    for (const char *p = name; *p; p++)
        if (*p >= '0' && *p <= '9' && (p[1] < '0' || p[1] > '9'))
            end = p + 1;
    if (end == NULL)
        return -1;
    const char *start = end;
    while (start > name && start[-1] >= '0' && start[-1] <= '9')
        start--;
    if (end - start > 15)
        return -1;
    int64_t v = 0;
    for (const char *p = start; p < end; p++)
        v = v * 10 + (*p - '0');
    return v;
}

int step_acc_add(struct step_acc *acc, const char *name, int64_t start_ns, int64_t end_ns)
{
    acc->ranges++;
    if (end_ns <= start_ns)
        return 0;
    int cls = import_map_classify(acc->map, name);
    if (cls == IMPORT_NONE)
        return 0;
    acc->matched++;
    if (cls >= 0)
        return set_add(&acc->stage[cls], start_ns, end_ns);
    if (grow((void **)&acc->steps, &acc->cap_steps, acc->n_steps, sizeof *acc->steps) < 0)
        return -ENOMEM;
    acc->steps[acc->n_steps++] = (struct step_range){step_number(name), start_ns, end_ns};
    if (start_ns < acc->t_min)
        acc->t_min = start_ns;
    if (end_ns > acc->t_max)
        acc->t_max = end_ns;
    return 0;
}

static int cmp_step_start(const void *x, const void *y)
{
    const struct step_range *a = x, *b = y;
    return (a->a > b->a) - (a->a < b->a);
}

/* First of the sorted disjoint v[0..n) whose end lies after t. */
static size_t first_ending_after(const struct interval *v, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].b <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Length of [a, b) not covered by the sorted disjoint claimed[0..n). */
static int64_t unclaimed(const struct interval *claimed, size_t n, int64_t a, int64_t b)
{
    int64_t len = b - a;
    for (size_t i = first_ending_after(claimed, n, a); i < n && claimed[i].a < b; i++) {
        int64_t lo = claimed[i].a > a ? claimed[i].a : a;
        int64_t hi = claimed[i].b < b ? claimed[i].b : b;
        if (hi > lo)
            len -= hi - lo;
    }
    return len;
}

/* Durations of one step: each stage's clipped intervals minus the time
 * earlier stages claimed. claimed is scratch of the step's interval count. */
static int step_durations(struct step_acc *acc, const struct step_range *st, int64_t *d,
                          struct interval **claimed, size_t *claimed_cap)
{
    size_t n_claimed = 0, S = acc->map->n_explicit;
    int64_t sum = 0;
    for (size_t k = 0; k < S; k++) {
        const struct interval_set *s = &acc->stage[k];
        d[k] = 0;
        size_t first = first_ending_after(s->v, s->n, st->a), n_new = 0;
        for (size_t i = first; i < s->n && s->v[i].a < st->b; i++) {
            int64_t a = s->v[i].a > st->a ? s->v[i].a : st->a;
            int64_t b = s->v[i].b < st->b ? s->v[i].b : st->b;
            d[k] += unclaimed(*claimed, n_claimed, a, b);
            n_new++;
        }
        if (n_new == 0)
            continue;
        if (n_claimed + n_new > *claimed_cap) {
            size_t cap = (n_claimed + n_new) * 2;
            struct interval *c = realloc(*claimed, cap * sizeof *c);
            if (c == NULL)
                return -ENOMEM;
            *claimed = c;
            *claimed_cap = cap;
        }
        for (size_t i = first; i < s->n && s->v[i].a < st->b; i++)
            (*claimed)[n_claimed++] = s->v[i];
        struct interval_set tmp = {.v = *claimed, .n = n_claimed, .cap = *claimed_cap};
        compact(&tmp);
        n_claimed = tmp.n;
        sum += d[k];
    }
    d[S] = (st->b - st->a) - sum;
    return 0;
}

static int check_steps(struct step_acc *acc, char *err, size_t errlen)
{
    if (acc->n_steps == 0) {
        snprintf(err, errlen, "no step range (none matches the [steps] patterns of %s)",
                 acc->map->source);
        return -EINVAL;
    }
    qsort(acc->steps, acc->n_steps, sizeof *acc->steps, cmp_step_start);
    bool numbered = true;
    for (size_t i = 0; i < acc->n_steps; i++)
        numbered = numbered && acc->steps[i].step >= 0;
    for (size_t i = 0; i < acc->n_steps; i++) {
        struct step_range *st = &acc->steps[i];
        if (!numbered)
            st->step = (int64_t)i; /* unnumbered ranges count in time order */
        if (i > 0 && st->step <= acc->steps[i - 1].step) {
            snprintf(err, errlen, "step %lld %s step %lld", (long long)st->step,
                     st->step == acc->steps[i - 1].step ? "appears twice; the second after"
                                                        : "starts after",
                     (long long)acc->steps[i - 1].step);
            return -EINVAL;
        }
        if (st->b - st->a > SF_MAX_DURATION_NS) {
            snprintf(err, errlen, "step %lld lasts longer than the format's bound (2^42 ns)",
                     (long long)st->step);
            return -EINVAL;
        }
    }
    return 0;
}

int step_acc_rows(struct step_acc *acc, uint32_t rank, struct replay_part *part,
                  uint64_t *stage_ns_total, char *err, size_t errlen)
{
    int r = check_steps(acc, err, errlen);
    if (r < 0)
        return r;
    for (size_t k = 0; k < acc->map->n_explicit; k++)
        compact(&acc->stage[k]);
    int64_t d[SF_MAX_STAGES];
    struct interval *claimed = NULL;
    size_t claimed_cap = 0;
    for (size_t i = 0; i < acc->n_steps && r == 0; i++) {
        const struct step_range *st = &acc->steps[i];
        if ((r = step_durations(acc, st, d, &claimed, &claimed_cap)) < 0)
            break;
        for (size_t k = 0; k < acc->map->n_explicit; k++)
            stage_ns_total[k] += (uint64_t)d[k];
        sf_row row = {.step = st->step, .rank = rank, .d = d};
        r = sfctl_part_add_row(part, &row, NULL);
    }
    free(claimed);
    return r;
}

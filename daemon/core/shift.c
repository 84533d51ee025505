/*
 * The shift of one sample against another: the Hodges-Lehmann estimate,
 * its rank-based (Moses) interval and the two-sided Mann-Whitney p-value
 * (docs/CHANGE.md). Exact on integer ns: order statistics of the m x n
 * pairwise differences are found by counting, never by listing them all, so
 * the cost is O((m + n) log) whatever the sample sizes. Also the one-sample
 * signed-rank test used for per-rank contrasts. Knows nothing of reports.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/change.h>

#include "core_internal.h"

static int64_t *sorted_copy(const int64_t *v, size_t n)
{
    int64_t *c = malloc(n * sizeof *c);
    if (c == NULL)
        return NULL;
    memcpy(c, v, n * sizeof *c);
    sf__sort_i64(c, n);
    return c;
}

/* A sorted sample as its distinct values: run r holds value[r], and
 * below[r] values of the sample lie below it (below[n] is the sample's
 * size); or, with below NULL, the values themselves, each its own run. A
 * counting pass over runs, not values, makes the ties of stages that do
 * nearly nothing (tens of ns, a few distinct values) cost it nothing: over
 * values, a search there ran until its bracket was one value wide, still
 * holding thousands of tied pairs. */
struct runs {
    const int64_t *value;
    const uint64_t *below;
    size_t n;
};

/* The runs of sorted v[0..n), into value[] and below[] (n + 1 each). */
static struct runs runs_of(const int64_t *v, size_t n, int64_t *value, uint64_t *below)
{
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || v[i] != v[i - 1]) {
            value[r] = v[i];
            below[r++] = i;
        }
    below[r] = n;
    return (struct runs){value, below, r};
}

/* One counting pass at v: the pairs (i, j) with y[j] - x[i] <= v, the
 * largest such difference and the smallest one above v (INT64_MIN and
 * INT64_MAX where none). */
struct probe {
    uint64_t count;
    int64_t at_or_below, above;
};

/* The pass over runs (tied) or over values (each run of one, below not
 * read): one loop, specialised for each. */
static inline __attribute__((always_inline)) struct probe
probe_walk(const struct runs *x, const struct runs *y, int64_t v, bool tied)
{
    struct probe p = {0, INT64_MIN, INT64_MAX};
    const int64_t *xv = x->value, *yv = y->value;
    const uint64_t *xb = x->below, *yb = y->below;
    size_t j = 0, m = x->n, n = y->n;
    for (size_t a = 0; a < m; a++) {
        /* The cursor's first step without a branch: samples of like size
         * move it about once an x, so the loop's exit, which the data
         * decide, mispredicted about every other x; now only its rarer
         * later steps branch: its misses fell from 45.2 k to 20.3 k a call
         * for 5 % more instructions. Two steps without a branch chain
         * through the cursor and ran slower. */
        j += j < n && yv[j] - xv[a] <= v;
        while (j < n && yv[j] - xv[a] <= v)
            j++;
        p.count += tied ? (xb[a + 1] - xb[a]) * yb[j] : j;
        if (j > 0 && yv[j - 1] - xv[a] > p.at_or_below)
            p.at_or_below = yv[j - 1] - xv[a];
        if (j < n && yv[j] - xv[a] < p.above)
            p.above = yv[j] - xv[a];
    }
    return p;
}

/* What the passes of one sample pair have proved about order statistic k:
 * it lies in [lo, hi], both pairwise differences; below_lo pairs lie below
 * lo, at_hi pairs at or below hi, and above_hi is the smallest difference
 * above hi. Every pass is kept (struct differences), so each search starts
 * from the tightest bracket the earlier ones left. */
struct bracket {
    int64_t lo, hi, above_hi;
    uint64_t below_lo, at_hi;
};

enum { PROBES_MAX = 192 }; /* kept; further passes still narrow, unkept */
enum { LISTED_MAX = 512 }; /* pairs listed rather than counted */

struct differences {
    const int64_t *x, *y;
    size_t m, n;
    struct runs x_runs, y_runs; /* the values themselves unless tied */
    bool tied;
    uint32_t n_probes;
    struct probe p[PROBES_MAX];
    int64_t list[LISTED_MAX];
};

/* scratch: SF__SHIFT_SCRATCH_WORDS(m, n) words for the samples' runs. */
static void differences_init(struct differences *d, const int64_t *x, size_t m, const int64_t *y,
                             size_t n, int64_t *scratch)
{
    *d = (struct differences){.x = x, .m = m, .y = y, .n = n};
    uint64_t *below = (uint64_t *)(scratch + m + n);
    d->x_runs = runs_of(x, m, scratch, below);
    d->y_runs = runs_of(y, n, scratch + m, below + m + 1);
    /* A run costs a pass about a third more than a value; below three
     * quarters as many runs as values they pay. */
    d->tied = 4 * (d->x_runs.n + d->y_runs.n) < 3 * (m + n);
    if (!d->tied) {
        d->x_runs = (struct runs){x, NULL, m};
        d->y_runs = (struct runs){y, NULL, n};
    }
}

static struct probe differences_probe(const struct differences *d, int64_t v)
{
    if (d->tied)
        return probe_walk(&d->x_runs, &d->y_runs, v, true);
    return probe_walk(&d->x_runs, &d->y_runs, v, false);
}

static void bracket_apply(struct bracket *b, uint64_t k, const struct probe *p)
{
    if (p->count >= k) { /* order statistic k <= v, so <= the largest difference at or below v */
        if (p->at_or_below < b->hi) {
            b->hi = p->at_or_below;
            b->at_hi = p->count;
            b->above_hi = p->above;
        }
    } else if (p->above > b->lo) { /* above v, so at least the smallest difference above it */
        b->lo = p->above;
        b->below_lo = p->count;
    }
}

/* The pairs above lo that a pass aims to count: order statistic k's, moved
 * by a sixteenth of what can be listed toward the bracket's farther end.
 * Aimed at k itself, a pass mostly landed just short of it on the near
 * side, cut little off the far one, and the search crept up on k; aimed
 * past it, the pass brings the far end close to k, and the next step can
 * often list: about a fifth fewer passes a search, where an eighth, a
 * quarter or a half of what can be listed did worse. */
static double probe_target(const struct bracket *b, uint64_t k, uint64_t listable)
{
    uint64_t near = k - b->below_lo, far = b->at_hi - k, margin = listable / 16;
    if (near < far)
        return (double)near + (double)(margin < far ? margin : far);
    return (double)near - (double)(margin < near ? margin : near);
}

/* The next value to count at, in [lo, hi - 1]: where the pairs in the
 * bracket put the target if they were spread evenly, or the middle of the
 * bracket after a pass that did not halve the pairs in it. */
static int64_t probe_value(const struct bracket *b, uint64_t k, bool bisect, uint64_t listable)
{
    uint64_t width = (uint64_t)b->hi - (uint64_t)b->lo, step = width / 2;
    if (!bisect) {
        double f = (probe_target(b, k, listable) - 0.5) / (double)(b->at_hi - b->below_lo);
        double at = f * (double)width;
        step = at <= 0 ? 0 : at >= (double)(width - 1) ? width - 1 : (uint64_t)at;
    }
    return (int64_t)((uint64_t)b->lo + step);
}

/* Order statistic k of the differences when the bracket holds few pairs:
 * they are listed (for each x[i], the y[j] whose difference lies in
 * [lo, hi], two cursors that only move forward) and selected among, in one
 * pass instead of the passes that would close the bracket. Also, in
 * *ret_next, order statistic k + 1 (see kth_difference). */
static int64_t kth_listed(const struct differences *d, const struct bracket *b, uint64_t k,
                          int64_t *list, int64_t *ret_next)
{
    size_t n_list = 0, first = 0, last = 0;
    for (size_t i = 0; i < d->m; i++) {
        while (first < d->n && d->y[first] - d->x[i] < b->lo)
            first++;
        if (last < first)
            last = first;
        while (last < d->n && d->y[last] - d->x[i] <= b->hi)
            last++;
        for (size_t j = first; j < last; j++)
            list[n_list++] = d->y[j] - d->x[i];
    }
    size_t at = (size_t)(k - b->below_lo - 1);
    sf__select_kth(list, n_list, at);
    if (ret_next != NULL) {
        int64_t next = b->above_hi;
        for (size_t i = at + 1; i < n_list; i++)
            next = list[i] < next ? list[i] : next;
        *ret_next = next;
    }
    return list[at];
}

/* Order statistic k (1 to m x n) of the pairwise differences, exact: a
 * bracket between two differences, narrowed by counting passes (each moves
 * an end onto a difference, so it shrinks every time) until it closes or
 * holds few enough pairs to list. The passes interpolate, with bisection
 * where that stalls: a handful of passes instead of one per bit of the
 * value range. Also, in *ret_next, order statistic k + 1 when k < m x n
 * (the pairs at or below k's value reach k + 1, or else the smallest
 * difference above it). */
static int64_t kth_difference(struct differences *d, uint64_t k, int64_t *ret_next)
{
    uint64_t pairs = (uint64_t)d->m * d->n;
    struct bracket b = {.lo = d->y[0] - d->x[d->m - 1],
                        .hi = d->y[d->n - 1] - d->x[0],
                        .above_hi = INT64_MAX,
                        .below_lo = 0,
                        .at_hi = pairs};
    for (uint32_t i = 0; i < d->n_probes; i++)
        bracket_apply(&b, k, &d->p[i]);
    bool bisect = false;
    uint64_t listable = d->m + d->n < LISTED_MAX ? d->m + d->n : LISTED_MAX;
    while (b.lo < b.hi) {
        uint64_t before = b.at_hi - b.below_lo;
        if (before <= listable)
            return kth_listed(d, &b, k, d->list, ret_next);
        int64_t v = probe_value(&b, k, bisect, listable);
        struct probe p = differences_probe(d, v);
        if (d->n_probes < PROBES_MAX)
            d->p[d->n_probes++] = p;
        bracket_apply(&b, k, &p);
        bisect = b.at_hi - b.below_lo > before / 2;
    }
    if (ret_next != NULL)
        *ret_next = b.at_hi >= k + 1 ? b.hi : b.above_hi;
    return b.hi;
}

/* The merged order of two sorted samples, walked one value at a time for
 * Mann-Whitney's U: twice the rank sum of y (midranks, so an integer) and
 * the sum of t^3 - t over groups of t tied values. */
struct rank_walk {
    uint64_t twice_rank_sum_y;
    double ties;
    int64_t value; /* of the open group */
    size_t start;  /* values before it */
    size_t cx, cy; /* its values from x and from y */
};

/* Ends the open group: each of its y values has the midrank
 * start + (t + 1) / 2. Groups of one add nothing to the ties, and adding
 * nothing leaves the double sum as it was. */
static void rank_group_close(struct rank_walk *w)
{
    size_t t = w->cx + w->cy;
    w->twice_rank_sum_y += (uint64_t)w->cy * (2 * w->start + t + 1);
    if (t > 1) {
        double dt = (double)t;
        w->ties += dt * dt * dt - dt;
    }
    w->start += t;
    w->cx = w->cy = 0;
}

static void rank_take(struct rank_walk *w, int64_t v, bool from_y)
{
    if (v != w->value) /* an empty group (the first) closes as nothing */
        rank_group_close(w);
    w->value = v;
    w->cx += !from_y;
    w->cy += from_y;
}

/* Mann-Whitney U of y (pairs with y > x, ties counting a half) and the sum
 * of t^3 - t over tie groups, from the merged order. Which sample gives the
 * next value is chosen without a branch, and a value unlike the last one
 * (nearly every value, in ns) is the branch the CPU predicts: the walk by
 * tie groups that this replaced took about 65 instructions a value. U is
 * now summed in integers, where the double sum it replaces was exact at
 * every sample size a window can have, and the ties in the same order:
 * both are what they were to the bit. */
static void rank_statistics(const int64_t *x, size_t m, const int64_t *y, size_t n, double *ret_u,
                            double *ret_ties)
{
    struct rank_walk w = {0};
    size_t i = 0, j = 0;
    while (i < m && j < n) {
        bool from_y = y[j] < x[i];
        rank_take(&w, from_y ? y[j] : x[i], from_y);
        i += !from_y;
        j += from_y;
    }
    for (; i < m; i++)
        rank_take(&w, x[i], false);
    for (; j < n; j++)
        rank_take(&w, y[j], true);
    rank_group_close(&w);
    *ret_u = (double)w.twice_rank_sum_y / 2 - (double)n * ((double)n + 1) / 2;
    *ret_ties = w.ties;
}

/* z with P(Z > z) = p / 2 for a standard normal Z, by bisection. Once lo
 * and hi are adjacent doubles, mid is one of them and every further round
 * leaves them as they are: stopping there gives the 200 rounds' result. */
double sf__normal_two_sided_quantile(double p)
{
    double lo = 0, hi = 40;
    for (int it = 0; it < 200; it++) {
        double mid = (lo + hi) / 2;
        if (mid == lo || mid == hi)
            break;
        if (erfc(mid / M_SQRT2) > p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

/* The two-sided Mann-Whitney p-value of sorted samples (normal
 * approximation, tie-corrected, with continuity correction), and in
 * *ret_sigma the U statistic's deviation that the interval needs. */
static double mann_whitney_sorted(const int64_t *x, size_t m, const int64_t *y, size_t n,
                                  double variance_factor, double *ret_sigma)
{
    double u, ties;
    rank_statistics(x, m, y, n, &u, &ties);
    double total = (double)(m + n), mn = (double)((uint64_t)m * n);
    double var = total > 1 ? mn / 12 * ((total + 1) - ties / (total * (total - 1))) : 0;
    double sigma = var > 0 ? sqrt(var) : 0, tested = var > 0 ? sqrt(var * variance_factor) : 0;
    double p = 1;
    if (tested > 0) {
        double dev = fabs(u - mn / 2) - 0.5; /* continuity correction */
        p = dev > 0 ? erfc(dev / tested / M_SQRT2) : 1;
    }
    *ret_sigma = sigma;
    return p;
}

double sf__mann_whitney_sorted_p(const int64_t *xs, size_t m, const int64_t *ys, size_t n,
                                 double variance_factor)
{
    double sigma;
    return mann_whitney_sorted(xs, m, ys, n, variance_factor, &sigma);
}

void sf__shift_estimate_sorted(const int64_t *xs, size_t m, const int64_t *ys, size_t n, double z,
                               int64_t *scratch, sf_shift *ret)
{
    uint64_t pairs = (uint64_t)m * n;
    struct differences d;
    differences_init(&d, xs, m, ys, n, scratch);
    /* The difference of the medians lies near the median of differences:
     * one pass there leaves every search a narrow bracket to start from. */
    d.p[d.n_probes++] = differences_probe(&d, ys[n / 2] - xs[m / 2]);
    int64_t a, b;
    if (pairs % 2)
        a = b = kth_difference(&d, (pairs + 1) / 2, NULL);
    else
        a = kth_difference(&d, pairs / 2, &b);
    /* The interval's ends lie near the shift plus or minus z standard
     * errors (from each sample's quartiles): one pass at each. */
    double sx = (double)(xs[3 * m / 4] - xs[m / 4]) / 1.349;
    double sy = (double)(ys[3 * n / 4] - ys[n / 4]) / 1.349;
    double reach = z * sqrt(sx * sx / (double)m + sy * sy / (double)n);
    if (reach >= 1 && reach < 1e15 && d.n_probes + 2 <= PROBES_MAX) {
        d.p[d.n_probes++] = differences_probe(&d, a - (int64_t)reach);
        d.p[d.n_probes++] = differences_probe(&d, b + (int64_t)reach);
    }
    double sigma, mn = (double)pairs;
    double p = mann_whitney_sorted(xs, m, ys, n, 1, &sigma);
    double k = floor(mn / 2 - z * sigma);
    uint64_t lo_k = k < 1 ? 1 : (uint64_t)k;
    if (lo_k > (pairs + 1) / 2)
        lo_k = (pairs + 1) / 2;
    *ret = (sf_shift){
        .delta_ns = a + (b - a) / 2,
        .ci_low_ns = kth_difference(&d, lo_k, NULL),
        .ci_high_ns = kth_difference(&d, pairs - lo_k + 1, NULL),
        .p_value = p,
    };
}

int sf_shift_estimate(const int64_t *x, size_t m, const int64_t *y, size_t n, double alpha,
                      sf_shift *ret)
{
    if (x == NULL || y == NULL || ret == NULL || m == 0 || n == 0 || !(alpha > 0 && alpha < 1))
        return -EINVAL;
    int64_t *xs = sorted_copy(x, m), *ys = sorted_copy(y, n);
    int64_t *scratch = malloc(SF__SHIFT_SCRATCH_WORDS(m, n) * sizeof *scratch);
    int rc = -ENOMEM;
    if (xs != NULL && ys != NULL && scratch != NULL) {
        double z = sf__normal_two_sided_quantile(alpha);
        sf__shift_estimate_sorted(xs, m, ys, n, z, scratch, ret);
        rc = 0;
    }
    free(xs);
    free(ys);
    free(scratch);
    return rc;
}

int sf__mann_whitney_p(const int64_t *x, size_t m, const int64_t *y, size_t n,
                       double variance_factor, double *ret_p)
{
    if (x == NULL || y == NULL || ret_p == NULL || m == 0 || n == 0)
        return -EINVAL;
    int64_t *xs = sorted_copy(x, m), *ys = sorted_copy(y, n);
    int rc = -ENOMEM;
    if (xs != NULL && ys != NULL) {
        *ret_p = sf__mann_whitney_sorted_p(xs, m, ys, n, variance_factor);
        rc = 0;
    }
    free(xs);
    free(ys);
    return rc;
}

static int cmp_abs_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    uint64_t ax = x < 0 ? 0 - (uint64_t)x : (uint64_t)x, ay = y < 0 ? 0 - (uint64_t)y : (uint64_t)y;
    return (ax > ay) - (ax < ay);
}

static bool same_abs(int64_t a, int64_t b)
{
    return a == b || a == -b;
}

/* The signed-rank p-value of the m nonzero values v, sorted here by |v|. */
static double signed_rank_nonzero(int64_t *v, size_t m, double variance_factor)
{
    qsort(v, m, sizeof *v, cmp_abs_i64);
    double w_plus = 0, ties = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && same_abs(v[j], v[i]))
            j++;
        double t = (double)(j - i), mid_rank = ((double)i + 1 + (double)j) / 2;
        for (size_t q = i; q < j; q++)
            w_plus += v[q] > 0 ? mid_rank : 0;
        ties += t * t * t - t;
        i = j;
    }
    double dm = (double)m;
    double var = (dm * (dm + 1) * (2 * dm + 1) / 24 - ties / 48) * variance_factor;
    if (var <= 0)
        return 1;
    double dev = fabs(w_plus - dm * (dm + 1) / 4) - 0.5; /* continuity correction */
    return dev > 0 ? erfc(dev / sqrt(var) / M_SQRT2) : 1;
}

double sf__signed_rank_p_inplace(int64_t *z, size_t n, double variance_factor)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (z[i] != 0)
            z[m++] = z[i];
    return signed_rank_nonzero(z, m, variance_factor);
}

int sf_signed_rank_p(const int64_t *z, size_t n, double *ret_p)
{
    if (z == NULL || ret_p == NULL)
        return -EINVAL;
    int64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (v == NULL)
        return -ENOMEM;
    memcpy(v, z, n * sizeof *v);
    *ret_p = sf__signed_rank_p_inplace(v, n, 1);
    free(v);
    return 0;
}

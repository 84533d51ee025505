/*
 * Window arithmetic and row checks shared by every assembler of windows
 * (sfd's live assembly, replay's file reader): the index of a step, the
 * range of an index, the bounds a row must meet, and the integer median.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core_internal.h"

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int64_t sf_window_index(int64_t step, int64_t warmup_steps, int64_t window_steps)
{
    if (window_steps <= 0 || step < warmup_steps)
        return -1;
    return floor_div(step - warmup_steps, window_steps);
}

void sf_window_range(int64_t index, int64_t warmup_steps, int64_t window_steps, int64_t *ret_first,
                     int64_t *ret_last)
{
    *ret_first = warmup_steps + index * window_steps;
    *ret_last = *ret_first + window_steps - 1;
}

int sf_row_validate(const sf_row *row, const sf_schema *schema)
{
    if (row == NULL || schema == NULL || row->d == NULL)
        return -EINVAL;
    int r = sf__row_check(row, schema->n_stages);
    if (r == 0)
        r = sf__comm_row_check(row, schema);
    return r < 0 ? r : sf__sync_wait_row_check(row, schema);
}

int sf_distinct_ranks(const sf_row *rows, size_t n_rows)
{
    uint64_t *seen = calloc(SF_MAX_RANKS / 64, sizeof *seen);
    if (seen == NULL)
        return -ENOMEM;
    int n = 0;
    for (size_t i = 0; i < n_rows; i++) {
        uint32_t r = rows[i].rank;
        if (r >= SF_MAX_RANKS)
            continue;
        uint64_t bit = UINT64_C(1) << (r % 64);
        n += !(seen[r / 64] & bit);
        seen[r / 64] |= bit;
    }
    free(seen);
    return n;
}

/* ---- selection ------------------------------------------------------------
 * Medians dominate the report's cost, and a classic quickselect spends most
 * of it on mispredicted branches: whether a value is below the pivot is a
 * coin flip the predictor cannot learn. The partitions below are branchless
 * (Lomuto with an unconditional swap and a store index that advances by the
 * comparison's result), so the loop's only branch is its own bound. */

/* Moves the values of v[0..n) below p (or, with or_equal, not above it) to
 * the front; returns their count. or_equal is the same for the whole loop,
 * so it costs no misprediction. */
static size_t partition(int64_t *v, size_t n, int64_t p, bool or_equal)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t x = v[i];
        v[i] = v[s];
        v[s] = x;
        s += (size_t)((x < p) | (or_equal & (x == p)));
    }
    return s;
}

static int64_t median3(int64_t a, int64_t b, int64_t c)
{
    int64_t lo = a < b ? a : b, hi = a < b ? b : a;
    return c < lo ? lo : c > hi ? hi : c;
}

/* Median of three, or of three medians of three (Tukey's ninther) on large
 * ranges, so sorted, reversed and organ-pipe inputs stay linear. */
static int64_t choose_pivot(const int64_t *v, size_t n)
{
    size_t m = n / 2, e = n - 1;
    if (n < 128)
        return median3(v[0], v[m], v[e]);
    size_t d = n / 8;
    return median3(median3(v[0], v[d], v[2 * d]), median3(v[m - d], v[m], v[m + d]),
                   median3(v[e - 2 * d], v[e - d], v[e]));
}

static void insertion_sort(int64_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        int64_t x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

static void sift_down(int64_t *v, size_t n, size_t i)
{
    for (size_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && v[c + 1] > v[c])
            c++;
        if (v[i] >= v[c])
            return;
        int64_t t = v[i];
        v[i] = v[c];
        v[c] = t;
    }
}

/* The fallback that bounds hostile inputs at O(n log n). */
static void heap_sort(int64_t *v, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(v, n, i);
    for (size_t end = n; end > 1; end--) {
        int64_t t = v[0];
        v[0] = v[end - 1];
        v[end - 1] = t;
        sift_down(v, end - 1, 0);
    }
}

/* After it, values[k] holds the k-th smallest and everything before it is no
 * larger. Each round splits [lo, hi) into below the pivot and the rest. The
 * pivot is a value of the range, so "below" always shrinks the range from
 * above; the rest shrinks it from below unless the pivot is the range's
 * minimum, and only then is the rest split again into equal to and above
 * the pivot (runs of equal values, such as idle stages at zero, end there).
 * A range that has not shrunk fast enough is sorted by heap sort instead. */
static void select_kth(int64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    unsigned rounds = 16;
    for (size_t m = n; m > 1; m >>= 1)
        rounds += 2;
    while (hi - lo > 8) {
        if (rounds-- == 0) {
            heap_sort(v + lo, hi - lo);
            return;
        }
        int64_t p = choose_pivot(v + lo, hi - lo);
        size_t below = lo + partition(v + lo, hi - lo, p, false);
        if (k < below) {
            hi = below;
            continue;
        }
        if (below > lo) {
            lo = below;
            continue;
        }
        size_t equal = below + partition(v + below, hi - below, p, true);
        if (k < equal)
            return;
        lo = equal;
    }
    insertion_sort(v + lo, hi - lo);
}

void sf__select_kth(int64_t *values, size_t n, size_t k)
{
    select_kth(values, n, k);
}

/* The selection's partitions on both sides: below the pivot, equal to it
 * (only where the pivot is the range's minimum, as in select_kth) and above,
 * the smaller side recursed into and the larger looped on, so the stack
 * stays O(log n); a range that splits badly too often is heap sorted. */
static void sort_range(int64_t *v, size_t n, unsigned budget)
{
    while (n > 16) {
        if (budget-- == 0) {
            heap_sort(v, n);
            return;
        }
        int64_t p = choose_pivot(v, n);
        size_t below = partition(v, n, p, false);
        if (below == 0) { /* p is the minimum: its equals are in place after this */
            below = partition(v, n, p, true);
            v += below;
            n -= below;
            continue;
        }
        if (below < n - below) {
            sort_range(v, below, budget);
            v += below;
            n -= below;
        } else {
            sort_range(v + below, n - below, budget);
            n = below;
        }
    }
    insertion_sort(v, n);
}

void sf__sort_i64(int64_t *values, size_t n)
{
    unsigned budget = 16;
    for (size_t m = n; m > 1; m >>= 1)
        budget += 2;
    sort_range(values, n, budget);
}

/* Both medians share one definition: the middle value, or the lower of the
 * two middle ones plus half their difference (rounded toward the lower). */
static int64_t middle_of(int64_t lo, int64_t hi)
{
    return lo + (hi - lo) / 2;
}

int64_t sf_median_i64(int64_t *values, size_t n)
{
    size_t k = n / 2;
    select_kth(values, n, k);
    if (n % 2)
        return values[k];
    int64_t lo = values[0];
    for (size_t i = 1; i < k; i++)
        if (values[i] > lo)
            lo = values[i];
    return middle_of(lo, values[k]);
}

int64_t sf__median_sorted(const int64_t *sorted, size_t n)
{
    size_t k = n / 2;
    return n % 2 ? sorted[k] : middle_of(sorted[k - 1], sorted[k]);
}

int64_t sf__pivot(const int64_t *values, size_t n)
{
    return choose_pivot(values, n);
}

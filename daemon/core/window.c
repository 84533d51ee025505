/*
 * Window arithmetic and row checks shared by every assembler of windows
 * (sfd's live assembly, replay's file reader): the index of a step, the
 * range of an index, the bounds a row must meet, and the integer median.
 */
#include <errno.h>
#include <stdlib.h>

#include <stagefrontier/accounting.h>

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
    if (row->step < 0 || row->rank >= SF_MAX_RANKS)
        return -ERANGE;
    for (uint32_t s = 0; s < schema->n_stages; s++)
        if (row->d[s] < 0 || row->d[s] > SF_MAX_DURATION_NS)
            return -ERANGE;
    if (row->overlap_ns < 0 || row->overlap_ns > SF_MAX_DURATION_NS * SF_MAX_STAGES)
        return -ERANGE;
    if (row->event_state > SF_EVENT_MISSING)
        return -EINVAL;
    if (row->event_state != SF_EVENT_NONE &&
        (row->event_cpu_ns < 0 || row->event_cpu_ns > SF_MAX_DURATION_NS || row->event_gpu_ns < 0 ||
         row->event_gpu_ns > SF_MAX_DURATION_NS))
        return -ERANGE;
    return 0;
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

static void swap_i64(int64_t *a, int64_t *b)
{
    int64_t t = *a;
    *a = *b;
    *b = t;
}

/* Quickselect: after it, values[k] holds the k-th smallest and everything
 * before it is no larger. Median of three keeps sorted input linear. */
static void insertion_sort(int64_t *v, size_t lo, size_t hi)
{
    for (size_t i = lo + 1; i <= hi; i++) {
        int64_t x = v[i];
        size_t j = i;
        while (j > lo && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

static void select_kth(int64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (hi > lo) {
        if (hi - lo < 24) { /* small ranges: sorting beats partitioning */
            insertion_sort(v, lo, hi);
            return;
        }
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < v[lo])
            swap_i64(&v[mid], &v[lo]);
        if (v[hi] < v[lo])
            swap_i64(&v[hi], &v[lo]);
        if (v[hi] < v[mid])
            swap_i64(&v[hi], &v[mid]);
        int64_t pivot = v[mid];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                swap_i64(&v[i], &v[j]);
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

int64_t sf_median_i64(int64_t *values, size_t n)
{
    size_t k = n / 2;
    select_kth(values, n, k);
    if (n % 2)
        return values[k];
    int64_t lo = values[0], hi = values[k];
    for (size_t i = 1; i < k; i++)
        if (values[i] > lo)
            lo = values[i];
    return lo + (hi - lo) / 2;
}

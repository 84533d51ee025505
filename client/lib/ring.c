/*
 * The record ring: a fixed array of step records and their durations,
 * allocated once at open. Push and pop never allocate and never block; a
 * full ring refuses the record (the caller counts the drop).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

int sf__ring_init(struct sf__ring *r, uint32_t cap, uint32_t n_stages)
{
    memset(r, 0, sizeof *r);
    r->recs = calloc(cap, sizeof *r->recs);
    r->durations = calloc((size_t)cap * n_stages, sizeof *r->durations);
    if (r->recs == NULL || r->durations == NULL) {
        sf__ring_free(r);
        return -ENOMEM;
    }
    r->cap = cap;
    r->n_stages = n_stages;
    return 0;
}

void sf__ring_free(struct sf__ring *r)
{
    if (r == NULL)
        return;
    free(r->recs);
    free(r->durations);
    memset(r, 0, sizeof *r);
}

struct sf__record *sf__ring_reserve(struct sf__ring *r, int64_t **ret_durations)
{
    if (r->count == r->cap)
        return NULL;
    *ret_durations = r->durations + (size_t)r->head * r->n_stages;
    return &r->recs[r->head];
}

void sf__ring_commit(struct sf__ring *r)
{
    r->head = r->head + 1 == r->cap ? 0 : r->head + 1;
    r->count++;
}

struct sf__record *sf__ring_peek(const struct sf__ring *r, uint32_t i, int64_t **ret_durations)
{
    uint32_t idx = (r->head + r->cap - r->count + i) % r->cap;
    *ret_durations = r->durations + (size_t)idx * r->n_stages;
    return &r->recs[idx];
}

void sf__ring_consume(struct sf__ring *r, uint32_t n)
{
    r->count -= n < r->count ? n : r->count;
}

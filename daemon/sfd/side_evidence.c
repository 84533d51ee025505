/*
 * NCCL side evidence in sfd: files validated NcclBatch aggregates by (segment,
 * window) with hard bounds, and hands a report's window to the formats in
 * daemon/report/side_format.c (JSON and the human view). It never touches the
 * accounting, the windows' rows or any socket; a batch only ever adds to
 * counters.
 */
#include "side_evidence.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.pb-c.h"
#include "side_format.h"

struct side_window {
    bool used;
    uint32_t segment;
    int64_t index;
    uint64_t seq; /* age, for eviction */
    uint64_t batches, dropped_events;
    uint32_t n_comms, n_rows;
    struct sf_side_comm comms[SFD_SIDE_COMMS];
    struct sf_side_row *rows; /* [SFD_SIDE_ROWS], allocated with the window */
};

struct sfd_side {
    struct side_window win[SFD_SIDE_WINDOWS];
    uint64_t seq;
    uint32_t rows_total;
    struct sfd_side_stats stats;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Names come from clients: anything outside printable ASCII becomes '?',
 * so the report JSON (UTF-8 only) and the terminal view stay well formed. */
static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
    dst[n] = '\0';
}

static void window_clear(struct sfd_side *side, struct side_window *w)
{
    side->rows_total -= w->n_rows;
    free(w->rows);
    memset(w, 0, sizeof *w);
}

/* The window for (segment, index): found, or a free slot, or the oldest one
 * evicted (counted). NULL only when memory runs out. */
static struct side_window *window_get(struct sfd_side *side, uint32_t segment, int64_t index)
{
    struct side_window *free_slot = NULL, *oldest = NULL;
    for (size_t i = 0; i < SFD_SIDE_WINDOWS; i++) {
        struct side_window *w = &side->win[i];
        if (w->used && w->segment == segment && w->index == index)
            return w;
        if (!w->used && !free_slot)
            free_slot = w;
        if (w->used && (!oldest || w->seq < oldest->seq))
            oldest = w;
    }
    if (!free_slot) {
        window_clear(side, oldest);
        side->stats.windows_evicted++;
        free_slot = oldest;
    }
    free_slot->rows = calloc(SFD_SIDE_ROWS, sizeof *free_slot->rows);
    if (!free_slot->rows)
        return NULL;
    free_slot->used = true;
    free_slot->segment = segment;
    free_slot->index = index;
    free_slot->seq = ++side->seq;
    return free_slot;
}

static int comm_get(struct side_window *w, const struct Stagefrontier__NcclBatch *b)
{
    char name[SF_SIDE_COMM_MAX + 1];
    uint64_t hash = b->has_comm_hash ? b->comm_hash : 0;
    copy_str(name, sizeof name, b->comm_name);
    for (uint32_t i = 0; i < w->n_comms; i++)
        if (w->comms[i].hash == hash && strcmp(w->comms[i].name, name) == 0)
            return (int)i;
    if (w->n_comms == SFD_SIDE_COMMS)
        return -ENOSPC;
    struct sf_side_comm *c = &w->comms[w->n_comms];
    memcpy(c->name, name, sizeof name);
    c->hash = hash;
    c->ranks = b->has_comm_ranks ? b->comm_ranks : 0;
    c->nodes = b->has_comm_nodes ? b->comm_nodes : 0;
    return (int)w->n_comms++;
}

/* The row key of an aggregate, its names sanitized as they will be stored. */
static void row_key(struct sf_side_row *k, int comm, const char *stage,
                    const Stagefrontier__NcclAggregate *a)
{
    memset(k, 0, sizeof *k);
    k->comm = (uint16_t)comm;
    copy_str(k->stage, sizeof k->stage, stage);
    copy_str(k->coll, sizeof k->coll, a->collective);
    copy_str(k->dtype, sizeof k->dtype, a->datatype);
    copy_str(k->algo, sizeof k->algo, a->algorithm);
    copy_str(k->proto, sizeof k->proto, a->protocol);
    k->bucket = a->has_size_bucket ? a->size_bucket : 0;
}

static bool same_key(const struct sf_side_row *r, const struct sf_side_row *k)
{
    return r->comm == k->comm && r->bucket == k->bucket && !strcmp(r->stage, k->stage) &&
           !strcmp(r->coll, k->coll) && !strcmp(r->dtype, k->dtype) && !strcmp(r->algo, k->algo) &&
           !strcmp(r->proto, k->proto);
}

/* Ranks of a node report the same keys, so rows are summed over ranks. */
static int row_add(struct sfd_side *side, struct side_window *w, int comm, const char *stage,
                   const Stagefrontier__NcclAggregate *a)
{
    struct sf_side_row k, *r = NULL;
    row_key(&k, comm, stage, a);
    for (uint32_t i = 0; i < w->n_rows && !r; i++)
        if (same_key(&w->rows[i], &k))
            r = &w->rows[i];
    if (!r) {
        if (w->n_rows == SFD_SIDE_ROWS || side->rows_total >= SFD_SIDE_ROWS_PER_JOB)
            return -ENOSPC;
        r = &w->rows[w->n_rows++];
        side->rows_total++;
        *r = k;
    }
    r->count = sat_add(r->count, a->has_count ? a->count : 0);
    r->bytes = sat_add(r->bytes, a->has_bytes ? a->bytes : 0);
    r->gpu_ns = sat_add(r->gpu_ns, a->has_gpu_time_ns ? a->gpu_time_ns : 0);
    r->timed = sat_add(r->timed, a->has_timed_count ? a->timed_count : 0);
    return 0;
}

int sfd_side_add(struct sfd_side **side, const sf_gates *gates, uint32_t segment, uint32_t rank,
                 const struct Stagefrontier__NcclBatch *b)
{
    struct sfd_side *s = *side;
    struct side_window *w;
    const char *stage = b->enclosing_stage ? b->enclosing_stage : "";
    int64_t index;
    int comm;

    (void)rank; /* rows are node sums; the rank is not needed for them */
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -ENOMEM;
        *side = s;
    }
    s->stats.batches++;
    index = sf_window_index(b->step, gates->warmup_steps, gates->window_steps);
    if (index < 0) {
        s->stats.warmup_batches++;
        return 0;
    }
    w = window_get(s, segment, index);
    if (!w)
        return -ENOMEM;
    w->batches++;
    w->dropped_events = sat_add(w->dropped_events, b->has_dropped_events ? b->dropped_events : 0);
    comm = comm_get(w, b);
    if (comm < 0) {
        s->stats.rows_refused += b->n_aggregates;
        return 0;
    }
    for (size_t i = 0; i < b->n_aggregates; i++)
        if (row_add(s, w, comm, stage, b->aggregates[i]) < 0)
            s->stats.rows_refused++;
    return 0;
}

void sfd_side_free(struct sfd_side *side)
{
    if (!side)
        return;
    for (size_t i = 0; i < SFD_SIDE_WINDOWS; i++)
        free(side->win[i].rows);
    free(side);
}

void sfd_side_get_stats(const struct sfd_side *side, struct sfd_side_stats *ret)
{
    if (side)
        *ret = side->stats;
    else
        memset(ret, 0, sizeof *ret);
}

static const struct side_window *window_of(const struct sfd_side *side, const sf_report *r)
{
    if (!side)
        return NULL;
    for (size_t i = 0; i < SFD_SIDE_WINDOWS; i++) {
        const struct side_window *w = &side->win[i];
        if (w->used && w->segment == r->meta.segment && w->index == r->meta.index)
            return w;
    }
    return NULL;
}

/* The report's window as the report formats see it: false when it has no
 * side evidence. */
static bool view_of(const struct sfd_side *side, const sf_report *report, struct sf_side_view *ret)
{
    const struct side_window *w = window_of(side, report);
    if (!w || w->n_rows == 0)
        return false;
    *ret = (struct sf_side_view){.batches = w->batches,
                                 .dropped_events = w->dropped_events,
                                 .n_comms = w->n_comms,
                                 .n_rows = w->n_rows,
                                 .comms = w->comms,
                                 .rows = w->rows};
    return true;
}

int sfd_side_annotate_json(const struct sfd_side *side, const sf_report *report, json_t *window)
{
    struct sf_side_view v;
    return view_of(side, report, &v) ? sf_side_annotate_json(&v, window) : 0;
}

int sfd_side_write_text(const struct sfd_side *side, const sf_report *report, FILE *out)
{
    struct sf_side_view v;
    return view_of(side, report, &v) ? sf_side_write_text(&v, out) : 0;
}

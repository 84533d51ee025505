/*
 * Batching: packs queued step records into one RecordBatch datagram in a
 * buffer allocated at open, and decides when to send (batch full, or the
 * flush interval passed, judged on the clock the caller already read).
 * At most one sendmsg per batch; never blocks, never allocates after open.
 */
#include <errno.h>
#include <stdlib.h>

#include "client_internal.h"

/* Worst-case encoded bytes of one StepRecord with n stages (tags, varints,
 * the packed durations, the optional event) plus its length prefix. */
static size_t record_bound(uint32_t n, uint32_t n_sync)
{
    return 16 + 6 + (size_t)n * 10 + 11 + 6 + 6 + 11 + 40 + 6 + (size_t)n_sync * 61;
}

int sf__batch_alloc(sf_client *c)
{
    uint32_t n_sync = c->schema.n_sync;
    size_t fit = (SF__MAX_DATAGRAM - 128) / record_bound(c->n_stages, n_sync);
    if (c->batch_records > fit)
        c->batch_records = (uint32_t)fit;
    c->sendbuf = malloc(SF__MAX_DATAGRAM);
    c->hellobuf = malloc(SF__MAX_DATAGRAM);
    c->pb_recs = calloc(c->batch_records, sizeof *c->pb_recs);
    c->pb_rec_ptrs = calloc(c->batch_records, sizeof *c->pb_rec_ptrs);
    c->pb_events = calloc(c->batch_records, sizeof *c->pb_events);
    c->pb_arrivals = calloc((size_t)c->batch_records * n_sync + 1, sizeof *c->pb_arrivals);
    c->pb_arrival_ptrs = calloc((size_t)c->batch_records * n_sync + 1, sizeof *c->pb_arrival_ptrs);
    if (!c->sendbuf || !c->hellobuf || !c->pb_recs || !c->pb_rec_ptrs || !c->pb_events ||
        !c->pb_arrivals || !c->pb_arrival_ptrs)
        return -ENOMEM;
    for (size_t i = 0; i < (size_t)c->batch_records * n_sync; i++)
        stagefrontier__arrival__init(&c->pb_arrivals[i]);
    for (uint32_t i = 0; i < c->batch_records; i++) {
        stagefrontier__step_record__init(&c->pb_recs[i]);
        stagefrontier__event_sample__init(&c->pb_events[i]);
        c->pb_rec_ptrs[i] = &c->pb_recs[i];
    }
    return 0;
}

void sf__batch_free(sf_client *c)
{
    free(c->sendbuf);
    free(c->hellobuf);
    free(c->pb_recs);
    free(c->pb_rec_ptrs);
    free(c->pb_events);
    free(c->pb_arrivals);
    free(c->pb_arrival_ptrs);
    c->pb_arrivals = NULL;
    c->pb_arrival_ptrs = NULL;
    c->sendbuf = c->hellobuf = NULL;
    c->pb_recs = NULL;
    c->pb_rec_ptrs = NULL;
    c->pb_events = NULL;
}

static void note_drop_step(sf_client *c, int64_t step)
{
    if (!c->drop_range_valid) {
        c->drop_first = c->drop_last = step;
        c->drop_range_valid = true;
    } else {
        c->drop_first = step < c->drop_first ? step : c->drop_first;
        c->drop_last = step > c->drop_last ? step : c->drop_last;
    }
}

void sf__batch_note_drop(sf_client *c, int64_t step)
{
    c->records_dropped++;
    note_drop_step(c, step);
}

static void note_drops(sf_client *c, uint32_t n)
{
    int64_t *d;
    for (uint32_t i = 0; i < n; i++)
        note_drop_step(c, sf__ring_peek(&c->ring, i, &d)->step);
    c->records_dropped += n;
    sf__ring_consume(&c->ring, n);
}

void sf__batch_drop_all(sf_client *c)
{
    note_drops(c, c->ring.count);
}

/* The record's marked arrivals, from the values after its durations. */
static void fill_arrivals(sf_client *c, uint32_t i, const int64_t *d, Stagefrontier__StepRecord *p)
{
    uint32_t n_sync = c->schema.n_sync;
    Stagefrontier__Arrival **ptrs = &c->pb_arrival_ptrs[(size_t)i * n_sync];
    p->n_arrivals = 0;
    p->arrivals = ptrs;
    for (uint32_t j = 0; j < n_sync; j++) {
        if (d[c->n_stages + j] < 0)
            continue;
        Stagefrontier__Arrival *a = &c->pb_arrivals[(size_t)i * n_sync + j];
        const int64_t *marks = d + c->n_stages;
        a->stage = c->schema.sync_ids[j];
        a->own_ns = marks[j];
        a->has_issue_ns = marks[n_sync + j] >= 0, a->issue_ns = marks[n_sync + j];
        a->has_complete_ns = marks[2 * n_sync + j] >= 0, a->complete_ns = marks[2 * n_sync + j];
        a->has_wait_ns = a->has_waits = marks[3 * n_sync + j] >= 0;
        a->wait_ns = marks[3 * n_sync + j];
        a->waits = (uint32_t)marks[4 * n_sync + j];
        ptrs[p->n_arrivals++] = a;
    }
}

/* Points the preallocated protobuf records at the ring; no copy. */
static uint32_t fill_records(sf_client *c)
{
    uint32_t n = c->ring.count < c->batch_records ? c->ring.count : c->batch_records;
    for (uint32_t i = 0; i < n; i++) {
        int64_t *d;
        const struct sf__record *r = sf__ring_peek(&c->ring, i, &d);
        Stagefrontier__StepRecord *p = &c->pb_recs[i];
        p->step = r->step;
        p->n_durations_ns = c->n_stages;
        p->durations_ns = d;
        p->has_step_wall_ns = 1, p->step_wall_ns = r->wall_ns;
        p->has_violations = r->violations != 0, p->violations = r->violations;
        p->has_flags = r->flags != 0, p->flags = r->flags;
        p->has_overlap_ns = r->overlap_ns != 0, p->overlap_ns = r->overlap_ns;
        fill_arrivals(c, i, d, p);
        p->event = NULL;
        if (r->event.state != 0) {
            Stagefrontier__EventSample *e = &c->pb_events[i];
            e->state = r->event.state == SF__EVENT_READY
                           ? STAGEFRONTIER__EVENT_SAMPLE__STATE__READY
                           : STAGEFRONTIER__EVENT_SAMPLE__STATE__MISSING;
            e->has_cpu_ns = 1, e->cpu_ns = r->event.cpu_ns;
            e->has_gpu_ns = r->event.state == SF__EVENT_READY, e->gpu_ns = r->event.gpu_ns;
            p->event = e;
        }
    }
    return n;
}

int sf__batch_send_one(sf_client *c, int64_t now_ns)
{
    c->last_flush_ns = now_ns;
    if (!sf__transport_connected(&c->tr)) {
        sf__transport_connect(&c->tr, now_ns);
        if (!sf__transport_connected(&c->tr)) {
            /* Nobody to send to: drop and count rather than hold stale steps. */
            sf__batch_drop_all(c);
            return 0;
        }
    }
    /* The control channel rides on the flush: one non-blocking read. */
    sf__control_exchange(c, now_ns);
    uint32_t n = fill_records(c);
    if (n == 0)
        return 0;
    Stagefrontier__RecordBatch b = STAGEFRONTIER__RECORD_BATCH__INIT;
    b.n_records = n;
    b.records = c->pb_rec_ptrs;
    b.schema_hash = c->schema.hash;
    b.has_dropped_total = 1, b.dropped_total = c->records_dropped;
    if (c->drop_range_valid) {
        b.has_dropped_first_step = 1, b.dropped_first_step = c->drop_first;
        b.has_dropped_last_step = 1, b.dropped_last_step = c->drop_last;
    }
    b.has_violations_total = 1, b.violations_total = c->violations;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
    m.batch = &b;
    int r = sf__transport_send_message(&c->tr, &m, c->sendbuf, SF__MAX_DATAGRAM, now_ns);
    if (r == -EAGAIN) {
        c->next_send_ns = now_ns + SF__EAGAIN_RETRY_NS;
        return 0; /* kept: the ring drops new steps if this lasts */
    }
    if (r < 0) {
        note_drops(c, n);
        return 0; /* the daemon went away; reconnect after the backoff */
    }
    int64_t *d;
    c->tr.last_sent_step = sf__ring_peek(&c->ring, n - 1, &d)->step;
    c->tr.have_last_sent_step = true;
    sf__ring_consume(&c->ring, n);
    c->records_sent += n;
    c->batches_sent++;
    c->drop_range_valid = false;
    c->next_send_ns = 0;
    return 0;
}

void sf__batch_maybe_send(sf_client *c, int64_t now_ns)
{
    if (sf__fork_check(c))
        return;
    if (now_ns < c->next_send_ns)
        return;
    if (c->ring.count >= c->batch_records || now_ns - c->last_flush_ns >= c->flush_interval_ns)
        sf__batch_send_one(c, now_ns);
}

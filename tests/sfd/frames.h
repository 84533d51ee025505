/*
 * Test helper: packed client frames (a batch of records of six stages),
 * built with protobuf-c as a client builds them. Header-only.
 */
#ifndef SF_TEST_FRAMES_H
#define SF_TEST_FRAMES_H

#include <stdint.h>
#include <stdlib.h>

#include "ingest.pb-c.h"

/* The drop report a test batch carries: total 0 leaves it out. */
struct frame_drops {
    uint64_t total;
    int64_t first_step, last_step; /* sent when last_step >= first_step */
};

/* A packed batch of n records of 6 stages, steps from first, with the
 * given drop report (NULL: none). */
static inline uint8_t *batch_frame_dropping(size_t n, int64_t first,
                                            const struct frame_drops *drops, size_t *ret_len)
{
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    Stagefrontier__RecordBatch b = STAGEFRONTIER__RECORD_BATCH__INIT;
    Stagefrontier__StepRecord *recs = calloc(n, sizeof(*recs));
    Stagefrontier__StepRecord **ptrs = calloc(n, sizeof(*ptrs));
    int64_t *d = calloc(n * 6, sizeof(*d));
    for (size_t i = 0; i < n; i++) {
        stagefrontier__step_record__init(&recs[i]);
        recs[i].step = first + (int64_t)i;
        for (size_t k = 0; k < 6; k++)
            d[i * 6 + k] = (int64_t)(1000 * k + i);
        recs[i].n_durations_ns = 6;
        recs[i].durations_ns = &d[i * 6];
        recs[i].has_overlap_ns = i % 2;
        recs[i].overlap_ns = (int64_t)i;
        ptrs[i] = &recs[i];
    }
    b.n_records = n;
    b.records = ptrs;
    b.schema_hash = 0x1234;
    if (drops != NULL && drops->total > 0) {
        b.has_dropped_total = 1, b.dropped_total = drops->total;
        if (drops->last_step >= drops->first_step) {
            b.has_dropped_first_step = 1, b.dropped_first_step = drops->first_step;
            b.has_dropped_last_step = 1, b.dropped_last_step = drops->last_step;
        }
    }
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH;
    m.batch = &b;
    size_t len = stagefrontier__client_message__get_packed_size(&m);
    uint8_t *buf = malloc(len);
    stagefrontier__client_message__pack(&m, buf);
    free(recs);
    free(ptrs);
    free(d);
    *ret_len = len;
    return buf;
}

/* A packed batch of n records of 6 stages, steps from first. */
static inline uint8_t *batch_frame(size_t n, int64_t first, size_t *ret_len)
{
    return batch_frame_dropping(n, first, NULL, ret_len);
}

#endif

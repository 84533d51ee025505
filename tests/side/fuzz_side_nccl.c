/*
 * Fuzz target: sfd's NCCL side-evidence path. The input is a sequence of
 * frames (2-byte little-endian length, then a datagram); each goes through
 * the ingest decoder and validator exactly as sfd runs them, is filed by
 * sfd_side_add, and the store is rendered as report JSON and text. A batch's
 * enqueue point is kept against a schema whose backward is synchronizing and
 * splits a record of its step, as ingest does. One store per input, freed at
 * the end: bounds, eviction and leaks are all exercised.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ingest.pb-c.h"
#include "sfd.h"
#include "enqueue_points.h"
#include "side_evidence.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void render(const struct sfd_side *side, int64_t index, uint32_t segment)
{
    sf_report rep = {.meta = {.index = index, .segment = segment}};
    json_t *w = json_pack("{s:[{s:s},{s:s}]}", "stages", "name", "model.backward_cpu_wall", "name",
                          "model.fwd_loss_cpu_wall");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (w) {
        sfd_side_annotate_json(side, &rep, w);
        free(json_dumps(w, JSON_COMPACT));
        json_decref(w);
    }
    if (f) {
        sfd_side_write_text(side, &rep, f);
        fclose(f);
    }
    free(buf);
}

/* Keeps the point and splits a record of its step with it, as ingest.c. */
static void enqueue_point(struct sfd_enq_points **points, const sf_schema *schema,
                          const Stagefrontier__NcclBatch *b)
{
    static int64_t durations[6] = {1000, 500000, 300000, 800000, 20000, 0};
    Stagefrontier__StepRecord rec = STAGEFRONTIER__STEP_RECORD__INIT;
    int64_t fallback[SF_MAX_STAGES], kernel[SF_MAX_STAGES], d[SF_MAX_STAGES];
    uint32_t flags = 0, bad = 0;
    enum sfd_reject why;
    int stage = sfd_enq_sync_stage(schema, b->enclosing_stage ? b->enclosing_stage : "");

    if (stage < 0 || sfd_enq_note(points, 0, b->step, (uint32_t)stage, (int64_t)b->last_enqueue_ns,
                                  b->has_kernel_start_ns ? (int64_t)b->kernel_start_ns : -1) < 0)
        return;
    for (size_t i = 0; i < 6; i++)
        fallback[i] = kernel[i] = -1;
    sfd_enq_fill(*points, schema, 0, b->step, fallback);
    sfd_enq_fill_kernel(*points, schema, 0, b->step, kernel);
    for (size_t i = 0; i < 6; i++)
        if (kernel[i] >= 0 && kernel[i] < fallback[i])
            abort(); /* validated: a kernel never starts before its enqueue */
    rec.step = b->step;
    rec.n_durations_ns = 6;
    rec.durations_ns = durations;
    sfd_record_split(&rec, schema, fallback, d, &flags, &bad, &why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sfd_limits lim = {.max_ranks = SF_MAX_RANKS, .frame_max_bytes = 1u << 16};
    static const char *names[6] = {"data.next_wait",          "model.fwd_loss_cpu_wall",
                                   "model.backward_cpu_wall", "optim.step_cpu_wall",
                                   "callbacks.cpu_wall",      "residual"};
    struct sfd_side *side = NULL;
    struct sfd_enq_points *points = NULL;
    sf_schema schema;
    sf_gates gates;
    size_t off = 0;

    if (sf_schema_init_sync(&schema, 1, 6, names, NULL, 1, UINT64_C(1) << 2) < 0)
        return 0;

    sf_gates_default(&gates);
    gates.warmup_steps = 2;
    gates.window_steps = 4;
    while (off + 2 <= size) {
        size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;
        Stagefrontier__ClientMessage *m;
        enum sfd_reject why;
        off += 2;
        if (len > size - off)
            len = size - off;
        if (sfd_message_decode(data + off, len, &lim, NULL, &m, &why) == 0) {
            if (m->body_case == STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL &&
                sfd_validate_nccl(m->nccl, &why) == 0) {
                uint32_t segment = (uint32_t)(m->nccl->step & 1);
                if (m->nccl->has_last_enqueue_ns)
                    enqueue_point(&points, &schema, m->nccl);
                sfd_side_add(&side, &gates, segment, 0, m->nccl);
                render(side, sf_window_index(m->nccl->step, gates.warmup_steps, gates.window_steps),
                       segment);
            }
            sfd_message_free(m, NULL);
        }
        off += len;
    }
    sfd_side_free(side);
    sfd_enq_free(points);
    sf_schema_clear(&schema);
    return 0;
}

/*
 * The NCCL side evidence formats: a window's collectives as the report JSON's
 * "side_evidence" object and per-stage "nccl" totals, and as the lines the
 * human view appends. It formats what sfd filed; it never files, bounds or
 * reaches sfd.
 */
#include "side_format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- JSON ----------------------------------------------------------------- */

static json_t *row_json(const struct sf_side_view *w, const struct sf_side_row *r)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:I}", "communicator",
                     w->comms[r->comm].name, "collective", r->coll, "datatype", r->dtype,
                     "algorithm", r->algo, "protocol", r->proto, "size_bucket",
                     (json_int_t)r->bucket, "count",
                     (json_int_t)(r->count > INT64_MAX ? INT64_MAX : r->count), "bytes",
                     (json_int_t)(r->bytes > INT64_MAX ? INT64_MAX : r->bytes), "gpu_time_s",
                     r->timed ? json_real((double)r->gpu_ns / 1e9) : json_null(), "timed_count",
                     (json_int_t)(r->timed > INT64_MAX ? INT64_MAX : r->timed));
}

/* Totals of the rows a stage enclosed. */
struct totals {
    uint64_t count, bytes, gpu_ns, timed;
};

static struct totals stage_totals(const struct sf_side_view *w, const char *stage)
{
    struct totals t = {0};
    for (uint32_t i = 0; i < w->n_rows; i++) {
        const struct sf_side_row *r = &w->rows[i];
        if (strcmp(r->stage, stage))
            continue;
        t.count = sat_add(t.count, r->count);
        t.bytes = sat_add(t.bytes, r->bytes);
        t.gpu_ns = sat_add(t.gpu_ns, r->gpu_ns);
        t.timed = sat_add(t.timed, r->timed);
    }
    return t;
}

static json_t *totals_json(const struct totals *t)
{
    return json_pack("{s:I, s:I, s:o, s:I}", "count",
                     (json_int_t)(t->count > INT64_MAX ? INT64_MAX : t->count), "bytes",
                     (json_int_t)(t->bytes > INT64_MAX ? INT64_MAX : t->bytes), "gpu_time_s",
                     t->timed ? json_real((double)t->gpu_ns / 1e9) : json_null(), "timed_count",
                     (json_int_t)(t->timed > INT64_MAX ? INT64_MAX : t->timed));
}

static json_t *side_json(const struct sf_side_view *w)
{
    json_t *comms = json_array(), *rows = json_array();
    if (!comms || !rows)
        goto fail;
    for (uint32_t i = 0; i < w->n_comms; i++) {
        char hash[19];
        snprintf(hash, sizeof hash, "0x%016" PRIx64, w->comms[i].hash);
        if (json_array_append_new(comms,
                                  json_pack("{s:s, s:s, s:I, s:I}", "name", w->comms[i].name,
                                            "hash", hash, "ranks", (json_int_t)w->comms[i].ranks,
                                            "nodes", (json_int_t)w->comms[i].nodes)) < 0)
            goto fail;
    }
    for (uint32_t i = 0; i < w->n_rows; i++) {
        json_t *r = row_json(w, &w->rows[i]);
        if (!r || json_object_set_new(r, "enclosing_stage", json_string(w->rows[i].stage)) < 0 ||
            json_array_append_new(rows, r) < 0)
            goto fail;
    }
    return json_pack("{s:{s:I, s:I, s:o, s:o}}", "nccl", "batches",
                     (json_int_t)(w->batches > INT64_MAX ? INT64_MAX : w->batches),
                     "dropped_events",
                     (json_int_t)(w->dropped_events > INT64_MAX ? INT64_MAX : w->dropped_events),
                     "communicators", comms, "collectives", rows);
fail:
    json_decref(comms);
    json_decref(rows);
    return NULL;
}

int sf_side_annotate_json(const struct sf_side_view *w, json_t *window)
{
    json_t *stages, *o;
    size_t i;

    if (w->n_rows == 0)
        return 0;
    o = side_json(w);
    if (!o || json_object_set_new(window, "side_evidence", o) < 0)
        return -ENOMEM;
    stages = json_object_get(window, "stages");
    json_array_foreach(stages, i, o)
    {
        const char *name = json_string_value(json_object_get(o, "name"));
        struct totals t;
        if (!name)
            continue;
        t = stage_totals(w, name);
        if (t.count && json_object_set_new(o, "nccl", totals_json(&t)) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* ---- the human view -------------------------------------------------------- */

static void write_rows_of(const struct sf_side_view *w, const char *stage, FILE *out)
{
    for (uint32_t i = 0; i < w->n_rows; i++) {
        const struct sf_side_row *r = &w->rows[i];
        if (strcmp(r->stage, stage))
            continue;
        fprintf(out, "    %-14s %-13s %s/%s  2^%u B  x%" PRIu64 "  %.1f MiB", r->coll, r->dtype,
                r->algo[0] ? r->algo : "-", r->proto[0] ? r->proto : "-", r->bucket, r->count,
                (double)r->bytes / (1024.0 * 1024.0));
        if (r->timed)
            fprintf(out, "  gpu %.3f ms over %" PRIu64 " timed", (double)r->gpu_ns / 1e6, r->timed);
        else
            fprintf(out, "  gpu n/a");
        fprintf(out, "  [%s, %u ranks, %u nodes]\n",
                w->comms[r->comm].name[0] ? w->comms[r->comm].name : "(unnamed)",
                w->comms[r->comm].ranks, w->comms[r->comm].nodes);
    }
}

/* Whether a row before row i was in the same stage: each stage is listed once. */
static bool stage_listed(const struct sf_side_view *w, uint32_t i)
{
    for (uint32_t j = 0; j < i; j++)
        if (!strcmp(w->rows[j].stage, w->rows[i].stage))
            return true;
    return false;
}

int sf_side_write_text(const struct sf_side_view *w, FILE *out)
{
    if (w->n_rows == 0)
        return 0;
    fprintf(out, "NCCL side evidence (collectives enqueued; GPU time from kernel timestamps"
                 " where NCCL offers them):\n");
    if (w->dropped_events)
        fprintf(out, "  plugin dropped %" PRIu64 " events (pools full)\n", w->dropped_events);
    for (uint32_t i = 0; i < w->n_rows; i++) {
        const char *stage = w->rows[i].stage;
        if (stage_listed(w, i))
            continue;
        fprintf(out, "  in %s:\n", stage[0] ? stage : "(no enclosing stage)");
        write_rows_of(w, stage, out);
    }
    return ferror(out) ? -EIO : 0;
}

/*
 * The job's live verdict (docs/LIVE.md): the core's sequential test
 * (stagefrontier/live.h) made for the job's shape at its first closed
 * window, its baseline taken from the complete steps of the job's first
 * eligible windows, then fed each step as its last row arrives. Starts and
 * ends are events: kept in a ring for `sfctl events` and written to the
 * history. Only single-node, dense jobs: the test needs every rank's rows.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "sfd.h"

static void drop_test(struct sfd_verdict *v)
{
    sf_live_free(v->test);
    free(v->rows);
    v->test = NULL;
    v->rows = NULL;
}

/* A test for the job's shape; the old one goes with its shape. */
static int ensure_test(struct sfd_job *job, const sf_summary *summary)
{
    struct sfd_verdict *v = &job->verdict;
    if (v->test != NULL && v->schema_hash == summary->schema.hash &&
        v->world_size == summary->meta.world_size)
        return 0;
    drop_test(v);
    uint32_t w = summary->meta.world_size;
    if (w == 0 || w > job->gates.dense_max_ranks || summary->dense == NULL)
        return -ENOTSUP;
    v->rows = calloc((size_t)w * summary->schema.n_stages, sizeof(*v->rows));
    int r = v->rows ? sf_live_new(&summary->schema, w, &job->sfd->cfg.live, &v->test) : -ENOMEM;
    if (r < 0) {
        drop_test(v);
        return r;
    }
    v->schema_hash = summary->schema.hash;
    v->world_size = w;
    return 0;
}

void sfd_verdict_window(struct sfd_job *job, const sf_summary *summary, const sf_report *report)
{
    if (!sfd_cluster_is_standalone(job->sfd) || ensure_test(job, summary) < 0)
        return;
    struct sfd_verdict *v = &job->verdict;
    if (sf_live_calibrated(v->test) || !sf_reference_eligible(report))
        return;
    if (sf_live_calibrate_summary(v->test, summary) == 1)
        sfd_log(SFD_LOG_INFO, job->id, "live verdict: baseline of %u steps, %u cells tested",
                job->sfd->cfg.live.calibration_steps, sf_live_cells(v->test));
}

static json_t *stage_or_null(const struct sfd_job *job, uint32_t k)
{
    return k < job->schema.n_stages ? json_string(job->schema.names[k]) : json_null();
}

static json_t *verdict_object(const struct sfd_job *job, const sf_live_verdict *v)
{
    json_t *evidence = json_object();
    json_object_set_new(evidence, "test", json_string(v->arrival ? "arrival" : "own_work"));
    json_object_set_new(evidence, "cusum_sigmas", json_real(v->statistic));
    json_object_set_new(evidence, "threshold_sigmas", json_real(v->threshold));
    json_object_set_new(evidence, "baseline_s", json_real((double)v->baseline_ns / 1e9));
    json_object_set_new(evidence, "sigma_s", json_real((double)v->sigma_ns / 1e9));
    json_object_set_new(evidence, "steps", json_integer(v->cell_steps));
    return json_pack(
        "{s:s, s:o, s:o, s:o, s:I, s:I, s:I, s:f, s:o}", "kind", sf_live_kind_name(v->kind), "rank",
        v->rank == SF_NO_RANK ? json_null() : json_integer(v->rank), "stage",
        stage_or_null(job, v->stage), "sync_stage", stage_or_null(job, v->sync_stage), "since_step",
        (json_int_t)v->since_step, "detected_step", (json_int_t)v->detected_step, "detected_at",
        (json_int_t)v->detected_at_ms, "effect_s", v->effect_s, "evidence", evidence);
}

static void record_event(struct sfd_job *job, bool start, int64_t step, int64_t at_ms,
                         const sf_live_verdict *lv)
{
    struct sfd_verdict *v = &job->verdict;
    struct sfd_verdict_event *e = &v->events[v->seq % SFD_VERDICT_EVENTS];
    *e = (struct sfd_verdict_event){
        .seq = ++v->seq, .start = start, .at_ms = at_ms, .step = step, .v = *lv};
    job->sfd->prom_dirty = true;
    char *text = NULL;
    json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:o}", "seq", (json_int_t)e->seq, "event",
                          start ? "start" : "end", "step", (json_int_t)step, "at",
                          (json_int_t)at_ms, "verdict", verdict_object(job, lv));
    if (o != NULL && (text = json_dumps(o, JSON_COMPACT)) != NULL)
        sfd_history_put_event(job->sfd, job, e->seq, text);
    free(text);
    json_decref(o);
    if (start)
        sfd_log(SFD_LOG_NOTICE, job->id, "live verdict at step %lld: %s, rank %d, stage %s",
                (long long)step, sf_live_kind_name(lv->kind),
                lv->rank == SF_NO_RANK ? -1 : (int)lv->rank,
                lv->stage < job->schema.n_stages ? job->schema.names[lv->stage] : "-");
    else
        sfd_log(SFD_LOG_NOTICE, job->id, "live verdict ended at step %lld", (long long)step);
}

/* Copies step t's rows, linked in rank order, into v->rows: false unless
 * they are exactly ranks 0..world_size-1. */
static bool gather(struct sfd_job *job, const struct sfd_window *w, size_t t)
{
    struct sfd_verdict *v = &job->verdict;
    uint32_t S = job->schema.n_stages, r = 0;
    for (uint32_t i = w->order.head[t]; i != UINT32_MAX; i = w->order.next[i], r++) {
        if (r >= v->world_size || w->rows.rec[i].rank != r)
            return false;
        memcpy(v->rows + (size_t)r * S, w->rows.d + (size_t)i * S, S * sizeof(int64_t));
    }
    return r == v->world_size;
}

void sfd_verdict_step(struct sfd_job *job, const struct sfd_window *w, size_t t)
{
    struct sfd_verdict *v = &job->verdict;
    if (v->test == NULL || !sf_live_calibrated(v->test) || v->world_size != job->world_size ||
        v->schema_hash != job->schema.hash)
        return;
    if (!gather(job, w, t)) {
        v->skipped_steps++;
        return;
    }
    int64_t step = w->meta.first_step + (int64_t)t, now = sfd_realtime_ms();
    enum sf_live_event ev;
    sf_live_verdict ended;
    if (sf_live_step(v->test, step, v->rows, now, &ev, &ended) < 0) {
        v->skipped_steps++;
        return;
    }
    if (ev == SF_LIVE_ENDED || ev == SF_LIVE_REPLACED)
        record_event(job, false, step, now, &ended);
    if (ev == SF_LIVE_STARTED || ev == SF_LIVE_REPLACED)
        record_event(job, true, step, now, sf_live_verdict_get(v->test));
}

/* A stall as a verdict: its first culprit, else its first stalled rank. */
static json_t *stall_verdict(const struct sfd_job *job)
{
    json_t *st = sfd_job_stall_json(job);
    if (!json_is_object(st))
        return st;
    json_t *ranks = json_object_get(st, "ranks"), *pick = NULL, *r;
    size_t i;
    json_array_foreach(ranks, i, r) if (pick == NULL || json_is_true(json_object_get(r, "culprit")))
    {
        if (pick == NULL || !json_is_true(json_object_get(pick, "culprit")))
            pick = r;
    }
    json_t *rank = pick ? json_object_get(pick, "rank") : NULL;
    json_t *stage = pick ? json_object_get(pick, "stage") : NULL;
    json_t *step = pick ? json_object_get(pick, "step") : NULL;
    json_t *o =
        json_pack("{s:s, s:O, s:O, s:n, s:O, s:n, s:I, s:n, s:O}", "kind", "stall", "rank",
                  rank ? rank : json_null(), "stage", stage ? stage : json_null(), "sync_stage",
                  "since_step", step ? step : json_null(), "detected_step", "detected_at",
                  (json_int_t)job->stall.since_unix_ms, "effect_s", "evidence", st);
    json_decref(st);
    return o;
}

json_t *sfd_verdict_json(const struct sfd_job *job)
{
    const sf_live_verdict *lv = sf_live_verdict_get(job->verdict.test);
    if (lv != NULL)
        return verdict_object(job, lv);
    return job->stall.stalled ? stall_verdict(job) : json_null();
}

json_t *sfd_verdict_events_json(const struct sfd_job *job)
{
    const struct sfd_verdict *v = &job->verdict;
    json_t *events = json_array();
    uint64_t first = v->seq > SFD_VERDICT_EVENTS ? v->seq - SFD_VERDICT_EVENTS : 0;
    for (uint64_t s = first; s < v->seq; s++) {
        const struct sfd_verdict_event *e = &v->events[s % SFD_VERDICT_EVENTS];
        json_array_append_new(
            events, json_pack("{s:I, s:s, s:I, s:I, s:o}", "seq", (json_int_t)e->seq, "event",
                              e->start ? "start" : "end", "step", (json_int_t)e->step, "at",
                              (json_int_t)e->at_ms, "verdict", verdict_object(job, &e->v)));
    }
    const sf_live *t = v->test;
    return json_pack("{s:s, s:o, s:b, s:I, s:I, s:I, s:o, s:o}", "job", job->id, "events", events,
                     "calibrated", t != NULL && sf_live_calibrated(t), "cells",
                     (json_int_t)(t ? sf_live_cells(t) : 0), "steps_tested",
                     (json_int_t)(t ? sf_live_steps_tested(t) : 0), "skipped_steps",
                     (json_int_t)v->skipped_steps, "dropped_events",
                     json_integer((json_int_t)first), "verdict", sfd_verdict_json(job));
}

void sfd_verdict_free(struct sfd_job *job)
{
    drop_test(&job->verdict);
    memset(&job->verdict, 0, sizeof job->verdict);
}

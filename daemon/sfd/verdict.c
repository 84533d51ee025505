/*
 * The job's live verdict (docs/LIVE.md): the core's sequential test
 * (stagefrontier/live.h) made for the job's shape at its first closed
 * window, its baseline taken from the complete steps of the job's first
 * eligible windows, then fed each step as its last row arrives. Starts and
 * ends are events: kept in a ring for `sfctl events` and written to the
 * history. Dense jobs only: the test needs every rank's rows. On one node
 * the rows' issue lags go with them, for the test of each rank's
 * communication; in a cluster the root runs the test on the steps it
 * assembles from its members' parts (verdict_cluster.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

static void drop_test(struct sfd_job *job)
{
    struct sfd_verdict *v = &job->verdict;
    sfd_verdict_cluster_free(job);
    sf_live_free(v->test);
    free(v->rows);
    free(v->lags);
    v->test = NULL;
    v->rows = NULL;
    v->lags = NULL;
}

/* A test for the job's shape; the old one goes with its shape. */
static int ensure_test(struct sfd_job *job, const sf_summary *summary)
{
    struct sfd_verdict *v = &job->verdict;
    if (v->test != NULL && v->schema_hash == summary->schema.hash &&
        v->world_size == summary->meta.world_size)
        return 0;
    drop_test(job);
    uint32_t w = summary->meta.world_size;
    if (w == 0 || w > job->gates.dense_max_ranks || summary->dense == NULL)
        return -ENOTSUP;
    v->rows = calloc((size_t)w * summary->schema.n_stages, sizeof(*v->rows));
    uint32_t J = (uint32_t)__builtin_popcountll(summary->schema.sync_mask);
    v->lags = J ? calloc((size_t)w * J, sizeof(*v->lags)) : NULL;
    int r = v->rows && (v->lags || !J)
                ? sf_live_new(&summary->schema, w, &job->sfd->cfg.live, &v->test)
                : -ENOMEM;
    if (r == 0 && J != sf_live_sync_stages(v->test))
        r = -EINVAL; /* a synchronizing residual: the rows' lags would not line up */
    if (r < 0) {
        drop_test(job);
        return r;
    }
    v->schema_hash = summary->schema.hash;
    v->world_size = w;
    return 0;
}

/* The issue lags of the summary's steps from the window's kept rows,
 * [n_steps][world_size][J] as the dense durations (-1 unmarked), or NULL
 * (no lags, no rows kept, or no memory: the steps then calibrate without). */
static int64_t *summary_lags(struct sfd_job *job, const sf_summary *summary)
{
    uint32_t W = job->verdict.world_size, J = sf_live_sync_stages(job->verdict.test);
    struct sfd_stored *s = sfd_kept_find(job, &summary->meta);
    if (J == 0 || s == NULL || s->rows.lag == NULL || summary->n_steps == 0 ||
        sfd_rows_sync_count(job) != J || job->schema.hash != summary->schema.hash)
        return NULL;
    size_t n = (size_t)summary->n_steps * W * J;
    int64_t *lags = malloc(n * sizeof(*lags));
    if (lags == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        lags[i] = -1;
    for (size_t i = 0; i < s->rows.n; i++) {
        const struct sfd_rec *rec = &s->rows.rec[i];
        uint32_t lo = 0, hi = summary->n_steps; /* the row's step among the summary's */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (summary->steps[mid].step < rec->step)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == summary->n_steps || summary->steps[lo].step != rec->step || rec->rank >= W)
            continue;
        memcpy(lags + ((size_t)lo * W + rec->rank) * J, s->rows.lag + i * sfd_rows_mark_count(job),
               J * sizeof(*lags));
    }
    return lags;
}

void sfd_verdict_window(struct sfd_job *job, const sf_summary *summary, const sf_report *report)
{
    if (!job->sfd->cfg.live_verdict) { /* turned off, maybe by a reload */
        drop_test(job);
        return;
    }
    /* In a cluster the root tests, from the merged summaries' dense rows
     * (their steps carry no issue lags: no communication cells there). */
    bool standalone = sfd_cluster_is_standalone(job->sfd);
    if (!standalone && !sfd_cluster_is_root(job->sfd)) {
        if (job->verdict.test != NULL) /* no longer the root: its verdict is the new root's */
            drop_test(job);
        return;
    }
    if (ensure_test(job, summary) < 0)
        return;
    struct sfd_verdict *v = &job->verdict;
    if (sf_live_calibrated(v->test) || !sf_reference_eligible(report))
        return;
    int64_t *lags = standalone ? summary_lags(job, summary) : NULL;
    int done = sf_live_calibrate_summary_lags(v->test, summary, lags);
    free(lags);
    if (done == 1)
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
    json_object_set_new(evidence, "test",
                        json_string(v->communication ? "communication"
                                    : v->arrival     ? "arrival"
                                                     : "own_work"));
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

char *sfd_verdict_event_text(const struct sfd_job *job, const struct sfd_verdict_event *e)
{
    json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:o}", "seq", (json_int_t)e->seq, "event",
                          e->start ? "start" : "end", "step", (json_int_t)e->step, "at",
                          (json_int_t)e->at_ms, "verdict", verdict_object(job, &e->v));
    char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

/* Kept in the ring; history.c writes it out (sfd_history_put_verdict_events),
 * so this file never calls the history and the history may call it. */
static void record_event(struct sfd_job *job, bool start, int64_t step, int64_t at_ms,
                         const sf_live_verdict *lv)
{
    struct sfd_verdict *v = &job->verdict;
    struct sfd_verdict_event *e = &v->events[v->seq % SFD_VERDICT_EVENTS];
    *e = (struct sfd_verdict_event){
        .seq = ++v->seq, .start = start, .at_ms = at_ms, .step = step, .v = *lv};
    job->sfd->prom_dirty = true;
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
        if (v->lags != NULL) {
            uint32_t J = sf_live_sync_stages(v->test);
            if (w->rows.lag != NULL)
                memcpy(v->lags + (size_t)r * J, w->rows.lag + (size_t)i * sfd_rows_mark_count(job),
                       J * sizeof(int64_t));
            else
                for (uint32_t j = 0; j < J; j++)
                    v->lags[(size_t)r * J + j] = -1;
        }
    }
    return r == v->world_size;
}

bool sfd_verdict_step_ready(const struct sfd_job *job, const struct sfd_window *w, size_t t)
{
    uint32_t n = w->order.count[t];
    return sfd_cluster_is_standalone(job->sfd) ? n == job->world_size : n == job->ranks_seen;
}

void sfd_verdict_step(struct sfd_job *job, const struct sfd_window *w, size_t t)
{
    struct sfd_verdict *v = &job->verdict;
    if (!sfd_cluster_is_standalone(job->sfd)) {
        sfd_verdict_cluster_step(job, w, t);
        return;
    }
    if (v->test == NULL || !sf_live_calibrated(v->test) || v->world_size != job->world_size ||
        v->schema_hash != job->schema.hash)
        return;
    if (!gather(job, w, t)) {
        v->skipped_steps++;
        return;
    }
    sfd_verdict_feed(job, w->meta.first_step + (int64_t)t, v->rows, v->lags);
}

void sfd_verdict_feed(struct sfd_job *job, int64_t step, const int64_t *rows, const int64_t *lags)
{
    struct sfd_verdict *v = &job->verdict;
    int64_t now = sfd_realtime_ms();
    enum sf_live_event ev;
    sf_live_verdict ended;
    if (sf_live_step_lags(v->test, step, rows, lags, now, &ev, &ended) < 0) {
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
        if (e->seq != s + 1)
            continue; /* a gap: an event the history did not give back */
        json_array_append_new(
            events, json_pack("{s:I, s:s, s:I, s:I, s:o}", "seq", (json_int_t)e->seq, "event",
                              e->start ? "start" : "end", "step", (json_int_t)e->step, "at",
                              (json_int_t)e->at_ms, "verdict", verdict_object(job, &e->v)));
    }
    const sf_live *t = v->test;
    return json_pack("{s:s, s:o, s:b, s:I, s:I, s:I, s:o, s:o, s:o}", "job", job->id, "events",
                     events, "calibrated", t != NULL && sf_live_calibrated(t), "cells",
                     (json_int_t)(t ? sf_live_cells(t) : 0), "steps_tested",
                     (json_int_t)(t ? sf_live_steps_tested(t) : 0), "skipped_steps",
                     (json_int_t)v->skipped_steps, "dropped_events",
                     json_integer((json_int_t)first), "verdict", sfd_verdict_json(job), "cluster",
                     sfd_verdict_cluster_json(job));
}

/* ---- events read back from the history ------------------------------------- */

static bool kind_of(const char *name, enum sf_live_kind *ret)
{
    for (int k = SF_LIVE_STRAGGLER; k <= SF_LIVE_STALL; k++)
        if (name != NULL && !strcmp(name, sf_live_kind_name(k))) {
            *ret = k;
            return true;
        }
    return false;
}

/* A stage field: null, or a name of the schema. */
static bool stage_of(const sf_schema *schema, json_t *v, uint32_t *ret)
{
    if (json_is_null(v)) {
        *ret = UINT32_MAX;
        return true;
    }
    int k = json_is_string(v) ? sf_schema_stage_index(schema, json_string_value(v)) : -1;
    if (k < 0)
        return false;
    *ret = (uint32_t)k;
    return true;
}

static bool int_of(json_t *o, const char *key, int64_t lo, int64_t *ret)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo)
        return false;
    *ret = json_integer_value(v);
    return true;
}

int sfd_verdict_event_decode(const sf_schema *schema, const uint8_t *body, size_t len,
                             struct sfd_verdict_event *ret)
{
    if (len > SFD_VERDICT_EVENT_MAX_BYTES)
        return -E2BIG;
    json_t *o = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *v = json_object_get(o, "verdict");
    json_t *ev = json_object_get(v, "evidence");
    struct sfd_verdict_event e = {0};
    const char *what = json_string_value(json_object_get(o, "event"));
    int64_t seq, rank = -1, since;
    bool ok = json_is_object(o) && json_is_object(v) && what != NULL &&
              (!strcmp(what, "start") || !strcmp(what, "end")) && int_of(o, "seq", 1, &seq) &&
              int_of(o, "step", INT64_MIN, &e.step) && int_of(o, "at", 0, &e.at_ms) &&
              kind_of(json_string_value(json_object_get(v, "kind")), &e.v.kind) &&
              stage_of(schema, json_object_get(v, "stage"), &e.v.stage) &&
              stage_of(schema, json_object_get(v, "sync_stage"), &e.v.sync_stage) &&
              int_of(v, "since_step", INT64_MIN, &since) &&
              int_of(v, "detected_step", INT64_MIN, &e.v.detected_step) &&
              int_of(v, "detected_at", 0, &e.v.detected_at_ms) &&
              json_is_number(json_object_get(v, "effect_s"));
    json_t *rk = json_object_get(v, "rank");
    if (ok && !json_is_null(rk))
        ok = int_of(v, "rank", 0, &rank) && rank < SF_MAX_RANKS;
    if (!ok) {
        json_decref(o);
        return -EINVAL;
    }
    e.seq = (uint64_t)seq;
    e.start = !strcmp(what, "start");
    e.v.rank = rank < 0 ? SF_NO_RANK : (uint32_t)rank;
    e.v.since_step = since;
    e.v.effect_s = json_number_value(json_object_get(v, "effect_s"));
    /* The evidence is shown again as it was; a missing field reads as 0. */
    const char *test = json_string_value(json_object_get(ev, "test"));
    e.v.arrival = test != NULL && !strcmp(test, "arrival");
    e.v.communication = test != NULL && !strcmp(test, "communication");
    e.v.statistic = json_number_value(json_object_get(ev, "cusum_sigmas"));
    e.v.threshold = json_number_value(json_object_get(ev, "threshold_sigmas"));
    e.v.baseline_ns = (int64_t)llround(json_number_value(json_object_get(ev, "baseline_s")) * 1e9);
    e.v.sigma_ns = (int64_t)llround(json_number_value(json_object_get(ev, "sigma_s")) * 1e9);
    json_t *steps = json_object_get(ev, "steps");
    e.v.cell_steps = json_is_integer(steps) && json_integer_value(steps) >= 0 &&
                             json_integer_value(steps) <= UINT32_MAX
                         ? (uint32_t)json_integer_value(steps)
                         : 0;
    json_decref(o);
    *ret = e;
    return 0;
}

void sfd_verdict_restore_event(struct sfd_job *job, const struct sfd_verdict_event *e)
{
    struct sfd_verdict *v = &job->verdict;
    if (v->seq >= SFD_VERDICT_EVENTS && e->seq <= v->seq - SFD_VERDICT_EVENTS)
        return; /* older than the ring holds */
    v->events[(e->seq - 1) % SFD_VERDICT_EVENTS] = *e;
    if (e->seq > v->seq)
        v->seq = e->seq;
    v->written = v->seq; /* in the store already */
}

void sfd_verdict_free(struct sfd_job *job)
{
    drop_test(job);
    memset(&job->verdict, 0, sizeof job->verdict);
}

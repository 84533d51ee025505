/*
 * sfd's Prometheus textfile export schedule: marks the export dirty when a
 * window closes, a counter, role or term moves or a job changes state, and
 * at most once a second (at least every SFD_PROM_REFRESH_MS) hands the latest
 * reports to prom_export.c; leaves out jobs ended for prom_ended_keep_s,
 * rate-limits its error log and removes the file on a clean stop. The format
 * is not its business.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "capture.h"
#include "history.h"
#include "prom_export.h"
#include "sfd.h"

_Static_assert(SF_PROM_TRIGGER_OPERATOR == 0 && SF_PROM_TRIGGER_AUTO == 1,
               "capture.c counts operator captures at 0 and automatic ones at 1");

/* The ranks of a job sfd has heard from, when, and what their hellos said of
 * host, local rank and GPU, for the export; the caller frees the arrays
 * (left NULL when none or out of memory). */
static void rank_last_seen(const struct sfd_job *j, struct sf_prom_job *v)
{
    size_t n = 0,
           cap = j->world_size < SF_PROM_MAX_RANK_SERIES ? j->world_size : SF_PROM_MAX_RANK_SERIES;
    uint32_t *ranks = calloc(cap ? cap : 1, sizeof *ranks);
    int64_t *seen = calloc(cap ? cap : 1, sizeof *seen);
    struct sf_prom_rank_info *info = calloc(cap ? cap : 1, sizeof *info);
    for (uint32_t r = 0; ranks && seen && info && r < j->world_size && n < cap; r++) {
        const struct sfd_rank *rk = sfd_job_rank_peek(j, r);
        if (rk->last_seen_unix_ms <= 0)
            continue;
        ranks[n] = r;
        seen[n] = rk->last_seen_unix_ms;
        info[n++] = (struct sf_prom_rank_info){
            .host = rk->host < j->n_hosts ? j->hosts[rk->host] : "",
            .gpu = rk->gpu > 0 && rk->gpu < j->n_hosts ? j->hosts[rk->gpu] : "",
            .local_rank = rk->local_rank};
    }
    if (ranks == NULL || seen == NULL || info == NULL || n == 0) {
        free(ranks);
        free(seen);
        free(info);
        return;
    }
    v->ranks = ranks;
    v->last_seen_unix_ms = seen;
    v->rank_info = info;
    v->n_ranks = n;
}

/* Changes whenever one of the monotonic counters the export carries moves. */
static uint64_t counters_sum(const struct sfd *d)
{
    uint64_t sum = d->ctr.records + d->ctr.batches + d->ctr.dropped + d->ctr.windows_closed +
                   d->ctr.connections_accepted;
    for (int i = 0; i < SFD_REJ_COUNT; i++)
        sum += d->ctr.rejected[i];
    struct sfd_history_stats h = {0};
    if (d->history_counters != NULL)
        sfd_history_counters_read(d->history_counters, &h);
    return sum + h.written + h.evicted + h.write_errors + h.queue_dropped + h.reopen_errors +
           h.full_retries + h.damaged;
}

static enum sf_prom_job_state job_state(const struct sfd_job *j)
{
    if (j->stall.stalled)
        return SF_PROM_JOB_STALLED;
    return j->n_live_ranks > 0 ? SF_PROM_JOB_RUNNING : SF_PROM_JOB_ENDED;
}

/* Whether the job is still exported: an ended job (no rank connected) goes
 * prom_ended_keep_s after it ended and after its latest report, so a job of
 * a cluster's other nodes stays while its reports come. */
static bool job_exported(const struct sfd *d, struct sfd_job *j, uint64_t now)
{
    if (job_state(j) != SF_PROM_JOB_ENDED) {
        j->prom_ended_ms = 0;
        return true;
    }
    if (j->prom_ended_ms == 0 || j->prom_report_unix_ms != j->latest_report_unix_ms) {
        j->prom_ended_ms = now ? now : 1;
        j->prom_report_unix_ms = j->latest_report_unix_ms;
    }
    return now - j->prom_ended_ms < (uint64_t)d->cfg.prom_ended_keep_s * 1000;
}

/* Marks the export dirty when a job's state or presence differs from the
 * file's. */
static void note_job_changes(struct sfd *d, uint64_t now)
{
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        bool exported = job_exported(d, j, now);
        if (exported != j->prom_exported || (exported && job_state(j) != j->prom_state))
            d->prom_dirty = true;
    }
}

/* The stalled job's first culprit, else its first stalled rank, else -1. */
static int64_t stall_rank(const struct sfd_job *j)
{
    int64_t first = -1;
    for (uint32_t r = 0; r < j->world_size; r++) {
        const struct sfd_rank *rk = sfd_job_rank_peek(j, r);
        if (rk->culprit)
            return r;
        if (rk->stalled && first < 0)
            first = r;
    }
    return first;
}

static void job_view(struct sfd *d, struct sfd_job *j, char *name, size_t name_len,
                     struct sf_prom_job *v)
{
    /* an id two uids use is labelled UID/JOB, so neither hides the other */
    sfd_job_name(d, j, name, name_len);
    *v = (struct sf_prom_job){name,
                              sfd_job_latest_report(j),
                              j->dropped,
                              j->rejected,
                              j->base.waste_rank_s,
                              j->latest_report_unix_ms,
                              .state = job_state(j)};
    rank_last_seen(j, v);
    struct sfd_capture_counts cc;
    sfd_captures_counts(j, &cc);
    for (int t = 0; t < SF_PROM_TRIGGERS; t++) {
        v->captures_started[t] = cc.started[t];
        v->captures_done[t] = cc.done[t];
        v->captures_failed[t] = cc.failed[t];
    }
    v->last_capture_unix_ms = cc.last_created_ms;
    const sf_live_verdict *lv = sf_live_verdict_get(j->verdict.test);
    v->verdict_events = j->verdict.seq;
    if (lv != NULL) {
        v->verdict_kind = sf_live_kind_name(lv->kind);
        v->verdict_rank = lv->rank == SF_NO_RANK ? -1 : (int64_t)lv->rank;
        v->verdict_stage = lv->stage < j->schema.n_stages ? j->schema.names[lv->stage] : NULL;
        v->verdict_effect_s = lv->effect_s;
    } else if (j->stall.stalled) {
        v->verdict_kind = "stall";
        v->verdict_rank = stall_rank(j);
    }
}

/* Failures are logged once, then at most once a minute with their count, and
 * the recovery once: an unwritable directory must not fill the journal. */
static void note_write(struct sfd *d, int r, uint64_t now)
{
    if (r >= 0) {
        if (d->prom_failing_since_ms != 0)
            sfd_log(SFD_LOG_NOTICE, NULL, "prometheus export to %s works again", d->cfg.prom_dir);
        d->prom_failing_since_ms = 0;
        d->prom_failures = 0;
        return;
    }
    d->prom_failures++;
    if (d->prom_failing_since_ms == 0) {
        d->prom_failing_since_ms = d->prom_fail_logged_ms = now ? now : 1;
        d->prom_failures = 0;
        sfd_log(SFD_LOG_WARNING, NULL,
                "prometheus export to %s: %s (retried every second, logged at most once a minute)",
                d->cfg.prom_dir, strerror(-r));
    } else if (now - d->prom_fail_logged_ms >= 60000) {
        sfd_log(SFD_LOG_WARNING, NULL,
                "prometheus export to %s: %s (%" PRIu64 " failed writes since the last message)",
                d->cfg.prom_dir, strerror(-r), d->prom_failures);
        d->prom_fail_logged_ms = now;
        d->prom_failures = 0;
    }
}

static int write_export(struct sfd *d, uint64_t now)
{
    struct sf_prom_job *v = calloc(d->n_jobs ? d->n_jobs : 1, sizeof(*v));
    char(*names)[SFD_JOB_NAME_MAX] = calloc(d->n_jobs ? d->n_jobs : 1, sizeof(*names));
    if (v == NULL || names == NULL) {
        free(v);
        free(names);
        return -ENOMEM;
    }
    size_t n = 0;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        if (job_exported(d, j, now)) {
            job_view(d, j, names[n], sizeof(names[n]), &v[n]);
            n++;
        }
    uint64_t term;
    const char *role = sfd_cluster_role(d, &term);
    struct sf_prom_reject rej[SFD_REJ_COUNT];
    for (int i = 0; i < SFD_REJ_COUNT; i++)
        rej[i] = (struct sf_prom_reject){sfd_reject_name(i), d->ctr.rejected[i]};
    struct sfd_history_stats hs = {0};
    if (d->history_counters != NULL)
        sfd_history_counters_read(d->history_counters, &hs);
    struct sf_prom_history hist = {
        .enabled = hs.enabled,
        .written = hs.written,
        .evicted = hs.evicted,
        .restored = hs.restored,
        .open_errors = hs.open_errors,
        .read_errors = hs.read_errors,
        .restore_errors = hs.restore_errors,
        .write_errors = hs.write_errors,
        .reopen_errors = hs.reopen_errors,
        .queue_dropped = hs.queue_dropped,
        .refused = hs.refused,
        .damaged = hs.damaged,
        .readonly_restores = hs.readonly_restores,
        .full_retries = hs.full_retries,
    };
    struct sf_prom_daemon daemon = {
        .version = SF_VERSION,
        .role = role,
        .write_unix_ms = sfd_realtime_ms(),
        .term = term,
        .records = d->ctr.records,
        .batches = d->ctr.batches,
        .dropped = d->ctr.dropped,
        .windows_closed = d->ctr.windows_closed,
        .connections = d->n_conns - d->n_query_conns,
        .connections_accepted = d->ctr.connections_accepted,
        .rejected = rej,
        .n_rejected = SFD_REJ_COUNT,
        .history = d->history_counters != NULL ? &hist : NULL,
    };
    int r = sfd_prom_write(d->cfg.prom_dir, &daemon, v, n);
    if (r >= 0) {
        d->prom_role = role;
        d->prom_term = term;
        d->prom_counters = counters_sum(d);
        for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
            j->prom_exported = job_exported(d, j, now);
            j->prom_state = (uint8_t)job_state(j);
        }
    }
    for (size_t i = 0; i < n; i++) {
        free((void *)v[i].ranks);
        free((void *)v[i].last_seen_unix_ms);
        free((void *)v[i].rank_info);
    }
    free(v);
    free(names);
    return r;
}

void sfd_prom_flush(struct sfd *d)
{
    uint64_t term, now = sfd_now_ms(d);
    const char *role = sfd_cluster_role(d, &term);
    /* A new role, term, counter or job state is news even when no window
     * closed; an idle daemon still rewrites the file (and its timestamp)
     * every SFD_PROM_REFRESH_MS, so a stale file means a dead daemon. */
    if (role != d->prom_role || term != d->prom_term || counters_sum(d) != d->prom_counters)
        d->prom_dirty = true;
    note_job_changes(d, now);
    if (d->prom_written_ms == 0 || now - d->prom_written_ms >= SFD_PROM_REFRESH_MS)
        d->prom_dirty = true;
    if (d->cfg.prom_dir[0] == '\0' || !d->prom_dirty)
        return;
    int r = write_export(d, now);
    note_write(d, r, now);
    if (r >= 0) {
        d->prom_written_ms = now ? now : 1;
        snprintf(d->prom_written_dir, sizeof d->prom_written_dir, "%s", d->cfg.prom_dir);
        d->prom_dirty = false;
    }
}

static void on_prom(uv_timer_t *t)
{
    sfd_prom_flush(t->data);
}

void sfd_after_window(struct sfd *d)
{
    /* The export is written at most once a second, by its timer. */
    d->prom_dirty = true;
}

int sfd_prom_timer_init(struct sfd *d)
{
    int r = uv_timer_init(d->loop, &d->prom_timer);
    if (r < 0)
        return r;
    d->prom_timer.data = d;
    uv_unref((uv_handle_t *)&d->prom_timer);
    sfd_prom_reconfigure(d);
    return 0;
}

void sfd_prom_remove(struct sfd *d)
{
    char *path;
    if (d->prom_written_dir[0] == '\0')
        return;
    if (asprintf(&path, "%s/" SFD_PROM_FILE_NAME, d->prom_written_dir) < 0)
        return;
    if (unlink(path) < 0 && errno != ENOENT)
        sfd_log(SFD_LOG_WARNING, NULL, "cannot remove %s: %s", path, strerror(errno));
    free(path);
    d->prom_written_dir[0] = '\0';
}

void sfd_prom_reconfigure(struct sfd *d)
{
    if (d->prom_timer.loop == NULL || d->stopping)
        return;
    /* A file left in a directory sfd no longer writes would go stale there. */
    if (strcmp(d->prom_written_dir, d->cfg.prom_dir) != 0)
        sfd_prom_remove(d);
    d->prom_failing_since_ms = 0;
    if (d->cfg.prom_dir[0] != '\0') {
        uv_timer_start(&d->prom_timer, on_prom, 1000, 1000);
        d->prom_dirty = true; /* write the new directory at once */
    } else {
        uv_timer_stop(&d->prom_timer);
    }
}

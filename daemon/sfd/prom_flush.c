/*
 * sfd's Prometheus textfile export schedule: marks the export dirty when a
 * window closes or a counter, role or term moves, and at most once a second
 * hands the latest reports to prom_export.c. The format is not its business.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "prom_export.h"
#include "sfd.h"

_Static_assert(SF_PROM_TRIGGER_OPERATOR == 0 && SF_PROM_TRIGGER_AUTO == 1,
               "capture.c counts operator captures at 0 and automatic ones at 1");

/* The ranks of a job sfd has heard from and when, for the export; the
 * caller frees both arrays (left NULL when none or out of memory). */
static void rank_last_seen(const struct sfd_job *j, struct sf_prom_job *v)
{
    size_t n = 0,
           cap = j->world_size < SF_PROM_MAX_RANK_SERIES ? j->world_size : SF_PROM_MAX_RANK_SERIES;
    uint32_t *ranks = calloc(cap ? cap : 1, sizeof *ranks);
    int64_t *seen = calloc(cap ? cap : 1, sizeof *seen);
    for (uint32_t r = 0; ranks != NULL && seen != NULL && r < j->world_size && n < cap; r++) {
        int64_t ms = sfd_job_rank_peek(j, r)->last_seen_unix_ms;
        if (ms > 0) {
            ranks[n] = r;
            seen[n++] = ms;
        }
    }
    if (ranks == NULL || seen == NULL || n == 0) {
        free(ranks);
        free(seen);
        return;
    }
    v->ranks = ranks;
    v->last_seen_unix_ms = seen;
    v->n_ranks = n;
}

/* Changes whenever one of the monotonic counters the export carries moves. */
static uint64_t counters_sum(const struct sfd *d)
{
    uint64_t sum = d->ctr.records + d->ctr.batches + d->ctr.dropped + d->ctr.windows_closed +
                   d->ctr.connections_accepted;
    for (int i = 0; i < SFD_REJ_COUNT; i++)
        sum += d->ctr.rejected[i];
    return sum;
}

void sfd_prom_flush(struct sfd *d)
{
    uint64_t term;
    const char *role = sfd_cluster_role(d, &term);
    /* A new role, term or counter is news even when no window closed. */
    if (role != d->prom_role || term != d->prom_term || counters_sum(d) != d->prom_counters)
        d->prom_dirty = true;
    if (d->cfg.prom_dir[0] == '\0' || !d->prom_dirty)
        return;
    struct sf_prom_job *v = calloc(d->n_jobs ? d->n_jobs : 1, sizeof(*v));
    char(*names)[SFD_JOB_NAME_MAX] = calloc(d->n_jobs ? d->n_jobs : 1, sizeof(*names));
    if (v == NULL || names == NULL) {
        free(v);
        free(names);
        return;
    }
    size_t n = 0;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        /* an id two uids use is labelled UID/JOB, so neither hides the other */
        sfd_job_name(d, j, names[n], sizeof(names[n]));
        v[n] = (struct sf_prom_job){names[n],
                                    sfd_job_latest_report(j),
                                    j->dropped,
                                    j->rejected,
                                    j->base.waste_rank_s,
                                    j->latest_report_unix_ms,
                                    .stalled = j->stall.stalled};
        rank_last_seen(j, &v[n]);
        struct sfd_capture_counts cc;
        sfd_captures_counts(j, &cc);
        for (int t = 0; t < SF_PROM_TRIGGERS; t++) {
            v[n].captures_started[t] = cc.started[t];
            v[n].captures_done[t] = cc.done[t];
            v[n].captures_failed[t] = cc.failed[t];
        }
        v[n].last_capture_unix_ms = cc.last_created_ms;
        n++;
    }
    struct sf_prom_reject rej[SFD_REJ_COUNT];
    for (int i = 0; i < SFD_REJ_COUNT; i++)
        rej[i] = (struct sf_prom_reject){sfd_reject_name(i), d->ctr.rejected[i]};
    struct sf_prom_daemon daemon = {
        .version = SF_VERSION,
        .role = role,
        .term = term,
        .records = d->ctr.records,
        .batches = d->ctr.batches,
        .dropped = d->ctr.dropped,
        .windows_closed = d->ctr.windows_closed,
        .connections = d->n_conns - d->n_query_conns,
        .connections_accepted = d->ctr.connections_accepted,
        .rejected = rej,
        .n_rejected = SFD_REJ_COUNT,
    };
    int r = sfd_prom_write(d->cfg.prom_dir, &daemon, v, n);
    if (r >= 0) {
        d->prom_role = role;
        d->prom_term = term;
        d->prom_counters = counters_sum(d);
    }
    if (r < 0)
        sfd_log(SFD_LOG_WARNING, NULL, "prometheus export to %s: %s", d->cfg.prom_dir,
                strerror(-r));
    for (size_t i = 0; i < n; i++) {
        free((void *)v[i].ranks);
        free((void *)v[i].last_seen_unix_ms);
    }
    free(v);
    free(names);
    d->prom_dirty = false;
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

void sfd_prom_reconfigure(struct sfd *d)
{
    if (d->prom_timer.loop == NULL || d->stopping)
        return;
    if (d->cfg.prom_dir[0] != '\0') {
        uv_timer_start(&d->prom_timer, on_prom, 1000, 1000);
        d->prom_dirty = true; /* write the new directory at once */
    } else {
        uv_timer_stop(&d->prom_timer);
    }
}

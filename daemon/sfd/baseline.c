/*
 * sfd's per-job reference (docs/CHANGE.md): the automatic reference of the
 * first eligible windows, an operator's pinned window, and the change and
 * what-if attached to each report before it is stored. The arithmetic is the
 * core's; this file only decides which reference applies. No sockets here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

static const sf_reference *in_force(const struct sfd_job *job)
{
    return job->base.pinned != NULL ? job->base.pinned : job->base.automatic;
}

/* Drops references the job's shape no longer fits (a new segment with
 * another schema or world size). */
static void drop_stale(struct sfd_job *job, const sf_summary *summary)
{
    const char *why;
    sf_reference **refs[] = {&job->base.pinned, &job->base.automatic};
    for (size_t i = 0; i < 2; i++) {
        sf_reference **r = refs[i];
        if (*r == NULL ||
            sf_reference_check(*r, &summary->schema, summary->meta.world_size, &why) == 0)
            continue;
        sfd_log(SFD_LOG_NOTICE, job->id, "%s baseline dropped: %s now",
                i == 0 ? "pinned" : "automatic", why + strlen("the baseline has "));
        sf_reference_free(*r);
        *r = NULL;
    }
}

/* The change and what-if of one window, pooled with the windows of pool. */
static int attach_one(struct sfd_job *job, sf_change_pool *pool, const sf_summary *summary,
                      sf_report *report)
{
    const sf_reference *ref = in_force(job);
    if (ref != NULL && !sf_reference_applies(ref, &summary->meta))
        ref = NULL;
    int r = sf_report_attach_change(report, summary, pool, ref);
    if (r < 0)
        sfd_log(SFD_LOG_WARNING, job->id, "window %lld: change not computed: %s",
                (long long)summary->meta.index, strerror(-r));
    return r;
}

/* Charges what the pool grew by to the job's uid as report memory, within
 * its share and without evicting anything for it: the pool is derived
 * state. 0, or -ENOMEM when the share has no room. */
static int pool_charge(struct sfd_job *job, uint64_t bytes)
{
    struct sfd_baseline *b = &job->base;
    if (bytes > b->pool_bytes && sfd_job_charge(job, SFD_MEM_REPORTS, bytes - b->pool_bytes) < 0)
        return -ENOMEM;
    if (bytes < b->pool_bytes)
        sfd_job_release(job, SFD_MEM_REPORTS, b->pool_bytes - bytes);
    b->pool_bytes = bytes;
    return 0;
}

/* A kept summary holds its steps, dense rows and own-work contrasts. A uid
 * without room for them gets its changes measured window by window until it
 * has: the pool is emptied, logged once, and counted in `pool_refused`. */
void sfd_baseline_keep(struct sfd_job *job, sf_summary **summary, uint32_t want)
{
    struct sfd_baseline *b = &job->base;
    sf_change_pool_keep(&b->pool, summary, want);
    if (pool_charge(job, sf_change_pool_bytes(&b->pool)) == 0) {
        b->pool_short = false;
        return;
    }
    sf_change_pool_clear(&b->pool);
    pool_charge(job, 0);
    b->pool_refused++;
    if (!b->pool_short)
        sfd_log(SFD_LOG_NOTICE, job->id,
                "memory share full: changes measured window by window until there is room");
    b->pool_short = true;
}

void sfd_baseline_attach(struct sfd_job *job, const sf_summary *summary, sf_report *report)
{
    struct sfd_baseline *b = &job->base;
    drop_stale(job, summary);
    attach_one(job, &b->pool, summary, report);
    if (b->automatic == NULL) {
        b->collector.want = job->gates.baseline_windows;
        int r = sf_reference_collect(&b->collector, summary, report, &b->automatic);
        if (r < 0)
            sfd_log(SFD_LOG_WARNING, job->id, "baseline: %s", strerror(-r));
        else if (r == 1)
            sfd_log(SFD_LOG_INFO, job->id, "baseline: windows %lld-%lld, %u steps",
                    (long long)b->automatic->windows[0],
                    (long long)b->automatic->windows[b->automatic->n_windows - 1],
                    b->automatic->n_steps);
    }
    if (report->whatif != NULL && !isnan(report->whatif->waste_rank_s))
        b->waste_rank_s += report->whatif->waste_rank_s;
    sfd_alert_consider(job, report);
}

/* The summary of a kept window from its rows, as sfd_window_close built it. */
static int kept_summary(struct sfd_job *job, const struct sfd_stored *s, sf_summary **ret)
{
    sf_row *view = NULL;
    int r = sfd_rows_view(job, &s->rows, &view);
    if (r == 0)
        r = sf_summary_build(&job->schema, &s->meta, view, s->rows.n,
                             job->world_size <= job->gates.dense_max_ranks, ret);
    free(view);
    return r;
}

/* After a pin or a clear: every kept window's change against the reference
 * now in force, by the same rule as at close, so a replay of the recording
 * gives the same reports. */
static void reattach_kept(struct sfd_job *job)
{
    sf_change_pool pool = {0}; /* the kept windows, pooled as they were at close */
    for (uint32_t i = 0; i < job->n_stored; i++) {
        struct sfd_stored *s = &job->stored[i];
        sf_summary *summary = NULL;
        if (s->remote || s->rows_evicted || s->report == NULL || kept_summary(job, s, &summary) < 0)
            continue;
        attach_one(job, &pool, summary, s->report);
        sf_change_pool_keep(&pool, &summary, s->report->gates.change_pool_windows);
        sf_summary_free(summary);
    }
    sf_change_pool_clear(&pool);
    sfd_after_window(job->sfd);
}

static struct sfd_stored *find_kept(struct sfd_job *job, int64_t window)
{
    struct sfd_stored *best = NULL;
    for (uint32_t i = 0; i < job->n_stored; i++) {
        struct sfd_stored *s = &job->stored[i];
        if (s->meta.index == window && (best == NULL || s->meta.segment > best->meta.segment))
            best = s;
    }
    return best;
}

int sfd_baseline_pin(struct sfd_job *job, int64_t window, const char **ret_err)
{
    if (!sfd_cluster_is_standalone(job->sfd)) {
        *ret_err = "pinning needs single-node mode: this node holds only its own ranks' rows";
        return -ENOTSUP;
    }
    struct sfd_stored *s = find_kept(job, window);
    if (s == NULL || s->remote || s->rows_evicted) {
        *ret_err = "that window is not kept any more (or never closed); see sfctl report --last";
        return -ENOENT;
    }
    if (s->meta.segment != job->segment) {
        *ret_err = "that window belongs to an earlier segment of another job shape";
        return -EINVAL;
    }
    sf_summary *summary = NULL;
    sf_reference *ref = NULL;
    int r = kept_summary(job, s, &summary);
    if (r == 0)
        r = sf_reference_build((const sf_summary *const *)&summary, 1, &ref);
    sf_summary_free(summary);
    if (r < 0) {
        *ret_err = r == -ENODATA ? "that window has no complete step" : "cannot build the baseline";
        return r == -ENODATA ? -EINVAL : r;
    }
    sf_reference_free(job->base.pinned);
    job->base.pinned = ref;
    job->base.changed_run = 0;
    sfd_log(SFD_LOG_NOTICE, job->id, "baseline pinned to window %lld", (long long)window);
    reattach_kept(job);
    return 0;
}

int sfd_baseline_unpin(struct sfd_job *job, const char **ret_err)
{
    if (job->base.pinned == NULL) {
        *ret_err = "no window is pinned";
        return -ENOENT;
    }
    sf_reference_free(job->base.pinned);
    job->base.pinned = NULL;
    job->base.changed_run = 0;
    sfd_log(SFD_LOG_NOTICE, job->id, "baseline pin cleared");
    if (sfd_cluster_is_standalone(job->sfd))
        reattach_kept(job);
    return 0;
}

json_t *sfd_baseline_json(const struct sfd_job *job)
{
    const sf_reference *ref = in_force(job);
    json_t *base = json_null();
    if (ref != NULL) {
        json_t *windows = json_array();
        for (uint32_t i = 0; i < ref->n_windows; i++)
            json_array_append_new(windows, json_integer(ref->windows[i]));
        base = json_pack("{s:o, s:I, s:I, s:b, s:s}", "windows", windows, "segment",
                         (json_int_t)ref->segment, "steps", (json_int_t)ref->n_steps, "pinned",
                         ref == job->base.pinned, "mode", ref->median_ns ? "dense" : "mergeable");
    }
    return json_pack(
        "{s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I}", "job", job->id, "baseline", base,
        "collected", (json_int_t)job->base.collector.n, "wanted",
        (json_int_t)job->gates.baseline_windows, "alerts_run", (json_int_t)job->base.alerts_run,
        "alerts_suppressed", (json_int_t)job->base.alerts_suppressed, "alerts_failed",
        (json_int_t)job->base.alerts_failed, "waste_rank_s", job->base.waste_rank_s,
        "pooled_windows", (json_int_t)job->base.pool.n, "pool_bytes",
        (json_int_t)job->base.pool_bytes, "pool_refused", (json_int_t)job->base.pool_refused);
}

void sfd_baseline_free(struct sfd_job *job)
{
    sfd_alert_forget(job);
    sf_reference_collector_clear(&job->base.collector);
    sf_reference_free(job->base.automatic);
    sf_reference_free(job->base.pinned);
    sf_change_pool_clear(&job->base.pool);
    sfd_job_release(job, SFD_MEM_REPORTS, job->base.pool_bytes);
    memset(&job->base, 0, sizeof job->base);
}

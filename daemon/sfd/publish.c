/*
 * Publishing a window's report: the "report ready" step of both cluster
 * implementations (cluster.c computes the report on this node,
 * cluster_peer.c from the root's merged summary). The change and the
 * what-if are attached, the summary offered to the change pool, the report
 * put in the job's kept window, and then everything a new report feeds: the
 * straggler persistence, the Prometheus export, the durable history and the
 * automatic capture trigger. It computes no report and assembles no window.
 */
#include <errno.h>

#include "capture.h"
#include "history.h"
#include "sfd.h"

static void attach_report(struct sfd_job *job, struct sfd_stored *s, sf_report *report)
{
    sfd_job_release(job, SFD_MEM_REPORTS, s->report_bytes);
    sf_straggler_track(&job->straggler, report);
    sf_report_free(s->report);
    s->report = report;
    sfd_stored_charge_report(job, s);
    if (sfd_job_latest_report(job) == report)
        job->latest_report_unix_ms = sfd_realtime_ms();
    sfd_log(SFD_LOG_DEBUG, job->id, "window %lld.%u report ready", (long long)s->meta.index,
            s->meta.segment);
    sfd_after_window(job->sfd);
    sfd_history_put_report(job->sfd, job, report);
    sfd_history_put_rows(job->sfd, job, s);
    sfd_capture_consider(job, s);
}

/* A report for a closed window, from the local core or from the cluster's
 * root. Takes ownership of report. */
static int store_report(struct sfd_job *job, sf_report *report)
{
    struct sfd_stored *s = sfd_kept_find(job, &report->meta);
    if (s == NULL) {
        sf_report_free(report); /* its window was already evicted */
        return -ENOENT;
    }
    attach_report(job, s, report);
    return 0;
}

/* A cluster report of a job with no ranks on this node, kept as a window
 * without rows. */
static int store_remote_report(struct sfd_job *job, sf_report *report)
{
    struct sfd_stored *s = sfd_kept_find(job, &report->meta);
    if (s == NULL) {
        s = sfd_kept_push(job);
        s->meta = report->meta;
        s->remote = true;
    }
    attach_report(job, s, report);
    return 0;
}

int sfd_publish_report(struct sfd_job *job, const sf_summary *summary, sf_summary *own,
                       sf_report *report, bool remote)
{
    /* A remote window already reported here (restored from the history, then
     * sent again by the catch-up after a restart) is kept as it is. */
    struct sfd_stored *held = remote ? sfd_kept_find(job, &report->meta) : NULL;
    if (held != NULL && held->report != NULL) {
        sf_report_free(report);
        sf_summary_free(own);
        return -EALREADY;
    }
    sfd_baseline_attach(job, summary, report);
    if (!remote || !sfd_cluster_is_standalone(job->sfd)) /* a cluster's: on its root */
        sfd_verdict_window(job, summary, report);
    uint32_t want = report->gates.change_pool_windows;
    if (own != NULL) {
        sfd_baseline_keep(job, &own, want);
        sf_summary_free(own); /* NULL when the job's pool took it */
    } else {
        sf_summary *copy = NULL; /* the caller keeps summary: a pool keeps a copy */
        if (want > 1 && sf_summary_clone(summary, &copy) == 0)
            sfd_baseline_keep(job, &copy, want);
        else if (want > 1) /* the later windows' changes pool fewer windows */
            sfd_log(SFD_LOG_WARNING, job->id, "window %lld: not pooled: out of memory",
                    (long long)summary->meta.index);
        sf_summary_free(copy);
    }
    return remote ? store_remote_report(job, report) : store_report(job, report);
}

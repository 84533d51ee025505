/*
 * Where a closed window's summary goes: to the cluster implementation in
 * place (cluster_peer.c), or, standalone, into a report computed on this
 * node and published (publish.c). windows.c calls it; the node's standing
 * is cluster.c's, which calls nothing back.
 */
#include <string.h>

#include "cluster.h"
#include "sfd.h"

/* The standalone implementation: every report computed here. */
static int compute_here(struct sfd_job *job, sf_summary *summary)
{
    sf_report *report;
    int r = sf_report_compute(summary, &job->gates, &report);
    if (r < 0) {
        sfd_log(SFD_LOG_ERR, job->id, "window %lld: report failed: %s",
                (long long)summary->meta.index, strerror(-r));
        sf_summary_free(summary);
        return r;
    }
    return sfd_publish_report(job, summary, summary, report, false);
}

int sfd_cluster_submit(struct sfd *d, struct sfd_job *job, sf_summary *summary)
{
    const struct sfd_cluster_ops *ops = d->cluster.ops;
    if (ops != NULL && ops->submit != NULL)
        return ops->submit(d->cluster.ctx, job, summary);
    return compute_here(job, summary);
}

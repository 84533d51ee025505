/*
 * The kept windows of a job: the ring of closed windows, each with its rows
 * (until evicted) and its report once published; adding one, finding one by
 * its window, trimming the ring, a report's memory charge and the latest
 * report. windows.c fills the ring, publish.c attaches the reports and the
 * readers (query, export, captures, history) look here; it calls none of
 * them.
 */
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

void sfd_stored_clear(struct sfd_job *job, struct sfd_stored *s)
{
    sfd_job_release(job, SFD_MEM_KEPT_ROWS, s->rows.bytes);
    sfd_job_release(job, SFD_MEM_REPORTS, s->report_bytes);
    sfd_rows_free(&s->rows);
    sf_report_free(s->report);
    memset(s, 0, sizeof(*s));
}

static uint64_t report_bytes(const sf_report *r)
{
    return sizeof(*r) + (uint64_t)r->steps * r->schema.n_stages * sizeof(uint32_t) +
           (uint64_t)r->n_suspects * sizeof(sf_suspect) +
           (uint64_t)r->n_rank_evidence * sizeof(sf_rank_evidence) +
           (uint64_t)r->schema.n_stages * 2 * (SF_MAX_NAME_LEN + 1);
}

/* Reports stay whatever the share: they are what the budget protects, so
 * their bytes are forced onto the job's uid rather than reserved. */
void sfd_stored_charge_report(struct sfd_job *job, struct sfd_stored *s)
{
    s->report_bytes = report_bytes(s->report);
    sfd_job_force(job, SFD_MEM_REPORTS, s->report_bytes);
}

void sfd_job_trim_kept(struct sfd_job *job, uint32_t keep)
{
    while (job->n_stored > keep) {
        sfd_stored_clear(job, &job->stored[0]);
        memmove(job->stored, job->stored + 1, (job->n_stored - 1) * sizeof(*job->stored));
        job->n_stored--;
    }
}

const sf_report *sfd_job_latest_report(const struct sfd_job *job)
{
    const sf_report *best = NULL;
    for (uint32_t i = 0; i < job->n_stored; i++) {
        const sf_report *r = job->stored[i].report;
        if (r == NULL)
            continue;
        if (best == NULL || r->meta.segment > best->meta.segment ||
            (r->meta.segment == best->meta.segment && r->meta.index > best->meta.index))
            best = r;
    }
    return best;
}

struct sfd_stored *sfd_kept_push(struct sfd_job *job)
{
    sfd_job_trim_kept(job, job->cap_stored - 1);
    struct sfd_stored *s = &job->stored[job->n_stored++];
    memset(s, 0, sizeof(*s));
    s->seq = ++job->sfd->store_seq;
    return s;
}

struct sfd_stored *sfd_kept_find(struct sfd_job *job, const sf_window_meta *meta)
{
    for (uint32_t i = job->n_stored; i-- > 0;)
        if (job->stored[i].meta.index == meta->index &&
            job->stored[i].meta.segment == meta->segment)
            return &job->stored[i];
    return NULL;
}

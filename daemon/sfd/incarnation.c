/*
 * Which run of a job id a hello belongs to. Job ids repeat: a user reruns a
 * script, a launcher without a rendezvous id names every run alike, a
 * scheduler's array job reuses a name. The ranks of one launch send the same
 * run id (client/lib/launch_id.c), so sfd tells, without asking the ranks:
 *   - more ranks of the run it has, which join the newest incarnation;
 *   - an elastic restart of that run (same run id, higher restart count,
 *     every rank gone), a new segment that keeps the baseline;
 *   - a rerun (another run id, or a rank starting again after its run
 *     ended), a new incarnation with fresh windows.
 * The rules are documented in docs/SFD.md, "Identity".
 */
#include <errno.h>
#include <string.h>

#include "sfd.h"

enum launch_verdict { LAUNCH_JOIN, LAUNCH_SEGMENT, LAUNCH_NEW };

/* Two runs differ only when both say who they are: a job restored from
 * history, or a launcher that sets nothing, matches any run. */
static bool runs_differ(const struct sfd_job *job, const char *run_id)
{
    return job->run_id[0] != '\0' && run_id[0] != '\0' && strcmp(job->run_id, run_id) != 0;
}

/* Every rank gone and every window closed, after the job had records. */
static bool job_ended(const struct sfd_job *job)
{
    return job->n_live_ranks == 0 && job->n_open == 0 && (job->records > 0 || job->n_stored > 0);
}

static enum launch_verdict judge(const struct sfd_job *job, const struct sfd_launch *l)
{
    if (runs_differ(job, l->run_id))
        return LAUNCH_NEW;
    /* A side channel (NCCL batches, heartbeats) describes the run its
     * process is in: it may connect after that run's step channel has gone
     * (the plugin ships its last batch at close), and must not start a run. */
    if (l->side_channel || job->n_live_ranks > 0 || l->reconnect)
        return LAUNCH_JOIN;
    if (l->run_id[0] != '\0' && strcmp(job->run_id, l->run_id) == 0 &&
        l->restart_count > job->restart_count)
        return LAUNCH_SEGMENT;
    /* A rank that already spoke in this incarnation starts again: its run
     * ended. A rank not seen yet is a late rank of the run, until the run
     * has ended. */
    const struct sfd_rank *rk = sfd_job_rank_peek(job, l->rank);
    if (rk->seen || rk->last_step >= 0 || job_ended(job))
        return LAUNCH_NEW;
    return LAUNCH_JOIN;
}

static void note_launch(struct sfd_job *job, const struct sfd_launch *l)
{
    if (job->run_id[0] == '\0' && l->run_id[0] != '\0')
        snprintf(job->run_id, sizeof job->run_id, "%s", l->run_id);
    if (l->restart_count > job->restart_count)
        job->restart_count = l->restart_count;
}

int sfd_job_for_launch(struct sfd *d, const struct sfd_launch *l, struct sfd_job **ret,
                       enum sfd_reject *ret_why)
{
    struct sfd_job *job = sfd_job_lookup(d, l->uid, l->job_id, 0);
    int r;
    switch (job == NULL ? LAUNCH_JOIN : judge(job, l)) {
    case LAUNCH_JOIN:
        r = sfd_job_find_or_create(d, l->job_id, l->uid, job ? job->incarnation : 0, &job, ret_why);
        break;
    case LAUNCH_SEGMENT:
        note_launch(job, l);
        r = sfd_job_restart_segment(job);
        if (r < 0)
            *ret_why = SFD_REJ_MEMORY;
        break;
    default: {
        uint32_t next = job->incarnation + 1;
        r = sfd_job_create(d, l->job_id, l->uid, next, &job, ret_why);
        if (r == 0)
            sfd_log(SFD_LOG_NOTICE, l->job_id, "job id used again: incarnation %u", next);
    }
    }
    if (r < 0)
        return r;
    note_launch(job, l);
    job->reports_only = false; /* a rank of it is here now */
    *ret = job;
    return 0;
}

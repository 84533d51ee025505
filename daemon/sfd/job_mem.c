/*
 * A job's memory charges against the budget (budget.c keeps the books per
 * uid), and the one way room is made: freeing the uid's own oldest kept rows,
 * never another uid's and never a report. It reads the job table and the
 * kept windows but calls nothing above them.
 */
#include <errno.h>
#include <string.h>

#include "sfd.h"

struct sfd_budget_limits sfd_mem_limits(const struct sfd *d)
{
    return (struct sfd_budget_limits){.total = (uint64_t)d->cfg.max_memory_mb << 20,
                                      .per_uid = (uint64_t)d->cfg.max_memory_per_uid_mb << 20};
}

int sfd_job_reserve(struct sfd_job *job, enum sfd_mem_kind kind, uint64_t n)
{
    int r = sfd_mem_reserve(job->sfd, job->uid, kind, n);
    if (r == 0)
        job->mem[kind] += n;
    return r;
}

int sfd_job_charge(struct sfd_job *job, enum sfd_mem_kind kind, uint64_t n)
{
    struct sfd_budget_limits lim = sfd_mem_limits(job->sfd);
    int r = sfd_budget_charge(&job->sfd->mem, &lim, job->uid, kind, n);
    if (r == 0)
        job->mem[kind] += n;
    return r;
}

void sfd_job_force(struct sfd_job *job, enum sfd_mem_kind kind, uint64_t n)
{
    sfd_budget_force(&job->sfd->mem, job->uid, kind, n);
    job->mem[kind] += n;
}

void sfd_job_release(struct sfd_job *job, enum sfd_mem_kind kind, uint64_t n)
{
    sfd_budget_uncharge(&job->sfd->mem, job->uid, kind, n);
    job->mem[kind] = job->mem[kind] > n ? job->mem[kind] - n : 0;
}

uint64_t sfd_job_mem_total(const struct sfd_job *job)
{
    uint64_t t = 0;
    for (int k = 0; k < SFD_MEM_KIND_COUNT; k++)
        t += job->mem[k];
    return t;
}

/* The uid's kept window with rows that closed first, over all its jobs. */
static struct sfd_stored *oldest_kept_rows(struct sfd *d, uid_t uid, struct sfd_job **ret_job)
{
    struct sfd_stored *best = NULL;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        if (j->uid != uid)
            continue;
        for (uint32_t i = 0; i < j->n_stored; i++) {
            struct sfd_stored *s = &j->stored[i];
            if (s->rows.bytes != 0 && (best == NULL || s->seq < best->seq)) {
                best = s;
                *ret_job = j;
            }
        }
    }
    return best;
}

static void evict_rows(struct sfd_job *job, struct sfd_stored *s)
{
    sfd_job_release(job, SFD_MEM_KEPT_ROWS, s->rows.bytes);
    sfd_rows_free(&s->rows);
    s->rows_evicted = true;
    job->evicted_windows++;
    job->sfd->mem.evicted_windows++;
    sfd_log(SFD_LOG_INFO, job->id, "window %lld.%u: rows dropped for uid %u's memory share",
            (long long)s->meta.index, s->meta.segment, (unsigned)job->uid);
}

int sfd_mem_reserve(struct sfd *d, uid_t uid, enum sfd_mem_kind kind, uint64_t n)
{
    struct sfd_budget_limits lim = sfd_mem_limits(d);
    while (sfd_budget_charge(&d->mem, &lim, uid, kind, n) < 0) {
        struct sfd_job *job = NULL;
        struct sfd_stored *s = oldest_kept_rows(d, uid, &job);
        if (s == NULL)
            return -ENOMEM;
        evict_rows(job, s);
    }
    return 0;
}

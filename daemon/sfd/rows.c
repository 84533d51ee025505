/*
 * The rows of a window, open or kept: freeing them, and the view of them as
 * the core's sf_row (pointing into the rows and the job's roles). It charges
 * nothing and calls nothing else in sfd, so every layer above may use it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

void sfd_rows_free(struct sfd_rows *rows)
{
    free(rows->rec);
    free(rows->d);
    free(rows->lag);
    memset(rows, 0, sizeof(*rows));
}

void sfd_window_free(struct sfd_window *w)
{
    if (w == NULL)
        return;
    sfd_rows_free(&w->rows);
    free(w->order.head);
    free(w->order.tail);
    free(w->order.count);
    free(w->order.next);
    free(w);
}

void sfd_rows_row(const struct sfd_job *job, const struct sfd_rows *rows, size_t i, sf_row *ret)
{
    const struct sfd_rec *r = &rows->rec[i];
    *ret = (sf_row){
        .step = r->step,
        .rank = r->rank,
        .flags = r->flags,
        .overlap_ns = r->overlap_ns,
        .d = rows->d + i * job->schema.n_stages,
        .issue_lag = rows->lag ? rows->lag + i * (size_t)sfd_rows_mark_count(job) : NULL,
        .sync_wait =
            rows->lag ? rows->lag + i * (size_t)sfd_rows_mark_count(job) + sfd_rows_sync_count(job)
                      : NULL,
        .role = r->role < job->n_roles ? job->roles[r->role] : "",
        .parallel = sfd_job_parallel_of(job, r->rank),
        .event_state = r->event_state,
        .event_cpu_ns = r->event_cpu_ns,
        .event_gpu_ns = r->event_gpu_ns,
    };
}

uint32_t sfd_rows_sync_count(const struct sfd_job *job)
{
    return (uint32_t)__builtin_popcountll(job->schema.sync_mask);
}

uint32_t sfd_rows_mark_count(const struct sfd_job *job)
{
    return 3 * sfd_rows_sync_count(job);
}

uint64_t sfd_rows_bytes(const struct sfd_job *job, size_t cap)
{
    return (uint64_t)cap * (sizeof(struct sfd_rec) +
                            (job->schema.n_stages + sfd_rows_mark_count(job)) * sizeof(int64_t));
}

int sfd_rows_view(const struct sfd_job *job, const struct sfd_rows *rows, sf_row **ret)
{
    sf_row *v = calloc(rows->n ? rows->n : 1, sizeof(*v));
    if (v == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < rows->n; i++)
        sfd_rows_row(job, rows, i, &v[i]);
    *ret = v;
    return 0;
}

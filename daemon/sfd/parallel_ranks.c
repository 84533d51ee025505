/*
 * A job's parallel coordinates (docs/SFD.md, "Parallel coordinates"): each
 * step-record hello's coordinates checked against the job's, so that the
 * ranks tile the world: one shape for the job, each coordinate tuple held by
 * one rank, and a rank's coordinates unchanged across its hellos. A hello
 * that does not fit is refused alone; the job's other ranks keep theirs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

static uint64_t par_bytes(uint32_t world)
{
    return sizeof(struct sfd_parallel) + (uint64_t)world * (sizeof(uint32_t) + sizeof(sf_parallel));
}

void sfd_job_parallel_free(struct sfd_job *job)
{
    if (job->par == NULL)
        return;
    free(job->par->owner);
    free(job->par->coords);
    free(job->par);
    job->par = NULL;
    sfd_job_release(job, SFD_MEM_RANKS, par_bytes(job->world_size));
}

/* The tables, sized by the world, on the first declaring hello. */
static int par_alloc(struct sfd_job *job, const sf_parallel *shape)
{
    if (sfd_job_reserve(job, SFD_MEM_RANKS, par_bytes(job->world_size)) < 0)
        return -ENOMEM;
    struct sfd_parallel *p = calloc(1, sizeof *p);
    if (p != NULL) {
        p->owner = calloc(job->world_size, sizeof *p->owner);
        p->coords = calloc(job->world_size, sizeof *p->coords);
    }
    if (p == NULL || p->owner == NULL || p->coords == NULL) {
        if (p != NULL) {
            free(p->owner);
            free(p->coords);
        }
        free(p);
        sfd_job_release(job, SFD_MEM_RANKS, par_bytes(job->world_size));
        return -ENOMEM;
    }
    p->shape = *shape;
    memset(p->shape.index, 0, sizeof p->shape.index);
    job->par = p;
    return 0;
}

static int conflict(enum sfd_reject *why)
{
    *why = SFD_REJ_PARALLEL_CONFLICT;
    return -EINVAL;
}

/* A rank that declared before must declare the same again; one that sent a
 * hello without coordinates must go on without. */
static bool same_as_before(const struct sfd_job *job, const struct sfd_rank *rk, uint32_t rank,
                           const sf_parallel *p)
{
    if (!rk->hello_seen)
        return true;
    if (!rk->declared_parallel || p == NULL)
        return !rk->declared_parallel && p == NULL;
    return sf_parallel_equal(&job->par->coords[rank], p);
}

int sfd_job_parallel_bind(struct sfd_job *job, struct sfd_rank *rk, uint32_t rank,
                          const sf_parallel *p, enum sfd_reject *why)
{
    if (rank >= job->world_size || !same_as_before(job, rk, rank, p))
        return conflict(why);
    if (p == NULL) {
        rk->hello_seen = 1;
        return 0;
    }
    if (job->par != NULL && !sf_parallel_same_shape(&job->par->shape, p))
        return conflict(why);
    uint64_t tuple = sf_parallel_tuple(p); /* < world: the hello's check */
    if (tuple >= job->world_size)
        return conflict(why);
    if (job->par != NULL && job->par->owner[tuple] != 0 && job->par->owner[tuple] != rank + 1)
        return conflict(why);
    if (job->par == NULL && par_alloc(job, p) < 0) {
        *why = SFD_REJ_MEMORY;
        return -ENOMEM;
    }
    if (!rk->declared_parallel)
        job->par->n_declared++;
    job->par->owner[tuple] = rank + 1;
    job->par->coords[rank] = *p;
    rk->hello_seen = 1;
    rk->declared_parallel = 1;
    return 0;
}

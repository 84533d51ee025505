/*
 * sfd job table: creation under the max_jobs bound (evicting the oldest idle
 * job), uid ownership, schema / world-size binding and segments, role
 * interning and query visibility. Window assembly lives in windows.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"
#include "side_evidence.h"

struct sfd_job *sfd_job_find(struct sfd *d, const char *id)
{
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        if (strcmp(j->id, id) == 0)
            return j;
    return NULL;
}

static void unlink_job(struct sfd *d, struct sfd_job *job)
{
    for (struct sfd_job **p = &d->jobs; *p != NULL; p = &(*p)->next) {
        if (*p == job) {
            *p = job->next;
            d->n_jobs--;
            return;
        }
    }
}

/* Oldest job with no connection and no open window, or NULL. */
static struct sfd_job *idle_victim(struct sfd *d)
{
    struct sfd_job *best = NULL;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        if (j->n_live == 0 && j->n_open == 0 &&
            (best == NULL || j->last_active_ms < best->last_active_ms))
            best = j;
    return best;
}

int sfd_job_find_or_create(struct sfd *d, const char *id, uid_t uid, struct sfd_job **ret,
                           enum sfd_reject *ret_why)
{
    struct sfd_job *job = sfd_job_find(d, id);
    if (job != NULL) {
        if (job->uid == SFD_UID_REMOTE && job->n_live == 0)
            job->uid = uid;     /* known from cluster reports until now: the first rank adopts it */
        if (job->uid != uid) {
            *ret_why = SFD_REJ_UID;
            return -EPERM;
        }
        *ret = job;
        return 0;
    }
    if (d->n_jobs >= d->cfg.max_jobs) {
        struct sfd_job *victim = idle_victim(d);
        if (victim == NULL) {
            *ret_why = SFD_REJ_MAX_JOBS;
            return -ENOSPC;
        }
        sfd_log(SFD_LOG_INFO, victim->id, "job table full: forgetting idle job");
        unlink_job(d, victim);
        sfd_job_free(victim);
    }
    job = calloc(1, sizeof(*job));
    if (job == NULL) {
        *ret_why = SFD_REJ_MAX_JOBS;
        return -ENOMEM;
    }
    job->sfd = d;
    snprintf(job->id, sizeof(job->id), "%s", id);
    job->uid = uid;
    job->gates = d->cfg.gates;
    job->closed_max = -1;
    job->max_step = -1;
    job->cap_stored = d->cfg.keep_windows;
    job->stored = calloc(job->cap_stored, sizeof(*job->stored));
    job->roles[0] = strdup("");
    if (job->stored == NULL || job->roles[0] == NULL) {
        sfd_job_free(job);
        *ret_why = SFD_REJ_MAX_JOBS;
        return -ENOMEM;
    }
    job->n_roles = 1;
    job->last_active_ms = sfd_now_ms(d);
    job->next = d->jobs;
    d->jobs = job;
    d->n_jobs++;
    sfd_log(SFD_LOG_INFO, job->id, "new job owned by uid %u", (unsigned)uid);
    *ret = job;
    return 0;
}

void sfd_job_free(struct sfd_job *job)
{
    if (job == NULL)
        return;
    for (uint32_t i = 0; i < job->n_open; i++) {
        sfd_rows_free(&job->open[i]->rows);
        free(job->open[i]);
    }
    for (uint32_t i = 0; i < job->n_stored; i++)
        sfd_stored_clear(&job->stored[i]);
    free(job->stored);
    for (uint32_t i = 0; i < job->n_roles; i++)
        free(job->roles[i]);
    free(job->ranks);
    sfd_side_free(job->side);
    sf_schema_clear(&job->schema);
    free(job);
}

void sfd_jobs_free_all(struct sfd *d)
{
    while (d->jobs != NULL) {
        struct sfd_job *j = d->jobs;
        d->jobs = j->next;
        sfd_job_free(j);
    }
    d->n_jobs = 0;
}

int sfd_job_role(struct sfd_job *job, const char *role)
{
    if (role == NULL)
        role = "";
    for (uint32_t i = 0; i < job->n_roles; i++)
        if (strcmp(job->roles[i], role) == 0)
            return (int)i;
    if (job->n_roles >= SFD_MAX_JOB_ROLES)
        return -ENOSPC;
    char *copy = strdup(role);
    if (copy == NULL)
        return -ENOMEM;
    job->roles[job->n_roles] = copy;
    return (int)job->n_roles++;
}

static int reset_ranks(struct sfd_job *job, uint32_t world_size)
{
    struct sfd_rank *r = calloc(world_size, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < world_size; i++)
        r[i].last_step = -1;
    free(job->ranks);
    job->ranks = r;
    job->world_size = world_size;
    return 0;
}

int sfd_job_bind_shape(struct sfd_job *job, const sf_schema *schema, uint32_t world_size)
{
    bool fresh = job->ranks == NULL;
    if (!fresh && job->world_size == world_size && sf_schema_equal(&job->schema, schema))
        return 0;
    if (job->n_live > 0)
        return job->world_size != world_size ? -EXDEV : -EBADE;

    sf_schema copy;
    int r = sf_schema_copy(&copy, schema);
    if (r < 0)
        return r;
    r = reset_ranks(job, world_size);
    if (r < 0) {
        sf_schema_clear(&copy);
        return r;
    }
    if (!fresh) {
        /* The open windows close early and the same indices continue as the
         * next segment, with fresh per-rank step order. */
        sfd_window_close_all(job, SF_WIN_CLOSED_EARLY);
        job->segment++;
        job->closed_max = -1;
        job->max_step = -1;
        sfd_log(SFD_LOG_NOTICE, job->id, "shape changed: segment %u, world size %u",
                job->segment, world_size);
    }
    sf_schema_clear(&job->schema);
    job->schema = copy;
    return 0;
}

bool sfd_job_visible(const struct sfd *d, const struct sfd_job *job, uid_t uid, bool operator_)
{
    (void)d;
    return operator_ || uid == 0 || job->uid == uid;
}

/*
 * A job's life in the table: admission under max_jobs and max_jobs_per_uid
 * (forgetting the oldest idle job to make room), creation, and freeing
 * everything the job owns (windows, kept windows, baseline, captures, side
 * evidence), every byte going back to its uid. jobs.c holds the job's state
 * and lookups; this file sits above the parts it frees.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "enqueue_points.h"
#include "sfd.h"
#include "side_evidence.h"

static uint64_t job_base_bytes(uint32_t keep)
{
    return sizeof(struct sfd_job) + (uint64_t)keep * sizeof(struct sfd_stored);
}

static void unlink_job(struct sfd *d, struct sfd_job *job)
{
    for (struct sfd_job **p = &d->jobs; *p != NULL; p = &(*p)->next) {
        if (*p == job) {
            *p = job->next;
            d->n_jobs--;
            sfd_budget_job_remove(&d->mem, job->uid);
            return;
        }
    }
}

/* Oldest job with no connection and no open window, or NULL. The uid's own
 * idle jobs go first, so a uid filling the table forgets its own history
 * before anyone else's; with own_only, only the uid's own jobs qualify. */
static struct sfd_job *idle_victim(struct sfd *d, uid_t uid, bool own_only)
{
    struct sfd_job *best = NULL;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        if (j->n_live != 0 || j->n_open != 0 || (own_only && j->uid != uid))
            continue;
        bool own = j->uid == uid, best_own = best != NULL && best->uid == uid;
        if (best == NULL || (own && !best_own) ||
            (own == best_own && j->last_active_ms < best->last_active_ms))
            best = j;
    }
    return best;
}

static void forget_job(struct sfd *d, struct sfd_job *victim, const char *why)
{
    sfd_log(SFD_LOG_INFO, victim->id, "%s: forgetting idle job of uid %u", why,
            (unsigned)victim->uid);
    unlink_job(d, victim);
    sfd_job_free(victim);
}

static int make_table_room(struct sfd *d, uid_t uid, enum sfd_reject *ret_why)
{
    if (d->n_jobs < d->cfg.max_jobs)
        return 0;
    struct sfd_job *victim = idle_victim(d, uid, false);
    if (victim == NULL) {
        *ret_why = SFD_REJ_MAX_JOBS;
        return -ENOSPC;
    }
    forget_job(d, victim, "job table full");
    return 0;
}

/* A uid at max_jobs_per_uid forgets its own oldest idle job, so a user who
 * runs job after job on a node is never locked out by its own history. With
 * no idle job of its own, admit_job refuses the new one. */
static void make_uid_room(struct sfd *d, uid_t uid, uint32_t cap)
{
    const struct sfd_uid_share *s = sfd_budget_share(&d->mem, uid);
    if (s == NULL || s->jobs < cap)
        return;
    struct sfd_job *victim = idle_victim(d, uid, true);
    if (victim != NULL)
        forget_job(d, victim, "max_jobs_per_uid reached");
}

/* Counts the job in its uid's share: max_jobs_per_uid and the bytes of the
 * job itself. Undone by unlink_job and sfd_job_free. */
static int admit_job(struct sfd *d, uid_t uid, enum sfd_reject *ret_why)
{
    uint32_t cap = d->cfg.max_jobs_per_uid;
    make_uid_room(d, uid, cap);
    int r = sfd_budget_job_add(&d->mem, uid, cap);
    if (r < 0) {
        *ret_why = r == -EDQUOT ? SFD_REJ_MAX_JOBS_PER_UID : SFD_REJ_MEMORY;
        return r;
    }
    r = sfd_mem_reserve(d, uid, SFD_MEM_JOBS, job_base_bytes(d->cfg.keep_windows));
    if (r < 0) {
        sfd_budget_job_remove(&d->mem, uid);
        *ret_why = SFD_REJ_MEMORY;
    }
    return r;
}

int sfd_job_find_or_create(struct sfd *d, const char *id, uid_t uid, uint32_t incarnation,
                           struct sfd_job **ret, enum sfd_reject *ret_why)
{
    struct sfd_job *job = sfd_job_lookup(d, uid, id, incarnation);
    if (job != NULL) {
        *ret = job;
        return 0;
    }
    return sfd_job_create(d, id, uid, incarnation ? incarnation : 1, ret, ret_why);
}

int sfd_job_create(struct sfd *d, const char *id, uid_t uid, uint32_t incarnation,
                   struct sfd_job **ret, enum sfd_reject *ret_why)
{
    if (incarnation < 1 || incarnation > SF_MAX_INCARNATION) {
        *ret_why = SFD_REJ_INVALID;
        return -ERANGE;
    }
    int r = make_table_room(d, uid, ret_why);
    if (r < 0)
        return r;
    r = admit_job(d, uid, ret_why);
    if (r < 0)
        return r;
    struct sfd_job *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        sfd_budget_uncharge(&d->mem, uid, SFD_MEM_JOBS, job_base_bytes(d->cfg.keep_windows));
        sfd_budget_job_remove(&d->mem, uid);
        *ret_why = SFD_REJ_MEMORY;
        return -ENOMEM;
    }
    job->sfd = d;
    job->mem[SFD_MEM_JOBS] = job_base_bytes(d->cfg.keep_windows);
    snprintf(job->id, sizeof(job->id), "%s", id);
    job->uid = uid;
    job->incarnation = incarnation;
    job->gates = d->cfg.gates;
    job->closed_max = -1;
    job->max_step = -1;
    job->max_claim = job->second_claim = -1;
    job->cap_stored = d->cfg.keep_windows;
    job->stored = calloc(job->cap_stored, sizeof(*job->stored));
    job->roles[0] = strdup("");
    if (job->stored == NULL || job->roles[0] == NULL) {
        sfd_job_free(job);
        sfd_budget_job_remove(&d->mem, uid);
        *ret_why = SFD_REJ_MEMORY;
        return -ENOMEM;
    }
    job->n_roles = 1;
    job->last_active_ms = sfd_now_ms(d);
    job->next = d->jobs;
    d->jobs = job;
    d->n_jobs++;
    sfd_log(SFD_LOG_INFO, job->id, "new job owned by uid %u, incarnation %u", (unsigned)uid,
            incarnation);
    *ret = job;
    return 0;
}

/* Frees a job unlinked from the table (or never linked): every byte charged
 * to it goes back to its uid. */
void sfd_job_free(struct sfd_job *job)
{
    if (job == NULL)
        return;
    sfd_baseline_free(job);
    sfd_verdict_free(job);
    sfd_captures_free(job);
    for (uint32_t i = 0; i < job->n_open; i++)
        sfd_window_free(job->open[i]);
    for (uint32_t i = 0; i < job->n_stored; i++)
        sfd_stored_clear(job, &job->stored[i]);
    free(job->stored);
    for (uint32_t i = 0; i < job->n_roles; i++)
        free(job->roles[i]);
    for (uint32_t i = 0; i < job->n_hosts; i++)
        free(job->hosts[i]);
    free(job->hosts);
    sfd_job_free_ranks(job);
    for (int k = 0; k < SFD_MEM_KIND_COUNT; k++)
        sfd_job_release(job, (enum sfd_mem_kind)k, job->mem[k]);
    sfd_side_free(job->side);
    sfd_enq_free(job->enq);
    sf_schema_clear(&job->schema);
    free(job);
}

void sfd_jobs_free_all(struct sfd *d)
{
    while (d->jobs != NULL) {
        struct sfd_job *j = d->jobs;
        unlink_job(d, j);
        sfd_job_free(j);
    }
}

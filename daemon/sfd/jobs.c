/*
 * sfd job table: lookups by (uid, job id, incarnation), a job's key and
 * name, per-rank pages, role and host interning, the hello's geometry and
 * query visibility. The bottom of sfd's job state: it calls only the memory
 * charges (job_mem.c). A job's admission and end are job_life.c's, its
 * windows and segments windows.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

struct sfd_job *sfd_job_lookup(struct sfd *d, uid_t uid, const char *id, uint32_t incarnation)
{
    struct sfd_job *newest = NULL;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        if (j->uid != uid || strcmp(j->id, id) != 0)
            continue;
        if (j->incarnation == incarnation)
            return j;
        if (incarnation == 0 && (newest == NULL || j->incarnation > newest->incarnation))
            newest = j;
    }
    return newest;
}

bool sfd_job_is_newest(const struct sfd *d, const struct sfd_job *job)
{
    for (const struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        if (j->uid == job->uid && j->incarnation > job->incarnation && strcmp(j->id, job->id) == 0)
            return false;
    return true;
}

void sfd_job_key(const struct sfd_job *job, char *buf, size_t len)
{
    if (job->incarnation > 1)
        snprintf(buf, len, "%s@%u", job->id, job->incarnation);
    else
        snprintf(buf, len, "%s", job->id);
}

int sfd_job_key_parse(const char *key, char *ret_id, size_t id_len, uint32_t *ret_incarnation)
{
    struct sfd_job_ref ref;
    if (strchr(key, '/') != NULL || sfd_job_ref_parse(key, &ref) < 0 || strlen(ref.id) >= id_len)
        return -EINVAL;
    memcpy(ret_id, ref.id, strlen(ref.id) + 1);
    *ret_incarnation = ref.incarnation ? ref.incarnation : 1;
    return 0;
}

void sfd_job_name(const struct sfd *d, const struct sfd_job *job, char *buf, size_t len)
{
    char key[SF_MAX_JOB_ID_LEN + 16];
    sfd_job_key(job, key, sizeof key);
    for (const struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        if (j->uid != job->uid && strcmp(j->id, job->id) == 0) {
            snprintf(buf, len, "%u/%s", (unsigned)job->uid, key);
            return;
        }
    }
    snprintf(buf, len, "%s", key);
}

void sfd_job_free_ranks(struct sfd_job *job)
{
    sfd_job_parallel_free(job); /* sized by the same world */
    if (job->rank_pages == NULL)
        return;
    for (uint32_t p = 0; p < (job->world_size + SFD_RANK_PAGE - 1) / SFD_RANK_PAGE; p++)
        free(job->rank_pages[p]);
    free(job->rank_pages);
    job->rank_pages = NULL;
    sfd_job_release(job, SFD_MEM_RANKS, job->mem[SFD_MEM_RANKS]);
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

static int hosts_grow(struct sfd_job *job)
{
    uint32_t cap = job->cap_hosts ? job->cap_hosts * 2 : 16;
    if (sfd_job_reserve(job, SFD_MEM_JOBS, (uint64_t)(cap - job->cap_hosts) * sizeof(char *)) < 0)
        return -ENOMEM;
    char **h = realloc(job->hosts, cap * sizeof(*h));
    if (h == NULL) {
        sfd_job_release(job, SFD_MEM_JOBS, (uint64_t)(cap - job->cap_hosts) * sizeof(char *));
        return -ENOMEM;
    }
    job->hosts = h;
    job->cap_hosts = cap;
    return 0;
}

static uint32_t clamp_u32(int64_t v, uint32_t lo, uint32_t hi, bool *clamped)
{
    uint32_t c = v < (int64_t)lo ? lo : v > (int64_t)hi ? hi : (uint32_t)v;
    *clamped |= c != v;
    return c;
}

void sfd_job_ask_geometry(struct sfd_job *job, int64_t window_steps, int64_t warmup_steps)
{
    if (window_steps < 0 && warmup_steps < 0)
        return;
    bool clamped = false;
    uint32_t w = window_steps < 0 ? job->gates.window_steps
                                  : clamp_u32(window_steps, 1, SF_MAX_WINDOW_STEPS, &clamped);
    uint32_t u = warmup_steps < 0
                     ? job->gates.warmup_steps
                     : clamp_u32(warmup_steps, 0, SFD_MAX_HELLO_WARMUP_STEPS, &clamped);
    if (w == job->gates.window_steps && u == job->gates.warmup_steps && !clamped)
        return;
    if (job->records > 0 || job->n_open > 0 || job->n_stored > 0) {
        sfd_log(SFD_LOG_WARNING, job->id,
                "hello asks window_steps %lld warmup_steps %lld; "
                "the job keeps %u and %u",
                (long long)window_steps, (long long)warmup_steps, job->gates.window_steps,
                job->gates.warmup_steps);
        return;
    }
    job->gates.window_steps = w;
    job->gates.warmup_steps = u;
    job->geometry_asked = true;
    job->geometry_clamped |= clamped;
    sfd_log(clamped ? SFD_LOG_WARNING : SFD_LOG_INFO, job->id,
            "window_steps %u, warmup_steps %u as the job asked%s", w, u,
            clamped ? " (clamped to 1..16384 and 0..1048576)" : "");
}

uint16_t sfd_job_host(struct sfd_job *job, const char *host)
{
    if (host == NULL || host[0] == '\0')
        return 0;
    for (uint32_t i = 1; i < job->n_hosts; i++)
        if (strcmp(job->hosts[i], host) == 0)
            return (uint16_t)i;
    if (job->n_hosts >= SFD_MAX_JOB_HOSTS)
        return 0;
    size_t len = strlen(host) + 1;
    if ((job->n_hosts + 2 > job->cap_hosts && hosts_grow(job) < 0) ||
        sfd_job_reserve(job, SFD_MEM_JOBS, len) < 0)
        return 0;
    if (job->n_hosts == 0 && (job->hosts[job->n_hosts++] = strdup("")) == NULL) {
        job->n_hosts = 0;
        sfd_job_release(job, SFD_MEM_JOBS, len);
        return 0;
    }
    char *copy = malloc(len);
    if (copy == NULL) {
        sfd_job_release(job, SFD_MEM_JOBS, len);
        return 0;
    }
    memcpy(copy, host, len);
    job->hosts[job->n_hosts] = copy;
    return (uint16_t)job->n_hosts++;
}

/* A directory of page pointers sized by the world size (8 bytes per 256
 * ranks); the pages themselves come as ranks appear. */
int sfd_job_reset_ranks(struct sfd_job *job, uint32_t world_size)
{
    uint32_t n_pages = (world_size + SFD_RANK_PAGE - 1) / SFD_RANK_PAGE;
    uint64_t bytes = (uint64_t)n_pages * sizeof(struct sfd_rank *);
    sfd_job_free_ranks(job);
    int r = sfd_job_reserve(job, SFD_MEM_RANKS, bytes);
    if (r < 0)
        return r;
    job->rank_pages = calloc(n_pages, sizeof(*job->rank_pages));
    if (job->rank_pages == NULL) {
        sfd_job_release(job, SFD_MEM_RANKS, bytes);
        return -ENOMEM;
    }
    job->world_size = world_size;
    job->ranks_seen = 0;
    return 0;
}

int sfd_job_rank(struct sfd_job *job, uint32_t rank, struct sfd_rank **ret)
{
    if (rank >= job->world_size || job->rank_pages == NULL)
        return -ERANGE;
    struct sfd_rank **page = &job->rank_pages[rank / SFD_RANK_PAGE];
    if (*page == NULL) {
        uint64_t bytes = SFD_RANK_PAGE * sizeof(struct sfd_rank);
        int r = sfd_job_reserve(job, SFD_MEM_RANKS, bytes);
        if (r < 0)
            return r;
        *page = calloc(SFD_RANK_PAGE, sizeof(struct sfd_rank));
        if (*page == NULL) {
            sfd_job_release(job, SFD_MEM_RANKS, bytes);
            return -ENOMEM;
        }
        for (uint32_t i = 0; i < SFD_RANK_PAGE; i++)
            (*page)[i].last_step = (*page)[i].claimed_step = (*page)[i].local_rank = -1;
    }
    *ret = &(*page)[rank % SFD_RANK_PAGE];
    return 0;
}

const struct sfd_rank *sfd_job_rank_peek(const struct sfd_job *job, uint32_t rank)
{
    static const struct sfd_rank unseen = {.last_step = -1, .claimed_step = -1, .local_rank = -1};
    if (rank >= job->world_size || job->rank_pages == NULL)
        return &unseen;
    const struct sfd_rank *page = job->rank_pages[rank / SFD_RANK_PAGE];
    return page != NULL ? &page[rank % SFD_RANK_PAGE] : &unseen;
}

bool sfd_job_visible(const struct sfd *d, const struct sfd_job *job, uid_t uid, bool operator_)
{
    (void)d;
    return operator_ || uid == 0 || job->uid == uid;
}

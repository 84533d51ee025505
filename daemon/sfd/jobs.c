/*
 * sfd job table: jobs keyed by (uid, job id), creation under max_jobs and
 * max_jobs_per_uid (evicting the oldest idle job), schema / world-size binding
 * and segments, per-rank pages, the job's memory charges, role interning and
 * query visibility. Window assembly lives in windows.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "sfd.h"
#include "enqueue_points.h"
#include "side_evidence.h"

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

/* ---- memory charges ------------------------------------------------------- */

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

static void free_rank_pages(struct sfd_job *job)
{
    if (job->rank_pages == NULL)
        return;
    for (uint32_t p = 0; p < (job->world_size + SFD_RANK_PAGE - 1) / SFD_RANK_PAGE; p++)
        free(job->rank_pages[p]);
    free(job->rank_pages);
    job->rank_pages = NULL;
    sfd_job_release(job, SFD_MEM_RANKS, job->mem[SFD_MEM_RANKS]);
}

/* Frees a job unlinked from the table (or never linked): every byte charged
 * to it goes back to its uid. */
void sfd_job_free(struct sfd_job *job)
{
    if (job == NULL)
        return;
    sfd_baseline_free(job);
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
    free_rank_pages(job);
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
static int reset_ranks(struct sfd_job *job, uint32_t world_size)
{
    uint32_t n_pages = (world_size + SFD_RANK_PAGE - 1) / SFD_RANK_PAGE;
    uint64_t bytes = (uint64_t)n_pages * sizeof(struct sfd_rank *);
    free_rank_pages(job);
    int r = sfd_job_reserve(job, SFD_MEM_RANKS, bytes);
    if (r < 0)
        return r;
    job->rank_pages = calloc(n_pages, sizeof(*job->rank_pages));
    if (job->rank_pages == NULL) {
        sfd_job_release(job, SFD_MEM_RANKS, bytes);
        return -ENOMEM;
    }
    job->world_size = world_size;
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

/* The open windows close early and the same indices continue as the next
 * segment, with fresh per-rank step order (the caller resets the ranks). */
static void next_segment(struct sfd_job *job)
{
    sfd_window_close_all(job, SF_WIN_CLOSED_EARLY);
    job->segment++;
    job->closed_max = -1;
    job->max_step = -1;
    job->max_claim = job->second_claim = -1;
}

int sfd_job_restart_segment(struct sfd_job *job)
{
    int r = reset_ranks(job, job->world_size);
    if (r < 0)
        return r;
    next_segment(job);
    sfd_log(SFD_LOG_NOTICE, job->id, "elastic restart %u: segment %u", job->restart_count,
            job->segment);
    return 0;
}

int sfd_job_bind_shape(struct sfd_job *job, const sf_schema *schema, uint32_t world_size)
{
    bool fresh = job->rank_pages == NULL;
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
        next_segment(job);
        sfd_log(SFD_LOG_NOTICE, job->id, "shape changed: segment %u, world size %u", job->segment,
                world_size);
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

/*
 * sfd memory budget: bytes charged per uid and per kind of state against
 * max_memory_mb and max_memory_per_uid_mb, and each uid's job count. Pure
 * bookkeeping over struct sfd_budget (and its JSON view): it never allocates
 * job state or frees any; what to evict when a charge is refused is
 * windows.c's choice.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

struct sfd_uid_share *sfd_budget_share(const struct sfd_budget *b, uid_t uid)
{
    for (uint32_t i = 0; i < b->n_uids; i++)
        if (b->uids[i].uid == uid)
            return &b->uids[i];
    return NULL;
}

/* A uid's entry lives while it has jobs or bytes; removing it keeps the table
 * as small as the set of uids with state. */
static void drop_if_empty(struct sfd_budget *b, struct sfd_uid_share *s)
{
    if (s->jobs != 0 || s->bytes != 0)
        return;
    *s = b->uids[--b->n_uids];
    if (b->n_uids == 0) {
        free(b->uids);
        b->uids = NULL;
        b->cap_uids = 0;
    }
}

int sfd_budget_job_add(struct sfd_budget *b, uid_t uid, uint32_t max_jobs_per_uid)
{
    struct sfd_uid_share *s = sfd_budget_share(b, uid);
    if (s == NULL) {
        if (b->n_uids == b->cap_uids) {
            uint32_t cap = b->cap_uids ? b->cap_uids * 2 : 8;
            struct sfd_uid_share *v = realloc(b->uids, cap * sizeof(*v));
            if (v == NULL)
                return -ENOMEM;
            b->uids = v;
            b->cap_uids = cap;
        }
        s = &b->uids[b->n_uids++];
        *s = (struct sfd_uid_share){.uid = uid};
    }
    if (s->jobs >= max_jobs_per_uid) {
        drop_if_empty(b, s);
        return -EDQUOT;
    }
    s->jobs++;
    return 0;
}

void sfd_budget_job_remove(struct sfd_budget *b, uid_t uid)
{
    struct sfd_uid_share *s = sfd_budget_share(b, uid);
    if (s == NULL)
        return;
    if (s->jobs > 0)
        s->jobs--;
    drop_if_empty(b, s);
}

int sfd_budget_charge(struct sfd_budget *b, const struct sfd_budget_limits *lim, uid_t uid,
                      enum sfd_mem_kind kind, uint64_t n)
{
    struct sfd_uid_share *s = sfd_budget_share(b, uid);
    if (n > lim->total || b->used > lim->total - n)
        return -ENOMEM;
    if (s != NULL && (n > lim->per_uid || s->bytes > lim->per_uid - n))
        return -ENOMEM;
    sfd_budget_force(b, uid, kind, n);
    return 0;
}

void sfd_budget_force(struct sfd_budget *b, uid_t uid, enum sfd_mem_kind kind, uint64_t n)
{
    struct sfd_uid_share *s = sfd_budget_share(b, uid);
    b->used += n;
    b->by_kind[kind] += n;
    if (s != NULL)
        s->bytes += n;
}

static uint64_t sub_floor(uint64_t a, uint64_t n)
{
    return a > n ? a - n : 0;
}

void sfd_budget_uncharge(struct sfd_budget *b, uid_t uid, enum sfd_mem_kind kind, uint64_t n)
{
    struct sfd_uid_share *s = sfd_budget_share(b, uid);
    b->used = sub_floor(b->used, n);
    b->by_kind[kind] = sub_floor(b->by_kind[kind], n);
    if (s != NULL) {
        s->bytes = sub_floor(s->bytes, n);
        drop_if_empty(b, s);
    }
}

const char *sfd_mem_kind_name(enum sfd_mem_kind k)
{
    static const char *const names[SFD_MEM_KIND_COUNT] = {
        [SFD_MEM_JOBS] = "jobs",
        [SFD_MEM_RANKS] = "ranks",
        [SFD_MEM_WINDOWS] = "windows",
        [SFD_MEM_KEPT_ROWS] = "kept_rows",
        [SFD_MEM_REPORTS] = "reports",
        [SFD_MEM_BUFFERS] = "buffers",
        [SFD_MEM_ENQ_POINTS] = "enqueue_points",
    };
    return (unsigned)k < SFD_MEM_KIND_COUNT ? names[k] : "unknown";
}

json_t *sfd_budget_json(const struct sfd_budget *b, const struct sfd_budget_limits *lim)
{
    json_t *kinds = json_object();
    for (int k = 0; k < SFD_MEM_KIND_COUNT; k++)
        json_object_set_new(kinds, sfd_mem_kind_name((enum sfd_mem_kind)k),
                            json_integer((json_int_t)b->by_kind[k]));
    return json_pack("{s:I, s:I, s:I, s:I, s:o}", "limit_bytes", (json_int_t)lim->total,
                     "per_uid_limit_bytes", (json_int_t)lim->per_uid, "used_bytes",
                     (json_int_t)b->used, "evicted_windows", (json_int_t)b->evicted_windows,
                     "by_kind", kinds);
}

uint64_t sfd_budget_uid_bytes(const struct sfd_budget *b, uid_t uid)
{
    const struct sfd_uid_share *s = sfd_budget_share(b, uid);
    return s != NULL ? s->bytes : 0;
}

void sfd_budget_free(struct sfd_budget *b)
{
    if (b == NULL)
        return;
    free(b->uids);
    memset(b, 0, sizeof(*b));
}

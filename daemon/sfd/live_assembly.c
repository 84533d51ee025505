/*
 * The root's assembly of complete steps (live_assembly.h). Step s lives in
 * slot s mod slots. A part of a newer step than its slot holds pushes the
 * older one out (evicted: a member fell behind, or lost a part); a part of an
 * older one, or of a step at or below the last completed, is late. Steps of
 * one member arrive in order, so a step completes at most a batch after the
 * first part of it arrived.
 */
#include "live_assembly.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NO_STEP INT64_MIN

struct slot {
    int64_t step; /* NO_STEP: free */
    uint32_t count;
};

struct sfd_live_assembly {
    uint32_t world, n_stages, n_slots;
    int64_t done;       /* the highest step completed, NO_STEP */
    struct slot *slots; /* [n_slots] */
    int64_t *d;         /* [n_slots][world][n_stages] */
    uint8_t *have;      /* [n_slots][world] */
    sfd_live_assembly_counters c;
};

size_t sfd_live_assembly_bytes(uint32_t world_size, uint32_t n_stages, uint32_t slots)
{
    return (size_t)slots *
           (sizeof(struct slot) + (size_t)world_size * ((size_t)n_stages * sizeof(int64_t) + 1));
}

uint32_t sfd_live_assembly_slots(uint32_t world_size, uint32_t n_stages)
{
    size_t per_step = sfd_live_assembly_bytes(world_size, n_stages, 1);
    size_t n = per_step ? SFD_LIVE_ASSEMBLY_BYTES / per_step : SFD_LIVE_ASSEMBLY_MAX_SLOTS;
    if (n < SFD_LIVE_ASSEMBLY_MIN_SLOTS)
        n = SFD_LIVE_ASSEMBLY_MIN_SLOTS;
    return n > SFD_LIVE_ASSEMBLY_MAX_SLOTS ? SFD_LIVE_ASSEMBLY_MAX_SLOTS : (uint32_t)n;
}

int sfd_live_assembly_new(uint32_t world_size, uint32_t n_stages, uint32_t slots,
                          sfd_live_assembly **ret)
{
    if (world_size == 0 || n_stages == 0 || slots == 0)
        return -EINVAL;
    sfd_live_assembly *a = calloc(1, sizeof *a);
    if (a == NULL)
        return -ENOMEM;
    a->world = world_size;
    a->n_stages = n_stages;
    a->n_slots = slots;
    a->done = NO_STEP;
    a->slots = malloc(slots * sizeof *a->slots);
    a->d = malloc((size_t)slots * world_size * n_stages * sizeof *a->d);
    a->have = calloc((size_t)slots * world_size, 1);
    if (a->slots == NULL || a->d == NULL || a->have == NULL) {
        sfd_live_assembly_free(a);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < slots; i++)
        a->slots[i] = (struct slot){.step = NO_STEP};
    *ret = a;
    return 0;
}

void sfd_live_assembly_free(sfd_live_assembly *a)
{
    if (a == NULL)
        return;
    free(a->slots);
    free(a->d);
    free(a->have);
    free(a);
}

static void slot_reset(sfd_live_assembly *a, uint32_t i, int64_t step)
{
    a->slots[i] = (struct slot){.step = step};
    memset(a->have + (size_t)i * a->world, 0, a->world);
}

/* The slot for step, made free for it where an older step held it; NULL
 * when the part is late. */
static struct slot *slot_for(sfd_live_assembly *a, int64_t step, uint32_t *ret_index)
{
    if (a->done != NO_STEP && step <= a->done)
        return NULL;
    uint32_t i = (uint32_t)((uint64_t)step % a->n_slots);
    struct slot *s = &a->slots[i];
    if (s->step != NO_STEP && s->step > step)
        return NULL; /* out of reach: a newer step holds its slot */
    if (s->step != step) {
        if (s->step != NO_STEP)
            a->c.evicted++;
        slot_reset(a, i, step);
    }
    *ret_index = i;
    return s;
}

int sfd_live_assembly_add(sfd_live_assembly *a, int64_t step, const uint32_t *ranks, uint32_t n,
                          const int64_t *d, const int64_t **ret_rows)
{
    for (uint32_t k = 0; k < n; k++)
        if (ranks[k] >= a->world)
            return -EINVAL;
    uint32_t i;
    struct slot *s = step >= 0 ? slot_for(a, step, &i) : NULL;
    if (s == NULL) {
        a->c.late++;
        return -ESTALE;
    }
    a->c.parts++;
    bool dup = false;
    uint8_t *have = a->have + (size_t)i * a->world;
    int64_t *rows = a->d + (size_t)i * a->world * a->n_stages;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t r = ranks[k];
        if (have[r]) {
            dup = true;
            a->c.duplicates++;
            continue;
        }
        have[r] = 1;
        s->count++;
        memcpy(rows + (size_t)r * a->n_stages, d + (size_t)k * a->n_stages,
               a->n_stages * sizeof *d);
    }
    if (s->count < a->world)
        return dup ? -EEXIST : 0;
    a->c.completed++;
    a->done = step;
    s->step = NO_STEP; /* free again; its rows stay readable until the next part */
    *ret_rows = rows;
    return 1;
}

const sfd_live_assembly_counters *sfd_live_assembly_counters_get(const sfd_live_assembly *a)
{
    return &a->c;
}

/*
 * The per-job table of NCCL enqueue points (enqueue_points.h): one slot per
 * hash of (rank, step, stage), the newest point wins, since a point only
 * matters until its step record arrives. Never reaches the accounting
 * directly: ingest.c hands a looked-up point to the split.
 */
#include "enqueue_points.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct enq_slot {
    int64_t step; /* -1: empty */
    int64_t offset_ns;
    int64_t kernel_start_ns; /* -1: none */
    uint32_t rank;
    uint32_t stage;
};

struct sfd_enq_points {
    struct enq_slot slot[SFD_ENQ_SLOTS];
};

static uint32_t slot_of(uint32_t rank, int64_t step, uint32_t stage)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    h = (h ^ rank) * UINT64_C(0x100000001b3);
    h = (h ^ (uint64_t)step) * UINT64_C(0x100000001b3);
    h = (h ^ stage) * UINT64_C(0x100000001b3);
    return (uint32_t)(h % SFD_ENQ_SLOTS);
}

int sfd_enq_sync_stage(const sf_schema *schema, const char *name)
{
    for (uint32_t k = 0, i = 0; k < schema->n_stages; k++, i++) {
        bool sync = schema->sync_mask >> k & 1;
        if (sync && strcmp(schema->names[k], name) == 0)
            return (int)i;
        if (sync)
            k++; /* skip "<name>.sync_wait" */
    }
    return -1;
}

int sfd_enq_note(struct sfd_enq_points **points, uint32_t rank, int64_t step,
                 uint32_t recorded_stage, int64_t offset_ns, int64_t kernel_start_ns)
{
    if (!*points) {
        struct sfd_enq_points *p = malloc(sizeof *p);
        if (!p)
            return -ENOMEM;
        for (size_t i = 0; i < SFD_ENQ_SLOTS; i++)
            p->slot[i].step = -1;
        *points = p;
    }
    struct enq_slot *s = &(*points)->slot[slot_of(rank, step, recorded_stage)];
    bool same = s->step == step && s->rank == rank && s->stage == recorded_stage;
    bool was_timed = same && s->kernel_start_ns >= 0;
    *s = (struct enq_slot){step, offset_ns, kernel_start_ns, rank, recorded_stage};
    return (same ? 0 : SFD_ENQ_NEW) |
           (kernel_start_ns >= 0 && !was_timed ? SFD_ENQ_NEWLY_TIMED : 0);
}

void sfd_enq_fill(const struct sfd_enq_points *points, const sf_schema *schema, uint32_t rank,
                  int64_t step, int64_t *own)
{
    if (!points)
        return;
    for (uint32_t k = 0, i = 0; k < schema->n_stages; k++, i++) {
        if (!(schema->sync_mask >> k & 1))
            continue;
        const struct enq_slot *s = &points->slot[slot_of(rank, step, i)];
        if (s->step == step && s->rank == rank && s->stage == i)
            own[i] = s->offset_ns;
        k++;
    }
}

void sfd_enq_fill_kernel(const struct sfd_enq_points *points, const sf_schema *schema,
                         uint32_t rank, int64_t step, int64_t *kernel)
{
    if (!points)
        return;
    for (uint32_t k = 0, i = 0; k < schema->n_stages; k++, i++) {
        if (!(schema->sync_mask >> k & 1))
            continue;
        const struct enq_slot *s = &points->slot[slot_of(rank, step, i)];
        if (s->step == step && s->rank == rank && s->stage == i && s->kernel_start_ns >= 0)
            kernel[i] = s->kernel_start_ns;
        k++;
    }
}

size_t sfd_enq_table_bytes(void)
{
    return sizeof(struct sfd_enq_points);
}

void sfd_enq_free(struct sfd_enq_points *points)
{
    free(points);
}

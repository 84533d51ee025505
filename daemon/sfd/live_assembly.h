/*
 * The root's assembly of a cluster job's complete steps for the live verdict
 * (docs/LIVE.md, "In a cluster"): each member's part of a step (its ranks'
 * rows) goes into a slot for that step; the step is complete when every rank
 * of the world has its row there. A fixed number of slots, so a member that
 * falls behind costs skipped steps, counted, never memory. Pure: no I/O, no
 * clock, no sfd state, so the bench (bench/live) runs the same code.
 */
#ifndef SFD_LIVE_ASSEMBLY_H
#define SFD_LIVE_ASSEMBLY_H

#include <stddef.h>
#include <stdint.h>

/* Steps in assembly at once: a member's part may lag the others' by that
 * many steps (its batch and its skew, docs/LIVE.md) before its step is given
 * up. As many as SFD_LIVE_ASSEMBLY_BYTES hold, within MIN..MAX slots: a small
 * job tolerates a second of skew, a job of 100k ranks costs MIN steps' rows. */
#define SFD_LIVE_ASSEMBLY_BYTES (16u << 20)
#define SFD_LIVE_ASSEMBLY_MIN_SLOTS 8u
#define SFD_LIVE_ASSEMBLY_MAX_SLOTS 1024u
uint32_t sfd_live_assembly_slots(uint32_t world_size, uint32_t n_stages);

typedef struct sfd_live_assembly sfd_live_assembly;

typedef struct sfd_live_assembly_counters {
    uint64_t parts;      /* (step, ranks) parts taken */
    uint64_t completed;  /* steps whose every rank arrived */
    uint64_t evicted;    /* incomplete steps pushed out by a later one */
    uint64_t late;       /* parts of a step already tested, evicted or out of reach */
    uint64_t duplicates; /* rows of a rank the step already had */
} sfd_live_assembly_counters;

/* -EINVAL for a world or stage count of 0, -ENOMEM. */
int sfd_live_assembly_new(uint32_t world_size, uint32_t n_stages, uint32_t slots,
                          sfd_live_assembly **ret);
void sfd_live_assembly_free(sfd_live_assembly *a);
/* What it holds: slots x world x (stages x 8 + 1) bytes, and the slots' heads. */
size_t sfd_live_assembly_bytes(uint32_t world_size, uint32_t n_stages, uint32_t slots);

/* One part: the rows of n ranks (each < world, d holds n rows of n_stages)
 * of `step`. Returns 1 when it completed the step: *ret_rows is then the
 * step's world_size rows in rank order, valid until the next call; 0 when
 * taken; -ESTALE for a late part (nothing taken); -EEXIST when some rank was
 * there already (the others are taken); -EINVAL for a rank out of the world. */
int sfd_live_assembly_add(sfd_live_assembly *a, int64_t step, const uint32_t *ranks, uint32_t n,
                          const int64_t *d, const int64_t **ret_rows);
const sfd_live_assembly_counters *sfd_live_assembly_counters_get(const sfd_live_assembly *a);

#endif

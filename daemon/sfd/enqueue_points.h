/*
 * Enqueue points in sfd: per job, the NCCL plugin's offsets of the last
 * collective enqueued in a synchronizing stage (NcclBatch.last_enqueue_ns),
 * kept per (rank, step, stage) in a fixed table until the rank's step record
 * arrives and uses one as its arrival fallback. No I/O, no report output.
 */
#ifndef SFD_ENQUEUE_POINTS_H
#define SFD_ENQUEUE_POINTS_H

#include <stddef.h>
#include <stdint.h>

#include "stagefrontier/accounting.h"

/* Slots per job: a newer point takes over the slot of an older one. At a
 * step rate of 1 kHz and 4 synchronizing stages that is about a second of
 * history, far more than the trainer's 100 ms batching delay. */
#define SFD_ENQ_SLOTS 4096

struct sfd_enq_points;

/* The recorded (unsplit) index of the synchronizing stage called name in
 * schema, or -1 when no synchronizing stage has that name. */
int sfd_enq_sync_stage(const sf_schema *schema, const char *name);
/* Keeps a point, with its kernel's start (kernel_start_ns, -1: none; the
 * offset from the stage's start, as offset_ns), creating *points on first
 * use: SFD_ENQ_NEW for a new (rank, step, stage) (else it replaced that
 * key's earlier point: the plugin re-ships a slot when a later collective
 * moved it or its kernel times came in), with SFD_ENQ_NEWLY_TIMED when the
 * key now has a kernel start it did not have; or -ENOMEM. */
#define SFD_ENQ_NEW 1
#define SFD_ENQ_NEWLY_TIMED 2
int sfd_enq_note(struct sfd_enq_points **points, uint32_t rank, int64_t step,
                 uint32_t recorded_stage, int64_t offset_ns, int64_t kernel_start_ns);
/* Fills own[recorded stage] with the kept points of (rank, step) for every
 * synchronizing stage of schema; other entries are left as they are. */
void sfd_enq_fill(const struct sfd_enq_points *points, const sf_schema *schema, uint32_t rank,
                  int64_t step, int64_t *own);
/* The same for the kept kernel starts: kernel[recorded stage] for every
 * synchronizing stage whose point of (rank, step) has one. */
void sfd_enq_fill_kernel(const struct sfd_enq_points *points, const sf_schema *schema,
                         uint32_t rank, int64_t step, int64_t *kernel);
void sfd_enq_free(struct sfd_enq_points *points);
/* The bytes of one job's table, charged to its uid before the first point. */
size_t sfd_enq_table_bytes(void);

#endif

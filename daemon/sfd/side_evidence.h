/*
 * NCCL side evidence in sfd: per job, the aggregates the NCCL profiler plugin
 * ships (NcclBatch, channel 1), filed by window and shown in the report next
 * to the stage that enclosed the collectives. Never part of the accounting.
 */
#ifndef SFD_SIDE_EVIDENCE_H
#define SFD_SIDE_EVIDENCE_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "stagefrontier/accounting.h"

struct Stagefrontier__NcclBatch;
struct sfd_side;

/* Hard bounds: windows kept per job, communicators and aggregate rows per
 * window, rows per job over all windows. Past them a batch's extra rows are
 * refused and counted, never stored. */
#define SFD_SIDE_WINDOWS 32
#define SFD_SIDE_COMMS 16
#define SFD_SIDE_ROWS 256
#define SFD_SIDE_ROWS_PER_JOB 2048

/* Files one validated batch (sfd_validate_nccl) of a rank under the window of
 * its step in the given segment, creating *side on first use. Warmup steps
 * are counted and skipped. 0, or -ENOMEM (nothing stored). */
int sfd_side_add(struct sfd_side **side, const sf_gates *gates, uint32_t segment, uint32_t rank,
                 const struct Stagefrontier__NcclBatch *b);
void sfd_side_free(struct sfd_side *side);

/* Adds the window's side evidence to a report's JSON window object: a
 * "side_evidence" object, and an "nccl" summary on each stage object that
 * enclosed collectives. Windows without side evidence are left untouched. */
int sfd_side_annotate_json(const struct sfd_side *side, const sf_report *report, json_t *window);
/* The same for the human view, appended after the report's text. */
int sfd_side_write_text(const struct sfd_side *side, const sf_report *report, FILE *out);

struct sfd_side_stats {
    uint64_t batches, rows_refused, warmup_batches, windows_evicted;
};
void sfd_side_get_stats(const struct sfd_side *side, struct sfd_side_stats *ret);

#endif

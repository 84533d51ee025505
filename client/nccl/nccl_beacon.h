/*
 * The NCCL plugin's view of the trainer: the step and ordered stage that
 * libsfclient publishes in its beacon (client/lib/side_beacon.h), found among
 * the process's loaded objects. Reads are lock-free and fit NCCL's threads;
 * the lookup itself runs only at init and on the flusher thread.
 */
#ifndef SF_NCCL_BEACON_H
#define SF_NCCL_BEACON_H

#include <stdbool.h>
#include <stdint.h>

#include "side_beacon.h"

/* Searches the loaded objects for a valid beacon once found, keeps it. */
void sf__nccl_beacon_lookup(void);
/* The beacon, or NULL while none was found. */
struct sf_side_beacon *sf__nccl_beacon(void);
/* The open ordered stage id, -1 when none or no beacon. */
int32_t sf__nccl_current_stage(void);
/* The open ordered stage as in sf__nccl_current_stage, and when it is a
 * synchronizing stage, how long after its start now_ns lies (*ret_offset;
 * false otherwise, or when the stage changed while reading). */
bool sf__nccl_current_sync_point(int32_t *ret_stage, int64_t now_ns, int64_t *ret_offset);
/* The open step (>= 0), or -1 without a beacon. */
int64_t sf__nccl_beacon_step(void);
/* The enclosing stage's name for a stage id recorded at enqueue: the published
 * name; otherwise "model.backward_cpu_wall" for an AllReduce, else "". */
const char *sf__nccl_stage_name(int32_t stage, const char *collective);

#endif

/*
 * The side-evidence beacon: libsfclient publishes the open step and ordered
 * stage here so that the NCCL profiler plugin, loaded by NCCL into the same
 * process, can attribute collectives to a step and an enclosing stage. The
 * plugin finds the exported object sf_side_beacon by searching the loaded
 * objects (it works even when libsfclient was loaded RTLD_LOCAL) and checks
 * magic and version. Writers are one trainer thread; readers only load the
 * atomics.
 */
#ifndef SF_CLIENT_SIDE_BEACON_H
#define SF_CLIENT_SIDE_BEACON_H

#include <stdatomic.h>
#include <stdint.h>

#include <stagefrontier/limits.h>

#define SF_SIDE_BEACON_MAGIC 0x53464245u /* "SFBE" */
#define SF_SIDE_BEACON_VERSION 3u
#define SF_SIDE_NAME_LEN 64

struct sf_side_beacon {
    uint32_t magic, version;
    _Atomic int64_t step;     /* open step, -1 before the first */
    _Atomic int32_t stage;    /* open ordered stage id, -1 none */
    _Atomic uint32_t n_names; /* stage names, published once */
    char names[SF_MAX_STAGES][SF_SIDE_NAME_LEN + 1];
    uint64_t sync_mask;             /* synchronizing stages, set before n_names */
    _Atomic int64_t stage_start_ns; /* CLOCK_MONOTONIC at the open stage's begin,
                                     * less its earlier segments in this step */
};

/* Called by libsfclient: at open (the first schema wins; names are copied),
 * at every step begin, and at ordered stage begin (id and its start time) and
 * end (-1). Plain atomic stores only: fit for the hot path. The start time is
 * stored before the stage id (release), so a reader that loads the id with
 * acquire and finds it unchanged afterwards holds that stage's start. */
extern struct sf_side_beacon sf_side_beacon;

void sf__side_publish_schema(uint32_t n, const char *const *names, uint64_t sync_mask);
void sf__side_publish_step(int64_t step);
void sf__side_publish_stage(int32_t stage_id, int64_t start_ns);

#endif

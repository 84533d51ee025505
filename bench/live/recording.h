/*
 * A real recording (`sfctl record` JSON Lines) as the live test's benches
 * read it: the header's schema and world size, and the complete steps (every
 * rank's row present) in step order. Shared by live_false_alarms and
 * live_detect_replay.
 */
#ifndef SF_BENCH_LIVE_RECORDING_H
#define SF_BENCH_LIVE_RECORDING_H

#include <stdint.h>

#include "stagefrontier/accounting.h"
#include "stagefrontier/live.h"

struct recording {
    const char *path;
    sf_schema schema;
    uint32_t world, n_stages;
    uint32_t n_steps; /* complete steps, in step order */
    int64_t *step;    /* [n_steps] their step numbers */
    int64_t *d;       /* [n_steps][world][n_stages] */
};

/* 0, or -errno (-ENODATA: no complete step); recording_free is due either way. */
int recording_load(const char *path, struct recording *rec);
void recording_free(struct recording *rec);

/* The live test's gates as both benches take them: getopt_long entries, and
 * the setter of one parsed option (1: it was a gate's, 0: not). */
#define LIVE_CONFIG_OPTIONS                                                                        \
    {"false-alarm-steps", 1, NULL, 'f'}, {"shift-sigmas", 1, NULL, 'k'},                           \
        {"min-effect-frac", 1, NULL, 'm'}, {"slow-effect-frac", 1, NULL, 'D'},                     \
        {"change-min-frac", 1, NULL, 'C'}, {"halflife", 1, NULL, 'h'},                             \
    {                                                                                              \
        "calibration", 1, NULL, 'c'                                                                \
    }
int live_config_option(int opt, double value, sf_live_config *cfg);

#endif

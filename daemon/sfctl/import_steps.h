/*
 * Reduction of one rank's trace ranges to stage-matrix rows: step ranges and
 * the merged intervals of each mapped stage go in, one row per step comes
 * out. Shared by the Kineto and Nsight readers; does no I/O.
 */
#ifndef SFCTL_IMPORT_STEPS_H
#define SFCTL_IMPORT_STEPS_H

#include <stdint.h>

#include "import_map.h"
#include "replay.h"

struct interval {
    int64_t a, b; /* [a, b) in ns */
};

struct interval_set {
    struct interval *v;
    size_t n, cap, merged; /* v[0..merged) is sorted and disjoint */
};

struct step_range {
    int64_t step, a, b;
};

struct step_acc {
    struct import_map *map;
    struct step_range *steps;
    size_t n_steps, cap_steps;
    struct interval_set stage[SF_MAX_STAGES];
    uint64_t ranges, matched;
    int64_t t_min, t_max; /* span of the step ranges */
};

void step_acc_init(struct step_acc *acc, struct import_map *map);
void step_acc_clear(struct step_acc *acc);

/* One named range [start, end). Returns 0 or -ENOMEM; ranges that are
 * empty, reversed or match nothing are counted and ignored. */
int step_acc_add(struct step_acc *acc, const char *name, int64_t start_ns, int64_t end_ns);

/* Appends one row per step to part (whose schema is the mapping's), for the
 * given rank. -EINVAL with a reason in err: no step range, a step number
 * seen twice, or a step too long for the format. */
int step_acc_rows(struct step_acc *acc, uint32_t rank, struct replay_part *part,
                  uint64_t *stage_ns_total, char *err, size_t errlen);

/* Step number of a step range's name: its last run of digits, or -1. */
int64_t step_number(const char *name);

#endif

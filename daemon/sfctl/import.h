/*
 * `sfctl import`: traces from other profilers reduced to the stage matrix.
 * import.c owns the command line, rank and job checks across files, and the
 * output; each trace format has its own reader that feeds named ranges into
 * a step accumulator (import_steps.h) and reports what it learned of the
 * file's rank, job and clock.
 */
#ifndef SFCTL_IMPORT_H
#define SFCTL_IMPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "import_steps.h"

/* What one file says about itself besides its ranges. */
struct import_file_info {
    int64_t rank;           /* -1: the file does not say */
    int64_t world_size;     /* -1: the file does not say */
    char backend[32];       /* "" when unknown */
    bool absolute_time;     /* step times are on a clock shared across hosts */
    int64_t time_offset_ns; /* added to the accumulator's times for that clock */
    uint64_t bytes;         /* trace bytes read (uncompressed), for the summary */
};

/* A format reader: feeds every named range of path into acc. Returns 0,
 * -EINVAL with a reason in err (bad content), -EIO/-ENOENT... with a reason
 * (cannot read), or -ENOMEM. */
typedef int (*import_reader_fn)(const char *path, struct step_acc *acc,
                                struct import_file_info *info, char *err, size_t errlen);

int sfctl_import_kineto_read(const char *path, struct step_acc *acc, struct import_file_info *info,
                             char *err, size_t errlen);
int sfctl_import_nsys_read(const char *path, struct step_acc *acc, struct import_file_info *info,
                           char *err, size_t errlen);

int sfctl_cmd_import(int argc, char **argv);

#endif

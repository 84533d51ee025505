/*
 * Streaming reader of Chrome-trace JSON (torch.profiler / Kineto exports):
 * walks the document byte by byte and hands each complete event of the
 * traceEvents array to a callback, so a trace of any size is read in a
 * fixed amount of memory. It validates JSON syntax and knows nothing of
 * steps, stages or ranks.
 */
#ifndef SFCTL_TRACE_JSON_H
#define SFCTL_TRACE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TRACE_NAME_MAX 1024 /* longer event names are cut (flagged) */

/* One event's fields the importer uses; name is NUL-terminated and valid only
 * during the callback. Times are integer nanoseconds (Chrome traces carry
 * microseconds, possibly with a fraction). */
struct trace_event {
    const char *name;
    bool name_cut;
    char ph; /* first byte of "ph", 0 when absent or not a string */
    bool has_ts, has_dur;
    int64_t ts_ns, dur_ns;
};

/* Top-level facts outside traceEvents. rank and world_size are -1 when the
 * trace has no distributedInfo (or it lacks them). */
struct trace_meta {
    bool object_format; /* {"traceEvents": [...]} rather than a bare array */
    int64_t rank, world_size;
    char backend[32];
    bool has_base_time;
    int64_t base_time_ns; /* baseTimeNanoseconds */
    uint64_t bytes;       /* uncompressed bytes read */
    uint64_t events;      /* elements of the event array */
};

/* Reads up to len bytes; returns the count, 0 at the end, or a negative errno
 * after writing a reason into err. */
typedef ssize_t (*trace_read_fn)(void *ctx, void *buf, size_t len, char *err, size_t errlen);
/* Returns 0 to go on, or a negative errno (with a reason in err) to stop. */
typedef int (*trace_event_fn)(void *user, const struct trace_event *ev, char *err, size_t errlen);

/* Returns 0, -EINVAL (malformed or truncated JSON, or an error from a
 * callback) with "byte N: reason" in err, -EIO from the read function, or
 * -ENOMEM. */
int trace_json_read(trace_read_fn read, void *read_ctx, trace_event_fn on_event, void *user,
                    struct trace_meta *ret_meta, char *err, size_t errlen);

#endif

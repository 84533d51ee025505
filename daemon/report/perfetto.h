/*
 * Chrome trace JSON of windows (docs/PICTURES.md, "Trace export"), which the
 * Perfetto UI and chrome://tracing open: one track per rank with its stage
 * spans, the frontier's track with the leader at each boundary, arrival
 * points, the straggler verdict, labels and the change as instant events.
 * Writes to a stream it is given; opens no file.
 */
#ifndef SF_REPORT_PERFETTO_H
#define SF_REPORT_PERFETTO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <stagefrontier/accounting.h>
#include <stagefrontier/change.h>

/* No clock agrees across hosts, so every step starts where the previous
 * step's frontier ended; t_ns is that running origin. */
typedef struct sf_trace_writer {
    FILE *out;
    int64_t t_ns;
    uint64_t events;
    bool any; /* an event was written: the next needs a comma */
} sf_trace_writer;

/* Opens the trace object; job names the processes. */
int sf_trace_begin(sf_trace_writer *w, FILE *out, const char *job);
/* Lays one window's steps on the timeline, after the windows before it.
 * rows are the window's rows (any order). -ENOMEM, -EIO. */
int sf_trace_window(sf_trace_writer *w, const sf_summary *summary, const sf_report *report,
                    const sf_row *rows, size_t n_rows);
/* Closes the trace object; -EIO when the stream failed. */
int sf_trace_end(sf_trace_writer *w);

#endif

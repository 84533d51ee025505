/*
 * Prometheus textfile export of sfd: writes DIR/stagefrontier.prom for the
 * node_exporter textfile collector. Owns only the file format and the atomic
 * write; it never reads sfd state on its own and never logs.
 */
#ifndef SFD_PROM_EXPORT_H
#define SFD_PROM_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include <stagefrontier/accounting.h>

#define SFD_PROM_FILE_NAME "stagefrontier.prom"

/* One job: its latest closed window (NULL before the first one closes), when
 * that window's report was ready (Unix ms, 0 unknown), its cumulative
 * dropped and rejected record counters and its waste. */
struct sfd_prom_job {
    const char *job_id;
    const sf_report *latest;
    uint64_t dropped, rejected;
    double waste_rank_s; /* cumulative what-if waste (docs/CHANGE.md) */
    int64_t window_unix_ms;
};

struct sfd_prom_reject {
    const char *reason;
    uint64_t count;
};

/* The daemon itself: build, cluster role and term, and its counters since
 * start. role NULL is written as "unknown". */
struct sfd_prom_daemon {
    const char *version, *role;
    uint64_t term;
    uint64_t records, batches, dropped, windows_closed;
    uint64_t connections, connections_accepted;
    const struct sfd_prom_reject *rejected;
    size_t n_rejected;
};

/* Writes DIR/stagefrontier.prom atomically: the text goes to a hidden
 * temporary file in DIR (a name the textfile collector ignores), which is
 * fsynced and then renamed over the final name. Readers see either the old
 * file or the new one, never a partial one.
 * Label values are escaped; bytes the format cannot carry (control bytes,
 * invalid UTF-8) become '?' and ids are cut at 256 bytes. A job whose escaped
 * id equals an earlier one is left out, so one client cannot invalidate the
 * file for every other job.
 * Returns the number of jobs left out (>= 0), -EINVAL on bad arguments (NULL
 * or empty dir, no daemon, jobs NULL with n > 0, a job without an id), or the -errno of
 * the failing file operation; on failure the previous file is left untouched
 * and no temporary file remains. */
int sfd_prom_write(const char *dir, const struct sfd_prom_daemon *daemon,
                   const struct sfd_prom_job *jobs, size_t n);

#endif

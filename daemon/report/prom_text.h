/*
 * The Prometheus text format of sfd's export (docs/OPERATIONS.md): what one
 * job and the daemon contribute, and the renderer. It formats into a stream;
 * the file and its atomic replacement are sfd's (daemon/sfd/prom_export.c).
 */
#ifndef SF_PROM_TEXT_H
#define SF_PROM_TEXT_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <stagefrontier/accounting.h>

/* Who asked for a capture: the label values of trigger="operator|auto". */
enum { SF_PROM_TRIGGER_OPERATOR, SF_PROM_TRIGGER_AUTO, SF_PROM_TRIGGERS };

/* A job's state, as `sfctl jobs` shows it (docs/SFD.md, "Liveness"):
 * running (a rank is connected), stalled, ended (no rank connected). */
enum sf_prom_job_state {
    SF_PROM_JOB_RUNNING,
    SF_PROM_JOB_STALLED,
    SF_PROM_JOB_ENDED,
    SF_PROM_JOB_STATES
};

/* What sfd knows of one rank beyond its last message: the host it runs on
 * ("" unknown), its local rank on that host (-1 unknown) and the GPU it
 * uses, from CUDA_VISIBLE_DEVICES and the local rank ("" unknown): an index,
 * or a GPU-/MIG- UUID. */
struct sf_prom_rank_info {
    const char *host, *gpu;
    int32_t local_rank;
};

/* One job: its latest closed window (NULL before the first one closes), when
 * that window's report was ready (Unix ms, 0 unknown), its cumulative
 * dropped and rejected record counters and its waste. */
struct sf_prom_job {
    const char *job_id;
    const sf_report *latest;
    uint64_t dropped, rejected;
    double waste_rank_s; /* cumulative what-if waste (docs/CHANGE.md) */
    int64_t window_unix_ms;
    /* Liveness (docs/SFD.md, "Liveness"): stalled or not, and when each rank
     * was last heard from (Unix ms), for n_ranks ranks (at most
     * SF_PROM_MAX_RANK_SERIES are written per job). */
    enum sf_prom_job_state state;
    size_t n_ranks;
    const uint32_t *ranks;
    const int64_t *last_seen_unix_ms;
    const struct sf_prom_rank_info *rank_info; /* [n_ranks], or NULL */
    /* Trace captures (docs/SFD.md, "Captures") since sfd started, by
     * trigger (SF_PROM_TRIGGER_*): started, and ended done or failed; a
     * capture is counted once when it ends. The latest one's creation time
     * (Unix ms, 0 none). */
    uint64_t captures_started[SF_PROM_TRIGGERS];
    uint64_t captures_done[SF_PROM_TRIGGERS], captures_failed[SF_PROM_TRIGGERS];
    int64_t last_capture_unix_ms;
    /* The live verdict in force (docs/LIVE.md): verdict_kind NULL for none;
     * verdict_rank -1 for a change of the whole job; stage NULL unknown.
     * verdict_events counts its starts and ends since sfd started. */
    const char *verdict_kind, *verdict_stage;
    int64_t verdict_rank;
    double verdict_effect_s;
    uint64_t verdict_events;
};

#define SF_PROM_MAX_RANK_SERIES 4096

struct sf_prom_reject {
    const char *reason;
    uint64_t count;
};

/* The durable history's counters (daemon/sfd/history.h), since sfd started. */
struct sf_prom_history {
    bool enabled;
    uint64_t written, evicted, restored;
    /* errors, by kind */
    uint64_t open_errors, read_errors, restore_errors, write_errors, reopen_errors, queue_dropped,
        refused, damaged;
    uint64_t readonly_restores, full_retries;
};

/* The daemon itself: build, cluster role and term, and its counters since
 * start; when this file was written (Unix ms: a reader tells a dead daemon
 * from an idle one by it). role NULL is written as "unknown". */
struct sf_prom_daemon {
    const char *version, *role;
    int64_t write_unix_ms;
    uint64_t term;
    uint64_t records, batches, dropped, windows_closed;
    uint64_t connections, connections_accepted;
    const struct sf_prom_reject *rejected;
    size_t n_rejected;
    const struct sf_prom_history *history; /* NULL: history not configured */
};

/* Renders the file's text into f. Label values are escaped; bytes the format
 * cannot carry (control bytes, invalid UTF-8) become '?' and ids are cut at
 * 256 bytes. A job whose escaped id equals an earlier one is left out.
 * Returns the number of jobs left out (>= 0), -EINVAL on bad arguments (no f,
 * no daemon, jobs NULL with n > 0, a job without an id), having written
 * nothing then, or -ENOMEM (what was written is then incomplete: discard it,
 * as sfd_prom_write does). Write errors show in ferror(f). */
int sf_prom_render(FILE *f, const struct sf_prom_daemon *daemon, const struct sf_prom_job *jobs,
                   size_t n);

#endif

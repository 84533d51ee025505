/*
 * sfd durable history: finished reports (and later baselines and capture
 * records) kept in a bounded SQLite store in the state directory, written by
 * a thread off the event loop and read back once at startup. The rest of sfd
 * sees only this narrow interface; SQLite never leaks out of history*.c.
 */
#ifndef SFD_HISTORY_H
#define SFD_HISTORY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stagefrontier/accounting.h"

struct sfd;
struct sfd_job;

#define SFD_HISTORY_FILE "history.sqlite"

/* Record kinds of the store (docs/HISTORY.md), keyed by
 * (kind, uid, job, segment, window). A report is keyed by its window; a
 * window's rows by one of two slots per job (history_rows.c), so the store
 * holds the rows of a job's latest full window and of its latest other one,
 * whatever the job's length; a live verdict's start or end (verdict.c) by
 * the job's event sequence number, its body the event's JSON text. Reports
 * and events are what history promises; rows are kept as best they can be. */
enum sfd_history_kind { SFD_HISTORY_REPORT = 1, SFD_HISTORY_ROWS = 2, SFD_HISTORY_EVENT = 3 };

struct sfd_history_stats {
    bool enabled;               /* the store is open */
    uint64_t written;           /* records committed */
    uint64_t write_errors;      /* records lost to a SQLite error (full disk, I/O, ...) */
    uint64_t queue_dropped;     /* records dropped because the write queue was full */
    uint64_t evicted;           /* oldest records deleted to stay under max_history_mb */
    uint64_t restored;          /* reports read back at startup */
    uint64_t restore_errors;    /* stored rows that could not be read back */
    uint64_t open_errors;       /* failed opens: history off, or set aside and started afresh */
    uint64_t read_errors;       /* reads of the store that failed part way (restore) */
    uint64_t damaged;           /* damaged stores renamed aside (history.sqlite.damaged-TIME) */
    uint64_t refused;           /* history.sqlite a symbolic link or not a regular file */
    uint64_t readonly_restores; /* restores from a store opened read-only (full disk, I/O) */
    uint64_t full_retries;      /* writes retried after evicting for a full disk */
    uint64_t reopen_errors; /* failed reopens of the store for writing after a read-only restore */
    uint64_t bytes;         /* pages in use, as of the last write */
    /* The rows records (best effort, not counted above): */
    uint64_t rows_written;  /* committed */
    uint64_t rows_restored; /* read back at startup */
    uint64_t rows_skipped;  /* not stored: too large, the queue busy, a failed write */
};

/* The same counters as the writer thread moves them; read with
 * sfd_history_counters_read (inline: the Prometheus export reads them
 * without a call into history.c, which calls the export after a restore). */
struct sfd_history_counters {
    atomic_bool enabled;
    _Atomic uint64_t written, write_errors, queue_dropped, evicted, restored, restore_errors,
        open_errors, bytes, read_errors, damaged, refused, readonly_restores, full_retries,
        reopen_errors, rows_written, rows_restored, rows_skipped;
};

static inline void sfd_history_counters_read(const struct sfd_history_counters *c,
                                             struct sfd_history_stats *ret)
{
#define SFD_HISTORY_LOAD_(f) ret->f = atomic_load_explicit(&c->f, memory_order_relaxed)
    SFD_HISTORY_LOAD_(enabled);
    SFD_HISTORY_LOAD_(written);
    SFD_HISTORY_LOAD_(write_errors);
    SFD_HISTORY_LOAD_(queue_dropped);
    SFD_HISTORY_LOAD_(evicted);
    SFD_HISTORY_LOAD_(restored);
    SFD_HISTORY_LOAD_(restore_errors);
    SFD_HISTORY_LOAD_(open_errors);
    SFD_HISTORY_LOAD_(bytes);
    SFD_HISTORY_LOAD_(read_errors);
    SFD_HISTORY_LOAD_(damaged);
    SFD_HISTORY_LOAD_(refused);
    SFD_HISTORY_LOAD_(readonly_restores);
    SFD_HISTORY_LOAD_(full_retries);
    SFD_HISTORY_LOAD_(reopen_errors);
    SFD_HISTORY_LOAD_(rows_written);
    SFD_HISTORY_LOAD_(rows_restored);
    SFD_HISTORY_LOAD_(rows_skipped);
#undef SFD_HISTORY_LOAD_
}

/* ---- sfd side (history.c) ------------------------------------------------ */

/* Opens <state_dir>/history.sqlite, reads the most recent reports back into
 * the job table (at most max_jobs jobs of keep_windows reports each,
 * synchronously, before the sockets accept anything) and starts the writer
 * thread. When the directory or the file is unusable, history is off: the
 * error is logged once and counted, and sfd runs on. Returns 0 either way,
 * -ENOMEM only. */
int sfd_history_start(struct sfd *d);
/* Queues a finished report for writing. Never blocks on the disk: a full
 * queue drops the record and counts it. */
void sfd_history_put_report(struct sfd *d, const struct sfd_job *job, const sf_report *report);
/* Queues a window's rows for writing, so that its pictures and recording
 * survive a restart: at most one window a second per job and slot (see
 * SFD_HISTORY_ROWS_FULL), the rest at shutdown. Rows that pack to more than
 * SFD_HISTORY_ROWS_MAX bytes, or that would take more than half of the
 * queue, are skipped and counted. */
#define SFD_HISTORY_ROWS_MAX (4u << 20)
#define SFD_HISTORY_ROWS_INTERVAL_MS 1000
struct sfd_stored;
void sfd_history_put_rows(struct sfd *d, struct sfd_job *job, const struct sfd_stored *s);
/* Queues each job's latest rows of each slot that are not queued yet; at
 * shutdown, after the last windows closed and before sfd_history_stop. */
void sfd_history_save_rows(struct sfd *d);
/* Queues a live verdict event (its JSON text, copied) the same way. */
void sfd_history_put_event(struct sfd *d, const struct sfd_job *job, uint64_t seq,
                           const char *json_text);
/* Queues the job's live verdict events not written yet. */
void sfd_history_put_verdict_events(struct sfd *d, struct sfd_job *job);
/* Writes what is queued, stops the thread and closes the store. NULL-safe. */
void sfd_history_stop(struct sfd *d);
void sfd_history_get_stats(const struct sfd *d, struct sfd_history_stats *ret);
/* The counters as the STATUS answer's "history" object. */
struct json_t;
struct json_t *sfd_history_json(const struct sfd *d);

/* ---- history_rows.c ------------------------------------------------------ */

/* The two slots of a job's rows: its last full window (neither partial nor
 * closed early: what a picture draws by default) and its last other one. */
#define SFD_HISTORY_ROWS_OTHER 0
#define SFD_HISTORY_ROWS_FULL 1
#define SFD_HISTORY_ROWS_SLOTS 2

struct sfd_store;
/* Gives the restored jobs' kept windows their stored rows back; called once
 * at startup, after the reports are restored. */
int sfd_history_restore_rows(struct sfd *d, struct sfd_store *store,
                             struct sfd_history_stats *stats);

/* ---- the SQLite store (history_store.c), no sfd state --------------------- */

struct sfd_store;

struct sfd_store_key {
    uint32_t kind;
    uid_t uid;
    const char *job;
    uint32_t segment;
    int64_t window;
};

/* Opens or creates the store name below the held directory dirfd, bounded
 * to max_bytes of pages in use, after SQLite's quick_check. A symbolic link
 * or anything but a regular file at name is refused (-ELOOP, -EINVAL); a
 * damaged file answers -EUCLEAN. SFD_STORE_READONLY opens an existing file
 * immutable (no write, no -shm: it works on a full disk); such a handle only
 * reads. On failure *ret_err names the failing step (static text). */
#define SFD_STORE_READONLY 1u
int sfd_store_open_at(int dirfd, const char *name, uint64_t max_bytes, unsigned flags,
                      struct sfd_store **ret, const char **ret_err);
/* The same by path (its directory opened plainly; tests and tools). */
int sfd_store_open(const char *path, uint64_t max_bytes, struct sfd_store **ret,
                   const char **ret_err);
/* The negative errno of a SQLite result code: -ENOSPC for SQLITE_FULL,
 * -EUCLEAN for SQLITE_CORRUPT and SQLITE_NOTADB, -EIO for I/O errors. */
int sfd_store_errno(int rc);
void sfd_store_close(struct sfd_store *s);
/* Inserts or replaces records in one transaction, then deletes the oldest
 * rows until the pages in use fit max_bytes. Returns the number of records
 * written (>= 0) or a negative SQLite-derived errno (-ENOSPC for a full disk,
 * -EFBIG for a record larger than the store, -EUCLEAN for a damaged file,
 * -EIO otherwise); on error nothing of the batch stays. */
int sfd_store_put(struct sfd_store *s, const struct sfd_store_key *keys,
                  const uint8_t *const *bodies, const size_t *lens, size_t n,
                  uint64_t *ret_evicted);
/* After -ENOSPC from a put: gives back the spare file kept beside the store,
 * deletes the oldest max(rows, 32) rows and returns their pages to the file
 * system, so that the put can be tried again. 0 when rows went, else < 0. */
int sfd_store_make_room(struct sfd_store *s, size_t rows, uint64_t *ret_evicted);
/* (Re)makes the spare file, min(max_bytes / 4, 1 MiB); < 0 when there is no
 * room for it (the store works on without). */
int sfd_store_keep_reserve(struct sfd_store *s);
/* Bytes of pages in use (page_count - freelist_count) * page_size. */
int sfd_store_used_bytes(struct sfd_store *s, uint64_t *ret);
int sfd_store_count(struct sfd_store *s, uint64_t *ret);

/* Visits up to max_jobs (uid, job) pairs, most recently written first, and
 * for each its up to per_job newest records of a kind in (segment, window)
 * descending order. The callback returns < 0 to stop. */
typedef int (*sfd_store_visit)(void *ctx, const struct sfd_store_key *key, const uint8_t *body,
                               size_t len);
int sfd_store_recent(struct sfd_store *s, uint32_t kind, uint32_t max_jobs, uint32_t per_job,
                     sfd_store_visit visit, void *ctx);

#endif

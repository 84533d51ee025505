/*
 * sfd durable history: finished reports (and later baselines and capture
 * records) kept in a bounded SQLite store in the state directory, written by
 * a thread off the event loop and read back once at startup. The rest of sfd
 * sees only this narrow interface; SQLite never leaks out of history*.c.
 */
#ifndef SFD_HISTORY_H
#define SFD_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stagefrontier/accounting.h"

struct sfd;
struct sfd_job;

#define SFD_HISTORY_FILE "history.sqlite"

/* Record kinds of the store (docs/SFD.md, "Durable history"). Only reports
 * are written today; the key (kind, uid, job, segment, window) is the same
 * for the kinds that follow. */
/* SFD_HISTORY_EVENT: a live verdict's start or end (verdict.c), its body
 * the event's JSON text, window the job's event sequence number. */
enum sfd_history_kind { SFD_HISTORY_REPORT = 1, SFD_HISTORY_EVENT = 2 };

struct sfd_history_stats {
    bool enabled;            /* the store is open */
    uint64_t written;        /* records committed */
    uint64_t write_errors;   /* records lost to a SQLite error (full disk, I/O, ...) */
    uint64_t queue_dropped;  /* records dropped because the write queue was full */
    uint64_t evicted;        /* oldest records deleted to stay under max_history_mb */
    uint64_t restored;       /* reports read back at startup */
    uint64_t restore_errors; /* stored rows that could not be read back */
    uint64_t open_errors;    /* the store could not be opened: history off */
    uint64_t bytes;          /* pages in use, as of the last write */
};

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

/* ---- the SQLite store (history_store.c), no sfd state --------------------- */

struct sfd_store;

struct sfd_store_key {
    uint32_t kind;
    uid_t uid;
    const char *job;
    uint32_t segment;
    int64_t window;
};

/* Opens or creates the store at path, bounded to max_bytes of pages in use.
 * On failure *ret_err names the failing step (static text). */
int sfd_store_open(const char *path, uint64_t max_bytes, struct sfd_store **ret,
                   const char **ret_err);
void sfd_store_close(struct sfd_store *s);
/* Inserts or replaces records in one transaction, then deletes the oldest
 * rows until the pages in use fit max_bytes. Returns the number of records
 * written (>= 0) or a negative SQLite-derived errno (-ENOSPC for a full disk
 * or a full store, -EIO otherwise); on error nothing of the batch stays. */
int sfd_store_put(struct sfd_store *s, const struct sfd_store_key *keys,
                  const uint8_t *const *bodies, const size_t *lens, size_t n,
                  uint64_t *ret_evicted);
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

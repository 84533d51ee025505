/*
 * sfd's durable history: the writer thread and its bounded queue, which keep
 * every SQLite call off the event loop, and the startup restore of recent
 * reports into the job table. The loop only encodes a report and appends it
 * to a single-producer ring with atomics; it takes no lock and never waits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "history.h"
#include "history_codec.h"
#include "rows_codec.h"
#include "safe_path.h"
#include "sfd.h"

/* Records and bytes queued at most; past either a record is dropped and
 * counted. A report is a few KiB, up to about 100 KiB for a dense window of
 * a thousand ranks: the byte bound is the one that holds memory down. */
#define QUEUE_MAX 1024
#define QUEUE_MAX_BYTES (16u << 20)
/* Records committed per transaction. */
#define BATCH_MAX 64
/* After a transaction that emptied the queue the writer lets the next
 * records gather this long: one commit (its locks, its WAL frame headers,
 * its page-count query) then serves every window that closed meanwhile
 * instead of one or two, and the loop's semaphore posts find no sleeper to
 * wake. A report reaches the disk at most this much later. */
#define COMMIT_INTERVAL_NS (20 * 1000 * 1000)
#define ERROR_LOG_INTERVAL_S 60

struct item {
    uint32_t kind, segment;
    uid_t uid;
    int64_t window;
    char job[SF_MAX_JOB_ID_LEN + 16]; /* sfd_job_key: "JOB" or "JOB@N" */
    uint8_t *body;
    size_t len;
};

struct sfd_history {
    /* The writer's once it runs. NULL with on set: opened read-only for the
     * restore (full disk), reopened for writing by the writer. */
    struct sfd_store *store;
    bool on;   /* records are queued and written: set before the writer starts */
    int dirfd; /* the held state directory, -1 when it could not be walked */
    char *dir; /* its path, for the log */
    uint64_t max_bytes;
    bool reserve_missing;       /* writer thread only: the spare file to remake */
    uint64_t last_reopen_log_s; /* writer thread only */
    uint64_t last_aside_log_s;  /* whoever sets a store aside: the start, then the writer */
    pthread_t thread;
    sem_t wake; /* one post per queued record, and one to stop */
    atomic_bool stop;
    /* Single producer (the loop) and single consumer (the writer): head and
     * tail only grow; tail - head records are queued. */
    struct item queue[QUEUE_MAX];
    _Atomic size_t head, tail;
    _Atomic size_t queued_bytes;      /* added by the loop, taken off by the writer */
    struct sfd_history_counters live; /* what the loop reads (d->history_counters) */
    struct sfd_history_stats stats; /* the restore's, published to live before the writer starts */
    uint64_t last_error_log_s;      /* writer thread only */
};

/* ---- writer thread ----------------------------------------------------------- */

static uint64_t monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec + 1; /* never 0: 0 means "never logged" */
}

static size_t take_batch(struct sfd_history *h, struct item *out)
{
    size_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    size_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
    size_t n = 0, bytes = 0;
    while (head + n != tail && n < BATCH_MAX) {
        out[n] = h->queue[(head + n) % QUEUE_MAX];
        bytes += out[n].len;
        n++;
    }
    atomic_store_explicit(&h->head, head + n, memory_order_release);
    atomic_fetch_sub_explicit(&h->queued_bytes, bytes, memory_order_relaxed);
    return n;
}

static void set_aside(struct sfd_history *h, const char *why);
static int open_rw(struct sfd_history *h, const char **what);

/* Once a minute at most, like the write errors. */
static bool log_due(uint64_t *last)
{
    uint64_t now = monotonic_s();
    if (*last != 0 && now < *last + ERROR_LOG_INTERVAL_S)
        return false;
    *last = now;
    return true;
}

/* The store after a read-only restore: opened for writing again, so that a
 * disk that had no room at start is written to once it has. */
static int reopen(struct sfd_history *h)
{
    const char *what = NULL;
    int r = open_rw(h, &what);
    if (r == 0) {
        sfd_log(SFD_LOG_NOTICE, NULL, "history: %s open for writing again", SFD_HISTORY_FILE);
        return 0;
    }
    atomic_fetch_add(&h->live.reopen_errors, 1);
    if (log_due(&h->last_reopen_log_s))
        sfd_log(SFD_LOG_ERR, NULL,
                "history: %s: %s: %s; retried with the next records, counted in "
                "history.reopen_errors",
                SFD_HISTORY_FILE, what, strerror(-r));
    return r;
}

/* One put, and for a full disk or a damaged file one more after the cure:
 * room made by evicting the oldest rows, or a fresh store. */
static int put_once_more(struct sfd_history *h, const struct sfd_store_key *keys,
                         const uint8_t *const *bodies, const size_t *lens, size_t n,
                         uint64_t *evicted)
{
    if (h->store == NULL && reopen(h) < 0)
        return -EIO;
    int r = sfd_store_put(h->store, keys, bodies, lens, n, evicted);
    if (r == -ENOSPC) {
        atomic_fetch_add(&h->live.full_retries, 1);
        if (sfd_store_make_room(h->store, n, evicted) == 0)
            r = sfd_store_put(h->store, keys, bodies, lens, n, evicted);
        h->reserve_missing = true;
    } else if (r == -EUCLEAN) {
        set_aside(h, "a write found it damaged");
        if (h->store == NULL && reopen(h) == 0)
            r = sfd_store_put(h->store, keys, bodies, lens, n, evicted);
    }
    if (r >= 0 && h->reserve_missing)
        h->reserve_missing = sfd_store_keep_reserve(h->store) < 0;
    return r;
}

/* A batch the full disk still refuses after the eviction is halved, and the
 * halves halved, without evicting more: what fits is stored, the rest is
 * lost record by record. At most 2n - 1 puts. Returns the records written. */
/* The records history promises (reports and live verdict events): all but
 * the rows, which are kept as best they can be. */
static size_t reports_in(const struct sfd_store_key *keys, size_t n)
{
    size_t reports = 0;
    for (size_t i = 0; i < n; i++)
        reports += keys[i].kind != SFD_HISTORY_ROWS;
    return reports;
}

/* The records stored; *reports_done counts the reports among them. */
static size_t put_halves(struct sfd_history *h, const struct sfd_store_key *keys,
                         const uint8_t *const *bodies, const size_t *lens, size_t n,
                         uint64_t *evicted, size_t *reports_done, int *ret_err)
{
    int r = sfd_store_put(h->store, keys, bodies, lens, n, evicted);
    if (r >= 0) {
        *reports_done += reports_in(keys, n);
        return n;
    }
    if (r != -ENOSPC || n == 1) {
        *ret_err = r;
        return 0;
    }
    size_t half = n / 2;
    return put_halves(h, keys, bodies, lens, half, evicted, reports_done, ret_err) +
           put_halves(h, keys + half, bodies + half, lens + half, n - half, evicted, reports_done,
                      ret_err);
}

static void write_batch(struct sfd_history *h, struct item *batch, size_t n)
{
    struct sfd_store_key keys[BATCH_MAX];
    const uint8_t *bodies[BATCH_MAX];
    size_t lens[BATCH_MAX];
    uint64_t evicted = 0, used = 0;
    for (size_t i = 0; i < n; i++) {
        keys[i] = (struct sfd_store_key){batch[i].kind, batch[i].uid, batch[i].job,
                                         batch[i].segment, batch[i].window};
        bodies[i] = batch[i].body;
        lens[i] = batch[i].len;
    }
    size_t reports = reports_in(keys, n), reports_done = 0, done = 0;
    int r = put_once_more(h, keys, bodies, lens, n, &evicted);
    if (r >= 0) {
        done = n;
        reports_done = reports;
    } else if (r == -ENOSPC && n > 1 && h->store != NULL) {
        r = 0;
        done = put_halves(h, keys, bodies, lens, n, &evicted, &reports_done, &r);
    }
    for (size_t i = 0; i < n; i++)
        free(batch[i].body);
    atomic_fetch_add(&h->live.evicted, evicted);
    if (done > 0) {
        if (sfd_store_used_bytes(h->store, &used) == 0)
            atomic_store(&h->live.bytes, used);
        atomic_fetch_add(&h->live.written, reports_done);
        atomic_fetch_add(&h->live.rows_written, done - reports_done);
    }
    /* Rows are kept as best they can be; the reports are what is promised. */
    size_t lost = reports - reports_done;
    atomic_fetch_add(&h->live.rows_skipped, (n - done) - lost);
    if (lost == 0)
        return;
    uint64_t errors = atomic_fetch_add(&h->live.write_errors, lost) + lost;
    /* At most one line a minute: a full disk must not flood the journal. */
    if (log_due(&h->last_error_log_s))
        sfd_log(SFD_LOG_ERR, NULL,
                "history: write failed (%s); %llu records lost so far, "
                "counted in history.write_errors",
                strerror(r < 0 ? -r : EIO), (unsigned long long)errors);
}

static void let_records_gather(const struct sfd_history *h)
{
    struct timespec ts = {0, COMMIT_INTERVAL_NS};
    if (!atomic_load(&h->stop))
        nanosleep(&ts, NULL);
}

static void *writer_main(void *arg)
{
    struct sfd_history *h = arg;
    struct item batch[BATCH_MAX];
    for (;;) {
        size_t n = take_batch(h, batch);
        if (n > 0) {
            write_batch(h, batch, n);
            if (n < BATCH_MAX)
                let_records_gather(h);
            continue;
        }
        if (atomic_load(&h->stop))
            break; /* stop is set before its post: the queue was drained after it */
        while (sem_wait(&h->wake) < 0 && errno == EINTR)
            ;
    }
    return NULL;
}

/* ---- start and stop ---------------------------------------------------------- */

static void history_off(struct sfd_history *h, const char *path, const char *what, int err)
{
    (void)h;
    sfd_log(SFD_LOG_WARNING, NULL, "history off: %s: %s: %s; reports are kept in memory only", path,
            what, strerror(err));
}

/* Every failed open of the store is counted, the ones cured after too. */
static int open_rw(struct sfd_history *h, const char **what)
{
    int r = sfd_store_open_at(h->dirfd, SFD_HISTORY_FILE, h->max_bytes, 0, &h->store, what);
    if (r < 0) {
        h->store = NULL;
        atomic_fetch_add(&h->live.open_errors, 1);
    }
    if (r == -EUCLEAN) {
        set_aside(h, *what);
        r = sfd_store_open_at(h->dirfd, SFD_HISTORY_FILE, h->max_bytes, 0, &h->store, what);
        if (r < 0) {
            h->store = NULL;
            atomic_fetch_add(&h->live.open_errors, 1);
        }
    }
    return r;
}

/* The damaged file (and its WAL) keep their bytes for the operator under a
 * name of their own in the held directory; the name of the store is free
 * for a fresh one. RENAME_NOREPLACE: an earlier damaged file stays. */
static void set_aside(struct sfd_history *h, const char *why)
{
    char stamp[32], name[sizeof(SFD_HISTORY_FILE) + 64], wal[sizeof name + 4];
    sfd_store_close(h->store);
    h->store = NULL;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    int r = -EEXIST;
    for (unsigned i = 0; i < 100 && r == -EEXIST; i++) {
        if (i == 0)
            snprintf(name, sizeof name, "%s.damaged-%s", SFD_HISTORY_FILE, stamp);
        else
            snprintf(name, sizeof name, "%s.damaged-%s.%u", SFD_HISTORY_FILE, stamp, i);
        r = renameat2(h->dirfd, SFD_HISTORY_FILE, h->dirfd, name, RENAME_NOREPLACE) == 0 ? 0
                                                                                         : -errno;
    }
    if (r < 0) { /* met again with every batch: once a minute */
        if (log_due(&h->last_aside_log_s))
            sfd_log(SFD_LOG_ERR, NULL, "history: %s is damaged (%s) and cannot be set aside: %s",
                    SFD_HISTORY_FILE, why, strerror(-r));
        return;
    }
    snprintf(wal, sizeof wal, "%s-wal", name);
    renameat2(h->dirfd, SFD_HISTORY_FILE "-wal", h->dirfd, wal, RENAME_NOREPLACE);
    unlinkat(h->dirfd, SFD_HISTORY_FILE "-shm", 0); /* SQLite's scratch, rebuilt from the WAL */
    atomic_fetch_add(&h->live.damaged, 1);
    sfd_log(SFD_LOG_ERR, NULL,
            "history: %s is damaged (%s); kept as %s/%s, a fresh store is started",
            SFD_HISTORY_FILE, why, h->dir ? h->dir : "(state_dir)", name);
}

static int restore(struct sfd *d, struct sfd_history *h);

/* The writer gets no signals: the loop's thread handles them all. */
static int start_writer(struct sfd_history *h)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&h->thread, NULL, writer_main, h);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

/* No room to open for writing (the WAL index, the journal): the reports
 * are read from the file opened immutable, and the writer opens it for
 * writing with its first records. */
static void restore_read_only(struct sfd *d, struct sfd_history *h, const char *what, int err)
{
    const char *ro_what = NULL;
    sfd_log(SFD_LOG_WARNING, NULL,
            "history: %s: %s: %s; restoring read-only, writing is retried with each record",
            SFD_HISTORY_FILE, what, strerror(-err));
    int r = sfd_store_open_at(h->dirfd, SFD_HISTORY_FILE, h->max_bytes, SFD_STORE_READONLY,
                              &h->store, &ro_what);
    if (r == 0) {
        h->stats.readonly_restores++;
        r = restore(d, h);
        sfd_store_close(h->store);
        h->store = NULL;
        if (r == -EUCLEAN) /* a damaged page under the read: set aside for a fresh store */
            set_aside(h, "a read found it damaged");
        return;
    }
    atomic_fetch_add(&h->live.open_errors, 1);
    if (r == -EUCLEAN)
        set_aside(h, ro_what);
    else
        sfd_log(SFD_LOG_WARNING, NULL, "history: %s: %s: %s; nothing restored", SFD_HISTORY_FILE,
                ro_what, strerror(-r));
}

/* Opens the store for writing and restores from it. What may fail is
 * cured where it can be: a damaged file is set aside for a fresh one, a
 * full disk restores read-only. Returns < 0 when history is off. */
static int open_and_restore(struct sfd *d, struct sfd_history *h, const char **what)
{
    int r = open_rw(h, what);
    if (r == -ELOOP || r == -EINVAL) {
        h->stats.refused++;
        return r;
    }
    if (r == -ENOSPC || r == -EIO) {
        restore_read_only(d, h, *what, r);
        return 0;
    }
    if (r < 0)
        return r;
    r = restore(d, h); /* before the writer exists: the store has one user at a time */
    if (r == -EUCLEAN) {
        set_aside(h, "a read found it damaged");
        r = open_rw(h, what);
        return r == -ENOSPC || r == -EIO ? 0 : r; /* the writer retries then */
    }
    return 0;
}

/* What the start counted single-threaded, for the readers of live. */
static void publish_start_stats(struct sfd_history *h)
{
    atomic_store(&h->live.restored, h->stats.restored);
    atomic_store(&h->live.restore_errors, h->stats.restore_errors);
    atomic_store(&h->live.read_errors, h->stats.read_errors);
    atomic_store(&h->live.refused, h->stats.refused);
    atomic_store(&h->live.readonly_restores, h->stats.readonly_restores);
    atomic_store(&h->live.rows_restored, h->stats.rows_restored);
}

static void open_store(struct sfd *d, struct sfd_history *h)
{
    char why[sizeof(d->cfg.state_dir) + 128];
    const char *what = NULL;
    h->max_bytes = (uint64_t)d->cfg.max_history_mb << 20;
    h->dir = strdup(d->cfg.state_dir); /* NULL: the log says "(state_dir)" */
    h->dirfd = sf_safe_dir_open(d->cfg.state_dir, SF_SAFE_DIR_CREATE, 0700, why, sizeof why);
    if (h->dirfd < 0) {
        atomic_fetch_add(&h->live.open_errors, 1);
        history_off(h, d->cfg.state_dir, why, -h->dirfd);
        return;
    }
    int r = open_and_restore(d, h, &what);
    publish_start_stats(h);
    if (r < 0) {
        snprintf(why, sizeof why, "%s/%s", d->cfg.state_dir, SFD_HISTORY_FILE);
        history_off(h, why, what ? what : "cannot be used", -r);
        return;
    }
    h->on = true;
    r = start_writer(h);
    if (r != 0) {
        h->on = false;
        sfd_store_close(h->store);
        h->store = NULL;
        atomic_fetch_add(&h->live.open_errors, 1);
        history_off(h, d->cfg.state_dir, "cannot start the writer thread", r);
        return;
    }
    atomic_store(&h->live.enabled, true);
    sfd_log(SFD_LOG_INFO, NULL, "history: %s/%s, at most %u MB", d->cfg.state_dir, SFD_HISTORY_FILE,
            d->cfg.max_history_mb);
}

int sfd_history_start(struct sfd *d)
{
    if (d->cfg.state_dir[0] == '\0' || d->cfg.max_history_mb == 0)
        return 0; /* switched off in the configuration */
    struct sfd_history *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    if (sem_init(&h->wake, 0, 0) < 0) {
        free(h);
        return -errno;
    }
    h->dirfd = -1;
    d->history = h;
    d->history_counters = &h->live;
    open_store(d, h); /* on failure h stays, off, to count it */
    return 0;
}

void sfd_history_stop(struct sfd *d)
{
    struct sfd_history *h = d ? d->history : NULL;
    if (h == NULL)
        return;
    if (h->on) {
        atomic_store(&h->stop, true);
        sem_post(&h->wake);
        pthread_join(h->thread, NULL); /* writes what is queued, then returns */
    }
    sfd_store_close(h->store);
    if (h->dirfd >= 0)
        close(h->dirfd);
    free(h->dir);
    sem_destroy(&h->wake);
    free(h);
    d->history = NULL;
    d->history_counters = NULL;
}

json_t *sfd_history_json(const struct sfd *d)
{
    struct sfd_history_stats h;
    sfd_history_get_stats(d, &h);
    json_t *o = json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "enabled", h.enabled,
                          "written", (json_int_t)h.written, "write_errors",
                          (json_int_t)h.write_errors, "queue_dropped", (json_int_t)h.queue_dropped,
                          "evicted", (json_int_t)h.evicted, "restored", (json_int_t)h.restored,
                          "restore_errors", (json_int_t)h.restore_errors, "open_errors",
                          (json_int_t)h.open_errors, "bytes", (json_int_t)h.bytes);
    if (o == NULL)
        return NULL;
    json_t *more = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "read_errors", (json_int_t)h.read_errors,
        "damaged", (json_int_t)h.damaged, "refused", (json_int_t)h.refused, "readonly_restores",
        (json_int_t)h.readonly_restores, "full_retries", (json_int_t)h.full_retries,
        "reopen_errors", (json_int_t)h.reopen_errors, "rows_written", (json_int_t)h.rows_written,
        "rows_restored", (json_int_t)h.rows_restored, "rows_skipped", (json_int_t)h.rows_skipped);
    if (more == NULL || json_object_update(o, more) < 0) {
        json_decref(more);
        json_decref(o);
        return NULL;
    }
    json_decref(more);
    return o;
}

void sfd_history_get_stats(const struct sfd *d, struct sfd_history_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (d->history_counters != NULL)
        sfd_history_counters_read(d->history_counters, ret);
}

/* ---- the loop's side ----------------------------------------------------------- */

static bool history_on(const struct sfd *d)
{
    return d->history != NULL && d->history->on;
}

/* Queues one record, taking body; a full queue drops it (counted). */
static int queue_record(struct sfd *d, const struct sfd_job *job, uint32_t kind, uint32_t segment,
                        int64_t window, uint8_t *body, size_t len)
{
    struct sfd_history *h = d->history;
    if (h == NULL || !h->on) {
        free(body);
        return -ENOENT;
    }
    size_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    if (tail - head == QUEUE_MAX ||
        atomic_load_explicit(&h->queued_bytes, memory_order_relaxed) + len > QUEUE_MAX_BYTES) {
        free(body);
        atomic_fetch_add_explicit(&h->live.queue_dropped, 1, memory_order_relaxed);
        return -ENOBUFS;
    }
    atomic_fetch_add_explicit(&h->queued_bytes, len, memory_order_relaxed);
    struct item *it = &h->queue[tail % QUEUE_MAX];
    *it = (struct item){kind, segment, job->uid, window, "", body, len};
    sfd_job_key(job, it->job, sizeof it->job);
    atomic_store_explicit(&h->tail, tail + 1, memory_order_release);
    sem_post(&h->wake);
    return 0;
}

void sfd_history_put_report(struct sfd *d, const struct sfd_job *job, const sf_report *report)
{
    uint8_t *body;
    size_t len;
    if (!history_on(d))
        return;
    if (sfd_report_pack(report, &body, &len) < 0) {
        atomic_fetch_add_explicit(&d->history->live.write_errors, 1, memory_order_relaxed);
        return;
    }
    queue_record(d, job, SFD_HISTORY_REPORT, report->meta.segment, report->meta.index, body, len);
}

static int rows_slot(const sf_window_meta *meta)
{
    bool full = !(meta->flags & (SF_WIN_PARTIAL | SF_WIN_CLOSED_EARLY));
    return full ? SFD_HISTORY_ROWS_FULL : SFD_HISTORY_ROWS_OTHER;
}

/* Rows records yield to reports: they may fill half of the queue, no more,
 * so that a burst of rows never makes a report drop. */
static bool rows_fit(const struct sfd_history *h, size_t len)
{
    size_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    return tail - head < QUEUE_MAX / 2 &&
           atomic_load_explicit(&h->queued_bytes, memory_order_relaxed) + len <=
               QUEUE_MAX_BYTES / 2;
}

static void queue_rows(struct sfd *d, struct sfd_job *job, const struct sfd_stored *s)
{
    struct sfd_history *h = d->history;
    sf_row *view = NULL;
    uint8_t *body = NULL;
    size_t len = 0;
    int r = sfd_rows_view(job, &s->rows, &view);
    if (r == 0)
        r = sf_rows_pack(&job->schema, job->world_size, s->meta.segment, s->meta.index, view,
                         s->rows.n, &body, &len);
    free(view);
    if (r < 0) {
        atomic_fetch_add_explicit(&h->live.write_errors, 1, memory_order_relaxed);
        return;
    }
    if (len > SFD_HISTORY_ROWS_MAX || !rows_fit(h, len)) {
        free(body);
        atomic_fetch_add_explicit(&h->live.rows_skipped, 1, memory_order_relaxed);
        return;
    }
    int slot = rows_slot(&s->meta);
    if (queue_record(d, job, SFD_HISTORY_ROWS, 0, slot, body, len) == 0)
        job->rows_saved[slot] =
            (struct sfd_rows_saved){s->meta.segment, s->meta.index, sfd_now_ms(d), true};
}

static bool has_rows(const struct sfd_stored *s)
{
    return !s->remote && !s->rows_evicted && s->rows.n > 0;
}

/* A job closing windows faster than one a second has its rows queued once a
 * second per slot (packing them is the loop's work); the latest of each slot
 * is queued at shutdown. */
void sfd_history_put_rows(struct sfd *d, struct sfd_job *job, const struct sfd_stored *s)
{
    if (!history_on(d) || !d->cfg.history_rows || !has_rows(s))
        return;
    const struct sfd_rows_saved *saved = &job->rows_saved[rows_slot(&s->meta)];
    if (saved->any && sfd_now_ms(d) - saved->at_ms < SFD_HISTORY_ROWS_INTERVAL_MS)
        return;
    queue_rows(d, job, s);
}

void sfd_history_save_rows(struct sfd *d)
{
    if (!history_on(d) || !d->cfg.history_rows)
        return;
    for (struct sfd_job *job = d->jobs; job != NULL; job = job->next)
        for (int slot = 0; slot < SFD_HISTORY_ROWS_SLOTS; slot++) {
            const struct sfd_stored *latest = NULL;
            for (uint32_t i = 0; i < job->n_stored; i++) {
                const struct sfd_stored *s = &job->stored[i];
                if (has_rows(s) && rows_slot(&s->meta) == slot &&
                    (latest == NULL || s->seq > latest->seq))
                    latest = s;
            }
            const struct sfd_rows_saved *saved = &job->rows_saved[slot];
            if (latest != NULL && !(saved->any && saved->segment == latest->meta.segment &&
                                    saved->index == latest->meta.index))
                queue_rows(d, job, latest);
        }
}

void sfd_history_put_event(struct sfd *d, const struct sfd_job *job, uint64_t seq,
                           const char *json_text)
{
    struct sfd_history *h = d->history;
    if (!history_on(d))
        return;
    size_t len = strlen(json_text);
    uint8_t *body = malloc(len ? len : 1);
    if (body == NULL) {
        atomic_fetch_add_explicit(&h->live.write_errors, 1, memory_order_relaxed);
        return;
    }
    memcpy(body, json_text, len);
    queue_record(d, job, SFD_HISTORY_EVENT, job->segment, (int64_t)seq, body, len);
}

void sfd_history_put_verdict_events(struct sfd *d, struct sfd_job *job)
{
    struct sfd_verdict *v = &job->verdict;
    for (; v->written < v->seq; v->written++) {
        const struct sfd_verdict_event *e = &v->events[v->written % SFD_VERDICT_EVENTS];
        if (e->seq != v->written + 1)
            continue; /* overwritten in the ring before it was written */
        char *text = sfd_verdict_event_text(job, e);
        if (text != NULL)
            sfd_history_put_event(d, job, e->seq, text);
        free(text);
    }
}

/* ---- restore ------------------------------------------------------------------- */

struct restore_ctx {
    struct sfd *d;
    struct sfd_history_stats *stats;
    char job_key[SF_MAX_JOB_ID_LEN + 16]; /* the store's name: "JOB" or "JOB@N" */
    char job_id[SF_MAX_JOB_ID_LEN + 1];
    uint32_t incarnation;
    uid_t uid;
    bool skip;                /* this job's rows are not restored */
    sf_report *reports[4096]; /* newest first, up to keep_windows */
    uint32_t n;
};

static void drop_reports(struct restore_ctx *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        sf_report_free(c->reports[i]);
    c->stats->restore_errors += c->n;
    c->n = 0;
}

/* Files the collected reports of one job, oldest first, as kept windows
 * without rows, and puts the job in the state it had: same owner, schema,
 * world size, segment and window geometry, with its closed windows closed. */
static void restore_job(struct restore_ctx *c)
{
    struct sfd *d = c->d;
    struct sfd_job *job = NULL;
    enum sfd_reject why;
    if (c->n == 0)
        return;
    const sf_report *latest = c->reports[0];
    uint32_t world = latest->meta.world_size;
    int r = world >= 1 && world <= d->cfg.max_ranks ? 0 : -ERANGE;
    if (r == 0)
        r = sfd_job_find_or_create(d, c->job_id, c->uid, c->incarnation, &job, &why);
    if (r == 0 && job->rank_pages == NULL)
        r = sfd_job_bind_shape(job, &latest->schema, world);
    if (r < 0) {
        sfd_log(SFD_LOG_WARNING, c->job_key, "history: job not restored: %s", strerror(-r));
        drop_reports(c);
        return;
    }
    job->reports_only = job->n_live_ranks == 0; /* a cluster report of it is kept whole */
    job->segment = latest->meta.segment;
    job->closed_max = latest->meta.index;
    job->gates.warmup_steps = latest->gates.warmup_steps;
    job->gates.window_steps = latest->gates.window_steps;
    job->gates.dense_max_ranks = latest->gates.dense_max_ranks;
    for (uint32_t i = c->n; i-- > 0;) {
        sfd_job_trim_kept(job, job->cap_stored - 1);
        struct sfd_stored *s = &job->stored[job->n_stored++];
        memset(s, 0, sizeof(*s));
        s->meta = c->reports[i]->meta;
        s->report = c->reports[i];
        s->remote = true; /* no rows here: RECORD has nothing of it to replay */
        sfd_stored_charge_report(job, s);
    }
    c->stats->restored += c->n;
    c->n = 0;
    sfd_log(SFD_LOG_INFO, job->id, "history: restored %u windows, latest %lld.%u", job->n_stored,
            (long long)latest->meta.index, latest->meta.segment);
}

static int restore_visit(void *ctx, const struct sfd_store_key *key, const uint8_t *body,
                         size_t len)
{
    struct restore_ctx *c = ctx;
    if (strcmp(c->job_key, key->job) != 0 || c->uid != key->uid) {
        restore_job(c);
        snprintf(c->job_key, sizeof c->job_key, "%s", key->job);
        c->uid = key->uid;
        c->skip = sfd_job_key_parse(key->job, c->job_id, sizeof c->job_id, &c->incarnation) < 0;
    }
    sf_report *report = NULL;
    if (c->skip || c->n >= c->d->cfg.keep_windows || c->n >= 4096 ||
        sfd_report_unpack(body, len, &report) < 0 || report->meta.index != key->window ||
        report->meta.segment != key->segment) {
        sf_report_free(report);
        c->stats->restore_errors++;
        return 0;
    }
    c->reports[c->n++] = report;
    return 0;
}

/* A live verdict event of a restored job (docs/LIVE.md); others are
 * skipped, malformed ones counted. */
static int restore_event(void *ctx, const struct sfd_store_key *key, const uint8_t *body,
                         size_t len)
{
    struct restore_ctx *c = ctx;
    char id[SF_MAX_JOB_ID_LEN + 1];
    uint32_t incarnation;
    struct sfd_verdict_event e;
    if (sfd_job_key_parse(key->job, id, sizeof id, &incarnation) < 0)
        return 0;
    struct sfd_job *job = sfd_job_lookup(c->d, key->uid, id, incarnation);
    if (job == NULL)
        return 0;
    if (sfd_verdict_event_decode(&job->schema, body, len, &e) < 0 ||
        e.seq != (uint64_t)key->window) {
        c->stats->restore_errors++;
        return 0;
    }
    sfd_verdict_restore_event(job, &e);
    return 0;
}

/* Bounded: at most max_jobs jobs of keep_windows reports each are read.
 * What was read before a failed read is restored; the failure is counted
 * and returned (-EUCLEAN: a damaged page). */
static int restore(struct sfd *d, struct sfd_history *h)
{
    struct restore_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    c->d = d;
    c->stats = &h->stats;
    c->uid = (uid_t)-1;
    int r = sfd_store_recent(h->store, SFD_HISTORY_REPORT, d->cfg.max_jobs, d->cfg.keep_windows,
                             restore_visit, c);
    restore_job(c);
    if (r == 0)
        r = sfd_history_restore_rows(d, h->store, &h->stats);
    if (r == 0)
        r = sfd_store_recent(h->store, SFD_HISTORY_EVENT, d->cfg.max_jobs, SFD_VERDICT_EVENTS,
                             restore_event, c);
    if (r < 0) {
        h->stats.read_errors++;
        sfd_log(SFD_LOG_WARNING, NULL,
                "history: reading the store failed: %s; %llu reports restored before it",
                strerror(-r), (unsigned long long)h->stats.restored);
    }
    if (h->stats.restore_errors > 0)
        sfd_log(SFD_LOG_WARNING, NULL, "history: %llu stored records could not be restored",
                (unsigned long long)h->stats.restore_errors);
    free(c);
    if (d->n_jobs > 0)
        sfd_after_window(d); /* the Prometheus lines of the restored jobs */
    return r < 0 ? r : 0;
}

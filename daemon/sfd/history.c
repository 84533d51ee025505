/*
 * sfd's durable history: the writer thread and its bounded queue, which keep
 * every SQLite call off the event loop, and the startup restore of recent
 * reports into the job table. The loop only encodes a report and appends it
 * to a single-producer ring with atomics; it takes no lock and never waits.
 */
#define _GNU_SOURCE
#include <errno.h>
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

#include "history.h"
#include "history_codec.h"
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

/* Counters the writer moves while the loop reads them. */
struct live_stats {
    _Atomic uint64_t written, write_errors, queue_dropped, evicted, bytes;
};

struct sfd_history {
    struct sfd_store *store; /* NULL: history off, counters only */
    pthread_t thread;
    sem_t wake; /* one post per queued record, and one to stop */
    atomic_bool stop;
    /* Single producer (the loop) and single consumer (the writer): head and
     * tail only grow; tail - head records are queued. */
    struct item queue[QUEUE_MAX];
    _Atomic size_t head, tail;
    _Atomic size_t queued_bytes; /* added by the loop, taken off by the writer */
    struct live_stats live;
    struct sfd_history_stats stats; /* set before the writer starts, then read-only */
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
    int r = sfd_store_put(h->store, keys, bodies, lens, n, &evicted);
    for (size_t i = 0; i < n; i++)
        free(batch[i].body);
    if (r >= 0) {
        if (sfd_store_used_bytes(h->store, &used) == 0)
            atomic_store(&h->live.bytes, used);
        atomic_fetch_add(&h->live.written, n);
        atomic_fetch_add(&h->live.evicted, evicted);
        return;
    }
    uint64_t errors = atomic_fetch_add(&h->live.write_errors, n) + n;
    /* At most one line a minute: a full disk must not flood the journal. */
    uint64_t now = monotonic_s();
    if (h->last_error_log_s == 0 || now >= h->last_error_log_s + ERROR_LOG_INTERVAL_S) {
        h->last_error_log_s = now;
        sfd_log(SFD_LOG_ERR, NULL,
                "history: write failed (%s); %llu records lost so far, "
                "counted in history.write_errors",
                strerror(-r), (unsigned long long)errors);
    }
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
    h->stats.open_errors++;
    sfd_log(SFD_LOG_WARNING, NULL, "history off: %s: %s: %s; reports are kept in memory only", path,
            what, strerror(err));
}

static void restore(struct sfd *d, struct sfd_history *h);

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

static void open_store(struct sfd *d, struct sfd_history *h)
{
    char path[sizeof(d->cfg.state_dir) + sizeof(SFD_HISTORY_FILE) + 1];
    const char *what = NULL;
    if (mkdir(d->cfg.state_dir, 0700) < 0 && errno != EEXIST) {
        history_off(h, d->cfg.state_dir, "cannot create the directory", errno);
        return;
    }
    snprintf(path, sizeof path, "%s/%s", d->cfg.state_dir, SFD_HISTORY_FILE);
    int r = sfd_store_open(path, (uint64_t)d->cfg.max_history_mb << 20, &h->store, &what);
    if (r < 0) {
        history_off(h, path, what, -r);
        return;
    }
    restore(d, h); /* before the writer exists: the store has one user at a time */
    r = start_writer(h);
    if (r != 0) {
        sfd_store_close(h->store);
        h->store = NULL;
        history_off(h, path, "cannot start the writer thread", r);
        return;
    }
    h->stats.enabled = true;
    sfd_log(SFD_LOG_INFO, NULL, "history: %s, at most %u MB", path, d->cfg.max_history_mb);
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
    d->history = h;
    open_store(d, h); /* on failure h stays, off, to count it */
    return 0;
}

void sfd_history_stop(struct sfd *d)
{
    struct sfd_history *h = d ? d->history : NULL;
    if (h == NULL)
        return;
    if (h->store != NULL) {
        atomic_store(&h->stop, true);
        sem_post(&h->wake);
        pthread_join(h->thread, NULL); /* writes what is queued, then returns */
        sfd_store_close(h->store);
    }
    sem_destroy(&h->wake);
    free(h);
    d->history = NULL;
}

json_t *sfd_history_json(const struct sfd *d)
{
    struct sfd_history_stats h;
    sfd_history_get_stats(d, &h);
    return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "enabled", h.enabled,
                     "written", (json_int_t)h.written, "write_errors", (json_int_t)h.write_errors,
                     "queue_dropped", (json_int_t)h.queue_dropped, "evicted", (json_int_t)h.evicted,
                     "restored", (json_int_t)h.restored, "restore_errors",
                     (json_int_t)h.restore_errors, "open_errors", (json_int_t)h.open_errors,
                     "bytes", (json_int_t)h.bytes);
}

void sfd_history_get_stats(const struct sfd *d, struct sfd_history_stats *ret)
{
    struct sfd_history *h = d->history;
    if (h == NULL) {
        memset(ret, 0, sizeof(*ret));
        return;
    }
    *ret = h->stats;
    ret->written = atomic_load_explicit(&h->live.written, memory_order_relaxed);
    ret->write_errors = atomic_load_explicit(&h->live.write_errors, memory_order_relaxed);
    ret->queue_dropped = atomic_load_explicit(&h->live.queue_dropped, memory_order_relaxed);
    ret->evicted = atomic_load_explicit(&h->live.evicted, memory_order_relaxed);
    ret->bytes = atomic_load_explicit(&h->live.bytes, memory_order_relaxed);
}

/* ---- the loop's side ----------------------------------------------------------- */

/* Queues one packed record (taking body); a full queue drops it, counted. */
static void enqueue(struct sfd_history *h, const struct sfd_job *job, uint32_t kind,
                    uint32_t segment, int64_t window, uint8_t *body, size_t len)
{
    size_t tail = atomic_load_explicit(&h->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    if (tail - head == QUEUE_MAX ||
        atomic_load_explicit(&h->queued_bytes, memory_order_relaxed) + len > QUEUE_MAX_BYTES) {
        free(body);
        atomic_fetch_add_explicit(&h->live.queue_dropped, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&h->queued_bytes, len, memory_order_relaxed);
    struct item *it = &h->queue[tail % QUEUE_MAX];
    *it = (struct item){kind, segment, job->uid, window, "", body, len};
    sfd_job_key(job, it->job, sizeof it->job);
    atomic_store_explicit(&h->tail, tail + 1, memory_order_release);
    sem_post(&h->wake);
}

void sfd_history_put_report(struct sfd *d, const struct sfd_job *job, const sf_report *report)
{
    struct sfd_history *h = d->history;
    uint8_t *body;
    size_t len;
    if (h == NULL || h->store == NULL)
        return;
    if (sfd_report_pack(report, &body, &len) < 0) {
        atomic_fetch_add_explicit(&h->live.write_errors, 1, memory_order_relaxed);
        return;
    }
    enqueue(h, job, SFD_HISTORY_REPORT, report->meta.segment, report->meta.index, body, len);
}

void sfd_history_put_event(struct sfd *d, const struct sfd_job *job, uint64_t seq,
                           const char *json_text)
{
    struct sfd_history *h = d->history;
    if (h == NULL || h->store == NULL)
        return;
    size_t len = strlen(json_text);
    uint8_t *body = malloc(len ? len : 1);
    if (body == NULL) {
        atomic_fetch_add_explicit(&h->live.write_errors, 1, memory_order_relaxed);
        return;
    }
    memcpy(body, json_text, len);
    enqueue(h, job, SFD_HISTORY_EVENT, job->segment, (int64_t)seq, body, len);
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

/* Bounded: at most max_jobs jobs of keep_windows reports each are read. */
static void restore(struct sfd *d, struct sfd_history *h)
{
    struct restore_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->d = d;
    c->stats = &h->stats;
    c->uid = (uid_t)-1;
    int r = sfd_store_recent(h->store, SFD_HISTORY_REPORT, d->cfg.max_jobs, d->cfg.keep_windows,
                             restore_visit, c);
    restore_job(c);
    if (r == 0)
        r = sfd_store_recent(h->store, SFD_HISTORY_EVENT, d->cfg.max_jobs, SFD_VERDICT_EVENTS,
                             restore_event, c);
    if (r < 0)
        sfd_log(SFD_LOG_WARNING, NULL, "history: reading the store failed: %s", strerror(-r));
    if (h->stats.restore_errors > 0)
        sfd_log(SFD_LOG_WARNING, NULL, "history: %llu stored records could not be restored",
                (unsigned long long)h->stats.restore_errors);
    free(c);
    if (d->n_jobs > 0)
        sfd_after_window(d); /* the Prometheus lines of the restored jobs */
}

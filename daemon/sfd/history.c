/*
 * sfd's durable history: the writer thread and its bounded queue, which keep
 * every SQLite call off the event loop, and the startup restore of recent
 * reports into the job table. The loop only encodes a report and appends it
 * to the queue under a short lock; it never waits on the disk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "history.h"
#include "sfd.h"

/* Records queued at most; past this a record is dropped and counted. At a
 * few KiB per report this bounds the queue to a few MiB. */
#define QUEUE_MAX 1024
/* Records committed per transaction. */
#define BATCH_MAX 64
#define ERROR_LOG_INTERVAL_S 60

struct item {
    uint32_t kind, segment;
    uid_t uid;
    int64_t window;
    char job[SFD_JOB_ID_MAX + 1];
    uint8_t *body;
    size_t len;
};

struct sfd_history {
    struct sfd_store *store;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    struct item queue[QUEUE_MAX];   /* ring */
    size_t head, n;
    struct sfd_history_stats stats; /* under lock */
    uint64_t last_error_log_s;      /* writer thread only */
};

static struct sfd_history_stats off_stats;  /* counters while history is off */

/* ---- writer thread ----------------------------------------------------------- */

static uint64_t monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec + 1;     /* never 0: 0 means "never logged" */
}

static size_t take_batch(struct sfd_history *h, struct item *out)
{
    size_t n = 0;
    while (h->n > 0 && n < BATCH_MAX) {
        out[n++] = h->queue[h->head];
        h->head = (h->head + 1) % QUEUE_MAX;
        h->n--;
    }
    return n;
}

static void write_batch(struct sfd_history *h, struct item *batch, size_t n)
{
    struct sfd_store_key keys[BATCH_MAX];
    const uint8_t *bodies[BATCH_MAX];
    size_t lens[BATCH_MAX];
    uint64_t evicted = 0, used = 0;
    for (size_t i = 0; i < n; i++) {
        keys[i] = (struct sfd_store_key){ batch[i].kind, batch[i].uid, batch[i].job,
                                          batch[i].segment, batch[i].window };
        bodies[i] = batch[i].body;
        lens[i] = batch[i].len;
    }
    int r = sfd_store_put(h->store, keys, bodies, lens, n, &evicted);
    if (r >= 0)
        sfd_store_used_bytes(h->store, &used);
    pthread_mutex_lock(&h->lock);
    if (r < 0) {
        h->stats.write_errors += n;
    } else {
        h->stats.written += n;
        h->stats.evicted += evicted;
        h->stats.bytes = used;
    }
    uint64_t errors = h->stats.write_errors;
    pthread_mutex_unlock(&h->lock);
    /* At most one line a minute: a full disk must not flood the journal. */
    uint64_t now = monotonic_s();
    if (r < 0 && (h->last_error_log_s == 0 || now >= h->last_error_log_s + ERROR_LOG_INTERVAL_S)) {
        h->last_error_log_s = now;
        sfd_log(SFD_LOG_ERR, NULL, "history: write failed (%s); %llu records lost so far, "
                "counted in history.write_errors", strerror(-r), (unsigned long long)errors);
    }
    for (size_t i = 0; i < n; i++)
        free(batch[i].body);
}

static void *writer_main(void *arg)
{
    struct sfd_history *h = arg;
    static __thread struct item batch[BATCH_MAX];
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->n == 0 && !h->stop)
            pthread_cond_wait(&h->wake, &h->lock);
        if (h->n == 0 && h->stop)
            break;
        size_t n = take_batch(h, batch);
        pthread_mutex_unlock(&h->lock);
        write_batch(h, batch, n);
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* ---- start and stop ---------------------------------------------------------- */

static void history_off(const char *dir, const char *what, int err)
{
    off_stats.open_errors++;
    sfd_log(SFD_LOG_WARNING, NULL, "history off: %s: %s: %s; reports are kept in memory only",
            dir, what, strerror(err));
}

static void restore(struct sfd *d, struct sfd_history *h);

int sfd_history_start(struct sfd *d)
{
    char path[sizeof(d->cfg.state_dir) + sizeof(SFD_HISTORY_FILE) + 1];
    const char *what = NULL;
    struct sfd_store *store = NULL;
    if (d->cfg.state_dir[0] == '\0' || d->cfg.max_history_mb == 0)
        return 0;   /* switched off in the configuration */
    if (mkdir(d->cfg.state_dir, 0700) < 0 && errno != EEXIST) {
        history_off(d->cfg.state_dir, "cannot create the directory", errno);
        return 0;
    }
    snprintf(path, sizeof path, "%s/%s", d->cfg.state_dir, SFD_HISTORY_FILE);
    int r = sfd_store_open(path, (uint64_t)d->cfg.max_history_mb << 20, &store, &what);
    if (r < 0) {
        history_off(path, what, -r);
        return 0;
    }
    struct sfd_history *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        sfd_store_close(store);
        return -ENOMEM;
    }
    h->store = store;
    h->stats.enabled = true;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->wake, NULL);
    restore(d, h);  /* before the writer exists: the store has one user at a time */
    r = pthread_create(&h->thread, NULL, writer_main, h);
    if (r != 0) {
        sfd_store_close(store);
        pthread_mutex_destroy(&h->lock);
        pthread_cond_destroy(&h->wake);
        free(h);
        history_off(path, "cannot start the writer thread", r);
        return 0;
    }
    d->history = h;
    sfd_log(SFD_LOG_INFO, NULL, "history: %s, at most %u MB", path, d->cfg.max_history_mb);
    return 0;
}

void sfd_history_stop(struct sfd *d)
{
    struct sfd_history *h = d ? d->history : NULL;
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->lock);
    h->stop = true;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);  /* writes what is queued, then returns */
    sfd_store_close(h->store);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->wake);
    free(h);
    d->history = NULL;
}

void sfd_history_get_stats(const struct sfd *d, struct sfd_history_stats *ret)
{
    struct sfd_history *h = d->history;
    if (h == NULL) {
        *ret = off_stats;
        return;
    }
    pthread_mutex_lock(&h->lock);
    *ret = h->stats;
    pthread_mutex_unlock(&h->lock);
}

/* ---- the loop's side ----------------------------------------------------------- */

void sfd_history_put_report(struct sfd *d, const struct sfd_job *job, const sf_report *report)
{
    struct sfd_history *h = d->history;
    uint8_t *body;
    size_t len;
    if (h == NULL)
        return;
    if (sfd_report_pack(report, &body, &len) < 0) {
        pthread_mutex_lock(&h->lock);
        h->stats.write_errors++;
        pthread_mutex_unlock(&h->lock);
        return;
    }
    pthread_mutex_lock(&h->lock);
    if (h->n == QUEUE_MAX) {
        h->stats.queue_dropped++;
        pthread_mutex_unlock(&h->lock);
        free(body);
        return;
    }
    struct item *it = &h->queue[(h->head + h->n) % QUEUE_MAX];
    *it = (struct item){ SFD_HISTORY_REPORT, report->meta.segment, job->uid,
                         report->meta.index, "", body, len };
    snprintf(it->job, sizeof it->job, "%s", job->id);
    h->n++;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->lock);
}

/* ---- restore ------------------------------------------------------------------- */

struct restore_ctx {
    struct sfd *d;
    struct sfd_history_stats *stats;
    char job_key[SFD_JOB_ID_MAX + 1];
    uid_t uid;
    bool skip;                      /* this job's rows are not restored */
    sf_report *reports[4096];       /* newest first, up to keep_windows */
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
        r = sfd_job_find_or_create(d, c->job_key, c->uid, &job, &why);
    if (r == 0 && job->ranks == NULL)
        r = sfd_job_bind_shape(job, &latest->schema, world);
    if (r < 0) {
        sfd_log(SFD_LOG_WARNING, c->job_key, "history: job not restored: %s", strerror(-r));
        drop_reports(c);
        return;
    }
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
        s->remote = true;   /* no rows here: RECORD has nothing of it to replay */
    }
    c->stats->restored += c->n;
    c->n = 0;
    sfd_log(SFD_LOG_INFO, job->id, "history: restored %u windows, latest %lld.%u",
            job->n_stored, (long long)latest->meta.index, latest->meta.segment);
}

static int restore_visit(void *ctx, const struct sfd_store_key *key, const uint8_t *body,
                         size_t len)
{
    struct restore_ctx *c = ctx;
    if (strcmp(c->job_key, key->job) != 0 || c->uid != key->uid) {
        restore_job(c);
        snprintf(c->job_key, sizeof c->job_key, "%s", key->job);
        c->uid = key->uid;
        c->skip = !sfd_job_id_valid(key->job);
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
    if (r < 0)
        sfd_log(SFD_LOG_WARNING, NULL, "history: reading the store failed: %s", strerror(-r));
    if (h->stats.restore_errors > 0)
        sfd_log(SFD_LOG_WARNING, NULL, "history: %llu stored records could not be restored",
                (unsigned long long)h->stats.restore_errors);
    free(c);
    if (d->n_jobs > 0)
        sfd_after_window(d);    /* the Prometheus lines of the restored jobs */
}

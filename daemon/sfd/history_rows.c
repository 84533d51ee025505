/*
 * The startup restore of windows' rows from the durable history, so that
 * `sfctl plot`, `export` and `record` draw a job's windows after sfd
 * restarts as before (docs/HISTORY.md). history.c writes
 * them, two windows per job (SFD_HISTORY_SFD_HISTORY_ROWS_SLOTS); this file only reads,
 * once, after the reports are restored, so it calls nothing in history.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "rows_codec.h"
#include "sfd.h"

/* ---- restore ------------------------------------------------------------------- */

struct rows_restore {
    struct sfd_job *job;
    sf_rows_header header;
    struct sfd_rows rows;
    uint32_t n_sync;
};

static int rows_alloc(struct rows_restore *c, size_t n)
{
    uint32_t n_stages = c->job->schema.n_stages;
    c->rows.rec = calloc(n ? n : 1, sizeof(*c->rows.rec));
    c->rows.d = calloc(n ? n * n_stages : 1, sizeof(int64_t));
    c->rows.lag = c->n_sync ? calloc(n ? n * 3 * c->n_sync : 1, sizeof(int64_t)) : NULL;
    c->rows.cap = n;
    c->rows.bytes = sfd_rows_bytes(c->job, n);
    if (c->rows.rec == NULL || c->rows.d == NULL || (c->n_sync && c->rows.lag == NULL))
        return -ENOMEM;
    return 0;
}

static int take_row(void *ctx, const sf_rows_header *header, const sf_row *row)
{
    struct rows_restore *c = ctx;
    c->header = *header;
    if (c->rows.rec == NULL && rows_alloc(c, header->n_rows) < 0)
        return -ENOMEM;
    int role = sfd_job_role(c->job, row->role);
    if (role < 0)
        return role;
    if (row->parallel != NULL && sfd_job_parallel_of(c->job, row->rank) == NULL) {
        /* The coordinates the rank declared, so that the window's report,
         * replayed from these rows, compares it inside its cohort again. */
        struct sfd_rank *rk;
        enum sfd_reject why;
        int r = sfd_job_rank(c->job, row->rank, &rk);
        if (r == 0)
            r = sfd_job_parallel_bind(c->job, rk, row->rank, row->parallel, &why);
        if (r < 0)
            return r;
    }
    size_t i = c->rows.n++;
    uint32_t n_stages = c->job->schema.n_stages;
    c->rows.rec[i] = (struct sfd_rec){
        .step = row->step,
        .overlap_ns = row->overlap_ns,
        .event_cpu_ns = row->event_cpu_ns,
        .event_gpu_ns = row->event_gpu_ns,
        .rank = row->rank,
        .flags = row->flags,
        .role = (uint16_t)role,
        .event_state = row->event_state,
    };
    memcpy(c->rows.d + i * n_stages, row->d, n_stages * sizeof(int64_t));
    /* The marks at sfd's stride: issue lags, then sync waits and counts
     * (rows stored before SFW2 keep none: -1 and 0). */
    for (uint32_t j = 0; j < c->n_sync; j++) {
        int64_t *m = c->rows.lag + i * 3 * c->n_sync;
        m[j] = row->issue_lag ? row->issue_lag[j] : -1;
        m[c->n_sync + j] = row->sync_wait ? row->sync_wait[j] : -1;
        m[2 * c->n_sync + j] = row->sync_wait ? row->sync_wait[c->n_sync + j] : 0;
    }
    return 0;
}

/* Gives the kept window the rows were stored for its rows back: only a
 * restored window without rows, and only within the uid's memory share. */
static int attach_rows(struct rows_restore *c)
{
    sf_window_meta key = {.segment = c->header.segment, .index = c->header.index};
    struct sfd_stored *s = sfd_kept_find(c->job, &key);
    if (s == NULL || s->rows.n > 0 || s->report == NULL)
        return -ENOENT; /* the window is not kept, or has its rows already */
    if (sfd_job_reserve(c->job, SFD_MEM_KEPT_ROWS, c->rows.bytes) < 0)
        return -ENOMEM;
    s->rows = c->rows;
    s->remote = false;
    memset(&c->rows, 0, sizeof(c->rows));
    return 0;
}

struct restore_visit_ctx {
    struct sfd *d;
    struct sfd_history_stats *stats;
};

static int restore_visit(void *ctx, const struct sfd_store_key *key, const uint8_t *body,
                         size_t len)
{
    struct restore_visit_ctx *v = ctx;
    char id[SF_MAX_JOB_ID_LEN + 1];
    uint32_t incarnation;
    if (key->window < 0 || key->window >= SFD_HISTORY_ROWS_SLOTS ||
        sfd_job_key_parse(key->job, id, sizeof id, &incarnation) < 0) {
        v->stats->restore_errors++;
        return 0;
    }
    struct sfd_job *job = sfd_job_lookup(v->d, key->uid, id, incarnation);
    if (job == NULL || job->rank_pages == NULL)
        return 0; /* its reports were not restored: nothing to draw them for */
    struct rows_restore c = {.job = job, .n_sync = sfd_rows_sync_count(job)};
    int r = sf_rows_unpack(body, len, &job->schema, job->world_size, take_row, &c);
    if (r == 0 && c.rows.n > 0 && attach_rows(&c) == 0)
        v->stats->rows_restored++;
    else if (r < 0)
        v->stats->restore_errors++;
    sfd_rows_free(&c.rows);
    return 0;
}

int sfd_history_restore_rows(struct sfd *d, struct sfd_store *store,
                             struct sfd_history_stats *stats)
{
    struct restore_visit_ctx v = {d, stats};
    return sfd_store_recent(store, SFD_HISTORY_ROWS, d->cfg.max_jobs, SFD_HISTORY_ROWS_SLOTS,
                            restore_visit, &v);
}

/*
 * sfd ingest messages: a trainer connection's hello, step-record batches and
 * NCCL batches, handed over by conn.c one datagram at a time. A bad frame
 * closes that connection only. Field checks live in ingest_validate.c,
 * windows in windows.c; sockets and reads are conn.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ingest.pb-c.h"
#include "sfd.h"
#include "capture.h"
#include "enqueue_points.h"
#include "side_evidence.h"

/* ---- ingest messages -------------------------------------------------------- */

static int64_t min_i64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Drops and totals describe steps a rank has sent: nothing past the highest
 * step it has shown (`sent`) plus one window of horizon. Steps start at 0,
 * so a rank can have dropped at most bound + 1 records, less those it
 * delivered. */
static int64_t drop_bound(const struct sfd_job *job, int64_t sent)
{
    return (sent < 0 ? 0 : sent) + (int64_t)job->gates.window_steps;
}

static int bind_hello(struct sfd_conn *c, const Stagefrontier__Hello *h, sf_schema *schema,
                      enum sfd_reject *why)
{
    struct sfd *d = c->sfd;
    struct sfd_job *job;
    struct sfd_launch launch = {
        .job_id = h->job_id,
        .uid = c->uid,
        .rank = h->rank,
        .run_id = h->run_id ? h->run_id : "",
        .restart_count = h->has_restart_count ? h->restart_count : 0,
        .reconnect = h->has_connection_generation && h->connection_generation > 0,
        .side_channel = h->has_channel && h->channel != 0,
    };
    int r = sfd_job_for_launch(d, &launch, &job, why);
    if (r < 0)
        return r;
    r = sfd_job_bind_shape(job, schema, h->world_size);
    if (r == -EXDEV || r == -EBADE) {
        *why = r == -EXDEV ? SFD_REJ_WORLD_SIZE : SFD_REJ_SCHEMA_CONFLICT;
        return r;
    }
    if (r < 0) {
        *why = r == -ENOMEM ? SFD_REJ_MEMORY : SFD_REJ_MAX_RANKS;
        return r;
    }
    uint32_t channel = h->has_channel ? h->channel : 0;
    /* The synchronizing groups come from the step-record channel only (the
     * NCCL plugin's hello and a decoded summary carry none) and are not
     * part of the shape: another set while ranks are connected is a
     * conflict, else it replaces the job's. */
    if (channel == 0 &&
        memcmp(job->schema.sync_group, schema->sync_group, sizeof schema->sync_group) != 0) {
        if (job->n_live_ranks > 0) {
            *why = SFD_REJ_SCHEMA_CONFLICT;
            return -EBADE;
        }
        memcpy(job->schema.sync_group, schema->sync_group, sizeof schema->sync_group);
    }
    struct sfd_rank *rk;
    r = sfd_job_rank(job, h->rank, &rk);
    if (r < 0) {
        *why = r == -ENOMEM ? SFD_REJ_MEMORY : SFD_REJ_INVALID;
        return r;
    }
    if (channel == 0 && rk->live) {
        *why = SFD_REJ_DUPLICATE_RANK;
        return -EEXIST;
    }
    int role = sfd_job_role(job, h->role);
    if (role < 0) {
        *why = SFD_REJ_INVALID;
        return role;
    }
    if (channel == 0) {
        sf_parallel par; /* sfd_validate_hello checked it against the world */
        bool declared = sfd_hello_parallel(h, &par, why) == 0;
        r = sfd_job_parallel_bind(job, rk, h->rank, declared ? &par : NULL, why);
        if (r < 0)
            return r;
    }
    if (channel == 0) {
        sfd_liveness_connected(job, h->rank);
        rk->live = 1;
        rk->role = (uint8_t)role;
        rk->pid = h->has_pid ? h->pid : (uint32_t)c->pid;
        rk->host = sfd_job_host(job, h->host);
        rk->local_rank = h->has_local_rank ? (int32_t)h->local_rank : -1;
        rk->gpu = sfd_job_host(job, h->gpu); /* interned with the hosts */
        sfd_job_ask_geometry(job, h->has_window_steps ? (int64_t)h->window_steps : -1,
                             h->has_warmup_steps ? (int64_t)h->warmup_steps : -1);
        job->n_live_ranks++;
    }
    job->n_live++;
    job->orphan_deadline_ms = 0;
    job->last_active_ms = sfd_now_ms(d);
    c->job = job;
    c->rank = h->rank;
    c->channel = channel;
    c->schema_hash = h->schema_hash;
    c->hello = true;
    snprintf(c->host, sizeof(c->host), "%s", h->host ? h->host : "");
    /* A reconnect marks the window after the last step sent, if that is
     * within a horizon of what the job has seen: a hello cannot open a window
     * far in the future. */
    if (channel == 0 && h->has_connection_generation && h->connection_generation > 0 &&
        h->has_last_sent_step &&
        h->last_sent_step <
            drop_bound(job, rk->last_step > job->max_step ? rk->last_step : job->max_step))
        sfd_window_note_reconnect(job, h->last_sent_step + 1);
    return 0;
}

static int handle_hello(struct sfd_conn *c, const Stagefrontier__Hello *h)
{
    struct sfd *d = c->sfd;
    struct sfd_limits lim = {d->cfg.max_ranks, d->cfg.frame_max_bytes};
    enum sfd_reject why = SFD_REJ_PROTOCOL;
    sf_schema schema;

    if (c->hello) {
        sfd_count_reject(d, c->job, why, 1, c);
        return -EPROTO;
    }
    int r = sfd_validate_hello(h, &lim, &schema, &why);
    if (r < 0) {
        sfd_count_reject(d, NULL, why, 1, c);
        return r;
    }
    r = bind_hello(c, h, &schema, &why);
    sf_schema_clear(&schema);
    if (r < 0) {
        /* charged to the caller's own job of that id, never another uid's */
        sfd_count_reject(d, sfd_job_lookup(d, c->uid, h->job_id, 0), why, 1, c);
        return r;
    }
    sfd_log(SFD_LOG_DEBUG, c->job->id, "rank %u connected (pid %d, channel %u)", c->rank,
            (int)c->pid, c->channel);
    return 0;
}

static void fill_row(sf_row *row, const Stagefrontier__StepRecord *rec, uint32_t n_stages)
{
    int64_t overlap = 0;
    if (rec->has_overlap_ns) {
        overlap = rec->overlap_ns;
    } else if (rec->has_step_wall_ns) {
        int64_t sum = 0;
        for (uint32_t s = 0; s + 1 < n_stages; s++)
            sum += rec->durations_ns[s];
        overlap = sum > rec->step_wall_ns ? sum - rec->step_wall_ns : 0;
    }
    uint32_t flags = rec->has_flags ? rec->flags : 0;
    if (rec->has_violations && rec->violations > 0)
        flags |= SF_ROW_VIOLATION;
    *row =
        (sf_row){.step = rec->step, .flags = flags, .overlap_ns = overlap, .d = rec->durations_ns};
    if (rec->event != NULL) {
        row->event_state = (uint8_t)rec->event->state;
        row->event_cpu_ns = rec->event->has_cpu_ns ? rec->event->cpu_ns : 0;
        row->event_gpu_ns = rec->event->has_gpu_ns ? rec->event->gpu_ns : 0;
    }
}

/* Counts what a batch's drop report adds to the client's drops. first is
 * the batch's first step, sent the rank's highest step so far, delivered
 * its records counting this batch's. Each step up to the bound was either
 * delivered or dropped, so no report can claim more. The bound follows the
 * job's highest step, not only the rank's: a rank whose last records were
 * all dropped reaches the end its peers show. */
static void note_drops(struct sfd_conn *c, const struct sfd_drop_report *r, int64_t first,
                       int64_t sent, uint64_t delivered)
{
    struct sfd_job *job = c->job;
    int64_t bound = drop_bound(job, sent > job->max_step ? sent : job->max_step);
    uint64_t cap = (uint64_t)bound + 1 > delivered ? (uint64_t)bound + 1 - delivered : 0;
    uint64_t total = r->has_total ? r->total : 0;
    if (total > cap)
        total = cap;
    if (r->has_total)
        c->dropped_total = r->total;
    if (total <= c->dropped_counted)
        return;
    uint64_t delta = total - c->dropped_counted;
    c->dropped_counted = total;
    sfd_sat_add(&c->sfd->ctr.dropped, delta);
    sfd_sat_add(&job->dropped, delta);
    if (r->has_first)
        sfd_window_note_drops(job, min_i64(r->first_step, bound), min_i64(r->last_step, bound),
                              delta);
    else
        sfd_window_note_drops(job, min_i64(first, bound), min_i64(first, bound), delta);
}

static void note_counters(struct sfd_conn *c, const Stagefrontier__RecordBatch *b,
                          uint64_t rec_violations)
{
    struct sfd_job *job = c->job;
    const struct sfd_rank *rk = sfd_job_rank_peek(job, c->rank);
    /* A step past the step gate will be refused: it bounds no drops. */
    int64_t first = b->records[0]->step, sent = rk->last_step;
    int64_t limit = sfd_job_step_limit(job, c->rank);
    for (size_t i = 0; i < b->n_records; i++)
        if (b->records[i]->step > sent && b->records[i]->step <= limit)
            sent = b->records[i]->step;
    struct sfd_drop_report drops = {
        .has_total = b->has_dropped_total,
        .has_first = b->has_dropped_first_step,
        .has_last = b->has_dropped_last_step,
        .total = b->dropped_total,
        .first_step = b->dropped_first_step,
        .last_step = b->dropped_last_step,
    };
    note_drops(c, &drops, first, sent, rk->records + b->n_records);
    if (b->has_violations_total && b->violations_total > c->violations_total) {
        uint64_t delta = b->violations_total - c->violations_total;
        c->violations_total = b->violations_total;
        if (delta > rec_violations)
            sfd_window_note_violations(job, first, delta - rec_violations);
    }
}

/* The drop report of a batch dropped unread: counted when it would have
 * passed validation, so a shed batch loses its records but never the drops
 * it reports. */
static void note_shed_drops(struct sfd_conn *c, const struct sfd_batch_peek *pk)
{
    struct sfd_drop_report r = pk->drops;
    if (!r.has_total || r.total < c->dropped_total)
        return;
    if (!sfd_drop_range_ok(r.has_first, r.has_last, r.first_step, r.last_step))
        r.has_first = r.has_last = false;
    const struct sfd_rank *rk = sfd_job_rank_peek(c->job, c->rank);
    int64_t limit = sfd_job_step_limit(c->job, c->rank);
    int64_t sent =
        pk->last_step <= limit && pk->last_step > rk->last_step ? pk->last_step : rk->last_step;
    note_drops(c, &r, pk->first_step, sent, rk->records);
}

/* The issue lag of a synchronizing stage without an issue mark, from the
 * NCCL plugin's kernel start of that (rank, step, stage) when it has one
 * (docs/ACCOUNTING.md, "Issue lag"): the kernel's start less the arrival,
 * both offsets from the stage's start, 0 when the kernel started before
 * the arrival mark. An issue mark always wins. Returns the lags filled. */
static int kernel_issue_lags(const struct sfd_job *job, uint32_t rank, int64_t step,
                             const int64_t *split, int64_t *lag)
{
    const sf_schema *schema = &job->schema;
    int64_t kernel[SF_MAX_STAGES];
    uint32_t recorded = sf_schema_recorded_stages(schema);
    for (uint32_t i = 0; i < recorded; i++)
        kernel[i] = -1;
    sfd_enq_fill_kernel(job->enq, schema, rank, step, kernel);
    int filled = 0;
    /* k walks the split stages, i the recorded ones, j the synchronizing. */
    for (uint32_t k = 0, i = 0, j = 0; k < schema->n_stages; k++, i++) {
        if (!(schema->sync_mask >> k & 1))
            continue;
        if (lag[j] < 0 && kernel[i] >= 0) {
            int64_t own = split[k];
            lag[j] = kernel[i] > own ? kernel[i] - own : 0;
            filled++;
        }
        j++;
        k++;
    }
    return filled;
}

static int handle_batch(struct sfd_conn *c, const Stagefrontier__RecordBatch *b)
{
    struct sfd *d = c->sfd;
    struct sfd_job *job = c->job;
    enum sfd_reject why;

    if (!c->hello || c->channel != 0) {
        sfd_count_reject(d, job, SFD_REJ_PROTOCOL, 1, c);
        return -EPROTO;
    }
    if (b->schema_hash != c->schema_hash) {
        sfd_count_reject(d, job, SFD_REJ_SCHEMA_HASH, 1, c);
        return -EPROTO;
    }
    uint32_t recorded = sf_schema_recorded_stages(&job->schema);
    if (sfd_validate_batch(b, recorded, &why) < 0 ||
        (b->has_dropped_total && b->dropped_total < c->dropped_total)) {
        sfd_count_reject(d, job, SFD_REJ_INVALID, 1, c);
        return -EPROTO;
    }
    sfd_sat_add(&d->ctr.batches, 1);
    /* Drops and stray violations describe earlier steps: note them before
     * this batch's records can complete (and close) their windows. */
    uint64_t rec_violations = 0;
    for (size_t i = 0; i < b->n_records; i++)
        if (b->records[i]->has_violations)
            rec_violations += b->records[i]->violations;
    note_counters(c, b, rec_violations);
    for (size_t i = 0; i < b->n_records; i++) {
        const Stagefrontier__StepRecord *rec = b->records[i];
        sf_row row;
        int64_t split[SF_MAX_STAGES], lag[SF_MAX_STAGES], wait[SF_MAX_STAGES];
        fill_row(&row, rec, recorded);
        /* Without synchronizing stages or arrivals the record is the row. */
        if (job->schema.sync_mask != 0 || rec->n_arrivals != 0) {
            int64_t fallback[SF_MAX_STAGES];
            uint32_t bad_fallbacks = 0;
            for (uint32_t k = 0; k < recorded; k++)
                fallback[k] = -1;
            sfd_enq_fill(job->enq, &job->schema, c->rank, rec->step, fallback);
            if (sfd_record_split(rec, &job->schema, fallback, split, &row.flags, &bad_fallbacks,
                                 &why) < 0) {
                sfd_count_reject(d, job, why, 1, c);
                continue;
            }
            int marks = sfd_record_issue_lags(rec, &job->schema, lag, &why);
            if (marks < 0) {
                sfd_count_reject(d, job, why, 1, c);
                continue;
            }
            int waits = sfd_record_sync_waits(rec, &job->schema, wait, &why);
            if (waits < 0) {
                sfd_count_reject(d, job, why, 1, c);
                continue;
            }
            row.sync_wait = waits > 0 ? wait : NULL;
            if (!(row.flags & SF_ROW_ARRIVAL_MISSING)) {
                int from_kernel = kernel_issue_lags(job, c->rank, rec->step, split, lag);
                sfd_sat_add(&d->ctr.kernel_issue_lags, (uint64_t)from_kernel);
                marks += from_kernel;
            }
            if (bad_fallbacks)
                sfd_count_reject(d, job, SFD_REJ_ARRIVAL_RANGE, bad_fallbacks, c);
            row.d = split;
            row.issue_lag = marks > 0 ? lag : NULL;
        }
        if (sf_row_validate(&row, &job->schema) < 0) {
            sfd_count_reject(d, job, SFD_REJ_INVALID, 1, c);
            continue;
        }
        if (rec->has_violations && rec->violations > 0)
            sfd_window_note_violations(job, rec->step, rec->violations);
        if (sfd_window_add(job, c->rank, &row, &why) < 0) {
            sfd_count_reject(d, job, why, 1, c);
            continue;
        }
        d->ctr.records++;
    }
    sfd_liveness_records(job, c->rank, sfd_job_rank_peek(job, c->rank)->last_step);
    return 0;
}

/* A capture reply: counted and dropped when bad, never closing the
 * connection, whose step records matter more than any reply. */
static int handle_capture_reply(struct sfd_conn *c, const Stagefrontier__CaptureReply *r)
{
    if (!c->hello) {
        sfd_count_reject(c->sfd, NULL, SFD_REJ_PROTOCOL, 1, c);
        return -EPROTO;
    }
    if (sfd_validate_capture_reply(r) < 0) {
        sfd_count_reject(c->sfd, c->job, SFD_REJ_CAPTURE_REPLY, 1, c);
        return 0;
    }
    sfd_capture_reply(c, r);
    return 0;
}

static int handle_heartbeat(struct sfd_conn *c, const Stagefrontier__RankHeartbeat *h)
{
    if (!c->hello) {
        sfd_count_reject(c->sfd, NULL, SFD_REJ_PROTOCOL, 1, c);
        return -EPROTO;
    }
    if (c->channel == SFD_CHANNEL_NCCL ||
        sfd_validate_heartbeat(h, sf_schema_recorded_stages(&c->job->schema)) < 0) {
        sfd_count_reject(c->sfd, c->job, SFD_REJ_HEARTBEAT, 1, c);
        return 0;
    }
    sfd_liveness_heartbeat(c, h);
    return 0;
}

/* Keeps the plugin's enqueue point of a synchronizing stage for the rank's
 * step record, which uses it when it carries no explicit arrival. A point in
 * a stage that is not synchronizing is counted and dropped; the batch's
 * aggregates are still filed. */
static void note_enqueue_point(struct sfd_conn *c, const Stagefrontier__NcclBatch *b)
{
    struct sfd_job *job = c->job;
    int stage = sfd_enq_sync_stage(&job->schema, b->enclosing_stage ? b->enclosing_stage : "");
    if (stage < 0) {
        sfd_count_reject(c->sfd, job, SFD_REJ_ARRIVAL_STAGE, 1, c);
        return;
    }
    /* The table is charged to the job's uid once, before its first point. */
    bool fresh = job->enq == NULL;
    if (fresh && sfd_job_reserve(job, SFD_MEM_ENQ_POINTS, sfd_enq_table_bytes()) < 0) {
        sfd_count_reject(c->sfd, job, SFD_REJ_MEMORY, 1, c);
        return;
    }
    int64_t kernel = b->has_kernel_start_ns ? (int64_t)b->kernel_start_ns : -1;
    int r = sfd_enq_note(&job->enq, c->rank, b->step, (uint32_t)stage, (int64_t)b->last_enqueue_ns,
                         kernel);
    if (r < 0) {
        if (fresh)
            sfd_job_release(job, SFD_MEM_ENQ_POINTS, sfd_enq_table_bytes());
        sfd_log(SFD_LOG_WARNING, job->id, "NCCL enqueue point not stored: out of memory");
    } else {
        sfd_sat_add(&c->sfd->ctr.enqueue_points, (r & SFD_ENQ_NEW) != 0);
        sfd_sat_add(&c->sfd->ctr.kernel_points, (r & SFD_ENQ_NEWLY_TIMED) != 0);
    }
}

static int handle_nccl(struct sfd_conn *c, const Stagefrontier__NcclBatch *b)
{
    struct sfd *d = c->sfd;
    enum sfd_reject why;
    if (!c->hello) {
        sfd_count_reject(d, NULL, SFD_REJ_PROTOCOL, 1, c);
        return -EPROTO;
    }
    if (sfd_validate_nccl(b, &why) < 0) {
        sfd_count_reject(d, c->job, why, 1, c);
        return -EPROTO;
    }
    d->ctr.nccl_batches++;
    c->job->nccl_batches++;
    if (b->has_last_enqueue_ns)
        note_enqueue_point(c, b);
    /* A batch that only carries an enqueue point has no side evidence. */
    if (b->has_last_enqueue_ns && b->n_aggregates == 0 && !b->has_dropped_events)
        return 0;
    /* Side evidence only: counted, never part of the accounting. */
    if (sfd_side_add(&c->job->side, &c->job->gates, c->job->segment, c->rank, b) < 0)
        sfd_log(SFD_LOG_WARNING, c->job->id, "NCCL side evidence not stored: out of memory");
    return 0;
}

/* Drops a batch unread when decoding it would be wasted (shed.c): all late,
 * refused as late records; or the loop is behind, shed and noted as drops of
 * its steps, so the windows' reports count them. Returns whether it did. */
static bool shed(struct sfd_conn *c, const uint8_t *buf, size_t len)
{
    struct sfd *d = c->sfd;
    struct sfd_job *job = c->job;
    struct sfd_batch_peek pk;
    switch (sfd_shed_check(c, buf, len, &pk)) {
    case SFD_SHED_LATE:
        sfd_count_reject(d, job, SFD_REJ_LATE, pk.n_records, c);
        note_shed_drops(c, &pk);
        return true;
    case SFD_SHED_BEHIND:
        sfd_sat_add(&d->ctr.shed_batches, 1);
        sfd_sat_add(&d->ctr.shed_records, pk.n_records);
        sfd_sat_add(&job->shed_records, pk.n_records);
        sfd_window_note_drops(job, pk.first_step, pk.last_step, pk.n_records);
        note_shed_drops(c, &pk);
        return true;
    default:
        return false;
    }
}

void sfd_ingest_init(struct sfd *d)
{
    sfd_arena_init(&d->decode_arena);
}

void sfd_ingest_free(struct sfd *d)
{
    sfd_arena_free(&d->decode_arena);
}

int sfd_ingest_handle(struct sfd_conn *c, const uint8_t *buf, size_t len)
{
    struct sfd *d = c->sfd;
    struct sfd_limits lim = {d->cfg.max_ranks, d->cfg.frame_max_bytes};
    Stagefrontier__ClientMessage *m;
    enum sfd_reject why;
    if (len <= lim.frame_max_bytes && shed(c, buf, len))
        return 0;
    /* One message is decoded and handled at a time on the loop, so one
     * arena (sfd_ingest_init), reset after each, serves every connection. */
    int r = sfd_message_decode(buf, len, &lim, &d->decode_arena.pb, &m, &why);
    if (r < 0) {
        sfd_arena_reset(&d->decode_arena);
        sfd_count_reject(d, c->job, why, 1, c);
        return -EPROTO;
    }
    switch (m->body_case) {
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO:
        r = handle_hello(c, m->hello);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH:
        r = handle_batch(c, m->batch);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL:
        r = handle_nccl(c, m->nccl);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_CAPTURE_REPLY:
        r = handle_capture_reply(c, m->capture_reply);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_HEARTBEAT:
        r = handle_heartbeat(c, m->heartbeat);
        break;
    default:
        sfd_count_reject(d, c->job, SFD_REJ_UNDECODABLE, 1, c);
        r = -EPROTO;
    }
    /* The reset frees the whole message at once: protobuf_c's free walk
     * over every field would only call the arena's no-op free. */
    sfd_arena_reset(&d->decode_arena);
    return r;
}

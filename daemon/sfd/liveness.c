/*
 * Rank liveness and the job's stalled state (liveness.h, docs/SFD.md
 * "Liveness"). A rank's position is (step, open stage, inside the step or
 * not), from its records and its client's heartbeats; it is stalled when a
 * live rank has not moved for stall_after_s while inside a step, or has gone
 * silent. The tick also runs the capture timeouts. Never touches windows.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture.h"
#include "ingest.pb-c.h"
#include "sfd.h"

int sfd_validate_heartbeat(const Stagefrontier__RankHeartbeat *h, uint32_t n_recorded)
{
    if (h == NULL || h->step < -1 || h->step > (INT64_C(1) << 53))
        return -EINVAL;
    /* The residual (last recorded stage) is never open. */
    if (h->has_stage && (h->stage < -1 || (h->stage >= 0 && (uint32_t)h->stage + 1 >= n_recorded)))
        return -EINVAL;
    if (h->has_interval_ms && (h->interval_ms == 0 || h->interval_ms > SF_MAX_HEARTBEAT_MS))
        return -EINVAL;
    return 0;
}

/* since_ms: when the client says it got there (<= now), else now. */
static void move_to(struct sfd_rank *rk, uint64_t now, int64_t step, int stage, bool in_step,
                    uint64_t since_ms)
{
    if (rk->pos_step != step || rk->pos_stage != stage || rk->pos_in_step != in_step)
        rk->moved_ms = since_ms > rk->moved_ms ? since_ms : now;
    rk->pos_step = step;
    rk->pos_stage = (int16_t)stage;
    rk->pos_in_step = in_step;
}

static void seen(struct sfd *d, struct sfd_rank *rk)
{
    rk->seen_ms = sfd_now_ms(d);
    rk->last_seen_unix_ms = sfd_realtime_ms();
}

void sfd_liveness_heartbeat(struct sfd_conn *c, const Stagefrontier__RankHeartbeat *h)
{
    struct sfd_rank *rk;
    if (sfd_job_rank(c->job, c->rank, &rk) < 0)
        return;
    seen(c->sfd, rk);
    /* A heartbeat behind the records already here is stale news: records
     * travel on another connection and may overtake it. */
    if (h->step < rk->pos_step ||
        (h->step == rk->pos_step && !rk->pos_in_step && rk->last_step >= h->step))
        return;
    bool in_step = h->has_in_step ? h->in_step : true;
    int stage = in_step && h->has_stage ? h->stage : -1;
    uint64_t since = rk->seen_ms;
    if (stage >= 0 && h->has_stage_elapsed_ms)
        since = h->stage_elapsed_ms < since ? since - h->stage_elapsed_ms : 0;
    move_to(rk, rk->seen_ms, h->step, stage, in_step, since);
}

void sfd_liveness_records(struct sfd_job *job, uint32_t rank, int64_t last_step)
{
    struct sfd_rank *rk;
    if (sfd_job_rank(job, rank, &rk) < 0)
        return;
    seen(job->sfd, rk);
    if (last_step >= rk->pos_step)
        move_to(rk, rk->seen_ms, last_step, -1, false, rk->seen_ms);
}

void sfd_liveness_connected(struct sfd_job *job, uint32_t rank)
{
    struct sfd_rank *rk;
    if (sfd_job_rank(job, rank, &rk) < 0)
        return;
    if (rk->last_seen_unix_ms == 0) { /* a fresh page: nothing known yet */
        rk->pos_step = -1;
        rk->pos_stage = -1;
    }
    seen(job->sfd, rk);
    rk->moved_ms = rk->seen_ms;
    rk->pos_in_step = rk->stalled = rk->culprit = 0;
}

/* ---- the stalled state --------------------------------------------------------- */

static bool silent(const struct sfd *d, const struct sfd_rank *rk, uint64_t now)
{
    return now - rk->seen_ms >= (uint64_t)d->cfg.stall_after_s * 1000;
}

static bool rank_stalled(const struct sfd *d, const struct sfd_rank *rk, uint64_t now)
{
    if (!rk->live || now - rk->moved_ms < (uint64_t)d->cfg.stall_after_s * 1000)
        return false;
    /* Between steps and still speaking: idle (evaluation, a checkpoint). */
    return rk->pos_in_step || silent(d, rk, now);
}

/* The position most stalled, speaking ranks share: in a hang at a
 * collective, where the group waits. */
struct place {
    int64_t step;
    int stage;
    uint32_t n;
};

static struct place majority(const struct sfd *d, const struct sfd_job *job, uint64_t now)
{
    struct place best = {-1, -1, 0};
    uint32_t checked = 0;
    for (uint32_t r = 0; r < job->world_size; r++) {
        const struct sfd_rank *rk = sfd_job_rank_peek(job, r);
        if (!rk->stalled || silent(d, rk, now))
            continue;
        if (++checked > 64 && best.n > checked / 2)
            break; /* a clear majority already: do not go quadratic */
        uint32_t n = 0;
        for (uint32_t q = 0; q < job->world_size; q++) {
            const struct sfd_rank *o = sfd_job_rank_peek(job, q);
            n += o->stalled && !silent(d, o, now) && o->pos_step == rk->pos_step &&
                 o->pos_stage == rk->pos_stage;
        }
        if (n > best.n)
            best = (struct place){rk->pos_step, rk->pos_stage, n};
    }
    return best;
}

/* Culprits: stalled ranks gone silent; and while stalled ranks wait
 * together, every rank not where they wait (stalled or not: a rank still
 * busy elsewhere, between steps, or gone is what they wait for). */
static void name_culprits(struct sfd *d, struct sfd_job *job, uint64_t now)
{
    struct place m = majority(d, job, now);
    uint32_t n = 0;
    for (uint32_t r = 0; r < job->world_size; r++) {
        struct sfd_rank *rk;
        if (sfd_job_rank_peek(job, r)->last_seen_unix_ms == 0 || sfd_job_rank(job, r, &rk) < 0)
            continue;
        bool elsewhere =
            m.n > 0 && (!rk->live || rk->pos_step != m.step || rk->pos_stage != m.stage);
        bool culprit = elsewhere || (rk->live && rk->stalled && silent(d, rk, now));
        rk->culprit = culprit;
        n += culprit;
    }
    job->stall.n_culprits = n;
}

static void refresh_job(struct sfd *d, struct sfd_job *job, uint64_t now)
{
    if (job->n_live_ranks == 0 && !job->stall.stalled)
        return; /* every rank gone and nothing to clear: the state cannot move */
    uint32_t n = 0;
    for (uint32_t r = 0; r < job->world_size; r++) {
        const struct sfd_rank *peek = sfd_job_rank_peek(job, r);
        struct sfd_rank *rk;
        if (peek->last_seen_unix_ms == 0)
            continue;
        if (sfd_job_rank(job, r, &rk) < 0)
            continue;
        rk->stalled = rank_stalled(d, rk, now);
        n += rk->stalled;
    }
    bool was = job->stall.stalled;
    job->stall.n_stalled = n;
    job->stall.stalled = n > 0;
    if (n > 0)
        name_culprits(d, job, now);
    else
        job->stall.n_culprits = 0;
    if (job->stall.stalled && !was) {
        job->stall.since_unix_ms = sfd_realtime_ms() - (int64_t)d->cfg.stall_after_s * 1000;
        job->stall.stalls++;
        sfd_log(SFD_LOG_WARNING, job->id,
                "stalled: %u rank(s) made no progress for %u s, "
                "%u named as culprit(s) (sfctl jobs %s)",
                n, d->cfg.stall_after_s, job->stall.n_culprits, job->id);
    } else if (!job->stall.stalled && was) {
        sfd_log(SFD_LOG_NOTICE, job->id, "no longer stalled");
    }
    if (job->stall.stalled != was)
        sfd_after_window(d); /* the Prometheus export shows it */
}

void sfd_liveness_refresh(struct sfd *d)
{
    uint64_t now = sfd_now_ms(d);
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        refresh_job(d, j, now);
}

void sfd_liveness_refresh_job(struct sfd *d, struct sfd_job *job)
{
    refresh_job(d, job, sfd_now_ms(d));
}

static void on_live_tick(uv_timer_t *t)
{
    struct sfd *d = t->data;
    uv_update_time(d->loop);
    sfd_liveness_refresh(d);
    sfd_captures_tick(d);
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        if (j->n_live_ranks > 0) {
            d->prom_dirty = true; /* last-seen times moved */
            break;
        }
}

int sfd_liveness_start(struct sfd *d)
{
    int r = uv_timer_init(d->loop, &d->live_timer);
    if (r < 0)
        return r;
    d->live_timer.data = d;
    uv_unref((uv_handle_t *)&d->live_timer);
    return uv_timer_start(&d->live_timer, on_live_tick, SFD_LIVENESS_TICK_MS, SFD_LIVENESS_TICK_MS);
}

void sfd_liveness_stop(struct sfd *d)
{
    if (d->live_timer.loop != NULL && !uv_is_closing((uv_handle_t *)&d->live_timer))
        uv_close((uv_handle_t *)&d->live_timer, NULL);
}

/* ---- JSON ----------------------------------------------------------------------- */

/* The schema name of recorded stage k: synchronizing stages are followed by
 * their .sync_wait in the job's schema. */
static const char *recorded_stage_name(const struct sfd_job *job, int k)
{
    if (k < 0)
        return NULL;
    for (uint32_t i = 0, rec = 0; i < job->schema.n_stages; i++, rec++) {
        if (rec == (uint32_t)k)
            return job->schema.names[i];
        if (job->schema.sync_mask >> i & 1)
            i++;
    }
    return NULL;
}

static json_t *unix_seconds(int64_t ms)
{
    return ms > 0 ? json_real((double)ms / 1000.0) : json_null();
}

const char *sfd_job_state(const struct sfd_job *job)
{
    if (job->stall.stalled)
        return "stalled";
    return job->n_live_ranks > 0 ? "running" : "ended";
}

static const char *rank_state(const struct sfd *d, const struct sfd_rank *rk, uint64_t now)
{
    if (rk->last_seen_unix_ms == 0 && !rk->seen)
        return "unseen";
    if (!rk->live)
        return "gone";
    if (rk->stalled)
        return "stalled";
    return rk->pos_in_step || now - rk->moved_ms < (uint64_t)d->cfg.stall_after_s * 1000 ? "running"
                                                                                         : "idle";
}

json_t *sfd_rank_liveness_json(const struct sfd_job *job, uint32_t rank)
{
    const struct sfd *d = job->sfd;
    const struct sfd_rank *rk = sfd_job_rank_peek(job, rank);
    const char *stage = rk->pos_in_step ? recorded_stage_name(job, rk->pos_stage) : NULL;
    return json_pack("{s:o, s:o, s:o, s:s, s:b}", "last_seen", unix_seconds(rk->last_seen_unix_ms),
                     "position_step", rk->pos_step >= 0 ? json_integer(rk->pos_step) : json_null(),
                     "open_stage", stage ? json_string(stage) : json_null(), "state",
                     rank_state(d, rk, sfd_now_ms(d)), "culprit",
                     rk->culprit && job->stall.stalled);
}

/* "rank 3 is in model.fwd_loss_cpu_wall at step 17 and silent; ..." */
static json_t *stalled_rank_json(const struct sfd_job *job, uint32_t r, uint64_t now)
{
    const struct sfd_rank *rk = sfd_job_rank_peek(job, r);
    const char *stage = rk->pos_in_step ? recorded_stage_name(job, rk->pos_stage) : NULL;
    return json_pack("{s:I, s:o, s:o, s:b, s:b, s:b, s:o}", "rank", (json_int_t)r, "step",
                     rk->pos_step >= 0 ? json_integer(rk->pos_step) : json_null(), "stage",
                     stage ? json_string(stage) : json_null(), "in_step", (int)rk->pos_in_step,
                     "silent", rk->live && silent(job->sfd, rk, now), "culprit", (int)rk->culprit,
                     "last_seen", unix_seconds(rk->last_seen_unix_ms));
}

json_t *sfd_job_stall_json(const struct sfd_job *job)
{
    if (!job->stall.stalled)
        return json_null();
    uint64_t now = sfd_now_ms(job->sfd);
    json_t *ranks = json_array(), *culprits = json_array();
    uint32_t listed = 0;
    for (uint32_t r = 0; r < job->world_size; r++) {
        const struct sfd_rank *rk = sfd_job_rank_peek(job, r);
        if (rk->culprit)
            json_array_append_new(culprits, json_integer(r));
        if ((rk->stalled || rk->culprit) && listed < 256) {
            json_array_append_new(ranks, stalled_rank_json(job, r, now));
            listed++;
        }
    }
    return json_pack("{s:o, s:I, s:I, s:o, s:o}", "since", unix_seconds(job->stall.since_unix_ms),
                     "stalled_ranks", (json_int_t)job->stall.n_stalled, "after_s",
                     (json_int_t)job->sfd->cfg.stall_after_s, "culprits", culprits, "ranks", ranks);
}

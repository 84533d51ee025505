/*
 * The hot path: step and stage boundaries, data-wait charges and probes.
 * Each boundary reads CLOCK_MONOTONIC (vDSO) and stores a duration; no
 * allocation, no lock, no syscall per stage. A step's end may hand a batch to
 * batch.c, which then makes one non-blocking send (at most one a batch or a
 * flush interval). Misuse is counted in the open step's violations and
 * answered with -EINVAL, never fatal.
 */
#include <errno.h>
#include <string.h>

#include "client_internal.h"

/* The clock, with non-monotonic readings clamped and flagged. */
static inline int64_t tick(sf_client *c)
{
    int64_t now = sf__now_ns();
    if (__builtin_expect(now < c->last_now, 0)) {
        c->cur_flags |= SF__FLAG_NON_MONOTONIC;
        now = c->last_now;
    }
    c->last_now = now;
    return now;
}

static int violation(sf_client *c)
{
    c->violations++;
    if (c->in_step)
        c->cur_violations++;
    return -EINVAL;
}

static void close_stage(sf_client *c, int64_t now)
{
    int id = c->open_stage;
    int64_t d = now - c->stage_t0;
    c->cur[id] += d;
    c->open_stage = -1;
    sf__side_publish_stage(-1, 0);
    if (c->cuda != NULL && (c->schema.forward_mask >> id & 1))
        sf__cuda_forward_end(c->cuda, c->step, d);
}

static void take_pending_wait(sf_client *c)
{
    uint32_t slot = (uint32_t)(c->step % SF_CLIENT_DATA_LOOKAHEAD);
    if (c->pending_ns[slot] != 0 && c->pending_step[slot] == c->step) {
        c->cur[0] += c->pending_ns[slot];
        c->cur_extra_wall = c->pending_ns[slot];
    }
    c->pending_ns[slot] = 0;
}

static int64_t clamp_duration(int64_t d)
{
    return d < 0 ? 0 : d > SF_MAX_DURATION_NS ? SF_MAX_DURATION_NS : d;
}

static int64_t clamp_mark(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The marks follow the durations: per synchronizing stage its arrival,
 * issue and completion offsets, each within the stage and after the one
 * before it, or -1. A completion older than this step's issue belongs to an
 * earlier step's collective and is dropped. */
static void fill_sync_marks(sf_client *c, int64_t *marks, const int64_t *d)
{
    uint32_t n_sync = c->schema.n_sync;
    for (uint32_t j = 0; j < n_sync; j++) {
        int64_t len = d[c->schema.sync_ids[j]];
        int64_t a = c->cur_arrival[j] < 0 ? -1 : clamp_mark(c->cur_arrival[j], 0, len);
        int64_t i = a < 0 || c->cur_issue[j] < 0 ? -1 : clamp_mark(c->cur_issue[j], a, len);
        int64_t done = __atomic_load_n(&c->complete_at[j], __ATOMIC_RELAXED);
        int64_t f =
            i < 0 || done < c->issue_at[j] ? -1 : clamp_mark(i + (done - c->issue_at[j]), i, len);
        /* The accumulated wait: the sync points', else the hook's marks
         * (arrival to completion, one sync point). Never past the stage. */
        int64_t wait = -1, count = 0;
        if (a >= 0 && c->cur_waits[j] > 0)
            wait = clamp_mark(c->cur_wait[j], 0, len), count = c->cur_waits[j];
        else if (f >= 0)
            wait = f - a, count = 1;
        if (count > (int64_t)SF_MAX_SYNC_WAITS)
            count = SF_MAX_SYNC_WAITS;
        marks[j] = a;
        marks[n_sync + j] = i;
        marks[2 * n_sync + j] = f;
        marks[3 * n_sync + j] = wait;
        marks[4 * n_sync + j] = count;
    }
}

/* Fills a ring slot from the open step, or counts a drop when full. */
static void queue_record(sf_client *c, int64_t wall)
{
    int64_t *d;
    struct sf__record *r = sf__ring_reserve(&c->ring, &d);
    if (r == NULL) {
        sf__batch_note_drop(c, c->step);
        return;
    }
    uint32_t last = c->n_stages - 1;
    int64_t sum = 0;
    for (uint32_t i = 0; i < last; i++) {
        d[i] = clamp_duration(c->cur[i]);
        sum += d[i];
    }
    d[last] = clamp_duration(wall - sum);
    fill_sync_marks(c, d + c->n_stages, d);
    r->step = c->step;
    r->wall_ns = clamp_duration(wall);
    r->overlap_ns = sum > wall ? clamp_duration(sum - wall) : 0;
    r->violations = c->cur_violations;
    r->flags = c->cur_flags | (c->cur_violations ? SF__FLAG_VIOLATION : 0);
    r->event.state = 0;
    if (c->cuda != NULL && sf__cuda_poll(c->cuda, c->step, &r->event) != 1)
        r->event.state = 0;
    sf__ring_commit(&c->ring);
}

static void end_step(sf_client *c, int64_t now)
{
    if (c->open_stage >= 0)
        close_stage(c, now);
    int64_t wall = now - c->step_t0 + c->cur_extra_wall;
    queue_record(c, wall);
    /* Reset here, not at begin: the begin's own clock read may set it. */
    c->cur_flags = 0;
    /* Relaxed stores (plain moves): the heartbeat thread reads them. */
    __atomic_store_n(&c->in_step, false, __ATOMIC_RELAXED);
    __atomic_store_n(&c->steps, c->steps + 1, __ATOMIC_RELAXED);
    sf__batch_maybe_send(c, now);
    if (__builtin_expect(c->cap_state == SF__CAP_RUNNING, 0) && !c->inert)
        sf__capture_after_end(c);
}

static void start_step(sf_client *c, int64_t step, int64_t now)
{
    c->step = step;
    c->any_step = true;
    __atomic_store_n(&c->in_step, true, __ATOMIC_RELAXED);
    c->step_t0 = now;
    c->open_stage = -1;
    c->nested_ignored = 0;
    memset(c->cur, 0, sizeof *c->cur * c->n_stages);
    for (uint32_t j = 0; j < c->schema.n_sync; j++) {
        c->cur_arrival[j] = c->cur_issue[j] = c->sync_enter_at[j] = -1;
        c->cur_wait[j] = c->cur_waits[j] = 0;
    }
    c->cur_violations = 0;
    c->cur_extra_wall = 0;
    take_pending_wait(c);
    sf__side_publish_step(step);
}

int sf_step_begin(sf_client *c, int64_t step)
{
    if (c == NULL)
        return -EINVAL;
    if (c->inert)
        return 0;
    int64_t now = tick(c);
    if (step < 0)
        step = c->any_step ? c->step + 1 : 0;
    int r = 0;
    if (c->in_step) {
        /* A forgotten step_end: close the old step so records keep flowing. */
        r = violation(c);
        end_step(c, now);
        if (c->inert)
            return 0;
    }
    /* A capture's handler runs before the step's clock read: its cost is
     * in no stage. */
    if (__builtin_expect(c->cap_state != SF__CAP_IDLE, 0)) {
        sf__capture_before_begin(c, step);
        now = tick(c);
    }
    start_step(c, step, now);
    return r;
}

int sf_step_end(sf_client *c)
{
    if (c == NULL)
        return -EINVAL;
    if (c->inert)
        return 0;
    if (!c->in_step)
        return violation(c);
    int64_t now = tick(c);
    int r = 0;
    if (c->open_stage >= 0)
        r = violation(c); /* a stage left open: closed at the step's end */
    end_step(c, now);
    return r;
}

int sf_stage_begin(sf_client *c, int stage_id)
{
    if (c == NULL)
        return -EINVAL;
    if (c->inert)
        return 0;
    if (!c->in_step || stage_id < 0 || (uint32_t)stage_id + 1 >= c->n_stages)
        return violation(c);
    if (c->open_stage >= 0) {
        c->nested_ignored |= UINT64_C(1) << stage_id;
        return violation(c);
    }
    c->stage_t0 = tick(c);
    c->open_stage = stage_id;
    /* A re-entered stage counts from its first begin in the step, like own_ns. */
    sf__side_publish_stage(stage_id, c->stage_t0 - c->cur[stage_id]);
    if (c->cuda != NULL && (c->schema.forward_mask >> stage_id & 1))
        sf__cuda_forward_begin(c->cuda, c->step);
    return 0;
}

int sf_stage_end(sf_client *c, int stage_id)
{
    if (c == NULL)
        return -EINVAL;
    if (c->inert)
        return 0;
    if (!c->in_step || stage_id < 0 || (uint32_t)stage_id + 1 >= c->n_stages)
        return violation(c);
    if (stage_id != c->open_stage) {
        uint64_t bit = UINT64_C(1) << stage_id;
        if (c->nested_ignored & bit) {
            c->nested_ignored &= ~bit; /* the refused nested begin's end */
            return -EINVAL;
        }
        return violation(c);
    }
    close_stage(c, tick(c));
    return 0;
}

/* The open stage when it is a synchronizing one inside a step, else -1: the
 * only place an arrival or an issue mark may be taken. */
static int open_sync_stage(const sf_client *c)
{
    int id = c->open_stage;
    return c->in_step && id >= 0 && (c->schema.sync_mask >> id & 1) ? id : -1;
}

/* The stage a mark applies to (>= 0), or -1 with the mark's result in *ret:
 * -EINVAL for no client, 0 for an inert one, a counted violation outside an
 * open synchronizing stage inside a step. */
static int mark_stage(sf_client *c, int *ret)
{
    if (c == NULL) {
        *ret = -EINVAL;
        return -1;
    }
    if (c->inert) {
        *ret = 0;
        return -1;
    }
    int id = open_sync_stage(c);
    if (id < 0)
        *ret = violation(c);
    return id;
}

/* The open stage's own work in this step up to `now`: its earlier segments
 * plus this one. */
static int64_t own_so_far(const sf_client *c, int id, int64_t now)
{
    return c->cur[id] + (now - c->stage_t0);
}

int sf_stage_arrive(sf_client *c)
{
    int r = 0, id = mark_stage(c, &r);
    if (id < 0)
        return r;
    c->cur_arrival[c->schema.sync_slot[id]] = own_so_far(c, id, tick(c));
    return 0;
}

int sf_sync_enter(sf_client *c)
{
    int r = 0, id = mark_stage(c, &r);
    if (id < 0)
        return r;
    uint32_t slot = c->schema.sync_slot[id];
    int64_t now = tick(c);
    c->cur_arrival[slot] = own_so_far(c, id, now);
    c->sync_enter_at[slot] = now;
    return id;
}

int sf_sync_exit(sf_client *c)
{
    int r = 0, id = mark_stage(c, &r);
    if (id < 0)
        return r;
    uint32_t slot = c->schema.sync_slot[id];
    if (c->sync_enter_at[slot] < 0)
        return violation(c); /* an exit without its enter */
    c->cur_wait[slot] += tick(c) - c->sync_enter_at[slot];
    c->cur_waits[slot]++;
    c->sync_enter_at[slot] = -1;
    return 0;
}

int sf_sync_send(sf_client *c)
{
    int r = 0, id = mark_stage(c, &r);
    if (id < 0)
        return r;
    uint32_t slot = c->schema.sync_slot[id];
    c->cur_arrival[slot] = own_so_far(c, id, tick(c));
    c->cur_waits[slot]++;
    return 0;
}

int sf_stage_issue(sf_client *c)
{
    int r = 0, id = mark_stage(c, &r);
    if (id < 0)
        return r;
    uint32_t slot = c->schema.sync_slot[id];
    if (c->cur_arrival[slot] < 0)
        return violation(c); /* an issue is measured from the arrival */
    int64_t now = tick(c);
    c->cur_issue[slot] = own_so_far(c, id, now);
    c->issue_at[slot] = now;
    return id;
}

int sf_stage_complete(sf_client *c, int stage_id)
{
    if (c == NULL || stage_id < 0 || (uint32_t)stage_id >= c->n_stages ||
        !(c->schema.sync_mask >> stage_id & 1))
        return -EINVAL;
    if (c->inert)
        return 0;
    /* Any thread: the clock read and one relaxed store, nothing else of the
     * client is touched. */
    __atomic_store_n(&c->complete_at[c->schema.sync_slot[stage_id]], sf__now_ns(),
                     __ATOMIC_RELAXED);
    return 0;
}

int sf_charge_data_wait(sf_client *c, int64_t step, int64_t wait_ns)
{
    if (c == NULL || step < 0 || wait_ns < 0 || wait_ns > SF_MAX_DURATION_NS)
        return -EINVAL;
    if (c->inert)
        return 0;
    if (c->in_step && step == c->step) {
        c->cur[0] += wait_ns;
        return 0;
    }
    /* Before any step, any index is accepted: a resumed job may start at
     * step 100000. Afterwards only a bounded lookahead is kept. */
    if (c->any_step && (step <= c->step || step - c->step > SF_CLIENT_DATA_LOOKAHEAD))
        return violation(c);
    uint32_t slot = (uint32_t)(step % SF_CLIENT_DATA_LOOKAHEAD);
    if (c->pending_step[slot] != step)
        c->pending_ns[slot] = 0; /* a stale charge for a step never begun */
    c->pending_step[slot] = step;
    c->pending_ns[slot] += wait_ns;
    return 0;
}

/* Both probe calls take a caller's name: 1 to SF_CLIENT_MAX_NAME_LEN bytes.
 * Returns its length, or 0 when it is not a valid name. */
static size_t probe_name_len(const sf_client *c, const char *name)
{
    size_t len = name ? strnlen(name, SF_CLIENT_MAX_NAME_LEN + 1) : 0;
    return c == NULL || len > SF_CLIENT_MAX_NAME_LEN ? 0 : len;
}

int sf_probe_begin(sf_client *c, const char *name)
{
    size_t len = probe_name_len(c, name);
    if (len == 0)
        return -EINVAL;
    if (c->inert)
        return 0;
    if (c->probe_depth == SF__MAX_PROBE_DEPTH)
        return violation(c);
    /* Copied: the caller's string (a Python str, say) may not outlive us. */
    memcpy(c->probe_names[c->probe_depth], name, len + 1);
    c->probe_depth++;
    return 0;
}

int sf_probe_end(sf_client *c, const char *name)
{
    if (probe_name_len(c, name) == 0)
        return -EINVAL;
    if (c->inert)
        return 0;
    uint32_t top = c->probe_depth;
    if (top == 0 || strcmp(c->probe_names[top - 1], name) != 0)
        return violation(c);
    c->probe_depth--;
    return 0;
}

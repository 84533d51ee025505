/*
 * sfd window assembly: records grouped by window index, closing on
 * completeness or at a deadline, the "summary ready" step (sfd_window_close),
 * which moves the rows into the kept windows (kept.c) and hands the summary
 * to sfd_cluster_submit (cluster_submit.c), and segments: a shape change or
 * an elastic restart closes the open windows early. The rows are rows.c's,
 * the memory charges job_mem.c's. No sockets here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "history.h"
#include "sfd.h"

#define ROWS_FIRST 64 /* a window's first rows when no window has closed */

/* Sets a window's rows to cap rows, charging the change to the job first:
 * where the charge does not fit, by freeing the uid's oldest kept rows
 * (evict) or not at all. */
static int rows_resize(struct sfd_job *job, struct sfd_rows *rows, size_t cap, bool evict)
{
    uint32_t n_stages = job->schema.n_stages, n_sync = sfd_rows_mark_count(job);
    uint64_t bytes = sfd_rows_bytes(job, cap);
    int r = evict ? sfd_job_reserve(job, SFD_MEM_WINDOWS, bytes - rows->bytes)
                  : sfd_job_charge(job, SFD_MEM_WINDOWS, bytes - rows->bytes);
    if (r < 0)
        return r;
    struct sfd_rec *nr = realloc(rows->rec, cap * sizeof(*nr));
    if (nr != NULL)
        rows->rec = nr;
    int64_t *nd = nr != NULL ? realloc(rows->d, cap * n_stages * sizeof(*nd)) : NULL;
    if (nd != NULL)
        rows->d = nd;
    int64_t *nl = nd != NULL && n_sync ? realloc(rows->lag, cap * n_sync * sizeof(*nl)) : NULL;
    if (nd == NULL || (n_sync && nl == NULL)) {
        sfd_job_release(job, SFD_MEM_WINDOWS, bytes - rows->bytes);
        return -ENOMEM;
    }
    rows->lag = nl;
    rows->cap = cap;
    rows->bytes = bytes;
    return 0;
}

/* Grows a window's rows. A new window starts at the size of the last one
 * closed, which a steady job's windows share: no copy as it fills, and no
 * slack kept with its rows after it closes. That size is only a guess, so
 * it frees no kept rows: where the budget has no room for it, the window
 * starts small and doubles, as any window whose rows outgrow it. */
static int rows_grow(struct sfd_job *job, struct sfd_rows *rows)
{
    if (rows->cap == 0 && job->rows_hint > ROWS_FIRST &&
        rows_resize(job, rows, job->rows_hint, false) == 0)
        return 0;
    return rows_resize(job, rows, rows->cap ? rows->cap * 2 : ROWS_FIRST, true);
}

static int rows_push(struct sfd_job *job, struct sfd_rows *rows, const struct sfd_rec *rec,
                     const int64_t *d, const int64_t *lag, const int64_t *wait)
{
    uint32_t n_stages = job->schema.n_stages, n_sync = sfd_rows_sync_count(job);
    uint32_t n_marks = sfd_rows_mark_count(job);
    if (rows->n == rows->cap) {
        int r = rows_grow(job, rows);
        if (r < 0)
            return r;
    }
    rows->rec[rows->n] = *rec;
    memcpy(rows->d + rows->n * n_stages, d, n_stages * sizeof(*d));
    for (uint32_t j = 0; j < n_sync; j++) {
        int64_t *m = rows->lag + rows->n * n_marks;
        m[j] = lag ? lag[j] : -1;
        m[n_sync + j] = wait ? wait[j] : -1;
        m[2 * n_sync + j] = wait ? wait[n_sync + j] : 0;
    }
    rows->n++;
    return 0;
}

/* ---- rows in (step, rank) order ---------------------------------------
 * A window keeps its rows in (step, rank) order as they arrive, so the core
 * never sorts them and reads a complete window as one step-major array. A
 * rank's records come in step order (older ones are refused as duplicates)
 * and the ranks of a step mostly in rank order, so a row nearly always goes
 * to its step's tail; otherwise a short walk of the step's list places it.
 * A walk past ORDER_WALK_MAX rows (a step of very many local ranks arriving
 * out of order), or no memory for the links, gives the order up for that
 * window: its rows stay as they came and the core sorts them, as it sorts
 * any rows. At close the rows are permuted in place into that order. */

#define ORDER_NONE UINT32_MAX
#define ORDER_WALK_MAX 64

static void order_free(struct sfd_job *job, struct sfd_row_order *o)
{
    sfd_job_release(job, SFD_MEM_WINDOWS, o->bytes);
    free(o->head);
    free(o->tail);
    free(o->count);
    free(o->next);
    memset(o, 0, sizeof(*o));
}

static void order_give_up(struct sfd_job *job, struct sfd_row_order *o)
{
    order_free(job, o);
    o->given_up = true;
}

/* Links for one more row (and the per-step heads on the first), charged to
 * the job's windows; false when the order has been given up. */
static bool order_reserve(struct sfd_job *job, struct sfd_window *w)
{
    struct sfd_row_order *o = &w->order;
    if (o->given_up)
        return false;
    size_t steps = (size_t)(w->meta.last_step - w->meta.first_step + 1);
    if (o->head == NULL) {
        if (sfd_job_reserve(job, SFD_MEM_WINDOWS, 3 * steps * sizeof(uint32_t)) < 0)
            goto fail;
        o->bytes = 3 * steps * sizeof(uint32_t);
        o->head = malloc(steps * sizeof(uint32_t));
        o->tail = malloc(steps * sizeof(uint32_t));
        o->count = calloc(steps, sizeof(uint32_t));
        if (o->head == NULL || o->tail == NULL || o->count == NULL)
            goto fail;
        memset(o->head, 0xff, steps * sizeof(uint32_t));
    }
    if (w->rows.n >= o->next_cap) {
        size_t cap = w->rows.cap > o->next_cap ? w->rows.cap : o->next_cap * 2 + 64;
        if (sfd_job_reserve(job, SFD_MEM_WINDOWS, (cap - o->next_cap) * sizeof(uint32_t)) < 0)
            goto fail;
        o->bytes += (cap - o->next_cap) * sizeof(uint32_t);
        uint32_t *n = realloc(o->next, cap * sizeof(uint32_t));
        if (n == NULL)
            goto fail;
        o->next = n;
        o->next_cap = cap;
    }
    return true;
fail:
    order_give_up(job, o);
    return false;
}

/* Links row i (just pushed) into its step's list. */
static void order_insert(struct sfd_job *job, struct sfd_window *w, uint32_t i)
{
    struct sfd_row_order *o = &w->order;
    const struct sfd_rec *rec = w->rows.rec;
    size_t t = (size_t)(rec[i].step - w->meta.first_step);
    uint32_t rank = rec[i].rank;
    o->next[i] = ORDER_NONE;
    o->count[t]++;
    if (o->head[t] == ORDER_NONE) {
        o->head[t] = o->tail[t] = i;
        return;
    }
    if (rec[o->tail[t]].rank < rank) {
        o->next[o->tail[t]] = i;
        o->tail[t] = i;
        return;
    }
    uint32_t *link = &o->head[t];
    for (int walked = 0; rec[*link].rank < rank; link = &o->next[*link])
        if (++walked > ORDER_WALK_MAX) {
            order_give_up(job, o);
            return;
        }
    o->next[i] = *link;
    *link = i;
}

/* Moves row `from` to row `to` (rec, durations and issue lags). */
static void row_move(struct sfd_rows *rows, uint32_t n_stages, uint32_t n_sync, size_t to,
                     size_t from)
{
    rows->rec[to] = rows->rec[from];
    memcpy(rows->d + to * n_stages, rows->d + from * n_stages, n_stages * sizeof(int64_t));
    if (n_sync)
        memcpy(rows->lag + to * n_sync, rows->lag + from * n_sync, n_sync * sizeof(int64_t));
}

/* Puts the rows of a closing window in the order of its lists: at[k] is
 * the row that belongs at k; each cycle of that permutation is followed
 * once, one row held aside. Without memory for at[] the rows stay. */
static void order_apply(struct sfd_job *job, struct sfd_window *w)
{
    struct sfd_row_order *o = &w->order;
    struct sfd_rows *rows = &w->rows;
    uint32_t S = job->schema.n_stages, J = sfd_rows_mark_count(job);
    size_t steps = (size_t)(w->meta.last_step - w->meta.first_step + 1), n = 0;
    uint32_t *at = o->head && rows->n ? malloc(rows->n * sizeof(*at)) : NULL;
    if (at == NULL)
        goto out;
    for (size_t t = 0; t < steps; t++)
        for (uint32_t i = o->head[t]; i != ORDER_NONE; i = o->next[i])
            at[n++] = i;
    for (size_t k = 0; k < n; k++) {
        if (at[k] == k)
            continue;
        struct sfd_rec held = rows->rec[k];
        int64_t held_d[SF_MAX_STAGES], held_lag[3 * SF_MAX_STAGES];
        memcpy(held_d, rows->d + k * S, S * sizeof(int64_t));
        if (J)
            memcpy(held_lag, rows->lag + k * J, J * sizeof(int64_t));
        size_t j = k;
        while (at[j] != k) {
            row_move(rows, S, J, j, at[j]);
            size_t from = at[j];
            at[j] = (uint32_t)j;
            j = from;
        }
        rows->rec[j] = held;
        memcpy(rows->d + j * S, held_d, S * sizeof(int64_t));
        if (J)
            memcpy(rows->lag + j * J, held_lag, J * sizeof(int64_t));
        at[j] = (uint32_t)j;
    }
out:
    free(at);
    order_free(job, o);
}

static struct sfd_window *find_open(struct sfd_job *job, int64_t index)
{
    if (job->hot != NULL && job->hot->meta.index == index)
        return job->hot;
    for (uint32_t i = 0; i < job->n_open; i++)
        if (job->open[i]->meta.index == index)
            return job->open[i];
    return NULL;
}

static struct sfd_window *oldest_open(struct sfd_job *job)
{
    struct sfd_window *o = NULL;
    for (uint32_t i = 0; i < job->n_open; i++)
        if (o == NULL || job->open[i]->meta.index < o->meta.index)
            o = job->open[i];
    return o;
}

static void remove_open(struct sfd_job *job, struct sfd_window *w)
{
    if (job->hot == w)
        job->hot = NULL;
    for (uint32_t i = 0; i < job->n_open; i++) {
        if (job->open[i] == w) {
            job->open[i] = job->open[--job->n_open];
            return;
        }
    }
}

/* Frees an open window that holds no row, without a report: a notice window
 * gives way to a real one. Its counts stay in the job's totals. */
static void discard_open(struct sfd_job *job, struct sfd_window *w)
{
    remove_open(job, w);
    sfd_job_release(job, SFD_MEM_WINDOWS, sizeof(*w) + w->rows.bytes);
    sfd_rows_free(&w->rows);
    order_free(job, &w->order);
    free(w);
}

/* The notice-only window furthest ahead, or NULL. */
static struct sfd_window *newest_notice_window(struct sfd_job *job)
{
    struct sfd_window *o = NULL;
    for (uint32_t i = 0; i < job->n_open; i++)
        if (job->open[i]->notice_only && (o == NULL || job->open[i]->meta.index > o->meta.index))
            o = job->open[i];
    return o;
}

/* Under pressure (too many open windows, or max_pending_steps rows) the
 * oldest open window closes now, as if its deadline had passed, instead of
 * refusing the newer records: the laggard ranks become its downgrade. Windows
 * that only notices opened go first, and without a report. Only windows older
 * than `index` are closed. Returns true when room was made. */
static bool make_room(struct sfd_job *job, int64_t index, size_t rows_needed)
{
    bool closed = false;
    while (job->n_open >= SFD_MAX_OPEN_WINDOWS ||
           (rows_needed && job->pending_rows + rows_needed > job->sfd->cfg.max_pending_steps)) {
        struct sfd_window *n =
            job->n_open >= SFD_MAX_OPEN_WINDOWS ? newest_notice_window(job) : NULL;
        if (n != NULL) {
            discard_open(job, n);
            closed = true;
            continue;
        }
        struct sfd_window *o = oldest_open(job);
        if (o == NULL || o->meta.index >= index)
            return closed && job->n_open < SFD_MAX_OPEN_WINDOWS &&
                   (!rows_needed ||
                    job->pending_rows + rows_needed <= job->sfd->cfg.max_pending_steps);
        sfd_window_close(job, o, 0);
        closed = true;
    }
    return true;
}

/* The open window of an index, opened on demand unless it already closed.
 * A notice opens one only where a slot is free: it never closes another. */
static struct sfd_window *get_window(struct sfd_job *job, int64_t index, bool notice,
                                     enum sfd_reject *ret_why)
{
    struct sfd_window *w = find_open(job, index);
    if (w != NULL)
        return w;
    if (index <= job->closed_max) {
        *ret_why = SFD_REJ_LATE;
        return NULL;
    }
    if (job->n_open >= SFD_MAX_OPEN_WINDOWS && (notice || !make_room(job, index, 0))) {
        *ret_why = SFD_REJ_PENDING;
        return NULL;
    }
    if (sfd_job_reserve(job, SFD_MEM_WINDOWS, sizeof(*w)) < 0) {
        *ret_why = SFD_REJ_MEMORY;
        return NULL;
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL) {
        sfd_job_release(job, SFD_MEM_WINDOWS, sizeof(*w));
        *ret_why = SFD_REJ_MEMORY;
        return NULL;
    }
    w->notice_only = notice;
    w->meta.index = index;
    w->meta.segment = job->segment;
    w->meta.world_size = job->world_size;
    w->meta.opened_at_ms = sfd_realtime_ms();
    sf_window_range(index, job->gates.warmup_steps, job->gates.window_steps, &w->meta.first_step,
                    &w->meta.last_step);
    job->open[job->n_open++] = w;
    if (job->max_step > w->meta.last_step) {
        /* a rank is already past this window: its deadline runs now */
        w->deadline_ms = sfd_now_ms(job->sfd) + job->sfd->cfg.window_grace_ms;
        sfd_arm_tick(job->sfd);
    }
    return w;
}

static int64_t window_of(const struct sfd_job *job, int64_t step)
{
    return sf_window_index(step, job->gates.warmup_steps, job->gates.window_steps);
}

static void arm_deadlines(struct sfd_job *job, int64_t step)
{
    struct sfd *d = job->sfd;
    bool armed = false;
    for (uint32_t i = 0; i < job->n_open; i++) {
        struct sfd_window *w = job->open[i];
        if (w->deadline_ms == 0 && step > w->meta.last_step) {
            w->deadline_ms = sfd_now_ms(d) + d->cfg.window_grace_ms;
            armed = true;
        }
    }
    if (armed)
        sfd_arm_tick(d);
}

/* ---- the step gate -------------------------------------------------------- */

/* How far past the other ranks' latest step a rank may be: ranks of one job
 * synchronize, so an honest rank is never windows ahead of every other. */
#define STEP_GATE_WINDOWS 8
#define STEP_GATE_MIN_STEPS 1024

static int64_t step_gate(const struct sfd_job *job)
{
    int64_t g = (int64_t)STEP_GATE_WINDOWS * job->gates.window_steps;
    return g > STEP_GATE_MIN_STEPS ? g : STEP_GATE_MIN_STEPS;
}

int64_t sfd_job_step_limit(const struct sfd_job *job, uint32_t rank)
{
    int64_t others = job->max_claim_rank == rank ? job->second_claim : job->max_claim;
    return others < 0 || others > INT64_MAX - step_gate(job) ? INT64_MAX : others + step_gate(job);
}

/* Every step a rank sends is its claim, accepted or not: when every rank
 * jumps ahead together (a daemon that fell far behind), the second rank's
 * jump is within the gate of the first one's claim, and the job goes on. A
 * rank alone never moves the job's clock. */
static void note_claim(struct sfd_job *job, uint32_t rank, struct sfd_rank *rk, int64_t step)
{
    if (step <= rk->claimed_step)
        return;
    rk->claimed_step = step;
    if (rank == job->max_claim_rank && job->max_claim >= 0) {
        job->max_claim = step > job->max_claim ? step : job->max_claim;
    } else if (step > job->max_claim) {
        job->second_claim = job->max_claim;
        job->max_claim = step;
        job->max_claim_rank = rank;
    } else if (step > job->second_claim) {
        job->second_claim = step;
    }
}

int sfd_window_add(struct sfd_job *job, uint32_t rank, const sf_row *row, enum sfd_reject *ret_why)
{
    struct sfd_rank *rk;
    int r = sfd_job_rank(job, rank, &rk);
    if (r < 0) {
        *ret_why = r == -ENOMEM ? SFD_REJ_MEMORY : SFD_REJ_INVALID;
        return r;
    }
    if (row->step <= rk->last_step) {
        *ret_why = SFD_REJ_DUPLICATE_RECORD;
        return -EEXIST;
    }
    /* Checked before the claim is noted: the limit is the other ranks'. */
    bool too_far = row->step > sfd_job_step_limit(job, rank);
    note_claim(job, rank, rk, row->step);
    if (too_far) {
        *ret_why = SFD_REJ_FUTURE;
        return -ERANGE;
    }
    int64_t index = window_of(job, row->step);
    if (index < 0) {
        rk->last_step = row->step;
        job->sfd->ctr.warmup_records++;
        return 0;
    }
    struct sfd_window *w = get_window(job, index, false, ret_why);
    if (w == NULL)
        return -ENOSPC;
    if (job->pending_rows >= job->sfd->cfg.max_pending_steps && !make_room(job, index, 1)) {
        w->meta.rejected_records++;
        *ret_why = SFD_REJ_PENDING;
        return -ENOSPC;
    }
    struct sfd_rec rec = {
        .step = row->step,
        .overlap_ns = row->overlap_ns,
        .event_cpu_ns = row->event_cpu_ns,
        .event_gpu_ns = row->event_gpu_ns,
        .rank = rank,
        .flags = row->flags,
        .role = rk->role,
        .event_state = row->event_state,
    };
    r = rows_push(job, &w->rows, &rec, row->d, row->issue_lag, row->sync_wait);
    if (r < 0) {
        w->meta.rejected_records++;
        *ret_why = SFD_REJ_MEMORY;
        return r;
    }
    if (order_reserve(job, w))
        order_insert(job, w, (uint32_t)(w->rows.n - 1));
    if (!rk->seen)
        job->ranks_seen++;
    rk->seen = 1;
    size_t t = (size_t)(row->step - w->meta.first_step);
    if (w->order.count != NULL && sfd_verdict_step_ready(job, w, t)) {
        uint64_t before = job->verdict.seq;
        sfd_verdict_step(job, w, t); /* the step is complete: the live test */
        sfd_history_put_verdict_events(job->sfd, job);
        if (job->verdict.seq != before) /* a start may ask for a capture */
            sfd_capture_consider_live(job, sf_live_verdict_get(job->verdict.test));
    }
    w->notice_only = false;
    if (row->flags & SF_ROW_NON_MONOTONIC)
        w->meta.flags |= SF_WIN_NON_MONOTONIC;
    job->pending_rows++;
    rk->last_step = row->step;
    rk->records++;
    rk->seen = 1;
    job->records++;
    job->hot = w;
    if (row->step > job->max_step) {
        /* Only a new highest step can put windows behind it, and only one in
         * another window than the old highest: windows partition the steps,
         * so no window ends between two steps of one window. */
        bool crossed = job->max_step < 0 || window_of(job, job->max_step) != index;
        job->max_step = row->step;
        if (crossed)
            arm_deadlines(job, row->step);
    }
    uint64_t need =
        (uint64_t)job->world_size * (uint64_t)(w->meta.last_step - w->meta.first_step + 1);
    if (w->rows.n == need) {
        w->complete = true;
        sfd_window_close(job, w, 0);
    }
    return 0;
}

void sfd_window_note_drops(struct sfd_job *job, int64_t first, int64_t last, uint64_t n)
{
    int64_t lo = window_of(job, first), hi = window_of(job, last);
    if (hi < 0 || n == 0)
        return;
    if (lo < 0)
        lo = 0;
    if (hi - lo >= SFD_MAX_OPEN_WINDOWS)
        lo = hi - SFD_MAX_OPEN_WINDOWS + 1;
    uint64_t left = n;
    for (int64_t k = lo; k <= hi && left > 0; k++) {
        int64_t f, l;
        sf_window_range(k, job->gates.warmup_steps, job->gates.window_steps, &f, &l);
        if (f < first)
            f = first;
        if (l > last)
            l = last;
        uint64_t share = k == hi ? left : (uint64_t)(l - f + 1);
        if (share > left)
            share = left;
        left -= share;
        enum sfd_reject why;
        struct sfd_window *w = get_window(job, k, true, &why);
        if (w != NULL)
            sfd_sat_add(&w->meta.dropped_records, share);
    }
}

void sfd_window_note_violations(struct sfd_job *job, int64_t step, uint64_t n)
{
    enum sfd_reject why;
    int64_t k = window_of(job, step);
    struct sfd_window *w = k >= 0 ? get_window(job, k, true, &why) : NULL;
    if (w != NULL && n > 0)
        sfd_sat_add(&w->meta.contract_violations, n);
}

void sfd_window_note_reconnect(struct sfd_job *job, int64_t step)
{
    enum sfd_reject why;
    int64_t k = window_of(job, step);
    struct sfd_window *w = k >= 0 ? get_window(job, k, true, &why) : NULL;
    if (w != NULL && w->meta.dropped_records == 0)
        w->meta.dropped_records = 1;
}

/* Moves a closed window's rows and meta into the ring of kept windows. */
static struct sfd_stored *store_rows(struct sfd_job *job, struct sfd_window *w)
{
    struct sfd_stored *s = sfd_kept_push(job);
    s->meta = w->meta;
    s->meta.closed_at_ms = sfd_realtime_ms();
    s->rows = w->rows;
    /* the same bytes, now kept rows: the uid's share does not change */
    sfd_job_release(job, SFD_MEM_WINDOWS, w->rows.bytes);
    sfd_job_force(job, SFD_MEM_KEPT_ROWS, w->rows.bytes);
    memset(&w->rows, 0, sizeof(w->rows));
    return s;
}

int sfd_window_close(struct sfd_job *job, struct sfd_window *w, uint32_t flags)
{
    struct sfd *d = job->sfd;
    sf_row *view = NULL;
    sf_summary *summary = NULL;
    int r;

    remove_open(job, w);
    order_apply(job, w);
    job->pending_rows -= w->rows.n;
    job->rows_hint = w->rows.n;
    w->meta.flags |= flags;
    if (w->meta.index > job->closed_max)
        job->closed_max = w->meta.index;
    struct sfd_stored *s = store_rows(job, w);
    free(w);
    sfd_job_release(job, SFD_MEM_WINDOWS, sizeof(struct sfd_window));
    d->ctr.windows_closed++;

    r = sfd_rows_view(job, &s->rows, &view);
    if (r < 0)
        goto out;
    bool dense = job->world_size <= job->gates.dense_max_ranks;
    r = sf_summary_build(&job->schema, &s->meta, view, s->rows.n, dense, &summary);
    if (r < 0) {
        sfd_log(SFD_LOG_ERR, job->id, "window %lld: summary failed: %s", (long long)s->meta.index,
                strerror(-r));
        goto out;
    }
    r = sfd_cluster_submit(d, job, summary);
    summary = NULL; /* the cluster implementation owns it */
out:
    sf_summary_free(summary);
    free(view);
    return r;
}

void sfd_window_close_all(struct sfd_job *job, uint32_t flags)
{
    while (job->n_open > 0) {
        /* lowest index first, so the kept windows stay in order */
        uint32_t lo = 0;
        for (uint32_t i = 1; i < job->n_open; i++)
            if (job->open[i]->meta.index < job->open[lo]->meta.index)
                lo = i;
        sfd_window_close(job, job->open[lo], flags);
    }
}

static uint64_t tick_job(struct sfd_job *job, uint64_t now)
{
    uint64_t next = 0;
    for (uint32_t i = 0; i < job->n_open;) {
        struct sfd_window *w = job->open[i];
        if (w->deadline_ms != 0 && w->deadline_ms <= now) {
            sfd_window_close(job, w, 0);
            i = 0;
            continue;
        }
        if (w->deadline_ms != 0 && (next == 0 || w->deadline_ms < next))
            next = w->deadline_ms;
        i++;
    }
    if (job->n_live == 0 && job->orphan_deadline_ms != 0) {
        if (job->orphan_deadline_ms <= now) {
            job->orphan_deadline_ms = 0;
            while (job->n_open > 0) {
                uint32_t lo = 0;
                for (uint32_t i = 1; i < job->n_open; i++)
                    if (job->open[i]->meta.index < job->open[lo]->meta.index)
                        lo = i;
                struct sfd_window *w = job->open[lo];
                sfd_window_close(job, w, w->deadline_ms ? 0 : SF_WIN_PARTIAL);
            }
        } else if (next == 0 || job->orphan_deadline_ms < next) {
            next = job->orphan_deadline_ms;
        }
    }
    return next;
}

uint64_t sfd_windows_tick(struct sfd *d, uint64_t now_ms)
{
    uint64_t next = 0;
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        uint64_t n = tick_job(j, now_ms);
        if (n != 0 && (next == 0 || n < next))
            next = n;
    }
    return next;
}

/* ---- segments ----------------------------------------------------------- */

/* The open windows close early and the same indices continue as the next
 * segment, with fresh per-rank step order (the caller resets the ranks). */
static void next_segment(struct sfd_job *job)
{
    sfd_window_close_all(job, SF_WIN_CLOSED_EARLY);
    job->segment++;
    job->closed_max = -1;
    job->max_step = -1;
    job->max_claim = job->second_claim = -1;
}

int sfd_job_restart_segment(struct sfd_job *job)
{
    int r = sfd_job_reset_ranks(job, job->world_size);
    if (r < 0)
        return r;
    next_segment(job);
    sfd_log(SFD_LOG_NOTICE, job->id, "elastic restart %u: segment %u", job->restart_count,
            job->segment);
    return 0;
}

int sfd_job_bind_shape(struct sfd_job *job, const sf_schema *schema, uint32_t world_size)
{
    bool fresh = job->rank_pages == NULL;
    if (!fresh && job->world_size == world_size && sf_schema_equal(&job->schema, schema))
        return 0;
    if (job->n_live > 0)
        return job->world_size != world_size ? -EXDEV : -EBADE;

    sf_schema copy;
    int r = sf_schema_copy(&copy, schema);
    if (r < 0)
        return r;
    r = sfd_job_reset_ranks(job, world_size);
    if (r < 0) {
        sf_schema_clear(&copy);
        return r;
    }
    if (!fresh) {
        next_segment(job);
        sfd_log(SFD_LOG_NOTICE, job->id, "shape changed: segment %u, world size %u", job->segment,
                world_size);
    }
    sf_schema_clear(&job->schema);
    job->schema = copy;
    return 0;
}

/*
 * Load shedding before decoding: a wire-level peek at a client batch (its
 * record count, step range and drop report; no allocation, no unpacking)
 * and the rule
 * that drops a whole batch unread when decoding it would be wasted: every
 * record is for a window already closed, or the loop is behind: this turn
 * of the loop has already taken more records than it can handle at once.
 * It decides; it never touches windows.
 */
#include <errno.h>

#include "sfd.h"

/* ---- the peek ------------------------------------------------------------
 * Protobuf wire format: a key varint (field << 3 | type), then a varint
 * (type 0), 8 bytes (1), a length and that many bytes (2) or 4 bytes (5).
 * Groups (3, 4) do not occur in these messages: the peek gives up on them,
 * and on anything malformed, and the full decoder takes the frame. */

struct cursor {
    const uint8_t *p, *end;
};

static int read_varint(struct cursor *c, uint64_t *ret)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && c->p < c->end; shift += 7) {
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *ret = v;
            return 0;
        }
    }
    return -EINVAL;
}

/* Reads a key; for length-delimited fields *ret_sub is the field's bytes
 * and the cursor moves past them, for others the value is skipped. */
static int next_field(struct cursor *c, uint32_t *ret_field, uint32_t *ret_type, uint64_t *ret_v,
                      struct cursor *ret_sub)
{
    uint64_t key, len;
    if (read_varint(c, &key) < 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX)
        return -EINVAL;
    *ret_field = (uint32_t)(key >> 3);
    *ret_type = (uint32_t)(key & 7);
    size_t left = (size_t)(c->end - c->p);
    switch (*ret_type) {
    case 0:
        return read_varint(c, ret_v);
    case 1:
    case 5:
        len = *ret_type == 1 ? 8 : 4;
        if (len > left)
            return -EINVAL;
        c->p += len;
        return 0;
    case 2:
        if (read_varint(c, &len) < 0 || len > (uint64_t)(c->end - c->p))
            return -EINVAL;
        *ret_sub = (struct cursor){c->p, c->p + len};
        c->p += len;
        return 0;
    default:
        return -EINVAL;
    }
}

/* A StepRecord's step (field 1; the last one counts, as in protobuf). */
static int record_step(struct cursor rec, int64_t *ret)
{
    bool seen = false;
    while (rec.p < rec.end) {
        uint32_t f, t;
        uint64_t v = 0;
        struct cursor sub;
        if (next_field(&rec, &f, &t, &v, &sub) < 0)
            return -EINVAL;
        if (f == 1 && t == 0) {
            *ret = (int64_t)v;
            seen = true;
        }
    }
    return seen ? 0 : -EINVAL;
}

/* RecordBatch fields 3 to 5 (varints; the last one counts, as in protobuf). */
static void note_drop_field(struct sfd_drop_report *r, uint32_t field, uint64_t v)
{
    if (field == 3)
        r->has_total = true, r->total = v;
    else if (field == 4)
        r->has_first = true, r->first_step = (int64_t)v;
    else if (field == 5)
        r->has_last = true, r->last_step = (int64_t)v;
}

static int batch_peek(struct cursor b, struct sfd_batch_peek *ret)
{
    struct sfd_batch_peek pk = {0, INT64_MAX, INT64_MIN, {0}};
    while (b.p < b.end) {
        uint32_t f, t;
        uint64_t v = 0;
        struct cursor sub;
        if (next_field(&b, &f, &t, &v, &sub) < 0)
            return -EINVAL;
        if (f >= 3 && f <= 5 && t == 0)
            note_drop_field(&pk.drops, f, v);
        if (f != 1)
            continue;
        int64_t step;
        if (t != 2 || record_step(sub, &step) < 0)
            return -EINVAL;
        pk.n_records++;
        pk.first_step = step < pk.first_step ? step : pk.first_step;
        pk.last_step = step > pk.last_step ? step : pk.last_step;
    }
    if (pk.n_records == 0)
        return -EINVAL;
    *ret = pk;
    return 0;
}

/* The RecordBatch of a ClientMessage frame: 0, or -EINVAL when the frame's
 * body is something else or cannot be read. */
static int batch_body(const uint8_t *buf, size_t len, struct cursor *ret)
{
    struct cursor c = {buf, buf + len}, body = {NULL, NULL};
    uint32_t body_field = 0;
    while (c.p < c.end) {
        uint32_t f, t;
        uint64_t v;
        struct cursor sub;
        if (next_field(&c, &f, &t, &v, &sub) < 0)
            return -EINVAL;
        if (f >= 1 && f <= 3) { /* the oneof: the last member wins */
            if (t != 2)
                return -EINVAL;
            body_field = f;
            body = sub;
        }
    }
    if (body_field != 2)
        return -EINVAL;
    *ret = body;
    return 0;
}

int sfd_batch_peek(const uint8_t *buf, size_t len, struct sfd_batch_peek *ret)
{
    struct cursor body;
    return batch_body(buf, len, &body) < 0 ? -EINVAL : batch_peek(body, ret);
}

/* The records of a batch frame, counted without reading inside them: all
 * that a batch the rule keeps needs (the decoder checks each record). */
static int batch_count(const uint8_t *buf, size_t len, uint32_t *ret)
{
    struct cursor b;
    uint32_t n = 0;
    if (batch_body(buf, len, &b) < 0)
        return -EINVAL;
    while (b.p < b.end) {
        uint32_t f, t;
        uint64_t v = 0;
        struct cursor sub;
        if (next_field(&b, &f, &t, &v, &sub) < 0 || (f == 1 && t != 2))
            return -EINVAL;
        n += f == 1;
    }
    if (n == 0)
        return -EINVAL;
    *ret = n;
    return 0;
}

/* ---- the rule ------------------------------------------------------------ */

/* Whether any batch from c could be late (batch_is_late): its steps are past
 * the rank's last, so at least in the window of the step after it, which
 * must have closed. A rank that keeps up with its windows never is, and its
 * batches need no peek. */
static bool may_be_late(const struct sfd_conn *c)
{
    const struct sfd_job *job = c->job;
    const struct sfd_rank *rk = sfd_job_rank_peek(job, c->rank);
    if (rk == NULL || job->closed_max < 0)
        return false;
    if (rk->last_step >= SFD_MAX_STEP) /* no step after it to place: peek */
        return true;
    return sf_window_index(rk->last_step + 1, job->gates.warmup_steps, job->gates.window_steps) <=
           job->closed_max;
}

/* Every record of the batch would be refused as late: past the rank's last
 * step (so none is a duplicate) and in windows that have closed. */
static bool batch_is_late(const struct sfd_conn *c, const struct sfd_batch_peek *pk)
{
    const struct sfd_job *job = c->job;
    const struct sfd_rank *rk = sfd_job_rank_peek(job, c->rank);
    int64_t first =
        sf_window_index(pk->first_step, job->gates.warmup_steps, job->gates.window_steps);
    int64_t last = sf_window_index(pk->last_step, job->gates.warmup_steps, job->gates.window_steps);
    return rk != NULL && pk->first_step > rk->last_step && first >= 0 && last <= job->closed_max;
}

enum sfd_shed sfd_shed_check(struct sfd_conn *c, const uint8_t *buf, size_t len,
                             struct sfd_batch_peek *ret)
{
    if (c->job == NULL || !c->hello || c->channel != 0)
        return SFD_SHED_NONE;
    /* The full peek reads every record's step; a batch that cannot be late
     * needs only its record count (the peek counts them too). */
    uint32_t n_records;
    bool peeked = may_be_late(c);
    if (peeked) {
        if (sfd_batch_peek(buf, len, ret) < 0)
            return SFD_SHED_NONE;
        if (batch_is_late(c, ret))
            return SFD_SHED_LATE;
        n_records = ret->n_records;
    } else if (batch_count(buf, len, &n_records) < 0) {
        return SFD_SHED_NONE;
    }
    /* Work, not time: a turn slowed by other processes on the machine sheds
     * nothing, and a backlog must last (SFD_SHED_FULL_TURNS full turns in a
     * row) before anything is shed: a daemon descheduled for a moment
     * catches up instead. The loop's clock moves once per turn (turns within
     * one millisecond count together, which only sheds later). */
    struct sfd *d = c->sfd;
    uint64_t turn = uv_now(d->loop);
    if (turn != d->turn_ms) {
        d->full_turns = d->turn_records >= SFD_SHED_TURN_RECORDS ? d->full_turns + 1 : 0;
        d->turn_ms = turn;
        d->turn_records = 0;
    }
    if (d->turn_records >= SFD_SHED_TURN_RECORDS && d->full_turns >= SFD_SHED_FULL_TURNS)
        return peeked || sfd_batch_peek(buf, len, ret) == 0 ? SFD_SHED_BEHIND : SFD_SHED_NONE;
    d->turn_records += n_records;
    return SFD_SHED_NONE;
}

/*
 * The control channel, client side: sfd's capture requests read without
 * blocking at flush time, the capture state machine run at step boundaries,
 * and the replies queued for the next flush (docs/CLIENT.md, "Captures").
 * Everything is allocated at open; nothing here runs per stage, and nothing a
 * handler or sfd does can reach the training loop as an error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "client_internal.h"

/* ---- decoding --------------------------------------------------------------- */

static void *arena_alloc(void *data, size_t size)
{
    struct sf__arena *a = data;
    size_t need = (size + 15) & ~(size_t)15;
    if (need < size || need > a->cap - a->used)
        return NULL;
    void *p = a->base + a->used;
    a->used += need;
    return p;
}

static void arena_free(void *data, void *ptr)
{
    (void)data;
    (void)ptr; /* the whole arena is reset before the next message */
}

int sf__control_decode(const uint8_t *buf, size_t len, struct sf__arena *arena,
                       sf_capture_request *ret)
{
    if (buf == NULL || arena == NULL || ret == NULL || len == 0 || len > SF__CONTROL_MAX_BYTES)
        return -EBADMSG;
    arena->used = 0;
    ProtobufCAllocator alloc = {.alloc = arena_alloc, .free = arena_free, .allocator_data = arena};
    Stagefrontier__ControlMessage *m = stagefrontier__control_message__unpack(&alloc, len, buf);
    if (m == NULL)
        return -EBADMSG;
    if (m->body_case != STAGEFRONTIER__CONTROL_MESSAGE__BODY_CAPTURE || m->capture == NULL)
        return -EBADMSG;
    const Stagefrontier__CaptureRequest *q = m->capture;
    uint32_t kinds = q->has_kinds ? q->kinds : 0;
    if (q->id == 0 || q->steps == 0 || q->steps > SF_CAPTURE_MAX_STEPS ||
        (kinds & ~(SF_CAPTURE_KIND_CPU | SF_CAPTURE_KIND_CUDA)) != 0)
        return -ERANGE;
    *ret = (sf_capture_request){.id = q->id,
                                .steps = q->steps,
                                .kinds = kinds,
                                .first_step = -1,
                                .step = -1,
                                .communication = q->has_communication && q->communication};
    return 0;
}

/* ---- replies ------------------------------------------------------------------ */

static int64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Queues a reply for the next flush; with the queue full (sfd flooding us
 * with requests) the reply is counted as lost and sfd times the capture out. */
/* Queues a reply; returns it for the caller to fill in further, or NULL
 * when the queue is full (counted as lost). */
static struct sf__reply *queue_reply(struct sf__capture *k, uint64_t id, int state,
                                     const char *text)
{
    if (k->n_replies == SF__MAX_REPLIES) {
        k->replies_lost++;
        return NULL;
    }
    struct sf__reply *r = &k->replies[k->n_replies++];
    *r = (struct sf__reply){.id = id, .state = state, .first_step = -1, .last_step = -1};
    snprintf(r->text, sizeof r->text, "%s", text ? text : "");
    return r;
}

static int send_reply(sf_client *c, const struct sf__reply *r, int64_t now_ns)
{
    Stagefrontier__CaptureReply p = STAGEFRONTIER__CAPTURE_REPLY__INIT;
    p.id = r->id;
    p.state = (Stagefrontier__CaptureReply__State)r->state;
    if (r->first_step >= 0) {
        p.has_first_step = 1, p.first_step = r->first_step;
        p.has_last_step = 1, p.last_step = r->last_step;
    }
    if (r->started_at_ms > 0)
        p.has_started_at_ms = 1, p.started_at_ms = r->started_at_ms;
    if (r->finished_at_ms > 0)
        p.has_finished_at_ms = 1, p.finished_at_ms = r->finished_at_ms;
    char err[SF_CAPTURE_ERROR_MAX + 1];
    if (r->state == STAGEFRONTIER__CAPTURE_REPLY__STATE__DONE) {
        p.path = (char *)r->text;
    } else if (r->text[0] != '\0') {
        size_t n = strnlen(r->text, SF_CAPTURE_ERROR_MAX);
        memcpy(err, r->text, n);
        err[n] = '\0';
        p.error = err;
    }
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_CAPTURE_REPLY;
    m.capture_reply = &p;
    return sf__transport_send_message(&c->tr, &m, c->cap->buf, SF__CONTROL_BUF, now_ns);
}

static void send_replies(sf_client *c, int64_t now_ns)
{
    struct sf__capture *k = c->cap;
    uint32_t sent = 0;
    while (sent < k->n_replies && sf__transport_connected(&c->tr)) {
        int r = send_reply(c, &k->replies[sent], now_ns);
        if (r == -EAGAIN)
            break; /* the socket is full: the next flush tries again */
        if (r < 0 && r != -EMSGSIZE)
            break; /* the connection went away: kept for the next one */
        sent++;    /* sent, or too large to ever send */
    }
    memmove(k->replies, k->replies + sent, (k->n_replies - sent) * sizeof k->replies[0]);
    k->n_replies -= sent;
}

/* ---- requests ----------------------------------------------------------------- */

static void take_request(sf_client *c, const sf_capture_request *q)
{
    struct sf__capture *k = c->cap;
    if (k->fn == NULL) {
        k->unsupported++;
        queue_reply(k, q->id, STAGEFRONTIER__CAPTURE_REPLY__STATE__UNSUPPORTED,
                    "no capture handler in this process");
        return;
    }
    if (c->cap_state != SF__CAP_IDLE) {
        k->busy++;
        queue_reply(k, q->id, STAGEFRONTIER__CAPTURE_REPLY__STATE__BUSY, "a capture is running");
        return;
    }
    k->requested++;
    k->req = *q;
    k->req.job_id = c->job_id;
    k->req.rank = c->hello.rank;
    k->req.world_size = c->hello.world_size;
    k->steps_done = 0;
    k->failed = false;
    k->out[0] = '\0';
    c->cap_state = SF__CAP_PENDING;
    queue_reply(k, q->id, STAGEFRONTIER__CAPTURE_REPLY__STATE__ACCEPTED, NULL);
}

static void read_requests(sf_client *c)
{
    struct sf__capture *k = c->cap;
    for (int i = 0; i < SF__CONTROL_READS && sf__transport_connected(&c->tr); i++) {
        ssize_t n = recv(c->tr.fd, k->buf, SF__CONTROL_BUF, MSG_DONTWAIT | MSG_TRUNC);
        if (n <= 0)
            return; /* nothing waiting (or the connection is closing: send notices) */
        sf_capture_request q;
        if ((size_t)n > SF__CONTROL_BUF ||
            sf__control_decode(k->buf, (size_t)n, &k->arena, &q) < 0) {
            k->rejected++;
            continue;
        }
        take_request(c, &q);
    }
}

void sf__control_exchange(sf_client *c, int64_t now_ns)
{
    if (c->cap == NULL || !sf__transport_connected(&c->tr))
        return;
    read_requests(c);
    send_replies(c, now_ns);
}

/* ---- the capture at step boundaries --------------------------------------------- */

static int call(sf_client *c, enum sf_capture_phase phase)
{
    struct sf__capture *k = c->cap;
    int r = k->fn(k->arg, phase, &k->req, k->out, sizeof k->out);
    k->out[sizeof k->out - 1] = '\0';
    return r;
}

static void finish(sf_client *c)
{
    struct sf__capture *k = c->cap;
    char why[SF_CAPTURE_ERROR_MAX + 1] = "";
    if (k->failed) { /* a step phase failed: its reason, not STOP's output */
        size_t n = strnlen(k->out, SF_CAPTURE_ERROR_MAX);
        memcpy(why, k->out, n);
        why[n] = '\0';
    }
    k->out[0] = '\0';
    int r = call(c, SF_CAPTURE_STOP);
    if (k->failed && why[0] != '\0')
        snprintf(k->out, sizeof k->out, "%s", why);
    bool ok = !k->failed && r >= 0 && k->out[0] != '\0' && k->steps_done > 0;
    if (!ok && k->out[0] == '\0')
        snprintf(k->out, sizeof k->out, "capture handler failed (%d)", r < 0 ? r : -EIO);
    if (ok)
        k->done++;
    else
        k->failed_total++;
    c->cap_state = SF__CAP_IDLE;
    struct sf__reply *rep = queue_reply(k, k->req.id,
                                        ok ? STAGEFRONTIER__CAPTURE_REPLY__STATE__DONE
                                           : STAGEFRONTIER__CAPTURE_REPLY__STATE__FAILED,
                                        k->out);
    if (rep == NULL)
        return;
    if (k->steps_done > 0) {
        rep->first_step = k->req.first_step;
        rep->last_step = k->req.first_step + k->steps_done - 1;
    }
    rep->started_at_ms = k->started_at_ms;
    rep->finished_at_ms = realtime_ms();
}

void sf__capture_before_begin(sf_client *c, int64_t step)
{
    struct sf__capture *k = c->cap;
    if (c->cap_state == SF__CAP_PENDING) {
        k->req.first_step = k->req.step = step;
        k->started_at_ms = realtime_ms();
        c->cap_state = SF__CAP_RUNNING;
        if (call(c, SF_CAPTURE_START) < 0) {
            /* Nothing started: no STOP, the reason is in out. */
            k->failed_total++;
            c->cap_state = SF__CAP_IDLE;
            if (k->out[0] == '\0')
                snprintf(k->out, sizeof k->out, "capture handler refused to start");
            struct sf__reply *rep =
                queue_reply(k, k->req.id, STAGEFRONTIER__CAPTURE_REPLY__STATE__FAILED, k->out);
            if (rep != NULL) {
                rep->started_at_ms = k->started_at_ms;
                rep->finished_at_ms = realtime_ms();
            }
            return;
        }
    }
    k->req.step = step;
    if (call(c, SF_CAPTURE_STEP_BEGIN) < 0)
        k->failed = true;
}

void sf__capture_after_end(sf_client *c)
{
    struct sf__capture *k = c->cap;
    if (c->cap_state != SF__CAP_RUNNING)
        return;
    k->req.step = c->step;
    if (call(c, SF_CAPTURE_STEP_END) < 0)
        k->failed = true;
    k->steps_done++;
    if (k->failed || k->steps_done >= k->req.steps)
        finish(c);
}

void sf__capture_finish_early(sf_client *c)
{
    if (c->cap == NULL)
        return;
    if (c->cap_state == SF__CAP_RUNNING) {
        c->cap->req.step = c->cap->req.first_step + c->cap->steps_done - 1;
        finish(c);
    }
    c->cap_state = SF__CAP_IDLE;
}

int sf_client_set_capture_handler(sf_client *c, sf_capture_handler fn, void *arg)
{
    if (c == NULL)
        return -EINVAL;
    if (c->cap == NULL)
        return 0; /* a disabled client never captures */
    if (c->cap_state == SF__CAP_RUNNING)
        return -EBUSY;
    c->cap->fn = fn;
    c->cap->arg = fn != NULL ? arg : NULL;
    if (fn == NULL && c->cap_state == SF__CAP_PENDING) {
        c->cap_state = SF__CAP_IDLE;
        c->cap->unsupported++;
        queue_reply(c->cap, c->cap->req.id, STAGEFRONTIER__CAPTURE_REPLY__STATE__UNSUPPORTED,
                    "capture handler removed");
    }
    return 0;
}

/* ---- lifetime --------------------------------------------------------------------- */

int sf__control_alloc(sf_client *c)
{
    c->cap = calloc(1, sizeof *c->cap);
    if (c->cap == NULL)
        return -ENOMEM;
    c->cap->buf = malloc(SF__CONTROL_BUF);
    c->cap->arena.base = malloc(SF__CONTROL_ARENA);
    c->cap->arena.cap = SF__CONTROL_ARENA;
    if (c->cap->buf == NULL || c->cap->arena.base == NULL)
        return -ENOMEM;
    return 0;
}

void sf__control_free(sf_client *c)
{
    if (c->cap == NULL)
        return;
    free(c->cap->buf);
    free(c->cap->arena.base);
    free(c->cap);
    c->cap = NULL;
}

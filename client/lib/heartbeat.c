/*
 * The liveness thread (docs/CLIENT.md, "Liveness"): when no step has ended
 * for its interval, it sends the open step and stage on its own connection
 * (channel 2), so a hung rank shows in sfd while its steps are stuck. It only
 * reads atomics the hot path stores anyway; it never touches the record ring
 * or the step-record socket, and the hot path never waits for it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"

struct sf__heartbeat {
    pthread_t thread;
    pthread_mutex_t mu; /* guards stop; only this thread and close take it */
    pthread_cond_t cv;
    bool stop;
    uint32_t interval_ms;
    const sf_client *client; /* read through atomics only */
    struct sf__hello_info hello;
    sf__transport tr;
    uint8_t *hello_buf; /* SF__MAX_DATAGRAM */
    uint8_t buf[128];
    uint64_t sent; /* atomic: read by sf_client_get_stats */
};

static void deadline_after(struct timespec *ts, uint32_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void send_heartbeat(struct sf__heartbeat *h, uint64_t steps)
{
    int64_t now = sf__now_ns();
    if (sf__transport_connect(&h->tr, now) < 0)
        return; /* no daemon: the backoff decides when to try again */
    Stagefrontier__RankHeartbeat b = STAGEFRONTIER__RANK_HEARTBEAT__INIT;
    b.step = atomic_load_explicit(&sf_side_beacon.step, memory_order_relaxed);
    b.has_stage = 1;
    b.stage = atomic_load_explicit(&sf_side_beacon.stage, memory_order_acquire);
    b.has_in_step = 1;
    b.in_step = __atomic_load_n(&h->client->in_step, __ATOMIC_RELAXED);
    if (!b.in_step)
        b.stage = -1;
    if (b.stage >= 0) {
        /* So sfd dates the stall from the stage's start, not our tick. */
        int64_t start = atomic_load_explicit(&sf_side_beacon.stage_start_ns, memory_order_relaxed);
        int64_t ms = (now - start) / 1000000;
        if (start > 0 && ms >= 0) {
            b.has_stage_elapsed_ms = 1;
            b.stage_elapsed_ms = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
        }
    }
    b.has_steps_ended = 1, b.steps_ended = steps;
    b.has_interval_ms = 1, b.interval_ms = h->interval_ms;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HEARTBEAT;
    m.heartbeat = &b;
    if (sf__transport_send_message(&h->tr, &m, h->buf, sizeof h->buf, now) == 0)
        __atomic_add_fetch(&h->sent, 1, __ATOMIC_RELAXED);
}

static void *heartbeat_main(void *arg)
{
    struct sf__heartbeat *h = arg;
    uint64_t last = __atomic_load_n(&h->client->steps, __ATOMIC_RELAXED);
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        struct timespec ts;
        deadline_after(&ts, h->interval_ms);
        int r = 0;
        while (!h->stop && r != ETIMEDOUT)
            r = pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        if (h->stop)
            break;
        pthread_mutex_unlock(&h->mu);
        uint64_t steps = __atomic_load_n(&h->client->steps, __ATOMIC_RELAXED);
        if (steps == last)
            send_heartbeat(h, steps);
        last = steps;
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void heartbeat_free(struct sf__heartbeat *h)
{
    sf__transport_close(&h->tr);
    free(h->hello_buf);
    free(h);
}

int sf__heartbeat_start(sf_client *c, uint32_t interval_ms, struct sf__heartbeat **ret)
{
    struct sf__heartbeat *h = calloc(1, sizeof *h);
    if (h == NULL)
        return -ENOMEM;
    h->hello_buf = malloc(SF__MAX_DATAGRAM);
    if (h->hello_buf == NULL) {
        free(h);
        return -ENOMEM;
    }
    h->interval_ms = interval_ms;
    h->client = c;
    h->hello = c->hello;
    h->hello.channel = SF__CHANNEL_HEARTBEAT;
    h->hello.window_steps = h->hello.warmup_steps = -1;
    h->tr.fd = -1;
    int r = sf__transport_init(&h->tr, c->tr.path, &h->hello, h->hello_buf);
    if (r < 0)
        goto fail;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&h->mu, NULL);
    r = -pthread_create(&h->thread, NULL, heartbeat_main, h);
    if (r < 0) {
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
        goto fail;
    }
    *ret = h;
    return 0;
fail:
    heartbeat_free(h);
    return r;
}

void sf__heartbeat_stop(struct sf__heartbeat *h, bool in_child)
{
    if (h == NULL)
        return;
    if (!in_child) {
        pthread_mutex_lock(&h->mu);
        h->stop = true;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
    }
    /* In a fork child the thread does not exist and its mutex may be held
     * forever: leave both alone, close our copy of the socket, free. */
    heartbeat_free(h);
}

uint64_t sf__heartbeat_sent(const struct sf__heartbeat *h)
{
    return h != NULL ? __atomic_load_n(&h->sent, __ATOMIC_RELAXED) : 0;
}

/*
 * sfd and systemd: READY=1 once the sockets are live, periodic STATUS= lines
 * with the counters, WATCHDOG=1 at half of WATCHDOG_USEC. Without a notify
 * socket every call is a no-op (sd_notify returns 0).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "sfd.h"

static void status_line(struct sfd *d, char *buf, size_t len)
{
    uint64_t rej = 0;
    for (int i = 0; i < SFD_REJ_COUNT; i++)
        rej += d->ctr.rejected[i];
    snprintf(buf, len,
             "STATUS=jobs %u, connections %u, records %llu, windows %llu, dropped %llu, "
             "rejected %llu",
             d->n_jobs, d->n_conns, (unsigned long long)d->ctr.records,
             (unsigned long long)d->ctr.windows_closed, (unsigned long long)d->ctr.dropped,
             (unsigned long long)rej);
}

void sfd_notify_ready(struct sfd *d)
{
    char buf[512];
    status_line(d, buf, sizeof(buf));
    sd_notifyf(0, "READY=1\n%s", buf);
}

void sfd_notify_status(struct sfd *d)
{
    char buf[512];
    status_line(d, buf, sizeof(buf));
    sd_notify(0, buf);
}

void sfd_notify_stopping(struct sfd *d)
{
    (void)d;
    sd_notify(0, "STOPPING=1");
}

static void on_status(uv_timer_t *t)
{
    sfd_notify_status(t->data);
}

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    sd_notify(0, "WATCHDOG=1");
}

int sfd_notify_start(struct sfd *d)
{
    uint64_t usec = 0;
    int r = uv_timer_init(d->loop, &d->status_timer);
    if (r < 0)
        return r;
    d->status_timer.data = d;
    uv_timer_start(&d->status_timer, on_status, d->cfg.status_interval_ms,
                   d->cfg.status_interval_ms);
    uv_unref((uv_handle_t *)&d->status_timer);

    r = uv_timer_init(d->loop, &d->watchdog_timer);
    if (r < 0)
        return r;
    d->watchdog_timer.data = d;
    if (d->cfg.watchdog && sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        uint64_t ms = usec / 2000;
        if (ms == 0)
            ms = 1;
        sd_notify(0, "WATCHDOG=1");
        uv_timer_start(&d->watchdog_timer, on_watchdog, ms, ms);
        sfd_log(SFD_LOG_INFO, NULL, "watchdog every %llu ms", (unsigned long long)ms);
    }
    uv_unref((uv_handle_t *)&d->watchdog_timer);
    return 0;
}

/*
 * sfd's window-deadline tick: the timer that asks windows.c which windows
 * are due (the clock is clock.c's). It never closes a window itself and
 * knows nothing of the export.
 */
#include "sfd.h"

static void on_tick(uv_timer_t *t)
{
    struct sfd *d = t->data;
    uint64_t now = sfd_now_ms(d);
    uint64_t next = sfd_windows_tick(d, now);
    if (next != 0)
        uv_timer_start(&d->tick, on_tick, next > now ? next - now : 1, 0);
}

void sfd_arm_tick(struct sfd *d)
{
    /* New deadlines are now + grace, never earlier than an armed one. */
    if (!uv_is_active((uv_handle_t *)&d->tick) && !d->stopping)
        uv_timer_start(&d->tick, on_tick, d->cfg.window_grace_ms, 0);
}

void sfd_tick_now(struct sfd *d)
{
    if (d->tick.loop != NULL && !d->stopping)
        uv_timer_start(&d->tick, on_tick, 0, 0);
}

int sfd_timers_init(struct sfd *d)
{
    int r = uv_timer_init(d->loop, &d->tick);
    if (r < 0)
        return r;
    d->tick.data = d;
    return sfd_prom_timer_init(d);
}

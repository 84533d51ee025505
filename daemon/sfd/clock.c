/*
 * sfd's two clocks, in one place: the loop's monotonic milliseconds (every
 * deadline, idle sweep and timeout) and the wall clock (what reports, ranks
 * and captures show as a time of day). Nothing here keeps state.
 */
#define _GNU_SOURCE
#include <time.h>

#include "sfd.h"

uint64_t sfd_now_ms(const struct sfd *d)
{
    return uv_now(d->loop);
}

int64_t sfd_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

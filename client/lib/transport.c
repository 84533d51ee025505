/*
 * Transport: the non-blocking SOCK_SEQPACKET connection to sfd, its
 * reconnect backoff and the Hello on every (re)connect. Owns the socket fd;
 * must never sleep, block, raise SIGPIPE or allocate after init.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "transport.h"

int64_t sf__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int sf__transport_init(sf__transport *t, const char *path, const struct sf__hello_info *hello,
                       uint8_t *hello_buf)
{
    if (t == NULL || path == NULL || hello == NULL || hello_buf == NULL)
        return -EINVAL;
    size_t len = strlen(path);
    if (len == 0)
        return -EINVAL;
    if (len >= sizeof t->path)
        return -ENAMETOOLONG;
    memset(t, 0, sizeof *t);
    memcpy(t->path, path, len + 1);
    t->fd = -1;
    t->hello = hello;
    t->hello_buf = hello_buf;
    t->backoff_ns = SF__BACKOFF_MIN_NS;
    return 0;
}

bool sf__transport_connected(const sf__transport *t)
{
    return t->fd >= 0;
}

void sf__transport_close(sf__transport *t)
{
    if (t == NULL || t->fd < 0)
        return;
    close(t->fd);
    t->fd = -1;
}

static void arm_backoff(sf__transport *t, int64_t now_ns)
{
    t->next_attempt_ns = now_ns + t->backoff_ns;
    t->backoff_ns =
        t->backoff_ns >= SF__BACKOFF_MAX_NS / 2 ? SF__BACKOFF_MAX_NS : t->backoff_ns * 2;
}

/* The coordinates as the Hello's Parallel message, into storage the caller
 * keeps until packing is done. */
struct parallel_msg {
    Stagefrontier__Parallel par;
    Stagefrontier__ParallelCoord coord[SF_PAR_DIMS];
};

static void parallel_fill(const sf_parallel *p, struct parallel_msg *out)
{
    Stagefrontier__Parallel init = STAGEFRONTIER__PARALLEL__INIT;
    Stagefrontier__ParallelCoord **slot[SF_PAR_DIMS] = {&out->par.pp, &out->par.tp, &out->par.dp,
                                                        &out->par.cp, &out->par.ep};
    out->par = init;
    for (int d = 0; d < SF_PAR_DIMS; d++) {
        if (!(p->declared & (1u << d)))
            continue;
        stagefrontier__parallel_coord__init(&out->coord[d]);
        out->coord[d].index = p->index[d];
        out->coord[d].size = p->size[d];
        *slot[d] = &out->coord[d];
    }
    if (p->schedule != SF_SCHEDULE_NONE) {
        out->par.has_schedule = 1;
        out->par.schedule = (Stagefrontier__Parallel__Schedule)p->schedule;
    }
    if (p->virtual_stages != 0)
        out->par.has_virtual_stages = 1, out->par.virtual_stages = p->virtual_stages;
}

int sf__hello_pack(const struct sf__hello_info *info, uint32_t generation, bool have_last_sent_step,
                   int64_t last_sent_step, uint8_t *buf, size_t cap)
{
    Stagefrontier__Hello h = STAGEFRONTIER__HELLO__INIT;
    h.protocol_version = 1;
    h.job_id = (char *)info->job_id;
    h.rank = info->rank;
    h.world_size = info->world_size;
    if (info->local_rank >= 0)
        h.has_local_rank = 1, h.local_rank = (uint32_t)info->local_rank;
    if (info->gpu != NULL && info->gpu[0] != '\0')
        h.gpu = (char *)info->gpu;
    h.host = (char *)info->host;
    h.has_pid = 1, h.pid = info->pid;
    h.n_stage_names = info->n_stages;
    h.stage_names = info->stage_names;
    if (info->stage_groups != NULL) {
        h.n_stage_groups = info->n_stages;
        h.stage_groups = info->stage_groups;
    }
    h.schema_hash = info->schema_hash;
    h.n_sync_stages = info->n_sync_stages;
    h.sync_stages = (uint32_t *)info->sync_stages; /* read-only: packing never writes */
    if (info->sync_groups != NULL) {
        h.n_sync_groups = info->n_sync_stages;
        h.sync_groups = (uint32_t *)info->sync_groups;
    }
    h.has_schema_version = 1, h.schema_version = info->schema_version;
    h.has_accumulation = 1, h.accumulation = info->accumulation;
    if (info->role != NULL && info->role[0] != '\0')
        h.role = (char *)info->role;
    h.has_connection_generation = 1, h.connection_generation = generation;
    if (generation > 0 && have_last_sent_step)
        h.has_last_sent_step = 1, h.last_sent_step = last_sent_step;
    h.has_channel = 1, h.channel = info->channel;
    if (info->window_steps >= 0)
        h.has_window_steps = 1, h.window_steps = (uint32_t)info->window_steps;
    if (info->warmup_steps >= 0)
        h.has_warmup_steps = 1, h.warmup_steps = (uint32_t)info->warmup_steps;
    if (info->run_id != NULL && info->run_id[0] != '\0')
        h.run_id = (char *)info->run_id;
    h.has_restart_count = 1, h.restart_count = info->restart_count;
    struct parallel_msg par;
    if (info->parallel != NULL && info->parallel->declared != 0 &&
        info->channel == SF__CHANNEL_STEPS) {
        parallel_fill(info->parallel, &par);
        h.parallel = &par.par;
    }

    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
    m.hello = &h;
    size_t len = stagefrontier__client_message__get_packed_size(&m);
    if (len > cap)
        return -EMSGSIZE;
    return (int)stagefrontier__client_message__pack(&m, buf);
}

static int open_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    /* A non-blocking Unix connect either completes or fails at once
     * (EAGAIN when the listener's backlog is full): never EINPROGRESS. */
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

static int raw_send(sf__transport *t, const void *buf, size_t len)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    t->send_syscalls++;
    ssize_t n = sendmsg(t->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    return 0;
}

int sf__transport_connect(sf__transport *t, int64_t now_ns)
{
    if (t->fd >= 0)
        return 0;
    if (now_ns < t->next_attempt_ns)
        return -EAGAIN;
    int fd = open_socket(t->path);
    if (fd < 0) {
        arm_backoff(t, now_ns);
        return fd;
    }
    t->fd = fd;
    uint32_t gen = (uint32_t)t->connects;
    int len = sf__hello_pack(t->hello, gen, t->have_last_sent_step, t->last_sent_step, t->hello_buf,
                             SF__MAX_DATAGRAM);
    int r = len < 0 ? len : raw_send(t, t->hello_buf, (size_t)len);
    if (r < 0) {
        /* Without its Hello the daemon would reject every batch: give up
         * this connection and try a fresh one after the backoff. */
        sf__transport_close(t);
        arm_backoff(t, now_ns);
        return r;
    }
    if (t->connects > 0)
        t->reconnects++;
    t->connects++;
    t->backoff_ns = SF__BACKOFF_MIN_NS;
    return 0;
}

int sf__transport_send(sf__transport *t, const void *buf, size_t len, int64_t now_ns)
{
    if (t->fd < 0)
        return -ENOTCONN;
    int r = raw_send(t, buf, len);
    if (r == 0 || r == -EAGAIN || r == -ENOBUFS)
        return r == 0 ? 0 : -EAGAIN;
    /* EPIPE, ECONNRESET, ECONNREFUSED, ENOTCONN: the daemon went away. */
    sf__transport_close(t);
    t->backoff_ns = SF__BACKOFF_MIN_NS;
    arm_backoff(t, now_ns);
    return r;
}

int sf__transport_send_message(sf__transport *t, const Stagefrontier__ClientMessage *m,
                               uint8_t *buf, size_t cap, int64_t now_ns)
{
    size_t len = stagefrontier__client_message__get_packed_size(m);
    if (len > cap)
        return -EMSGSIZE;
    stagefrontier__client_message__pack(m, buf);
    return sf__transport_send(t, buf, len, now_ns);
}

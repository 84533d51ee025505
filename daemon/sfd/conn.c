/*
 * sfd sockets and connections: listeners (bound or socket-activated), accept
 * under max_connections with SO_PEERCRED, the shared receive buffer, and
 * datagram reads with MSG_TRUNC. Each datagram goes to its socket's handler
 * (ingest.c or query.c) through the handler table; this file never reads a
 * message itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sfd.h"

#define READS_PER_EVENT 64

_Static_assert(SFD_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path),
               "socket paths are sun_path's size");
_Static_assert(sizeof(SF_DEFAULT_INGEST_SOCKET) <= SFD_PATH_MAX &&
                   sizeof(SF_DEFAULT_QUERY_SOCKET) <= SFD_PATH_MAX,
               "the default sockets fit sun_path");

/* What each socket's connections do with their datagrams. */
struct conn_handler {
    int (*datagram)(struct sfd_conn *c, const uint8_t *buf, size_t len);
    void (*writable)(struct sfd_conn *c); /* NULL: never waits to write */
    enum sfd_reject oversized;            /* a datagram beyond the frame cap */
};

static const struct conn_handler handlers[] = {
    [false] = {sfd_ingest_handle, NULL, SFD_REJ_OVERSIZED},
    [true] = {sfd_query_handle, sfd_query_writable, SFD_REJ_QUERY_BAD},
};

static const struct conn_handler *handler_of(const struct sfd_conn *c)
{
    return &handlers[c->query];
}

/* ---- receive buffer ------------------------------------------------------ */

int sfd_ensure_rxbuf(struct sfd *d)
{
    size_t want = (size_t)d->cfg.frame_max_bytes + 1;
    if (d->rxcap == want)
        return 0;
    uint8_t *b = realloc(d->rxbuf, want);
    if (b == NULL)
        return -ENOMEM;
    /* the daemon's own buffer: in the total, in no uid's share */
    sfd_budget_uncharge(&d->mem, SFD_UID_DAEMON, SFD_MEM_BUFFERS, d->rxcap);
    sfd_budget_force(&d->mem, SFD_UID_DAEMON, SFD_MEM_BUFFERS, want);
    d->rxbuf = b;
    d->rxcap = want;
    return 0;
}

/* ---- connections -------------------------------------------------------- */

static void on_conn_closed(uv_handle_t *h)
{
    struct sfd_conn *c = h->data;
    close(c->fd);
    free(c->out);
    sfd_qstream_free(c->stream);
    free(c);
}

static void detach_job(struct sfd_conn *c)
{
    struct sfd_job *job = c->job;
    if (job == NULL)
        return;
    struct sfd *d = c->sfd;
    struct sfd_rank *rk;
    if (c->channel == 0 && sfd_job_rank(job, c->rank, &rk) == 0 && rk->live) {
        rk->live = 0;
        job->n_live_ranks--;
    }
    job->n_live--;
    job->last_active_ms = sfd_now_ms(d);
    if (job->n_live == 0) {
        job->orphan_deadline_ms = sfd_now_ms(d) + d->cfg.window_grace_ms;
        sfd_arm_tick(d);
    }
    c->job = NULL;
}

void sfd_conn_close(struct sfd_conn *c)
{
    if (c == NULL || c->closing)
        return;
    struct sfd *d = c->sfd;
    c->closing = true;
    detach_job(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    d->n_conns--;
    d->n_query_conns -= c->query;
    sfd_admit_release(d, c);
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, on_conn_closed);
}

void sfd_conns_close_all(struct sfd *d)
{
    while (d->conns != NULL)
        sfd_conn_close(d->conns);
}

static void on_conn_io(uv_poll_t *h, int status, int events)
{
    struct sfd_conn *c = h->data;
    struct sfd *d = c->sfd;

    if (status < 0) {
        sfd_conn_close(c);
        return;
    }
    if ((events & UV_WRITABLE) && handler_of(c)->writable != NULL) {
        handler_of(c)->writable(c);
        if (c->closing)
            return;
    }
    if (!(events & UV_READABLE))
        return;
    for (int i = 0; i < READS_PER_EVENT && !c->closing; i++) {
        struct iovec iov = {d->rxbuf, d->rxcap};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n = recvmsg(c->fd, &mh, MSG_TRUNC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            sfd_conn_close(c);
            return;
        }
        if (n == 0) {
            sfd_conn_close(c);
            return;
        }
        if ((size_t)n >= d->rxcap) { /* rxcap is one past the frame cap */
            sfd_count_reject(d, c->job, handler_of(c)->oversized, 1, c);
            sfd_conn_close(c);
            return;
        }
        int r = handler_of(c)->datagram(c, d->rxbuf, (size_t)n);
        if (r < 0) {
            sfd_conn_close(c);
            return;
        }
    }
}

static int conn_add(struct sfd *d, int fd, bool query, const struct ucred *cred, bool privileged)
{
    struct sfd_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    c->sfd = d;
    c->fd = fd;
    c->query = query;
    c->uid = cred->uid;
    c->gid = cred->gid;
    c->pid = cred->pid;
    c->privileged = privileged;
    c->accepted_ms = c->last_io_ms = sfd_now_ms(d);
    int r = uv_poll_init(d->loop, &c->poll, fd);
    if (r < 0) {
        free(c);
        return r;
    }
    c->poll.data = c;
    c->next = d->conns;
    if (d->conns)
        d->conns->prev = c;
    d->conns = c;
    d->n_conns++;
    d->n_query_conns += query;
    d->ctr.connections_accepted++;
    sfd_admit_charge(d, c);
    uv_poll_start(&c->poll, UV_READABLE, on_conn_io);
    return 0;
}

/* ---- listeners ------------------------------------------------------------ */

static void on_accept(uv_poll_t *h, int status, int events)
{
    struct sfd_listener *l = h->data;
    struct sfd *d = l->poll.loop->data;
    (void)events;
    if (status < 0)
        return;
    bool query = l == &d->query;
    for (int i = 0; i < READS_PER_EVENT; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                sfd_count_reject(d, NULL, SFD_REJ_MAX_CONNECTIONS, 1, NULL);
            return; /* EAGAIN, or out of descriptors: the backlog waits */
        }
        /* The accepted socket names its peer, so a refusal names it too. */
        struct ucred cred;
        socklen_t len = sizeof(cred);
        bool privileged;
        enum sfd_reject why;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            sfd_count_reject(d, NULL, SFD_REJ_PROTOCOL, 1, NULL);
            close(fd);
            continue;
        }
        if (sfd_admit(d, query, fd, cred.uid, cred.gid, &privileged, &why) < 0) {
            sfd_count_reject_from(d, NULL, why, 1, cred.pid, cred.uid);
            close(fd);
            continue;
        }
        int r = conn_add(d, fd, query, &cred, privileged);
        if (r < 0) {
            sfd_log(SFD_LOG_WARNING, NULL, "cannot add connection: %s", strerror(-r));
            close(fd);
        }
    }
}

/* Whether a daemon accepts on the socket at sa. A full backlog (EAGAIN) is a
 * live daemon too; only a refused connection marks the socket stale. */
static bool socket_is_live(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 || errno == EAGAIN;
    close(fd);
    return live;
}

static int bind_socket(const char *path, mode_t mode)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    struct stat st;
    /* A stale socket from a dead daemon: remove it, but never another file,
     * and never the socket of a daemon that still answers on it. */
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        if (socket_is_live(&sa))
            return -EADDRINUSE;
        unlink(path);
    }
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    mode_t old = umask(0077);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (r < 0 || chmod(path, mode) < 0 || listen(fd, 4096) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

int sfd_listener_open(struct sfd *d, struct sfd_listener *l, const char *path, mode_t mode,
                      int inherited_fd, bool query)
{
    int fd = inherited_fd;
    (void)query;
    if (fd < 0) {
        fd = bind_socket(path, mode);
        if (fd < 0)
            return fd;
        l->created = true;
    } else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
            return -errno;
        l->created = false;
    }
    snprintf(l->path, sizeof(l->path), "%s", path);
    if (!l->created) {
        /* name the socket systemd passed, for the logs */
        struct sockaddr_un sa;
        socklen_t len = sizeof(sa);
        if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sun_family == AF_UNIX &&
            len > offsetof(struct sockaddr_un, sun_path) && sa.sun_path[0] != '\0')
            snprintf(l->path, sizeof(l->path), "%.*s",
                     (int)(len - offsetof(struct sockaddr_un, sun_path)), sa.sun_path);
    }
    int r = uv_poll_init(d->loop, &l->poll, fd);
    if (r < 0) {
        if (l->created) {
            unlink(path);
            close(fd);
        }
        return r;
    }
    l->fd = fd;
    l->poll.data = l;
    l->active = true;
    uv_poll_start(&l->poll, UV_READABLE, on_accept);
    return 0;
}

static void on_listener_closed(uv_handle_t *h)
{
    struct sfd_listener *l = h->data;
    close(l->fd);
}

void sfd_listener_close(struct sfd_listener *l)
{
    if (!l->active)
        return;
    l->active = false;
    /* unlink before close, or we may unlink a socket a new daemon just made */
    if (l->created)
        unlink(l->path);
    uv_poll_stop(&l->poll);
    uv_close((uv_handle_t *)&l->poll, on_listener_closed);
}

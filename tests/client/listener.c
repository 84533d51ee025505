/* Test-owned SOCK_SEQPACKET listener; see listener.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "listener.h"

int tl_listen(struct tl *l)
{
    l->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (l->lfd < 0)
        return -errno;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", l->path);
    if (bind(l->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l->lfd, 16) < 0) {
        int r = -errno;
        close(l->lfd);
        l->lfd = -1;
        return r;
    }
    return 0;
}

int tl_start(struct tl *l)
{
    memset(l, 0, sizeof *l);
    l->lfd = l->cfd = -1;
    snprintf(l->dir, sizeof l->dir, "/tmp/sfclient-test-XXXXXX");
    if (mkdtemp(l->dir) == NULL)
        return -errno;
    snprintf(l->path, sizeof l->path, "%s/ingest.sock", l->dir);
    return tl_listen(l);
}

static int wait_readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -errno;
}

int tl_accept(struct tl *l, int timeout_ms)
{
    int r = wait_readable(l->lfd, timeout_ms);
    if (r < 0)
        return r;
    tl_close_conn(l);
    l->cfd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
    return l->cfd < 0 ? -errno : 0;
}

Stagefrontier__ClientMessage *tl_recv(struct tl *l, int timeout_ms)
{
    static uint8_t buf[128 * 1024];
    if (l->cfd < 0 || wait_readable(l->cfd, timeout_ms) < 0)
        return NULL;
    ssize_t n = recv(l->cfd, buf, sizeof buf, 0);
    if (n <= 0)
        return NULL;
    return stagefrontier__client_message__unpack(NULL, (size_t)n, buf);
}

void tl_close_conn(struct tl *l)
{
    if (l->cfd >= 0)
        close(l->cfd);
    l->cfd = -1;
}

void tl_close_listener(struct tl *l)
{
    if (l->lfd >= 0) {
        close(l->lfd);
        unlink(l->path);
    }
    l->lfd = -1;
}

void tl_stop(struct tl *l)
{
    tl_close_conn(l);
    tl_close_listener(l);
    unlink(l->path);
    rmdir(l->dir);
}

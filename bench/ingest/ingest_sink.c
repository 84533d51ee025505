/*
 * The ingest benchmark's physical anchor: a read-and-discard SOCK_SEQPACKET
 * sink on one thread, as sfd's loop is, with the same frame buffer. It
 * accepts every connection and reads every datagram into one buffer, then
 * drops it: what reading alone costs, before any decoding or accounting.
 * With --decode it also unpacks each datagram as an ingest message and frees
 * it (protobuf-c's own allocator): what reading and decoding cost, the floor
 * of any daemon that looks inside its input.
 * usage: ingest_sink [--decode] SOCKET
 *        (SIGTERM: prints datagrams=N bytes=N undecodable=N, exits)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ingest.pb-c.h"

#define FRAME_MAX (1u << 20)
#define READS_PER_EVENT 64

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static int listen_on(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -1;
    strcpy(sa.sun_path, path);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4096) < 0)
        return -1;
    return fd;
}

/* Unpacks and frees one message; false when it does not decode. */
static bool decodes(const uint8_t *buf, size_t len)
{
    Stagefrontier__ClientMessage *m = stagefrontier__client_message__unpack(NULL, len, buf);
    if (m == NULL)
        return false;
    stagefrontier__client_message__free_unpacked(m, NULL);
    return true;
}

int main(int argc, char **argv)
{
    bool decode = argc == 3 && strcmp(argv[1], "--decode") == 0;
    if (argc != 2 + decode) {
        fprintf(stderr, "usage: ingest_sink [--decode] SOCKET\n");
        return 2;
    }
    const char *path = argv[argc - 1];
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int lfd = listen_on(path);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    uint8_t *buf = malloc(FRAME_MAX + 1);
    if (lfd < 0 || ep < 0 || buf == NULL) {
        perror("ingest_sink");
        return 1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    uint64_t datagrams = 0, bytes = 0, undecodable = 0;
    while (!stop) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, 100);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            for (int r = 0; r < READS_PER_EVENT; r++) {
                ssize_t got = recv(fd, buf, FRAME_MAX + 1, MSG_DONTWAIT);
                if (got > 0) {
                    datagrams++;
                    bytes += (uint64_t)got;
                    undecodable += decode && !decodes(buf, (size_t)got);
                    continue;
                }
                if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                    close(fd);
                }
                break;
            }
        }
    }
    printf("datagrams=%llu bytes=%llu undecodable=%llu\n", (unsigned long long)datagrams,
           (unsigned long long)bytes, (unsigned long long)undecodable);
    unlink(path);
    free(buf);
    close(ep);
    close(lfd);
    return 0;
}

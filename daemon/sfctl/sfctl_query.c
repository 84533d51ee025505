/*
 * sfctl's client of the sfd query socket: one request datagram, then
 * QueryResponse chunks until `more` is false. Maps daemon and socket errors
 * to sfctl exit codes with a clear message; prints nothing on success.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "query.pb-c.h"
#include "sfctl.h"
#include "sfctl_live.h"
#include "text_escape.h"

#define ANSWER_MAX (512u << 20) /* refuse answers past this size */
#define TIMEOUT_MS 30000

static const char *socket_override;

void sfctl_set_socket_path(const char *path)
{
    socket_override = path;
}

const char *sfctl_socket_path(void)
{
    if (socket_override != NULL)
        return socket_override;
    const char *e = getenv("SF_QUERY_SOCKET");
    return e != NULL && e[0] != '\0' ? e : SF_DEFAULT_QUERY_SOCKET;
}

static int connect_daemon(const char *path, int *ret_fd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "sfctl: socket path too long: %s\n", path);
        return SFCTL_EXIT_USAGE;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "sfctl: socket: %s\n", strerror(errno));
        return SFCTL_EXIT_INTERNAL;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        if (e == EACCES || e == EPERM) {
            fprintf(stderr,
                    "sfctl: permission denied on %s (operators need the daemon's "
                    "operators group)\n",
                    path);
            return SFCTL_EXIT_DENIED;
        }
        fprintf(stderr, "sfctl: sfd is not running (cannot connect to %s: %s)\n", path,
                strerror(e));
        return SFCTL_EXIT_NO_DAEMON;
    }
    *ret_fd = fd;
    return SFCTL_EXIT_OK;
}

static int send_request(int fd, const struct sfctl_request *req)
{
    Stagefrontier__QueryRequest q = STAGEFRONTIER__QUERY_REQUEST__INIT;
    uint8_t buf[1024];
    q.kind = (Stagefrontier__QueryRequest__Kind)req->kind;
    q.job_id = (char *)req->job_id;
    if (req->window >= 0) {
        q.has_window = true;
        q.window = req->window;
    }
    if (req->limit > 0) {
        q.has_limit = true;
        q.limit = req->limit;
    }
    if (req->format != 0) {
        q.has_format = true;
        q.format = req->format;
    }
    if (req->clear) {
        q.has_clear = true;
        q.clear = true;
    }
    q.n_ranks = req->n_ranks;
    q.ranks = (uint32_t *)req->ranks; /* packing never writes */
    if (req->suspects)
        q.has_suspects = q.suspects = true;
    if (req->steps > 0) {
        q.has_steps = true;
        q.steps = req->steps;
    }
    if (stagefrontier__query_request__get_packed_size(&q) > sizeof(buf))
        return -EMSGSIZE;
    size_t len = stagefrontier__query_request__pack(&q, buf);
    return send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

static int exit_for_status(int32_t status)
{
    switch (-status) {
    case ENOENT:
        return SFCTL_EXIT_NOT_FOUND;
    case EACCES:
    case EPERM:
        return SFCTL_EXIT_DENIED;
    case EINVAL:
        return SFCTL_EXIT_USAGE;
    default:
        return SFCTL_EXIT_INTERNAL;
    }
}

/* The daemon's refusal, naming the job the caller asked about; both are
 * escaped (text_escape.h) before they reach the terminal. */
static void print_refusal(const struct sfctl_request *req, const char *raw_msg)
{
    char msg[SF_TEXT_ESCAPED_SIZE(512)], job[SF_TEXT_ESCAPED_SIZE(256)];
    sf_text_escape(raw_msg, strnlen(raw_msg, 512), msg, sizeof msg);
    if (req->job_id != NULL && req->job_id[0] != '\0') {
        sf_text_escape(req->job_id, strnlen(req->job_id, 256), job, sizeof job);
        fprintf(stderr, "sfctl: job '%s': %s\n", job, msg);
    } else {
        fprintf(stderr, "sfctl: %s\n", msg);
    }
}

/* Reads one response datagram; appends its chunk. 1: more follow, 0: done. */
static int read_chunk(int fd, const struct sfctl_request *req, uint8_t *buf, size_t cap,
                      char **text, size_t *len, int *ret_exit)
{
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, TIMEOUT_MS);
    if (r <= 0) {
        fprintf(stderr, "sfctl: no answer from sfd within %d s\n", TIMEOUT_MS / 1000);
        *ret_exit = SFCTL_EXIT_NO_DAEMON;
        return -ETIMEDOUT;
    }
    ssize_t n = recv(fd, buf, cap, MSG_TRUNC);
    if (n <= 0 || (size_t)n > cap) {
        fprintf(stderr, "sfctl: sfd closed the connection or sent a malformed answer\n");
        *ret_exit = SFCTL_EXIT_NO_DAEMON;
        return -EPROTO;
    }
    Stagefrontier__QueryResponse *resp =
        stagefrontier__query_response__unpack(NULL, (size_t)n, buf);
    if (resp == NULL) {
        fprintf(stderr, "sfctl: undecodable answer from sfd\n");
        *ret_exit = SFCTL_EXIT_INTERNAL;
        return -EPROTO;
    }
    int ret = 0;
    if (resp->status < 0) {
        *ret_exit = exit_for_status(resp->status);
        if (!(req->quiet_not_found && *ret_exit == SFCTL_EXIT_NOT_FOUND))
            print_refusal(req, resp->error ? resp->error : strerror(-resp->status));
        ret = -EPROTO;
    } else if (resp->has_chunk) {
        if (*len + resp->chunk.len > ANSWER_MAX) {
            fprintf(stderr, "sfctl: answer too large\n");
            *ret_exit = SFCTL_EXIT_INTERNAL;
            ret = -EFBIG;
        } else {
            char *t = realloc(*text, *len + resp->chunk.len + 1);
            if (t == NULL) {
                *ret_exit = SFCTL_EXIT_INTERNAL;
                ret = -ENOMEM;
            } else {
                memcpy(t + *len, resp->chunk.data, resp->chunk.len);
                *len += resp->chunk.len;
                t[*len] = '\0';
                *text = t;
            }
        }
    }
    if (ret == 0)
        ret = resp->has_more && resp->more ? 1 : 0;
    stagefrontier__query_response__free_unpacked(resp, NULL);
    return ret;
}

int sfctl_query(const struct sfctl_request *req, char **ret_text, size_t *ret_len)
{
    int fd, ex;
    ex = connect_daemon(sfctl_socket_path(), &fd);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    if (send_request(fd, req) < 0) {
        fprintf(stderr, "sfctl: cannot send the request to sfd: %s\n", strerror(errno));
        close(fd);
        return SFCTL_EXIT_NO_DAEMON;
    }
    size_t cap = 64u * 1024;
    uint8_t *buf = malloc(cap);
    char *text = calloc(1, 1);
    size_t len = 0;
    int r = buf && text ? 1 : -ENOMEM;
    ex = r < 0 ? SFCTL_EXIT_INTERNAL : SFCTL_EXIT_OK;
    while (r == 1)
        r = read_chunk(fd, req, buf, cap, &text, &len, &ex);
    free(buf);
    close(fd);
    if (r < 0) {
        free(text);
        return ex;
    }
    *ret_text = text;
    *ret_len = len;
    return SFCTL_EXIT_OK;
}

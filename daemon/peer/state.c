/*
 * The peer layer's replay state across restarts: this node's boot counter
 * and the last epoch accepted from each member, in one small text file in
 * the state directory. It is replaced atomically (temp file, fsync, rename,
 * fsync of the directory), all inside the directory's descriptor held from
 * a walk from "/" (daemon/sfd/safe_path.c), so a crash leaves the old or the
 * new file, never a torn one, and no link steers it elsewhere. It must not decide policy: node.c
 * says when to save.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer.h"
#include "safe_path.h"

#define STATE_MAGIC "sfpeer-state 1"

void sfd_peer_state_clear(sfd_peer_state *st)
{
    if (st == NULL)
        return;
    free(st->peers);
    memset(st, 0, sizeof *st);
}

static int parse_lines(FILE *f, sfd_peer_state *st);

static int cmp_entry(const void *a, const void *b)
{
    uint32_t x = ((const sfd_peer_state_entry *)a)->id;
    uint32_t y = ((const sfd_peer_state_entry *)b)->id;
    return (x > y) - (x < y);
}

int sfd_peer_state_read(FILE *f, sfd_peer_state *ret)
{
    sfd_peer_state st = {0};
    int r = parse_lines(f, &st);
    if (r < 0) {
        sfd_peer_state_clear(&st);
        return r;
    }
    *ret = st;
    return 0;
}

static int parse_lines(FILE *f, sfd_peer_state *st)
{
    char line[128];
    if (fgets(line, sizeof line, f) == NULL || strcmp(line, STATE_MAGIC "\n") != 0)
        return -EBADMSG;
    while (fgets(line, sizeof line, f) != NULL) {
        uint64_t v;
        uint32_t id;
        char tail;
        if (sscanf(line, "boot %" SCNu64 "%c", &v, &tail) == 2 && tail == '\n') {
            st->boot_epoch = v;
            continue;
        }
        if (sscanf(line, "peer %" SCNu32 " %" SCNu64 "%c", &id, &v, &tail) != 3 || tail != '\n' ||
            id == 0 || id > SFD_PEER_ID_MAX || st->n >= SFD_PEER_MAX_MEMBERS)
            return -EBADMSG;
        sfd_peer_state_entry *p = realloc(st->peers, (st->n + 1) * sizeof *p);
        if (p == NULL)
            return -ENOMEM;
        st->peers = p;
        st->peers[st->n++] = (sfd_peer_state_entry){.id = id, .epoch = v};
    }
    if (st->boot_epoch == 0 || st->boot_epoch >= SFD_PEER_EPOCH_MAX)
        return -EBADMSG;
    if (st->n > 1)
        qsort(st->peers, st->n, sizeof *st->peers, cmp_entry);
    return 0;
}

int sfd_peer_state_load(const char *path, sfd_peer_state *ret)
{
    sfd_peer_state st = {0};
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        if (errno == ENOENT) {
            *ret = st;
            return 0;
        }
        return -errno;
    }
    int r = sfd_peer_state_read(f, ret);
    fclose(f);
    return r;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static char *format_state(const sfd_peer_state *st, size_t *ret_len)
{
    size_t cap = 64 + (size_t)st->n * 40;
    char *buf = malloc(cap);
    if (buf == NULL)
        return NULL;
    size_t len = (size_t)snprintf(buf, cap, STATE_MAGIC "\nboot %" PRIu64 "\n", st->boot_epoch);
    for (uint32_t i = 0; i < st->n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "peer %" PRIu32 " %" PRIu64 "\n",
                                st->peers[i].id, st->peers[i].epoch);
    *ret_len = len;
    return buf;
}

/* The directory and the name of path, split at its last '/'. */
static int split_path(const char *path, char *dir, size_t dirlen, const char **ret_name)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : (size_t)(slash - path);
    if (slash == NULL)
        snprintf(dir, dirlen, ".");
    else if (n == 0)
        snprintf(dir, dirlen, "/");
    else if (n >= dirlen)
        return -ENAMETOOLONG;
    else
        memcpy(dir, path, n), dir[n] = '\0';
    *ret_name = slash == NULL ? path : slash + 1;
    return **ret_name == '\0' ? -EINVAL : 0;
}

/* The temporary file, made fresh inside the held directory: O_EXCL |
 * O_NOFOLLOW, so a name someone else made (a link included) is never
 * written through. One left by a crash is removed first. */
static int create_tmp(int dirfd, const char *tmp)
{
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dirfd, tmp, flags, 0600);
    if (fd < 0 && errno == EEXIST && unlinkat(dirfd, tmp, 0) == 0)
        fd = openat(dirfd, tmp, flags, 0600);
    return fd < 0 ? -errno : fd;
}

/* The directory is walked from "/" on every save (safe_path.h): a link or a
 * directory another user could swap anywhere on the way is refused. */
int sfd_peer_state_save(const char *path, const sfd_peer_state *st)
{
    char dir[4096], tmp[NAME_MAX + 1], why[4200];
    const char *name;
    int r = split_path(path, dir, sizeof dir, &name);
    if (r < 0)
        return r;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", name) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int dirfd = sf_safe_dir_open(dir, 0, 0, why, sizeof why);
    if (dirfd < 0)
        return dirfd;
    size_t len = 0;
    char *text = format_state(st, &len);
    if (text == NULL) {
        close(dirfd);
        return -ENOMEM;
    }
    int fd = create_tmp(dirfd, tmp);
    if (fd < 0) {
        r = fd;
        goto out;
    }
    r = write_all(fd, text, len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        r = -errno;
    if (r == 0 && fsync(dirfd) < 0)
        r = -errno;
    else if (r < 0)
        unlinkat(dirfd, tmp, 0);
out:
    free(text);
    close(dirfd);
    return r;
}

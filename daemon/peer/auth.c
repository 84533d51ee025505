/*
 * The cluster key: loading it from its file with a strict mode check. The
 * HMAC itself is applied in envelope.c. This file must not log; callers do.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer.h"

int sfd_peer_key_load(const char *path, sfd_peer_key *ret)
{
    if (path == NULL || path[0] == '\0' || ret == NULL)
        return -EINVAL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    sfd_peer_key key;
    int r = 0;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        goto out;
    }
    /* A key others can read is a key others can forge with. */
    if (!S_ISREG(st.st_mode)) {
        r = -EINVAL;
        goto out;
    }
    if ((st.st_mode & 07777) != 0600 && (st.st_mode & 07777) != 0400) {
        r = -EPERM;
        goto out;
    }
    if (st.st_size != SFD_PEER_KEY_LEN) {
        r = -EINVAL;
        goto out;
    }
    size_t have = 0;
    while (have < sizeof key.k) {
        ssize_t n = read(fd, key.k + have, sizeof key.k - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = n < 0 ? -errno : -EINVAL;
            goto out;
        }
        have += (size_t)n;
    }
    *ret = key;
out:
    sodium_memzero(&key, sizeof key);
    close(fd);
    return r;
}

/*
 * Peer keys: loading the cluster key (or a credential systemd passes) with a
 * strict mode check, and deriving the per-link keys of per-member X25519
 * keys. The HMAC itself is applied in envelope.c. This file must not log;
 * callers do.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int sfd_peer_key_path(const char *name, char *ret_path, size_t size)
{
    if (name == NULL || name[0] == '\0')
        return -EINVAL;
    int n;
    if (strchr(name, '/') != NULL) {
        n = snprintf(ret_path, size, "%s", name);
    } else {
        /* systemd's LoadCredential= puts the key, readable by the service
         * user only, in a private directory it names here. */
        const char *dir = getenv("CREDENTIALS_DIRECTORY");
        if (dir == NULL || dir[0] == '\0')
            return -ENOENT;
        n = snprintf(ret_path, size, "%s/%s", dir, name);
    }
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* A member's public key: 32 bytes that no one but its owner may replace. */
static int load_public(const char *dir, uint32_t id, uint8_t pk[crypto_kx_PUBLICKEYBYTES])
{
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%" PRIu32 ".pub", dir, id) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = -errno;
    else if (!S_ISREG(st.st_mode) || st.st_size != crypto_kx_PUBLICKEYBYTES)
        r = -EINVAL;
    else if ((st.st_mode & 022) != 0)
        r = -EPERM;
    else if (read(fd, pk, crypto_kx_PUBLICKEYBYTES) != crypto_kx_PUBLICKEYBYTES)
        r = -EIO;
    close(fd);
    return r;
}

int sfd_peer_pair_keys(const char *secret_file, const char *pub_dir, uint32_t self, uint32_t peer,
                       sfd_peer_key *ret_tx, sfd_peer_key *ret_rx)
{
    if (secret_file == NULL || pub_dir == NULL || self == peer || ret_tx == NULL ||
        ret_rx == NULL || sodium_init() < 0)
        return -EINVAL;
    sfd_peer_key sk;
    uint8_t pk[crypto_kx_PUBLICKEYBYTES], peer_pk[crypto_kx_PUBLICKEYBYTES];
    uint8_t rx[crypto_kx_SESSIONKEYBYTES], tx[crypto_kx_SESSIONKEYBYTES];
    int r = sfd_peer_key_load(secret_file, &sk);
    if (r < 0)
        return r;
    if ((r = load_public(pub_dir, peer, peer_pk)) < 0)
        goto out;
    crypto_scalarmult_base(pk, sk.k);
    /* The lower id takes the client role, so both ends derive the same pair:
     * one's tx is the other's rx. A member holds only its own links' keys,
     * so it cannot seal a message as any other member. */
    r = self < peer ? crypto_kx_client_session_keys(rx, tx, pk, sk.k, peer_pk)
                    : crypto_kx_server_session_keys(rx, tx, pk, sk.k, peer_pk);
    if (r != 0) {
        r = -EINVAL; /* a degenerate public key */
        goto out;
    }
    memcpy(ret_tx->k, tx, sizeof ret_tx->k);
    memcpy(ret_rx->k, rx, sizeof ret_rx->k);
out:
    sodium_memzero(&sk, sizeof sk);
    sodium_memzero(rx, sizeof rx);
    sodium_memzero(tx, sizeof tx);
    return r;
}

/*
 * Peer link framing: a u32 big-endian length, then the body. Owns the
 * incremental reassembly of frames from a TCP byte stream and the cap on
 * their size (a connection's cap may change once it is authenticated). It
 * must not look inside a frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

/* The first allocation of a body; it grows with the bytes that arrive, so a
 * peer that announces a large frame and stalls holds what it sent, not what
 * it announced. */
#define BODY_FIRST_ALLOC 4096u

void sfd_peer_framer_init(sfd_peer_framer *f, uint32_t max)
{
    memset(f, 0, sizeof *f);
    f->max = max;
}

void sfd_peer_framer_clear(sfd_peer_framer *f)
{
    if (f == NULL)
        return;
    free(f->body);
    sfd_peer_framer_init(f, f->max);
}

/* Completes the header; the length is checked before any allocation. */
static int take_header(sfd_peer_framer *f, const uint8_t **data, size_t *len)
{
    while (f->hdr_have < 4 && *len > 0) {
        f->hdr[f->hdr_have++] = **data;
        (*data)++;
        (*len)--;
    }
    if (f->hdr_have < 4)
        return 0;
    uint32_t n = (uint32_t)f->hdr[0] << 24 | (uint32_t)f->hdr[1] << 16 | (uint32_t)f->hdr[2] << 8 |
                 f->hdr[3];
    if (n == 0 || n > f->max || n > SFD_PEER_FRAME_MAX)
        return -EMSGSIZE;
    uint32_t cap = n < BODY_FIRST_ALLOC ? n : BODY_FIRST_ALLOC;
    f->body = malloc(cap);
    if (f->body == NULL)
        return -ENOMEM;
    f->cap = cap;
    f->need = n;
    f->have = 0;
    return 1;
}

/* Makes room for `more` bytes beyond what the body holds, doubling. */
static int reserve(sfd_peer_framer *f, size_t more)
{
    size_t want = f->have + more;
    if (want <= f->cap)
        return 0;
    size_t cap = f->cap;
    while (cap < want)
        cap *= 2;
    if (cap > f->need)
        cap = f->need;
    uint8_t *b = realloc(f->body, cap);
    if (b == NULL)
        return -ENOMEM;
    f->body = b;
    f->cap = (uint32_t)cap;
    return 0;
}

int sfd_peer_framer_feed(sfd_peer_framer *f, const uint8_t *data, size_t len, sfd_peer_frame_cb cb,
                         void *ctx)
{
    while (len > 0) {
        if (f->body == NULL) {
            int r = take_header(f, &data, &len);
            if (r <= 0)
                return r;
        }
        size_t take = f->need - f->have;
        if (take > len)
            take = len;
        if (reserve(f, take) < 0)
            return -ENOMEM;
        memcpy(f->body + f->have, data, take);
        f->have += (uint32_t)take;
        data += take;
        len -= take;
        if (f->have < f->need)
            break;
        uint8_t *body = f->body;
        uint32_t n = f->need;
        f->body = NULL;
        f->hdr_have = 0;
        f->need = f->have = f->cap = 0;
        int r = cb(ctx, body, n);
        if (r != 1)
            free(body);
        if (r < 0)
            return r;
    }
    return 0;
}

size_t sfd_peer_framer_held(const sfd_peer_framer *f)
{
    return f->body != NULL ? f->cap : 0;
}

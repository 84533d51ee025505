/*
 * Peer link framing: a u32 big-endian length, then the body. Owns the
 * incremental reassembly of frames from a TCP byte stream and the hard cap
 * on their size. It must not look inside a frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

void sfd_peer_framer_init(sfd_peer_framer *f)
{
    memset(f, 0, sizeof *f);
}

void sfd_peer_framer_clear(sfd_peer_framer *f)
{
    if (f == NULL)
        return;
    free(f->body);
    sfd_peer_framer_init(f);
}

/* Completes the header; the length is checked before any allocation so a
 * hostile peer cannot make us reserve more than the cap. */
static int take_header(sfd_peer_framer *f, const uint8_t **data, size_t *len)
{
    while (f->hdr_have < 4 && *len > 0) {
        f->hdr[f->hdr_have++] = **data;
        (*data)++;
        (*len)--;
    }
    if (f->hdr_have < 4)
        return 0;
    uint32_t n = (uint32_t)f->hdr[0] << 24 | (uint32_t)f->hdr[1] << 16 |
                 (uint32_t)f->hdr[2] << 8 | f->hdr[3];
    if (n == 0 || n > SFD_PEER_FRAME_MAX)
        return -EMSGSIZE;
    f->body = malloc(n);
    if (f->body == NULL)
        return -ENOMEM;
    f->need = n;
    f->have = 0;
    return 1;
}

int sfd_peer_framer_feed(sfd_peer_framer *f, const uint8_t *data, size_t len,
                         sfd_peer_frame_cb cb, void *ctx)
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
        f->need = f->have = 0;
        int r = cb(ctx, body, n);
        if (r != 1)
            free(body);
        if (r < 0)
            return r;
    }
    return 0;
}

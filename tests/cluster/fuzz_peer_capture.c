/*
 * Fuzz target: the capture messages between nodes. The bytes are decoded as
 * a request and as an outcome; whatever the decoder lets through must pack
 * again and decode to the same value, so nothing out of bounds can pass a
 * node on its way to another.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void request(const uint8_t *data, size_t size)
{
    sfd_peer_capture_request q, again;
    if (sfd_peer_capture_request_unpack(data, size, &q) < 0)
        return;
    uint8_t *buf;
    size_t len;
    if (sfd_peer_capture_request_pack(&q, &buf, &len) < 0 ||
        sfd_peer_capture_request_unpack(buf, len, &again) < 0 || again.id != q.id ||
        again.n_ranks != q.n_ranks || strcmp(again.reason, q.reason) != 0)
        abort();
    free(buf);
}

static void result(const uint8_t *data, size_t size)
{
    sfd_peer_capture_result r, again;
    if (sfd_peer_capture_result_unpack(data, size, &r) < 0)
        return;
    uint8_t *buf;
    size_t len;
    if (sfd_peer_capture_result_pack(&r, &buf, &len) < 0 ||
        sfd_peer_capture_result_unpack(buf, len, &again) < 0 || again.id != r.id ||
        again.state != r.state || strcmp(again.text, r.text) != 0)
        abort();
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    request(data, size);
    result(data, size);
    return 0;
}

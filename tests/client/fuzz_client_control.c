/*
 * Fuzz target: the client's decoder of sfd's control messages (capture
 * requests), exactly what a datagram read at flush time goes through, with
 * the fixed decoding arena the client allocates at open.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "client_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t arena_buf[SF__CONTROL_ARENA];
    struct sf__arena arena = {.base = arena_buf, .cap = sizeof arena_buf};
    sf_capture_request q;
    if (sf__control_decode(data, size, &arena, &q) == 0 &&
        (q.id == 0 || q.steps == 0 || q.steps > SF_CAPTURE_MAX_STEPS))
        abort(); /* a request out of its bounds got through */
    return 0;
}

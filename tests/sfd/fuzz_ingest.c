/*
 * Fuzz target: sfd's ingest decoder and field validator, exactly the path a
 * datagram takes before it touches any daemon state.
 */
#include <stddef.h>
#include <stdint.h>

#include "ingest.pb-c.h"
#include "sfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sfd_limits lim = { .max_ranks = SF_MAX_RANKS, .frame_max_bytes = 1u << 20 };
    Stagefrontier__ClientMessage *m;
    enum sfd_reject why;
    sf_schema schema;

    if (sfd_message_decode(data, size, &lim, &m, &why) < 0)
        return 0;
    switch (m->body_case) {
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO:
        if (sfd_validate_hello(m->hello, &lim, &schema, &why) == 0)
            sf_schema_clear(&schema);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH:
        sfd_validate_batch(m->batch, 6, &why);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL:
        sfd_validate_nccl(m->nccl, &why);
        break;
    default:
        break;
    }
    sfd_message_free(m);
    return 0;
}

/*
 * Fuzz target: sfd's ingest decoder and field validator, exactly the path a
 * datagram takes before it touches any daemon state, and the shedding peek
 * (shed.c) on every input, checked against the decoder where both read it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "capture.h"
#include "ingest.pb-c.h"
#include "sfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The six default stages with backward synchronizing. */
static int sync_schema(sf_schema *ret)
{
    return sf_schema_init_sync(ret, 1, 6, sf_default_stage_names, NULL, 1, UINT64_C(1) << 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sfd_limits lim = {.max_ranks = SF_MAX_RANKS, .frame_max_bytes = 1u << 20};
    Stagefrontier__ClientMessage *m;
    enum sfd_reject why;
    sf_schema schema;
    struct sfd_batch_peek pk;

    /* Decoded in the daemon's arena, reused from one input to the next,
     * so the sanitizers see a stale or overrun field as sfd would make it. */
    static struct sfd_arena arena;
    if (arena.pb.alloc == NULL)
        sfd_arena_init(&arena);
    if (sfd_message_decode(data, size, &lim, &arena.pb, &m, &why) < 0) {
        sfd_arena_reset(&arena);
        return 0;
    }
    switch (m->body_case) {
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO:
        if (sfd_validate_hello(m->hello, &lim, &schema, &why) == 0)
            sf_schema_clear(&schema);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH:
        /* The shedding peek never disagrees with the decoder it skips. */
        if (sfd_batch_peek(data, size, &pk) == 0) {
            if (pk.n_records != m->batch->n_records)
                abort();
            for (size_t i = 0; i < m->batch->n_records; i++)
                if (m->batch->records[i]->step < pk.first_step ||
                    m->batch->records[i]->step > pk.last_step)
                    abort();
            const Stagefrontier__RecordBatch *b = m->batch;
            if (pk.drops.has_total != (b->has_dropped_total != 0) ||
                (b->has_dropped_total && pk.drops.total != b->dropped_total) ||
                pk.drops.has_first != (b->has_dropped_first_step != 0) ||
                (b->has_dropped_first_step && pk.drops.first_step != b->dropped_first_step) ||
                pk.drops.has_last != (b->has_dropped_last_step != 0) ||
                (b->has_dropped_last_step && pk.drops.last_step != b->dropped_last_step))
                abort();
        }
        if (sfd_validate_batch(m->batch, 6, &why) == 0 && sync_schema(&schema) == 0) {
            int64_t d[SF_MAX_STAGES];
            uint32_t flags = 0;
            int64_t marks[2 * SF_MAX_STAGES];
            for (size_t i = 0; i < m->batch->n_records; i++) {
                sfd_record_split(m->batch->records[i], &schema, NULL, d, &flags, NULL, &why);
                sfd_record_issue_lags(m->batch->records[i], &schema, marks, &why);
                sfd_record_sync_waits(m->batch->records[i], &schema, marks, &why);
            }
            sf_schema_clear(&schema);
        }
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL:
        sfd_validate_nccl(m->nccl, &why);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_CAPTURE_REPLY:
        sfd_validate_capture_reply(m->capture_reply);
        break;
    case STAGEFRONTIER__CLIENT_MESSAGE__BODY_HEARTBEAT:
        sfd_validate_heartbeat(m->heartbeat, 6);
        break;
    default:
        break;
    }
    sfd_message_free(m, &arena.pb);
    sfd_arena_reset(&arena);
    return 0;
}

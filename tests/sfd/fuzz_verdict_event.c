/*
 * Fuzz target: the live verdict event decoder (daemon/sfd/verdict.c), as it
 * reads the event records of a corrupt or foreign history.sqlite. A body
 * that decodes must name stages of the schema and a rank in range.
 */
#include <stdint.h>
#include <stdlib.h>

#include "sfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                           "model.backward_cpu_wall", "step.other_cpu_wall"};
    sf_schema schema;
    if (sf_schema_init_sync(&schema, 1, 4, recorded, NULL, 1, 1u << 2) < 0)
        abort();
    struct sfd_verdict_event e;
    if (sfd_verdict_event_decode(&schema, data, size, &e) == 0 &&
        ((e.v.stage >= schema.n_stages && e.v.stage != UINT32_MAX) ||
         (e.v.sync_stage >= schema.n_stages && e.v.sync_stage != UINT32_MAX) || e.seq == 0 ||
         (e.v.rank != SF_NO_RANK && e.v.rank >= SF_MAX_RANKS)))
        abort(); /* what the decoder accepts, sfd may index with */
    sf_schema_clear(&schema);
    return 0;
}

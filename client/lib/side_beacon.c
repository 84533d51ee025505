/*
 * The side-evidence beacon's storage and its writers: libsfclient publishes
 * the open step, the ordered stage and its start time with plain atomic
 * stores, for the NCCL profiler plugin to read. Nothing here allocates or blocks.
 */
#include <string.h>

#include "side_beacon.h"
#include "stagefrontier/client.h"

/* Exported by name (client.h) so that the NCCL plugin can find it with dlsym
 * on libsfclient's own handle. */
SF_CLIENT_API struct sf_side_beacon sf_side_beacon = {
    .magic = SF_SIDE_BEACON_MAGIC,
    .version = SF_SIDE_BEACON_VERSION,
    .step = -1,
    .stage = -1,
    .n_names = 0,
    .stage_start_ns = 0,
};

void sf__side_publish_schema(uint32_t n, const char *const *names, uint64_t sync_mask)
{
    static atomic_flag claimed = ATOMIC_FLAG_INIT;

    if (!names || n == 0 || n > SF_MAX_STAGES || atomic_flag_test_and_set(&claimed))
        return;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = names[i] ? strnlen(names[i], SF_SIDE_NAME_LEN) : 0;
        memcpy(sf_side_beacon.names[i], names[i] ? names[i] : "", len);
        sf_side_beacon.names[i][len] = '\0';
    }
    sf_side_beacon.sync_mask = sync_mask;
    atomic_store_explicit(&sf_side_beacon.n_names, n, memory_order_release);
}

void sf__side_publish_step(int64_t step)
{
    atomic_store_explicit(&sf_side_beacon.step, step, memory_order_relaxed);
}

void sf__side_publish_stage(int32_t stage_id, int64_t start_ns)
{
    if (stage_id >= 0)
        atomic_store_explicit(&sf_side_beacon.stage_start_ns, start_ns, memory_order_relaxed);
    /* Release: a plain store on x86 and a single stlr on arm64. */
    atomic_store_explicit(&sf_side_beacon.stage, stage_id, memory_order_release);
}

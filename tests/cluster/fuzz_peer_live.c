/*
 * Fuzz target: the live verdict's rows between nodes (LiveRows). Whatever
 * the decoder lets through must pack again and decode to the same values,
 * and go into a root's assembly (live_assembly.c) without a fault: its ranks
 * inside the world, its rows of the shape it names.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "live_assembly.h"
#include "peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A world this large would cost the fuzzer memory, not coverage. */
#define ASSEMBLY_WORLD_MAX 4096u

static void assemble(const sfd_peer_live_rows *b)
{
    if (b->world_size > ASSEMBLY_WORLD_MAX)
        return;
    sfd_live_assembly *a;
    if (sfd_live_assembly_new(b->world_size, b->n_stages, 4, &a) < 0)
        abort();
    size_t per_step = (size_t)b->n_ranks * b->n_stages;
    for (uint32_t s = 0; s < b->n_steps; s++) {
        const int64_t *rows;
        int r =
            sfd_live_assembly_add(a, b->steps[s], b->ranks, b->n_ranks, b->d + s * per_step, &rows);
        if (r == 1 && (rows[0] < 0 || rows[0] > SF_MAX_DURATION_NS))
            abort();
    }
    sfd_live_assembly_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sfd_peer_live_rows b, again;
    if (sfd_peer_live_rows_unpack(data, size, &b) < 0)
        return 0;
    uint8_t *buf;
    size_t len;
    size_t n = (size_t)b.n_steps * b.n_ranks * b.n_stages;
    if (sfd_peer_live_rows_pack(&b, &buf, &len) < 0 ||
        sfd_peer_live_rows_unpack(buf, len, &again) < 0 || strcmp(again.job, b.job) != 0 ||
        again.n_steps != b.n_steps || again.n_ranks != b.n_ranks ||
        memcmp(again.d, b.d, n * sizeof *b.d) != 0)
        abort();
    free(buf);
    assemble(&b);
    sfd_peer_live_rows_free(&again);
    sfd_peer_live_rows_free(&b);
    return 0;
}

/*
 * Fuzz target: the parser of the peer layer's replay state file
 * (daemon/peer/state.c). A file damaged on disk, or written by someone else,
 * must be refused or read within its bounds, never crash or leak.
 */
#include <stdint.h>
#include <stdio.h>

#include "peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    FILE *f = fmemopen((void *)data, size, "r");
    if (f == NULL)
        return 0;
    sfd_peer_state st;
    if (sfd_peer_state_read(f, &st) == 0) {
        for (uint32_t i = 1; i < st.n; i++)
            if (st.peers[i].id < st.peers[i - 1].id)
                __builtin_trap(); /* the reader promises sorted entries */
        sfd_peer_state_clear(&st);
    }
    fclose(f);
    return 0;
}

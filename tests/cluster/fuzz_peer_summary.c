/*
 * Fuzz target: the summary codec's decoder, and when a summary decodes,
 * a merge with itself and a report over it, so any value the decoder lets
 * through is one the accounting core can take.
 */
#include <stdint.h>
#include <stdlib.h>

#include "peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_summary *s = NULL;
    if (sfd_peer_summary_unpack(data, size, &s, NULL, NULL) < 0)
        return 0;
    sf_summary *c = NULL;
    if (sf_summary_clone(s, &c) == 0) {
        sf_summary_merge(c, s);
        sf_summary_free(c);
    }
    sf_gates g;
    sf_gates_default(&g);
    sf_report *r = NULL;
    if (sf_report_compute(s, &g, &r) == 0)
        sf_report_free(r);
    sf_summary_free(s);
    return 0;
}

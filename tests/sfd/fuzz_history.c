/*
 * Fuzz target: the report codec of sfd's history store, as it reads rows of
 * a corrupt or foreign history.sqlite. A body that decodes must render in
 * both formats, and its encoding must decode again to the same encoding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history_codec.h"
#include "report_json.h"
#include "report_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_report *r = NULL;
    if (sfd_report_unpack(data, size, &r) < 0)
        return 0;
    json_t *o = NULL;
    if (sf_report_to_json(r, &o) == 0)
        json_decref(o);
    FILE *f = fopen("/dev/null", "w");
    if (f != NULL) {
        sf_report_write_text(r, f);
        fclose(f);
    }
    uint8_t *once = NULL, *twice = NULL;
    size_t n1 = 0, n2 = 0;
    sf_report *back = NULL;
    if (sfd_report_pack(r, &once, &n1) == 0) {
        if (sfd_report_unpack(once, n1, &back) < 0 || sfd_report_pack(back, &twice, &n2) < 0 ||
            n1 != n2 || memcmp(once, twice, n1) != 0)
            abort(); /* what sfd writes, it must read back unchanged */
    }
    free(once);
    free(twice);
    sf_report_free(back);
    sf_report_free(r);
    return 0;
}

/*
 * Fuzz target: the escaping of outside text (daemon/report/text_escape.h).
 * Any bytes in; checks that the output is clean, that clean input comes out
 * unchanged, that the returned length is exact, and that a cut output is a
 * prefix of the whole one and stays inside its buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text_escape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    size_t cap = SF_TEXT_ESCAPED_SIZE(size);
    char *full = malloc(cap);
    if (full == NULL)
        return 0;
    size_t need = sf_text_escape(in, size, full, cap);
    if (need != strlen(full) || !sf_text_is_clean(full, need))
        abort();
    if (sf_text_is_clean(in, size) && (need != size || memcmp(full, in, size) != 0))
        abort();
    size_t small_cap = size ? (size_t)data[0] % (need + 1) + 1 : 1;
    char *small = malloc(small_cap);
    if (small != NULL) {
        if (sf_text_escape(in, size, small, small_cap) != need ||
            strncmp(small, full, strlen(small)) != 0 || strlen(small) >= small_cap)
            abort();
        free(small);
    }
    free(full);
    return 0;
}

/*
 * Fuzz target: sfd's config parser (inih callbacks, key and value checks).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sfd_config cfg;
    char err[256];
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    sfd_config_default(&cfg);
    sfd_config_parse_string(&cfg, text, err, sizeof(err));
    free(text);
    return 0;
}

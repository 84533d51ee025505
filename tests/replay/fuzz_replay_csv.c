/* Fuzz target: the wide CSV replay reader on arbitrary bytes. */
#include <stdio.h>

#include "replay.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    FILE *f = fmemopen((void *)data, size, "r");
    if (f == NULL)
        return 0;
    struct replay_input in;
    char err[400];
    if (sfctl_read_csv(f, &in, err, sizeof err) == 0)
        sfctl_replay_input_clear(&in);
    fclose(f);
    return 0;
}

/* Fuzz target: the JSON Lines recording reader, then the report of every
 * window it yields, on arbitrary bytes. */
#include <stdio.h>

#include "replay.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    FILE *f = fmemopen((void *)data, size, "r");
    if (f == NULL)
        return 0;
    sf_gates gates;
    sf_gates_default(&gates);
    struct replay_input in;
    char err[400];
    if (sfctl_read_jsonl(f, &gates, &in, err, sizeof err) == 0) {
        for (size_t i = 0; i < in.n_parts; i++) {
            const struct replay_part *p = &in.parts[i];
            sf_window_meta meta = {.world_size = p->world_size, .last_step = 1000};
            sf_report *r = NULL;
            if (sf_report_from_rows(&p->schema, &meta, p->rows, p->n_rows, &in.gates, &r) == 0)
                sf_report_free(r);
        }
        sfctl_replay_input_clear(&in);
    }
    fclose(f);
    return 0;
}

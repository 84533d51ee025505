/*
 * Fuzz target: the rows codec of sfd's history store, as it reads the rows
 * of a corrupt or foreign history.sqlite at startup. Rows decode against a
 * fixed schema with a synchronizing stage (so issue lags and sync waits are
 * read) and a world of 8. Whatever decodes, encoded again, must decode to the same
 * encoding.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rows_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WORLD 8
#define MAX_ROWS 4096

struct collected {
    sf_rows_header header;
    uint32_t n;
    sf_row rows[MAX_ROWS];
    int64_t d[MAX_ROWS][SF_MAX_STAGES], lag[MAX_ROWS][SF_MAX_STAGES], wait[MAX_ROWS][2];
    char roles[MAX_ROWS][64];
    sf_parallel par[MAX_ROWS];
};

static int collect(void *ctx, const sf_rows_header *header, const sf_row *row)
{
    struct collected *c = ctx;
    if (c->n == MAX_ROWS || strlen(row->role) >= sizeof c->roles[0])
        return -1; /* larger than this target keeps: not a codec question */
    uint32_t i = c->n++;
    c->header = *header;
    c->rows[i] = *row;
    memcpy(c->d[i], row->d, sizeof c->d[i]);
    c->rows[i].d = c->d[i];
    if (row->issue_lag != NULL) {
        memcpy(c->lag[i], row->issue_lag, sizeof c->lag[i][0]);
        c->rows[i].issue_lag = c->lag[i];
    }
    if (row->sync_wait != NULL) { /* one synchronizing stage: its wait and count */
        memcpy(c->wait[i], row->sync_wait, sizeof c->wait[i]);
        c->rows[i].sync_wait = c->wait[i];
    }
    if (row->parallel != NULL) {
        c->par[i] = *row->parallel;
        c->rows[i].parallel = &c->par[i];
    }
    strcpy(c->roles[i], row->role);
    c->rows[i].role = c->roles[i];
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"data", "forward", "backward", "optimizer", "residual"};
    sf_schema schema;
    if (sf_schema_init_sync(&schema, 1, 5, names, NULL, 1, 1u << 2) < 0)
        abort();
    struct collected *c = calloc(1, sizeof(*c));
    if (c != NULL && sf_rows_unpack(data, size, &schema, WORLD, collect, c) == 0) {
        uint8_t *once = NULL, *twice = NULL;
        size_t n1 = 0, n2 = 0;
        if (sf_rows_pack(&schema, WORLD, c->header.segment, c->header.index, c->rows, c->n, &once,
                         &n1) == 0) {
            c->n = 0;
            if (sf_rows_unpack(once, n1, &schema, WORLD, collect, c) < 0 ||
                sf_rows_pack(&schema, WORLD, c->header.segment, c->header.index, c->rows, c->n,
                             &twice, &n2) < 0 ||
                n1 != n2 || memcmp(once, twice, n1) != 0)
                abort(); /* what sfd writes, it must read back unchanged */
        }
        free(once);
        free(twice);
    }
    free(c);
    sf_schema_clear(&schema);
    return 0;
}

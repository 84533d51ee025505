/*
 * Test helpers: deterministic random matrices of stage durations and the
 * rows that point into them. Header-only so each test stays one file.
 */
#ifndef SF_TEST_MATRIX_H
#define SF_TEST_MATRIX_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/accounting.h>

struct matrix {
    uint32_t steps, ranks, stages;
    int64_t first_step;
    int64_t *d;   /* [steps][ranks][stages] */
    sf_row *rows; /* [steps * ranks] */
};

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline int64_t rand_below(uint64_t *state, int64_t bound)
{
    return bound > 0 ? (int64_t)(splitmix64(state) % (uint64_t)bound) : 0;
}

static inline int64_t *cell(struct matrix *m, uint32_t t, uint32_t r)
{
    return &m->d[((size_t)t * m->ranks + r) * m->stages];
}

static inline void matrix_bind_rows(struct matrix *m)
{
    for (uint32_t t = 0; t < m->steps; t++)
        for (uint32_t r = 0; r < m->ranks; r++)
            m->rows[(size_t)t * m->ranks + r] =
                (sf_row){.step = m->first_step + t, .rank = r, .d = cell(m, t, r)};
}

static inline struct matrix matrix_new(uint32_t steps, uint32_t ranks, uint32_t stages)
{
    struct matrix m = {steps, ranks, stages, 0, NULL, NULL};
    m.d = calloc((size_t)steps * ranks * stages, sizeof *m.d);
    m.rows = calloc((size_t)steps * ranks, sizeof *m.rows);
    matrix_bind_rows(&m);
    return m;
}

/* Durations uniform in [0, max]; with ties likely when max is small. */
static inline struct matrix matrix_random(uint64_t seed, uint32_t steps, uint32_t ranks,
                                          uint32_t stages, int64_t max)
{
    struct matrix m = matrix_new(steps, ranks, stages);
    uint64_t st = seed;
    for (size_t i = 0; i < (size_t)steps * ranks * stages; i++)
        m.d[i] = rand_below(&st, max + 1);
    return m;
}

/* Random overlap, event samples, roles and arrival flags on every row. */
static inline void matrix_random_extras(struct matrix *m, uint64_t *st)
{
    for (size_t i = 0; i < (size_t)m->steps * m->ranks; i++) {
        m->rows[i].overlap_ns = rand_below(st, 3);
        m->rows[i].event_state = (uint8_t)rand_below(st, 3);
        m->rows[i].event_cpu_ns = rand_below(st, 1000);
        m->rows[i].event_gpu_ns = rand_below(st, 1000);
        m->rows[i].role = rand_below(st, 4) ? "trainer" : "eval";
        m->rows[i].flags = rand_below(st, 10) == 0 ? SF_ROW_ARRIVAL_MISSING : 0;
    }
}

static inline void matrix_free(struct matrix *m)
{
    free(m->d);
    free(m->rows);
}

static inline sf_window_meta meta_for(uint32_t world)
{
    return (sf_window_meta){
        .index = 0, .first_step = 0, .last_step = SF_MAX_WINDOW_STEPS - 1, .world_size = world};
}

/* Stage names s0, s1, ... with the last one the residual. */
static inline void numbered_schema(sf_schema *schema, uint32_t stages)
{
    static char buf[SF_MAX_STAGES][16];
    const char *names[SF_MAX_STAGES];
    for (uint32_t i = 0; i < stages; i++) {
        snprintf(buf[i], sizeof buf[i], "s%u", i);
        names[i] = buf[i];
    }
    sf_schema_init(schema, 1, stages, names, NULL, 1);
}

/* s0 synchronizing (s0, s0.sync_wait, s2, ...), the last the residual;
 * stages >= 3. */
static inline void synchronizing_schema(sf_schema *schema, uint32_t stages)
{
    static char buf[SF_MAX_STAGES][16];
    const char *names[SF_MAX_STAGES];
    for (uint32_t i = 0; i + 1 < stages; i++) {
        snprintf(buf[i], sizeof buf[i], "s%u", i);
        names[i] = buf[i];
    }
    sf_schema_init_sync(schema, 1, stages - 1, names, NULL, 1, 1);
}

#endif

/*
 * Builds fixture reports from explicit matrices through the accounting core;
 * nothing here knows the export format.
 */
#include "prom_fixture.h"

#include <errno.h>
#include <string.h>

const char *const fixture_names[FIXTURE_STAGES] = {
    "data.next_wait", "model.fwd", "model.bwd_a", "model.bwd_b", "step.other",
};
const char *const fixture_groups[FIXTURE_STAGES] = {
    NULL, NULL, "model.bwd", "model.bwd", NULL,
};

int fixture_report(int64_t index, unsigned slow, int64_t extra_ns, sf_report **ret)
{
    return fixture_report_floor(index, slow, extra_ns, -1, ret);
}

int fixture_report_floor(int64_t index, unsigned slow, int64_t extra_ns, double share_floor_s,
                         sf_report **ret)
{
    static const int64_t base_ns[FIXTURE_STAGES] = {1000000, 4000000, 3000000, 2000000, 100000};
    int64_t d[FIXTURE_STEPS * FIXTURE_RANKS][FIXTURE_STAGES];
    sf_row rows[FIXTURE_STEPS * FIXTURE_RANKS];
    sf_schema schema;
    sf_gates gates;
    int r;

    if (slow >= FIXTURE_STAGES)
        return -EINVAL;
    r = sf_schema_init(&schema, 1, FIXTURE_STAGES, fixture_names, fixture_groups, 1);
    if (r < 0)
        return r;
    sf_gates_default(&gates);
    gates.warmup_steps = 0;
    gates.window_steps = FIXTURE_STEPS;
    if (share_floor_s >= 0)
        gates.share_floor_s = share_floor_s;

    sf_window_meta meta = {
        .index = index,
        .first_step = index * FIXTURE_STEPS,
        .last_step = index * FIXTURE_STEPS + FIXTURE_STEPS - 1,
        .world_size = FIXTURE_RANKS,
    };
    memset(rows, 0, sizeof rows);
    for (unsigned t = 0; t < FIXTURE_STEPS; t++)
        for (unsigned k = 0; k < FIXTURE_RANKS; k++) {
            unsigned i = t * FIXTURE_RANKS + k;
            for (unsigned s = 0; s < FIXTURE_STAGES; s++)
                d[i][s] = base_ns[s] + 1000 * k + 10 * t;
            if (k == FIXTURE_RANKS - 1)
                d[i][slow] += extra_ns;
            rows[i].step = meta.first_step + t;
            rows[i].rank = k;
            rows[i].d = d[i];
        }
    r = sf_report_from_rows(&schema, &meta, rows, FIXTURE_STEPS * FIXTURE_RANKS, &gates, ret);
    sf_schema_clear(&schema);
    return r;
}

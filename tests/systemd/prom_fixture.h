/*
 * Test fixture for the Prometheus export: small stage matrices turned into
 * real reports through sf_report_from_rows. Shared by the cmocka test and the
 * sample writer that the node_exporter test scrapes.
 */
#ifndef PROM_FIXTURE_H
#define PROM_FIXTURE_H

#include <stagefrontier/accounting.h>

#define FIXTURE_STAGES 5
#define FIXTURE_RANKS 3
#define FIXTURE_STEPS 4

/* Stage names and groups of the fixture schema (two stages share "bwd"). */
extern const char *const fixture_names[FIXTURE_STAGES];
extern const char *const fixture_groups[FIXTURE_STAGES];

/* Window `index` of a 3-rank job where rank 2 is slow in stage `slow`
 * (extra_ns added every step). Returns 0 or -errno. */
int fixture_report(int64_t index, unsigned slow, int64_t extra_ns, sf_report **ret);
/* The same with the gate share_floor_s set (a large floor leaves the shares
 * undefined and the routing set empty). */
int fixture_report_floor(int64_t index, unsigned slow, int64_t extra_ns, double share_floor_s,
                         sf_report **ret);

#endif

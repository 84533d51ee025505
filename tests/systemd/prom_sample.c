/*
 * prom_sample DIR VARIANT: writes DIR/stagefrontier.prom through
 * sfd_prom_write from fixture reports, for the node_exporter scrape test.
 * Variant 1: job "train-a" window 3 slow in data; variant 2: window 4 slow in
 * the model.bwd group. Both also export "idle-job", which has no window yet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prom_export.h"
#include "prom_fixture.h"

int main(int argc, char **argv)
{
    sf_report *rep = NULL;
    int variant, r;

    if (argc != 3) {
        fprintf(stderr, "usage: prom_sample DIR 1|2\n");
        return 2;
    }
    variant = atoi(argv[2]);
    if (variant == 1)
        r = fixture_report(3, 0, 20000000, &rep);
    else
        r = fixture_report(4, 2, 30000000, &rep);
    if (r < 0) {
        fprintf(stderr, "fixture_report: %s\n", strerror(-r));
        return 1;
    }
    struct sf_prom_job jobs[] = {
        {.job_id = "train-a", .latest = rep, .dropped = 5u * (unsigned)variant, .rejected = 2},
        {.job_id = "idle-job", .latest = NULL, .dropped = 0, .rejected = 1},
    };
    struct sf_prom_reject rejected[] = {{"duplicate_rank", (uint64_t)variant}, {"late_record", 0}};
    struct sf_prom_daemon daemon = {
        .version = "0.0.0-sample",
        .role = variant == 1 ? "standalone" : "root",
        .term = 40u + (unsigned)variant,
        .records = 1000u * (unsigned)variant,
        .batches = 10,
        .dropped = 5u * (unsigned)variant,
        .windows_closed = 3u + (unsigned)variant,
        .connections = 2,
        .connections_accepted = 9,
        .rejected = rejected,
        .n_rejected = 2,
        .write_unix_ms = INT64_C(1700000000300) + variant,
    };
    jobs[0].window_unix_ms = INT64_C(1700000000000) + variant;
    /* liveness and captures, so the dashboard test sees their labels */
    static const uint32_t ranks[] = {0, 1};
    static const int64_t seen[] = {INT64_C(1700000000100), INT64_C(1700000000200)};
    static const struct sf_prom_rank_info info[] = {{"node-a", "0", 0}, {"node-a", "GPU-5e1c", 1}};
    jobs[0].state = variant == 2 ? SF_PROM_JOB_STALLED : SF_PROM_JOB_RUNNING;
    jobs[1].state = SF_PROM_JOB_ENDED;
    jobs[0].n_ranks = 2;
    jobs[0].ranks = ranks;
    jobs[0].last_seen_unix_ms = seen;
    jobs[0].rank_info = info;
    jobs[0].captures_started[SF_PROM_TRIGGER_OPERATOR] = 1;
    jobs[0].captures_started[SF_PROM_TRIGGER_AUTO] = (unsigned)variant;
    jobs[0].captures_done[SF_PROM_TRIGGER_AUTO] = (unsigned)variant - 1;
    jobs[0].captures_failed[SF_PROM_TRIGGER_OPERATOR] = 1;
    jobs[0].last_capture_unix_ms = INT64_C(1700000000050);
    r = sfd_prom_write(argv[1], &daemon, jobs, 2);
    sf_report_free(rep);
    if (r < 0) {
        fprintf(stderr, "sfd_prom_write: %s\n", strerror(-r));
        return 1;
    }
    return 0;
}

/*
 * `sfctl replay --baseline FILE`: the reference taken from another recording
 * or CSV of the same job shape (docs/REPLAY.md). Reads and windows that file
 * exactly as the replayed one; whether it fits each replayed window is
 * checked by the replay command.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "replay.h"

void sfctl_baseline_clear(struct replay_baseline *b)
{
    sf_reference_free(b->ref);
    b->ref = NULL;
    sf_reference_collector_clear(&b->collector);
    sf_change_pool_clear(&b->pool);
}

static int collect_windows(const char *path, struct window_job *jobs, size_t n, const sf_gates *g,
                           struct replay_baseline *b)
{
    for (size_t i = 0; i < n && b->ref == NULL; i++) {
        sf_summary *summary = NULL;
        sf_report *report = NULL;
        int r = sfctl_replay_window(&jobs[i], g, &summary, &report);
        if (r == 0)
            r = sf_reference_collect(&b->collector, summary, report, &b->ref);
        sf_report_free(report);
        sf_summary_free(summary);
        if (r < 0) {
            fprintf(stderr, "sfctl replay: %s: baseline window %lld: %s\n", path,
                    (long long)jobs[i].meta.index,
                    r == -EEXIST ? "duplicate (step, rank)" : "cannot be computed");
            return r == -ENOMEM ? r : -EINVAL;
        }
    }
    if (b->ref == NULL) {
        fprintf(stderr,
                "sfctl replay: %s: the baseline has %u of the %u eligible windows it needs "
                "(complete, not downgraded for missing data)\n",
                path, b->collector.n, b->collector.want);
        return -EINVAL;
    }
    return 0;
}

int sfctl_baseline_load(const char *path, const sf_gates *g, struct replay_baseline *b)
{
    struct replay_input in = {0};
    struct window_job *jobs = NULL;
    size_t n = 0;
    int r = sfctl_replay_read(path, g, &in);
    if (r < 0)
        return r == -ENOMEM ? r : -EINVAL;
    b->collector.want = g->baseline_windows;
    r = sfctl_replay_assemble(&in, g, &jobs, &n);
    if (r == 0)
        r = collect_windows(path, jobs, n, g, b);
    sf_reference_collector_clear(&b->collector);
    b->from_file = r == 0;
    free(jobs);
    sfctl_replay_input_clear(&in);
    return r;
}

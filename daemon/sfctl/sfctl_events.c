/*
 * `sfctl events JOB [--json]`: the starts and ends of a job's live verdict
 * (docs/LIVE.md), oldest first, and the one-line form of a verdict that
 * `sfctl jobs` and `sfctl watch` print too.
 */
#include <stdio.h>
#include <string.h>

#include "sfctl.h"
#include "sfctl_live.h"

void sfctl_verdict_line(json_t *v, char *buf, size_t len)
{
    if (!json_is_object(v)) {
        snprintf(buf, len, "none");
        return;
    }
    char rank[24] = "the whole job";
    if (json_is_integer(json_object_get(v, "rank")))
        snprintf(rank, sizeof rank, "rank %lld", sfctl_json_int(v, "rank"));
    const char *sync = json_string_value(json_object_get(v, "sync_stage"));
    char since[32] = "-";
    if (json_is_integer(json_object_get(v, "since_step")))
        snprintf(since, sizeof since, "%lld", sfctl_json_int(v, "since_step"));
    const char *test = json_string_value(json_object_get(json_object_get(v, "evidence"), "test"));
    if (test != NULL && !strcmp(test, "communication")) { /* on time, then a late collective */
        snprintf(buf, len, "%s: %s late to communicate in %s, since step %s, %+.4f s/step",
                 sfctl_json_str(v, "kind"), rank, sfctl_json_str(v, "sync_stage"), since,
                 json_number_value(json_object_get(v, "effect_s")));
        return;
    }
    snprintf(buf, len, "%s: %s in %s%s%s, since step %s, %+.4f s/step", sfctl_json_str(v, "kind"),
             rank, sfctl_json_str(v, "stage"), sync ? ", holding up " : "", sync ? sync : "", since,
             json_number_value(json_object_get(v, "effect_s")));
}

static int show_events(json_t *o, const char *job)
{
    char line[512];
    sfctl_verdict_line(json_object_get(o, "verdict"), line, sizeof line);
    printf("job %s: live verdict %s\n", job, line);
    printf("(%s; %lld steps tested over %lld cells)\n",
           json_is_true(json_object_get(o, "calibrated")) ? "baseline ready"
                                                          : "baseline not ready yet",
           sfctl_json_int(o, "steps_tested"), sfctl_json_int(o, "cells"));
    size_t i;
    json_t *e;
    json_t *events = json_object_get(o, "events");
    if (json_array_size(events) > 0)
        printf("%6s %-5s %10s %14s  %s\n", "SEQ", "EVENT", "STEP", "AT_MS", "VERDICT");
    json_array_foreach(events, i, e)
    {
        sfctl_verdict_line(json_object_get(e, "verdict"), line, sizeof line);
        printf("%6lld %-5s %10lld %14lld  %s\n", sfctl_json_int(e, "seq"),
               sfctl_json_str(e, "event"), sfctl_json_int(e, "step"), sfctl_json_int(e, "at"),
               line);
    }
    if (json_array_size(events) == 0)
        printf("(no events)\n");
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_events(int argc, char **argv)
{
    return sfctl_show(argc, argv, "JOB [--json]", true, SFCTL_Q_EVENTS, show_events);
}

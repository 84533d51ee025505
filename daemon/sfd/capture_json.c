/*
 * The CAPTURES and CAPTURE answers and the counts for the Prometheus export
 * (docs/SFD.md, "Captures"). Reads the capture table only; never changes it.
 */
#include <jansson.h>

#include "capture.h"
#include "capture_table.h"
#include "sfd.h"

/* ---- JSON ------------------------------------------------------------------------- */

static json_t *unix_s(int64_t ms)
{
    return ms > 0 ? json_real((double)ms / 1000.0) : json_null();
}

static json_t *target_json(const struct target *t)
{
    json_t *o =
        json_pack("{s:I, s:s, s:b, s:o, s:o, s:o, s:o}", "rank", (json_int_t)t->rank, "state",
                  sfd__capture_target_names[t->state], "control", t->control, "first_step",
                  t->first_step >= 0 ? json_integer(t->first_step) : json_null(), "last_step",
                  t->last_step >= 0 ? json_integer(t->last_step) : json_null(), "started_at",
                  unix_s(t->started_at_ms), "finished_at", unix_s(t->finished_at_ms));
    if (o != NULL) {
        json_object_set_new(o, "path",
                            t->state == T_DONE && t->text ? json_string(t->text) : json_null());
        json_object_set_new(o, "error",
                            t->state != T_DONE && t->text ? json_string(t->text) : json_null());
        json_object_set_new(o, "node", t->node != 0 ? json_integer(t->node) : json_null());
    }
    return o;
}

static json_t *one_json(const struct capture *k)
{
    json_t *targets = json_array();
    for (uint32_t i = 0; i < k->n; i++)
        json_array_append_new(targets, target_json(&k->t[i]));
    return json_pack(
        "{s:I, s:s, s:b, s:o, s:I, s:s, s:s, s:I, s:o, s:o}", "id", (json_int_t)k->id, "trigger",
        k->automatic ? "auto" : "operator", "communication", k->communication, "window",
        k->window >= 0 ? json_integer(k->window) : json_null(), "segment", (json_int_t)k->segment,
        "reason", k->reason, "state", sfd__capture_state(k), "steps", (json_int_t)k->steps,
        "created_at", unix_s(k->created_at_ms), "ranks", targets);
}

json_t *sfd_captures_json(const struct sfd_job *job)
{
    json_t *a = json_array();
    for (uint32_t i = 0; job->captures != NULL && i < job->captures->n; i++)
        json_array_append_new(a, one_json(job->captures->c[i]));
    return a;
}

json_t *sfd_capture_json(const struct sfd_job *job, uint64_t id)
{
    const struct capture *k = sfd__capture_find(job->captures, id);
    return k != NULL ? one_json(k) : json_null();
}

void sfd_captures_counts(const struct sfd_job *job, struct sfd_capture_counts *ret)
{
    const struct sfd_job_captures *tb = job->captures;
    *ret = (struct sfd_capture_counts){0};
    for (int t = 0; tb != NULL && t < 2; t++) {
        ret->started[t] = tb->started[t];
        ret->done[t] = tb->done[t];
        ret->failed[t] = tb->failed[t];
    }
    ret->last_created_ms = tb != NULL ? tb->last_created_ms : 0;
}

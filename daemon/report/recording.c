/*
 * The JSON Lines recording: encoders used by sfd for `sfctl record`, and
 * strict decoders used by `sfctl replay`. Durations stay integer ns, so a
 * recording replays to the identical report; the reference line carries the
 * job's baseline. Decoders check every key's type and range; they never trust
 * the file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recording.h"
#include "report_json.h"

static const char *const event_states[] = {"none", "ready", "missing"};
static const struct {
    uint32_t bit;
    const char *name;
} window_flags[] = {
    {SF_WIN_CLOSED_EARLY, "closed_early"},
    {SF_WIN_PARTIAL, "partial"},
    {SF_WIN_LATE_SUMMARY, "late_summary"},
    {SF_WIN_NON_MONOTONIC, "non_monotonic"},
};
#define N_WINDOW_FLAGS (sizeof window_flags / sizeof window_flags[0])

/* ---- encoders ------------------------------------------------------------ */

json_t *sf_recording_header(const char *job_id, const sf_schema *schema, uint32_t world_size,
                            const sf_gates *gates)
{
    json_t *stages = json_array(), *groups = json_array();
    for (uint32_t i = 0; i < schema->n_stages; i++) {
        json_array_append_new(stages, json_string(schema->names[i]));
        json_array_append_new(groups, json_string(schema->groups[i]));
    }
    json_t *h =
        json_pack("{s:s, s:s, s:i, s:s, s:{s:I, s:o, s:o, s:I}, s:I, s:o}", "type", "header",
                  "format", "stagefrontier-recording", "version", 1, "job_id", job_id ? job_id : "",
                  "schema", "version", (json_int_t)schema->version, "stages", stages, "groups",
                  groups, "accumulation", (json_int_t)schema->accumulation, "world_size",
                  (json_int_t)world_size, "gates", sf_gates_to_json(gates));
    /* The synchronizing stages' groups, in stage order, when one is not
     * world (docs/FORMATS.md). */
    bool any = false;
    for (uint32_t k = 0; k < schema->n_stages; k++)
        any |= schema->sync_group[k] != SF_SYNC_WORLD;
    if (h != NULL && any) {
        json_t *sg = json_array();
        for (uint64_t m = schema->sync_mask; m; m &= m - 1)
            json_array_append_new(sg,
                                  json_string(sf_sync_group_name(
                                      (enum sf_sync_group)schema->sync_group[__builtin_ctzll(m)])));
        json_object_set_new(json_object_get(h, "schema"), "sync_groups", sg);
    }
    return h;
}

json_t *sf_recording_row(const sf_row *row, const sf_schema *schema)
{
    json_t *d = json_array();
    for (uint32_t i = 0; i < schema->n_stages; i++)
        json_array_append_new(d, json_integer(row->d[i]));
    json_t *o = json_pack("{s:s, s:I, s:I, s:o}", "type", "row", "step", (json_int_t)row->step,
                          "rank", (json_int_t)row->rank, "d_ns", d);
    if (o == NULL)
        return NULL;
    if (row->flags)
        json_object_set_new(o, "flags", json_integer(row->flags));
    if (row->overlap_ns)
        json_object_set_new(o, "overlap_ns", json_integer(row->overlap_ns));
    if (row->role && row->role[0])
        json_object_set_new(o, "role", json_string(row->role));
    if (row->parallel != NULL && row->parallel->declared) {
        char text[SF_PARALLEL_TEXT_MAX + 32];
        sf_parallel_format(row->parallel, text, sizeof text);
        json_object_set_new(o, "parallel", json_string(text));
    }
    uint32_t J = (uint32_t)__builtin_popcountll(schema->sync_mask);
    bool waits = false;
    for (uint32_t j = 0; row->sync_wait != NULL && j < J; j++)
        waits |= row->sync_wait[j] >= 0;
    if (waits) {
        json_t *w = json_array(), *n = json_array();
        for (uint32_t j = 0; j < J; j++) {
            bool marked = row->sync_wait[j] >= 0;
            json_array_append_new(w, marked ? json_integer(row->sync_wait[j]) : json_null());
            json_array_append_new(n, json_integer(marked ? row->sync_wait[J + j] : 0));
        }
        json_object_set_new(o, "sync_wait_ns", w);
        json_object_set_new(o, "sync_waits", n);
    }
    if (row->event_state != SF_EVENT_NONE && row->event_state <= SF_EVENT_MISSING)
        json_object_set_new(o, "event",
                            json_pack("{s:s, s:I, s:I}", "state", event_states[row->event_state],
                                      "cpu_ns", (json_int_t)row->event_cpu_ns, "gpu_ns",
                                      (json_int_t)row->event_gpu_ns));
    return o;
}

json_t *sf_recording_window(const sf_window_meta *m)
{
    json_t *flags = json_array();
    for (size_t i = 0; i < N_WINDOW_FLAGS; i++)
        if (m->flags & window_flags[i].bit)
            json_array_append_new(flags, json_string(window_flags[i].name));
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:I}", "type", "window",
                          "index", (json_int_t)m->index, "segment", (json_int_t)m->segment,
                          "first_step", (json_int_t)m->first_step, "last_step",
                          (json_int_t)m->last_step, "world_size", (json_int_t)m->world_size,
                          "flags", flags, "dropped_records", (json_int_t)m->dropped_records,
                          "contract_violations", (json_int_t)m->contract_violations,
                          "rejected_records", (json_int_t)m->rejected_records);
    /* Wall clock (ms since the epoch) when known, so a replay shows it too. */
    if (o != NULL && m->opened_at_ms > 0)
        json_object_set_new(o, "opened_at_ms", json_integer(m->opened_at_ms));
    if (o != NULL && m->closed_at_ms > 0)
        json_object_set_new(o, "closed_at_ms", json_integer(m->closed_at_ms));
    return o;
}

/* The job's reference (docs/CHANGE.md), right after the header: a replay of
 * the recording measures the change against what the live report used, even
 * after the reference windows were evicted. */
static json_t *int_row(const int64_t *v, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new(a, v[i] == SF_NULL_NS ? json_null() : json_integer(v[i]));
    return a;
}

static json_t *count_row(const uint32_t *v, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *sf_recording_reference(const sf_reference *ref)
{
    uint32_t S = ref->n_stages;
    json_t *windows = json_array(), *advance = json_array();
    json_t *min = ref->min_ns != NULL ? json_array() : json_null();
    for (uint32_t j = 0; j < ref->n_windows; j++)
        json_array_append_new(windows, json_integer(ref->windows[j]));
    for (uint32_t t = 0; t < ref->n_steps; t++) {
        json_array_append_new(advance, int_row(&ref->advance[(size_t)t * S], S));
        if (ref->min_ns != NULL)
            json_array_append_new(min, int_row(&ref->min_ns[(size_t)t * S], S));
    }
    json_t *ranks = json_null(), *medians = json_null(), *leads = json_null();
    json_t *contrasts = json_null();
    if (ref->median_ns != NULL) {
        ranks = count_row(ref->ranks, ref->n_ranks);
        medians = json_array();
        leads = json_array();
        for (uint32_t r = 0; r < ref->n_ranks; r++) {
            json_array_append_new(medians, int_row(&ref->median_ns[(size_t)r * S], S));
            json_array_append_new(leads, count_row(&ref->lead_steps[(size_t)r * S], S));
        }
    }
    if (ref->median_ns != NULL && ref->contrast_ns != NULL) {
        contrasts = json_array();
        for (uint32_t r = 0; r < ref->n_ranks; r++)
            json_array_append_new(contrasts, int_row(&ref->contrast_ns[(size_t)r * S], S));
    }
    return json_pack("{s:s, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "type", "reference",
                     "windows", windows, "segment", (json_int_t)ref->segment, "advance_ns", advance,
                     "min_ns", min, "ranks", ranks, "median_ns", medians, "lead_steps", leads,
                     "contrast_ns", contrasts);
}

/* ---- decoders ------------------------------------------------------------ */

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* An integer member within [lo, hi]; absent members take def when optional. */
static int get_int(json_t *obj, const char *key, json_int_t lo, json_int_t hi, bool optional,
                   json_int_t def, json_int_t *ret, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL && optional) {
        *ret = def;
        return 0;
    }
    if (!json_is_integer(v))
        return fail(err, errlen, "\"%s\" must be an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(err, errlen, "\"%s\" = %lld is out of range [%lld, %lld]", key, (long long)x,
                    (long long)lo, (long long)hi);
    *ret = x;
    return 0;
}

static int string_list(json_t *arr, const char *key, const char **out, uint32_t max,
                       uint32_t *ret_n, char *err, size_t errlen)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > max)
        return fail(err, errlen, "\"%s\" must be an array of 1 to %u strings", key, max);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        out[i] = json_string_value(json_array_get(arr, i));
        if (out[i] == NULL)
            return fail(err, errlen, "\"%s\"[%zu] must be a string", key, i);
    }
    *ret_n = (uint32_t)json_array_size(arr);
    return 0;
}

static int parse_schema(json_t *obj, sf_schema *ret, char *err, size_t errlen)
{
    if (!json_is_object(obj))
        return fail(err, errlen, "\"schema\" must be an object");
    const char *names[SF_MAX_STAGES], *groups[SF_MAX_STAGES];
    uint32_t n = 0, n_groups = 0;
    json_int_t version = 0, accumulation = 0;
    int r = string_list(json_object_get(obj, "stages"), "stages", names, SF_MAX_STAGES, &n, err,
                        errlen);
    if (r < 0 || (r = get_int(obj, "version", 0, UINT32_MAX, true, 1, &version, err, errlen)) < 0 ||
        (r = get_int(obj, "accumulation", 1, SF_MAX_ACCUMULATION, true, 1, &accumulation, err,
                     errlen)) < 0)
        return r;
    json_t *g = json_object_get(obj, "groups");
    if (g && (r = string_list(g, "groups", groups, SF_MAX_STAGES, &n_groups, err, errlen)) < 0)
        return r;
    if (g && n_groups != n)
        return fail(err, errlen, "\"groups\" must have one entry per stage");
    r = sf_schema_init(ret, (uint32_t)version, n, names, g ? groups : NULL, (uint32_t)accumulation);
    if (r < 0)
        return fail(err, errlen, "invalid stage list (empty, duplicate or bad names)");
    json_t *sg = json_object_get(obj, "sync_groups");
    if (sg == NULL)
        return 0;
    const char *sync[SF_MAX_STAGES];
    uint8_t parsed[SF_MAX_STAGES];
    uint32_t n_sync = 0;
    if ((r = string_list(sg, "sync_groups", sync, SF_MAX_STAGES, &n_sync, err, errlen)) < 0)
        goto bad;
    for (uint32_t j = 0; j < n_sync; j++) {
        int v = sf_sync_group_parse(sync[j]);
        if (v < 0)
            goto bad_group;
        parsed[j] = (uint8_t)v;
    }
    if (sf_schema_set_sync_groups(ret, parsed, n_sync) == 0)
        return 0;
bad_group:
    fail(err, errlen, "\"sync_groups\" must name world, dp, tp or pp once per synchronizing stage");
bad:
    sf_schema_clear(ret);
    return -EINVAL;
}

static int parse_gates(json_t *obj, sf_gates *gates, char *err, size_t errlen)
{
    if (obj == NULL)
        return 0;
    if (!json_is_object(obj))
        return fail(err, errlen, "\"gates\" must be an object");
    /* A recording from before pooling measured each window alone. */
    if (json_object_get(obj, "change_pool_windows") == NULL)
        gates->change_pool_windows = 1;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        char text[64];
        if (json_is_string(v))
            snprintf(text, sizeof text, "%s", json_string_value(v));
        else if (json_is_boolean(v))
            snprintf(text, sizeof text, "%s", json_is_true(v) ? "true" : "false");
        else if (json_is_number(v))
            snprintf(text, sizeof text, "%.17g", json_number_value(v));
        else
            return fail(err, errlen, "gate \"%s\" has an invalid type", key);
        int r = sf_gates_set(gates, key, text);
        if (r == -ENOENT)
            return fail(err, errlen, "unknown gate \"%s\"", key);
        if (r < 0)
            return fail(err, errlen, "gate \"%s\" has an invalid value", key);
    }
    return sf_gates_validate(gates) < 0 ? fail(err, errlen, "gates are inconsistent") : 0;
}

int sf_recording_parse_header(json_t *obj, sf_schema *ret_schema, uint32_t *ret_world_size,
                              sf_gates *gates, char *err, size_t errlen)
{
    json_int_t world = 0;
    sf_gates g = *gates;
    int r = get_int(obj, "world_size", 1, SF_MAX_RANKS, false, 0, &world, err, errlen);
    if (r < 0 || (r = parse_gates(json_object_get(obj, "gates"), &g, err, errlen)) < 0 ||
        (r = parse_schema(json_object_get(obj, "schema"), ret_schema, err, errlen)) < 0)
        return r;
    *gates = g;
    *ret_world_size = (uint32_t)world;
    return 0;
}

static int parse_event(json_t *ev, sf_row *row, char *err, size_t errlen)
{
    if (ev == NULL)
        return 0;
    const char *state = json_string_value(json_object_get(ev, "state"));
    uint8_t s = 0;
    while (state && s <= SF_EVENT_MISSING && strcmp(state, event_states[s]) != 0)
        s++;
    if (state == NULL || s > SF_EVENT_MISSING)
        return fail(err, errlen, "\"event.state\" must be none, ready or missing");
    json_int_t cpu = 0, gpu = 0;
    int r = get_int(ev, "cpu_ns", 0, SF_MAX_DURATION_NS, true, 0, &cpu, err, errlen);
    if (r < 0 || (r = get_int(ev, "gpu_ns", 0, SF_MAX_DURATION_NS, true, 0, &gpu, err, errlen)) < 0)
        return r;
    row->event_state = s;
    row->event_cpu_ns = cpu;
    row->event_gpu_ns = gpu;
    return 0;
}

int sf_recording_parse_row(json_t *obj, const sf_schema *schema, sf_row *ret_row, int64_t *d,
                           char *err, size_t errlen)
{
    sf_row row = {.d = d};
    json_int_t step = 0, rank = 0, flags = 0, overlap = 0;
    int r = get_int(obj, "step", 0, INT64_MAX, false, 0, &step, err, errlen);
    if (r < 0 ||
        (r = get_int(obj, "rank", 0, SF_MAX_RANKS - 1, false, 0, &rank, err, errlen)) < 0 ||
        (r = get_int(obj, "flags", 0, SF_ROW_FLAGS_ALL, true, 0, &flags, err, errlen)) < 0 ||
        (r = get_int(obj, "overlap_ns", 0, SF_MAX_DURATION_NS * SF_MAX_STAGES, true, 0, &overlap,
                     err, errlen)) < 0)
        return r;
    json_t *arr = json_object_get(obj, "d_ns");
    if (!json_is_array(arr) || json_array_size(arr) != schema->n_stages)
        return fail(err, errlen, "\"d_ns\" must hold %u durations", schema->n_stages);
    for (uint32_t i = 0; i < schema->n_stages; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > SF_MAX_DURATION_NS)
            return fail(err, errlen, "\"d_ns\"[%u] must be an integer in [0, 2^42]", i);
        d[i] = json_integer_value(v);
    }
    json_t *role = json_object_get(obj, "role");
    if (role && (!json_is_string(role) || json_string_length(role) > SF_MAX_NAME_LEN))
        return fail(err, errlen, "\"role\" must be a string of at most %d bytes", SF_MAX_NAME_LEN);
    if ((r = parse_event(json_object_get(obj, "event"), &row, err, errlen)) < 0)
        return r;
    row.step = step;
    row.rank = (uint32_t)rank;
    row.flags = (uint32_t)flags;
    row.overlap_ns = overlap;
    row.role = role ? json_string_value(role) : NULL;
    *ret_row = row;
    return 0;
}

int sf_recording_parse_row_waits(json_t *obj, const sf_schema *schema, int64_t *ret, bool *ret_has,
                                 char *err, size_t errlen)
{
    json_t *w = json_object_get(obj, "sync_wait_ns"), *n = json_object_get(obj, "sync_waits");
    size_t J = (size_t)__builtin_popcountll(schema->sync_mask);
    *ret_has = false;
    if (w == NULL && n == NULL)
        return 0;
    if (!json_is_array(w) || !json_is_array(n) || json_array_size(w) != J ||
        json_array_size(n) != J || J == 0)
        return fail(err, errlen,
                    "\"sync_wait_ns\" and \"sync_waits\" must hold one entry per synchronizing "
                    "stage");
    for (size_t j = 0; j < J; j++) {
        json_t *v = json_array_get(w, j), *c = json_array_get(n, j);
        if (!json_is_integer(c))
            return fail(err, errlen, "\"sync_waits\"[%zu] must be an integer", j);
        ret[j] = json_is_null(v) ? -1 : json_is_integer(v) ? json_integer_value(v) : -2;
        ret[J + j] = json_integer_value(c);
        if (ret[j] == -2 || ret[j] > SF_MAX_DURATION_NS || ret[J + j] < 0 ||
            ret[J + j] > (json_int_t)SF_MAX_SYNC_WAITS || (ret[j] < 0) != (ret[J + j] == 0))
            return fail(err, errlen,
                        "\"sync_wait_ns\"[%zu] must be null with a count of 0, or 0..2^42 ns "
                        "with a count of 1..2^20",
                        j);
    }
    *ret_has = true;
    return 0;
}

int sf_recording_parse_row_parallel(json_t *obj, sf_parallel *ret, bool *ret_has, char *err,
                                    size_t errlen)
{
    json_t *v = json_object_get(obj, "parallel");
    char why[160];
    *ret_has = false;
    if (v == NULL)
        return 0;
    if (!json_is_string(v) || sf_parallel_parse(json_string_value(v), ret, why, sizeof why) < 0)
        return fail(err, errlen, "\"parallel\" must be coordinates as SF_PARALLEL spells them%s%s",
                    json_is_string(v) ? ": " : "", json_is_string(v) ? why : "");
    *ret_has = true;
    return 0;
}

static int parse_window_flags(json_t *arr, uint32_t *ret, char *err, size_t errlen)
{
    uint32_t flags = 0;
    if (arr && !json_is_array(arr))
        return fail(err, errlen, "\"flags\" must be an array");
    for (size_t i = 0; arr && i < json_array_size(arr); i++) {
        const char *name = json_string_value(json_array_get(arr, i));
        size_t f = 0;
        while (name && f < N_WINDOW_FLAGS && strcmp(name, window_flags[f].name) != 0)
            f++;
        if (name == NULL || f == N_WINDOW_FLAGS)
            return fail(err, errlen, "unknown window flag at \"flags\"[%zu]", i);
        flags |= window_flags[f].bit;
    }
    *ret = flags;
    return 0;
}

int sf_recording_parse_window(json_t *obj, sf_window_meta *ret_meta, char *err, size_t errlen)
{
    sf_window_meta m = {0};
    json_int_t index = 0, segment = 0, first = 0, last = 0, world = 0, dropped = 0, violations = 0,
               rejected = 0;
    json_int_t opened = 0, closed = 0;
    int r = get_int(obj, "index", 0, INT64_MAX / 2, false, 0, &index, err, errlen);
    if (r < 0 || (r = get_int(obj, "segment", 0, UINT32_MAX, true, 0, &segment, err, errlen)) < 0 ||
        (r = get_int(obj, "first_step", 0, INT64_MAX / 2, false, 0, &first, err, errlen)) < 0 ||
        (r = get_int(obj, "last_step", first, INT64_MAX / 2, false, 0, &last, err, errlen)) < 0 ||
        (r = get_int(obj, "world_size", 1, SF_MAX_RANKS, false, 0, &world, err, errlen)) < 0 ||
        (r = get_int(obj, "dropped_records", 0, INT64_MAX, true, 0, &dropped, err, errlen)) < 0 ||
        (r = get_int(obj, "contract_violations", 0, INT64_MAX, true, 0, &violations, err, errlen)) <
            0 ||
        (r = get_int(obj, "rejected_records", 0, INT64_MAX, true, 0, &rejected, err, errlen)) < 0 ||
        (r = get_int(obj, "opened_at_ms", 0, INT64_MAX / 2, true, 0, &opened, err, errlen)) < 0 ||
        (r = get_int(obj, "closed_at_ms", 0, INT64_MAX / 2, true, 0, &closed, err, errlen)) < 0 ||
        (r = parse_window_flags(json_object_get(obj, "flags"), &m.flags, err, errlen)) < 0)
        return r;
    m.index = index;
    m.segment = (uint32_t)segment;
    m.first_step = first;
    m.last_step = last;
    m.world_size = (uint32_t)world;
    m.dropped_records = (uint64_t)dropped;
    m.contract_violations = (uint64_t)violations;
    m.rejected_records = (uint64_t)rejected;
    m.opened_at_ms = opened;
    m.closed_at_ms = closed;
    *ret_meta = m;
    return 0;
}

/* ---- the reference line --------------------------------------------------- */

/* An array of exactly n integers in [lo, hi] (null allowed as SF_NULL_NS). */
static int int_array(json_t *a, const char *key, size_t n, json_int_t lo, json_int_t hi, bool nulls,
                     int64_t *out, char *err, size_t errlen)
{
    if (!json_is_array(a) || json_array_size(a) != n)
        return fail(err, errlen, "\"%s\" rows must hold %zu values", key, n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (nulls && json_is_null(v)) {
            out[i] = SF_NULL_NS;
            continue;
        }
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
            return fail(err, errlen, "\"%s\" values must be integers in [%lld, %lld]", key,
                        (long long)lo, (long long)hi);
        out[i] = json_integer_value(v);
    }
    return 0;
}

static int parse_windows(json_t *obj, sf_reference *ref, char *err, size_t errlen)
{
    json_t *w = json_object_get(obj, "windows"), *seg = json_object_get(obj, "segment");
    size_t n = json_array_size(w);
    if (!json_is_array(w) || n < 1 || n > SF_REF_MAX_WINDOWS)
        return fail(err, errlen, "\"windows\" must list 1 to %d window indices",
                    SF_REF_MAX_WINDOWS);
    int r = int_array(w, "windows", n, 0, INT64_MAX / 2, false, ref->windows, err, errlen);
    if (r < 0)
        return r;
    if (!json_is_integer(seg) || json_integer_value(seg) < 0 ||
        json_integer_value(seg) > UINT32_MAX)
        return fail(err, errlen, "\"segment\" must be an integer in [0, %u]", UINT32_MAX);
    ref->n_windows = (uint32_t)n;
    ref->segment = (uint32_t)json_integer_value(seg);
    return 0;
}

/* n rows of one duration per stage, a step each, into *ret (allocated). */
static int step_rows(json_t *a, const char *name, size_t n, size_t S, int64_t **ret, char *err,
                     size_t errlen)
{
    if ((*ret = malloc(n * S * sizeof **ret)) == NULL)
        return -ENOMEM;
    for (size_t t = 0; t < n; t++) {
        int r = int_array(json_array_get(a, t), name, S, 0, SF_MAX_DURATION_NS, false,
                          &(*ret)[t * S], err, errlen);
        if (r < 0)
            return r;
    }
    return 0;
}

static int parse_advances(json_t *a, sf_reference *ref, char *err, size_t errlen)
{
    size_t n = json_array_size(a);
    if (!json_is_array(a) || n < 1 || n > SF_REF_MAX_STEPS)
        return fail(err, errlen, "\"advance_ns\" must hold 1 to %d steps", SF_REF_MAX_STEPS);
    ref->n_steps = (uint32_t)n;
    return step_rows(a, "advance_ns", n, ref->n_stages, &ref->advance, err, errlen);
}

/* Optional (recordings made before it existed lack it): the sync floor
 * test is then off for windows replayed against this reference. One row per
 * step of "advance_ns". */
static int parse_min(json_t *a, sf_reference *ref, char *err, size_t errlen)
{
    if (a == NULL || json_is_null(a))
        return 0;
    if (!json_is_array(a) || json_array_size(a) != ref->n_steps)
        return fail(err, errlen,
                    "\"min_ns\" must be null, or one array per step of "
                    "\"advance_ns\"");
    return step_rows(a, "min_ns", ref->n_steps, ref->n_stages, &ref->min_ns, err, errlen);
}

/* Optional (recordings made before it existed lack it): the own-work test
 * is then off for windows replayed against this reference. */
static int parse_contrasts(json_t *obj, sf_reference *ref, char *err, size_t errlen)
{
    json_t *c = json_object_get(obj, "contrast_ns");
    size_t n = ref->n_ranks, S = ref->n_stages;
    if (c == NULL || json_is_null(c))
        return 0;
    if (!json_is_array(c) || json_array_size(c) != n)
        return fail(err, errlen, "\"contrast_ns\" must be null, or one array per rank");
    ref->contrast_ns = malloc((n ? n : 1) * S * sizeof *ref->contrast_ns);
    if (ref->contrast_ns == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int r = int_array(json_array_get(c, i), "contrast_ns", S, -SF_MAX_DURATION_NS,
                          SF_MAX_DURATION_NS, true, &ref->contrast_ns[i * S], err, errlen);
        if (r < 0)
            return r;
    }
    return 0;
}

static int parse_ranks(json_t *obj, sf_reference *ref, char *err, size_t errlen)
{
    json_t *ranks = json_object_get(obj, "ranks"), *med = json_object_get(obj, "median_ns"),
           *leads = json_object_get(obj, "lead_steps");
    if (json_is_null(ranks) && json_is_null(med) && json_is_null(leads))
        return 0; /* mergeable mode: nothing per rank */
    size_t n = json_array_size(ranks), S = ref->n_stages;
    if (!json_is_array(ranks) || n < 1 || n > ref->world_size || json_array_size(med) != n ||
        json_array_size(leads) != n)
        return fail(err, errlen,
                    "\"ranks\", \"median_ns\" and \"lead_steps\" must be null, or "
                    "arrays of 1 to world size entries of equal length");
    int64_t *tmp = malloc(S * sizeof *tmp);
    ref->ranks = malloc(n * sizeof *ref->ranks);
    ref->median_ns = malloc(n * S * sizeof *ref->median_ns);
    ref->lead_steps = malloc(n * S * sizeof *ref->lead_steps);
    int r = tmp && ref->ranks && ref->median_ns && ref->lead_steps ? 0 : -ENOMEM;
    for (size_t i = 0; i < n && r == 0; i++) {
        json_t *v = json_array_get(ranks, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= ref->world_size ||
            (i > 0 && json_integer_value(v) <= ref->ranks[i - 1])) {
            r = fail(err, errlen, "\"ranks\" must be increasing ranks below the world size");
            break;
        }
        ref->ranks[i] = (uint32_t)json_integer_value(v);
        r = int_array(json_array_get(med, i), "median_ns", S, 0, SF_MAX_DURATION_NS, true,
                      &ref->median_ns[i * S], err, errlen);
        if (r == 0)
            r = int_array(json_array_get(leads, i), "lead_steps", S, 0, ref->n_steps, false, tmp,
                          err, errlen);
        for (size_t k = 0; k < S && r == 0; k++)
            ref->lead_steps[i * S + k] = (uint32_t)tmp[k];
    }
    free(tmp);
    ref->n_ranks = r == 0 ? (uint32_t)n : 0;
    return r == 0 ? parse_contrasts(obj, ref, err, errlen) : r;
}

int sf_recording_parse_reference(json_t *obj, const sf_schema *schema, uint32_t world_size,
                                 sf_reference **ret, char *err, size_t errlen)
{
    sf_reference *ref = calloc(1, sizeof *ref);
    if (ref == NULL)
        return -ENOMEM;
    ref->schema_hash = schema->hash;
    ref->n_stages = schema->n_stages;
    ref->world_size = world_size;
    int r = parse_windows(obj, ref, err, errlen);
    if (r == 0)
        r = parse_advances(json_object_get(obj, "advance_ns"), ref, err, errlen);
    if (r == 0)
        r = parse_min(json_object_get(obj, "min_ns"), ref, err, errlen);
    if (r == 0)
        r = parse_ranks(obj, ref, err, errlen);
    if (r == 0)
        r = sf_reference_finish(ref);
    if (r < 0) {
        if (r == -ENOMEM)
            fail(err, errlen, "out of memory");
        sf_reference_free(ref);
        return r == -ENOMEM ? r : -EINVAL;
    }
    *ret = ref;
    return 0;
}

/*
 * The "reference" line of a JSON Lines recording (docs/FORMATS.md): the
 * job's compact reference, so a replay of a recording measures the change
 * against the same reference as the live report did, even after its windows
 * were evicted. The decoder checks every value; it never trusts the file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "recording.h"

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
    for (uint32_t j = 0; j < ref->n_windows; j++)
        json_array_append_new(windows, json_integer(ref->windows[j]));
    for (uint32_t t = 0; t < ref->n_steps; t++)
        json_array_append_new(advance, int_row(&ref->advance[(size_t)t * S], S));
    json_t *ranks = json_null(), *medians = json_null(), *leads = json_null();
    if (ref->median_ns != NULL) {
        ranks = count_row(ref->ranks, ref->n_ranks);
        medians = json_array();
        leads = json_array();
        for (uint32_t r = 0; r < ref->n_ranks; r++) {
            json_array_append_new(medians, int_row(&ref->median_ns[(size_t)r * S], S));
            json_array_append_new(leads, count_row(&ref->lead_steps[(size_t)r * S], S));
        }
    }
    return json_pack("{s:s, s:o, s:I, s:o, s:o, s:o, s:o}", "type", "reference", "windows", windows,
                     "segment", (json_int_t)ref->segment, "advance_ns", advance, "ranks", ranks,
                     "median_ns", medians, "lead_steps", leads);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

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

static int parse_advances(json_t *a, sf_reference *ref, char *err, size_t errlen)
{
    size_t n = json_array_size(a), S = ref->n_stages;
    if (!json_is_array(a) || n < 1 || n > SF_REF_MAX_STEPS)
        return fail(err, errlen, "\"advance_ns\" must hold 1 to %d steps", SF_REF_MAX_STEPS);
    ref->advance = malloc(n * S * sizeof *ref->advance);
    if (ref->advance == NULL)
        return -ENOMEM;
    for (size_t t = 0; t < n; t++) {
        int r = int_array(json_array_get(a, t), "advance_ns", S, 0, SF_MAX_DURATION_NS, false,
                          &ref->advance[t * S], err, errlen);
        if (r < 0)
            return r;
    }
    ref->n_steps = (uint32_t)n;
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
    return r;
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

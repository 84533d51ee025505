/* The loader of bench/live/recording.h. */
#define _GNU_SOURCE
#include "recording.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads the header and rows; keeps the steps every rank has a row of. */
int recording_load(const char *path, struct recording *rec)
{
    memset(rec, 0, sizeof(*rec));
    rec->path = path;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    int64_t first = -1, last = -1;
    uint8_t *have = NULL;
    int64_t *d = NULL;
    size_t span = 0;
    int r = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        const char *type = json_string_value(json_object_get(o, "type"));
        if (type != NULL && !strcmp(type, "header")) {
            json_t *st = json_object_get(json_object_get(o, "schema"), "stages");
            const char *names[SF_MAX_STAGES];
            size_t i;
            json_t *n;
            json_array_foreach(st, i, n) if (i < SF_MAX_STAGES) names[i] = json_string_value(n);
            rec->n_stages = (uint32_t)json_array_size(st);
            rec->world = (uint32_t)json_integer_value(json_object_get(o, "world_size"));
            if (rec->n_stages > SF_MAX_STAGES ||
                sf_schema_init(&rec->schema, 1, rec->n_stages, names, NULL, 1) < 0)
                r = -EINVAL;
        } else if (type != NULL && !strcmp(type, "row") && rec->world > 0) {
            int64_t step = json_integer_value(json_object_get(o, "step"));
            uint32_t rank = (uint32_t)json_integer_value(json_object_get(o, "rank"));
            json_t *v = json_object_get(o, "d_ns");
            if (first < 0)
                first = step;
            if (rank < rec->world && json_array_size(v) == rec->n_stages && step >= first &&
                step - first < (1 << 22)) {
                size_t t = (size_t)(step - first);
                if (t >= span) {
                    size_t ns = (t + 1) * 2;
                    have = realloc(have, ns * rec->world);
                    d = realloc(d, ns * rec->world * rec->n_stages * sizeof(*d));
                    memset(have + span * rec->world, 0, (ns - span) * rec->world);
                    span = ns;
                }
                for (uint32_t k = 0; k < rec->n_stages; k++)
                    d[(t * rec->world + rank) * rec->n_stages + k] =
                        json_integer_value(json_array_get(v, k));
                have[t * rec->world + rank] = 1;
                last = step > last ? step : last;
            }
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    size_t per = (size_t)rec->world * rec->n_stages;
    size_t n_span = last - first + 1 > 0 ? (size_t)(last - first + 1) : 1;
    rec->d = malloc(n_span * per * sizeof(*d));
    rec->step = malloc(n_span * sizeof(*rec->step));
    for (int64_t t = 0; first >= 0 && t <= last - first; t++) {
        bool all = true;
        for (uint32_t q = 0; q < rec->world; q++)
            all = all && have[t * rec->world + q];
        if (all) {
            rec->step[rec->n_steps] = first + t;
            memcpy(rec->d + rec->n_steps++ * per, d + t * per, per * sizeof(*d));
        }
    }
    free(have);
    free(d);
    return r < 0 ? r : rec->n_steps > 0 ? 0 : -ENODATA;
}

void recording_free(struct recording *rec)
{
    free(rec->d);
    free(rec->step);
    sf_schema_clear(&rec->schema);
}

int live_config_option(int opt, double value, sf_live_config *cfg)
{
    switch (opt) {
    case 'f':
        cfg->false_alarm_steps = value;
        return 1;
    case 'k':
        cfg->shift_sigmas = value;
        return 1;
    case 'm':
        cfg->min_effect_frac = value;
        return 1;
    case 'D':
        cfg->slow_effect_frac = value;
        return 1;
    case 'C':
        cfg->change_min_frac = value;
        return 1;
    case 'h':
        cfg->baseline_halflife_steps = value;
        return 1;
    case 'c':
        cfg->calibration_steps = (uint32_t)value;
        return 1;
    default:
        return 0;
    }
}

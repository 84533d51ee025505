/*
 * Label gates: their defaults (docs/SPEC.md section 1, gate table), parsing of one
 * config key at a time, and range checks. Text parsing lives here so sfd's
 * config file, sfctl's --gates file and replay headers agree on every key.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <stagefrontier/accounting.h>
#include <stagefrontier/change.h>
#include "stagefrontier/gates_text.h"
#include "strutil.h"

enum gate_kind { GATE_RATIO, GATE_SECONDS, GATE_COUNT, GATE_BOOL, GATE_NAME };

struct gate_key {
    const char *key;
    enum gate_kind kind;
    size_t offset;
    double max; /* upper bound for ratios, seconds and counts */
};

#define GATE(name, kind, max)                                                                      \
    {                                                                                              \
#name, kind, offsetof(sf_gates, name), max                                                 \
    }
static const struct gate_key gate_keys[] = {
    GATE(residual_share_max, GATE_RATIO, 1),
    GATE(overlap_share_max, GATE_RATIO, 1),
    GATE(missing_ranks_max, GATE_COUNT, SF_MAX_RANKS),
    GATE(incomplete_steps_max, GATE_COUNT, SF_MAX_WINDOW_STEPS),
    GATE(event_ready_ratio_min, GATE_RATIO, 1),
    GATE(event_samples_min, GATE_COUNT, 1e9),
    GATE(event_support_ratio_min, GATE_RATIO, 1e6),
    GATE(event_host_ratio_max, GATE_RATIO, 1e6),
    GATE(dominance_share_min, GATE_RATIO, 1),
    GATE(gain_ratio_min, GATE_RATIO, 1e6),
    GATE(tie_tol, GATE_RATIO, 1),
    GATE(leader_gap_tol_min_s, GATE_SECONDS, 3600),
    GATE(leader_gap_tol_frac, GATE_RATIO, 1),
    GATE(leader_switch_rate_max, GATE_RATIO, 1),
    GATE(tau, GATE_RATIO, 1),
    GATE(model_fit, GATE_BOOL, 0),
    GATE(share_floor_s, GATE_SECONDS, 1e6),
    GATE(warmup_steps, GATE_COUNT, 1e9),
    GATE(window_steps, GATE_COUNT, SF_MAX_WINDOW_STEPS),
    GATE(suspect_ranks_max, GATE_COUNT, SF_MAX_RANKS),
    GATE(dense_max_ranks, GATE_COUNT, SF_MAX_RANKS),
    GATE(straggler_alpha, GATE_RATIO, 0.5),
    GATE(straggler_last_share_min, GATE_RATIO, 1),
    GATE(straggler_persist_windows, GATE_COUNT, 1e6),
    GATE(comm_lag_min_s, GATE_SECONDS, 3600),
    GATE(comm_share_min, GATE_RATIO, 1),
    GATE(baseline_windows, GATE_COUNT, 16),
    GATE(change_pool_windows, GATE_COUNT, SF_POOL_MAX_WINDOWS),
    GATE(change_alpha, GATE_RATIO, 0.5),
    GATE(change_min_frac, GATE_RATIO, 1),
    GATE(forward_stage, GATE_NAME, 0),
    GATE(backward_stage, GATE_NAME, 0),
};
#undef GATE

void sf_gates_default(sf_gates *ret)
{
    *ret = (sf_gates){
        .residual_share_max = 0.10,
        .overlap_share_max = 0.02,
        .missing_ranks_max = 0,
        .incomplete_steps_max = 0,
        .event_ready_ratio_min = 0.5,
        .event_samples_min = 5,
        .event_support_ratio_min = 0.5,
        .event_host_ratio_max = 0.25,
        .dominance_share_min = 0.35,
        .gain_ratio_min = 0.5,
        .tie_tol = 0.05,
        .leader_gap_tol_min_s = 0.001,
        .leader_gap_tol_frac = 0.02,
        .leader_switch_rate_max = 0.3,
        .tau = 0.80,
        .model_fit = false,
        .share_floor_s = 1e-6,
        .warmup_steps = 20,
        .window_steps = 100,
        .suspect_ranks_max = 3,
        .dense_max_ranks = 1024,
        .straggler_alpha = 0.01,
        .straggler_last_share_min = 0,
        .straggler_persist_windows = 2,
        .comm_lag_min_s = 0.0005,
        .comm_share_min = 0.5,
        .baseline_windows = 3,
        .change_pool_windows = 3,
        .change_alpha = 0.01,
        .change_min_frac = 0.02,
    };
    strcpy(ret->forward_stage, "model.fwd_loss_cpu_wall");
    strcpy(ret->backward_stage, "model.backward_cpu_wall");
}

static int parse_double(const char *text, double max, double *ret)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < 0 || v > max)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int set_gate(sf_gates *gates, const struct gate_key *g, const char *value)
{
    char *field = (char *)gates + g->offset;
    double v;
    switch (g->kind) {
    case GATE_RATIO:
    case GATE_SECONDS:
        if (parse_double(value, g->max, &v) < 0)
            return -EINVAL;
        *(double *)field = v;
        return 0;
    case GATE_COUNT:
        if (parse_double(value, g->max, &v) < 0 || v != floor(v))
            return -EINVAL;
        *(uint32_t *)field = (uint32_t)v;
        return 0;
    case GATE_BOOL:
        return sf_parse_bool(value, (bool *)field);
    case GATE_NAME:
        if (value[0] == '\0' || strlen(value) > SF_MAX_NAME_LEN)
            return -EINVAL;
        strcpy(field, value);
        return 0;
    }
    return -EINVAL;
}

int sf_gates_set(sf_gates *gates, const char *key, const char *value)
{
    if (gates == NULL || key == NULL || value == NULL)
        return -EINVAL;
    for (size_t i = 0; i < sizeof gate_keys / sizeof gate_keys[0]; i++)
        if (strcmp(gate_keys[i].key, key) == 0)
            return set_gate(gates, &gate_keys[i], value);
    return -ENOENT;
}

int sf_gates_explain(const char *key, char *buf, size_t len)
{
    if (key == NULL || buf == NULL || len == 0)
        return -EINVAL;
    for (size_t i = 0; i < sizeof gate_keys / sizeof gate_keys[0]; i++) {
        const struct gate_key *g = &gate_keys[i];
        if (strcmp(g->key, key) != 0)
            continue;
        switch (g->kind) {
        case GATE_RATIO:
            snprintf(buf, len, "must be a number 0..%g", g->max);
            break;
        case GATE_SECONDS:
            snprintf(buf, len, "must be seconds 0..%g", g->max);
            break;
        case GATE_COUNT:
            snprintf(buf, len, "must be a whole number 0..%.0f", g->max);
            break;
        case GATE_BOOL:
            snprintf(buf, len, "must be yes or no (true/false, on/off, 1/0)");
            break;
        case GATE_NAME:
            snprintf(buf, len, "must be a name of 1..%d characters", SF_MAX_NAME_LEN);
            break;
        }
        return 0;
    }
    return -ENOENT;
}

const char *sf_gates_describe(const sf_gates *gates, size_t i, enum sf_gate_type *ret_type,
                              double *ret_number, const char **ret_text)
{
    if (gates == NULL || i >= sizeof gate_keys / sizeof gate_keys[0])
        return NULL;
    const struct gate_key *g = &gate_keys[i];
    const char *field = (const char *)gates + g->offset;
    *ret_text = NULL;
    switch (g->kind) {
    case GATE_RATIO:
    case GATE_SECONDS:
        *ret_type = SF_GATE_NUMBER;
        *ret_number = *(const double *)field;
        break;
    case GATE_COUNT:
        *ret_type = SF_GATE_COUNT;
        *ret_number = *(const uint32_t *)field;
        break;
    case GATE_BOOL:
        *ret_type = SF_GATE_BOOL;
        *ret_number = *(const bool *)field ? 1 : 0;
        break;
    case GATE_NAME:
        *ret_type = SF_GATE_NAME;
        *ret_number = NAN;
        *ret_text = field;
        break;
    }
    return g->key;
}

int sf_gates_validate(const sf_gates *gates)
{
    if (gates == NULL)
        return -EINVAL;
    if (gates->window_steps < 1 || gates->tau <= 0 || gates->tau > 1)
        return -EINVAL;
    if (gates->dense_max_ranks > SF_MAX_RANKS || gates->straggler_persist_windows < 1)
        return -EINVAL;
    if (gates->baseline_windows < 1 || gates->change_pool_windows < 1 || gates->change_alpha <= 0 ||
        gates->straggler_alpha <= 0)
        return -EINVAL;
    return 0;
}

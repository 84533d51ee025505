/*
 * sfd configuration: defaults, the inih parser for sfd.conf ([sfd], [limits],
 * [gates]) and validation. Pure apart from reading the file; it never touches
 * the running daemon (main.c applies a loaded config).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "capture.h"
#include "sfd.h"
#include "stagefrontier/gates_text.h"
#include "strutil.h"

struct parse_ctx {
    struct sfd_config *cfg;
    char *err;
    size_t errlen;
    bool failed;
    char why[96]; /* what the key takes, set by the setter that refused its value */
};

void sfd_config_default(struct sfd_config *ret)
{
    memset(ret, 0, sizeof(*ret));
    snprintf(ret->runtime_dir, sizeof(ret->runtime_dir), SF_DEFAULT_RUNTIME_DIR);
    snprintf(ret->operators_group, sizeof(ret->operators_group), "stagefrontier");
    snprintf(ret->state_dir, sizeof(ret->state_dir), "/var/lib/stagefrontier");
    ret->max_history_mb = 128;
    ret->history_rows = true;
    sf_gates_default(&ret->gates);
    sf_live_config_default(&ret->live);
    ret->live_verdict = true;
    ret->max_jobs = 64;
    ret->max_jobs_per_uid = 16;
    ret->max_memory_mb = 512;
    ret->max_memory_per_uid_mb = 128;
    ret->max_connections = 4096;
    ret->max_ranks = SF_MAX_RANKS;
    ret->max_pending_steps = 262144;
    ret->frame_max_bytes = 1u << 20;
    ret->keep_windows = 16;
    ret->max_connections_per_uid = 1024;
    ret->max_query_connections_per_uid = 8;
    ret->hello_timeout_ms = 2000;
    ret->query_idle_timeout_ms = 5000;
    ret->window_grace_ms = 2000;
    ret->status_interval_ms = 5000;
    ret->watchdog = true;
    ret->log_level = SFD_LOG_INFO;
    ret->alert_windows = 3;
    ret->alert_interval_ms = 600000;
    ret->stall_after_s = 30;
    ret->prom_ended_keep_s = SFD_PROM_ENDED_KEEP_DEFAULT_S;
    ret->auto_capture = false;
    ret->auto_capture_windows = 2;
    ret->auto_capture_cooldown_s = 600;
    ret->auto_capture_max = 3;
    ret->auto_capture_steps = 5;
    ret->capture_timeout_s = 600;
}

int sfd_log_level_parse(const char *s)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = {
        {"err", SFD_LOG_ERR},       {"error", SFD_LOG_ERR}, {"warning", SFD_LOG_WARNING},
        {"notice", SFD_LOG_NOTICE}, {"info", SFD_LOG_INFO}, {"debug", SFD_LOG_DEBUG},
    };
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        if (strcasecmp(s, levels[i].name) == 0)
            return levels[i].level;
    return -EINVAL;
}

static int parse_u64(const char *v, uint64_t lo, uint64_t hi, uint64_t *ret)
{
    char *end;
    if (*v == '\0' || *v == '-')
        return -EINVAL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || x < lo || x > hi)
        return -EINVAL;
    *ret = x;
    return 0;
}

static int parse_i64(const char *v, int64_t *ret)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*v == '\0' || errno != 0 || *end != '\0')
        return -EINVAL;
    *ret = x;
    return 0;
}

static int set_str(struct parse_ctx *p, char *dst, size_t cap, const char *v)
{
    size_t n = strlen(v);
    if (n >= cap) {
        snprintf(p->why, sizeof p->why, "too long: at most %zu characters", cap - 1);
        return -ENAMETOOLONG;
    }
    memcpy(dst, v, n + 1);
    return 0;
}

static int set_u64(struct parse_ctx *p, uint64_t *dst, const char *v, uint64_t lo, uint64_t hi)
{
    int r = parse_u64(v, lo, hi, dst);
    if (r < 0)
        snprintf(p->why, sizeof p->why, "must be %" PRIu64 "..%" PRIu64, lo, hi);
    return r;
}

static int set_u32(struct parse_ctx *p, uint32_t *dst, const char *v, uint64_t lo, uint64_t hi)
{
    uint64_t x;
    int r = set_u64(p, &x, v, lo, hi);
    if (r == 0)
        *dst = (uint32_t)x;
    return r;
}

static int set_bool(struct parse_ctx *p, bool *dst, const char *v)
{
    int r = sf_parse_bool(v, dst);
    if (r < 0)
        snprintf(p->why, sizeof p->why, "must be yes or no (true/false, on/off, 1/0)");
    return r;
}

/* Liveness and captures (docs/SFD.md, "Liveness" and "Captures"). */
static int set_capture_key(struct parse_ctx *p, const char *k, const char *v)
{
    struct sfd_config *c = p->cfg;
    if (!strcmp(k, "stall_after_s"))
        return set_u32(p, &c->stall_after_s, v, 1, 86400);
    if (!strcmp(k, "auto_capture"))
        return set_bool(p, &c->auto_capture, v);
    if (!strcmp(k, "auto_capture_windows"))
        return set_u32(p, &c->auto_capture_windows, v, 1, 1000);
    if (!strcmp(k, "auto_capture_cooldown_s"))
        return set_u32(p, &c->auto_capture_cooldown_s, v, 0, 7 * 86400);
    if (!strcmp(k, "auto_capture_max"))
        return set_u32(p, &c->auto_capture_max, v, 0, SFD_AUTO_CAPTURE_MAX);
    if (!strcmp(k, "auto_capture_steps"))
        return set_u32(p, &c->auto_capture_steps, v, 1, SF_MAX_CAPTURE_STEPS);
    if (!strcmp(k, "capture_timeout_s"))
        return set_u32(p, &c->capture_timeout_s, v, 10, 86400);
    return -ENOENT;
}

static int set_double(struct parse_ctx *p, double *dst, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(x >= lo && x <= hi)) {
        snprintf(p->why, sizeof p->why, "a number in %g..%g", lo, hi);
        return -EINVAL;
    }
    *dst = x;
    return 0;
}

/* The live verdict's gates (docs/LIVE.md, "Gates"). */
static int set_live_key(struct parse_ctx *p, const char *k, const char *v)
{
    sf_live_config *l = &p->cfg->live;
    if (!strcmp(k, "live_verdict"))
        return set_bool(p, &p->cfg->live_verdict, v);
    if (!strcmp(k, "live_false_alarm_steps"))
        return set_double(p, &l->false_alarm_steps, v, 10, 1e15);
    if (!strcmp(k, "live_shift_sigmas"))
        return set_double(p, &l->shift_sigmas, v, 0.01, 100);
    if (!strcmp(k, "live_min_effect_frac"))
        return set_double(p, &l->min_effect_frac, v, 0, 0.99);
    if (!strcmp(k, "live_slow_effect_frac"))
        return set_double(p, &l->slow_effect_frac, v, 0, 0.99);
    if (!strcmp(k, "live_change_min_frac"))
        return set_double(p, &l->change_min_frac, v, 0, 9.99);
    if (!strcmp(k, "live_baseline_halflife_steps"))
        return set_double(p, &l->baseline_halflife_steps, v, 0, 1e12);
    if (!strcmp(k, "live_calibration_steps"))
        return set_u32(p, &l->calibration_steps, v, 8, SF_LIVE_MAX_CALIBRATION_STEPS);
    return -ENOENT;
}

static int set_sfd_key(struct parse_ctx *p, const char *k, const char *v)
{
    struct sfd_config *c = p->cfg;
    if (!strcmp(k, "runtime_dir"))
        return set_str(p, c->runtime_dir, sizeof(c->runtime_dir), v);
    if (!strcmp(k, "ingest_socket"))
        return set_str(p, c->ingest_path, sizeof(c->ingest_path), v);
    if (!strcmp(k, "query_socket"))
        return set_str(p, c->query_path, sizeof(c->query_path), v);
    if (!strcmp(k, "prom_dir"))
        return set_str(p, c->prom_dir, sizeof(c->prom_dir), v);
    if (!strcmp(k, "prom_ended_keep_s")) /* any integer: validate names the range */
        return parse_i64(v, &c->prom_ended_keep_s);
    if (!strcmp(k, "state_dir"))
        return set_str(p, c->state_dir, sizeof(c->state_dir), v);
    if (!strcmp(k, "operators_group"))
        return set_str(p, c->operators_group, sizeof(c->operators_group), v);
    if (!strcmp(k, "window_grace_ms"))
        return set_u64(p, &c->window_grace_ms, v, 0, 3600000);
    if (!strcmp(k, "status_interval_ms"))
        return set_u64(p, &c->status_interval_ms, v, 100, 3600000);
    if (!strcmp(k, "watchdog"))
        return set_bool(p, &c->watchdog, v);
    if (!strcmp(k, "alert_command"))
        return set_str(p, c->alert_command, sizeof(c->alert_command), v);
    if (!strcmp(k, "alert_windows"))
        return set_u32(p, &c->alert_windows, v, 1, 10000);
    if (!strcmp(k, "alert_interval_ms"))
        return set_u64(p, &c->alert_interval_ms, v, 0, UINT64_C(86400000));
    if (!strcmp(k, "log_level")) {
        int l = sfd_log_level_parse(v);
        if (l < 0) {
            snprintf(p->why, sizeof p->why, "must be err, warning, notice, info or debug");
            return l;
        }
        c->log_level = l;
        return 0;
    }
    return -ENOENT;
}

static int set_limit_key(struct parse_ctx *p, const char *k, const char *v)
{
    struct sfd_config *c = p->cfg;
    if (!strcmp(k, "max_jobs"))
        return set_u32(p, &c->max_jobs, v, 1, 65536);
    if (!strcmp(k, "max_connections"))
        return set_u32(p, &c->max_connections, v, 1, 1u << 20);
    if (!strcmp(k, "max_ranks"))
        return set_u32(p, &c->max_ranks, v, 1, SF_MAX_RANKS);
    if (!strcmp(k, "max_pending_steps"))
        return set_u32(p, &c->max_pending_steps, v, 1, 1u << 26);
    if (!strcmp(k, "frame_max_bytes"))
        return set_u32(p, &c->frame_max_bytes, v, 512, SFD_FRAME_MAX_CAP);
    if (!strcmp(k, "keep_windows"))
        return set_u32(p, &c->keep_windows, v, 1, 4096);
    if (!strcmp(k, "max_history_mb"))
        return set_u32(p, &c->max_history_mb, v, 0, 1u << 20);
    if (!strcmp(k, "history_rows"))
        return set_bool(p, &c->history_rows, v);
    if (!strcmp(k, "max_connections_per_uid"))
        return set_u32(p, &c->max_connections_per_uid, v, 1, 1u << 20);
    if (!strcmp(k, "max_query_connections_per_uid"))
        return set_u32(p, &c->max_query_connections_per_uid, v, 1,
                       SFD_MAX_QUERY_CONNS - SFD_QUERY_RESERVED);
    if (!strcmp(k, "hello_timeout_ms"))
        return set_u64(p, &c->hello_timeout_ms, v, 100, 3600000);
    if (!strcmp(k, "query_idle_timeout_ms"))
        return set_u64(p, &c->query_idle_timeout_ms, v, 100, 3600000);
    if (!strcmp(k, "max_jobs_per_uid"))
        return set_u32(p, &c->max_jobs_per_uid, v, 1, 65536);
    if (!strcmp(k, "max_memory_mb"))
        return set_u32(p, &c->max_memory_mb, v, 16, 1u << 20);
    if (!strcmp(k, "max_memory_per_uid_mb"))
        return set_u32(p, &c->max_memory_per_uid_mb, v, 1, 1u << 20);
    return -ENOENT;
}

static int on_kv(void *user, const char *section, const char *key, const char *value)
{
    struct parse_ctx *p = user;
    int r;

    if (section[0] == '\0' || !strcmp(section, "sfd")) {
        r = set_sfd_key(p, key, value);
        if (r == -ENOENT)
            r = set_limit_key(p, key, value);
        if (r == -ENOENT)
            r = set_capture_key(p, key, value);
        if (r == -ENOENT)
            r = set_live_key(p, key, value);
    } else if (!strcmp(section, "limits")) {
        r = set_limit_key(p, key, value);
    } else if (!strcmp(section, "gates")) {
        r = sf_gates_set(&p->cfg->gates, key, value);
        if (r == -EINVAL)
            sf_gates_explain(key, p->why, sizeof p->why);
    } else if (!strcmp(section, "peer") || !strcmp(section, "cluster")) {
        return 1; /* reserved for the multi-node layer, read by it */
    } else {
        r = -ENOENT;
        if (!p->failed)
            snprintf(p->err, p->errlen, "unknown section [%s]", section);
        p->failed = true;
        return 0;
    }
    if (r < 0 && !p->failed) {
        snprintf(p->err, p->errlen, "[%s] %s = %s: %s", section[0] ? section : "sfd", key, value,
                 r == -ENOENT ? "unknown key"
                 : p->why[0]  ? p->why
                              : "invalid value");
        p->failed = true;
    }
    p->why[0] = '\0';
    return r < 0 ? 0 : 1;
}

static int finish(struct parse_ctx *p, int r, struct sfd_config *cfg, const struct sfd_config *tmp)
{
    if (r > 0 && !p->failed)
        snprintf(p->err, p->errlen, "line %d: syntax error", r);
    if (r != 0 || p->failed)
        return -EINVAL;
    if (sfd_config_validate(tmp, p->err, p->errlen) < 0)
        return -EINVAL;
    *cfg = *tmp;
    return 0;
}

int sfd_config_load(struct sfd_config *cfg, const char *path, char *err, size_t errlen)
{
    struct sfd_config tmp = *cfg;
    struct parse_ctx p = {.cfg = &tmp, .err = err, .errlen = errlen};
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        int e = errno;
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
        return -e;
    }
    int r = ini_parse_file(f, on_kv, &p);
    fclose(f);
    return finish(&p, r, cfg, &tmp);
}

int sfd_config_parse_string(struct sfd_config *cfg, const char *text, char *err, size_t errlen)
{
    struct sfd_config tmp = *cfg;
    struct parse_ctx p = {.cfg = &tmp, .err = err, .errlen = errlen};
    int r = ini_parse_string(text, on_kv, &p);
    return finish(&p, r, cfg, &tmp);
}

int sfd_config_validate(const struct sfd_config *cfg, char *err, size_t errlen)
{
    if (cfg->gates.window_steps == 0 || cfg->gates.window_steps > SF_MAX_WINDOW_STEPS) {
        snprintf(err, errlen, "[gates] window_steps must be 1..%d", SF_MAX_WINDOW_STEPS);
        return -EINVAL;
    }
    const sf_gates *g = &cfg->gates;
    if (g->tau <= 0) {
        snprintf(err, errlen, "[gates] tau must be above 0, at most 1");
        return -EINVAL;
    }
    if (g->straggler_alpha <= 0 || g->change_alpha <= 0) {
        snprintf(err, errlen, "[gates] %s must be above 0, at most 0.5",
                 g->straggler_alpha <= 0 ? "straggler_alpha" : "change_alpha");
        return -EINVAL;
    }
    if (g->straggler_persist_windows < 1 || g->baseline_windows < 1 || g->change_pool_windows < 1) {
        snprintf(err, errlen, "[gates] %s must be at least 1",
                 g->straggler_persist_windows < 1 ? "straggler_persist_windows"
                 : g->baseline_windows < 1        ? "baseline_windows"
                                                  : "change_pool_windows");
        return -EINVAL;
    }
    if (sf_gates_validate(&cfg->gates) < 0) {
        snprintf(err, errlen, "[gates]: inconsistent gate values");
        return -EINVAL;
    }
    if (cfg->alert_command[0] != '\0' && cfg->alert_command[0] != '/') {
        snprintf(err, errlen, "alert_command must start with an absolute path");
        return -EINVAL;
    }
    if (cfg->prom_ended_keep_s < 0 || cfg->prom_ended_keep_s > SFD_PROM_ENDED_KEEP_MAX_S) {
        snprintf(err, errlen, "prom_ended_keep_s = %" PRId64 ": must be 0..%d seconds",
                 cfg->prom_ended_keep_s, SFD_PROM_ENDED_KEEP_MAX_S);
        return -EINVAL;
    }
    if (cfg->max_memory_per_uid_mb > cfg->max_memory_mb) {
        snprintf(err, errlen, "max_memory_per_uid_mb must not exceed max_memory_mb");
        return -EINVAL;
    }
    if (cfg->runtime_dir[0] != '/' && cfg->runtime_dir[0] != '\0' && cfg->runtime_dir[0] != '.') {
        snprintf(err, errlen, "runtime_dir must be a path");
        return -EINVAL;
    }
    if (cfg->state_dir[0] != '/' && cfg->state_dir[0] != '\0' && cfg->state_dir[0] != '.') {
        snprintf(err, errlen, "state_dir must be a path");
        return -EINVAL;
    }
    return 0;
}

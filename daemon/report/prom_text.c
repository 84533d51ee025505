/*
 * The Prometheus text format of the reports: renders the latest window of
 * every job and the daemon's counters in the node_exporter text format. It
 * owns the metric names, their label sets and the escaping of label values;
 * it must not hold state between calls, touch files or sockets, or log.
 */
#define _GNU_SOURCE
#include <stagefrontier/change.h>

#include "prom_text.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Job ids come from clients: cap what we copy into a label value so one
 * hostile id cannot bloat the file that every scrape reads. */
#define PROM_LABEL_MAX 256

struct prom_label {
    const char *key;
    const char *value; /* already escaped */
};

struct prom_family {
    const char *name;
    const char *type;
    const char *help;
};

struct prom_out {
    FILE *f;
    const struct prom_family *fam;
    bool header_done;
};

/* Length of the valid UTF-8 sequence at s (at most avail bytes), or 0. */
static size_t utf8_seq_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    size_t n;
    uint32_t cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
        return 0;
    if (n == 4 && (cp < 0x10000 || cp > 0x10ffff))
        return 0;
    return n;
}

/* Escapes a label value as the text format requires (backslash, quote,
 * newline). Other control bytes and invalid UTF-8 become '?', because the
 * format has no escape for them and Prometheus rejects invalid UTF-8.
 * Returns a malloc'd string or NULL on ENOMEM. */
static char *escape_label(const char *raw)
{
    const unsigned char *s = (const unsigned char *)(raw ? raw : "");
    size_t len = strnlen((const char *)s, PROM_LABEL_MAX);
    char *out = malloc(len * 2 + 1);
    size_t o = 0;

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        size_t n;

        if (c == '\\' || c == '"' || c == '\n') {
            out[o++] = '\\';
            out[o++] = c == '\n' ? 'n' : (char)c;
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            out[o++] = '?';
            i++;
        } else if ((n = utf8_seq_len(s + i, len - i)) == 0) {
            out[o++] = '?';
            i++;
        } else {
            memcpy(out + o, s + i, n);
            o += n;
            i += n;
        }
    }
    out[o] = '\0';
    return out;
}

static void fam_begin(struct prom_out *o, const struct prom_family *fam)
{
    o->fam = fam;
    o->header_done = false;
}

/* HELP and TYPE come only with the first sample, so a family without
 * samples leaves no empty header behind. */
static void emit(struct prom_out *o, const struct prom_label *labels, size_t n_labels,
                 const char *value)
{
    if (!o->header_done) {
        fprintf(o->f, "# HELP %s %s\n# TYPE %s %s\n", o->fam->name, o->fam->help, o->fam->name,
                o->fam->type);
        o->header_done = true;
    }
    fputs(o->fam->name, o->f);
    for (size_t i = 0; i < n_labels; i++)
        fprintf(o->f, "%c%s=\"%s\"", i == 0 ? '{' : ',', labels[i].key, labels[i].value);
    fprintf(o->f, "%s %s\n", n_labels > 0 ? "}" : "", value);
}

/* The shortest decimal that reads back as the same double (0.25, not
 * 0.25000000000000000), as Prometheus and node_exporter print floats. */
static const char *fmt_double(char *buf, size_t size, double v)
{
    if (isnan(v))
        return "NaN";
    if (isinf(v))
        return v > 0 ? "+Inf" : "-Inf";
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

static const char *fmt_u64(char *buf, size_t size, uint64_t v)
{
    snprintf(buf, size, "%" PRIu64, v);
    return buf;
}

static const char *fmt_i64(char *buf, size_t size, int64_t v)
{
    snprintf(buf, size, "%" PRId64, v);
    return buf;
}

static double ns_to_s(__int128 ns)
{
    return (double)ns / 1e9;
}

/* ---- families ------------------------------------------------------------ */

static const struct prom_family fam_build = {
    "stagefrontier_build_info", "gauge", "Version of this sfd (value 1, version in the label)."};
static const struct prom_family fam_records = {"stagefrontier_daemon_records_total", "counter",
                                               "Step records sfd accepted since it started."};
static const struct prom_family fam_batches = {"stagefrontier_daemon_record_batches_total",
                                               "counter",
                                               "Record batches sfd accepted since it started."};
static const struct prom_family fam_drops = {
    "stagefrontier_daemon_dropped_records_total", "counter",
    "Step records the clients reported dropped since sfd started."};
static const struct prom_family fam_windows = {"stagefrontier_daemon_windows_closed_total",
                                               "counter", "Windows sfd closed since it started."};
static const struct prom_family fam_rejections = {
    "stagefrontier_daemon_rejected_total", "counter",
    "Frames, records and queries sfd rejected since it started, by reason."};
static const struct prom_family fam_conns = {"stagefrontier_daemon_connections", "gauge",
                                             "Client (ingest) connections open now."};
static const struct prom_family fam_accepted = {
    "stagefrontier_daemon_connections_accepted_total", "counter",
    "Connections sfd accepted since it started, queries included."};
static const struct prom_family fam_role = {
    "stagefrontier_daemon_role_info", "gauge",
    "Role of this sfd in the cluster (value 1, role in the label)."};
static const struct prom_family fam_term = {"stagefrontier_daemon_term", "gauge",
                                            "Election term this sfd currently follows."};
static const struct prom_family fam_hist_enabled = {
    "stagefrontier_history_enabled", "gauge",
    "1 while the history store is in use (or retried for writing), else 0."};
static const struct prom_family fam_hist_written = {
    "stagefrontier_history_written_total", "counter",
    "Reports committed to the history store since sfd started."};
static const struct prom_family fam_hist_evicted = {
    "stagefrontier_history_evicted_total", "counter",
    "Oldest records deleted from the history store (its bound or a full disk)."};
static const struct prom_family fam_hist_restored = {
    "stagefrontier_history_restored_total", "counter",
    "Reports read back from the history store at startup."};
static const struct prom_family fam_hist_errors = {
    "stagefrontier_history_errors_total", "counter",
    "History store failures since sfd started, by kind (docs/OPERATIONS.md)."};
static const struct prom_family fam_hist_ro = {
    "stagefrontier_history_readonly_restores_total", "counter",
    "Startup restores from a store opened read-only (full disk or I/O error)."};
static const struct prom_family fam_hist_full = {
    "stagefrontier_history_full_retries_total", "counter",
    "History writes retried after evicting the oldest reports for a full disk."};
static const struct prom_family fam_jobs = {"stagefrontier_jobs", "gauge",
                                            "Jobs known to this sfd."};
static const struct prom_family fam_window = {"stagefrontier_job_window_index", "gauge",
                                              "Index of the latest closed window of the job."};
static const struct prom_family fam_window_time = {
    "stagefrontier_job_window_timestamp_seconds", "gauge",
    "Unix time at which the report of the latest closed window was ready."};
static const struct prom_family fam_steps = {"stagefrontier_job_window_steps", "gauge",
                                             "Complete steps in the latest closed window."};
static const struct prom_family fam_ranks = {"stagefrontier_job_window_ranks", "gauge",
                                             "Ranks seen in the latest closed window."};
static const struct prom_family fam_missing = {"stagefrontier_job_window_missing_ranks", "gauge",
                                               "Ranks missing from the latest closed window."};
static const struct prom_family fam_exposed = {
    "stagefrontier_job_exposed_seconds", "gauge",
    "Exposed (end-frontier) time of the latest closed window, in seconds."};
static const struct prom_family fam_share = {
    "stagefrontier_job_stage_ratio", "gauge",
    "Share of the exposed time advanced by each stage in the latest closed window, 0 to 1 (NaN "
    "when undefined)."};
static const struct prom_family fam_advance = {
    "stagefrontier_job_stage_advance_seconds", "gauge",
    "Frontier advance of each stage in the latest closed window, in seconds."};
static const struct prom_family fam_gshare = {
    "stagefrontier_job_group_ratio", "gauge",
    "Share of the exposed time advanced by each reporting group in the latest closed window, 0 to "
    "1 (NaN when undefined)."};
static const struct prom_family fam_routing = {
    "stagefrontier_job_routing_info", "gauge",
    "Routing set of the latest closed window: one series per routed group, position 1 first (value "
    "1)."};
static const struct prom_family fam_leader_steps = {
    "stagefrontier_job_leader_steps", "gauge",
    "The rank that most often led the first routed group in the latest closed window (label rank; "
    "absent when none led): steps in which it was the unique leader."};
static const struct prom_family fam_suspect = {
    "stagefrontier_job_suspect_rank_steps", "gauge",
    "Suspect ranks of the latest closed window: steps each uniquely led the leading stage."};
static const struct prom_family fam_label = {
    "stagefrontier_job_label_info", "gauge",
    "Report labels of the latest closed window (value 1 for each label that holds)."};
static const struct prom_family fam_downgrade = {
    "stagefrontier_job_downgrade_info", "gauge",
    "Downgrade reasons of the latest closed window (value 1 for each reason that holds)."};
static const struct prom_family fam_slowdown = {
    "stagefrontier_job_slowdown_ratio", "gauge",
    "Median step of the latest window over the median step of the job's baseline."};
static const struct prom_family fam_change = {
    "stagefrontier_job_change_seconds", "gauge",
    "Shift of the per-step frontier advance of a stage against the baseline (Hodges-Lehmann)."};
static const struct prom_family fam_waste = {
    "stagefrontier_job_waste_rank_seconds_total", "counter",
    "Rank-seconds lost to slowdown over the job's windows, (1 - 1/S) x ranks x window seconds."};
static const struct prom_family fam_dropped = {
    "stagefrontier_job_dropped_records_total", "counter",
    "Step records the clients of the job dropped, since sfd started."};
static const struct prom_family fam_rejected = {
    "stagefrontier_job_rejected_records_total", "counter",
    "Step records of the job that sfd rejected, since sfd started."};

static const struct prom_family fam_straggler = {
    "stagefrontier_job_straggler_info", "gauge",
    "Straggler verdict of the latest closed window: its rank, sync and origin stage and "
    "persistence in the labels (value 1; absent without a verdict)."};
static const struct prom_family fam_lateness = {
    "stagefrontier_job_straggler_lateness_seconds", "gauge",
    "Median lateness of the straggler verdict's rank at its sync point, in seconds."};
static const struct prom_family fam_arrival_missing = {
    "stagefrontier_job_arrival_missing_steps", "gauge",
    "Rank-steps of the latest closed window whose synchronizing stage had no arrival mark."};
static const struct prom_family fam_verdict = {
    "stagefrontier_job_live_verdict_info", "gauge",
    "The live verdict in force (docs/LIVE.md), its kind (straggler, change, stall), rank (empty "
    "for "
    "a change of the whole job) and stage as labels; the value is its effect in seconds a step "
    "(0 for a stall). Absent without a verdict."};
static const struct prom_family fam_verdict_events = {
    "stagefrontier_job_live_verdict_events_total", "counter",
    "Starts and ends of the job's live verdict since sfd started."};
static const struct prom_family fam_stalled = {
    "stagefrontier_job_stalled", "gauge",
    "1 while the job is stalled: a rank made no progress for stall_after_s (docs/SFD.md)."};
static const struct prom_family fam_state = {
    "stagefrontier_job_state", "gauge",
    "State of the job (value 1 for the state it is in, 0 for the others): running, stalled, or "
    "ended (no rank connected; removed prom_ended_keep_s later)."};
static const struct prom_family fam_rank_info = {
    "stagefrontier_rank_info", "gauge",
    "A rank's host, local rank and GPU (index or UUID, from CUDA_VISIBLE_DEVICES) as labels, for "
    "joins with node and GPU exporters (value 1)."};
static const struct prom_family fam_write_time = {
    "stagefrontier_textfile_write_timestamp_seconds", "gauge",
    "Unix time at which sfd wrote this file; sfd rewrites it at least every 10 s."};
static const struct prom_family fam_last_seen = {
    "stagefrontier_rank_last_seen_timestamp_seconds", "gauge",
    "Unix time at which sfd last heard from the rank (records or heartbeats)."};

static const struct prom_family fam_captures_started = {
    "stagefrontier_job_captures_started_total", "counter",
    "Trace captures of the job started since sfd started, by trigger (operator or auto)."};
static const struct prom_family fam_captures = {
    "stagefrontier_job_captures_total", "counter",
    "Trace captures of the job that ended since sfd started, by trigger and state (done: at "
    "least one rank wrote its trace; failed: none did)."};
static const struct prom_family fam_last_capture = {
    "stagefrontier_job_last_capture_timestamp_seconds", "gauge",
    "Unix time at which the job's latest trace capture was started."};

/* A job as rendered: its escaped id, or NULL when it is left out. */
struct prom_job_view {
    const struct sf_prom_job *job;
    char *id;
};

typedef int64_t (*window_field_fn)(const sf_report *r);

static int64_t field_window(const sf_report *r)
{
    return r->meta.index;
}
static int64_t field_steps(const sf_report *r)
{
    return r->steps;
}
static int64_t field_ranks(const sf_report *r)
{
    return r->ranks;
}
static int64_t field_missing(const sf_report *r)
{
    return r->missing_ranks;
}

static void write_window_field(struct prom_out *o, const struct prom_family *fam,
                               const struct prom_job_view *v, size_t n, window_field_fn field)
{
    char buf[32];

    fam_begin(o, fam);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL || v[i].job->latest == NULL)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_i64(buf, sizeof buf, field(v[i].job->latest)));
    }
}

static void write_exposed(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[40];

    fam_begin(o, &fam_exposed);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL || v[i].job->latest == NULL)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_double(buf, sizeof buf, ns_to_s(v[i].job->latest->exposed_total_ns)));
    }
}

static void write_window_time(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[40];

    fam_begin(o, &fam_window_time);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL || v[i].job->latest == NULL || v[i].job->window_unix_ms <= 0)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_double(buf, sizeof buf, (double)v[i].job->window_unix_ms / 1e3));
    }
}

/* The answer itself: who leads the routed group, and the suspect ranks. */
static void write_leaders(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[32], rank[16];

    fam_begin(o, &fam_leader_steps);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL || r->n_routing == 0 || r->routing_order[0] >= r->schema.n_groups)
            continue;
        const sf_unit_figures *u = &r->groups[r->routing_order[0]];
        if (u->leader_rank == SF_NO_RANK)
            continue;
        snprintf(rank, sizeof rank, "%" PRIu32, u->leader_rank);
        struct prom_label l[] = {{"job_id", v[i].id},
                                 {"group", r->schema.group_names[r->routing_order[0]]},
                                 {"rank", rank}};
        emit(o, l, 3, fmt_u64(buf, sizeof buf, u->leader_steps));
    }
    fam_begin(o, &fam_suspect);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        for (uint32_t k = 0; r != NULL && k < r->n_suspects; k++) {
            snprintf(rank, sizeof rank, "%" PRIu32, r->suspects[k].rank);
            struct prom_label l[] = {{"job_id", v[i].id}, {"rank", rank}};
            emit(o, l, 2, fmt_u64(buf, sizeof buf, r->suspects[k].steps));
        }
    }
}

/* Per stage: share (advance == false) or advance seconds (advance == true). */
static void write_stages(struct prom_out *o, const struct prom_family *fam,
                         const struct prom_job_view *v, size_t n, bool advance)
{
    char buf[40];

    fam_begin(o, fam);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL)
            continue;
        for (uint32_t s = 0; s < r->schema.n_stages && s < SF_MAX_STAGES; s++) {
            const sf_unit_figures *u = &r->stages[s];
            struct prom_label l[] = {
                {"job_id", v[i].id}, {"stage", r->schema.names[s]}, {"group", r->schema.groups[s]}};
            double x = advance ? (double)u->advance_ns / 1e9 : u->share;
            emit(o, l, 3, fmt_double(buf, sizeof buf, x));
        }
    }
}

static void write_group_shares(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[40];

    fam_begin(o, &fam_gshare);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL)
            continue;
        for (uint32_t g = 0; g < r->schema.n_groups && g < SF_MAX_STAGES; g++) {
            struct prom_label l[] = {{"job_id", v[i].id}, {"group", r->schema.group_names[g]}};
            emit(o, l, 2, fmt_double(buf, sizeof buf, r->groups[g].share));
        }
    }
}

static void write_routing(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char pos[16];

    fam_begin(o, &fam_routing);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL)
            continue;
        for (uint32_t k = 0; k < r->n_routing && k < SF_MAX_STAGES; k++) {
            uint32_t g = r->routing_order[k];
            if (g >= r->schema.n_groups)
                continue;
            snprintf(pos, sizeof pos, "%" PRIu32, k + 1);
            struct prom_label l[] = {
                {"job_id", v[i].id}, {"position", pos}, {"group", r->schema.group_names[g]}};
            emit(o, l, 3, "1");
        }
    }
}

/* Info series for the set bits of a label or downgrade bit set. */
static void write_bits(struct prom_out *o, const struct prom_family *fam,
                       const struct prom_job_view *v, size_t n, bool labels)
{
    fam_begin(o, fam);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL)
            continue;
        unsigned count = labels ? SF_LABEL_COUNT : SF_DG_COUNT;
        uint32_t bits = labels ? r->labels : r->downgrades;
        for (unsigned b = 0; b < count; b++) {
            if (!(bits & (UINT32_C(1) << b)))
                continue;
            const char *name =
                labels ? sf_label_name((enum sf_label)b) : sf_downgrade_name((enum sf_downgrade)b);
            struct prom_label l[] = {{"job_id", v[i].id},
                                     {labels ? "label" : "reason", name ? name : "unknown"}};
            emit(o, l, 2, "1");
        }
    }
}

/* The verdict: its rank (labels say where) and its lateness, per job. */
static void write_straggler(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[40], rank[16];

    fam_begin(o, &fam_straggler);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL || !r->straggler.present)
            continue;
        const sf_straggler *s = &r->straggler;
        struct prom_label l[] = {{"job_id", v[i].id},
                                 {"sync_stage", r->schema.names[s->sync_stage]},
                                 {"origin_stage", r->schema.names[s->origin_stage]},
                                 {"persistence", sf_persistence_name(s->persistence)}};
        snprintf(rank, sizeof rank, "%" PRIu32, s->rank);
        struct prom_label li[] = {l[0], {"rank", rank}, l[1], l[2], l[3]};
        emit(o, li, 5, "1");
    }
    fam_begin(o, &fam_lateness);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL || !r->straggler.present)
            continue;
        snprintf(rank, sizeof rank, "%" PRIu32, r->straggler.rank);
        struct prom_label l[] = {{"job_id", v[i].id}, {"rank", rank}};
        emit(o, l, 2, fmt_double(buf, sizeof buf, ns_to_s(r->straggler.median_lateness_ns)));
    }
    fam_begin(o, &fam_arrival_missing);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL || r->schema.sync_mask == 0)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_u64(buf, sizeof buf, r->arrival_missing_steps));
    }
}

static void write_counters(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[32];

    fam_begin(o, &fam_dropped);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_u64(buf, sizeof buf, v[i].job->dropped));
    }
    fam_begin(o, &fam_rejected);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_u64(buf, sizeof buf, v[i].job->rejected));
    }
}

/* The change of the latest window against the baseline, and the waste. */
static void write_change(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[40];

    fam_begin(o, &fam_slowdown);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL || r->change == NULL || isnan(r->change->slowdown))
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_double(buf, sizeof buf, r->change->slowdown));
    }
    fam_begin(o, &fam_change);
    for (size_t i = 0; i < n; i++) {
        const sf_report *r = v[i].id ? v[i].job->latest : NULL;
        if (r == NULL || r->change == NULL)
            continue;
        for (uint32_t s = 0; s < r->change->n_stages && s < SF_MAX_STAGES; s++) {
            struct prom_label l[] = {{"job_id", v[i].id}, {"stage", r->schema.names[s]}};
            double x = (double)r->change->stages[s].shift.delta_ns / 1e9;
            emit(o, l, 2, fmt_double(buf, sizeof buf, x));
        }
    }
    fam_begin(o, &fam_waste);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_double(buf, sizeof buf, v[i].job->waste_rank_s));
    }
}

static void write_verdict(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[40], rank[24];
    fam_begin(o, &fam_verdict);
    for (size_t i = 0; i < n; i++) {
        const struct sf_prom_job *j = v[i].job;
        if (v[i].id == NULL || j->verdict_kind == NULL)
            continue;
        rank[0] = '\0';
        if (j->verdict_rank >= 0)
            snprintf(rank, sizeof rank, "%lld", (long long)j->verdict_rank);
        struct prom_label l[] = {{"job_id", v[i].id},
                                 {"kind", j->verdict_kind},
                                 {"rank", rank},
                                 {"stage", j->verdict_stage ? j->verdict_stage : ""}};
        emit(o, l, 4, fmt_double(buf, sizeof buf, j->verdict_effect_s));
    }
    fam_begin(o, &fam_verdict_events);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)v[i].job->verdict_events);
        emit(o, l, 1, buf);
    }
}

static const char *const state_names[SF_PROM_JOB_STATES] = {"running", "stalled", "ended"};

static void write_liveness(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[40], rank[16];

    fam_begin(o, &fam_state);
    for (size_t i = 0; i < n; i++)
        for (int st = 0; v[i].id != NULL && st < SF_PROM_JOB_STATES; st++) {
            struct prom_label l[] = {{"job_id", v[i].id}, {"state", state_names[st]}};
            emit(o, l, 2, (int)v[i].job->state == st ? "1" : "0");
        }
    fam_begin(o, &fam_stalled);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, v[i].job->state == SF_PROM_JOB_STALLED ? "1" : "0");
    }
    fam_begin(o, &fam_last_seen);
    for (size_t i = 0; i < n; i++) {
        const struct sf_prom_job *j = v[i].job;
        if (v[i].id == NULL || j->ranks == NULL || j->last_seen_unix_ms == NULL)
            continue;
        for (size_t k = 0; k < j->n_ranks && k < SF_PROM_MAX_RANK_SERIES; k++) {
            if (j->last_seen_unix_ms[k] <= 0)
                continue;
            snprintf(rank, sizeof rank, "%u", j->ranks[k]);
            struct prom_label l[] = {{"job_id", v[i].id}, {"rank", rank}};
            emit(o, l, 2, fmt_double(buf, sizeof buf, (double)j->last_seen_unix_ms[k] / 1000.0));
        }
    }
}

/* One rank's info series. A label sfd does not know is empty (which
 * Prometheus reads as absent), so an unknown GPU never joins with GPU 0 and
 * the family keeps one label set. Host and GPU come from clients: escaped
 * here. Returns false when out of memory. */
static bool emit_rank_info(struct prom_out *o, const char *job, uint32_t rank,
                           const struct sf_prom_rank_info *ri)
{
    char rank_s[16], local_s[16] = "";
    char *host = escape_label(ri->host), *gpu = escape_label(ri->gpu);

    if (host == NULL || gpu == NULL) {
        free(host);
        free(gpu);
        return false;
    }
    snprintf(rank_s, sizeof rank_s, "%" PRIu32, rank);
    if (ri->local_rank >= 0)
        snprintf(local_s, sizeof local_s, "%" PRId32, ri->local_rank);
    struct prom_label l[] = {
        {"job_id", job}, {"rank", rank_s}, {"host", host}, {"local_rank", local_s}, {"gpu", gpu}};
    emit(o, l, 5, "1");
    free(host);
    free(gpu);
    return true;
}

static int write_rank_info(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    fam_begin(o, &fam_rank_info);
    for (size_t i = 0; i < n; i++) {
        const struct sf_prom_job *j = v[i].job;
        if (v[i].id == NULL || j->ranks == NULL || j->rank_info == NULL)
            continue;
        for (size_t k = 0; k < j->n_ranks && k < SF_PROM_MAX_RANK_SERIES; k++)
            if (!emit_rank_info(o, v[i].id, j->ranks[k], &j->rank_info[k]))
                return -ENOMEM;
    }
    return 0;
}

static const char *const trigger_names[SF_PROM_TRIGGERS] = {"operator", "auto"};

/* Counters by trigger (and state): every series from zero, so that rate()
 * and increase() see the first capture. */
static void write_captures(struct prom_out *o, const struct prom_job_view *v, size_t n)
{
    char buf[40];

    fam_begin(o, &fam_captures_started);
    for (size_t i = 0; i < n; i++)
        for (int t = 0; v[i].id != NULL && t < SF_PROM_TRIGGERS; t++) {
            struct prom_label l[] = {{"job_id", v[i].id}, {"trigger", trigger_names[t]}};
            emit(o, l, 2, fmt_u64(buf, sizeof buf, v[i].job->captures_started[t]));
        }
    fam_begin(o, &fam_captures);
    for (size_t i = 0; i < n; i++)
        for (int t = 0; v[i].id != NULL && t < SF_PROM_TRIGGERS * 2; t++) {
            const struct sf_prom_job *j = v[i].job;
            bool done = t % 2 == 0;
            struct prom_label l[] = {{"job_id", v[i].id},
                                     {"trigger", trigger_names[t / 2]},
                                     {"state", done ? "done" : "failed"}};
            uint64_t count = done ? j->captures_done[t / 2] : j->captures_failed[t / 2];
            emit(o, l, 3, fmt_u64(buf, sizeof buf, count));
        }
    fam_begin(o, &fam_last_capture);
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == NULL || v[i].job->last_capture_unix_ms <= 0)
            continue;
        struct prom_label l[] = {{"job_id", v[i].id}};
        emit(o, l, 1, fmt_double(buf, sizeof buf, (double)v[i].job->last_capture_unix_ms / 1e3));
    }
}

static void write_u64(struct prom_out *o, const struct prom_family *fam, uint64_t v)
{
    char buf[32];

    fam_begin(o, fam);
    emit(o, NULL, 0, fmt_u64(buf, sizeof buf, v));
}

/* Label values of the daemon's families, escaped once by sfd_prom_write. */
struct prom_daemon_labels {
    const char *version, *role;
    char **reasons; /* [n_rejected] */
};

static void write_daemon(struct prom_out *o, const struct sf_prom_daemon *d,
                         const struct prom_daemon_labels *dl)
{
    char buf[32];
    struct prom_label vl[] = {{"version", dl->version}};
    struct prom_label rl[] = {{"role", dl->role}};

    fam_begin(o, &fam_build);
    emit(o, vl, 1, "1");
    fam_begin(o, &fam_role);
    emit(o, rl, 1, "1");
    write_u64(o, &fam_term, d->term);
    write_u64(o, &fam_records, d->records);
    write_u64(o, &fam_batches, d->batches);
    write_u64(o, &fam_drops, d->dropped);
    write_u64(o, &fam_windows, d->windows_closed);
    fam_begin(o, &fam_rejections);
    for (size_t i = 0; i < d->n_rejected; i++) {
        struct prom_label l[] = {{"reason", dl->reasons[i]}};
        emit(o, l, 1, fmt_u64(buf, sizeof buf, d->rejected[i].count));
    }
    write_u64(o, &fam_conns, d->connections);
    write_u64(o, &fam_accepted, d->connections_accepted);
    if (d->write_unix_ms > 0) {
        fam_begin(o, &fam_write_time);
        emit(o, NULL, 0, fmt_double(buf, sizeof buf, (double)d->write_unix_ms / 1e3));
    }
}

static void write_history(struct prom_out *o, const struct sf_prom_history *h)
{
    char buf[32];
    const struct {
        const char *kind;
        uint64_t n;
    } errors[] = {{"open", h->open_errors},       {"read", h->read_errors},
                  {"restore", h->restore_errors}, {"write", h->write_errors},
                  {"reopen", h->reopen_errors},   {"queue_dropped", h->queue_dropped},
                  {"refused", h->refused},        {"damaged", h->damaged}};

    write_u64(o, &fam_hist_enabled, h->enabled ? 1 : 0);
    write_u64(o, &fam_hist_written, h->written);
    write_u64(o, &fam_hist_evicted, h->evicted);
    write_u64(o, &fam_hist_restored, h->restored);
    fam_begin(o, &fam_hist_errors);
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        struct prom_label l[] = {{"kind", errors[i].kind}}; /* constants: nothing to escape */
        emit(o, l, 1, fmt_u64(buf, sizeof buf, errors[i].n));
    }
    write_u64(o, &fam_hist_ro, h->readonly_restores);
    write_u64(o, &fam_hist_full, h->full_retries);
}

static int write_all(FILE *f, const struct prom_job_view *v, size_t n, size_t n_exported,
                     const struct sf_prom_daemon *d, const struct prom_daemon_labels *dl)
{
    struct prom_out o = {.f = f};

    write_daemon(&o, d, dl);
    if (d->history != NULL)
        write_history(&o, d->history);
    write_u64(&o, &fam_jobs, n_exported);

    write_window_field(&o, &fam_window, v, n, field_window);
    write_window_time(&o, v, n);
    write_window_field(&o, &fam_steps, v, n, field_steps);
    write_window_field(&o, &fam_ranks, v, n, field_ranks);
    write_window_field(&o, &fam_missing, v, n, field_missing);
    write_exposed(&o, v, n);
    write_stages(&o, &fam_share, v, n, false);
    write_stages(&o, &fam_advance, v, n, true);
    write_group_shares(&o, v, n);
    write_routing(&o, v, n);
    write_leaders(&o, v, n);
    write_bits(&o, &fam_label, v, n, true);
    write_bits(&o, &fam_downgrade, v, n, false);
    write_straggler(&o, v, n);
    write_liveness(&o, v, n);
    write_verdict(&o, v, n);
    if (write_rank_info(&o, v, n) < 0)
        return -ENOMEM;
    write_captures(&o, v, n);
    write_counters(&o, v, n);
    write_change(&o, v, n);
    return 0;
}

/* ---- job ids ------------------------------------------------------------- */

static void views_free(struct prom_job_view *v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i].id);
    free(v);
}

/* Escapes every job id. A job whose escaped id equals an earlier one is left
 * out (id NULL): two series with one label set would make the whole file
 * invalid, and a client must not be able to break the export of others. */
static int views_build(const struct sf_prom_job *jobs, size_t n, struct prom_job_view **ret,
                       size_t *ret_skipped)
{
    struct prom_job_view *v = calloc(n ? n : 1, sizeof *v);
    size_t skipped = 0;

    if (v == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        v[i].job = &jobs[i];
        v[i].id = escape_label(jobs[i].job_id);
        if (v[i].id == NULL) {
            views_free(v, i);
            return -ENOMEM;
        }
        for (size_t j = 0; j < i; j++) {
            if (v[j].id && strcmp(v[j].id, v[i].id) == 0) {
                free(v[i].id);
                v[i].id = NULL;
                skipped++;
                break;
            }
        }
    }
    *ret = v;
    *ret_skipped = skipped;
    return 0;
}

static void daemon_labels_free(struct prom_daemon_labels *dl, size_t n_reasons)
{
    free((char *)dl->version);
    free((char *)dl->role);
    for (size_t i = 0; dl->reasons != NULL && i < n_reasons; i++)
        free(dl->reasons[i]);
    free(dl->reasons);
}

static int daemon_labels_build(const struct sf_prom_daemon *d, struct prom_daemon_labels *dl)
{
    dl->version = escape_label(d->version ? d->version : "unknown");
    dl->role = escape_label(d->role ? d->role : "unknown");
    dl->reasons = calloc(d->n_rejected ? d->n_rejected : 1, sizeof(*dl->reasons));
    if (dl->version == NULL || dl->role == NULL || dl->reasons == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < d->n_rejected; i++)
        if ((dl->reasons[i] = escape_label(d->rejected[i].reason)) == NULL)
            return -ENOMEM;
    return 0;
}

int sf_prom_render(FILE *f, const struct sf_prom_daemon *daemon, const struct sf_prom_job *jobs,
                   size_t n)
{
    struct prom_job_view *v = NULL;
    struct prom_daemon_labels dl = {0};
    size_t skipped = 0;
    int r;

    if (f == NULL || daemon == NULL || (n > 0 && jobs == NULL) ||
        (daemon->n_rejected > 0 && daemon->rejected == NULL))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].job_id == NULL)
            return -EINVAL;

    r = daemon_labels_build(daemon, &dl);
    if (r < 0)
        goto out;
    r = views_build(jobs, n, &v, &skipped);
    if (r < 0)
        goto out;
    r = write_all(f, v, n, n - skipped, daemon, &dl);
    if (r == 0)
        r = (int)(skipped > INT32_MAX ? INT32_MAX : skipped);
out:
    views_free(v, n);
    daemon_labels_free(&dl, daemon->n_rejected);
    return r;
}

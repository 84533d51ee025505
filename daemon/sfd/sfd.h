/*
 * sfd private header: the daemon context, its job table, connections and
 * configuration, with the prototypes of each file grouped by file. Only sfd's
 * own sources include it; nothing here is a public interface.
 */
#ifndef SFD_H
#define SFD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <uv.h>

#include "arena.h"
#include "stagefrontier/change.h"
#include "stagefrontier/parallel.h"
#include "stagefrontier/live.h"

#include "cluster.h"
#include "liveness.h"

struct Stagefrontier__ClientMessage;
struct Stagefrontier__Hello;
struct Stagefrontier__RecordBatch;
struct Stagefrontier__NcclBatch;
struct Stagefrontier__StepRecord;
struct sfd_side; /* side_evidence.h */
struct sfd_history;
struct sfd_history_counters; /* history.h */
struct sfd;
struct sfd_job;

#define SFD_PATH_MAX 108    /* sun_path */
#define SFD_CHANNEL_NCCL 1u /* a hello's channel: 0 step records, 2 heartbeats */
#define SFD_HOST_MAX 255
#define SFD_ROLE_MAX 64
#define SFD_GPU_NAME_MAX 64 /* a hello's GPU index or UUID */
/* How long an ended job stays in the Prometheus export (prom_ended_keep_s),
 * and how often the file is rewritten when nothing changes. */
#define SFD_PROM_ENDED_KEEP_DEFAULT_S 300
#define SFD_PROM_ENDED_KEEP_MAX_S (7 * 86400)
#define SFD_PROM_REFRESH_MS 10000
#define SFD_MAX_JOB_ROLES 64     /* distinct role strings per job */
#define SFD_MAX_OPEN_WINDOWS 256 /* open windows per job */
#define SFD_FRAME_MAX_CAP (16u << 20)
#define SFD_QUERY_REQ_MAX 4096
#define SFD_MAX_QUERY_CONNS 64 /* beyond max_connections, for operators */
#define SFD_QUERY_CHUNK (48u * 1024)
#define SFD_QUERY_RESERVED 16     /* of SFD_MAX_QUERY_CONNS, for root and operators */
#define SFD_QUERY_TURN_NS 2000000 /* loop time one query client gets per turn */

/* ---- config.c ------------------------------------------------------------ */

enum sfd_log_level {
    SFD_LOG_ERR = 3,
    SFD_LOG_WARNING = 4,
    SFD_LOG_NOTICE = 5,
    SFD_LOG_INFO = 6,
    SFD_LOG_DEBUG = 7
};

struct sfd_config {
    char runtime_dir[SFD_PATH_MAX];
    char ingest_path[SFD_PATH_MAX];
    char query_path[SFD_PATH_MAX];
    char prom_dir[4096];
    char state_dir[4096]; /* durable history (history.c), peer replay state; empty: off */
    char operators_group[64];
    sf_gates gates;
    sf_live_config live; /* the live verdict's gates (docs/LIVE.md) */
    bool live_verdict;   /* run the live test at all (docs/LIVE.md, "Gates") */
    uint32_t max_jobs, max_connections, max_ranks, max_pending_steps;
    uint32_t max_jobs_per_uid;
    uint32_t max_memory_mb, max_memory_per_uid_mb;
    uint32_t frame_max_bytes, keep_windows;
    uint32_t max_history_mb; /* bound of the history store; 0: off */
    bool history_rows;       /* store two windows of rows per job, for pictures */
    uint64_t window_grace_ms, status_interval_ms;
    /* Connection fairness (conn_limits.c). */
    uint32_t max_connections_per_uid, max_query_connections_per_uid;
    uint64_t hello_timeout_ms, query_idle_timeout_ms;
    bool watchdog;
    int log_level;
    /* The change alert hook (alert.c): argv split on blanks, no shell. */
    char alert_command[1024];
    uint32_t alert_windows;
    uint64_t alert_interval_ms;
    /* Liveness and captures (liveness.c, capture.c). */
    uint32_t stall_after_s;
    int64_t prom_ended_keep_s; /* an ended job stays in the export this long */
    bool auto_capture;
    uint32_t auto_capture_windows, auto_capture_max, auto_capture_steps;
    uint32_t auto_capture_cooldown_s, capture_timeout_s;
};

void sfd_config_default(struct sfd_config *ret);
/* Parses an ini file on top of *cfg. On failure writes a one-line reason
 * into err and returns -EINVAL (or -errno when the file cannot be read). */
int sfd_config_load(struct sfd_config *cfg, const char *path, char *err, size_t errlen);
/* Same parser over a string, for the fuzz target and unit checks. */
int sfd_config_parse_string(struct sfd_config *cfg, const char *text, char *err, size_t errlen);
int sfd_config_validate(const struct sfd_config *cfg, char *err, size_t errlen);
int sfd_log_level_parse(const char *s);

/* ---- counters ------------------------------------------------------------ */

enum sfd_reject {
    SFD_REJ_OVERSIZED,   /* frame longer than frame_max_bytes */
    SFD_REJ_UNDECODABLE, /* garbage or truncated protobuf */
    SFD_REJ_INVALID,     /* a field out of its bounds */
    SFD_REJ_PROTOCOL,    /* no hello first, second hello, wrong version */
    SFD_REJ_SCHEMA_HASH, /* hash does not match names, or batch hash != hello's */
    SFD_REJ_DUPLICATE_RANK,
    SFD_REJ_WORLD_SIZE,      /* conflicting world size while ranks are live */
    SFD_REJ_SCHEMA_CONFLICT, /* conflicting schema/accumulation while live */
    SFD_REJ_MAX_JOBS,
    SFD_REJ_MAX_JOBS_PER_UID, /* the uid already has max_jobs_per_uid jobs */
    SFD_REJ_MEMORY,           /* the uid's or the daemon's memory budget is spent */
    SFD_REJ_MAX_CONNECTIONS,
    SFD_REJ_MAX_RANKS,
    SFD_REJ_PENDING,          /* record beyond max_pending_steps */
    SFD_REJ_LATE,             /* record for an already closed window */
    SFD_REJ_DUPLICATE_RECORD, /* step not after the rank's previous step */
    SFD_REJ_QUERY_BAD,        /* bad query request */
    SFD_REJ_QUERY_DENIED,
    SFD_REJ_UID_CONNECTIONS, /* a uid's share of connections is full */
    SFD_REJ_HELLO_TIMEOUT,   /* ingest connection without a hello in time */
    SFD_REJ_QUERY_TIMEOUT,   /* query client that stopped reading or asking */
    SFD_REJ_ARRIVAL_RANGE,   /* arrival or NCCL enqueue point outside 0..its stage's duration */
    SFD_REJ_ARRIVAL_STAGE,   /* arrival or enqueue point in a stage that is not synchronizing */
    SFD_REJ_CAPTURE_REPLY,   /* capture reply: unknown id, another rank's, or after its end */
    SFD_REJ_HEARTBEAT,       /* heartbeat out of bounds or on the wrong connection */
    SFD_REJ_FUTURE,          /* step past the step gate of the job's other ranks */
    /* parallel coordinates (docs/SFD.md, "Parallel coordinates"): */
    SFD_REJ_PARALLEL_INVALID,  /* an index not below its size, sizes not multiplying to the world */
    SFD_REJ_PARALLEL_CONFLICT, /* another shape than the job's, a tuple taken, or a change */
    SFD_REJ_KERNEL_TIME,       /* NCCL kernel times without a point, out of order or range */
    SFD_REJ_SYNC_GROUP,        /* hello: sync_groups not one per sync stage, or unknown */
    SFD_REJ_SYNC_WAIT,         /* accumulated sync wait or count out of range, or alone */
    SFD_REJ_COUNT
};
const char *sfd_reject_name(enum sfd_reject r);
/* Counts a rejection and logs it with the peer's credentials (pid < 0: the
 * peer is unknown), rate-limited per reason. */
void sfd_count_reject_from(struct sfd *d, struct sfd_job *job, enum sfd_reject why, uint64_t n,
                           pid_t pid, uid_t uid);
/* The same for a connection's peer (c NULL: unknown). */
struct sfd_conn;
void sfd_count_reject(struct sfd *d, struct sfd_job *job, enum sfd_reject why, uint64_t n,
                      const struct sfd_conn *c);

struct sfd_counters {
    uint64_t connections_accepted, query_requests;
    uint64_t records, batches, nccl_batches, warmup_records;
    uint64_t enqueue_points;             /* distinct (rank, step, stage) NCCL enqueue points kept */
    uint64_t kernel_points;              /* of them, those that got their kernel's GPU times */
    uint64_t kernel_issue_lags;          /* rows' issue lags taken from a kernel start */
    uint64_t dropped;                    /* client-reported drops, summed deltas */
    uint64_t shed_batches, shed_records; /* dropped unread while the loop was behind */
    uint64_t windows_closed;
    uint64_t rejected[SFD_REJ_COUNT];
};

/* Adds to a counter that JSON shows as a signed 64-bit integer: it stops at
 * INT64_MAX instead of wrapping, so a hostile total never shows negative. */
static inline void sfd_sat_add(uint64_t *counter, uint64_t n)
{
    uint64_t cap = (uint64_t)INT64_MAX;
    *counter = *counter > cap - (n > cap ? cap : n) ? cap : *counter + n;
}

/* ---- budget.c ------------------------------------------------------------ */

/* What the bytes hold. A new kind of per-job state (baselines, say) gets a
 * kind here and goes through sfd_mem_reserve / sfd_job_release. */
enum sfd_mem_kind {
    SFD_MEM_JOBS,      /* job structs and their kept-window rings */
    SFD_MEM_RANKS,     /* per-rank state, in pages as ranks appear */
    SFD_MEM_WINDOWS,   /* open windows and their rows */
    SFD_MEM_KEPT_ROWS, /* rows of closed windows, kept for RECORD */
    SFD_MEM_REPORTS,
    SFD_MEM_BUFFERS,    /* the daemon's own I/O buffers */
    SFD_MEM_ENQ_POINTS, /* a job's table of NCCL enqueue points */
    SFD_MEM_KIND_COUNT
};
const char *sfd_mem_kind_name(enum sfd_mem_kind k);

/* Owner of the daemon's own buffers: counted in the total, in no uid's share. */
#define SFD_UID_DAEMON ((uid_t)-2)

struct sfd_uid_share {
    uid_t uid;
    uint32_t jobs;
    uint64_t bytes;
};

struct sfd_budget {
    uint64_t used;
    uint64_t by_kind[SFD_MEM_KIND_COUNT];
    uint64_t evicted_windows;   /* kept windows that lost their rows */
    struct sfd_uid_share *uids; /* uids with jobs or bytes */
    uint32_t n_uids, cap_uids;
};

struct sfd_budget_limits {
    uint64_t total, per_uid; /* bytes */
};

struct sfd_uid_share *sfd_budget_share(const struct sfd_budget *b, uid_t uid);
/* Counts a new job of uid: -EDQUOT at max_jobs_per_uid, -ENOMEM. */
int sfd_budget_job_add(struct sfd_budget *b, uid_t uid, uint32_t max_jobs_per_uid);
void sfd_budget_job_remove(struct sfd_budget *b, uid_t uid);
/* Charges n bytes if neither limit is passed: 0, or -ENOMEM with nothing
 * charged. */
int sfd_budget_charge(struct sfd_budget *b, const struct sfd_budget_limits *lim, uid_t uid,
                      enum sfd_mem_kind kind, uint64_t n);
/* Charges memory that must stay whatever the limits (reports). */
void sfd_budget_force(struct sfd_budget *b, uid_t uid, enum sfd_mem_kind kind, uint64_t n);
void sfd_budget_uncharge(struct sfd_budget *b, uid_t uid, enum sfd_mem_kind kind, uint64_t n);
uint64_t sfd_budget_uid_bytes(const struct sfd_budget *b, uid_t uid);
/* STATUS's "memory" object. */
struct json_t *sfd_budget_json(const struct sfd_budget *b, const struct sfd_budget_limits *lim);
void sfd_budget_free(struct sfd_budget *b);

/* ---- jobs.c -------------------------------------------------------------- */

struct sfd_rank {
    int64_t last_step; /* -1: nothing yet */
    uint64_t records;
    uint32_t pid;
    uint16_t host;    /* index into job->hosts: kept after the rank leaves */
    uint8_t role;     /* index into job->roles */
    uint8_t live : 1; /* a step-record connection is open */
    uint8_t seen : 1;
    /* liveness (liveness.c): where its records and heartbeats put it */
    uint8_t pos_in_step : 1; /* inside step pos_step (else after it) */
    uint8_t stalled : 1;
    uint8_t culprit : 1;
    uint8_t hello_seen : 1;        /* a step-record hello was accepted (parallel.c) */
    uint8_t declared_parallel : 1; /* ... with coordinates, kept in job->par */
    int16_t pos_stage;             /* open recorded stage, -1: none or unknown */
    uint16_t gpu;                  /* index into job->hosts of its hello's GPU, 0: unknown */
    int32_t local_rank;            /* its hello's local rank, -1: unknown */
    int64_t pos_step;              /* -1: nothing yet */
    int64_t last_seen_unix_ms;     /* realtime of its last message, 0: never */
    uint64_t seen_ms;              /* sfd's monotonic ms of that message */
    uint64_t moved_ms;             /* monotonic ms when its position last changed */
    int64_t claimed_step;          /* highest step it sent, accepted or not, -1 (the step gate) */
};
_Static_assert(sizeof(struct sfd_rank) == 72, "pages of ranks are charged per job: keep it small");
_Static_assert(SFD_MAX_JOB_ROLES <= 256, "a rank's role index is one byte");

/* Per-rank state comes in pages of this many ranks, allocated when a rank of
 * the page first appears, never from the declared world size alone. */
#define SFD_RANK_PAGE 256

/* Compact copy of one accepted record; durations live in the window's d[]. */
struct sfd_rec {
    int64_t step, overlap_ns, event_cpu_ns, event_gpu_ns;
    uint32_t rank, flags;
    uint16_t role;
    uint8_t event_state;
};

struct sfd_rows {
    struct sfd_rec *rec;
    int64_t *d; /* n * n_stages */
    /* n * sfd_rows_mark_count: each row's issue lags (sf_row.issue_lag),
     * then its accumulated sync waits and counts (sf_row.sync_wait; -1 and
     * 0 when it has none); NULL for a schema without synchronizing stages. */
    int64_t *lag;
    size_t n, cap;
    uint64_t bytes; /* allocated, as charged to the budget */
};

/* The (step, rank) order of an open window's rows, kept as they arrive
 * (windows.c): per step a list sorted by rank, linked through next[]. */
struct sfd_row_order {
    uint32_t *head, *tail; /* [window steps]: first and last row of a step */
    uint32_t *count;       /* [window steps]: rows of the step (the live verdict's cue) */
    uint32_t *next;        /* [rows cap]: the step's next row by rank */
    size_t next_cap;
    uint64_t bytes; /* charged to the job's windows */
    bool given_up;  /* a walk too long, or no memory: the core sorts */
};

/* A window being assembled. */
struct sfd_window {
    sf_window_meta meta;
    struct sfd_rows rows;
    struct sfd_row_order order;
    uint64_t deadline_ms; /* 0: none armed */
    bool complete;
    bool notice_only; /* opened by a drop or reconnect notice, no row yet */
};

/* A closed window: the rows and meta fed to the core and, once computed or
 * received, its report. */
struct sfd_stored {
    sf_window_meta meta;
    struct sfd_rows rows;
    sf_report *report;     /* NULL until the report is ready */
    bool remote;           /* no rows here: a cluster report of ranks on other
                            * nodes, or a report restored from history
                            * without its rows */
    bool rows_evicted;     /* rows freed for the memory budget; the report stays */
    uint64_t seq;          /* order of closing, daemon-wide: oldest evicts first */
    uint64_t report_bytes; /* charged for report */
};

/* The job's reference and change state (baseline.c). */
struct sfd_baseline {
    sf_reference_collector collector; /* the first eligible windows */
    sf_reference *automatic;
    sf_reference *pinned;   /* sfctl baseline --pin: wins over automatic */
    sf_change_pool pool;    /* the latest windows, pooled into the next change */
    uint64_t pool_bytes;    /* what the pool holds, charged as report memory */
    uint64_t pool_refused;  /* windows the pool dropped for want of memory share */
    bool pool_short;        /* the last offer was refused (logged once) */
    uint32_t changed_run;   /* consecutive windows with a significant change */
    uint64_t last_alert_ms; /* 0: never */
    bool alert_running;
    uint64_t alerts_run, alerts_suppressed, alerts_failed;
    double waste_rank_s; /* what-if waste over the job's windows */
};

/* The job's live verdict (verdict.c, docs/LIVE.md): the core's sequential
 * test, fed each complete step, and the verdict's starts and ends. */
#define SFD_VERDICT_EVENTS 64
struct sfd_verdict_event {
    uint64_t seq; /* 1, 2, ... over the job */
    bool start;   /* else an end */
    int64_t at_ms;
    int64_t step;
    sf_live_verdict v;
};
struct sfd_verdict {
    sf_live *test; /* NULL: none (mergeable mode, cluster mode, or before the first window) */
    uint64_t schema_hash;
    uint32_t world_size;
    int64_t *rows; /* [world_size][n_stages] one step's rows in rank order */
    int64_t *lags; /* [world_size][synchronizing stages] their issue lags; NULL: none */
    struct sfd_verdict_event events[SFD_VERDICT_EVENTS]; /* ring, oldest overwritten */
    uint64_t seq;
    uint64_t written;       /* events handed to the history (sfd_history_put_verdict_events) */
    uint64_t skipped_steps; /* complete steps not tested: the window's order was given up */
    /* In a cluster (verdict_cluster.c, docs/LIVE.md "In a cluster"): the
     * root's assembly of the members' parts, and a member's batch of its
     * ranks' rows on their way to the root. */
    struct sfd_live_assembly *assembly; /* NULL: none (not the root, or no test yet) */
    uint64_t assembly_bytes;            /* charged to the job's windows */
    struct sfd_live_batch *batch;       /* NULL: none (standalone, or nothing sent yet) */
    uint64_t parts_unsent;              /* a member's batches no root took (none, or a link down) */
    uint64_t parts_refused;             /* parts of another shape, a rank twice, or no memory */
};

struct sfd_job {
    struct sfd *sfd;
    char id[SF_MAX_JOB_ID_LEN + 1];
    uid_t uid;            /* the owner: the uid of its ranks' connections, here or on the
                           * node hosting them (a cluster report carries it) */
    uint32_t incarnation; /* 1, 2, ...: runs of (uid, id) (incarnation.c) */
    bool reports_only;    /* known here from reports alone (a cluster's, or restored history):
                           * no rank of it has connected to this sfd; a cluster report of it is
                           * stored whole */
    char run_id[SF_MAX_RUN_ID_LEN + 1]; /* the launch's run id, "": not known */
    /* The window whose rows were last queued to the history, per slot
     * (history.c): at most one a second, the latest at shutdown. */
    struct sfd_rows_saved {
        uint32_t segment;
        int64_t index;
        uint64_t at_ms;
        bool any;
    } rows_saved[2];
    uint32_t restart_count; /* the launch's elastic restarts so far */
    sf_schema schema;
    sf_gates gates;                 /* window_steps/warmup fixed for the job */
    sf_straggler_history straggler; /* verdict persistence over stored reports */
    bool geometry_asked;            /* the job's hello chose window_steps/warmup */
    bool geometry_clamped;          /* ... and sfd brought it within bounds */
    uint32_t world_size;
    uint32_t segment;
    uint32_t n_live;              /* live connections, all channels */
    uint32_t n_live_ranks;        /* live step-record connections */
    uint32_t ranks_seen;          /* ranks that sent a row here since the ranks were reset:
                                   * in a cluster, the ranks a locally complete step holds */
    struct sfd_rank **rank_pages; /* [ceil(world_size / SFD_RANK_PAGE)], pages on demand */
    char *roles[SFD_MAX_JOB_ROLES];
    uint32_t n_roles;
    struct sfd_parallel *par; /* NULL until a rank declares coordinates */
    char **hosts;             /* [0] is "" once any host is interned */
    uint32_t n_hosts, cap_hosts;
    struct sfd_window *open[SFD_MAX_OPEN_WINDOWS];
    uint32_t n_open;
    size_t pending_rows;
    size_t rows_hint;   /* rows of the last closed window: a new one's first size */
    int64_t closed_max; /* highest closed index in this segment, -1 */
    int64_t max_step;   /* highest step seen in this segment, -1 */
    /* The step gate (windows.c): the highest step any rank has sent in this
     * segment, accepted or not, its rank, and the highest of the others. */
    int64_t max_claim, second_claim; /* -1: none */
    uint32_t max_claim_rank;
    struct sfd_window *hot;      /* the window the last record went to */
    uint64_t orphan_deadline_ms; /* close everything after the last disconnect */
    struct sfd_stored *stored;   /* ring of keep_windows, oldest first */
    uint32_t n_stored, cap_stored;
    uint64_t records, dropped, rejected, nccl_batches;
    uint64_t shed_records;            /* dropped unread while the loop was behind (shed.c) */
    uint64_t mem[SFD_MEM_KIND_COUNT]; /* bytes charged to the job's uid, by kind */
    uint64_t evicted_windows;         /* kept windows whose rows the budget took */
    struct sfd_side *side;            /* NCCL side evidence (side_evidence.c) */
    struct sfd_enq_points *enq;       /* NCCL enqueue points (enqueue_points.c) */
    struct sfd_baseline base;
    struct sfd_verdict verdict;
    uint64_t last_active_ms;
    int64_t latest_report_unix_ms;     /* wall time the latest report was ready */
    struct sfd_job_stall stall;        /* liveness.c */
    struct sfd_job_captures *captures; /* capture.c; NULL until the first */
    /* The Prometheus export (prom_flush.c): the state and presence last
     * written, since when (monotonic ms, 0: not ended) the job has been
     * ended, and the report time that clock last saw. */
    uint8_t prom_state;
    bool prom_exported;
    uint64_t prom_ended_ms;
    int64_t prom_report_unix_ms;
    struct sfd_job *next;
};

struct sfd_job *sfd_job_lookup(struct sfd *d, uid_t uid, const char *id, uint32_t incarnation);
/* Whether no later incarnation of the job's (uid, id) is in the table. */
bool sfd_job_is_newest(const struct sfd *d, const struct sfd_job *job);
/* The job's name in the history store and in outputs: "JOB", or "JOB@N" for
 * incarnation N > 1 ('@' is never in a job id). */
void sfd_job_key(const struct sfd_job *job, char *buf, size_t len);
/* Splits a key made by sfd_job_key into the id and the incarnation. */
int sfd_job_key_parse(const char *key, char *ret_id, size_t id_len, uint32_t *ret_incarnation);

/* ---- verdict.c ------------------------------------------------------------- */

/* A closed window of the job: makes the live test for its shape, and feeds
 * the complete steps of eligible windows to its baseline until it has one. */
void sfd_verdict_window(struct sfd_job *job, const sf_summary *summary, const sf_report *report);
/* Step t of open window w has all its rows: tests it. */
struct sfd_window;
void sfd_verdict_step(struct sfd_job *job, const struct sfd_window *w, size_t t);
/* Whether step t of w is complete for the live test: every rank's row, or in
 * a cluster every row of the ranks this node hosts (windows.c asks). */
bool sfd_verdict_step_ready(const struct sfd_job *job, const struct sfd_window *w, size_t t);
/* One complete step of the whole job, rows in rank order, to the test
 * (verdict.c); the events it makes are recorded. */
void sfd_verdict_feed(struct sfd_job *job, int64_t step, const int64_t *rows, const int64_t *lags);

/* ---- verdict_cluster.c ------------------------------------------------------ */

struct sfd_peer_live_rows;
/* A cluster job's locally complete step t of w: the root assembles it with
 * the members' parts, a member batches it for the root. */
void sfd_verdict_cluster_step(struct sfd_job *job, const struct sfd_window *w, size_t t);
/* This node as the root: a member's part. 0 taken or ignored (no test yet),
 * negative refused (another shape, a rank twice, no memory). */
int sfd_verdict_cluster_part(struct sfd_job *job, const struct sfd_peer_live_rows *b);
/* Frees the assembly and the batch. */
void sfd_verdict_cluster_free(struct sfd_job *job);
/* The events view's "cluster" object, or null when standalone. */
struct json_t *sfd_verdict_cluster_json(const struct sfd_job *job);
/* The verdict object of docs/LIVE.md, or JSON null; a stall when no test
 * verdict is in force and the job is stalled. */
struct json_t;
struct json_t *sfd_verdict_json(const struct sfd_job *job);
/* The job's events, oldest first, and its counters. */
struct json_t *sfd_verdict_events_json(const struct sfd_job *job);
void sfd_verdict_free(struct sfd_job *job);
/* An event as the history stores it (its JSON text, hostile): 0, or -EINVAL
 * for a malformed body or a stage the schema lacks, -E2BIG. Pure. */
#define SFD_VERDICT_EVENT_MAX_BYTES 8192
int sfd_verdict_event_decode(const sf_schema *schema, const uint8_t *body, size_t len,
                             struct sfd_verdict_event *ret);
/* An event as the history stores it: its JSON text (malloc'd), or NULL. */
char *sfd_verdict_event_text(const struct sfd_job *job, const struct sfd_verdict_event *e);
/* Files an event read back at startup into the job's ring. */
void sfd_verdict_restore_event(struct sfd_job *job, const struct sfd_verdict_event *e);

/* ---- incarnation.c ------------------------------------------------------- */

/* What a hello says of the launch it comes from (docs/SFD.md, "Identity"). */
struct sfd_launch {
    const char *job_id;
    uid_t uid;
    uint32_t rank;
    const char *run_id; /* "": none */
    uint32_t restart_count;
    bool reconnect;    /* the process connected before (connection_generation > 0) */
    bool side_channel; /* channel 1 or 2: evidence about a run, never a run itself */
};
/* The incarnation of the launch's job that its hello joins: the newest, a
 * new segment of it (an elastic restart) or a new incarnation (a rerun). */
int sfd_job_for_launch(struct sfd *d, const struct sfd_launch *l, struct sfd_job **ret,
                       enum sfd_reject *ret_why);
/* The state of a rank, its page allocated (and charged) on first use:
 * 0, -ENOMEM (budget or allocation) or -ERANGE. */
int sfd_job_rank(struct sfd_job *job, uint32_t rank, struct sfd_rank **ret);
/* Read-only view: a rank never seen reads as an unseen rank. */
const struct sfd_rank *sfd_job_rank_peek(const struct sfd_job *job, uint32_t rank);
/* A job's name for outputs that carry no uid: its id, or "UID/JOB" when
 * another uid has a job of the same id. */
#define SFD_JOB_NAME_MAX (SF_MAX_JOB_ID_LEN + 12)
void sfd_job_name(const struct sfd *d, const struct sfd_job *job, char *buf, size_t len);
/* Interns a role string; returns its index or -ENOSPC. */
int sfd_job_role(struct sfd_job *job, const char *role);

/* The job's parallel coordinates (parallel_ranks.c): the shape the first
 * declaring rank gave, which rank holds each coordinate tuple, and each
 * rank's coordinates. Sized by the world, charged as SFD_MEM_RANKS, freed
 * with the ranks. */
struct sfd_parallel {
    sf_parallel shape;
    uint32_t *owner;     /* [world] tuple -> rank + 1, 0: free */
    sf_parallel *coords; /* [world] by rank; declared == 0: none */
    uint32_t n_declared; /* ranks with coordinates */
};
/* Binds a step-record hello's coordinates (p NULL: none) to rank's state.
 * -EINVAL with SFD_REJ_PARALLEL_CONFLICT when p's shape is not the job's,
 * its tuple belongs to another rank, or the rank's coordinates (or their
 * absence) differ from its earlier hello; -ENOMEM (SFD_REJ_MEMORY). Nothing
 * changes on failure. */
int sfd_job_parallel_bind(struct sfd_job *job, struct sfd_rank *rk, uint32_t rank,
                          const sf_parallel *p, enum sfd_reject *why);
void sfd_job_parallel_free(struct sfd_job *job);
/* rank's coordinates, or NULL when it declared none. Inline: the rows'
 * view (rows.c) calls nothing else in sfd. */
static inline const sf_parallel *sfd_job_parallel_of(const struct sfd_job *job, uint32_t rank)
{
    if (job->par == NULL || rank >= job->world_size || job->par->coords[rank].declared == 0)
        return NULL;
    return &job->par->coords[rank];
}
/* Interns a rank's host name for `sfctl ranks` after the rank disconnects;
 * returns its index in job->hosts, or 0 ("") when the table is full or the
 * job's memory budget is spent. */
#define SFD_MAX_JOB_HOSTS 4096
uint16_t sfd_job_host(struct sfd_job *job, const char *host);
/* A hello's window geometry (-1: not asked). Taken, clamped to the bounds
 * below, only before the job's first record; later asks are logged. */
#define SFD_MAX_HELLO_WARMUP_STEPS (1u << 20)
void sfd_job_ask_geometry(struct sfd_job *job, int64_t window_steps, int64_t warmup_steps);
bool sfd_job_visible(const struct sfd *d, const struct sfd_job *job, uid_t uid, bool operator_);
/* Frees the rank pages and their directory, releasing their bytes. */
void sfd_job_free_ranks(struct sfd_job *job);
/* A fresh rank directory for world_size ranks (every rank unseen): 0 or
 * -ENOMEM. */
int sfd_job_reset_ranks(struct sfd_job *job, uint32_t world_size);

/* ---- job_life.c ---------------------------------------------------------- */

/* Jobs are keyed by (uid, job id, incarnation): each uid has its own job
 * namespace, and each run of a job id its own incarnation. incarnation 0
 * means the newest; find_or_create makes incarnation 1 (or the one asked
 * for) when there is none. */
int sfd_job_find_or_create(struct sfd *d, const char *id, uid_t uid, uint32_t incarnation,
                           struct sfd_job **ret, enum sfd_reject *ret_why);
int sfd_job_create(struct sfd *d, const char *id, uid_t uid, uint32_t incarnation,
                   struct sfd_job **ret, enum sfd_reject *ret_why);
/* Frees a job unlinked from the table (or never linked) and everything it
 * owns; every byte charged to it goes back to its uid. */
void sfd_job_free(struct sfd_job *job);
void sfd_jobs_free_all(struct sfd *d);

/* ---- job_mem.c ----------------------------------------------------------- */

/* The budget limits of the running configuration. */
struct sfd_budget_limits sfd_mem_limits(const struct sfd *d);
/* Charges n bytes of kind to the job, as sfd_mem_reserve does. */
int sfd_job_reserve(struct sfd_job *job, enum sfd_mem_kind kind, uint64_t n);
/* Charges within the limits without evicting anything to make room (for
 * derived state the job can do without): 0 or -ENOMEM. */
int sfd_job_charge(struct sfd_job *job, enum sfd_mem_kind kind, uint64_t n);
void sfd_job_force(struct sfd_job *job, enum sfd_mem_kind kind, uint64_t n);
void sfd_job_release(struct sfd_job *job, enum sfd_mem_kind kind, uint64_t n);
uint64_t sfd_job_mem_total(const struct sfd_job *job);
/* Charges n bytes to uid, first freeing that uid's oldest kept rows (never
 * another uid's, never a report) while the budget refuses: 0 or -ENOMEM. */
int sfd_mem_reserve(struct sfd *d, uid_t uid, enum sfd_mem_kind kind, uint64_t n);

/* ---- rows.c -------------------------------------------------------------- */

void sfd_rows_free(struct sfd_rows *rows);
/* Frees an open window and its rows without touching the budget (the job's
 * own teardown returns its charges by kind). */
void sfd_window_free(struct sfd_window *w);
/* A view of stored rows as sf_row (d and role pointers into rows/job). */
int sfd_rows_view(const struct sfd_job *job, const struct sfd_rows *rows, sf_row **ret);
/* One stored row as an sf_row, pointing into rows and the job's roles. */
void sfd_rows_row(const struct sfd_job *job, const struct sfd_rows *rows, size_t i, sf_row *ret);
/* The synchronizing stages of the job's schema (each row's issue lags). */
uint32_t sfd_rows_sync_count(const struct sfd_job *job);
/* Marks kept per row: the issue lags, then the accumulated sync waits and
 * their counts (sf_row.sync_wait), one each per synchronizing stage. */
uint32_t sfd_rows_mark_count(const struct sfd_job *job);
/* The bytes cap rows of the job take, as charged to the budget. */
uint64_t sfd_rows_bytes(const struct sfd_job *job, size_t cap);

/* ---- kept.c -------------------------------------------------------------- */

/* Frees a kept window's rows and report, releasing their bytes. */
void sfd_stored_clear(struct sfd_job *job, struct sfd_stored *s);
/* Charges a stored window's report (s->report set) to its job's uid. */
void sfd_stored_charge_report(struct sfd_job *job, struct sfd_stored *s);
/* Drops the oldest kept windows until at most keep remain. */
void sfd_job_trim_kept(struct sfd_job *job, uint32_t keep);
/* A new kept window at the ring's end (the oldest dropped when the ring is
 * full), zeroed but for its closing order (seq). */
struct sfd_stored *sfd_kept_push(struct sfd_job *job);
/* The kept window of meta's (segment, index), or NULL. */
struct sfd_stored *sfd_kept_find(struct sfd_job *job, const sf_window_meta *meta);
/* The report of the latest window (segment, then index), or NULL. */
const sf_report *sfd_job_latest_report(const struct sfd_job *job);

/* ---- windows.c ----------------------------------------------------------- */

/* Accepts one validated record of a rank into its window: 0, or a reject. */
int sfd_window_add(struct sfd_job *job, uint32_t rank, const sf_row *row, enum sfd_reject *ret_why);
/* The highest step rank may send now: the step gate past the latest step
 * any other rank of the job sent, or INT64_MAX while no other rank has sent
 * one (docs/SFD.md, "Identity"). */
int64_t sfd_job_step_limit(const struct sfd_job *job, uint32_t rank);
/* Attributes client drops / violations to the windows of a step range. A
 * window that only a notice opens never makes room by closing another. */
void sfd_window_note_drops(struct sfd_job *job, int64_t first, int64_t last, uint64_t n);
void sfd_window_note_violations(struct sfd_job *job, int64_t step, uint64_t n);
/* A reconnect hello: the window holding step may have lost records. */
void sfd_window_note_reconnect(struct sfd_job *job, int64_t step);
/* Closes a window: builds its summary (the "summary ready" step), then in
 * single-node mode computes and stores the report right away. */
int sfd_window_close(struct sfd_job *job, struct sfd_window *w, uint32_t flags);
/* Closes every window of the job (segment change, shutdown, orphan). */
void sfd_window_close_all(struct sfd_job *job, uint32_t flags);
/* Runs deadlines: closes overdue windows. Returns the next deadline (ms) or 0. */
uint64_t sfd_windows_tick(struct sfd *d, uint64_t now_ms);
/* Sets schema and world size for a job with no live ranks, starting a new
 * segment when they change (closing open windows early). */
int sfd_job_bind_shape(struct sfd_job *job, const sf_schema *schema, uint32_t world_size);
/* A new segment of the same job with the same shape (an elastic restart):
 * open windows close early, every rank's step order starts again, the
 * baseline stays. */
int sfd_job_restart_segment(struct sfd_job *job);

/* ---- publish.c ----------------------------------------------------------- */

/* A window's report is ready (both cluster implementations): attaches the
 * change and the what-if computed against summary, offers summary to the
 * job's change pool, stores the report in the job's kept window and feeds
 * the straggler persistence, the Prometheus export, the history and the
 * capture trigger. Takes ownership of report. own: NULL, or summary itself
 * when it is the caller's to give up (freed here, or taken by the pool);
 * with NULL the pool keeps a copy. remote: a cluster report of a job with no
 * ranks on this node, kept as a window without rows. 0, or -ENOENT when the
 * window is no longer kept here, -EALREADY when a remote window already has
 * its report (the report is freed in both). */
int sfd_publish_report(struct sfd_job *job, const sf_summary *summary, sf_summary *own,
                       sf_report *report, bool remote);

/* ---- baseline.c ---------------------------------------------------------- */

/* Attaches the change (against the pinned or automatic reference, for windows
 * after it, pooled with the job's latest windows) and the what-if to a
 * window's report before it is stored, then offers the window to the
 * automatic reference and the alert hook. Failures are logged; the report
 * is stored either way. */
void sfd_baseline_attach(struct sfd_job *job, const sf_summary *summary, sf_report *report);
/* Then offers the window's summary to the job's pool (want: the report's
 * change_pool_windows), for the changes of the windows after it: *summary
 * is NULL when the pool took it, else still the caller's. A pool of one
 * window keeps nothing. */
void sfd_baseline_keep(struct sfd_job *job, sf_summary **summary, uint32_t want);
/* sfctl baseline: pins a kept window as the reference, or clears the pin,
 * then recomputes the change of the kept windows. -ENOENT/-ENOTSUP with a
 * reason in *ret_err. */
int sfd_baseline_pin(struct sfd_job *job, int64_t window, const char **ret_err);
int sfd_baseline_unpin(struct sfd_job *job, const char **ret_err);
/* The BASELINE answer: the reference in force, or null. */
struct json_t *sfd_baseline_json(const struct sfd_job *job);
void sfd_baseline_free(struct sfd_job *job);

/* ---- alert.c -------------------------------------------------------------- */

/* Runs alert_command with the window's JSON on stdin when the job's change
 * has persisted for alert_windows windows, at most once per
 * alert_interval_ms and one run at a time per job. Never fatal. */
void sfd_alert_consider(struct sfd_job *job, const sf_report *report);
/* Forgets a job's running hook (the job is going away). */
void sfd_alert_forget(struct sfd_job *job);
/* Shutdown: stops waiting for running hooks. */
void sfd_alerts_shutdown(struct sfd *d);

/* ---- shed.c --------------------------------------------------------------- */

/* A batch whose records are all for closed windows is refused unread (as
 * late records). Once one turn of the loop has taken this many records
 * (about 16 ms of work; 8 connections each with a full socket of batches of
 * 64 hold 32768), the rest of the turn's batches are dropped unread and
 * counted (shed), their steps noted as dropped in their windows. */
#define SFD_SHED_TURN_RECORDS 16384
/* ... and only once this many turns in a row took as many: a lasting
 * backlog, not a moment's descheduling. */
#define SFD_SHED_FULL_TURNS 4

/* Step indices stay far from int64 overflow in window arithmetic. */
#define SFD_MAX_STEP (INT64_C(1) << 62)

/* A batch's drop report (RecordBatch fields 3 to 5), as sent: the shed path
 * keeps it, so that drops a shed batch reports are still counted. */
struct sfd_drop_report {
    bool has_total, has_first, has_last;
    uint64_t total;
    int64_t first_step, last_step;
};

struct sfd_batch_peek {
    uint32_t n_records;
    int64_t first_step, last_step;
    struct sfd_drop_report drops;
};

enum sfd_shed { SFD_SHED_NONE, SFD_SHED_LATE, SFD_SHED_BEHIND };

struct sfd_conn;

/* Reads a ClientMessage frame's batch records, step range and drop report
 * from the wire without decoding it: 0, or -EINVAL when the frame is not a batch of at
 * least one record the peek can read (the full decoder then judges it). */
int sfd_batch_peek(const uint8_t *buf, size_t len, struct sfd_batch_peek *ret);
/* Whether to drop the frame from c unread, and why; *ret holds the peek
 * when the answer is not SFD_SHED_NONE. */
enum sfd_shed sfd_shed_check(struct sfd_conn *c, const uint8_t *buf, size_t len,
                             struct sfd_batch_peek *ret);

/* ---- ingest_validate.c (pure) -------------------------------------------- */

struct sfd_limits {
    uint32_t max_ranks;
    uint32_t frame_max_bytes;
};

/* Decodes one datagram; checks the length before decoding. The message's
 * memory comes from alloc (NULL: malloc, as protobuf-c's default). On
 * success *ret is a message to free with sfd_message_free and the same
 * allocator. */
int sfd_message_decode(const uint8_t *buf, size_t len, const struct sfd_limits *lim,
                       struct ProtobufCAllocator *alloc, struct Stagefrontier__ClientMessage **ret,
                       enum sfd_reject *ret_why);
void sfd_message_free(struct Stagefrontier__ClientMessage *m, struct ProtobufCAllocator *alloc);
/* Checks every field of a message against its bounds. For a hello, also the
 * schema hash (ret_schema, if non-NULL, receives the initialised schema). */
/* The Hello's coordinates: 0 with *ret filled, 1 when it carries none,
 * -EINVAL (SFD_REJ_PARALLEL_INVALID) when they fail sf_parallel_check
 * against its world or carry no dimension. */
int sfd_hello_parallel(const struct Stagefrontier__Hello *h, sf_parallel *ret,
                       enum sfd_reject *ret_why);
int sfd_validate_hello(const struct Stagefrontier__Hello *h, const struct sfd_limits *lim,
                       sf_schema *ret_schema, enum sfd_reject *ret_why);
/* A batch's drop range: both ends or neither, in order, within step bounds. */
bool sfd_drop_range_ok(bool has_first, bool has_last, int64_t first, int64_t last);
int sfd_validate_batch(const struct Stagefrontier__RecordBatch *b, uint32_t n_stages,
                       enum sfd_reject *ret_why);
/* Splits a validated record's durations at its arrivals into the job's
 * schema stages (d holds SF_MAX_STAGES); sets SF_ROW_ARRIVAL_MISSING in
 * *flags when a synchronizing stage had no arrival. fallback (NULL: none)
 * holds per recorded stage the NCCL enqueue point or -1: it is the arrival
 * of a stage without an explicit one. A fallback beyond its stage's duration
 * is not used and counted in *ret_bad_fallbacks (may be NULL). */
int sfd_record_split(const struct Stagefrontier__StepRecord *r, const sf_schema *schema,
                     const int64_t *fallback, int64_t *d, uint32_t *flags,
                     uint32_t *ret_bad_fallbacks, enum sfd_reject *ret_why);
/* The record's issue lags, one per synchronizing stage of schema in stage
 * order (-1 unmarked), from its arrivals' issue marks; lag holds
 * SF_MAX_STAGES. Returns how many marks it found, or -1 (and *ret_why) for
 * an issue before its arrival or past its stage, or a completion without an
 * issue, before it, or past the stage. */
/* The record's accumulated sync waits (Arrival.wait_ns and .waits) into
 * wait[2 * synchronizing stages] as sf_row.sync_wait holds them; returns
 * how many stages carried one, or -EINVAL (SFD_REJ_SYNC_WAIT: out of range
 * or one without the other; SFD_REJ_ARRIVAL_STAGE). */
int sfd_record_sync_waits(const struct Stagefrontier__StepRecord *r, const sf_schema *schema,
                          int64_t *wait, enum sfd_reject *ret_why);
int sfd_record_issue_lags(const struct Stagefrontier__StepRecord *r, const sf_schema *schema,
                          int64_t *lag, enum sfd_reject *ret_why);
int sfd_validate_nccl(const struct Stagefrontier__NcclBatch *b, enum sfd_reject *ret_why);
bool sfd_job_id_valid(const char *id);
/* A job as a query names it: "JOB", "UID/JOB" for uid's job, and either
 * with "@N" for its incarnation N (a job id holds neither '/' nor '@', so
 * the form is never ambiguous). id is copied out of ref. */
struct sfd_job_ref {
    bool has_uid;
    uid_t uid;
    uint32_t incarnation; /* 0: the newest */
    char id[SF_MAX_JOB_ID_LEN + 1];
};
int sfd_job_ref_parse(const char *ref, struct sfd_job_ref *ret);

/* ---- conn.c -------------------------------------------------------------- */

struct sfd_conn {
    struct sfd *sfd;
    uv_poll_t poll;
    int fd;
    bool query; /* query socket connection */
    bool closing;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    bool privileged; /* query: root or operators_group, may use reserved slots */
    uint64_t accepted_ms, last_io_ms;
    /* ingest */
    bool hello;
    uint32_t channel; /* 0 step records, 1 NCCL side channel, 2 heartbeats */
    struct sfd_job *job;
    uint32_t rank;
    uint64_t schema_hash;
    uint64_t dropped_total, violations_total; /* as the client last sent them */
    uint64_t dropped_counted;                 /* of dropped_total, what passed the bound */
    char host[SFD_HOST_MAX + 1];
    /* query: out[out_off..out_len) waits to be sent; a streamed answer
     * refills it a slice at a time (query_stream.c) */
    char *out;
    size_t out_len, out_off, out_cap;
    struct sfd_qstream *stream;
    struct sfd_conn *prev, *next;
};

struct sfd_listener {
    uv_poll_t poll;
    int fd;
    bool active;
    bool created; /* we bound it: unlink on shutdown */
    char path[SFD_PATH_MAX];
};

int sfd_listener_open(struct sfd *d, struct sfd_listener *l, const char *path, mode_t mode,
                      int inherited_fd, bool query);
void sfd_listener_close(struct sfd_listener *l);
void sfd_conn_close(struct sfd_conn *c);
void sfd_conns_close_all(struct sfd *d);
/* The receive buffer all connections share: frame_max_bytes + 1, so a
 * datagram beyond the cap shows as one. */
int sfd_ensure_rxbuf(struct sfd *d);

/* ---- ingest.c ------------------------------------------------------------ */

/* The decode arena's lifetime: sfd_ingest_init before the first datagram
 * is handled, sfd_ingest_free after the last (and after a failed start). */
void sfd_ingest_init(struct sfd *d);
void sfd_ingest_free(struct sfd *d);
/* Handles one datagram of an ingest connection (sfd_ingest_init first): 0,
 * or -EPROTO to drop the connection. */
int sfd_ingest_handle(struct sfd_conn *c, const uint8_t *buf, size_t len);

/* ---- query.c ------------------------------------------------------------- */

int sfd_query_handle(struct sfd_conn *c, const uint8_t *buf, size_t len);
void sfd_query_writable(struct sfd_conn *c);
/* A refused query's message, owned by the caller: msg is a constant string
 * or points into text, where messages that name uids or jobs are written. */
struct sfd_query_err {
    const char *msg;
    char text[512];
};
/* Builds the JSON text of a request (pure with respect to sockets; used by
 * the handler and the fuzz target). ret_text is malloc'd; on an error,
 * err->msg says why. */
int sfd_query_answer(struct sfd *d, uid_t uid, bool operator_, const uint8_t *req, size_t len,
                     char **ret_text, size_t *ret_len, struct sfd_query_err *err);
bool sfd_query_is_operator(struct sfd *d, int fd, uid_t uid, gid_t gid);

/* ---- query_stream.c ------------------------------------------------------ */

/* A RECORD or RANKS answer produced incrementally. The cursor keeps the job's
 * identity and shape, not a pointer it trusts: a job that goes away or
 * changes shape mid-answer ends the stream with an error. */
struct sfd_qstream;
int sfd_qstream_open_record(struct sfd *d, const struct sfd_job *j, struct sfd_qstream **ret);
int sfd_qstream_open_ranks(struct sfd *d, const struct sfd_job *j, struct sfd_qstream **ret);
/* The reports v[0..n) (in the order given), JSON array or text view. */
int sfd_qstream_open_report(struct sfd *d, const struct sfd_job *j, const sf_report *const *v,
                            size_t n, bool text, struct sfd_qstream **ret);
/* Appends to (*buf)[*len..) until *len >= want, the answer ends (*ret_done)
 * or the monotonic deadline (ns, 0: none) passes. */
int sfd_qstream_fill(struct sfd *d, struct sfd_qstream *s, char **buf, size_t *len, size_t *cap,
                     size_t want, uint64_t deadline_ns, bool *ret_done, const char **ret_err);
void sfd_qstream_free(struct sfd_qstream *s);

/* ---- conn_limits.c -------------------------------------------------------- */

/* Decides whether an accepted socket may stay: the global and per-uid caps,
 * and the query slots reserved for root and operators. */
int sfd_admit(struct sfd *d, bool query, int fd, uid_t uid, gid_t gid, bool *ret_privileged,
              enum sfd_reject *ret_why);
void sfd_admit_charge(struct sfd *d, const struct sfd_conn *c);
void sfd_admit_release(struct sfd *d, const struct sfd_conn *c);
/* The sweep closing ingest connections without a hello and idle query
 * connections; stopped by sfd_conn_limits_stop. */
int sfd_conn_limits_start(struct sfd *d);
void sfd_conn_limits_stop(struct sfd *d);
void sfd_conn_limits_free(struct sfd *d);

/* ---- notify.c ------------------------------------------------------------ */

void sfd_notify_ready(struct sfd *d);
void sfd_notify_status(struct sfd *d);
void sfd_notify_stopping(struct sfd *d);
int sfd_notify_start(struct sfd *d); /* watchdog + status timers */

/* ---- log.c --------------------------------------------------------------- */

void sfd_log_init(int level);
void sfd_log_set_level(int level);
__attribute__((format(printf, 3, 4))) void sfd_log(int level, const char *job, const char *fmt,
                                                   ...);

/* ---- the daemon context (main.c) ----------------------------------------- */

struct sfd_flags {
    const char *config, *runtime_dir, *ingest, *query, *log_level, *state_dir;
};

struct sfd {
    uv_loop_t *loop;
    struct sfd_config cfg;
    struct sfd_flags flags; /* command-line overrides, kept for reload */
    struct sfd_listener ingest, query;
    uv_timer_t tick; /* window deadlines */
    uv_timer_t status_timer, watchdog_timer, prom_timer;
    bool prom_dirty;
    uint64_t prom_counters; /* sum of the monotonic counters last exported */
    int peer_fd;            /* socket-activated "peer", for the multi-node layer */
    uv_signal_t sig_term, sig_int, sig_hup;
    struct sfd_conn *conns;
    uint32_t n_conns, n_query_conns;
    struct sfd_uid_conns *uid_conns; /* per-uid connection counts (conn_limits.c) */
    uv_timer_t conn_timer;           /* hello and idle timeouts */
    struct sfd_job *jobs;
    uint32_t n_jobs;
    struct sfd_counters ctr;
    struct sfd_budget mem;          /* budget.c */
    uint64_t store_seq;             /* numbers kept windows in closing order */
    uint8_t *rxbuf;                 /* frame_max_bytes + 1 */
    struct sfd_arena decode_arena;  /* every client message is decoded here (ingest.c) */
    uint64_t turn_ms, turn_records; /* records taken in this turn of the loop (shed.c) */
    uint32_t full_turns;            /* turns in a row that took SFD_SHED_TURN_RECORDS */
    size_t rxcap;
    uint64_t start_ms;
    gid_t operators_gid;
    bool have_operators_gid;
    bool stopping;
    /* Where closed windows' summaries go, and the node's standing
     * (cluster.h): standalone, or the peer layer in multi-node mode. */
    struct sfd_cluster cluster;
    struct sfd_history *history; /* history.c; NULL when switched off in the config */
    /* Its counters, read without a call into history.c (history.h) */
    const struct sfd_history_counters *history_counters;
    struct sfd_alert *alerts; /* running alert hooks (alert.c) */
    const char *prom_role;    /* role and term of the last Prometheus export */
    uint64_t prom_term;
    uint64_t prom_written_ms;       /* monotonic ms of the last write, 0: none */
    uint64_t prom_failures;         /* failed writes not yet logged */
    uint64_t prom_failing_since_ms; /* 0: the last write worked */
    uint64_t prom_fail_logged_ms;   /* when a failure was last logged */
    char prom_written_dir[4096];    /* where the file is, "": nowhere */
    uv_timer_t live_timer;          /* liveness.c: stalls, capture timeouts */
    uint64_t next_capture_id;       /* capture.c */
    uint64_t captures_started, captures_auto;
};

/* ---- clock.c ------------------------------------------------------------ */

/* The loop's monotonic clock in ms (deadlines, sweeps, timeouts). */
uint64_t sfd_now_ms(const struct sfd *d);
/* The wall clock in ms since the epoch (times of day shown to operators). */
int64_t sfd_realtime_ms(void);

/* ---- tick.c ------------------------------------------------------------- */

/* The deadline tick and the export timer. */
int sfd_timers_init(struct sfd *d);
void sfd_arm_tick(struct sfd *d);
void sfd_tick_now(struct sfd *d);

/* ---- prom_flush.c ------------------------------------------------------- */

int sfd_prom_timer_init(struct sfd *d);
void sfd_after_window(struct sfd *d); /* marks the export dirty */
void sfd_prom_flush(struct sfd *d);
/* Starts or stops the export timer to match cfg.prom_dir (start, reload). */
void sfd_prom_reconfigure(struct sfd *d);
/* A clean stop: removes the file, so that node_exporter serves nothing of
 * a daemon that is gone. */
void sfd_prom_remove(struct sfd *d);

#endif

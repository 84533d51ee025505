/*
 * libsfclient: the trainer-side telemetry client (docs/SPEC.md sections 2 and 4).
 * A rank times its ordered stages with CLOCK_MONOTONIC and hands one record
 * per step to sfd over a Unix SOCK_SEQPACKET socket, without ever blocking.
 *
 * Errors: functions return 0 or more on success and a negative errno on
 * failure; ret_ outputs are set only on success. Telemetry down is never an
 * error for training: with no daemon every call returns 0 and drops are
 * counted. Contract misuse (nested ordered stage, end without begin, stage
 * outside a step, unknown id, step_begin inside a step) returns -EINVAL, is
 * counted as a violation, and never stops training.
 *
 * Threads: one sf_client is used by one thread at a time; there is no
 * internal locking. Fork: a client inherited by a fork() child turns inert at
 * its next step end or flush (it closes its copy of the socket and never
 * sends as the parent rank); open a new client in the child if it must report.
 */
#ifndef STAGEFRONTIER_CLIENT_H
#define STAGEFRONTIER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "stagefrontier/parallel.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SF_CLIENT_API __attribute__((visibility("default")))
#else
#define SF_CLIENT_API
#endif

/* Hard caps checked by sf_client_open. */
#define SF_CLIENT_MAX_HEARTBEAT_MS 3600000
#define SF_CLIENT_MAX_FLUSH_MS 3600000
#define SF_CLIENT_MAX_STAGES 64
#define SF_CLIENT_MAX_NAME_LEN 64
#define SF_CLIENT_MAX_JOB_ID_LEN 128
#define SF_CLIENT_MAX_ROLE_LEN 64
#define SF_CLIENT_MAX_WORLD_SIZE 2097152 /* 2^21: limits.h SF_MAX_RANKS */
#define SF_CLIENT_MAX_ACCUMULATION 64
#define SF_CLIENT_MAX_BUFFER (1u << 20)
#define SF_CLIENT_MAX_BATCH 1024
/* Steps ahead of the current one that sf_charge_data_wait may target. */
#define SF_CLIENT_DATA_LOOKAHEAD 8
#define SF_CLIENT_SCHEMA_VERSION 1

typedef struct sf_client sf_client;

typedef struct sf_client_options {
    const char *job_id;      /* NULL: SF_JOB_ID, else TORCHELASTIC_RUN_ID, else SLURM_JOB_ID */
    const char *socket_path; /* NULL: SF_SOCKET, else /run/stagefrontier/ingest.sock */
    int rank, world_size, local_rank; /* -1: from the launcher (docs/CLIENT.md) */
    const char *role;                 /* NULL: SF_ROLE */
    const char *const *stage_names; /* NULL: the six default stages (residual last, never timed) */
    const char *const *stage_groups;
    uint32_t n_stages;
    uint32_t accumulation;        /* 0/1: none; K>1 expands the default stages by microstep @k */
    uint32_t buffer_records;      /* ring capacity, 0: default 4096 */
    uint32_t batch_records;       /* records per batch datagram, 0: default 64 */
    double event_sample_fraction; /* CUDA-event forward sampling, 0: off */
    /* Synchronizing stages by name (a timed stage that ends in a collective):
     * sfd splits each into <name> and <name>.sync_wait at the rank's
     * arrival, marked with sf_stage_arrive. NULL: none. */
    const char *const *sync_stages;
    uint32_t n_sync_stages;
    int disabled; /* also SF_DISABLE=1 in the environment */
    /* The job's own window geometry, asked of sfd in the hello (sfd clamps it
     * and says so). -1 (options_init): SF_WINDOW_STEPS / SF_WARMUP_STEPS, else
     * the daemon's configuration. */
    int window_steps, warmup_steps;
    /* Liveness (docs/CLIENT.md): when no step has ended for this many ms, a
     * background thread sends the open step and stage. -1 (options_init):
     * SF_HEARTBEAT_MS, else 1000; 0: no heartbeat thread. At most 3600000. */
    int heartbeat_ms;
    /* The longest a finished step waits in the ring before a batch goes out
     * (a full batch goes at once). -1 (options_init): SF_FLUSH_MS, else 100.
     * 1..3600000. */
    int flush_ms;
    /* Parallel coordinates (stagefrontier/parallel.h, docs/CLIENT.md):
     * NULL (options_init): SF_PARALLEL ("pp=1/4,tp=0/8,dp=3/16"), else none.
     * -EINVAL when malformed or when the sizes do not multiply to the world
     * size; sfd also checks the job's ranks tile the world. */
    const sf_parallel *parallel;
    /* The communicator group each synchronizing stage's collectives span,
     * one per sync_stages entry: "world", "dp", "tp" or "pp" (docs/CLIENT.md,
     * "Synchronizing groups"). NULL, or a NULL entry: world. */
    const char *const *sync_groups;
} sf_client_options;

/* Fills the "from environment" defaults: NULL strings, -1 ranks, zeros. */
SF_CLIENT_API void sf_client_options_init(sf_client_options *opts);
/* -EINVAL for a bad option (after the environment is applied), -ENOMEM.
 * An absent daemon is not an error. */
SF_CLIENT_API int sf_client_open(const sf_client_options *opts, sf_client **ret);
SF_CLIENT_API int sf_client_open_env(sf_client **ret);
/* Flushes without blocking, closes the socket, frees. Accepts NULL. */
SF_CLIENT_API void sf_client_close(sf_client *c);

/* Index of a stage name, or -ENOENT. Not for the hot path: look ids up once. */
SF_CLIENT_API int sf_stage_id(const sf_client *c, const char *name);
/* Number of stages, residual included. */
SF_CLIENT_API int sf_stage_count(const sf_client *c);
/* Name of stage id, or NULL. */
SF_CLIENT_API const char *sf_stage_name(const sf_client *c, int stage_id);

/* step < 0: previous + 1 (0 for the first step). A step_begin while a step is
 * open ends that step (with a violation) and returns -EINVAL. */
SF_CLIENT_API int sf_step_begin(sf_client *c, int64_t step);
/* Ends the step, queues its record, and maybe sends one batch. */
SF_CLIENT_API int sf_step_end(sf_client *c);
SF_CLIENT_API int sf_stage_begin(sf_client *c, int stage_id);
SF_CLIENT_API int sf_stage_end(sf_client *c, int stage_id);
/* Marks the rank's arrival inside the open synchronizing stage: its own
 * work ended and its wait for the peers begins. One clock read, no
 * allocation, lock or syscall. The last mark of a step wins. -EINVAL (a
 * counted violation) when no synchronizing stage is open. A step whose
 * synchronizing stage got no mark is reported whole as own work and flagged
 * (arrival_missing_steps). */
SF_CLIENT_API int sf_stage_arrive(sf_client *c);
/* Marks the issue of the open synchronizing stage's collective: the moment
 * it was handed to the backend, after the arrival. The issue lag (arrival
 * to issue) is what a rank that is ready but late to communicate shows
 * (docs/CLIENT.md, "Communication marks"). Same rules as sf_stage_arrive;
 * also -EINVAL (a violation) before the step's arrival mark. Returns the
 * stage id, for sf_stage_complete. */
SF_CLIENT_API int sf_stage_issue(sf_client *c);
/* Marks the completion of stage_id's issued collective. Safe from any
 * thread (a backend's completion callback): one clock read and one relaxed
 * atomic store. A completion before the step's issue is ignored. -EINVAL
 * for a stage that is not synchronizing. */
SF_CLIENT_API int sf_stage_complete(sf_client *c, int stage_id);
/* A sync point inside the open synchronizing stage (docs/CLIENT.md,
 * "Synchronizing groups"): sf_sync_enter marks the arrival (as
 * sf_stage_arrive) and the entry into the group's collective, sf_sync_exit
 * its end; the time between is added to the step's accumulated wait of the
 * stage and the sync point counted. A stage may hold many. sf_sync_send is
 * a sync point that does not wait (a pipeline send): the arrival and one
 * more count. One clock read each, no allocation, lock or syscall. -EINVAL
 * (a counted violation) outside an open synchronizing stage, and for an
 * exit without its enter. */
SF_CLIENT_API int sf_sync_enter(sf_client *c);
SF_CLIENT_API int sf_sync_exit(sf_client *c);
SF_CLIENT_API int sf_sync_send(sf_client *c);
/* Adds wait_ns to the data stage (stage 0) of step: the open step, or a later
 * one up to SF_CLIENT_DATA_LOOKAHEAD ahead. A wait charged ahead was spent
 * before that step began, so it also lengthens that step's wall time. */
SF_CLIENT_API int sf_charge_data_wait(sf_client *c, int64_t step, int64_t wait_ns);
/* Side-channel probes: may nest (up to 16 deep), never enter the prefix. */
SF_CLIENT_API int sf_probe_begin(sf_client *c, const char *name);
SF_CLIENT_API int sf_probe_end(sf_client *c, const char *name);
/* One non-blocking send attempt (reconnecting first if the backoff allows). */
SF_CLIENT_API int sf_client_flush(sf_client *c);

typedef struct sf_client_stats {
    uint64_t steps, records_sent, records_dropped, batches_sent, send_syscalls, connects,
        reconnects, violations;
    int connected;
    /* Captures (docs/CLIENT.md, "Captures"): requests taken, finished,
     * failed, answered "unsupported" (no handler) or "busy", and control
     * messages refused as malformed or out of bounds. */
    uint64_t captures_requested, captures_done, captures_failed, captures_unsupported,
        captures_busy, control_rejected;
    /* Heartbeats sent by the background thread (docs/CLIENT.md, "Liveness"). */
    uint64_t heartbeats_sent;
} sf_client_stats;
SF_CLIENT_API int sf_client_get_stats(const sf_client *c, sf_client_stats *ret);

/* ---- captures (docs/CLIENT.md, "Captures") ----
 * sfd may ask a rank to capture a profiler trace of its next few steps. The
 * client reads the request without blocking when it flushes and calls the
 * handler on the training thread at step boundaries, outside every stage:
 *   SF_CAPTURE_START      before the first captured step begins;
 *   SF_CAPTURE_STEP_BEGIN before each captured step begins (step = its index);
 *   SF_CAPTURE_STEP_END   after each captured step ended;
 *   SF_CAPTURE_STOP       after the last one: write the trace, put its path
 *                         (NUL-terminated) in out[0..out_cap) and return 0, or
 *                         return -errno with a short reason in out.
 * A negative return from START or a STEP phase ends the capture as failed
 * (STOP is still called, so the handler can clean up). Nothing a handler
 * returns reaches the training loop: the outcome goes to sfd and the
 * counters. Without a handler a request is answered "unsupported". */
#define SF_CAPTURE_KIND_CPU 1u
#define SF_CAPTURE_KIND_CUDA 2u
#define SF_CAPTURE_MAX_STEPS 100
#define SF_CAPTURE_PATH_MAX 1024
#define SF_CAPTURE_ERROR_MAX 256

enum sf_capture_phase {
    SF_CAPTURE_START,
    SF_CAPTURE_STEP_BEGIN,
    SF_CAPTURE_STEP_END,
    SF_CAPTURE_STOP
};

typedef struct sf_capture_request {
    uint64_t id;        /* sfd's capture id */
    uint32_t steps;     /* 1..SF_CAPTURE_MAX_STEPS */
    uint32_t kinds;     /* SF_CAPTURE_KIND_*; 0: CPU, and CUDA when available */
    int64_t first_step; /* the first captured step (set from START on) */
    int64_t step;       /* STEP_*: this step; STOP: the last captured step */
    const char *job_id; /* this client's job and rank, to name the trace */
    uint32_t rank;
    uint32_t world_size; /* ... and its world, written into the trace */
    /* 1: the capture is for a collective that started late (sfd's
     * communication verdict): record the collectives, their sizes and
     * groups. 0: an ordinary capture. (Last: ABI.) */
    uint32_t communication;
} sf_capture_request;

typedef int (*sf_capture_handler)(void *arg, enum sf_capture_phase phase,
                                  const sf_capture_request *req, char *out, size_t out_cap);

/* Installs (fn != NULL) or removes the capture handler. -EBUSY while a
 * capture runs. Not for the hot path. */
SF_CLIENT_API int sf_client_set_capture_handler(sf_client *c, sf_capture_handler fn, void *arg);

/* The schema hash the client sends (FNV-1a 64, same definition as sfd). */
SF_CLIENT_API uint64_t sf_client_schema_hash(const sf_client *c);

/* The side-evidence beacon (docs/SIDE_EVIDENCE.md): the open step and ordered
 * stage, published with atomic stores for the NCCL profiler plugin in the
 * same process. The plugin finds it by dlsym() on each loaded object, since
 * libsfclient may be loaded RTLD_LOCAL (a Python extension), so it must stay
 * exported. It is no API for trainers: its layout is private to libsfclient
 * and the plugin, which checks its magic and version. */
struct sf_side_beacon;
SF_CLIENT_API extern struct sf_side_beacon sf_side_beacon;

#ifdef __cplusplus
}
#endif
#endif

/*
 * Rank liveness and the job's stalled state (docs/SFD.md, "Liveness"): what
 * each rank's records and heartbeats say about where it is, when it last
 * moved, and which ranks a stalled job is waiting for. Reads and writes only
 * the per-rank liveness fields and the job's stall summary; never touches
 * windows or reports.
 */
#ifndef SFD_LIVENESS_H
#define SFD_LIVENESS_H

#include <stdbool.h>
#include <stdint.h>

struct sfd;
struct sfd_job;
struct sfd_conn;
struct Stagefrontier__RankHeartbeat;
struct json_t;

#define SFD_LIVENESS_TICK_MS 1000u

/* The job's stall summary, refreshed by the liveness tick. */
struct sfd_job_stall {
    bool stalled;
    int64_t since_unix_ms; /* realtime when the job became stalled */
    uint32_t n_stalled, n_culprits;
    uint64_t stalls; /* times the job became stalled */
};

/* Checks a heartbeat's fields against the job's recorded stages: 0 or
 * -EINVAL (pure; the fuzz target's and ingest's check). */
int sfd_validate_heartbeat(const struct Stagefrontier__RankHeartbeat *h, uint32_t n_recorded);
/* A validated heartbeat of the connection's rank. */
void sfd_liveness_heartbeat(struct sfd_conn *c, const struct Stagefrontier__RankHeartbeat *h);
/* Records of a rank arrived; last_step is the highest step among them. */
void sfd_liveness_records(struct sfd_job *job, uint32_t rank, int64_t last_step);
/* A rank's step-record connection opened (fresh start) or closed. */
void sfd_liveness_connected(struct sfd_job *job, uint32_t rank);

/* Recomputes every job's stalled state now (the tick's work; queries call
 * it so they never show a state older than the clock). */
void sfd_liveness_refresh(struct sfd *d);
/* The same for one job (a query that shows only that job). */
void sfd_liveness_refresh_job(struct sfd *d, struct sfd_job *job);
int sfd_liveness_start(struct sfd *d);
void sfd_liveness_stop(struct sfd *d);

/* JSON for JOBS ("state" and "stalled") and RANKS (a rank's liveness). */
const char *sfd_job_state(const struct sfd_job *job);
struct json_t *sfd_job_stall_json(const struct sfd_job *job);
struct json_t *sfd_rank_liveness_json(const struct sfd_job *job, uint32_t rank);

#endif

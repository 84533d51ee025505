/*
 * sfd's rejection counters: the stable name of every reason (STATUS, the
 * Prometheus export) and the counting, with rate-limited logging naming the
 * peer. It never decides what to reject; its callers do.
 */
#include "sfd.h"

static const char *const reject_names[SFD_REJ_COUNT] = {
    [SFD_REJ_OVERSIZED] = "oversized_frame",
    [SFD_REJ_UNDECODABLE] = "undecodable_frame",
    [SFD_REJ_INVALID] = "invalid_field",
    [SFD_REJ_PROTOCOL] = "protocol",
    [SFD_REJ_SCHEMA_HASH] = "schema_hash",
    [SFD_REJ_DUPLICATE_RANK] = "duplicate_rank",
    [SFD_REJ_WORLD_SIZE] = "world_size_conflict",
    [SFD_REJ_SCHEMA_CONFLICT] = "schema_conflict",
    [SFD_REJ_MAX_JOBS] = "max_jobs",
    [SFD_REJ_MAX_JOBS_PER_UID] = "max_jobs_per_uid",
    [SFD_REJ_MEMORY] = "memory_budget",
    [SFD_REJ_MAX_CONNECTIONS] = "max_connections",
    [SFD_REJ_MAX_RANKS] = "max_ranks",
    [SFD_REJ_PENDING] = "pending_full",
    [SFD_REJ_LATE] = "late_record",
    [SFD_REJ_DUPLICATE_RECORD] = "duplicate_record",
    [SFD_REJ_QUERY_BAD] = "query_bad_request",
    [SFD_REJ_QUERY_DENIED] = "query_denied",
    [SFD_REJ_UID_CONNECTIONS] = "uid_connections",
    [SFD_REJ_HELLO_TIMEOUT] = "hello_timeout",
    [SFD_REJ_QUERY_TIMEOUT] = "query_timeout",
    [SFD_REJ_ARRIVAL_RANGE] = "arrival_out_of_range",
    [SFD_REJ_ARRIVAL_STAGE] = "arrival_not_synchronizing",
    [SFD_REJ_CAPTURE_REPLY] = "capture_reply",
    [SFD_REJ_HEARTBEAT] = "heartbeat",
    [SFD_REJ_FUTURE] = "future_step",
    [SFD_REJ_PARALLEL_INVALID] = "parallel_invalid",
    [SFD_REJ_PARALLEL_CONFLICT] = "parallel_conflict",
    [SFD_REJ_KERNEL_TIME] = "kernel_time_invalid",
    [SFD_REJ_SYNC_GROUP] = "sync_group_invalid",
    [SFD_REJ_SYNC_WAIT] = "sync_wait_out_of_range",
};

const char *sfd_reject_name(enum sfd_reject r)
{
    return (unsigned)r < SFD_REJ_COUNT ? reject_names[r] : "unknown";
}

/* Logs the first few of each reason, then every 1024th. */
void sfd_count_reject_from(struct sfd *d, struct sfd_job *job, enum sfd_reject why, uint64_t n,
                           pid_t pid, uid_t uid)
{
    uint64_t before = d->ctr.rejected[why];
    sfd_sat_add(&d->ctr.rejected[why], n);
    if (job != NULL)
        sfd_sat_add(&job->rejected, n);
    if (!(before < 8 || (before >> 10) != (d->ctr.rejected[why] >> 10)))
        return;
    if (pid < 0)
        sfd_log(SFD_LOG_WARNING, job ? job->id : NULL,
                "rejected (%s) before the peer was known, total %llu", sfd_reject_name(why),
                (unsigned long long)d->ctr.rejected[why]);
    else
        sfd_log(SFD_LOG_WARNING, job ? job->id : NULL,
                "rejected (%s) from pid %d uid %u, total %llu", sfd_reject_name(why), (int)pid,
                (unsigned)uid, (unsigned long long)d->ctr.rejected[why]);
}

void sfd_count_reject(struct sfd *d, struct sfd_job *job, enum sfd_reject why, uint64_t n,
                      const struct sfd_conn *c)
{
    sfd_count_reject_from(d, job, why, n, c ? c->pid : -1, c ? c->uid : 0);
}

/*
 * Pure checks of ingest messages: the length cap before decoding, then every
 * field against the bounds in proto/ingest.proto and accounting.h. No sockets,
 * no daemon state: this file is the fuzz target's entry point.
 */
#include <errno.h>
#include <string.h>

#include "ingest.pb-c.h"
#include "sfd.h"
#include "strutil.h"
#include "side_format.h"

#define SFD_PROTOCOL_VERSION 1
#define MAX_BATCH_RECORDS 1024
#define MAX_NCCL_AGGREGATES 256
static int reject(enum sfd_reject *ret_why, enum sfd_reject why)
{
    *ret_why = why;
    return -EINVAL;
}

int sfd_message_decode(const uint8_t *buf, size_t len, const struct sfd_limits *lim,
                       ProtobufCAllocator *alloc, Stagefrontier__ClientMessage **ret,
                       enum sfd_reject *ret_why)
{
    if (len > lim->frame_max_bytes)
        return reject(ret_why, SFD_REJ_OVERSIZED);
    if (len == 0)
        return reject(ret_why, SFD_REJ_UNDECODABLE);
    Stagefrontier__ClientMessage *m = stagefrontier__client_message__unpack(alloc, len, buf);
    if (m == NULL)
        return reject(ret_why, SFD_REJ_UNDECODABLE);
    if (m->body_case == STAGEFRONTIER__CLIENT_MESSAGE__BODY__NOT_SET) {
        stagefrontier__client_message__free_unpacked(m, alloc);
        return reject(ret_why, SFD_REJ_UNDECODABLE);
    }
    *ret = m;
    return 0;
}

void sfd_message_free(Stagefrontier__ClientMessage *m, ProtobufCAllocator *alloc)
{
    if (m != NULL)
        stagefrontier__client_message__free_unpacked(m, alloc);
}

bool sfd_job_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n < 1 || n > SF_MAX_JOB_ID_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

/* A decimal of 1..max with no sign, no leading zero and nothing after it. */
static int parse_count(const char *p, const char *end, uint64_t max, uint64_t *ret)
{
    uint64_t v = 0;
    if (p == end || *p == '0' || end - p > 10)
        return -EINVAL;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > max)
        return -EINVAL;
    *ret = v;
    return 0;
}

int sfd_job_ref_parse(const char *ref, struct sfd_job_ref *ret)
{
    struct sfd_job_ref out = {0};
    const char *id = ref, *slash = strchr(ref, '/');
    uint64_t v;
    if (slash != NULL) {
        /* uid 0 is root; the two highest are the daemon's own owners */
        if (slash - ref == 1 && ref[0] == '0')
            out.uid = 0;
        else if (parse_count(ref, slash, (uint64_t)(uid_t)-3, &v) == 0)
            out.uid = (uid_t)v;
        else
            return -EINVAL;
        out.has_uid = true;
        id = slash + 1;
    }
    const char *at = strchr(id, '@');
    size_t len = at != NULL ? (size_t)(at - id) : strlen(id);
    if (len == 0 || len > SF_MAX_JOB_ID_LEN)
        return -EINVAL;
    if (at != NULL) {
        if (parse_count(at + 1, at + 1 + strlen(at + 1), SF_MAX_INCARNATION, &v) < 0)
            return -EINVAL;
        out.incarnation = (uint32_t)v;
    }
    memcpy(out.id, id, len);
    out.id[len] = '\0';
    if (!sfd_job_id_valid(out.id))
        return -EINVAL;
    *ret = out;
    return 0;
}

/* ASCII letters, digits and '-', whatever the locale. */
static bool gpu_char_ok(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

static bool gpu_name_valid(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++)
        if (n >= SFD_GPU_NAME_MAX || !gpu_char_ok(s[n]))
            return false;
    return n > 0;
}

int sfd_hello_parallel(const Stagefrontier__Hello *h, sf_parallel *ret, enum sfd_reject *ret_why)
{
    const Stagefrontier__Parallel *m = h->parallel;
    if (m == NULL)
        return 1;
    const Stagefrontier__ParallelCoord *dims[SF_PAR_DIMS] = {m->pp, m->tp, m->dp, m->cp, m->ep};
    sf_parallel p;
    sf_parallel_init(&p);
    for (int d = 0; d < SF_PAR_DIMS; d++) {
        if (dims[d] == NULL)
            continue;
        p.declared |= 1u << d;
        p.index[d] = dims[d]->index;
        p.size[d] = dims[d]->size;
    }
    p.schedule = m->has_schedule ? (uint32_t)m->schedule : SF_SCHEDULE_NONE;
    p.virtual_stages = m->has_virtual_stages ? m->virtual_stages : 0;
    if (sf_parallel_check(&p, h->world_size, NULL) < 0)
        return reject(ret_why, SFD_REJ_PARALLEL_INVALID);
    *ret = p;
    return 0;
}

int sfd_validate_hello(const Stagefrontier__Hello *h, const struct sfd_limits *lim,
                       sf_schema *ret_schema, enum sfd_reject *ret_why)
{
    if (h->protocol_version != SFD_PROTOCOL_VERSION)
        return reject(ret_why, SFD_REJ_PROTOCOL);
    if (h->job_id == NULL || !sfd_job_id_valid(h->job_id))
        return reject(ret_why, SFD_REJ_INVALID);
    if (h->world_size < 1 || h->world_size > SF_MAX_RANKS)
        return reject(ret_why, SFD_REJ_INVALID);
    if (h->world_size > lim->max_ranks)
        return reject(ret_why, SFD_REJ_MAX_RANKS);
    if (h->rank >= h->world_size)
        return reject(ret_why, SFD_REJ_INVALID);
    if (!sf_str_len_ok(h->host, 0, SFD_HOST_MAX) || !sf_str_len_ok(h->role, 0, SFD_ROLE_MAX))
        return reject(ret_why, SFD_REJ_INVALID);
    if (h->has_channel && h->channel > 2)
        return reject(ret_why, SFD_REJ_INVALID);
    /* A rank's local rank is below the job's world size; its GPU is a device
     * index or UUID, as CUDA_VISIBLE_DEVICES spells them. */
    if (h->has_local_rank && h->local_rank >= h->world_size)
        return reject(ret_why, SFD_REJ_INVALID);
    if (h->gpu != NULL && !gpu_name_valid(h->gpu))
        return reject(ret_why, SFD_REJ_INVALID);
    /* A run id is spelt as a job id (SF_MAX_RUN_ID_LEN == SF_MAX_JOB_ID_LEN). */
    if (h->run_id != NULL && h->run_id[0] != '\0' && !sfd_job_id_valid(h->run_id))
        return reject(ret_why, SFD_REJ_INVALID);
    if (h->has_restart_count && h->restart_count > SF_MAX_RESTART_COUNT)
        return reject(ret_why, SFD_REJ_INVALID);
    if (h->n_stage_names < 2 || h->n_stage_names > SF_MAX_STAGES)
        return reject(ret_why, SFD_REJ_INVALID);
    if (h->n_stage_groups != 0 && h->n_stage_groups != h->n_stage_names)
        return reject(ret_why, SFD_REJ_INVALID);
    for (size_t i = 0; i < h->n_stage_names; i++) {
        if (!sf_str_len_ok(h->stage_names[i], 1, SF_MAX_NAME_LEN))
            return reject(ret_why, SFD_REJ_INVALID);
        if (h->n_stage_groups && !sf_str_len_ok(h->stage_groups[i], 0, SF_MAX_NAME_LEN))
            return reject(ret_why, SFD_REJ_INVALID);
    }
    uint64_t sync_mask = 0;
    for (size_t i = 0; i < h->n_sync_stages; i++) {
        if (h->sync_stages[i] + (size_t)1 >= h->n_stage_names ||
            (i && h->sync_stages[i] <= h->sync_stages[i - 1]))
            return reject(ret_why, SFD_REJ_INVALID);
        sync_mask |= UINT64_C(1) << h->sync_stages[i];
    }
    if (h->n_sync_groups != 0 && h->n_sync_groups != h->n_sync_stages)
        return reject(ret_why, SFD_REJ_SYNC_GROUP);
    uint8_t sync_groups[SF_MAX_STAGES];
    for (size_t i = 0; i < h->n_sync_groups; i++) {
        if (h->sync_groups[i] > SF_SYNC_GROUP_MAX)
            return reject(ret_why, SFD_REJ_SYNC_GROUP);
        sync_groups[i] = (uint8_t)h->sync_groups[i];
    }
    uint32_t acc = h->has_accumulation ? h->accumulation : 1;
    if (acc < 1 || acc > SF_MAX_ACCUMULATION)
        return reject(ret_why, SFD_REJ_INVALID);
    if (h->has_last_sent_step && (h->last_sent_step < -1 || h->last_sent_step >= SFD_MAX_STEP))
        return reject(ret_why, SFD_REJ_INVALID);
    sf_parallel par;
    if ((!h->has_channel || h->channel == 0) && sfd_hello_parallel(h, &par, ret_why) < 0)
        return -EINVAL;

    sf_schema s;
    uint32_t version = h->has_schema_version ? h->schema_version : 1;
    if (sf_schema_init_sync(
            &s, version, (uint32_t)h->n_stage_names, (const char *const *)h->stage_names,
            h->n_stage_groups ? (const char *const *)h->stage_groups : NULL, acc, sync_mask) < 0)
        return reject(ret_why, SFD_REJ_INVALID);
    if (sf_schema_recorded_stages(&s) != h->n_stage_names) {
        sf_schema_clear(&s); /* ".sync_wait" names are sfd's to make, never the client's */
        return reject(ret_why, SFD_REJ_INVALID);
    }
    if (s.hash != h->schema_hash) {
        sf_schema_clear(&s);
        return reject(ret_why, SFD_REJ_SCHEMA_HASH);
    }
    if (sf_schema_set_sync_groups(&s, sync_groups, (uint32_t)h->n_sync_groups) < 0) {
        sf_schema_clear(&s);
        return reject(ret_why, SFD_REJ_SYNC_GROUP);
    }
    if (ret_schema != NULL)
        *ret_schema = s;
    else
        sf_schema_clear(&s);
    return 0;
}

static bool duration_ok(int64_t v)
{
    return v >= 0 && v <= SF_MAX_DURATION_NS;
}

static int validate_record(const Stagefrontier__StepRecord *r, uint32_t n_stages,
                           enum sfd_reject *ret_why)
{
    if (r->step < 0 || r->step >= SFD_MAX_STEP || r->n_durations_ns != n_stages)
        return reject(ret_why, SFD_REJ_INVALID);
    for (size_t i = 0; i < r->n_durations_ns; i++)
        if (!duration_ok(r->durations_ns[i]))
            return reject(ret_why, SFD_REJ_INVALID);
    if (r->has_step_wall_ns &&
        !(r->step_wall_ns >= 0 && r->step_wall_ns <= SF_MAX_DURATION_NS * SF_MAX_STAGES))
        return reject(ret_why, SFD_REJ_INVALID);
    if (r->has_overlap_ns &&
        !(r->overlap_ns >= 0 && r->overlap_ns <= SF_MAX_DURATION_NS * SF_MAX_STAGES))
        return reject(ret_why, SFD_REJ_INVALID);
    if (r->has_flags && (r->flags & ~(uint32_t)(SF_ROW_VIOLATION | SF_ROW_NON_MONOTONIC)))
        return reject(ret_why, SFD_REJ_INVALID);
    if (r->n_arrivals > SF_MAX_STAGES)
        return reject(ret_why, SFD_REJ_INVALID);
    if (r->event != NULL) {
        const Stagefrontier__EventSample *e = r->event;
        if (e->state > STAGEFRONTIER__EVENT_SAMPLE__STATE__MISSING)
            return reject(ret_why, SFD_REJ_INVALID);
        if ((e->has_cpu_ns && !duration_ok(e->cpu_ns)) ||
            (e->has_gpu_ns && !duration_ok(e->gpu_ns)))
            return reject(ret_why, SFD_REJ_INVALID);
    }
    return 0;
}

int sfd_record_split(const Stagefrontier__StepRecord *r, const sf_schema *schema,
                     const int64_t *fallback, int64_t *d, uint32_t *flags,
                     uint32_t *ret_bad_fallbacks, enum sfd_reject *ret_why)
{
    uint32_t bad = 0;
    uint32_t n = sf_schema_recorded_stages(schema);
    int64_t own[SF_MAX_STAGES];
    for (uint32_t i = 0; i < n; i++)
        own[i] = -1;
    for (size_t i = 0; i < r->n_arrivals; i++) {
        const Stagefrontier__Arrival *a = r->arrivals[i];
        if (a->stage >= n || own[a->stage] != -1)
            return reject(ret_why, SFD_REJ_INVALID);
        if (a->own_ns < 0 || a->own_ns > r->durations_ns[a->stage])
            return reject(ret_why, SFD_REJ_ARRIVAL_RANGE);
        own[a->stage] = a->own_ns;
    }
    /* Explicit marks win; an enqueue point only fills a stage without one. */
    for (uint32_t i = 0; fallback && i < n; i++) {
        if (own[i] != -1 || fallback[i] < 0)
            continue;
        if (fallback[i] > r->durations_ns[i])
            bad++;
        else
            own[i] = fallback[i];
    }
    if (ret_bad_fallbacks)
        *ret_bad_fallbacks = bad;
    bool missing;
    int e = sf_schema_split(schema, r->durations_ns, own, d, &missing);
    if (e == -EINVAL)
        return reject(ret_why, SFD_REJ_ARRIVAL_STAGE);
    if (e < 0)
        return reject(ret_why, SFD_REJ_ARRIVAL_RANGE);
    if (missing)
        *flags |= SF_ROW_ARRIVAL_MISSING;
    return 0;
}

int sfd_record_issue_lags(const Stagefrontier__StepRecord *r, const sf_schema *schema, int64_t *lag,
                          enum sfd_reject *ret_why)
{
    uint32_t slot[SF_MAX_STAGES], n_sync = 0;
    /* Recorded stage i's place among the synchronizing stages. */
    for (uint32_t k = 0, i = 0; k < schema->n_stages; k++, i++) {
        slot[i] = UINT32_MAX;
        if (schema->sync_mask >> k & 1)
            slot[i] = n_sync++, k++;
    }
    for (uint32_t j = 0; j < n_sync; j++)
        lag[j] = -1;
    int found = 0;
    uint32_t n_recorded = sf_schema_recorded_stages(schema);
    for (size_t i = 0; i < r->n_arrivals; i++) {
        const Stagefrontier__Arrival *a = r->arrivals[i];
        if (!a->has_issue_ns && !a->has_complete_ns)
            continue;
        /* sfd_record_split checked the stage and own_ns. */
        if (a->stage >= n_recorded || slot[a->stage] == UINT32_MAX)
            return reject(ret_why, SFD_REJ_ARRIVAL_STAGE);
        int64_t len = r->durations_ns[a->stage];
        if (!a->has_issue_ns || a->issue_ns < a->own_ns || a->issue_ns > len)
            return reject(ret_why, SFD_REJ_ARRIVAL_RANGE);
        if (a->has_complete_ns && (a->complete_ns < a->issue_ns || a->complete_ns > len))
            return reject(ret_why, SFD_REJ_ARRIVAL_RANGE);
        lag[slot[a->stage]] = a->issue_ns - a->own_ns;
        found++;
    }
    return found;
}

int sfd_record_sync_waits(const Stagefrontier__StepRecord *r, const sf_schema *schema,
                          int64_t *wait, enum sfd_reject *ret_why)
{
    uint32_t slot[SF_MAX_STAGES], n_sync = 0;
    for (uint32_t k = 0, i = 0; k < schema->n_stages; k++, i++) {
        slot[i] = UINT32_MAX;
        if (schema->sync_mask >> k & 1)
            slot[i] = n_sync++, k++;
    }
    for (uint32_t j = 0; j < n_sync; j++) {
        wait[j] = -1;
        wait[n_sync + j] = 0;
    }
    int found = 0;
    uint32_t n_recorded = sf_schema_recorded_stages(schema);
    for (size_t i = 0; i < r->n_arrivals; i++) {
        const Stagefrontier__Arrival *a = r->arrivals[i];
        if (!a->has_wait_ns && !a->has_waits)
            continue;
        if (a->stage >= n_recorded || slot[a->stage] == UINT32_MAX)
            return reject(ret_why, SFD_REJ_ARRIVAL_STAGE);
        if (!a->has_wait_ns || !a->has_waits || a->wait_ns < 0 ||
            a->wait_ns > r->durations_ns[a->stage] || a->waits < 1 || a->waits > SF_MAX_SYNC_WAITS)
            return reject(ret_why, SFD_REJ_SYNC_WAIT);
        wait[slot[a->stage]] = a->wait_ns;
        wait[n_sync + slot[a->stage]] = a->waits;
        found++;
    }
    return found;
}

bool sfd_drop_range_ok(bool has_first, bool has_last, int64_t first, int64_t last)
{
    if (has_first != has_last)
        return false;
    return !has_first || (first >= 0 && last >= first && last < SFD_MAX_STEP);
}

int sfd_validate_batch(const Stagefrontier__RecordBatch *b, uint32_t n_stages,
                       enum sfd_reject *ret_why)
{
    if (b->n_records < 1 || b->n_records > MAX_BATCH_RECORDS)
        return reject(ret_why, SFD_REJ_INVALID);
    if (!sfd_drop_range_ok(b->has_dropped_first_step, b->has_dropped_last_step,
                           b->dropped_first_step, b->dropped_last_step))
        return reject(ret_why, SFD_REJ_INVALID);
    for (size_t i = 0; i < b->n_records; i++) {
        int r = validate_record(b->records[i], n_stages, ret_why);
        if (r < 0)
            return r;
    }
    return 0;
}

int sfd_validate_nccl(const Stagefrontier__NcclBatch *b, enum sfd_reject *ret_why)
{
    if (b->step < 0 || b->step >= SFD_MAX_STEP || b->n_aggregates > MAX_NCCL_AGGREGATES)
        return reject(ret_why, SFD_REJ_INVALID);
    if (!sf_str_len_ok(b->comm_name, 0, SF_SIDE_COMM_MAX) ||
        !sf_str_len_ok(b->enclosing_stage, 0, SF_MAX_NAME_LEN))
        return reject(ret_why, SFD_REJ_INVALID);
    for (size_t i = 0; i < b->n_aggregates; i++) {
        const Stagefrontier__NcclAggregate *a = b->aggregates[i];
        if (!sf_str_len_ok(a->collective, 1, SF_SIDE_NAME_MAX) ||
            !sf_str_len_ok(a->datatype, 0, SF_SIDE_NAME_MAX) ||
            !sf_str_len_ok(a->algorithm, 0, SF_SIDE_NAME_MAX) ||
            !sf_str_len_ok(a->protocol, 0, SF_SIDE_NAME_MAX))
            return reject(ret_why, SFD_REJ_INVALID);
        if (a->has_size_bucket && a->size_bucket > 64)
            return reject(ret_why, SFD_REJ_INVALID);
    }
    if (b->has_last_enqueue_ns && b->last_enqueue_ns > (uint64_t)SF_MAX_DURATION_NS)
        return reject(ret_why, SFD_REJ_ARRIVAL_RANGE);
    /* Kernel times only with their point, both or neither, in order:
     * enqueued, then started, then ended. */
    if (b->has_kernel_start_ns || b->has_kernel_end_ns) {
        if (!b->has_last_enqueue_ns || !b->has_kernel_start_ns || !b->has_kernel_end_ns ||
            b->kernel_start_ns < b->last_enqueue_ns || b->kernel_end_ns < b->kernel_start_ns ||
            b->kernel_end_ns > (uint64_t)SF_MAX_DURATION_NS)
            return reject(ret_why, SFD_REJ_KERNEL_TIME);
    }
    return 0;
}

/*
 * Client lifetime: options and their environment defaults (docs/SPEC.md section 4),
 * argument checks, open/close, statistics and fork detection. Everything the
 * hot path needs is allocated here, once; nothing here runs per stage.
 */
#include <errno.h>
#include <limits.h>
#include <strings.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"

/* Bumped in every fork() child; a client compares it at flush time, which
 * costs a load instead of a getpid() syscall per batch. */
static uint64_t fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
    __atomic_add_fetch(&fork_generation, 1, __ATOMIC_RELAXED);
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, on_fork_child);
}

bool sf__fork_check(sf_client *c)
{
    if (__atomic_load_n(&fork_generation, __ATOMIC_RELAXED) == c->fork_generation)
        return false;
    /* Inherited by a child: the socket is the parent's connection and the
     * rank is the parent's. Close our copy and never speak again. */
    sf__transport_close(&c->tr);
    c->ring.count = 0;
    c->inert = true;
    return true;
}

void sf_client_options_init(sf_client_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof *opts);
    opts->rank = opts->world_size = opts->local_rank = -1;
    opts->window_steps = opts->warmup_steps = -1;
    opts->heartbeat_ms = -1;
    opts->flush_ms = -1;
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* opt >= 0 wins; else the environment variable; else dflt. -EINVAL on a
 * malformed or out-of-range value. */
static int resolve_int(int opt, const char *env, int dflt, int *ret)
{
    if (opt < -1)
        return -EINVAL;
    if (opt >= 0) {
        *ret = opt;
        return 0;
    }
    const char *v = env_nonempty(env);
    if (v == NULL) {
        *ret = dflt;
        return 0;
    }
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < 0 || n > INT_MAX)
        return -EINVAL;
    *ret = (int)n;
    return 0;
}

static bool env_true(const char *name)
{
    const char *v = env_nonempty(name);
    return v != NULL &&
           (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

static bool job_id_valid(const char *id)
{
    size_t len = strnlen(id, SF_CLIENT_MAX_JOB_ID_LEN + 1);
    if (len == 0 || len > SF_CLIENT_MAX_JOB_ID_LEN)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = id[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == ':' || ch == '-'))
            return false;
    }
    return true;
}

static int resolve_double_env(double opt, const char *env, double *ret)
{
    const char *v = env_nonempty(env);
    if (opt != 0.0 || v == NULL) {
        *ret = opt;
        return 0;
    }
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno != 0 || *end != '\0')
        return -EINVAL;
    *ret = d;
    return 0;
}

/* Where launchers put a process's identity, in order of precedence
 * (docs/CLIENT.md): torchrun and torch.distributed, then Open MPI's mpirun,
 * then Slurm's srun. The first launcher whose rank variable is set supplies
 * all three values, so one never mixes a torchrun rank with a Slurm size. */
static const struct launcher_env {
    const char *rank, *world_size, *local_rank;
} launcher_envs[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

static const struct launcher_env *find_launcher(void)
{
    for (size_t i = 0; i < sizeof launcher_envs / sizeof launcher_envs[0]; i++)
        if (env_nonempty(launcher_envs[i].rank) != NULL)
            return &launcher_envs[i];
    return NULL;
}

/* Said once per process: a job of several ranks that all fall back to rank 0
 * shows up only as duplicate_rank rejections in the daemon's log. */
static void warn_no_rank_once(void)
{
    static int warned;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        return;
    fprintf(stderr, "stagefrontier: no rank in the environment (RANK, OMPI_COMM_WORLD_RANK or "
                    "SLURM_PROCID) and none given; reporting as rank 0\n");
}

/* Resolved, validated identity: everything but the schema. */
struct resolved {
    const char *job_id, *socket_path, *role;
    int rank, world_size, local_rank;
    int window_steps, warmup_steps; /* -1: the daemon's */
    int heartbeat_ms;               /* 0: no heartbeat thread */
    int flush_ms;
    uint32_t accumulation, buffer, batch;
    double fraction;
    sf_parallel parallel; /* declared == 0: none */
};

static int resolve_identity(const sf_client_options *o, struct resolved *r)
{
    const struct launcher_env *le = find_launcher();
    if (le == NULL)
        le = &launcher_envs[0];
    if (o->rank < 0 && env_nonempty(le->rank) == NULL)
        warn_no_rank_once();
    if (resolve_int(o->rank, le->rank, 0, &r->rank) < 0 ||
        resolve_int(o->world_size, le->world_size, 1, &r->world_size) < 0 ||
        resolve_int(o->local_rank, le->local_rank, -1, &r->local_rank) < 0)
        return -EINVAL;
    return 0;
}

/* The option's coordinates, else SF_PARALLEL's; a malformed variable or
 * sizes that do not tile the world are said once on stderr (the caller gets
 * -EINVAL), since nothing else would tell the trainer why. */
static int resolve_parallel(const sf_client_options *o, struct resolved *r)
{
    const char *why = NULL;
    char err[160];
    sf_parallel_init(&r->parallel);
    if (o->parallel != NULL) {
        r->parallel = *o->parallel;
    } else {
        const char *env = env_nonempty("SF_PARALLEL");
        if (env == NULL)
            return 0;
        if (sf_parallel_parse(env, &r->parallel, err, sizeof err) < 0) {
            fprintf(stderr, "stagefrontier: SF_PARALLEL: %s\n", err);
            return -EINVAL;
        }
    }
    if (sf_parallel_check(&r->parallel, (uint32_t)r->world_size, &why) < 0) {
        fprintf(stderr, "stagefrontier: parallel coordinates: %s (world size %d)\n", why,
                r->world_size);
        return -EINVAL;
    }
    return 0;
}

static int resolve(const sf_client_options *o, struct resolved *r)
{
    r->job_id = o->job_id ? o->job_id : env_nonempty("SF_JOB_ID");
    if (r->job_id == NULL)
        r->job_id = env_nonempty("TORCHELASTIC_RUN_ID");
    if (r->job_id == NULL)
        r->job_id = env_nonempty("SLURM_JOB_ID");
    if (r->job_id == NULL || !job_id_valid(r->job_id))
        return -EINVAL;
    r->socket_path = o->socket_path ? o->socket_path : env_nonempty("SF_SOCKET");
    if (r->socket_path == NULL)
        r->socket_path = SF_DEFAULT_INGEST_SOCKET;
    if (r->socket_path[0] == '\0' || strnlen(r->socket_path, 108) >= 108)
        return -EINVAL;
    r->role = o->role ? o->role : env_nonempty("SF_ROLE");
    if (r->role != NULL && strnlen(r->role, SF_CLIENT_MAX_ROLE_LEN + 1) > SF_CLIENT_MAX_ROLE_LEN)
        return -EINVAL;
    if (resolve_identity(o, r) < 0)
        return -EINVAL;
    /* -1 stays -1 (the daemon's); 0 steps per window is no window at all. */
    if (resolve_int(o->window_steps, "SF_WINDOW_STEPS", -1, &r->window_steps) < 0 ||
        resolve_int(o->warmup_steps, "SF_WARMUP_STEPS", -1, &r->warmup_steps) < 0 ||
        r->window_steps == 0)
        return -EINVAL;
    if (resolve_int(o->heartbeat_ms, "SF_HEARTBEAT_MS", 1000, &r->heartbeat_ms) < 0 ||
        r->heartbeat_ms > SF_CLIENT_MAX_HEARTBEAT_MS)
        return -EINVAL;
    if (resolve_int(o->flush_ms, "SF_FLUSH_MS", SF__DEFAULT_FLUSH_MS, &r->flush_ms) < 0 ||
        r->flush_ms < 1 || r->flush_ms > SF_CLIENT_MAX_FLUSH_MS)
        return -EINVAL;
    if (r->world_size < 1 || r->world_size > SF_CLIENT_MAX_WORLD_SIZE || r->rank >= r->world_size)
        return -EINVAL;
    r->accumulation = o->accumulation ? o->accumulation : 1;
    if (r->accumulation > SF_CLIENT_MAX_ACCUMULATION)
        return -EINVAL;
    r->buffer = o->buffer_records ? o->buffer_records : SF__DEFAULT_BUFFER;
    r->batch = o->batch_records ? o->batch_records : SF__DEFAULT_BATCH;
    if (r->buffer > SF_CLIENT_MAX_BUFFER || r->batch > SF_CLIENT_MAX_BATCH)
        return -EINVAL;
    if (r->batch > r->buffer)
        r->batch = r->buffer;
    if (resolve_double_env(o->event_sample_fraction, "SF_EVENT_SAMPLE", &r->fraction) < 0 ||
        !(r->fraction >= 0.0 && r->fraction <= 1.0))
        return -EINVAL;
    if (o->stage_names == NULL && (o->stage_groups != NULL || o->n_stages != 0))
        return -EINVAL;
    return resolve_parallel(o, r);
}

/* One CUDA_VISIBLE_DEVICES entry as sfd accepts it: 1..SF__GPU_NAME_MAX of
 * [A-Za-z0-9-] (an index, or a GPU-/MIG- UUID); "-1", CUDA's "no device",
 * names none. */
static bool gpu_entry_ok(const char *s, size_t n)
{
    if (n == 0 || n > SF__GPU_NAME_MAX || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '-'))
            return false;
    return true;
}

/* The GPU this rank uses, as the node numbers it (docs/CLIENT.md): the only
 * entry of CUDA_VISIBLE_DEVICES (one device per process), else its entry at
 * the local rank (one device per local rank, as torchrun does). "" when the
 * variable is unset or does not say. */
static void gpu_from_env(int local_rank, char *out, size_t cap)
{
    const char *v = env_nonempty("CUDA_VISIBLE_DEVICES");
    size_t count = 0;
    out[0] = '\0';
    if (v == NULL)
        return;
    for (const char *p = v; p != NULL; p = strchr(p, ','), p = p ? p + 1 : NULL)
        count++;
    size_t want = count == 1 ? 0 : (size_t)local_rank;
    if (count > 1 && (local_rank < 0 || want >= count))
        return;
    const char *p = v;
    for (size_t i = 0; i < want; i++)
        p = strchr(p, ',') + 1;
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (gpu_entry_ok(p, n) && n < cap) {
        memcpy(out, p, n);
        out[n] = '\0';
    }
}

static void fill_hello(sf_client *c, const struct resolved *r)
{
    size_t jl = strlen(r->job_id);
    memcpy(c->job_id, r->job_id, jl + 1);
    if (r->role != NULL)
        memcpy(c->role, r->role, strlen(r->role) + 1);
    uint32_t restart_count;
    sf__launch_identity(c->run_id, sizeof c->run_id, &restart_count);
    if (gethostname(c->host, sizeof c->host) < 0)
        c->host[0] = '\0';
    c->host[sizeof c->host - 1] = '\0';
    gpu_from_env(r->local_rank, c->gpu, sizeof c->gpu);
    c->parallel = r->parallel;
    c->hello = (struct sf__hello_info){
        .job_id = c->job_id,
        .rank = (uint32_t)r->rank,
        .world_size = (uint32_t)r->world_size,
        /* a local rank beyond the job would make sfd refuse the hello */
        .local_rank = r->local_rank < r->world_size ? r->local_rank : -1,
        .host = c->host,
        .gpu = c->gpu,
        .pid = (uint32_t)getpid(),
        .n_stages = c->schema.n,
        .stage_names = c->schema.names,
        .stage_groups = c->schema.groups,
        .schema_hash = c->schema.hash,
        .sync_stages = c->schema.sync_ids,
        .n_sync_stages = c->schema.n_sync,
        .sync_groups = c->any_sync_group ? c->sync_groups : NULL,
        .schema_version = SF_CLIENT_SCHEMA_VERSION,
        .accumulation = r->accumulation,
        .role = c->role,
        .channel = SF__CHANNEL_STEPS,
        .window_steps = r->window_steps,
        .warmup_steps = r->warmup_steps,
        .run_id = c->run_id,
        .restart_count = restart_count,
        .parallel = c->parallel.declared ? &c->parallel : NULL,
    };
}

/* Synchronizing stages by name: each a timed stage (not the residual). */
/* The groups of docs/CLIENT.md, "Synchronizing groups", in the wire's
 * numbering (enum sf_sync_group). */
static const char *const sync_group_names[4] = {"world", "dp", "tp", "pp"};

static int mark_sync_stages(sf_client *c, const sf_client_options *o)
{
    uint64_t mask = 0;
    uint8_t group_of[SF_CLIENT_MAX_STAGES] = {0};
    if (o->n_sync_stages > 0 && o->sync_stages == NULL)
        return -EINVAL;
    for (uint32_t i = 0; i < o->n_sync_stages; i++) {
        uint32_t k = 0;
        while (k + 1 < c->schema.n &&
               (o->sync_stages[i] == NULL || strcmp(c->schema.names[k], o->sync_stages[i]) != 0))
            k++;
        if (k + 1 >= c->schema.n)
            return -EINVAL;
        mask |= UINT64_C(1) << k;
        int g = 0;
        if (o->sync_groups != NULL && o->sync_groups[i] != NULL) {
            for (g = 0; g <= 3 && strcmp(o->sync_groups[i], sync_group_names[g]) != 0; g++)
                ;
            if (g > 3)
                return -EINVAL;
        }
        group_of[k] = (uint8_t)g;
    }
    int r = sf__schema_mark_sync(&c->schema, mask);
    for (uint32_t j = 0; r == 0 && j < c->schema.n_sync; j++) {
        c->sync_groups[j] = group_of[c->schema.sync_ids[j]];
        c->any_sync_group |= c->sync_groups[j] != 0;
    }
    return r;
}

static void client_free(sf_client *c)
{
    /* A fork child has no heartbeat thread to join. */
    bool child = __atomic_load_n(&fork_generation, __ATOMIC_RELAXED) != c->fork_generation;
    sf__heartbeat_stop(c->heartbeat, child);
    sf__control_free(c);
    sf__transport_close(&c->tr);
    sf__cuda_channel_close(c->cuda);
    sf__batch_free(c);
    sf__ring_free(&c->ring);
    free(c->cur);
    free(c->cur_arrival);
    free(c->cur_issue);
    free(c->issue_at);
    free(c->complete_at);
    free(c->cur_wait);
    free(c->cur_waits);
    free(c->sync_enter_at);
    sf__schema_free(&c->schema);
    free(c);
}

static int open_disabled(sf_client **ret)
{
    sf_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    c->inert = c->disabled = true;
    c->tr.fd = -1;
    *ret = c;
    return 0;
}

int sf_client_open(const sf_client_options *opts, sf_client **ret)
{
    if (opts == NULL || ret == NULL)
        return -EINVAL;
    if (opts->disabled || env_true("SF_DISABLE"))
        return open_disabled(ret);
    struct resolved r;
    int err = resolve(opts, &r);
    if (err < 0)
        return err;
    pthread_once(&atfork_once, register_atfork);

    sf_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    c->tr.fd = -1;
    c->open_stage = -1;
    c->fork_generation = __atomic_load_n(&fork_generation, __ATOMIC_RELAXED);
    err = sf__schema_build(&c->schema, opts->stage_names, opts->stage_groups, opts->n_stages,
                           r.accumulation);
    if (err < 0 || (err = mark_sync_stages(c, opts)) < 0)
        goto fail;
    c->n_stages = c->schema.n;
    c->batch_records = r.batch;
    c->flush_interval_ns = (int64_t)r.flush_ms * 1000000;
    err = -ENOMEM;
    c->cur = calloc(c->n_stages, sizeof *c->cur);
    c->cur_arrival = calloc(c->schema.n_sync + 1, sizeof *c->cur_arrival);
    c->cur_issue = calloc(c->schema.n_sync + 1, sizeof *c->cur_issue);
    c->issue_at = calloc(c->schema.n_sync + 1, sizeof *c->issue_at);
    c->complete_at = calloc(c->schema.n_sync + 1, sizeof *c->complete_at);
    c->cur_wait = calloc(c->schema.n_sync + 1, sizeof *c->cur_wait);
    c->cur_waits = calloc(c->schema.n_sync + 1, sizeof *c->cur_waits);
    c->sync_enter_at = calloc(c->schema.n_sync + 1, sizeof *c->sync_enter_at);
    if (c->cur == NULL || c->cur_arrival == NULL || c->cur_issue == NULL || c->issue_at == NULL ||
        c->complete_at == NULL || c->cur_wait == NULL || c->cur_waits == NULL ||
        c->sync_enter_at == NULL)
        goto fail;
    /* A record's ring slot holds its durations, then per synchronizing
     * stage its arrival, issue and completion offsets, its accumulated
     * sync wait and the sync points counted (SF__SYNC_MARKS). */
    err = sf__ring_init(&c->ring, r.buffer, c->n_stages + SF__SYNC_MARKS * c->schema.n_sync);
    if (err < 0)
        goto fail;
    err = sf__batch_alloc(c);
    if (err < 0 || (err = sf__control_alloc(c)) < 0)
        goto fail;
    if (r.fraction > 0.0) {
        err = sf__cuda_channel_open(r.fraction, &c->cuda);
        if (err < 0 && err != -ENOTSUP)
            goto fail;
    }
    fill_hello(c, &r);
    err = sf__transport_init(&c->tr, r.socket_path, &c->hello, c->hellobuf);
    if (err < 0)
        goto fail;
    c->last_now = sf__now_ns();
    c->last_flush_ns = c->last_now;
    sf__transport_connect(&c->tr, c->last_now); /* absent daemon: not an error */
    if (r.heartbeat_ms > 0) {
        err = sf__heartbeat_start(c, (uint32_t)r.heartbeat_ms, &c->heartbeat);
        if (err < 0)
            goto fail;
    }
    /* For the NCCL plugin in this process: the first client's schema wins. */
    sf__side_publish_schema(c->n_stages, (const char *const *)c->schema.names, c->schema.sync_mask);
    *ret = c;
    return 0;
fail:
    client_free(c);
    return err;
}

int sf_client_open_env(sf_client **ret)
{
    sf_client_options o;
    sf_client_options_init(&o);
    return sf_client_open(&o, ret);
}

void sf_client_close(sf_client *c)
{
    if (c == NULL)
        return;
    if (!c->inert && !sf__fork_check(c)) {
        /* Drain what the socket takes now; never wait for it. */
        int64_t now = sf__now_ns();
        sf__capture_finish_early(c);
        sf__control_exchange(c, now);
        uint32_t tries = c->ring.cap / (c->batch_records ? c->batch_records : 1) + 2;
        while (c->ring.count > 0 && tries-- > 0 && sf__transport_connected(&c->tr)) {
            uint32_t before = c->ring.count;
            c->next_send_ns = 0;
            sf__batch_send_one(c, now);
            if (c->ring.count == before)
                break;
        }
    }
    client_free(c);
}

int sf_client_flush(sf_client *c)
{
    if (c == NULL)
        return -EINVAL;
    if (c->inert || sf__fork_check(c))
        return 0;
    int64_t now = sf__now_ns();
    return sf__batch_send_one(c, now);
}

int sf_stage_id(const sf_client *c, const char *name)
{
    if (c == NULL || name == NULL)
        return -EINVAL;
    if (c->disabled)
        return 0;
    for (uint32_t i = 0; i < c->schema.n; i++)
        if (strcmp(c->schema.names[i], name) == 0)
            return (int)i;
    return -ENOENT;
}

int sf_stage_count(const sf_client *c)
{
    if (c == NULL)
        return -EINVAL;
    return (int)c->schema.n;
}

const char *sf_stage_name(const sf_client *c, int stage_id)
{
    if (c == NULL || stage_id < 0 || (uint32_t)stage_id >= c->schema.n)
        return NULL;
    return c->schema.names[stage_id];
}

uint64_t sf_client_schema_hash(const sf_client *c)
{
    return c != NULL ? c->schema.hash : 0;
}

int sf_client_get_stats(const sf_client *c, sf_client_stats *ret)
{
    if (c == NULL || ret == NULL)
        return -EINVAL;
    *ret = (sf_client_stats){
        .steps = c->steps,
        .records_sent = c->records_sent,
        .records_dropped = c->records_dropped,
        .batches_sent = c->batches_sent,
        .send_syscalls = c->tr.send_syscalls,
        .connects = c->tr.connects,
        .reconnects = c->tr.reconnects,
        .violations = c->violations,
        .connected = sf__transport_connected(&c->tr),
        .heartbeats_sent = sf__heartbeat_sent(c->heartbeat),
    };
    if (c->cap != NULL) {
        ret->captures_requested = c->cap->requested;
        ret->captures_done = c->cap->done;
        ret->captures_failed = c->cap->failed_total;
        ret->captures_unsupported = c->cap->unsupported;
        ret->captures_busy = c->cap->busy;
        ret->control_rejected = c->cap->rejected;
    }
    return 0;
}

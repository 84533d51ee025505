/*
 * The peer-layer implementation of the cluster-operations interface
 * (cluster.h): reads the [peer] config, starts the node on sfd's loop, hands
 * each closed window's summary to it (instead of the local report), and turns
 * every merged summary the root publishes into a report in the job's store,
 * computed with the job's own gates. It reaches daemon/peer only through
 * peer.h, and windows only through sfd.h's seams.
 */
#include <errno.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>

#include "capture.h"
#include "cluster.h"
#include "history.h"
#include "peer.h"
#include "sfd.h"

typedef struct glue {
    struct sfd *d;
    sfd_peer_node *node;
    sfd_peer_config cfg;
    bool any_key;
    char err[256];
} glue;

static int on_kv(void *user, const char *section, const char *key, const char *value)
{
    glue *g = user;
    if (strcmp(section, "peer") != 0 && strcmp(section, "cluster") != 0)
        return 1;
    g->any_key = true;
    int r = sfd_peer_config_set(&g->cfg, key, value);
    if (r < 0 && g->err[0] == '\0')
        snprintf(g->err, sizeof g->err, "[%s] %s = %s: %s", section, key, value,
                 r == -ENOENT ? "unknown key" : "invalid value");
    return 1;
}

static int glue_submit(void *ctx, struct sfd_job *job, sf_summary *summary)
{
    glue *g = ctx;
    int r = sfd_peer_submit(g->node, job->id, job->uid, job->incarnation, summary);
    if (r < 0 && r != -EALREADY)
        sfd_log(SFD_LOG_WARNING, job->id, "window summary not handed to the cluster: %s",
                strerror(-r));
    return r;
}

static const char *glue_status(const void *ctx)
{
    (void)ctx;
    return "cluster";
}

static const char *glue_role(const void *ctx)
{
    const glue *g = ctx;
    const char *role;
    uint64_t term;
    sfd_peer_node_role(g->node, &role, &term);
    return role;
}

static uint64_t glue_term(const void *ctx)
{
    const glue *g = ctx;
    const char *role;
    uint64_t term;
    sfd_peer_node_role(g->node, &role, &term);
    return term;
}

static int glue_peers(void *ctx, char **ret_text)
{
    glue *g = ctx;
    return sfd_peer_status_json(g->node, ret_text);
}

static int glue_capture_decider(void *ctx)
{
    glue *g = ctx;
    return sfd_peer_capture_decider(g->node);
}

static uint32_t glue_node_id(const void *ctx)
{
    const glue *g = ctx;
    return sfd_peer_node_id(g->node);
}

/* Any node may start a capture, with no round trip to agree on its id: a
 * random one (53 bits, exact in JSON) is unique in the cluster in practice,
 * and survives restarts, which a counter would not. */
static uint64_t glue_capture_id(void *ctx)
{
    (void)ctx;
    uint64_t id = 0;
    while (id == 0) {
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
            id = 0;
        id &= SF_MAX_CAPTURE_ID;
    }
    return id;
}

static int glue_capture_request(void *ctx, const sfd_peer_capture_request *q)
{
    glue *g = ctx;
    return sfd_peer_capture_request_send(g->node, q);
}

static int glue_capture_result(void *ctx, const sfd_peer_capture_result *r, uint32_t except)
{
    glue *g = ctx;
    return sfd_peer_capture_result_send(g->node, r, except);
}

static int on_capture_request(void *ctx, uint32_t from, bool from_root,
                              const sfd_peer_capture_request *q)
{
    glue *g = ctx;
    return sfd_capture_peer_request(g->d, from, from_root, q);
}

static int on_capture_result(void *ctx, uint32_t from, bool from_root,
                             const sfd_peer_capture_result *r)
{
    glue *g = ctx;
    return sfd_capture_peer_result(g->d, from, from_root, r);
}

static int glue_live_rows(void *ctx, const sfd_peer_live_rows *b)
{
    glue *g = ctx;
    return sfd_peer_live_rows_send(g->node, b);
}

/* A member's part of the live verdict's steps. A job not known here yet (no
 * report of it delivered) has no test: its parts are ignored, not refused. */
static int on_live_rows(void *ctx, uint32_t from, const sfd_peer_live_rows *b)
{
    glue *g = ctx;
    (void)from;
    struct sfd_job *job = sfd_job_lookup(g->d, (uid_t)b->uid, b->job, b->incarnation);
    if (job == NULL)
        return 0;
    uint64_t before = job->verdict.seq;
    int r = sfd_verdict_cluster_part(job, b);
    /* A verdict started or ended: written and acted on here, as windows.c
     * does for a step completed on this node, so the verdict's files stay
     * below the history (docs/LAYOUT.md, "Layering in sfd"). */
    if (job->verdict.seq != before) {
        sfd_history_put_verdict_events(g->d, job);
        if (job->verdict.test != NULL)
            sfd_capture_consider_live(job, sf_live_verdict_get(job->verdict.test));
    }
    return r;
}

static void glue_free(void *ctx);

/* Closing the node is asynchronous: the glue is freed once the loop has let
 * go of the node's handles. */
static void glue_close(void *ctx)
{
    glue *g = ctx;
    sfd_peer_node_close(g->node, glue_free, g);
}

static const struct sfd_cluster_ops peer_ops = {
    .submit = glue_submit,
    .status = glue_status,
    .role = glue_role,
    .term = glue_term,
    .peers = glue_peers,
    .close = glue_close,
    .capture_decider = glue_capture_decider,
    .node_id = glue_node_id,
    .capture_id = glue_capture_id,
    .capture_request = glue_capture_request,
    .capture_result = glue_capture_result,
    .live_rows = glue_live_rows,
};

/* A job with no ranks on this node: known from its cluster reports alone, so
 * that any node can answer for the cluster. It is the remote owner's job,
 * under the report's key (docs/CLUSTER.md, "Job keys"). */
static int adopt_remote_job(struct sfd *d, const sfd_window_key *key, const sf_summary *merged,
                            struct sfd_job **ret)
{
    enum sfd_reject why;
    struct sfd_job *job = NULL;
    int r = sfd_job_create(d, key->job, (uid_t)key->uid, key->incarnation, &job, &why);
    if (r == 0) {
        job->reports_only = true;
        r = sfd_job_bind_shape(job, &merged->schema, merged->meta.world_size);
    }
    if (r < 0) {
        sfd_log(SFD_LOG_WARNING, key->job,
                "cluster report of uid %u's job (incarnation %u), not on this node, dropped: %s",
                key->uid, key->incarnation, strerror(-r));
        return r;
    }
    *ret = job;
    return 0;
}

static void deliver(void *ctx, const sfd_window_key *key, uint32_t root_id, uint64_t term,
                    const sf_summary *merged)
{
    glue *g = ctx;
    struct sfd_job *job = sfd_job_lookup(g->d, (uid_t)key->uid, key->job, key->incarnation);
    bool remote = job == NULL || job->reports_only;
    if (job == NULL && adopt_remote_job(g->d, key, merged, &job) < 0)
        return;
    sf_report *report = NULL;
    int r = sf_report_compute(merged, &job->gates, &report);
    if (r < 0) {
        sfd_log(SFD_LOG_ERR, job->id, "window %lld: cluster report failed: %s",
                (long long)key->window, strerror(-r));
        return;
    }
    /* the peer layer keeps merged: a pool keeps a copy */
    r = sfd_publish_report(job, merged, NULL, report, remote);
    if (r == -EALREADY)
        sfd_log(SFD_LOG_DEBUG, job->id, "window %lld.%u: already held", (long long)key->window,
                key->segment);
    else if (r < 0) /* handed over again once this node closes the window */
        sfd_log(SFD_LOG_INFO, job->id,
                "window %lld.%u: report of root %u came before the "
                "window closed here",
                (long long)key->window, key->segment, root_id);
    else
        sfd_log(SFD_LOG_INFO, job->id, "window %lld.%u: cluster report from root %u term %llu",
                (long long)key->window, key->segment, root_id, (unsigned long long)term);
}

static const char *key_hint(int r)
{
    switch (r) {
    case -EPERM:
        return " (the mode must be 0600 or 0400; or pass it with "
               "systemd LoadCredential=, see sfd(8))";
    case -EACCES:
        return " (sfd's user cannot read it: pass it with systemd LoadCredential=, "
               "see sfd(8))";
    case -EINVAL:
        return " (need a regular file of 32 bytes)";
    default:
        return "";
    }
}

/* Loads the cluster key, or resolves the member key's path (the per-link
 * keys are derived by the node). A bare file name is a systemd credential. */
static int resolve_keys(sfd_peer_config *cfg, sfd_peer_key *ret)
{
    char *name = cfg->key_file[0] ? cfg->key_file : cfg->member_key_file;
    char path[4096];
    int r = sfd_peer_key_path(name, path, sizeof path);
    if (r == 0 && cfg->key_file[0] != '\0')
        r = sfd_peer_key_load(path, ret);
    else if (r == 0)
        r = sfd_peer_key_load(path, &(sfd_peer_key){{0}});
    if (r == -ENOENT && strchr(name, '/') == NULL && getenv("CREDENTIALS_DIRECTORY") == NULL) {
        sfd_log(SFD_LOG_ERR, NULL,
                "key %s: a bare name is a systemd credential, but "
                "$CREDENTIALS_DIRECTORY is not set (LoadCredential=%s:... in the unit)",
                name, name);
        return r;
    }
    if (r < 0) {
        sfd_log(SFD_LOG_ERR, NULL, "key %s: %s%s", r == -ENAMETOOLONG ? name : path, strerror(-r),
                key_hint(r));
        return r;
    }
    if (cfg->key_file[0] == '\0')
        memcpy(cfg->member_key_file, path, strlen(path) + 1);
    return 0;
}

static void log_hook(void *ctx, int priority, const char *msg)
{
    (void)ctx;
    sfd_log(priority, NULL, "%s", msg);
}

static void glue_free(void *ctx)
{
    glue *g = ctx;
    sfd_peer_config_clear(&g->cfg);
    free(g);
}

/* A node dials every member and every member dials it (docs/CLUSTER.md,
 * "Known limitations"): two descriptors a member beside ingest's and the
 * operators' connections. Below that, dials fail and are retried every tick,
 * so a large cluster under the unit's default limit is named at start. */
static void warn_descriptors(const struct sfd *d, uint32_t n_members)
{
    struct rlimit rl;
    uint64_t need = 2 * (uint64_t)(n_members - 1) + d->cfg.max_connections + SFD_MAX_QUERY_CONNS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        sfd_log(SFD_LOG_WARNING, NULL,
                "descriptor limit %llu is below the %llu that %u members and max_connections %u "
                "need: raise LimitNOFILE=",
                (unsigned long long)rl.rlim_cur, (unsigned long long)need, n_members,
                d->cfg.max_connections);
}

int sfd_cluster_peer_attach(struct sfd *d, const char *config_path)
{
    if (config_path == NULL)
        return 0;
    glue *g = calloc(1, sizeof *g);
    if (g == NULL)
        return -ENOMEM;
    g->d = d;
    sfd_peer_config_init(&g->cfg);
    int r = ini_parse(config_path, on_kv, g);
    if (r != 0 || g->err[0] != '\0') {
        sfd_log(SFD_LOG_ERR, NULL, "peer config %s: %s", config_path,
                g->err[0] ? g->err : "cannot be parsed");
        glue_free(g);
        return -EINVAL;
    }
    if (!g->any_key) {
        glue_free(g);
        return 0;
    }
    sfd_peer_key key = {{0}};
    /* The state directory is sfd's ([sfd] state_dir), shared with its other
     * durable state. */
    if (d->cfg.state_dir[0] != '\0' && sfd_peer_config_state_dir(&g->cfg, d->cfg.state_dir) < 0)
        sfd_log(SFD_LOG_ERR, NULL, "state_dir %s: too long; peer replay state is not kept",
                d->cfg.state_dir);
    g->cfg.keep_windows = d->cfg.keep_windows; /* what a restart catches up (catchup.c) */
    if ((r = sfd_peer_config_validate(&g->cfg)) < 0) {
        sfd_log(SFD_LOG_ERR, NULL,
                "peer config: node_id, peers and either cluster_key_file "
                "or both member_key_file and member_pub_dir are required, "
                "node_id among the peers, and "
                "failure_timeout_ms >= 2 * heartbeat_ms");
        goto fail;
    }
    if ((r = resolve_keys(&g->cfg, &key)) < 0)
        goto fail;
    sfd_peer_hooks hooks = {.ctx = g,
                            .deliver = deliver,
                            .log = log_hook,
                            .capture_request = on_capture_request,
                            .capture_result = on_capture_result,
                            .live_rows = on_live_rows};
    r = sfd_peer_node_new(d->loop, &g->cfg, &key, &hooks, &g->node);
    if (r == 0)
        r = sfd_peer_node_start(g->node, d->peer_fd);
    if (r < 0) {
        sfd_log(SFD_LOG_ERR, NULL, "peer layer: cannot start: %s", strerror(-r));
        if (g->node != NULL) {
            sfd_peer_node_close(g->node, glue_free, g);
            return r;
        }
        goto fail;
    }
    d->peer_fd = -1; /* the node's listener owns it now */
    sfd_cluster_set(d, &peer_ops, g);
    sfd_log(SFD_LOG_NOTICE, NULL, "peer layer: node %u of %u members", g->cfg.node_id,
            g->cfg.n_members);
    warn_descriptors(d, g->cfg.n_members);
    return 0;
fail:
    glue_free(g);
    return r;
}

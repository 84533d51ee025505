/*
 * sfd entry point: flags, startup (config, sockets bound or socket-activated,
 * timers, signals), SIGHUP reload, SIGTERM shutdown and the deadline timer.
 * Everything hangs off one struct sfd; the handlers live in their own files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <stagefrontier/accounting.h>

#include "history.h"
#include "safe_path.h"
#include "sfd.h"

#define DEFAULT_CONFIG "/etc/stagefrontier/sfd.conf"

/* ---- config and reload ------------------------------------------------------ */

static void resolve_group(struct sfd *d)
{
    struct group gr, *res = NULL;
    char buf[8192];
    d->have_operators_gid = false;
    if (getgrnam_r(d->cfg.operators_group, &gr, buf, sizeof(buf), &res) == 0 && res != NULL) {
        d->operators_gid = gr.gr_gid;
        d->have_operators_gid = true;
    }
}

static int load_config(struct sfd_config *cfg, const struct sfd_flags *f, bool *ret_loaded)
{
    char err[512] = "";
    const char *path = f->config;
    sfd_config_default(cfg);
    if (path == NULL && access(DEFAULT_CONFIG, R_OK) == 0)
        path = DEFAULT_CONFIG;
    if (path != NULL && sfd_config_load(cfg, path, err, sizeof(err)) < 0) {
        fprintf(stderr, "sfd: %s: %s\n", path, err);
        return -EINVAL;
    }
    *ret_loaded = path != NULL;
    if (f->runtime_dir)
        snprintf(cfg->runtime_dir, sizeof(cfg->runtime_dir), "%s", f->runtime_dir);
    if (f->ingest)
        snprintf(cfg->ingest_path, sizeof(cfg->ingest_path), "%s", f->ingest);
    if (f->query)
        snprintf(cfg->query_path, sizeof(cfg->query_path), "%s", f->query);
    if (f->state_dir)
        snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", f->state_dir);
    if (f->log_level) {
        int l = sfd_log_level_parse(f->log_level);
        if (l < 0) {
            fprintf(stderr, "sfd: --log-level %s: expected err, warning, notice, info or debug\n",
                    f->log_level);
            return -EINVAL;
        }
        cfg->log_level = l;
    }
    if (cfg->ingest_path[0] == '\0' &&
        snprintf(cfg->ingest_path, sizeof(cfg->ingest_path), "%s/" SF_INGEST_SOCKET_NAME,
                 cfg->runtime_dir) >= (int)sizeof(cfg->ingest_path))
        goto too_long;
    if (cfg->query_path[0] == '\0' &&
        snprintf(cfg->query_path, sizeof(cfg->query_path), "%s/" SF_QUERY_SOCKET_NAME,
                 cfg->runtime_dir) >= (int)sizeof(cfg->query_path))
        goto too_long;
    return 0;
too_long:
    fprintf(stderr, "sfd: socket path under %s is too long\n", cfg->runtime_dir);
    return -ENAMETOOLONG;
}

static void resize_kept(struct sfd_job *j, uint32_t keep)
{
    sfd_job_trim_kept(j, keep);
    struct sfd_stored *s = realloc(j->stored, keep * sizeof(*s));
    if (s == NULL)
        return;
    if (keep > j->cap_stored)
        memset(s + j->cap_stored, 0, (keep - j->cap_stored) * sizeof(*s));
    j->stored = s;
    j->cap_stored = keep;
}

/* A directory sfd writes into, walked from "/" (safe_path.h): made when
 * missing with SF_SAFE_DIR_CREATE, refused when someone else could steer it (a
 * symbolic link, another owner, writable by others). With all_fatal unset
 * any other failure (absent, not a directory, read-only) is left for the
 * directory's writer to report, and sfd runs without it. */
static int check_dir(const char *what, const char *dir, unsigned flags, mode_t mode, bool all_fatal)
{
    char why[PATH_MAX + 128];
    if (dir[0] == '\0')
        return 0;
    int fd = sf_safe_dir_open(dir, flags, mode, why, sizeof why);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (!all_fatal && fd != -EPERM && fd != -ELOOP)
        return 0;
    sfd_log(SFD_LOG_ERR, NULL, "%s %s refused: %s", what, dir, why);
    return fd;
}

static void reload(struct sfd *d)
{
    struct sfd_config cfg;
    bool loaded;
    if (load_config(&cfg, &d->flags, &loaded) < 0) {
        sfd_log(SFD_LOG_ERR, NULL, "reload: invalid configuration, keeping the running one");
        return;
    }
    /* Socket paths, the runtime and state directories need a restart. */
    memcpy(cfg.runtime_dir, d->cfg.runtime_dir, sizeof(cfg.runtime_dir));
    memcpy(cfg.state_dir, d->cfg.state_dir, sizeof(cfg.state_dir));
    cfg.max_history_mb = d->cfg.max_history_mb;
    memcpy(cfg.ingest_path, d->cfg.ingest_path, sizeof(cfg.ingest_path));
    memcpy(cfg.query_path, d->cfg.query_path, sizeof(cfg.query_path));
    if (check_dir("prom_dir", cfg.prom_dir, SF_SAFE_DIR_SHARED_LEAF, 0, false) < 0) {
        sfd_log(SFD_LOG_ERR, NULL, "reload: keeping prom_dir %s", d->cfg.prom_dir);
        memcpy(cfg.prom_dir, d->cfg.prom_dir, sizeof(cfg.prom_dir));
    }
    d->cfg = cfg;
    if (sfd_ensure_rxbuf(d) < 0)
        sfd_log(SFD_LOG_ERR, NULL, "reload: cannot resize the receive buffer");
    sfd_log_set_level(cfg.log_level);
    resolve_group(d);
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        /* A job keeps its window geometry; thresholds apply from the next window. */
        sf_gates g = cfg.gates;
        g.warmup_steps = j->gates.warmup_steps;
        g.window_steps = j->gates.window_steps;
        g.dense_max_ranks = j->gates.dense_max_ranks;
        j->gates = g;
        resize_kept(j, cfg.keep_windows);
    }
    sfd_tick_now(d);
    sfd_prom_reconfigure(d);
    sfd_log(SFD_LOG_NOTICE, NULL, "configuration reloaded");
}

/* ---- signals and shutdown -------------------------------------------------- */

static void close_handle(uv_handle_t *h)
{
    if (h->loop != NULL && !uv_is_closing(h))
        uv_close(h, NULL);
}

static void shutdown_begin(struct sfd *d)
{
    if (d->stopping)
        return;
    d->stopping = true;
    sfd_notify_stopping(d);
    sfd_log(SFD_LOG_NOTICE, NULL, "shutting down");
    sfd_listener_close(&d->ingest);
    sfd_listener_close(&d->query);
    sfd_cluster_close(d); /* the peer layer, in multi-node mode */
    sfd_conns_close_all(d);
    for (struct sfd_job *j = d->jobs; j != NULL; j = j->next)
        sfd_window_close_all(j, SF_WIN_PARTIAL);
    sfd_alerts_shutdown(d);
    sfd_prom_remove(d); /* a stopped daemon exports nothing */
    close_handle((uv_handle_t *)&d->tick);
    close_handle((uv_handle_t *)&d->status_timer);
    close_handle((uv_handle_t *)&d->watchdog_timer);
    close_handle((uv_handle_t *)&d->prom_timer);
    sfd_conn_limits_stop(d);
    sfd_liveness_stop(d);
    close_handle((uv_handle_t *)&d->sig_term);
    close_handle((uv_handle_t *)&d->sig_int);
    close_handle((uv_handle_t *)&d->sig_hup);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct sfd *d = s->data;
    if (signum == SIGHUP)
        reload(d);
    else
        shutdown_begin(d);
}

/* ---- startup --------------------------------------------------------------- */

static void raise_nofile(struct sfd *d)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)d->cfg.max_connections + 64 && rl.rlim_cur > 128) {
        sfd_log(SFD_LOG_WARNING, NULL, "descriptor limit %llu: max_connections lowered to %llu",
                (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_cur - 64);
        d->cfg.max_connections = (uint32_t)(rl.rlim_cur - 64);
    }
}

/* Socket activation by name: "ingest", "query"; "peer" is left to the
 * multi-node layer. */
static int activated_fds(struct sfd *d, int *ret_ingest, int *ret_query)
{
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);
    *ret_ingest = *ret_query = -1;
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++) {
        int fd = SD_LISTEN_FDS_START + i;
        const char *name = names ? names[i] : "";
        if (strcmp(name, "ingest") == 0)
            *ret_ingest = fd;
        else if (strcmp(name, "query") == 0)
            *ret_query = fd;
        else if (strcmp(name, "peer") == 0)
            d->peer_fd = fd;
        else
            sfd_log(SFD_LOG_WARNING, NULL, "ignoring passed socket named '%s'", name);
    }
    if (names) {
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
    }
    return n;
}

static int start(struct sfd *d)
{
    int fi, fq, r;
    d->peer_fd = -1;
    r = activated_fds(d, &fi, &fq);
    if (r < 0) {
        sfd_log(SFD_LOG_ERR, NULL, "socket activation: %s", strerror(-r));
        return r;
    }
    /* Sockets bound by systemd need no runtime directory of sfd's own. */
    if ((fi < 0 || fq < 0) &&
        (r = check_dir("runtime_dir", d->cfg.runtime_dir, SF_SAFE_DIR_CREATE, 0755, true)) < 0)
        return r;
    r = check_dir("state_dir", d->cfg.state_dir, SF_SAFE_DIR_CREATE, 0700, false);
    if (r < 0)
        return r;
    r = check_dir("prom_dir", d->cfg.prom_dir, SF_SAFE_DIR_SHARED_LEAF, 0, false);
    if (r < 0)
        return r;
    r = sfd_listener_open(d, &d->ingest, d->cfg.ingest_path, 0666, fi, false);
    if (r < 0) {
        sfd_log(SFD_LOG_ERR, NULL, "ingest socket %s: %s", d->cfg.ingest_path, strerror(-r));
        return r;
    }
    /* 0666: every user may ask; sfd shows each caller only the jobs it may see. */
    r = sfd_listener_open(d, &d->query, d->cfg.query_path, 0666, fq, true);
    if (r < 0) {
        sfd_log(SFD_LOG_ERR, NULL, "query socket %s: %s", d->cfg.query_path, strerror(-r));
        return r;
    }
    r = sfd_history_start(d); /* restores recent reports before anything is accepted */
    if (r < 0)
        return r;
    r = sfd_timers_init(d);
    if (r < 0)
        return r;
    uv_signal_t *sigs[] = {&d->sig_term, &d->sig_int, &d->sig_hup};
    int nums[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(d->loop, sigs[i]);
        sigs[i]->data = d;
        uv_signal_start(sigs[i], on_signal, nums[i]);
    }
    r = sfd_notify_start(d);
    if (r < 0)
        return r;
    r = sfd_conn_limits_start(d);
    if (r < 0)
        return r;
    r = sfd_liveness_start(d);
    if (r < 0)
        return r;
    sfd_log(SFD_LOG_NOTICE, NULL, "listening: ingest %s%s, query %s%s", d->ingest.path,
            fi >= 0 ? " (socket activated)" : "", d->query.path,
            fq >= 0 ? " (socket activated)" : "");
    sfd_notify_ready(d);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sfd [--config FILE] [--runtime-dir DIR] [--ingest PATH] [--query PATH]\n"
               "           [--state-dir DIR] [--foreground]\n"
               "           [--log-level err|warning|notice|info|debug]\n"
               "       sfd --help | --version\n");
}

static int parse_flags(int argc, char **argv, struct sfd_flags *f)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},    {"runtime-dir", required_argument, NULL, 'r'},
        {"ingest", required_argument, NULL, 'i'},    {"query", required_argument, NULL, 'q'},
        {"state-dir", required_argument, NULL, 's'}, {"foreground", no_argument, NULL, 'f'},
        {"log-level", required_argument, NULL, 'l'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},         {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "c:r:i:q:s:fl:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            f->config = optarg;
            break;
        case 'r':
            f->runtime_dir = optarg;
            break;
        case 'i':
            f->ingest = optarg;
            break;
        case 'q':
            f->query = optarg;
            break;
        case 's':
            f->state_dir = optarg;
            break;
        case 'f':
            break; /* sfd always runs in the foreground */
        case 'l':
            f->log_level = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("sfd %s\n", SF_VERSION);
            exit(0);
        default:
            usage(stderr);
            return -EINVAL;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return -EINVAL;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct sfd d;
    uv_loop_t loop;
    bool loaded;
    int r, rc = 1;

    if (parse_flags(argc, argv, &d.flags) < 0)
        return 2;
    if (load_config(&d.cfg, &d.flags, &loaded) < 0)
        return 1;
    sfd_log_init(d.cfg.log_level);
    sfd_log(SFD_LOG_INFO, NULL, "core kernels: %s", sf_core_isa()); /* SF_CORE_ISA refused here */
    signal(SIGPIPE, SIG_IGN);
    raise_nofile(&d);
    resolve_group(&d);
    if (sfd_ensure_rxbuf(&d) < 0 || uv_loop_init(&loop) < 0)
        return 1;
    sfd_ingest_init(&d);
    loop.data = &d;
    d.loop = &loop;
    d.start_ms = uv_now(&loop);
    r = start(&d);
    if (r == 0) /* peer layer: multi-node mode when [peer] is set */
        r = sfd_cluster_peer_attach(&d, d.flags.config ? d.flags.config
                                        : loaded       ? DEFAULT_CONFIG
                                                       : NULL);
    if (r == 0) {
        uv_run(&loop, UV_RUN_DEFAULT);
        rc = 0;
    }
    shutdown_begin(&d);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (d.peer_fd >= 0)
        close(d.peer_fd);
    sfd_history_save_rows(&d); /* the latest rows of every job, and then */
    sfd_history_stop(&d);      /* the reports of the windows closed at shutdown */
    sfd_jobs_free_all(&d);
    sfd_conn_limits_free(&d);
    free(d.rxbuf);
    sfd_ingest_free(&d);
    sfd_budget_free(&d.mem);
    r = uv_loop_close(&loop);
    if (r != 0) {
        sfd_log(SFD_LOG_ERR, NULL, "loop closed with live handles: %s", uv_strerror(r));
        rc = 1;
    }
    sfd_log(SFD_LOG_INFO, NULL, "stopped");
    return rc;
}

/*
 * The change alert hook (docs/SFD.md): runs alert_command, split on blanks
 * and executed without a shell as sfd's own user, with the window's report
 * JSON on stdin, when a significant change persists for alert_windows
 * windows. Rate-limited, one run at a time per job; a failure is logged and
 * counted, never fatal, and sfd never waits for the hook.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "report_json.h"
#include "sfd.h"

#define ALERT_MAX_ARGS 32

struct sfd_alert {
    uv_process_t proc;
    struct sfd *sfd;
    struct sfd_job *job; /* NULL once the job is gone */
    struct sfd_alert *next;
};

static void unlink_alert(struct sfd *d, struct sfd_alert *a)
{
    for (struct sfd_alert **p = &d->alerts; *p != NULL; p = &(*p)->next)
        if (*p == a) {
            *p = a->next;
            return;
        }
}

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_hook_exit(uv_process_t *proc, int64_t status, int signal)
{
    struct sfd_alert *a = proc->data;
    if (a->job != NULL) {
        a->job->base.alert_running = false;
        if (status != 0 || signal != 0) {
            a->job->base.alerts_failed++;
            sfd_log(SFD_LOG_WARNING, a->job->id, "alert_command failed: exit %lld, signal %d",
                    (long long)status, signal);
        }
    }
    unlink_alert(a->sfd, a);
    uv_close((uv_handle_t *)proc, on_closed);
}

/* The window's JSON in an anonymous file, so the hook reads it at its own
 * pace and sfd never blocks on a pipe. Returns the fd, or -errno. */
static int json_stdin(const sf_report *report)
{
    json_t *o = NULL;
    if (sf_report_to_json(report, &o) < 0)
        return -ENOMEM;
    char *text = json_dumps(o, JSON_COMPACT | SF_JSON_REAL_PRECISION);
    json_decref(o);
    if (text == NULL)
        return -ENOMEM;
    int fd = memfd_create("sfd-alert", MFD_CLOEXEC);
    size_t len = strlen(text);
    int r = fd < 0 ? -errno : 0;
    if (r == 0 && (write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
                   lseek(fd, 0, SEEK_SET) != 0))
        r = -EIO;
    free(text);
    if (r < 0 && fd >= 0)
        close(fd);
    return r < 0 ? r : fd;
}

static int split_args(char *cmd, char **argv)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(cmd, " \t", &save); t != NULL;
         t = strtok_r(NULL, " \t", &save)) {
        if (n == ALERT_MAX_ARGS)
            return -E2BIG;
        argv[n++] = t;
    }
    argv[n] = NULL;
    return n > 0 ? 0 : -EINVAL;
}

static int spawn(struct sfd_job *job, const sf_report *report)
{
    struct sfd *d = job->sfd;
    char cmd[sizeof d->cfg.alert_command], *argv[ALERT_MAX_ARGS + 1];
    memcpy(cmd, d->cfg.alert_command, sizeof cmd);
    int r = split_args(cmd, argv);
    if (r < 0)
        return r;
    int fd = json_stdin(report);
    if (fd < 0)
        return fd;
    struct sfd_alert *a = calloc(1, sizeof *a);
    if (a == NULL) {
        close(fd);
        return -ENOMEM;
    }
    char env_job[SF_MAX_JOB_ID_LEN + 16];
    snprintf(env_job, sizeof env_job, "SF_JOB=%s", job->id);
    char *env[] = {env_job, "PATH=/usr/local/bin:/usr/bin:/bin", NULL};
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_INHERIT_FD, .data.fd = fd},
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = STDERR_FILENO},
    };
    uv_process_options_t opt = {
        .exit_cb = on_hook_exit,
        .file = argv[0],
        .args = argv,
        .env = env,
        .stdio_count = 3,
        .stdio = stdio,
    };
    a->proc.data = a;
    a->sfd = d;
    a->job = job;
    r = uv_spawn(d->loop, &a->proc, &opt);
    close(fd);
    if (r < 0) {
        /* libuv wants the handle closed even when the spawn failed */
        uv_close((uv_handle_t *)&a->proc, on_closed);
        return r;
    }
    a->next = d->alerts;
    d->alerts = a;
    return 0;
}

static bool significant(const sf_report *report)
{
    return report->change != NULL && report->change->n_route > 0;
}

void sfd_alert_consider(struct sfd_job *job, const sf_report *report)
{
    struct sfd *d = job->sfd;
    struct sfd_baseline *b = &job->base;
    b->changed_run = significant(report) ? b->changed_run + 1 : 0;
    if (d->cfg.alert_command[0] == '\0' || b->changed_run < d->cfg.alert_windows)
        return;
    uint64_t now = sfd_now_ms(d);
    if (b->alert_running ||
        (b->last_alert_ms != 0 && now - b->last_alert_ms < d->cfg.alert_interval_ms)) {
        b->alerts_suppressed++;
        return;
    }
    int r = spawn(job, report);
    b->last_alert_ms = now;
    if (r < 0) {
        b->alerts_failed++;
        sfd_log(SFD_LOG_WARNING, job->id, "alert_command could not start: %s", uv_strerror(r));
        return;
    }
    b->alert_running = true;
    b->alerts_run++;
    sfd_log(SFD_LOG_NOTICE, job->id, "alert_command started: change for %u windows",
            b->changed_run);
}

void sfd_alert_forget(struct sfd_job *job)
{
    for (struct sfd_alert *a = job->sfd->alerts; a != NULL; a = a->next)
        if (a->job == job)
            a->job = NULL;
}

void sfd_alerts_shutdown(struct sfd *d)
{
    /* The hooks run on; sfd only stops waiting for them. */
    while (d->alerts != NULL) {
        struct sfd_alert *a = d->alerts;
        d->alerts = a->next;
        uv_close((uv_handle_t *)&a->proc, on_closed);
    }
}

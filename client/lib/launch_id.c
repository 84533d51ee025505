/*
 * The launch a rank belongs to, read from the launcher's environment so that
 * the ranks of one launch agree on it without talking to each other
 * (docs/SFD.md, "Identity"). sfd uses it to tell a rerun of a job id from
 * more ranks of the same run, and an elastic restart from a new run. Read
 * once at open: never on the hot path.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

static const char *env_set(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Copies src into buf as a run id: bytes outside the job-id alphabet become
 * '_', so a host name or a scheduler's id always makes a valid one. */
static void put_run_id(char *buf, size_t cap, const char *src)
{
    size_t n = 0;
    for (; src[n] != '\0' && n + 1 < cap; n++) {
        char ch = src[n];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == ':' || ch == '-';
        buf[n] = ok ? ch : '_';
    }
    buf[n] = '\0';
}

static uint32_t restart_from(const char *name)
{
    const char *v = env_set(name);
    if (v == NULL)
        return 0;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno != 0 || *end != '\0' || v[0] == '-')
        return 0;
    return n > SF_CLIENT_MAX_RESTART_COUNT ? SF_CLIENT_MAX_RESTART_COUNT : (uint32_t)n;
}

void sf__launch_identity(char *run_id, size_t cap, uint32_t *restart_count)
{
    char tmp[2 * SF_CLIENT_MAX_JOB_ID_LEN + 16];
    const char *explicit_id = env_set("SF_RUN_ID");
    const char *torch = env_set("TORCHELASTIC_RUN_ID");
    const char *slurm = env_set("SLURM_JOB_ID");
    const char *addr = env_set("MASTER_ADDR"), *port = env_set("MASTER_PORT");
    /* torchrun without --rdzv-id names every run "none": no identity. */
    if (torch != NULL && strcmp(torch, "none") == 0)
        torch = NULL;
    if (explicit_id != NULL)
        snprintf(tmp, sizeof tmp, "%s", explicit_id);
    else if (torch != NULL)
        snprintf(tmp, sizeof tmp, "torch:%s", torch);
    else if (slurm != NULL)
        snprintf(tmp, sizeof tmp, "slurm:%s.%s", slurm,
                 env_set("SLURM_STEP_ID") ? env_set("SLURM_STEP_ID") : "0");
    else if (addr != NULL && port != NULL)
        snprintf(tmp, sizeof tmp, "master:%s:%s", addr, port);
    else
        tmp[0] = '\0';
    put_run_id(run_id, cap, tmp);
    *restart_count = env_set("SF_RESTART_COUNT") ? restart_from("SF_RESTART_COUNT")
                     : env_set("TORCHELASTIC_RESTART_COUNT")
                         ? restart_from("TORCHELASTIC_RESTART_COUNT")
                         : restart_from("SLURM_RESTART_COUNT");
}

/*
 * The automatic capture trigger (docs/SFD.md, "Captures"): the ranks a window
 * implicates and a healthy control rank, a persisting verdict or change, the
 * cooldown and the daily budget. Decides only: the table and the requests are
 * capture.c's, and it never changes windows or reports.
 */
#include <stdio.h>
#include <stdlib.h>

#include "capture.h"
#include "capture_table.h"
#include "cluster.h"
#include "sfd.h"

/* ---- suspects and the control rank --------------------------------------------------- */

/* The ranks a window implicates, best evidence first: the straggler verdict
 * (or the communication verdict in its place), the change's communication
 * rank, the change's suspects, the routed stage's suspects. */
uint32_t sfd__capture_window_suspects(const sf_report *r, uint32_t *out, uint32_t cap)
{
    uint32_t n = 0;
    if (r->straggler.present && n < cap)
        out[n++] = r->straggler.rank;
    if (n == 0 && r->change != NULL && r->change->comm.significant && n < cap)
        out[n++] = r->change->comm.rank;
    if (n == 0 && r->change != NULL && r->change->n_route > 0)
        for (uint32_t i = 0; i < r->change->n_suspects && n < cap; i++)
            out[n++] = r->change->suspects[i].rank;
    if (n == 0)
        for (uint32_t i = 0; i < r->n_suspects && n < cap && i < 2; i++)
            out[n++] = r->suspects[i].rank;
    return n;
}

struct rank_mean {
    uint32_t rank;
    double mean;
};

static int cmp_mean(const void *a, const void *b)
{
    const struct rank_mean *x = a, *y = b;
    if (x->mean != y->mean)
        return x->mean < y->mean ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static bool listed(const uint32_t *v, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* The healthy control: the rank (not a suspect) with the median mean step
 * time in the window's rows; without rows, the lowest rank not a suspect. */
int64_t sfd__capture_control_rank(const struct sfd_job *job, const struct sfd_stored *s,
                                  const uint32_t *sus, uint32_t n_sus)
{
    uint32_t world = job->world_size;
    struct rank_mean *m = NULL;
    uint32_t *cnt = NULL;
    uint32_t n = 0;
    if (s != NULL && s->rows.n > 0 && !s->rows_evicted && world <= SF_MAX_RANKS) {
        m = calloc(world, sizeof *m);
        cnt = calloc(world, sizeof *cnt);
    }
    if (m != NULL && cnt != NULL) {
        uint32_t ns = job->schema.n_stages;
        for (size_t i = 0; i < s->rows.n; i++) {
            uint32_t r = s->rows.rec[i].rank;
            if (r >= world)
                continue;
            double sum = 0;
            for (uint32_t k = 0; k < ns; k++)
                sum += (double)s->rows.d[i * ns + k];
            m[r].mean += sum;
            cnt[r]++;
        }
        for (uint32_t r = 0; r < world; r++)
            if (cnt[r] > 0 && !listed(sus, n_sus, r))
                m[n++] = (struct rank_mean){r, m[r].mean / cnt[r]};
        qsort(m, n, sizeof *m, cmp_mean);
    }
    int64_t pick = -1;
    if (n > 0)
        pick = m[(n - 1) / 2].rank;
    /* In a cluster the root may host none of the ranks: any rank of the
     * world may be the control, and the node that hosts it answers. */
    bool cluster = sfd_cluster_capture_shared(job->sfd);
    for (uint32_t r = 0; pick < 0 && r < world; r++)
        if (!listed(sus, n_sus, r) && (cluster || sfd_job_rank_peek(job, r)->seen))
            pick = r;
    free(m);
    free(cnt);
    return pick;
}

/* ---- the automatic trigger ----------------------------------------------------------- */

/* Why this window asks for a capture (the run of windows it continues), or
 * NULL. Fills the suspects, and comm when it is the communication verdict. */
static const char *auto_reason(struct sfd_job *job, const sf_report *r, uint32_t *sus,
                               uint32_t *n_sus, bool *comm, char *buf, size_t len)
{
    struct sfd_job_captures *tb = job->captures;
    uint32_t need = job->sfd->cfg.auto_capture_windows;
    *n_sus = 0;
    *comm = false;
    if (r->straggler.present && r->straggler.windows_in_a_row >= need) {
        sus[(*n_sus)++] = r->straggler.rank;
        *comm = r->straggler.communication;
        /* A communication verdict names a rank that arrived on time: its
         * trace is asked for the collective that started late. */
        snprintf(buf, len,
                 r->straggler.communication
                     ? "communication: rank %u's collective in %s started late for %u windows"
                     : "straggler: rank %u arrived last at %s for %u windows",
                 r->straggler.rank, r->schema.names[r->straggler.sync_stage],
                 r->straggler.windows_in_a_row);
        return buf;
    }
    if (r->change != NULL && r->change->n_route > 0 && job->base.changed_run >= need) {
        for (uint32_t i = 0; i < r->change->n_suspects && *n_sus < SF_MAX_CAPTURE_RANKS - 1; i++)
            sus[(*n_sus)++] = r->change->suspects[i].rank;
        if (*n_sus > 0) {
            snprintf(buf, len, "change: %s slower than the baseline for %u windows",
                     r->schema.names[r->change->route[0]], job->base.changed_run);
            return buf;
        }
    }
    /* The fallback: the routed stage's suspect, leading most steps, fixed. */
    if (tb->route_run >= need && r->n_suspects > 0) {
        sus[(*n_sus)++] = r->suspects[0].rank;
        snprintf(buf, len, "route: rank %u led the routed stage for %u windows",
                 r->suspects[0].rank, tb->route_run);
        return buf;
    }
    return NULL;
}

static void track_route(struct sfd_job_captures *tb, const sf_report *r)
{
    /* A fixed leader: the top suspect in at least 80% of the complete steps. */
    bool fixed = r->n_suspects > 0 && r->steps > 0 &&
                 (uint64_t)r->suspects[0].steps * 5 >= (uint64_t)r->steps * 4;
    if (!fixed) {
        tb->route_run = 0;
        return;
    }
    tb->route_run = tb->route_rank == r->suspects[0].rank ? tb->route_run + 1 : 1;
    tb->route_rank = r->suspects[0].rank;
}

static bool any_running(const struct sfd_job_captures *tb)
{
    for (uint32_t i = 0; i < tb->n; i++)
        if (tb->c[i]->automatic && sfd__capture_running(tb->c[i]))
            return true;
    return false;
}

/* Cooldown, then the budget: at most auto_capture_max in any 24 h. */
static bool auto_allowed(struct sfd_job *job, struct sfd_job_captures *tb, uint64_t now)
{
    const struct sfd_config *cfg = &job->sfd->cfg;
    if (tb->last_auto_ms != 0 &&
        now - tb->last_auto_ms < (uint64_t)cfg->auto_capture_cooldown_s * 1000) {
        tb->auto_suppressed_cooldown++;
        return false;
    }
    uint32_t recent = 0;
    for (uint32_t i = 0; i < tb->n_auto; i++)
        recent += now - tb->auto_ms[i] < UINT64_C(86400000);
    if (recent >= cfg->auto_capture_max) {
        if (tb->auto_suppressed_budget++ == 0)
            sfd_log(SFD_LOG_NOTICE, job->id, "automatic captures: daily budget of %u spent",
                    cfg->auto_capture_max);
        return false;
    }
    return true;
}

static void note_auto(struct sfd_job_captures *tb, uint64_t now)
{
    tb->last_auto_ms = now ? now : 1;
    tb->auto_ms[tb->auto_head] = now;
    tb->auto_head = (tb->auto_head + 1) % SFD_AUTO_CAPTURE_MAX;
    if (tb->n_auto < SFD_AUTO_CAPTURE_MAX)
        tb->n_auto++;
    tb->auto_fired++;
}

void sfd_capture_consider(struct sfd_job *job, const struct sfd_stored *s)
{
    struct sfd *d = job->sfd;
    const sf_report *r = s->report;
    if (!d->cfg.auto_capture || r == NULL || r != sfd_job_latest_report(job))
        return;
    if (sfd_cluster_capture_decider(d) != 1)
        return; /* in a cluster, the root decides, with its cooldown and budget */
    struct sfd_job_captures *tb = sfd__capture_table(job);
    if (tb == NULL)
        return;
    if (tb->considered_any && tb->considered_segment == s->meta.segment &&
        tb->considered_index >= s->meta.index)
        return; /* this window was looked at already (a replaced report) */
    tb->considered_any = true;
    tb->considered_segment = s->meta.segment;
    tb->considered_index = s->meta.index;
    track_route(tb, r);
    uint32_t sus[SF_MAX_CAPTURE_RANKS];
    uint32_t n_sus;
    bool comm;
    char why[160];
    const char *reason = auto_reason(job, r, sus, &n_sus, &comm, why, sizeof why);
    uint64_t now = sfd_now_ms(d);
    if (reason == NULL || any_running(tb) || !auto_allowed(job, tb, now))
        return;
    struct capture *k = sfd__capture_new(job, 0, d->cfg.auto_capture_steps, reason, 0, true, s);
    if (k == NULL)
        return;
    k->communication = comm; /* the request asks for the collectives */
    for (uint32_t i = 0; i < n_sus; i++)
        sfd__capture_add_target(k, sus[i], false);
    int64_t ctl = sfd__capture_control_rank(job, s, sus, n_sus);
    if (ctl >= 0)
        sfd__capture_add_target(k, (uint32_t)ctl, true);
    note_auto(tb, now);
    d->captures_auto++;
    sfd__capture_launch(job, k);
}

void sfd_capture_consider_live(struct sfd_job *job, const sf_live_verdict *v)
{
    struct sfd *d = job->sfd;
    if (!d->cfg.auto_capture || v == NULL || v->kind != SF_LIVE_STRAGGLER ||
        v->rank == SF_NO_RANK || sfd_cluster_capture_decider(d) != 1)
        return;
    struct sfd_job_captures *tb = sfd__capture_table(job);
    if (tb == NULL)
        return;
    uint64_t now = sfd_now_ms(d);
    if (any_running(tb) || !auto_allowed(job, tb, now))
        return;
    char why[160];
    snprintf(why, sizeof why, "live verdict: rank %u %s %s since step %lld", v->rank,
             v->communication ? "late to communicate in" : "slow in",
             v->stage < job->schema.n_stages ? job->schema.names[v->stage] : "-",
             (long long)v->since_step);
    struct capture *k = sfd__capture_new(job, 0, d->cfg.auto_capture_steps, why, 0, true, NULL);
    if (k == NULL)
        return;
    k->communication = v->communication;
    sfd__capture_add_target(k, v->rank, false);
    int64_t ctl = sfd__capture_control_rank(job, NULL, &v->rank, 1);
    if (ctl >= 0)
        sfd__capture_add_target(k, (uint32_t)ctl, true);
    note_auto(tb, now);
    d->captures_auto++;
    sfd__capture_launch(job, k);
}

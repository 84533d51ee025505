/*
 * The live verdict in a cluster (docs/LIVE.md, "In a cluster"). A step is
 * complete on a node when every rank that node hosts has sent its row of it.
 * A member sends those rows straight to the root, a few steps a message
 * (LiveRows, daemon/peer/live_codec.c); the root puts each part, its own
 * included, into a bounded assembly (live_assembly.c) and, once a step holds
 * every rank of the world, feeds it to the same test a single node runs
 * (verdict.c: the same baseline from the first eligible windows, here the
 * root's merged summaries, and the same sf_live_step).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "live_assembly.h"
#include "peer.h"
#include "sfd.h"

/* A member's batch is sent when it holds this many steps, this many values,
 * or when waiting for the next step would keep its first step longer than
 * SFD_LIVE_BATCH_MS: slow steps go one a message, fast ones a few. A batch is
 * at most half the root's fewest slots (SFD_LIVE_ASSEMBLY_MIN_SLOTS), so a
 * batch in flight leaves room for the members' skew. */
#define SFD_LIVE_BATCH_STEPS 4u
#define SFD_LIVE_BATCH_VALUES (1u << 20)
#define SFD_LIVE_BATCH_MS 100u
_Static_assert(2 * SFD_LIVE_BATCH_STEPS <= SFD_LIVE_ASSEMBLY_MIN_SLOTS,
               "a batch leaves slots for skew");

struct sfd_live_batch {
    uint32_t n_steps, n_ranks, cap_ranks, n_stages;
    int64_t steps[SFD_LIVE_BATCH_STEPS];
    uint32_t *ranks;            /* [cap_ranks] the batch's ranks, ascending */
    int64_t *d;                 /* [SFD_LIVE_BATCH_STEPS][cap_ranks][n_stages] */
    uint32_t *part_ranks;       /* [cap_ranks] the step in hand */
    int64_t *part_d;            /* [cap_ranks][n_stages] */
    uint64_t first_ms, last_ms; /* monotonic: the batch's first step, the last step taken */
    uint64_t bytes;             /* charged to the job's windows */
};

static void batch_free(struct sfd_job *job, struct sfd_live_batch *b)
{
    if (b == NULL)
        return;
    sfd_job_release(job, SFD_MEM_WINDOWS, b->bytes);
    free(b->ranks);
    free(b->d);
    free(b->part_ranks);
    free(b->part_d);
    free(b);
}

void sfd_verdict_cluster_free(struct sfd_job *job)
{
    struct sfd_verdict *v = &job->verdict;
    sfd_live_assembly_free(v->assembly);
    v->assembly = NULL;
    sfd_job_release(job, SFD_MEM_WINDOWS, v->assembly_bytes);
    v->assembly_bytes = 0;
    batch_free(job, v->batch);
    v->batch = NULL;
}

/* A batch able to hold n ranks of the job's stages (the ranks a node hosts
 * grow as they first send). Its rows are sent before it grows. */
static void batch_send(struct sfd_job *job, struct sfd_live_batch *b);

static struct sfd_live_batch *batch_for(struct sfd_job *job, uint32_t n)
{
    struct sfd_live_batch *b = job->verdict.batch;
    uint32_t S = job->schema.n_stages;
    if (b != NULL && b->cap_ranks >= n && b->n_stages == S)
        return b;
    if (b != NULL)
        batch_send(job, b);
    batch_free(job, b);
    job->verdict.batch = NULL;
    uint64_t bytes = sizeof *b + (uint64_t)n * (2 * sizeof(uint32_t) +
                                                (SFD_LIVE_BATCH_STEPS + 1) * S * sizeof(int64_t));
    if (sfd_job_charge(job, SFD_MEM_WINDOWS, bytes) < 0)
        return NULL;
    job->verdict.batch = b = calloc(1, sizeof *b);
    if (b == NULL) {
        sfd_job_release(job, SFD_MEM_WINDOWS, bytes);
        return NULL;
    }
    b->bytes = bytes;
    b->cap_ranks = n;
    b->n_stages = S;
    b->ranks = malloc(n * sizeof *b->ranks);
    b->part_ranks = malloc(n * sizeof *b->part_ranks);
    b->d = malloc((size_t)SFD_LIVE_BATCH_STEPS * n * S * sizeof *b->d);
    b->part_d = malloc((size_t)n * S * sizeof *b->part_d);
    if (b->ranks == NULL || b->part_ranks == NULL || b->d == NULL || b->part_d == NULL) {
        batch_free(job, b);
        job->verdict.batch = NULL;
        return NULL;
    }
    return b;
}

/* Step t's rows here, linked in rank order, into the batch's part: how many,
 * or 0 when the order was given up or the node's ranks changed under it. */
static uint32_t gather_part(struct sfd_job *job, const struct sfd_window *w, size_t t,
                            struct sfd_live_batch *b)
{
    uint32_t S = job->schema.n_stages, n = 0;
    for (uint32_t i = w->order.head[t]; i != UINT32_MAX; i = w->order.next[i]) {
        if (n >= b->cap_ranks)
            return 0;
        b->part_ranks[n] = w->rows.rec[i].rank;
        memcpy(b->part_d + (size_t)n * S, w->rows.d + (size_t)i * S, S * sizeof(int64_t));
        n++;
    }
    return n;
}

/* Sends the batch to the root; it is empty afterwards either way. */
static void batch_send(struct sfd_job *job, struct sfd_live_batch *b)
{
    if (b->n_steps == 0)
        return;
    sfd_peer_live_rows m = {.uid = (uint32_t)job->uid,
                            .incarnation = job->incarnation,
                            .schema_hash = job->schema.hash,
                            .world_size = job->world_size,
                            .n_stages = b->n_stages,
                            .n_steps = b->n_steps,
                            .n_ranks = b->n_ranks,
                            .steps = b->steps,
                            .ranks = b->ranks,
                            .d = b->d};
    memcpy(m.job, job->id, sizeof m.job);
    /* rows were laid out at cap_ranks a step: close the gaps */
    if (b->n_ranks < b->cap_ranks)
        for (uint32_t s = 1; s < b->n_steps; s++)
            memmove(b->d + (size_t)s * b->n_ranks * b->n_stages,
                    b->d + (size_t)s * b->cap_ranks * b->n_stages,
                    (size_t)b->n_ranks * b->n_stages * sizeof *b->d);
    int r = sfd_cluster_live_rows(job->sfd, &m);
    if (r < 0 && r != -EALREADY)
        job->verdict.parts_unsent++;
    b->n_steps = 0;
}

static bool same_ranks(const struct sfd_live_batch *b, uint32_t n)
{
    return b->n_ranks == n && memcmp(b->ranks, b->part_ranks, n * sizeof *b->ranks) == 0;
}

/* A member: the part joins the batch, which goes when full or due. */
static void member_part(struct sfd_job *job, struct sfd_live_batch *b, int64_t step, uint32_t n)
{
    uint32_t S = b->n_stages;
    if (b->n_steps > 0 && (!same_ranks(b, n) || step <= b->steps[b->n_steps - 1]))
        batch_send(job, b);
    uint64_t now = sfd_now_ms(job->sfd);
    if (b->n_steps == 0) {
        b->n_ranks = n;
        memcpy(b->ranks, b->part_ranks, n * sizeof *b->ranks);
        b->first_ms = now;
    }
    memcpy(b->d + (size_t)b->n_steps * b->cap_ranks * S, b->part_d, (size_t)n * S * sizeof *b->d);
    b->steps[b->n_steps++] = step;
    uint64_t interval = b->last_ms ? now - b->last_ms : SFD_LIVE_BATCH_MS;
    b->last_ms = now;
    if (b->n_steps == SFD_LIVE_BATCH_STEPS ||
        (uint64_t)(b->n_steps + 1) * n * S > SFD_LIVE_BATCH_VALUES ||
        now - b->first_ms + interval >= SFD_LIVE_BATCH_MS)
        batch_send(job, b);
}

/* The root's assembly, once the test has its baseline; charged to the job. */
static sfd_live_assembly *assembly_of(struct sfd_job *job)
{
    struct sfd_verdict *v = &job->verdict;
    if (v->test == NULL || !sf_live_calibrated(v->test) || v->schema_hash != job->schema.hash)
        return NULL;
    if (v->assembly != NULL)
        return v->assembly;
    uint32_t slots = sfd_live_assembly_slots(v->world_size, job->schema.n_stages);
    uint64_t bytes = sfd_live_assembly_bytes(v->world_size, job->schema.n_stages, slots);
    if (sfd_job_charge(job, SFD_MEM_WINDOWS, bytes) < 0)
        return NULL;
    if (sfd_live_assembly_new(v->world_size, job->schema.n_stages, slots, &v->assembly) < 0) {
        sfd_job_release(job, SFD_MEM_WINDOWS, bytes);
        return NULL;
    }
    v->assembly_bytes = bytes;
    return v->assembly;
}

/* The root: one part into the assembly, and the step to the test once it is
 * complete. Returns what sfd_live_assembly_add does. */
static int root_part(struct sfd_job *job, int64_t step, const uint32_t *ranks, uint32_t n,
                     const int64_t *d)
{
    sfd_live_assembly *a = assembly_of(job);
    if (a == NULL)
        return job->verdict.test != NULL && sf_live_calibrated(job->verdict.test) ? -ENOMEM : 0;
    const int64_t *rows;
    int r = sfd_live_assembly_add(a, step, ranks, n, d, &rows);
    if (r == 1)
        sfd_verdict_feed(job, step, rows, NULL);
    return r;
}

void sfd_verdict_cluster_step(struct sfd_job *job, const struct sfd_window *w, size_t t)
{
    if (!job->sfd->cfg.live_verdict || job->ranks_seen == 0)
        return;
    struct sfd_live_batch *b = batch_for(job, job->ranks_seen);
    uint32_t n = b != NULL ? gather_part(job, w, t, b) : 0;
    if (n == 0) {
        job->verdict.skipped_steps++;
        return;
    }
    int64_t step = w->meta.first_step + (int64_t)t;
    if (sfd_cluster_is_root(job->sfd)) {
        batch_send(job, b); /* batched as a member: a root sends nothing, it is dropped */
        if (root_part(job, step, b->part_ranks, n, b->part_d) < 0)
            job->verdict.parts_refused++;
    } else {
        member_part(job, b, step, n);
    }
}

int sfd_verdict_cluster_part(struct sfd_job *job, const sfd_peer_live_rows *m)
{
    struct sfd_verdict *v = &job->verdict;
    if (!job->sfd->cfg.live_verdict || v->test == NULL || !sf_live_calibrated(v->test))
        return 0; /* no baseline yet: nothing to test against */
    if (m->schema_hash != v->schema_hash || m->world_size != v->world_size ||
        m->n_stages != job->schema.n_stages) {
        v->parts_refused++;
        return -ESRCH;
    }
    int worst = 0;
    size_t per_step = (size_t)m->n_ranks * m->n_stages;
    for (uint32_t s = 0; s < m->n_steps; s++) {
        int r = root_part(job, m->steps[s], m->ranks, m->n_ranks, m->d + s * per_step);
        if (r == -EEXIST || r == -EINVAL || r == -ENOMEM)
            worst = r; /* a late part is the cost of a slow member, not a fault */
    }
    if (worst < 0)
        v->parts_refused++;
    return worst;
}

json_t *sfd_verdict_cluster_json(const struct sfd_job *job)
{
    if (sfd_cluster_is_standalone(job->sfd))
        return json_null();
    const struct sfd_verdict *v = &job->verdict;
    sfd_live_assembly_counters c = {0};
    if (v->assembly != NULL)
        c = *sfd_live_assembly_counters_get(v->assembly);
    return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "root",
                     sfd_cluster_is_root(job->sfd), "parts", (json_int_t)c.parts, "steps_assembled",
                     (json_int_t)c.completed, "steps_evicted", (json_int_t)c.evicted, "parts_late",
                     (json_int_t)c.late, "rows_duplicate", (json_int_t)c.duplicates,
                     "parts_refused", (json_int_t)v->parts_refused, "parts_unsent",
                     (json_int_t)v->parts_unsent);
}

/*
 * The live verdict's rows between nodes (docs/LIVE.md, "In a cluster"):
 * LiveRows to and from its checked C form. Every field is bounded on decode
 * and on encode, so the root's assembly only ever sees in-range durations of
 * ranks inside the world, in step order. Pure: no I/O, no node state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

static bool increasing_steps(const int64_t *steps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (steps[i] < 0 || (i > 0 && steps[i] <= steps[i - 1]))
            return false;
    return true;
}

static bool increasing_ranks(const uint32_t *ranks, size_t n, uint32_t world)
{
    for (size_t i = 0; i < n; i++)
        if (ranks[i] >= world || (i > 0 && ranks[i] <= ranks[i - 1]))
            return false;
    return true;
}

static bool durations_ok(const int64_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (d[i] < 0 || d[i] > SF_MAX_DURATION_NS)
            return false;
    return true;
}

/* The shape of a value; n_values is what d must hold. */
static bool shape_ok(const sfd_peer_live_rows *b, size_t *ret_values)
{
    if (b->world_size == 0 || b->world_size > SF_MAX_RANKS || b->n_stages < 2 ||
        b->n_stages > SF_MAX_STAGES || b->n_steps == 0 || b->n_steps > SFD_PEER_LIVE_MAX_STEPS ||
        b->n_ranks == 0 || b->n_ranks > b->world_size)
        return false;
    /* at most 64 x 2^21 x 64 = 2^33 values: no overflow in size_t */
    *ret_values = (size_t)b->n_steps * b->n_ranks * b->n_stages;
    return true;
}

static bool value_ok(const sfd_peer_live_rows *b)
{
    size_t n;
    return b->job[0] != '\0' && sfd_peer_job_id_valid(b->job, strnlen(b->job, sizeof b->job)) &&
           sfd_peer_owner_check(true, b->uid, true, b->incarnation) == 0 && shape_ok(b, &n) &&
           b->steps != NULL && b->ranks != NULL && b->d != NULL &&
           increasing_steps(b->steps, b->n_steps) &&
           increasing_ranks(b->ranks, b->n_ranks, b->world_size) && durations_ok(b->d, n);
}

int sfd_peer_live_rows_pack(const sfd_peer_live_rows *b, uint8_t **ret_buf, size_t *ret_len)
{
    if (b == NULL || !value_ok(b))
        return -EINVAL;
    Stagefrontier__LiveRows m = STAGEFRONTIER__LIVE_ROWS__INIT;
    m.job_id = (char *)b->job;
    m.has_owner_uid = m.has_incarnation = true;
    m.owner_uid = b->uid;
    m.incarnation = b->incarnation;
    m.schema_hash = b->schema_hash;
    m.world_size = b->world_size;
    m.n_stages = b->n_stages;
    m.n_steps = b->n_steps;
    m.steps = (int64_t *)b->steps;
    m.n_ranks = b->n_ranks;
    m.ranks = (uint32_t *)b->ranks;
    m.n_d = (size_t)b->n_steps * b->n_ranks * b->n_stages;
    m.d = (int64_t *)b->d;
    return sfd_peer_pack(&m.base, ret_buf, ret_len);
}

int sfd_peer_live_rows_unpack(const uint8_t *buf, size_t len, sfd_peer_live_rows *ret)
{
    if (buf == NULL || len > SFD_PEER_FRAME_MAX)
        return -EBADMSG;
    Stagefrontier__LiveRows *m = stagefrontier__live_rows__unpack(NULL, len, buf);
    if (m == NULL)
        return -EBADMSG;
    int r = -EBADMSG;
    size_t job_len = m->job_id != NULL ? strnlen(m->job_id, SF_MAX_JOB_ID_LEN + 1) : 0;
    if (job_len == 0 || job_len > SF_MAX_JOB_ID_LEN)
        goto fail;
    if ((r = sfd_peer_owner_check(m->has_owner_uid, m->owner_uid, m->has_incarnation,
                                  m->incarnation)) < 0)
        goto fail; /* -EPROTO */
    r = -EBADMSG;
    if (m->n_steps > SFD_PEER_LIVE_MAX_STEPS || m->n_ranks > SF_MAX_RANKS)
        goto fail;
    sfd_peer_live_rows b = {.uid = m->owner_uid,
                            .incarnation = m->incarnation,
                            .schema_hash = m->schema_hash,
                            .world_size = m->world_size,
                            .n_stages = m->n_stages,
                            .n_steps = (uint32_t)m->n_steps,
                            .n_ranks = (uint32_t)m->n_ranks,
                            .steps = m->steps,
                            .ranks = m->ranks,
                            .d = m->d,
                            .msg = m};
    memcpy(b.job, m->job_id, job_len + 1);
    size_t n;
    if (!shape_ok(&b, &n) || m->n_d != n || !value_ok(&b))
        goto fail;
    *ret = b;
    return 0;
fail:
    stagefrontier__live_rows__free_unpacked(m, NULL);
    return r;
}

void sfd_peer_live_rows_free(sfd_peer_live_rows *b)
{
    if (b != NULL && b->msg != NULL)
        stagefrontier__live_rows__free_unpacked(b->msg, NULL);
    if (b != NULL)
        b->msg = NULL;
}

/*
 * Unit tests of the live verdict's rows between nodes (daemon/peer/
 * live_codec.c) and of the root's assembly of them (daemon/sfd/
 * live_assembly.c): a round trip keeps every value; every field out of its
 * bound is refused on encode and on decode of bytes a member could forge,
 * the job key with its own reason; the assembly completes a step once every
 * rank is in, in rank order whatever order the parts came, and counts an
 * evicted step, a late part and a rank sent twice without taking them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "live_assembly.h"
#include "peer.h"

static const int64_t steps2[2] = {40, 41};
static const uint32_t ranks3[3] = {2, 3, 7};
static int64_t d2x3x4[2 * 3 * 4];

static sfd_peer_live_rows a_batch(void)
{
    for (size_t i = 0; i < 24; i++)
        d2x3x4[i] = 1000 * (int64_t)i + 7;
    sfd_peer_live_rows b = {.uid = 1000,
                            .incarnation = 2,
                            .schema_hash = 0x1234567890abcdefull,
                            .world_size = 8,
                            .n_stages = 4,
                            .n_steps = 2,
                            .n_ranks = 3,
                            .steps = steps2,
                            .ranks = ranks3,
                            .d = d2x3x4};
    strcpy(b.job, "train-7");
    return b;
}

static void round_trip(void **state)
{
    (void)state;
    sfd_peer_live_rows b = a_batch(), got;
    uint8_t *buf;
    size_t len;
    assert_int_equal(sfd_peer_live_rows_pack(&b, &buf, &len), 0);
    assert_int_equal(sfd_peer_live_rows_unpack(buf, len, &got), 0);
    free(buf);
    assert_string_equal(got.job, "train-7");
    assert_int_equal(got.uid, 1000);
    assert_int_equal(got.incarnation, 2);
    assert_true(got.schema_hash == b.schema_hash);
    assert_int_equal(got.world_size, 8);
    assert_int_equal(got.n_stages, 4);
    assert_int_equal(got.n_steps, 2);
    assert_int_equal(got.n_ranks, 3);
    assert_memory_equal(got.steps, steps2, sizeof steps2);
    assert_memory_equal(got.ranks, ranks3, sizeof ranks3);
    assert_memory_equal(got.d, d2x3x4, sizeof d2x3x4);
    sfd_peer_live_rows_free(&got);
    assert_null(got.msg);
}

/* Packs b without the encoder's checks, as a forging member would. */
static int forged(const sfd_peer_live_rows *b, size_t n_d, bool owner)
{
    Stagefrontier__LiveRows m = STAGEFRONTIER__LIVE_ROWS__INIT;
    m.job_id = (char *)b->job;
    m.has_owner_uid = m.has_incarnation = owner;
    m.owner_uid = b->uid;
    m.incarnation = b->incarnation;
    m.schema_hash = b->schema_hash;
    m.world_size = b->world_size;
    m.n_stages = b->n_stages;
    m.n_steps = b->n_steps;
    m.steps = (int64_t *)b->steps;
    m.n_ranks = b->n_ranks;
    m.ranks = (uint32_t *)b->ranks;
    m.n_d = n_d;
    m.d = (int64_t *)b->d;
    uint8_t *buf;
    size_t len;
    assert_int_equal(sfd_peer_pack(&m.base, &buf, &len), 0);
    sfd_peer_live_rows got;
    int r = sfd_peer_live_rows_unpack(buf, len, &got);
    free(buf);
    if (r == 0)
        sfd_peer_live_rows_free(&got);
    return r;
}

/* Refused on both sides. */
static void refused(const sfd_peer_live_rows *b, int decode_error)
{
    uint8_t *buf;
    size_t len;
    assert_int_equal(sfd_peer_live_rows_pack(b, &buf, &len), -EINVAL);
    assert_int_equal(forged(b, (size_t)b->n_steps * b->n_ranks * b->n_stages, true), decode_error);
}

static void bounds(void **state)
{
    (void)state;
    sfd_peer_live_rows b = a_batch();
    assert_int_equal(forged(&b, 24, true), 0);
    assert_int_equal(forged(&b, 23, true), -EBADMSG); /* d short of steps x ranks x stages */
    assert_int_equal(forged(&b, 24, false), -EPROTO); /* no owner, no incarnation */

    sfd_peer_live_rows x = b;
    x.world_size = 0;
    refused(&x, -EBADMSG);
    x = b;
    x.world_size = SF_MAX_RANKS + 1;
    refused(&x, -EBADMSG);
    x = b;
    x.world_size = 7; /* rank 7 outside the world */
    refused(&x, -EBADMSG);
    x = b;
    x.n_stages = 1;
    refused(&x, -EBADMSG);
    static int64_t wide[2 * 3 * (SF_MAX_STAGES + 1)]; /* as many values as the stages claim */
    x = b;
    x.n_stages = SF_MAX_STAGES + 1;
    x.d = wide;
    refused(&x, -EBADMSG);

    static const uint32_t unsorted[3] = {3, 2, 7}, twice[3] = {2, 2, 7};
    x = b;
    x.ranks = unsorted;
    refused(&x, -EBADMSG);
    x.ranks = twice;
    refused(&x, -EBADMSG);

    static const int64_t back[2] = {41, 40}, negative[2] = {-1, 0};
    x = b;
    x.steps = back;
    refused(&x, -EBADMSG);
    x.steps = negative;
    refused(&x, -EBADMSG);

    int64_t bad[24];
    memcpy(bad, d2x3x4, sizeof bad);
    bad[17] = SF_MAX_DURATION_NS + 1;
    x = b;
    x.d = bad;
    refused(&x, -EBADMSG);
    bad[17] = -1;
    refused(&x, -EBADMSG);

    x = b;
    strcpy(x.job, "bad job");
    refused(&x, -EBADMSG);
    x = b;
    x.incarnation = 0;
    refused(&x, -EPROTO);
    x = b;
    x.uid = 0xffffffffu;
    refused(&x, -EPROTO);

    uint8_t junk[5] = {0xff, 0xff, 0xff, 0xff, 0xff};
    sfd_peer_live_rows got;
    assert_int_equal(sfd_peer_live_rows_unpack(junk, sizeof junk, &got), -EBADMSG);
}

static void too_many_steps(void **state)
{
    (void)state;
    int64_t steps[SFD_PEER_LIVE_MAX_STEPS + 1];
    static int64_t d[(SFD_PEER_LIVE_MAX_STEPS + 1) * 2];
    static const uint32_t one[1] = {0};
    for (size_t i = 0; i <= SFD_PEER_LIVE_MAX_STEPS; i++)
        steps[i] = (int64_t)i;
    sfd_peer_live_rows b = a_batch();
    b.n_ranks = 1;
    b.ranks = one;
    b.n_stages = 2;
    b.steps = steps;
    b.d = d;
    b.n_steps = SFD_PEER_LIVE_MAX_STEPS;
    uint8_t *buf;
    size_t len;
    assert_int_equal(sfd_peer_live_rows_pack(&b, &buf, &len), 0);
    free(buf);
    b.n_steps = SFD_PEER_LIVE_MAX_STEPS + 1;
    refused(&b, -EBADMSG);
}

/* ---- the root's assembly ------------------------------------------------ */

#define W 4u
#define S 2u

static int part(sfd_live_assembly *a, int64_t step, uint32_t r0, uint32_t n, const int64_t **rows)
{
    uint32_t ranks[W];
    int64_t d[W * S];
    for (uint32_t k = 0; k < n; k++) {
        ranks[k] = r0 + k;
        d[k * S] = step * 100 + r0 + k;
        d[k * S + 1] = -(int64_t)(r0 + k);
    }
    return sfd_live_assembly_add(a, step, ranks, n, d, rows);
}

static void assembly_completes(void **state)
{
    (void)state;
    sfd_live_assembly *a;
    assert_int_equal(sfd_live_assembly_new(W, S, 4, &a), 0);
    const int64_t *rows = NULL;
    /* node B's part first, then node A's: the step in rank order */
    assert_int_equal(part(a, 10, 2, 2, &rows), 0);
    assert_int_equal(part(a, 11, 2, 2, &rows), 0);
    assert_int_equal(part(a, 10, 0, 2, &rows), 1);
    for (uint32_t r = 0; r < W; r++) {
        assert_int_equal(rows[r * S], 1000 + r);
        assert_int_equal(rows[r * S + 1], -(int64_t)r);
    }
    assert_int_equal(part(a, 11, 0, 2, &rows), 1);
    assert_int_equal(rows[3 * S], 1103);
    const sfd_live_assembly_counters *c = sfd_live_assembly_counters_get(a);
    assert_int_equal(c->completed, 2);
    assert_int_equal(c->parts, 4);
    assert_int_equal(c->evicted + c->late + c->duplicates, 0);
    sfd_live_assembly_free(a);
}

static void assembly_bounded(void **state)
{
    (void)state;
    sfd_live_assembly *a;
    assert_int_equal(sfd_live_assembly_new(W, S, 4, &a), 0);
    const int64_t *rows;
    const sfd_live_assembly_counters *c = sfd_live_assembly_counters_get(a);
    /* node A runs ahead: its step 5 takes step 1's slot, which B never finished */
    assert_int_equal(part(a, 1, 0, 2, &rows), 0);
    assert_int_equal(part(a, 5, 0, 2, &rows), 0);
    assert_int_equal(c->evicted, 1);
    /* B's part of step 1 comes now: out of reach, nothing taken */
    assert_int_equal(part(a, 1, 2, 2, &rows), -ESTALE);
    assert_int_equal(c->late, 1);
    /* a rank twice: counted, the other rank still taken */
    uint32_t twice[2] = {0, 2};
    int64_t d[2 * S] = {1, 2, 3, 4};
    assert_int_equal(sfd_live_assembly_add(a, 5, twice, 2, d, &rows), -EEXIST);
    assert_int_equal(c->duplicates, 1);
    assert_int_equal(part(a, 5, 3, 1, &rows), 1);
    assert_int_equal(rows[2 * S], 3);
    /* a step at or below the last completed is late */
    assert_int_equal(part(a, 4, 0, 2, &rows), -ESTALE);
    assert_int_equal(part(a, 5, 0, 2, &rows), -ESTALE);
    /* a rank outside the world: nothing taken */
    uint32_t outside[1] = {W};
    assert_int_equal(sfd_live_assembly_add(a, 6, outside, 1, d, &rows), -EINVAL);
    assert_int_equal(c->completed, 1);
    sfd_live_assembly_free(a);
    assert_int_equal(sfd_live_assembly_new(0, S, 4, &a), -EINVAL);
}

static void assembly_slots(void **state)
{
    (void)state;
    assert_int_equal(sfd_live_assembly_slots(4, 8), SFD_LIVE_ASSEMBLY_MAX_SLOTS);
    assert_int_equal(sfd_live_assembly_slots(100000, 8), SFD_LIVE_ASSEMBLY_MIN_SLOTS);
    uint32_t n = sfd_live_assembly_slots(1024, 8);
    assert_true(n > SFD_LIVE_ASSEMBLY_MIN_SLOTS && n < SFD_LIVE_ASSEMBLY_MAX_SLOTS);
    assert_true(sfd_live_assembly_bytes(1024, 8, n) <= SFD_LIVE_ASSEMBLY_BYTES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),       cmocka_unit_test(bounds),
        cmocka_unit_test(too_many_steps),   cmocka_unit_test(assembly_completes),
        cmocka_unit_test(assembly_bounded), cmocka_unit_test(assembly_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests of the capture messages between nodes (daemon/peer/
 * capture_codec.c): a round trip keeps every field, and every field out of
 * its bound is refused on both sides, on encode before anything is sent and
 * on decode of bytes a member could forge. The job key (owner uid,
 * incarnation) travels with both and is refused with its own reason.
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

#include "peer.h"

static sfd_peer_capture_request a_request(void)
{
    sfd_peer_capture_request q = {.id = 77,
                                  .n_ranks = 3,
                                  .ranks = {5, 0, 9},
                                  .control_rank = 9,
                                  .steps = 4,
                                  .automatic = true,
                                  .window = 12,
                                  .segment = 1,
                                  .created_at_ms = 1700000000123};
    strcpy(q.job, "train-7");
    q.uid = 1000;
    q.incarnation = 2;
    strcpy(q.reason, "straggler: rank 5 arrived last at model.bwd for 2 windows");
    return q;
}

static sfd_peer_capture_result a_result(void)
{
    sfd_peer_capture_result r = {.id = 77,
                                 .rank = 5,
                                 .state = STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__DONE,
                                 .node = 3,
                                 .first_step = 120,
                                 .last_step = 123,
                                 .started_at_ms = 1700000000200,
                                 .finished_at_ms = 1700000000900};
    strcpy(r.job, "train-7");
    r.uid = 1000;
    r.incarnation = 2;
    strcpy(r.text, "/var/lib/sf/captures/train-7/rank5-77.json.gz");
    return r;
}

static void test_round_trip(void **state)
{
    (void)state;
    sfd_peer_capture_request q = a_request(), q2;
    uint8_t *buf;
    size_t len;
    assert_int_equal(sfd_peer_capture_request_pack(&q, &buf, &len), 0);
    memset(&q2, 0xee, sizeof q2);
    assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &q2), 0);
    free(buf);
    assert_string_equal(q2.job, q.job);
    assert_string_equal(q2.reason, q.reason);
    assert_true(q2.uid == 1000 && q2.incarnation == 2);
    assert_true(q2.id == q.id && q2.n_ranks == 3 && q2.control_rank == 9 && q2.steps == 4 &&
                q2.automatic && !q2.communication && q2.window == 12 && q2.segment == 1 &&
                q2.created_at_ms == q.created_at_ms);
    assert_memory_equal(q2.ranks, q.ranks, 3 * sizeof q.ranks[0]);
    /* a communication verdict's capture: the members ask for the collectives */
    q.communication = true;
    assert_int_equal(sfd_peer_capture_request_pack(&q, &buf, &len), 0);
    assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &q2), 0);
    free(buf);
    assert_true(q2.automatic && q2.communication);
    q.communication = false;

    sfd_peer_capture_result r = a_result(), r2;
    assert_int_equal(sfd_peer_capture_result_pack(&r, &buf, &len), 0);
    assert_int_equal(sfd_peer_capture_result_unpack(buf, len, &r2), 0);
    free(buf);
    assert_string_equal(r2.job, r.job);
    assert_string_equal(r2.text, r.text);
    assert_true(r2.uid == 1000 && r2.incarnation == 2);
    assert_true(r2.id == 77 && r2.rank == 5 && r2.state == r.state && r2.node == 3 &&
                r2.first_step == 120 && r2.last_step == 123 &&
                r2.started_at_ms == r.started_at_ms && r2.finished_at_ms == r.finished_at_ms);

    /* the optional parts left out: no control rank, no window, no steps */
    q.control_rank = -1;
    q.window = -1;
    q.reason[0] = '\0';
    assert_int_equal(sfd_peer_capture_request_pack(&q, &buf, &len), 0);
    assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &q2), 0);
    free(buf);
    assert_true(q2.control_rank == -1 && q2.window == -1 && q2.reason[0] == '\0');
    r.state = STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__NOT_CONNECTED;
    r.node = 0;
    r.first_step = r.last_step = -1;
    r.text[0] = '\0';
    assert_int_equal(sfd_peer_capture_result_pack(&r, &buf, &len), 0);
    assert_int_equal(sfd_peer_capture_result_unpack(buf, len, &r2), 0);
    free(buf);
    assert_true(r2.node == 0 && r2.first_step == -1 && r2.text[0] == '\0');
}

/* ---- requests out of bounds --------------------------------------------------------- */

static void q_no_ranks(sfd_peer_capture_request *q)
{
    q->n_ranks = 0;
}
static void q_dup_rank(sfd_peer_capture_request *q)
{
    q->ranks[2] = 5;
}
static void q_big_rank(sfd_peer_capture_request *q)
{
    q->ranks[1] = SF_MAX_RANKS;
}
static void q_control(sfd_peer_capture_request *q)
{
    q->control_rank = 4;
}
static void q_steps0(sfd_peer_capture_request *q)
{
    q->steps = 0;
}
static void q_steps(sfd_peer_capture_request *q)
{
    q->steps = SF_MAX_CAPTURE_STEPS + 1;
}
static void q_id0(sfd_peer_capture_request *q)
{
    q->id = 0;
}
static void q_id(sfd_peer_capture_request *q)
{
    q->id = SF_MAX_CAPTURE_ID + 1;
}
static void q_job(sfd_peer_capture_request *q)
{
    strcpy(q->job, "a/b");
}
static void q_job0(sfd_peer_capture_request *q)
{
    q->job[0] = '\0';
}
static void q_reason(sfd_peer_capture_request *q)
{
    strcpy(q->reason, "two\nlines");
}
static void q_window(sfd_peer_capture_request *q)
{
    q->window = -2;
}
static void q_created(sfd_peer_capture_request *q)
{
    q->created_at_ms = -1;
}
/* communication is the automatic trigger's: an operator's capture never sets it */
static void q_comm_operator(sfd_peer_capture_request *q)
{
    q->automatic = false;
    q->communication = true;
}

/* The job key out of bounds: no uid, sfd's own, an incarnation of 0 or
 * past the limit. */
static void q_uid(sfd_peer_capture_request *q)
{
    q->uid = UINT32_MAX;
}
static void q_uid_daemon(sfd_peer_capture_request *q)
{
    q->uid = UINT32_MAX - 1;
}
static void q_inc0(sfd_peer_capture_request *q)
{
    q->incarnation = 0;
}
static void q_inc(sfd_peer_capture_request *q)
{
    q->incarnation = SF_MAX_INCARNATION + 1;
}

typedef void (*q_mutator)(sfd_peer_capture_request *);

/* Whether pack_raw and pack_raw_result write the owner fields. */
static bool raw_owner = true;

/* Packs a request through protobuf-c alone, past the codec's own checks. */
static void pack_raw(const sfd_peer_capture_request *q, size_t n_ranks, const char *reason,
                     uint8_t **ret, size_t *ret_len)
{
    uint32_t ranks[SF_MAX_CAPTURE_RANKS + 1] = {0};
    memcpy(ranks, q->ranks, sizeof q->ranks);
    Stagefrontier__PeerCaptureRequest m = STAGEFRONTIER__PEER_CAPTURE_REQUEST__INIT;
    m.job_id = (char *)q->job;
    m.has_owner_uid = m.has_incarnation = raw_owner;
    m.owner_uid = q->uid;
    m.incarnation = q->incarnation;
    m.capture_id = q->id;
    m.n_ranks = n_ranks;
    m.ranks = ranks;
    m.has_control_rank = q->control_rank >= 0;
    m.control_rank = (uint32_t)q->control_rank;
    m.steps = q->steps;
    m.has_automatic = true;
    m.automatic = q->automatic;
    m.has_communication = q->communication;
    m.communication = q->communication;
    m.reason = (char *)reason;
    m.has_window = m.has_created_at_ms = true;
    m.window = q->window;
    m.created_at_ms = q->created_at_ms;
    assert_int_equal(sfd_peer_pack(&m.base, ret, ret_len), 0);
}

static void test_request_bounds(void **state)
{
    (void)state;
    const q_mutator bad[] = {q_no_ranks, q_dup_rank, q_big_rank, q_control,      q_steps0,
                             q_steps,    q_id0,      q_id,       q_job,          q_job0,
                             q_reason,   q_window,   q_created,  q_comm_operator};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sfd_peer_capture_request q = a_request(), out = a_request();
        bad[i](&q);
        uint8_t *buf = NULL;
        size_t len;
        assert_int_equal(sfd_peer_capture_request_pack(&q, &buf, &len), -EINVAL);
        pack_raw(&q, q.n_ranks, q.reason, &buf, &len);
        assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &out), -EBADMSG);
        free(buf);
    }
    /* more ranks than a capture holds, and a reason longer than its bound */
    sfd_peer_capture_request q = a_request(), out;
    uint8_t *buf;
    size_t len;
    pack_raw(&q, SF_MAX_CAPTURE_RANKS + 1, q.reason, &buf, &len);
    assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &out), -EBADMSG);
    free(buf);
    char reason[SF_MAX_CAPTURE_REASON + 2];
    memset(reason, 'r', sizeof reason - 1);
    reason[sizeof reason - 1] = '\0';
    pack_raw(&q, q.n_ranks, reason, &buf, &len);
    assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &out), -EBADMSG);
    free(buf);
    const uint8_t junk[] = {0x0a, 0xff, 0xff, 0x01};
    assert_int_equal(sfd_peer_capture_request_unpack(junk, sizeof junk, &out), -EBADMSG);
}

/* A request names its job by the whole key: one without a valid owner or
 * incarnation is never encoded, and decodes to -EPROTO (rejected_owner). */
static void test_request_key(void **state)
{
    (void)state;
    const q_mutator bad[] = {q_uid, q_uid_daemon, q_inc0, q_inc};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sfd_peer_capture_request q = a_request(), out;
        bad[i](&q);
        uint8_t *buf = NULL;
        size_t len;
        assert_int_equal(sfd_peer_capture_request_pack(&q, &buf, &len), -EINVAL);
        pack_raw(&q, q.n_ranks, q.reason, &buf, &len);
        assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &out), -EPROTO);
        free(buf);
    }
    sfd_peer_capture_request q = a_request(), out;
    uint8_t *buf;
    size_t len;
    raw_owner = false; /* a member that sends no key */
    pack_raw(&q, q.n_ranks, q.reason, &buf, &len);
    raw_owner = true;
    assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &out), -EPROTO);
    free(buf);
    q.uid = 0; /* root's jobs travel too */
    q.incarnation = SF_MAX_INCARNATION;
    assert_int_equal(sfd_peer_capture_request_pack(&q, &buf, &len), 0);
    assert_int_equal(sfd_peer_capture_request_unpack(buf, len, &out), 0);
    assert_true(out.uid == 0 && out.incarnation == SF_MAX_INCARNATION);
    free(buf);
}

/* ---- results out of bounds ---------------------------------------------------------- */

static void r_state0(sfd_peer_capture_result *r)
{
    r->state = 0;
}
static void r_state(sfd_peer_capture_result *r)
{
    r->state = 10;
}
static void r_rank(sfd_peer_capture_result *r)
{
    r->rank = SF_MAX_RANKS;
}
static void r_node(sfd_peer_capture_result *r)
{
    r->node = SFD_PEER_ID_MAX + 1u;
}
static void r_id(sfd_peer_capture_result *r)
{
    r->id = 0;
}
static void r_job(sfd_peer_capture_result *r)
{
    strcpy(r->job, "job id");
}
static void r_order(sfd_peer_capture_result *r)
{
    r->last_step = r->first_step - 1;
}
static void r_span(sfd_peer_capture_result *r)
{
    r->last_step = r->first_step + SF_MAX_CAPTURE_STEPS;
}
static void r_neg(sfd_peer_capture_result *r)
{
    r->first_step = -5;
    r->last_step = 3;
}
static void r_started(sfd_peer_capture_result *r)
{
    r->started_at_ms = -1;
}
static void r_no_path(sfd_peer_capture_result *r)
{
    r->text[0] = '\0';
}
static void r_ctrl(sfd_peer_capture_result *r)
{
    r->text[3] = '\x1b';
}

static void r_uid(sfd_peer_capture_result *r)
{
    r->uid = UINT32_MAX;
}
static void r_inc0(sfd_peer_capture_result *r)
{
    r->incarnation = 0;
}
static void r_inc(sfd_peer_capture_result *r)
{
    r->incarnation = SF_MAX_INCARNATION + 1;
}

typedef void (*r_mutator)(sfd_peer_capture_result *);

static void pack_raw_result(const sfd_peer_capture_result *r, const char *text, uint8_t **ret,
                            size_t *ret_len)
{
    Stagefrontier__PeerCaptureResult m = STAGEFRONTIER__PEER_CAPTURE_RESULT__INIT;
    m.job_id = (char *)r->job;
    m.has_owner_uid = m.has_incarnation = raw_owner;
    m.owner_uid = r->uid;
    m.incarnation = r->incarnation;
    m.capture_id = r->id;
    m.rank = r->rank;
    m.state = (Stagefrontier__PeerCaptureResult__State)r->state;
    m.node_id = r->node;
    m.has_first_step = m.has_last_step = true;
    m.first_step = r->first_step;
    m.last_step = r->last_step;
    m.has_started_at_ms = true;
    m.started_at_ms = r->started_at_ms;
    m.text = text[0] ? (char *)text : NULL;
    assert_int_equal(sfd_peer_pack(&m.base, ret, ret_len), 0);
}

static void test_result_bounds(void **state)
{
    (void)state;
    const r_mutator bad[] = {r_state0, r_state, r_rank, r_node,    r_id,      r_job,
                             r_order,  r_span,  r_neg,  r_started, r_no_path, r_ctrl};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sfd_peer_capture_result r = a_result(), out;
        bad[i](&r);
        uint8_t *buf = NULL;
        size_t len;
        assert_int_equal(sfd_peer_capture_result_pack(&r, &buf, &len), -EINVAL);
        pack_raw_result(&r, r.text, &buf, &len);
        assert_int_equal(sfd_peer_capture_result_unpack(buf, len, &out), -EBADMSG);
        free(buf);
    }
    /* a path longer than its bound; a first step without a last */
    sfd_peer_capture_result r = a_result(), out;
    char *path = malloc(SF_MAX_CAPTURE_PATH + 2);
    memset(path, 'p', SF_MAX_CAPTURE_PATH + 1);
    path[SF_MAX_CAPTURE_PATH + 1] = '\0';
    uint8_t *buf;
    size_t len;
    pack_raw_result(&r, path, &buf, &len);
    assert_int_equal(sfd_peer_capture_result_unpack(buf, len, &out), -EBADMSG);
    free(buf);
    free(path);
    Stagefrontier__PeerCaptureResult m = STAGEFRONTIER__PEER_CAPTURE_RESULT__INIT;
    m.job_id = r.job;
    m.capture_id = 1;
    m.state = STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__FAILED;
    m.has_first_step = true;
    assert_int_equal(sfd_peer_pack(&m.base, &buf, &len), 0);
    assert_int_equal(sfd_peer_capture_result_unpack(buf, len, &out), -EBADMSG);
    free(buf);
}

static void test_result_key(void **state)
{
    (void)state;
    const r_mutator bad[] = {r_uid, r_inc0, r_inc};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sfd_peer_capture_result r = a_result(), out;
        bad[i](&r);
        uint8_t *buf = NULL;
        size_t len;
        assert_int_equal(sfd_peer_capture_result_pack(&r, &buf, &len), -EINVAL);
        pack_raw_result(&r, r.text, &buf, &len);
        assert_int_equal(sfd_peer_capture_result_unpack(buf, len, &out), -EPROTO);
        free(buf);
    }
    sfd_peer_capture_result r = a_result(), out;
    uint8_t *buf;
    size_t len;
    raw_owner = false;
    pack_raw_result(&r, r.text, &buf, &len);
    raw_owner = true;
    assert_int_equal(sfd_peer_capture_result_unpack(buf, len, &out), -EPROTO);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_request_bounds),
        cmocka_unit_test(test_result_bounds), cmocka_unit_test(test_request_key),
        cmocka_unit_test(test_result_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

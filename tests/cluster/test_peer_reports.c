/*
 * Unit tests of the report store's vote (daemon/peer/report_store.c), on a
 * node that is never started: no connection is open, so every message it
 * tries to send is counted in send_dropped, which is how these tests see
 * an acknowledgement leave. A proposal is final once a majority of
 * distinct members holds it; the root names the members that acknowledge
 * at once, and the others acknowledge only when it is not final two
 * heartbeat periods later (docs/CLUSTER.md, "Summaries and reports").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "node_internal.h"

#define HB_MS 100

typedef struct fixture {
    uv_loop_t loop;
    sfd_peer_node *node;
    uint8_t *packed; /* a merged summary, as a proposal carries it */
    size_t len;
    sfd_window_key key;
    int delivered;
} fixture;

static void on_deliver(void *ctx, const sfd_window_key *key, uint32_t root_id, uint64_t term,
                       const sf_summary *merged)
{
    (void)key, (void)root_id, (void)term, (void)merged;
    ((fixture *)ctx)->delivered++;
}

static void pack_summary(fixture *f)
{
    sf_schema schema;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    int64_t d[2][6] = {{1, 2, 3, 4, 5, 6}, {2, 3, 4, 5, 6, 7}};
    sf_row rows[2] = {{.step = 0, .rank = 0, .d = d[0]}, {.step = 0, .rank = 1, .d = d[1]}};
    sf_window_meta meta = {.first_step = 0, .last_step = 0, .world_size = 2};
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(&schema, &meta, rows, 2, false, &s), 0);
    f->key = (sfd_window_key){.job = "job-1", .uid = 1000, .incarnation = 1, .window = 0};
    assert_int_equal(sfd_peer_summary_pack(s, &f->key, false, 1, &f->packed, &f->len), 0);
    sf_summary_free(s);
    sf_schema_clear(&schema);
}

/* A node `self` of `members` (ids 1..members), every member heard now; the
 * lowest id is the root, as the election makes it. */
static fixture *fixture_new(uint32_t members, uint32_t self)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    sfd_peer_config cfg;
    sfd_peer_config_init(&cfg);
    cfg.node_id = self;
    cfg.n_members = members;
    cfg.members = calloc(members, sizeof *cfg.members);
    assert_non_null(cfg.members);
    for (uint32_t i = 0; i < members; i++) {
        cfg.members[i].id = i + 1;
        strcpy(cfg.members[i].host, "127.0.0.1");
        cfg.members[i].port = (uint16_t)(20000 + i);
    }
    strcpy(cfg.key_file, "-");
    cfg.heartbeat_ms = HB_MS;
    cfg.failure_timeout_ms = 8 * HB_MS;
    cfg.fanout = members; /* a star: no tree to compute */
    sfd_peer_key key = {{0}};
    sfd_peer_hooks hooks = {.ctx = f, .deliver = on_deliver};
    assert_int_equal(sfd_peer_node_new(&f->loop, &cfg, &key, &hooks, &f->node), 0);
    sfd_peer_config_clear(&cfg);
    uint64_t now = sfd_peer_now(f->node);
    for (uint32_t id = 1; id <= members; id++)
        sfd_elect_heard(&f->node->elect, now, id);
    if (self == 1) {
        f->node->elect.role = SFD_ELECT_ROOT;
    } else {
        f->node->elect.root = 1;
        f->node->elect.root_heard = now;
    }
    pack_summary(f);
    return f;
}

static void fixture_free(fixture *f)
{
    sfd_peer_node_close(f->node, NULL, NULL);
    free(f->packed);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f);
}

static sfd_peer_report *proposal(fixture *f)
{
    sfd_peer_report *r = sfd_peer_report_insert(f->node, &f->key, 1, 1, f->packed, f->len);
    assert_non_null(r);
    return r;
}

static void test_each_member_counts_once(void **state)
{
    (void)state;
    fixture *f = fixture_new(7, 1); /* a majority of 7 is 4: the root and 3 */
    sfd_peer_report *r = proposal(f);
    sfd_peer_report_propose(f->node, r);
    for (int i = 0; i < 3; i++)
        sfd_peer_report_acked(f->node, &f->key, 2);
    sfd_peer_report_acked(f->node, &f->key, 3);
    assert_false(sfd_peer_report_committed(f->node, &f->key));
    sfd_peer_report_acked(f->node, &f->key, 99); /* not a member */
    sfd_peer_report_acked(f->node, &f->key, 1);  /* the root itself, counted already */
    assert_false(sfd_peer_report_committed(f->node, &f->key));
    assert_int_equal(f->delivered, 0);
    sfd_peer_report_acked(f->node, &f->key, 4);
    assert_true(sfd_peer_report_committed(f->node, &f->key));
    assert_int_equal(f->delivered, 1);
    sfd_peer_report_acked(f->node, &f->key, 5); /* after the commit: nothing more */
    assert_int_equal(f->delivered, 1);
    fixture_free(f);
}

/* The bound a root of `members` puts on a proposal, with member
 * `never_heard` (an id, 0 for none) not counted live. */
static uint32_t proposed_bound(uint32_t members, uint32_t never_heard)
{
    fixture *f = fixture_new(members, 1);
    if (never_heard != 0)
        f->node->elect.last_heard[never_heard - 1] = 0;
    sfd_peer_report *r = proposal(f);
    sfd_peer_report_propose(f->node, r);
    uint32_t bound = r->prompt_acks_below;
    fixture_free(f);
    return bound;
}

/* The bound covers a majority of the live members and a margin of a
 * sixteenth of the members and two; a member the root does not count live
 * moves it past one more. */
static void test_prompt_bound(void **state)
{
    (void)state;
    assert_int_equal(proposed_bound(7, 0), 6);   /* 3 + 0 + 2 others: indices 1 to 5 */
    assert_int_equal(proposed_bound(7, 3), 7);   /* member 3 never heard */
    assert_int_equal(proposed_bound(64, 0), 39); /* a majority of 33: 32 + 4 + 2 others */
    assert_int_equal(proposed_bound(5, 0), 5);   /* 2 + 0 + 2 others: every member */
}

/* Member `self` of 7 holding a proposal that names indices 0 to 5, held
 * at *ret_now, with its send_dropped count before in *ret_sent. */
static fixture *member_holding(uint32_t self, sfd_peer_report **ret, uint64_t *ret_now,
                               uint64_t *ret_sent)
{
    fixture *f = fixture_new(7, self);
    *ret = proposal(f);
    (*ret)->prompt_acks_below = 6;
    *ret_now = sfd_peer_now(f->node);
    *ret_sent = f->node->c.send_dropped;
    sfd_peer_report_held(f->node, *ret, 1, *ret_now);
    return f;
}

static void test_named_member_acks_at_once(void **state)
{
    (void)state;
    sfd_peer_report *r;
    uint64_t now, sent;
    fixture *f = member_holding(6, &r, &now, &sent); /* index 5 */
    assert_int_equal(f->node->c.send_dropped, sent + 1);
    assert_int_equal(f->node->c.report_acks_deferred, 0);
    sfd_peer_reports_tick(f->node, now + 10 * HB_MS);
    assert_int_equal(f->node->c.send_dropped, sent + 1);
    fixture_free(f);
}

static void test_other_member_acks_late_only_if_not_final(void **state)
{
    (void)state;
    sfd_peer_report *r;
    uint64_t now, sent;
    fixture *f = member_holding(7, &r, &now, &sent); /* index 6 */
    sfd_peer_report_held(f->node, r, 1, now + 1);    /* the same proposal again */
    assert_int_equal(f->node->c.send_dropped, sent);
    assert_int_equal(f->node->c.report_acks_deferred, 1);
    f->node->elect.root_heard = now + 2 * HB_MS;
    sfd_peer_reports_tick(f->node, now + 2 * HB_MS - 1);
    assert_int_equal(f->node->c.send_dropped, sent);
    sfd_peer_reports_tick(f->node, now + 2 * HB_MS);
    assert_int_equal(f->node->c.send_dropped, sent + 1);
    assert_int_equal(f->node->c.report_acks_late, 1);
    sfd_peer_reports_tick(f->node, now + 4 * HB_MS); /* once */
    assert_int_equal(f->node->c.report_acks_late, 1);
    fixture_free(f);

    f = member_holding(7, &r, &now, &sent);
    assert_int_equal(sfd_peer_report_receive(f->node, &f->key, 1, 1, f->packed, f->len, true), 1);
    assert_int_equal(f->delivered, 1);
    f->node->elect.root_heard = now + 2 * HB_MS;
    sfd_peer_reports_tick(f->node, now + 2 * HB_MS); /* final already: no acknowledgement */
    assert_int_equal(f->node->c.send_dropped, sent);
    assert_int_equal(f->node->c.report_acks_late, 0);
    fixture_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_member_counts_once),
        cmocka_unit_test(test_prompt_bound),
        cmocka_unit_test(test_named_member_acks_at_once),
        cmocka_unit_test(test_other_member_acks_late_only_if_not_final),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

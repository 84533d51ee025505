/*
 * Unit tests of the pure election state machine: a simulated cluster of
 * sfd_elect instances exchanging heartbeats, claims and votes over a
 * connectivity matrix, stepped in simulated milliseconds. No sockets, no
 * clock, no sleeps.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "peer.h"

#define MAXN 7
#define HB 100
#define FT 500

typedef struct sim {
    uint32_t n;
    sfd_elect e[MAXN];
    bool up[MAXN];
    bool link[MAXN][MAXN]; /* link[a][b]: a's messages reach b */
    uint64_t now;
    uint32_t max_roots_per_term_violations;
} sim;

static void deliver(sim *s, uint32_t from, const sfd_elect_out *out);

static void heartbeat(sim *s, uint32_t from)
{
    sfd_elect *e = &s->e[from];
    for (uint32_t to = 0; to < s->n; to++) {
        if (to == from || !s->up[to] || !s->link[from][to])
            continue;
        sfd_elect_out out = {0};
        sfd_elect_on_heartbeat(&s->e[to], s->now, from + 1, e->term, e->role == SFD_ELECT_ROOT,
                               &out);
        deliver(s, to, &out);
    }
}

static void deliver(sim *s, uint32_t from, const sfd_elect_out *out)
{
    for (uint32_t i = 0; i < out->n; i++) {
        const sfd_elect_action *a = &out->a[i];
        if (a->type == SFD_ELECT_SEND_HEARTBEAT) {
            heartbeat(s, from);
        } else if (a->type == SFD_ELECT_SEND_CLAIM) {
            for (uint32_t to = 0; to < s->n; to++) {
                if (to == from || !s->up[to] || !s->link[from][to])
                    continue;
                sfd_elect_out o = {0};
                sfd_elect_on_claim(&s->e[to], s->now, from + 1, a->term, &o);
                deliver(s, to, &o);
            }
        } else if (a->type == SFD_ELECT_SEND_VOTE) {
            uint32_t to = a->to - 1;
            if (!s->up[to] || !s->link[from][to])
                continue;
            sfd_elect_out o = {0};
            sfd_elect_on_vote(&s->e[to], s->now, from + 1, a->term, a->granted, &o);
            deliver(s, to, &o);
        }
    }
}

static void sim_init(sim *s, uint32_t n)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->now = 1000;
    uint32_t ids[MAXN];
    for (uint32_t i = 0; i < n; i++)
        ids[i] = i + 1;
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(sfd_elect_init(&s->e[i], i + 1, ids, n, HB, FT), 0);
        s->up[i] = true;
        for (uint32_t j = 0; j < n; j++)
            s->link[i][j] = true;
    }
}

static void sim_clear(sim *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        sfd_elect_clear(&s->e[i]);
}

static uint32_t roots(const sim *s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n; i++)
        n += s->up[i] && s->e[i].role == SFD_ELECT_ROOT;
    return n;
}

/* Every node ticks and heartbeats each HB, offset by its index so the
 * nodes are not in lockstep. Checks at every step that no two roots share a
 * term. */
static void run(sim *s, uint64_t ms)
{
    for (uint64_t t = 0; t < ms; t += 10) {
        s->now += 10;
        for (uint32_t i = 0; i < s->n; i++) {
            if (!s->up[i] || (s->now + i * 30) % HB != 0)
                continue;
            sfd_elect_out out = {0};
            sfd_elect_tick(&s->e[i], s->now, &out);
            deliver(s, i, &out);
            heartbeat(s, i);
        }
        for (uint32_t a = 0; a < s->n; a++)
            for (uint32_t b = a + 1; b < s->n; b++)
                if (s->up[a] && s->up[b] && s->e[a].role == SFD_ELECT_ROOT &&
                    s->e[b].role == SFD_ELECT_ROOT && s->e[a].term == s->e[b].term)
                    s->max_roots_per_term_violations++;
    }
}

static void cut(sim *s, uint32_t node, bool on)
{
    for (uint32_t j = 0; j < s->n; j++) {
        if (j == node)
            continue;
        s->link[node][j] = s->link[j][node] = on;
    }
}

static uint32_t followed(const sim *s, uint32_t i)
{
    return sfd_elect_root(&s->e[i], s->now);
}

static void test_lowest_id_wins(void **state)
{
    (void)state;
    sim s;
    sim_init(&s, 3);
    run(&s, FT + 5 * HB);
    assert_int_equal(roots(&s), 1);
    assert_int_equal(s.e[0].role, SFD_ELECT_ROOT);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(followed(&s, i), 1);
    assert_int_equal(s.max_roots_per_term_violations, 0);
    sim_clear(&s);
}

static void test_failover_and_return(void **state)
{
    (void)state;
    sim s;
    sim_init(&s, 3);
    run(&s, FT + 5 * HB);
    uint64_t t1 = s.e[1].term;
    s.up[0] = false; /* kill -9 the root */
    uint64_t killed = s.now;
    while (followed(&s, 1) != 2 || followed(&s, 2) != 2)
        run(&s, 10);
    /* the documented bound: failure_timeout + 5 heartbeats */
    assert_true(s.now - killed <= FT + 5 * HB);
    assert_true(s.e[1].term > t1);
    assert_int_equal(roots(&s), 1);
    /* the lowest id comes back with a fresh state and takes over again */
    uint32_t ids[3] = {1, 2, 3};
    sfd_elect_clear(&s.e[0]);
    assert_int_equal(sfd_elect_init(&s.e[0], 1, ids, 3, HB, FT), 0);
    s.up[0] = true;
    run(&s, FT + 6 * HB);
    assert_int_equal(s.e[0].role, SFD_ELECT_ROOT);
    assert_int_equal(followed(&s, 1), 1);
    assert_int_equal(followed(&s, 2), 1);
    assert_int_equal(roots(&s), 1);
    assert_int_equal(s.max_roots_per_term_violations, 0);
    sim_clear(&s);
}

static void test_cut_root_steps_down(void **state)
{
    (void)state;
    sim s;
    sim_init(&s, 3);
    run(&s, FT + 5 * HB);
    cut(&s, 0, false);
    /* At no point two roots at once: the cut root's lease ends first. */
    for (int i = 0; i < 300; i++) {
        run(&s, 10);
        assert_true(roots(&s) <= 1);
    }
    assert_int_equal(s.e[0].role, SFD_ELECT_FOLLOWER);
    assert_int_equal(followed(&s, 0), 0);
    assert_int_equal(s.e[1].role, SFD_ELECT_ROOT);
    uint64_t minority_term = s.e[0].term;
    run(&s, 10 * FT);
    /* a cut-off minority never elects, nor inflates its term */
    assert_int_equal(s.e[0].term, minority_term);
    assert_int_equal(followed(&s, 0), 0);
    cut(&s, 0, true);
    run(&s, FT + 8 * HB);
    assert_int_equal(roots(&s), 1);
    assert_int_equal(followed(&s, 0), 1);
    assert_int_equal(followed(&s, 2), 1);
    sim_clear(&s);
}

static void test_minority_majority(void **state)
{
    (void)state;
    sim s;
    sim_init(&s, 5);
    run(&s, FT + 5 * HB);
    assert_int_equal(s.e[0].role, SFD_ELECT_ROOT);
    /* {1,2} | {3,4,5} */
    for (uint32_t a = 0; a < 5; a++)
        for (uint32_t b = 0; b < 5; b++)
            if ((a < 2) != (b < 2))
                s.link[a][b] = false;
    for (int i = 0; i < 400; i++) {
        run(&s, 10);
        assert_true(roots(&s) <= 1);
    }
    assert_int_equal(followed(&s, 0), 0);
    assert_int_equal(followed(&s, 1), 0);
    for (uint32_t i = 2; i < 5; i++)
        assert_int_equal(followed(&s, i), 3);
    assert_int_equal(s.max_roots_per_term_violations, 0);
    sim_clear(&s);
}

static void test_stale_term_and_single_vote(void **state)
{
    (void)state;
    sfd_elect e;
    uint32_t ids[3] = {1, 2, 3};
    assert_int_equal(sfd_elect_init(&e, 3, ids, 3, HB, FT), 0);
    sfd_elect_out out = {0};
    sfd_elect_on_claim(&e, 100, 1, 5, &out);
    assert_int_equal(out.n, 1);
    assert_true(out.a[0].granted);
    assert_int_equal(e.term, 5);
    /* another candidate in the same term gets no vote */
    out.n = 0;
    sfd_elect_heard(&e, 100, 2);
    sfd_elect_on_claim(&e, 100, 2, 5, &out);
    assert_false(out.a[out.n - 1].granted);
    /* stale messages are refused and counted */
    out.n = 0;
    assert_int_equal(sfd_elect_on_term(&e, 100, 2, 4, &out), -ESTALE);
    assert_int_equal(e.stale_rejected, 1);
    assert_int_equal(sfd_elect_on_term(&e, 100, 2, 6, &out), 0);
    assert_int_equal(e.term, 6);
    /* a claim from a higher id than a live lower member is refused */
    out.n = 0;
    sfd_elect_heard(&e, 110, 1);
    sfd_elect_on_claim(&e, 110, 2, 7, &out);
    assert_false(out.a[out.n - 1].granted);
    sfd_elect_clear(&e);
    /* bad arguments */
    assert_int_equal(sfd_elect_init(&e, 4, ids, 3, HB, FT), -EINVAL);
    assert_int_equal(sfd_elect_init(&e, 1, ids, 3, HB, HB), -EINVAL);
}

/* One forged term of 2^64-1 (or any jump past the step) is dropped and moves
 * nothing; a jump that a majority of the other live members backs (a node
 * that restarted while the cluster moved on) is adopted. */
static void test_term_step(void **state)
{
    (void)state;
    sfd_elect e;
    uint32_t ids[5] = {1, 2, 3, 4, 5};
    assert_int_equal(sfd_elect_init(&e, 1, ids, 5, HB, FT), 0);
    sfd_elect_out out = {0};
    for (uint32_t id = 2; id <= 5; id++)
        sfd_elect_heard(&e, 100, id);
    assert_true(sfd_elect_term_ok(&e, 100, 2, SFD_PEER_TERM_STEP, &out));
    assert_false(sfd_elect_term_ok(&e, 100, 2, UINT64_MAX, &out));
    assert_false(sfd_elect_term_ok(&e, 100, 2, SFD_PEER_TERM_STEP + 1, &out));
    assert_int_equal(e.term, 0);
    /* one more far term: two of four others are not a majority of them */
    assert_false(sfd_elect_term_ok(&e, 100, 3, 5000, &out));
    assert_int_equal(e.term, 0);
    /* a third: three of four report at least 1025, which is adopted */
    assert_false(sfd_elect_term_ok(&e, 100, 4, 5000, &out));
    assert_int_equal(e.term, SFD_PEER_TERM_STEP + 1);
    /* the fourth: three of four report 5000; the message itself passes */
    out.n = 0;
    assert_true(sfd_elect_term_ok(&e, 100, 5, 5000, &out));
    assert_int_equal(e.term, 5000);
    assert_true(sfd_elect_term_ok(&e, 100, 3, 5000, &out));
    /* the ceiling: never adopted, whatever backs it */
    for (uint32_t id = 2; id <= 5; id++)
        assert_false(sfd_elect_term_ok(&e, 100, id, SFD_PEER_TERM_MAX + 1, &out));
    assert_int_equal(e.term, 5000);
    /* the majority is of the other live members: one of two is not one */
    sfd_elect_clear(&e);
    assert_int_equal(sfd_elect_init(&e, 1, ids, 5, HB, FT), 0);
    sfd_elect_heard(&e, 100, 2);
    sfd_elect_heard(&e, 100, 3);
    assert_false(sfd_elect_term_ok(&e, 100, 2, 9000, &out));
    assert_int_equal(e.term, 0);
    /* once member 3 is silent past the failure timeout, member 2 is all the
     * cluster this node can reach, and it follows it */
    assert_false(sfd_elect_term_ok(&e, 100 + FT + 1, 2, 9000, &out));
    assert_int_equal(e.term, 0);
    sfd_elect_heard(&e, 100 + FT + 1, 2);
    assert_true(sfd_elect_term_ok(&e, 100 + FT + 1, 2, 9000, &out));
    assert_int_equal(e.term, 9000);
    sfd_elect_clear(&e);
}

static void test_tree(void **state)
{
    (void)state;
    sim s;
    sim_init(&s, 7);
    run(&s, FT + 5 * HB);
    /* fanout 2 over 1..7: 2,3 -> 1; 4,5 -> 2; 6,7 -> 3 */
    uint32_t want[7] = {0, 1, 1, 2, 2, 3, 3};
    for (uint32_t i = 0; i < 7; i++)
        assert_int_equal(sfd_peer_tree_parent(&s.e[i], s.now, 2), want[i]);
    assert_int_equal(sfd_peer_tree_children(&s.e[0], s.now, 2), 2);
    assert_int_equal(sfd_peer_tree_children(&s.e[2], s.now, 2), 2);
    assert_int_equal(sfd_peer_tree_children(&s.e[6], s.now, 2), 0);
    /* the children by id agree with the parents above; max caps the list */
    uint32_t ids[8];
    assert_int_equal(sfd_peer_tree_child_ids(&s.e[2], s.now, 2, ids, 8), 2);
    assert_int_equal(ids[0], 6);
    assert_int_equal(ids[1], 7);
    assert_int_equal(sfd_peer_tree_child_ids(&s.e[0], s.now, 2, ids, 1), 1);
    assert_int_equal(ids[0], 2);
    assert_int_equal(sfd_peer_tree_child_ids(&s.e[6], s.now, 2, ids, 8), 0);
    /* fanout >= members: a star */
    for (uint32_t i = 1; i < 7; i++)
        assert_int_equal(sfd_peer_tree_parent(&s.e[i], s.now, 8), 1);
    assert_int_equal(sfd_peer_tree_children(&s.e[0], s.now, 8), 6);
    sim_clear(&s);
}

/* Liveness by member index agrees with liveness by id: this node always,
 * another member from its first message until the failure timeout has
 * passed (the timeout itself still counts), never one not heard at all. */
static void test_member_live(void **state)
{
    (void)state;
    const uint32_t ids[] = {3, 5, 9};
    sfd_elect e;
    assert_int_equal(sfd_elect_init(&e, 5, ids, 3, HB, FT), 0);
    uint64_t t0 = 1000;
    sfd_elect_heard(&e, t0, 9);
    const struct {
        uint64_t now;
        bool live[3];
    } want[] = {
        {t0, {false, true, true}},
        {t0 + FT, {false, true, true}},
        {t0 + FT + 1, {false, true, false}},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        for (uint32_t i = 0; i < 3; i++) {
            assert_int_equal(sfd_elect_member_live(&e, want[k].now, i), want[k].live[i]);
            assert_int_equal(sfd_elect_is_live(&e, want[k].now, ids[i]), want[k].live[i]);
        }
    }
    assert_false(sfd_elect_is_live(&e, t0, 4)); /* not a member */
    sfd_elect_clear(&e);
}

/* A member heard by its index (a relayed set) is the member heard by its id;
 * an older time never replaces a newer one (a view relayed down the tree
 * carries the time the root heard it); this node and indices past the
 * members are left alone. */
static void test_member_heard_by_index(void **state)
{
    (void)state;
    const uint32_t ids[] = {3, 5, 9};
    sfd_elect e;
    assert_int_equal(sfd_elect_init(&e, 5, ids, 3, HB, FT), 0);
    assert_int_equal(sfd_elect_index(&e, 9), 2);
    assert_int_equal(sfd_elect_index(&e, 3), 0);
    assert_int_equal(sfd_elect_index(&e, 4), -1);
    uint64_t t0 = 1000;
    sfd_elect_member_heard(&e, t0, 2);
    sfd_elect_member_heard(&e, t0 - FT, 2); /* older: kept at t0 */
    sfd_elect_heard(&e, t0 - 1, 9);
    sfd_elect_member_heard(&e, t0, 1); /* this node */
    sfd_elect_member_heard(&e, t0, 3); /* no such member */
    assert_true(sfd_elect_is_live(&e, t0 + FT, 9));
    assert_false(sfd_elect_is_live(&e, t0 + FT + 1, 9));
    assert_false(sfd_elect_member_live(&e, t0, 0));
    assert_int_equal(e.last_heard[1], 0);
    sfd_elect_member_heard(&e, t0 + 10, 0);
    assert_true(sfd_elect_is_live(&e, t0 + 10 + FT, 3));
    sfd_elect_clear(&e);
}

/* The member cap is hard: an election of exactly SFD_PEER_MAX_MEMBERS works
 * (the lowest id wins once it hears a majority), one more is refused. */
static void test_member_cap(void **state)
{
    (void)state;
    uint32_t n = SFD_PEER_MAX_MEMBERS;
    uint32_t *ids = malloc((n + 1) * sizeof *ids);
    assert_non_null(ids);
    for (uint32_t i = 0; i <= n; i++)
        ids[i] = i + 1;
    sfd_elect e;
    assert_int_equal(sfd_elect_init(&e, 1, ids, n + 1, HB, FT), -EINVAL);
    assert_int_equal(sfd_elect_init(&e, 1, ids, n, HB, FT), 0);
    uint64_t now = 1000;
    for (uint32_t i = 1; i < n / 2 + 1; i++)
        sfd_elect_heard(&e, now, ids[i]);
    assert_int_equal(sfd_elect_live_count(&e, now), n / 2 + 1);
    sfd_elect_out out = {0};
    sfd_elect_tick(&e, now, &out);
    assert_int_equal(e.role, SFD_ELECT_CANDIDATE);
    for (uint32_t i = 1; i < n / 2 + 1; i++)
        sfd_elect_on_vote(&e, now, ids[i], e.term, true, &out);
    assert_int_equal(sfd_elect_root(&e, now), 1);
    /* the tree over all of them: the last member's parent */
    uint32_t last = n;
    sfd_elect f;
    assert_int_equal(sfd_elect_init(&f, last, ids, n, HB, FT), 0);
    for (uint32_t i = 0; i < n - 1; i++)
        sfd_elect_heard(&f, now, ids[i]);
    sfd_elect_on_heartbeat(&f, now, 1, e.term, true, &out);
    assert_int_equal(sfd_peer_tree_parent(&f, now, 8), (n - 1 - 1) / 8 + 1);
    sfd_elect_clear(&f);
    sfd_elect_clear(&e);
    free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lowest_id_wins),
        cmocka_unit_test(test_failover_and_return),
        cmocka_unit_test(test_cut_root_steps_down),
        cmocka_unit_test(test_minority_majority),
        cmocka_unit_test(test_stale_term_and_single_vote),
        cmocka_unit_test(test_term_step),
        cmocka_unit_test(test_tree),
        cmocka_unit_test(test_member_live),
        cmocka_unit_test(test_member_heard_by_index),
        cmocka_unit_test(test_member_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

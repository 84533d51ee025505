/*
 * Root election as a pure state machine: inputs are events with timestamps
 * (ms), outputs are actions for the caller to carry out. No I/O, no clock,
 * no allocation after init. The live member with the lowest id is root, but
 * only while it reaches a majority of the configured members; terms settle
 * stale claims, and one vote per term keeps a term to one root.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

int sfd_elect_index(const sfd_elect *e, uint32_t id)
{
    uint32_t lo = 0, hi = e->n_members;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (e->ids[mid] == id)
            return (int)mid;
        if (e->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static uint32_t majority(const sfd_elect *e)
{
    return e->n_members / 2 + 1;
}

uint32_t sfd_elect_majority(const sfd_elect *e)
{
    return majority(e);
}

/* A candidate that has not won, and got no new vote, in this time gives up
 * and may retry. */
static uint64_t candidate_timeout(const sfd_elect *e)
{
    return 2 * e->heartbeat_ms;
}

/* The root keeps its role only while a majority was heard within this
 * window, a heartbeat shorter than the followers' failure timeout, so a cut
 * off root steps down before the majority can elect a successor. */
static uint64_t root_lease(const sfd_elect *e)
{
    return e->failure_timeout_ms > 2 * e->heartbeat_ms ? e->failure_timeout_ms - e->heartbeat_ms
                                                       : e->failure_timeout_ms / 2;
}

int sfd_elect_init(sfd_elect *e, uint32_t self, const uint32_t *ids, uint32_t n,
                   uint64_t heartbeat_ms, uint64_t failure_timeout_ms)
{
    if (e == NULL || ids == NULL || n == 0 || n > SFD_PEER_MAX_MEMBERS || heartbeat_ms == 0 ||
        failure_timeout_ms <= heartbeat_ms)
        return -EINVAL;
    for (uint32_t i = 1; i < n; i++)
        if (ids[i] <= ids[i - 1])
            return -EINVAL;
    memset(e, 0, sizeof *e);
    e->ids = malloc(n * sizeof *e->ids);
    e->last_heard = calloc(n, sizeof *e->last_heard);
    e->votes = calloc(n, 1);
    e->far_term = calloc(n, sizeof *e->far_term);
    if (e->ids == NULL || e->last_heard == NULL || e->votes == NULL || e->far_term == NULL) {
        sfd_elect_clear(e);
        return -ENOMEM;
    }
    memcpy(e->ids, ids, n * sizeof *ids);
    e->n_members = n;
    e->self = self;
    e->heartbeat_ms = heartbeat_ms;
    e->failure_timeout_ms = failure_timeout_ms;
    if (sfd_elect_index(e, self) < 0) {
        sfd_elect_clear(e);
        return -EINVAL;
    }
    return 0;
}

void sfd_elect_clear(sfd_elect *e)
{
    if (e == NULL)
        return;
    free(e->ids);
    free(e->last_heard);
    free(e->votes);
    free(e->far_term);
    memset(e, 0, sizeof *e);
}

static void push(sfd_elect_out *out, sfd_elect_action a)
{
    if (out->n < SFD_ELECT_MAX_ACTIONS)
        out->a[out->n++] = a;
}

static void set_root(sfd_elect *e, uint32_t root, sfd_elect_out *out)
{
    if (e->root == root)
        return;
    e->root = root;
    push(out, (sfd_elect_action){.type = SFD_ELECT_ROOT_CHANGED, .root = root});
}

static void adopt_term(sfd_elect *e, uint64_t term, sfd_elect_out *out)
{
    if (term <= e->term)
        return;
    e->term = term;
    e->voted_for = 0;
    e->role = SFD_ELECT_FOLLOWER;
    set_root(e, 0, out);
}

/* Member i (in id order) is this node, or was heard within `window` ms. */
static bool heard_in(const sfd_elect *e, uint64_t now, uint32_t i, uint64_t window)
{
    return e->ids[i] == e->self || (e->last_heard[i] != 0 && now - e->last_heard[i] <= window);
}

bool sfd_elect_member_live(const sfd_elect *e, uint64_t now, uint32_t i)
{
    return heard_in(e, now, i, e->failure_timeout_ms);
}

bool sfd_elect_is_live(const sfd_elect *e, uint64_t now, uint32_t id)
{
    int i = sfd_elect_index(e, id);
    return i >= 0 && sfd_elect_member_live(e, now, (uint32_t)i);
}

static uint32_t heard_within(const sfd_elect *e, uint64_t now, uint64_t window)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->n_members; i++)
        n += heard_in(e, now, i, window);
    return n;
}

uint32_t sfd_elect_live_count(const sfd_elect *e, uint64_t now)
{
    return heard_within(e, now, e->failure_timeout_ms);
}

static uint32_t lowest_live(const sfd_elect *e, uint64_t now)
{
    for (uint32_t i = 0; i < e->n_members; i++)
        if (sfd_elect_member_live(e, now, i))
            return e->ids[i];
    return e->self;
}

/* Keeps the latest time: liveness relayed down the fan-in tree arrives
 * stamped with the time the root heard it, which may be older than what
 * this node heard itself. */
void sfd_elect_member_heard(sfd_elect *e, uint64_t now, uint32_t i)
{
    if (i < e->n_members && e->ids[i] != e->self && now > e->last_heard[i])
        e->last_heard[i] = now;
}

/* Marks `from` heard; its index, -1 when it is not a member. */
static int heard(sfd_elect *e, uint64_t now, uint32_t from)
{
    int i = sfd_elect_index(e, from);
    if (i >= 0)
        sfd_elect_member_heard(e, now, (uint32_t)i);
    return i;
}

void sfd_elect_heard(sfd_elect *e, uint64_t now, uint32_t from)
{
    heard(e, now, from);
}

uint32_t sfd_elect_root(const sfd_elect *e, uint64_t now)
{
    if (e->role == SFD_ELECT_ROOT)
        return e->self;
    if (e->root != 0 && now - e->root_heard <= e->failure_timeout_ms)
        return e->root;
    return 0;
}

static void become_root(sfd_elect *e, sfd_elect_out *out)
{
    e->role = SFD_ELECT_ROOT;
    set_root(e, e->self, out);
    push(out, (sfd_elect_action){.type = SFD_ELECT_SEND_HEARTBEAT, .term = e->term});
}

static void start_candidacy(sfd_elect *e, uint64_t now, sfd_elect_out *out)
{
    if (e->term >= SFD_PEER_TERM_MAX)
        return; /* never wraps; unreachable at one term per election */
    e->term++;
    e->voted_for = e->self;
    e->role = SFD_ELECT_CANDIDATE;
    e->candidate_since = now;
    memset(e->votes, 0, e->n_members);
    e->votes[sfd_elect_index(e, e->self)] = 1;
    e->n_votes = 1;
    if (majority(e) <= 1) {
        become_root(e, out);
        return;
    }
    push(out,
         (sfd_elect_action){.type = SFD_ELECT_SEND_CLAIM, .candidate = e->self, .term = e->term});
}

void sfd_elect_tick(sfd_elect *e, uint64_t now, sfd_elect_out *out)
{
    if (e->role == SFD_ELECT_ROOT) {
        if (heard_within(e, now, root_lease(e)) < majority(e)) {
            e->role = SFD_ELECT_FOLLOWER;
            set_root(e, 0, out);
        }
        return;
    }
    if (e->role == SFD_ELECT_CANDIDATE) {
        if (now - e->candidate_since < candidate_timeout(e))
            return;
        e->role = SFD_ELECT_FOLLOWER;
    }
    uint32_t root = sfd_elect_root(e, now);
    if (root == 0 && e->root != 0)
        set_root(e, 0, out);
    if (sfd_elect_live_count(e, now) < majority(e) || lowest_live(e, now) != e->self)
        return;
    if (root != 0 && root < e->self)
        return;
    if (e->candidate_since != 0 && now - e->candidate_since < candidate_timeout(e))
        return;
    start_candidacy(e, now, out);
}

void sfd_elect_on_heartbeat(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term, bool is_root,
                            sfd_elect_out *out)
{
    if (heard(e, now, from) < 0 || term < e->term || from == e->self)
        return;
    adopt_term(e, term, out);
    if (!is_root)
        return;
    if (e->role == SFD_ELECT_ROOT) {
        /* Two roots in one term cannot win a vote each; keep the lower id. */
        if (from > e->self)
            return;
    }
    e->role = SFD_ELECT_FOLLOWER;
    if (e->root != from || now > e->root_heard)
        e->root_heard = now;
    set_root(e, from, out);
}

void sfd_elect_on_claim(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term,
                        sfd_elect_out *out)
{
    if (heard(e, now, from) < 0 || from == e->self)
        return;
    if (term < e->term) {
        e->stale_rejected++;
        push(out, (sfd_elect_action){
                      .type = SFD_ELECT_SEND_VOTE, .to = from, .candidate = from, .term = e->term});
        return;
    }
    adopt_term(e, term, out);
    bool grant = (e->voted_for == 0 || e->voted_for == from) && lowest_live(e, now) == from &&
                 e->role != SFD_ELECT_ROOT;
    if (grant)
        e->voted_for = from;
    push(out, (sfd_elect_action){.type = SFD_ELECT_SEND_VOTE,
                                 .to = from,
                                 .candidate = from,
                                 .term = e->term,
                                 .granted = grant});
}

void sfd_elect_on_vote(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term, bool granted,
                       sfd_elect_out *out)
{
    int i = heard(e, now, from);
    if (i < 0 || from == e->self)
        return;
    if (term < e->term) {
        e->stale_rejected++;
        return;
    }
    if (term > e->term) {
        adopt_term(e, term, out);
        return;
    }
    if (e->role != SFD_ELECT_CANDIDATE || !granted)
        return;
    e->n_votes += !e->votes[i];
    e->votes[i] = 1;
    if (e->n_votes >= majority(e))
        become_root(e, out);
    else
        e->candidate_since = now; /* votes still coming: a large cluster's take longer */
}

int sfd_elect_on_term(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term, sfd_elect_out *out)
{
    sfd_elect_heard(e, now, from);
    if (term < e->term) {
        e->stale_rejected++;
        return -ESTALE;
    }
    adopt_term(e, term, out);
    return 0;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

/* The highest term that a majority of the other live members reported, or
 * 0. A single member (or one forger) cannot make it move. */
static uint64_t backed_term(const sfd_elect *e, uint64_t now)
{
    uint64_t *terms = malloc(e->n_members * sizeof *terms);
    uint32_t n = 0;
    if (terms == NULL)
        return 0;
    for (uint32_t i = 0; i < e->n_members; i++)
        if (e->ids[i] != e->self && sfd_elect_member_live(e, now, i))
            terms[n++] = e->far_term[i];
    uint64_t backed = 0;
    if (n > 0) {
        qsort(terms, n, sizeof *terms, cmp_desc);
        backed = terms[n / 2]; /* n / 2 + 1 of them report at least this */
    }
    free(terms);
    return backed;
}

bool sfd_elect_term_ok(sfd_elect *e, uint64_t now, uint32_t from, uint64_t term, sfd_elect_out *out)
{
    if (term <= e->term || (term - e->term <= SFD_PEER_TERM_STEP && term <= SFD_PEER_TERM_MAX))
        return true;
    int i = sfd_elect_index(e, from);
    if (i < 0 || term > SFD_PEER_TERM_MAX)
        return false;
    e->far_term[i] = term;
    uint64_t backed = backed_term(e, now);
    if (backed > e->term)
        adopt_term(e, backed, out);
    return term <= e->term;
}

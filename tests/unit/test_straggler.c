/*
 * Arrival points with exact numbers: the schema split and its rejections,
 * the straggler verdict, its gates and its false-verdict rate on resampled
 * clean windows, persistence across windows, the
 * critical path, and merged summaries against the dense computation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "matrix.h"

#define MS INT64_C(1000000)

/* data, forward, backward (synchronizing), other: recorded stages. */
static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                       "model.backward_cpu_wall", "step.other_cpu_wall"};
enum { DATA, FWD, BWD, BWD_WAIT, OTHER, S5 };

static void ddp_schema(sf_schema *s)
{
    assert_int_equal(sf_schema_init_sync(s, 1, 4, recorded, NULL, 1, 1u << 2), 0);
}

/* ---- the split ----------------------------------------------------------- */

static void split_schema_names_groups_hash(void **state)
{
    (void)state;
    sf_schema s, plain, by_names;
    ddp_schema(&s);
    assert_int_equal(s.n_stages, 5);
    assert_string_equal(s.names[BWD_WAIT], "model.backward_cpu_wall.sync_wait");
    assert_string_equal(s.groups[BWD_WAIT], "model.backward_cpu_wall");
    assert_int_equal(s.group_of[BWD_WAIT], s.group_of[BWD]);
    assert_int_equal(s.n_groups, 4);
    assert_int_equal(s.sync_mask, UINT64_C(1) << BWD);
    assert_int_equal(sf_schema_recorded_stages(&s), 4);
    /* The same schema from its split names (a CSV header, a peer). */
    const char *names[] = {"data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
                           "model.backward_cpu_wall.sync_wait", "step.other_cpu_wall"};
    assert_int_equal(sf_schema_init(&by_names, 1, 5, names, NULL, 1), 0);
    assert_true(sf_schema_equal(&s, &by_names));
    assert_int_equal(by_names.sync_mask, s.sync_mask);
    /* The mark changes the hash. */
    assert_int_equal(sf_schema_init_sync(&plain, 1, 4, recorded, NULL, 1, 0), 0);
    assert_int_not_equal(plain.hash, s.hash);
    assert_int_equal(plain.sync_mask, 0);
    sf_schema_clear(&s);
    sf_schema_clear(&plain);
    sf_schema_clear(&by_names);
}

static void split_schema_rejections(void **state)
{
    (void)state;
    sf_schema s;
    /* The residual cannot be synchronizing. */
    assert_int_equal(sf_schema_init_sync(&s, 1, 4, recorded, NULL, 1, 1u << 3), -EINVAL);
    /* A split name longer than SF_MAX_NAME_LEN. */
    char long_name[SF_MAX_NAME_LEN + 1];
    memset(long_name, 'x', SF_MAX_NAME_LEN - 4);
    long_name[SF_MAX_NAME_LEN - 4] = '\0';
    const char *two[] = {long_name, "rest"};
    assert_int_equal(sf_schema_init_sync(&s, 1, 2, two, NULL, 1, 1), -EINVAL);
    /* A wait stage that does not follow its stage, or is the residual. */
    const char *stray[] = {"a", "b", "a.sync_wait", "rest"};
    assert_int_equal(sf_schema_init(&s, 1, 4, stray, NULL, 1), -EINVAL);
    const char *last[] = {"a", "a.sync_wait"};
    assert_int_equal(sf_schema_init(&s, 1, 2, last, NULL, 1), -EINVAL);
    /* A wait stage in another group. */
    const char *pair[] = {"a", "a.sync_wait", "rest"};
    const char *groups[] = {"", "g", ""};
    assert_int_equal(sf_schema_init(&s, 1, 3, pair, groups, 1), -EINVAL);
}

static void split_durations(void **state)
{
    (void)state;
    sf_schema s;
    ddp_schema(&s);
    int64_t rec[4] = {1, 10, 30, 2}, d[S5];
    bool missing = true;
    assert_int_equal(sf_schema_split(&s, rec, (int64_t[]){-1, -1, 12, -1}, d, &missing), 0);
    assert_false(missing);
    int64_t want[S5] = {1, 10, 12, 18, 2};
    assert_memory_equal(d, want, sizeof want);
    /* No mark: all own work, no wait, flagged. */
    assert_int_equal(sf_schema_split(&s, rec, NULL, d, &missing), 0);
    assert_true(missing);
    int64_t whole[S5] = {1, 10, 30, 0, 2};
    assert_memory_equal(d, whole, sizeof whole);
    /* Arrival at the very start and at the very end are in range. */
    assert_int_equal(sf_schema_split(&s, rec, (int64_t[]){-1, -1, 30, -1}, d, &missing), 0);
    assert_int_equal(d[BWD_WAIT], 0);
    /* Out of range, and in a stage that is not synchronizing. */
    assert_int_equal(sf_schema_split(&s, rec, (int64_t[]){-1, -1, 31, -1}, d, &missing), -ERANGE);
    assert_int_equal(sf_schema_split(&s, rec, (int64_t[]){-1, -1, -2, -1}, d, &missing), -ERANGE);
    assert_int_equal(sf_schema_split(&s, rec, (int64_t[]){0, -1, 5, -1}, d, &missing), -EINVAL);
    sf_schema_clear(&s);
}

/* ---- verdict fixtures ------------------------------------------------------- */

struct win {
    sf_schema schema;
    struct matrix m;
    sf_gates gates;
    sf_window_meta meta;
    sf_report *report;
};

/* Every rank: data 1, forward 10, backward own work 20 ms, other 2 ms. */
static void win_init(struct win *w, uint32_t steps, uint32_t ranks)
{
    memset(w, 0, sizeof *w);
    ddp_schema(&w->schema);
    w->m = matrix_new(steps, ranks, S5);
    sf_gates_default(&w->gates);
    w->meta = meta_for(ranks);
    for (uint32_t t = 0; t < steps; t++)
        for (uint32_t r = 0; r < ranks; r++) {
            int64_t *d = cell(&w->m, t, r);
            d[DATA] = 1 * MS;
            d[FWD] = 10 * MS;
            d[BWD] = 20 * MS;
            d[OTHER] = 2 * MS;
        }
}

/* Fills each rank's sync wait so that every rank leaves backward together,
 * as a collective makes them, and computes the dense report. */
static sf_report *win_compute(struct win *w)
{
    for (uint32_t t = 0; t < w->m.steps; t++) {
        int64_t arrival_max = 0;
        for (uint32_t r = 0; r < w->m.ranks; r++) {
            int64_t *d = cell(&w->m, t, r);
            int64_t a = d[DATA] + d[FWD] + d[BWD];
            arrival_max = a > arrival_max ? a : arrival_max;
        }
        for (uint32_t r = 0; r < w->m.ranks; r++) {
            int64_t *d = cell(&w->m, t, r);
            d[BWD_WAIT] = arrival_max - (d[DATA] + d[FWD] + d[BWD]);
        }
    }
    sf_report_free(w->report);
    w->report = NULL;
    assert_int_equal(sf_report_from_rows(&w->schema, &w->meta, w->m.rows,
                                         (size_t)w->m.steps * w->m.ranks, &w->gates, &w->report),
                     0);
    return w->report;
}

static void win_clear(struct win *w)
{
    sf_report_free(w->report);
    matrix_free(&w->m);
    sf_schema_clear(&w->schema);
}

static void delay(struct win *w, uint32_t rank, uint32_t stage, int64_t ns, uint32_t first,
                  uint32_t n)
{
    for (uint32_t t = first; t < first + n; t++)
        cell(&w->m, t, rank)[stage] += ns;
}

static void backward_straggler(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 10, 4);
    delay(&w, 3, BWD, 10 * MS, 0, 10);
    sf_report *r = win_compute(&w);
    /* Without arrival points every rank's backward group would read the
     * same 41 ms; the arrival boundary names rank 3, 10 ms late. */
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 3);
    assert_int_equal(r->straggler.sync_stage, BWD);
    assert_int_equal(r->straggler.origin_stage, BWD);
    assert_int_equal(r->straggler.arrived_last_steps, 10);
    assert_int_equal(r->straggler.eligible_steps, 10);
    assert_int_equal(r->straggler.median_lateness_ns, 10 * MS);
    assert_int_equal(r->straggler.persistence, SF_PERSIST_NONE);
    assert_int_equal(r->straggler.windows_in_a_row, 1);
    assert_true(r->n_suspects >= 1);
    assert_int_equal(r->suspects[0].rank, 3);
    assert_int_equal(r->arrival_missing_steps, 0);
    /* The group view is unchanged: backward plus its wait advance 30 ms. */
    assert_int_equal(r->stages[BWD].advance_ns + r->stages[BWD_WAIT].advance_ns, 10 * 30 * MS);
    assert_int_equal(r->stages[BWD_WAIT].advance_ns, 0);
    win_clear(&w);
}

static void slow_loader_origin(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 10, 4);
    delay(&w, 2, DATA, 5 * MS, 0, 10);
    sf_report *r = win_compute(&w);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 2);
    assert_int_equal(r->straggler.sync_stage, BWD);
    assert_int_equal(r->straggler.origin_stage, DATA);
    assert_int_equal(r->straggler.median_lateness_ns, 5 * MS);
    win_clear(&w);
}

/* Rank 1 arrives last (4 ms) in `late` of 20 steps, ranks 0, 2 and 3 in
 * turn in the others. Dense: rank 1's centred place in backward's own work
 * and at its arrival sums to 2 late - 10 over a null variance of 20 x 15/12
 * = 25, so z = (2 late - 10) / 5 (in data and forward every rank ties); the
 * p-value is Bonferroni-adjusted over 4 ranks x 5 tests (3 prefixes, forward
 * and backward alone), 20 x Q(z). */
static void delay_rank1_in(struct win *w, uint32_t late)
{
    static const uint32_t others[] = {0, 2, 3};
    for (uint32_t t = 0; t < 20; t++)
        delay(w, t < late ? 1 : others[t % 3], BWD, 4 * MS, t, 1);
}

static void significance_gate(void **state)
{
    (void)state;
    struct win w;
    /* 13 of 20: z = 3.2, p = 20 x 0.000687 = 0.0137 > 0.01: no verdict. */
    win_init(&w, 20, 4);
    delay_rank1_in(&w, 13);
    sf_report *r = win_compute(&w);
    assert_false(r->straggler.present);
    assert_int_equal(r->straggler.eligible_steps, 20);
    w.gates.straggler_alpha = 0.0137;
    r = win_compute(&w);
    assert_false(r->straggler.present);
    /* The same window passes a looser alpha. */
    w.gates.straggler_alpha = 0.0138;
    r = win_compute(&w);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 1);
    assert_int_equal(r->straggler.arrived_last_steps, 13);
    win_clear(&w);
    /* 14 of 20: z = 3.6, p = 20 x 0.000159 = 0.0032: rank 1, although it
     * was not last in 30 % of the steps. */
    win_init(&w, 20, 4);
    delay_rank1_in(&w, 14);
    r = win_compute(&w);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 1);
    assert_int_equal(r->straggler.arrived_last_steps, 14);
    assert_int_equal(r->straggler.eligible_steps, 20);
    assert_int_equal(r->straggler.median_lateness_ns, 4 * MS);
    /* The optional share floor still holds it back when set above 14/20. */
    w.gates.straggler_last_share_min = 0.75;
    r = win_compute(&w);
    assert_false(r->straggler.present);
    win_clear(&w);
}

/* Without dense rows only the last arrival of each step is known: the score
 * is the last-place count, z = (count - 20/4) / sqrt(20 x 3/16). */
static sf_report *mergeable_report(struct win *w)
{
    sf_summary *s = NULL;
    sf_report *r = NULL;
    win_compute(w);
    assert_int_equal(sf_summary_build(&w->schema, &w->meta, w->m.rows,
                                      (size_t)w->m.steps * w->m.ranks, false, &s),
                     0);
    assert_int_equal(sf_report_compute(s, &w->gates, &r), 0);
    sf_summary_free(s);
    assert_false(r->dense);
    return r;
}

static void significance_gate_mergeable(void **state)
{
    (void)state;
    struct win w;
    /* 10 of 20: z = 2.58, p = 4 x 0.0049 = 0.0196: no verdict. */
    win_init(&w, 20, 4);
    delay_rank1_in(&w, 10);
    sf_report *r = mergeable_report(&w);
    assert_false(r->straggler.present);
    assert_int_equal(r->straggler.eligible_steps, 20);
    sf_report_free(r);
    win_clear(&w);
    /* 11 of 20: z = 3.10, p = 0.0039. */
    win_init(&w, 20, 4);
    delay_rank1_in(&w, 11);
    r = mergeable_report(&w);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 1);
    assert_int_equal(r->straggler.arrived_last_steps, 11);
    assert_int_equal(r->straggler.median_lateness_ns, 4 * MS);
    sf_report_free(r);
    win_clear(&w);
}

/* Backward and a callback barrier both synchronizing. Rank 1 started every
 * step 5 ms before the others, so its prefix at backward's end is 5 ms ahead
 * although every rank left the all-reduce together; rank 3 spends 2 ms more
 * before the barrier. From the step's start rank 1 looks last at the
 * barrier; timed from the all-reduce that aligned them, rank 3 is. */
static void aligned_after_a_collective(void **state)
{
    (void)state;
    enum { D, F, B, BW, C, CW, O, S7 };
    const char *names[] = {"data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
                           "callbacks.cpu_wall", "step.other_cpu_wall"};
    sf_schema schema;
    assert_int_equal(sf_schema_init_sync(&schema, 1, 5, names, NULL, 1, (1u << 2) | (1u << 3)), 0);
    assert_int_equal(schema.n_stages, S7);
    struct matrix m = matrix_new(10, 4, S7);
    for (uint32_t t = 0; t < 10; t++)
        for (uint32_t r = 0; r < 4; r++) {
            int64_t *d = cell(&m, t, r);
            d[D] = 1 * MS, d[F] = 10 * MS, d[B] = 20 * MS, d[O] = 2 * MS;
            d[BW] = r == 1 ? 5 * MS : 0;
            d[C] = r == 3 ? 3 * MS : 1 * MS;
            d[CW] = r == 3 ? 0 : 2 * MS;
        }
    sf_gates gates;
    sf_gates_default(&gates);
    sf_window_meta meta = meta_for(4);
    sf_report *r = NULL;
    assert_int_equal(sf_report_from_rows(&schema, &meta, m.rows, 40, &gates, &r), 0);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 3);
    assert_int_equal(r->straggler.sync_stage, C);
    assert_int_equal(r->straggler.origin_stage, C);
    assert_int_equal(r->straggler.arrived_last_steps, 10);
    assert_int_equal(r->straggler.median_lateness_ns, 2 * MS);
    /* The frontier itself still reads prefixes: rank 1 leads the barrier's
     * arrival boundary. */
    assert_int_equal(r->step_leaders[C], 1);
    sf_report_free(r);
    matrix_free(&m);
    sf_schema_clear(&schema);
}

static void lateness_gate(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 10, 4);
    /* Always last, but by 0.5 ms: not above the 1 ms gap tolerance. */
    delay(&w, 3, BWD, MS / 2, 0, 10);
    sf_report *r = win_compute(&w);
    assert_int_equal(r->leader_gap_tol_ns, MS);
    assert_false(r->straggler.present);
    /* A clean window: every arrival tied, no verdict. */
    delay(&w, 3, BWD, -MS / 2, 0, 10);
    r = win_compute(&w);
    assert_false(r->straggler.present);
    win_clear(&w);
}

static void missing_arrivals_are_not_eligible(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 10, 4);
    delay(&w, 3, BWD, 10 * MS, 0, 10);
    for (uint32_t t = 0; t < 3; t++)
        w.m.rows[(size_t)t * 4 + 1].flags = SF_ROW_ARRIVAL_MISSING;
    w.m.rows[(size_t)0 * 4 + 2].flags = SF_ROW_ARRIVAL_MISSING;
    sf_report *r = win_compute(&w);
    assert_int_equal(r->arrival_missing_steps, 4);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.eligible_steps, 7);
    assert_int_equal(r->straggler.arrived_last_steps, 7);
    win_clear(&w);
}

/* Seeded jitter on every rank: forward 10 ms + [0, fwd_span), backward own
 * work 20 ms + [0, 8 ms), or with skew 20 ms + [0, [0, 16 ms] ] (a long right
 * tail, as host noise has). Draws go step by step, rank by rank, forward
 * then backward. */
static void jitter(struct win *w, uint64_t *st, int64_t fwd_span, bool skew)
{
    for (uint32_t t = 0; t < w->m.steps; t++)
        for (uint32_t r = 0; r < w->m.ranks; r++) {
            int64_t *d = cell(&w->m, t, r);
            d[FWD] = 10 * MS + rand_below(st, fwd_span);
            d[BWD] = 20 * MS +
                     (skew ? rand_below(st, rand_below(st, 16 * MS) + 1) : rand_below(st, 8 * MS));
        }
}

/* Rank 2's forward is 3 ms longer and its backward 2 ms shorter, as when
 * ranks share cores and the late rank's backward runs with fewer rivals:
 * at the backward arrival it is only 1 ms behind, inside 8 ms of jitter, and
 * arrives last in 12 of 40 steps. The place test at the arrival boundary
 * alone scores z = 1.98 (4 x Q(z) = 0.095: the verdict used to be null). In
 * forward rank 2 is last in all 40 steps: z = 60 / sqrt(50) = 8.49,
 * p = 20 x Q(z) = 2.2e-16; its median contrast there is 3.08 ms and
 * its median lateness in the 12 steps it arrived last 1.98 ms, both above
 * the 1 ms tolerance. */
static void evened_out_delay_found_where_it_began(void **state)
{
    (void)state;
    struct win w;
    uint64_t st = 1;
    win_init(&w, 40, 4);
    jitter(&w, &st, 2 * MS, false);
    delay(&w, 2, FWD, 3 * MS, 0, 40);
    delay(&w, 2, BWD, -2 * MS, 0, 40);
    sf_report *r = win_compute(&w);
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 2);
    assert_int_equal(r->straggler.sync_stage, BWD);
    assert_int_equal(r->straggler.origin_stage, FWD);
    assert_int_equal(r->straggler.arrived_last_steps, 12);
    assert_int_equal(r->straggler.eligible_steps, 40);
    assert_int_equal(r->straggler.median_lateness_ns, 1984422);
    assert_int_equal(r->suspects[0].rank, 2);
    win_clear(&w);
    /* The same jitter without the delay: no verdict. */
    st = 1;
    win_init(&w, 40, 4);
    jitter(&w, &st, 2 * MS, false);
    r = win_compute(&w);
    assert_false(r->straggler.present);
    assert_int_equal(r->straggler.eligible_steps, 40);
    win_clear(&w);
}

/* Resampled clean windows (100 steps, 4 ranks, exchangeable seeded jitter):
 * a verdict in at most alpha of them, with symmetric and with skewed noise;
 * first with the magnitude gates off (a zero gap tolerance), so that the
 * significance test alone is checked, then at the defaults. */
static uint32_t clean_verdicts(uint32_t windows, bool skew, double alpha, bool tolerance)
{
    uint64_t st = 2026;
    uint32_t verdicts = 0;
    for (uint32_t i = 0; i < windows; i++) {
        struct win w;
        win_init(&w, 100, 4);
        w.gates.straggler_alpha = alpha;
        if (!tolerance)
            w.gates.leader_gap_tol_min_s = 0, w.gates.leader_gap_tol_frac = 0;
        jitter(&w, &st, 4 * MS, skew);
        verdicts += win_compute(&w)->straggler.present;
        win_clear(&w);
    }
    return verdicts;
}

static void clean_windows_rarely_give_a_verdict(void **state)
{
    (void)state;
    for (int skew = 0; skew <= 1; skew++) {
        assert_true(clean_verdicts(200, skew, 0.2, false) <= 40);
        assert_true(clean_verdicts(200, skew, 0.05, false) <= 10);
        assert_true(clean_verdicts(200, skew, 0.01, true) <= 2);
    }
}

/* ---- persistence ------------------------------------------------------------- */

static void persistence_across_windows(void **state)
{
    (void)state;
    sf_straggler_history h = {0};
    sf_report r = {0};
    sf_gates_default(&r.gates);
    struct {
        int64_t index;
        bool present;
        uint32_t rank;
        enum sf_persistence want;
        uint32_t run;
    } seq[] = {
        {0, true, 3, SF_PERSIST_NONE, 1},
        {1, true, 3, SF_PERSIST_FIXED, 2},
        {2, true, 3, SF_PERSIST_FIXED, 3},
        {3, true, 1, SF_PERSIST_ROTATING, 1},
        {4, true, 2, SF_PERSIST_ROTATING, 1},
        {5, false, 0, SF_PERSIST_NONE, 0},
        {6, true, 2, SF_PERSIST_NONE, 1},
        {8, true, 2, SF_PERSIST_NONE, 1}, /* a gap */
        {9, true, 2, SF_PERSIST_FIXED, 2},
        {9, true, 2, SF_PERSIST_FIXED, 2}, /* window 9 again: counted once */
        {10, true, 2, SF_PERSIST_FIXED, 3},
    };
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        r.meta.index = seq[i].index;
        r.straggler =
            (sf_straggler){.present = seq[i].present, .rank = seq[i].rank, .windows_in_a_row = 1};
        sf_straggler_track(&h, &r);
        if (!seq[i].present)
            continue;
        assert_int_equal(r.straggler.persistence, seq[i].want);
        assert_int_equal(r.straggler.windows_in_a_row, seq[i].run);
    }
    assert_string_equal(sf_persistence_name(SF_PERSIST_FIXED), "fixed");
    assert_string_equal(sf_persistence_name(SF_PERSIST_ROTATING), "rotating");
    assert_string_equal(sf_persistence_name(SF_PERSIST_NONE), "none");
}

/* ---- the critical path --------------------------------------------------------- */

static void critical_path_chain(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 5, 4);
    /* Steps 0-2: rank 2 leads data (5 ms); then everyone ties until other,
     * where rank 0 leads by 3 ms. Steps 3-4: rank 1 leads forward. */
    delay(&w, 2, DATA, 5 * MS, 0, 3);
    delay(&w, 0, OTHER, 3 * MS, 0, 5);
    delay(&w, 1, FWD, 4 * MS, 3, 2);
    sf_report *r = win_compute(&w);
    assert_int_equal(r->critical_path.steps, 3);
    uint32_t want[S5] = {2, 2, 2, SF_NO_RANK, 0};
    assert_memory_equal(r->critical_path.chain, want, sizeof want);
    win_clear(&w);
}

/* ---- merged = dense ----------------------------------------------------------- */

static void merged_equals_dense(void **state)
{
    (void)state;
    struct win w;
    win_init(&w, 12, 6);
    uint64_t st = 12;
    for (uint32_t t = 0; t < 12; t++)
        for (uint32_t r = 0; r < 6; r++) {
            cell(&w.m, t, r)[BWD] += rand_below(&st, 3 * MS);
            cell(&w.m, t, r)[DATA] += rand_below(&st, MS);
        }
    delay(&w, 4, FWD, 6 * MS, 0, 12);
    w.m.rows[7].flags = SF_ROW_ARRIVAL_MISSING;
    sf_report *dense = win_compute(&w);
    assert_true(dense->dense);
    assert_true(dense->straggler.present);
    assert_int_equal(dense->straggler.rank, 4);
    assert_int_equal(dense->straggler.origin_stage, FWD);
    sf_row odd[36], even[36];
    size_t n_odd = 0, n_even = 0;
    for (size_t i = 0; i < 72; i++) {
        if (w.m.rows[i].rank % 2)
            odd[n_odd++] = w.m.rows[i];
        else
            even[n_even++] = w.m.rows[i];
    }
    sf_summary *a = NULL, *b = NULL;
    assert_int_equal(sf_summary_build(&w.schema, &w.meta, odd, n_odd, false, &a), 0);
    assert_int_equal(sf_summary_build(&w.schema, &w.meta, even, n_even, false, &b), 0);
    assert_int_equal(sf_summary_merge(a, b), 0);
    sf_report *merged = NULL;
    assert_int_equal(sf_report_compute(a, &w.gates, &merged), 0);
    assert_false(merged->dense);
    const sf_straggler *x = &merged->straggler, *y = &dense->straggler;
    assert_true(
        x->present == y->present && x->rank == y->rank && x->sync_stage == y->sync_stage &&
        x->origin_stage == y->origin_stage && x->arrived_last_steps == y->arrived_last_steps &&
        x->eligible_steps == y->eligible_steps && x->median_lateness_ns == y->median_lateness_ns);
    assert_int_equal(merged->arrival_missing_steps, 1);
    assert_int_equal(merged->critical_path.steps, dense->critical_path.steps);
    assert_memory_equal(merged->critical_path.chain, dense->critical_path.chain,
                        S5 * sizeof(uint32_t));
    assert_int_equal(merged->suspects[0].rank, 4);
    sf_report_free(merged);
    sf_summary_free(a);
    sf_summary_free(b);
    win_clear(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_schema_names_groups_hash),
        cmocka_unit_test(split_schema_rejections),
        cmocka_unit_test(split_durations),
        cmocka_unit_test(backward_straggler),
        cmocka_unit_test(slow_loader_origin),
        cmocka_unit_test(significance_gate),
        cmocka_unit_test(significance_gate_mergeable),
        cmocka_unit_test(aligned_after_a_collective),
        cmocka_unit_test(lateness_gate),
        cmocka_unit_test(missing_arrivals_are_not_eligible),
        cmocka_unit_test(evened_out_delay_found_where_it_began),
        cmocka_unit_test(clean_windows_rarely_give_a_verdict),
        cmocka_unit_test(persistence_across_windows),
        cmocka_unit_test(critical_path_chain),
        cmocka_unit_test(merged_equals_dense),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

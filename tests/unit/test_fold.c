/*
 * The summary build's fast fold and its median network against the
 * straightforward computation from the definitions (docs/SPEC.md sections 3
 * and 4): sorts instead of selections and top-2 heaps, one row at a time, on
 * random windows with missing ranks, a single rank, ties and maximal values.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "core_internal.h"
#include "matrix.h"
#include "vec/vec.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The median by sorting: lo + (hi - lo) / 2 for even counts. */
static int64_t median_by_sort(int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i64);
    int64_t hi = v[n / 2], lo = n % 2 ? hi : v[n / 2 - 1];
    return lo + (hi - lo) / 2;
}

/* Durations for one random case: ties (a range of 4), spread values, or
 * rows at the bounds (one stage a whole step, SF_MAX_STEP_NS, or every
 * stage an equal share of it). */
static void fill(struct matrix *m, uint64_t *st, int kind)
{
    uint32_t S = m->stages;
    for (size_t i = 0; i < (size_t)m->steps * m->ranks; i++) {
        int64_t *d = &m->d[i * S];
        for (uint32_t k = 0; k < S; k++) {
            if (kind == 0)
                d[k] = rand_below(st, 4);
            else if (kind == 1)
                d[k] = rand_below(st, 50000000);
            else
                d[k] =
                    rand_below(st, 2) ? SF_MAX_STEP_NS / S : SF_MAX_STEP_NS / S - rand_below(st, 3);
        }
        if (kind == 2 && rand_below(st, 4) == 0) {
            memset(d, 0, S * sizeof *d);
            d[rand_below(st, S)] = SF_MAX_STEP_NS;
        }
    }
}

/* One step of the reference: every field of sf_step_summary from its
 * definition, over rows[0..n) (one step, ascending ranks). */
static void check_step(const sf_summary *s, const sf_step_summary *got, const sf_row *rows,
                       size_t n, const uint32_t *rank_of, const int64_t *median, uint32_t n_slots)
{
    uint32_t S = s->schema.n_stages;
    int64_t residual = 0, overlap = 0, end = 0, slowest = INT64_MIN;
    uint32_t arrival = 0, slowest_rank = SF_NO_RANK;
    const sf_row *slowest_row = NULL, *rank0 = NULL;
    assert_int_equal(got->step, rows[0].step);
    assert_int_equal(got->n_ranks, n);
    for (uint32_t k = 0; k < S; k++) {
        int64_t mx = INT64_MIN, mn = INT64_MAX, sum = 0;
        sf_top2 want = {INT64_MIN, INT64_MIN, SF_NO_RANK, SF_NO_RANK};
        for (size_t i = 0; i < n; i++) {
            int64_t p = 0;
            for (uint32_t j = 0; j <= k; j++)
                p += rows[i].d[j];
            /* value descending, then rank ascending */
            if (p > want.v1 || (p == want.v1 && rows[i].rank < want.r1)) {
                want = (sf_top2){p, want.v1, rows[i].rank, want.r1};
            } else if (p > want.v2 || (p == want.v2 && rows[i].rank < want.r2)) {
                want.v2 = p;
                want.r2 = rows[i].rank;
            }
            mx = rows[i].d[k] > mx ? rows[i].d[k] : mx;
            mn = rows[i].d[k] < mn ? rows[i].d[k] : mn;
            sum += rows[i].d[k];
        }
        assert_int_equal(got->prefix_top2[k].v1, want.v1);
        assert_int_equal(got->prefix_top2[k].v2, want.v2);
        assert_int_equal(got->prefix_top2[k].r1, want.r1);
        assert_int_equal(got->prefix_top2[k].r2, want.r2);
        assert_int_equal(got->dmax[k], mx);
        assert_int_equal(got->dmin[k], mn);
        assert_int_equal(got->dsum[k], sum);
    }
    int64_t clipped[2 * SF_MAX_STAGES];
    for (uint32_t c = 0; c < s->cand.n; c++)
        clipped[c] = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        uint32_t slot = 0;
        while (slot < n_slots && rank_of[slot] != rows[i].rank)
            slot++;
        assert_true(slot < n_slots);
        int64_t p = 0;
        for (uint32_t k = 0; k < S; k++)
            p += rows[i].d[k];
        for (uint32_t c = 0; c < s->cand.n; c++) {
            int64_t cut = 0; /* each member stage clipped to the rank's median */
            for (uint32_t k = 0; k < S; k++) {
                int64_t b = median[(size_t)slot * S + k];
                if (s->cand.member_mask[c] >> k & 1 && rows[i].d[k] > b)
                    cut += rows[i].d[k] - b;
            }
            clipped[c] = p - cut > clipped[c] ? p - cut : clipped[c];
        }
    }
    for (uint32_t c = 0; c < s->cand.n; c++)
        assert_int_equal(got->clipped_end[c], clipped[c]);
    for (size_t i = 0; i < n; i++) {
        int64_t p = 0;
        for (uint32_t k = 0; k < S; k++)
            p += rows[i].d[k];
        if (p > slowest || (p == slowest && rows[i].rank < slowest_rank)) {
            slowest = p;
            slowest_rank = rows[i].rank;
            slowest_row = &rows[i];
        }
        if (rows[i].rank == 0)
            rank0 = &rows[i];
        residual += rows[i].d[S - 1];
        overlap += rows[i].overlap_ns;
        end += p;
        arrival += (rows[i].flags & SF_ROW_ARRIVAL_MISSING) != 0;
    }
    assert_int_equal(got->slowest_total, slowest);
    assert_int_equal(got->slowest_rank, slowest_rank);
    assert_memory_equal(got->slowest_d, slowest_row->d, S * sizeof(int64_t));
    assert_int_equal(got->has_rank0, rank0 != NULL);
    if (rank0 != NULL)
        assert_memory_equal(got->rank0_d, rank0->d, S * sizeof(int64_t));
    assert_int_equal(got->residual_sum, residual);
    assert_int_equal(got->overlap_sum, overlap);
    assert_int_equal(got->end_sum, end);
    assert_int_equal(got->arrival_missing, arrival);
}

/* Every rank's median per stage over the steps it reported, by sorting. */
static int64_t *medians_by_sort(const sf_row *rows, size_t n_rows, uint32_t S, uint32_t **ret_ranks,
                                uint32_t *ret_n)
{
    uint32_t *ranks = malloc(n_rows * sizeof *ranks), n = 0;
    for (size_t i = 0; i < n_rows; i++) {
        uint32_t j = 0;
        while (j < n && ranks[j] != rows[i].rank)
            j++;
        if (j == n)
            ranks[n++] = rows[i].rank;
    }
    int64_t *median = malloc((n ? n : 1) * S * sizeof *median);
    int64_t *v = malloc(n_rows * sizeof *v);
    for (uint32_t slot = 0; slot < n; slot++)
        for (uint32_t k = 0; k < S; k++) {
            size_t m = 0;
            for (size_t i = 0; i < n_rows; i++)
                if (rows[i].rank == ranks[slot])
                    v[m++] = rows[i].d[k];
            median[(size_t)slot * S + k] = median_by_sort(v, m);
        }
    free(v);
    *ret_ranks = ranks;
    *ret_n = n;
    return median;
}

static void check_build(const sf_schema *schema, const sf_row *rows, size_t n_rows, unsigned flags)
{
    uint32_t S = schema->n_stages, n_slots = 0, *rank_of = NULL;
    sf_window_meta meta = meta_for(SF_MAX_RANKS);
    sf_summary *s = NULL;
    assert_int_equal(sf__summary_build(schema, &meta, rows, n_rows, false, flags, &s), 0);
    int64_t *median = medians_by_sort(rows, n_rows, S, &rank_of, &n_slots);
    uint64_t events = 0, ready = 0;
    int64_t cpu = 0, gpu = 0;
    uint32_t step_i = 0;
    for (size_t i = 0; i < n_rows; step_i++) {
        size_t j = i;
        while (j < n_rows && rows[j].step == rows[i].step)
            j++;
        assert_true(step_i < s->n_steps);
        check_step(s, &s->steps[step_i], &rows[i], j - i, rank_of, median, n_slots);
        i = j;
    }
    assert_int_equal(s->n_steps, step_i);
    for (size_t i = 0; i < n_rows; i++) {
        events += rows[i].event_state != SF_EVENT_NONE;
        ready += rows[i].event_state == SF_EVENT_READY;
        cpu += rows[i].event_state == SF_EVENT_READY ? rows[i].event_cpu_ns : 0;
        gpu += rows[i].event_state == SF_EVENT_READY ? rows[i].event_gpu_ns : 0;
    }
    assert_int_equal(s->event_samples, events);
    assert_int_equal(s->event_ready, ready);
    assert_int_equal(s->event_cpu_ns, cpu);
    assert_int_equal(s->event_gpu_ns, gpu);
    assert_int_equal(sf_summary_covered_ranks(s), n_slots);
    free(median);
    free(rank_of);
    sf_summary_free(s);
}

/* One random window, whole (a grid: the vector fold and the median network
 * where this CPU has them, the fold in its best form and in AVX2), then
 * with random rows missing (the general path). More than 64 ranks crosses
 * the build's blocks of ranks; rank counts not a multiple of 4 leave rows
 * past the AVX2 fold's quads; some grids start past rank 0. */
static void run_case(uint64_t seed)
{
    uint64_t st = seed;
    uint32_t S = 1 + (uint32_t)rand_below(&st, 9);
    uint32_t ranks = seed % 7 == 0 ? 1 : 1 + (uint32_t)rand_below(&st, seed % 5 ? 20 : 150);
    uint32_t steps = 1 + (uint32_t)rand_below(&st, seed % 11 ? 30 : 260);
    struct matrix m = matrix_new(steps, ranks, S);
    fill(&m, &st, (int)(seed % 3));
    matrix_random_extras(&m, &st);
    if (seed % 6 == 1) /* a node whose ranks start past 0: no rank 0 in the grid */
        for (size_t i = 0; i < (size_t)steps * ranks; i++)
            m.rows[i].rank += 4 * (uint32_t)(seed % 5) + 1;
    sf_schema schema;
    if (seed % 4 == 0 && S >= 3)
        synchronizing_schema(&schema, S);
    else
        numbered_schema(&schema, S);
    size_t n = (size_t)steps * ranks;
    check_build(&schema, m.rows, n, 0);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (rand_below(&st, 5) != 0 || i == 0)
            m.rows[kept++] = m.rows[i];
    check_build(&schema, m.rows, kept, 0);
    sf_schema_clear(&schema);
    matrix_free(&m);
}

static void fast_fold_matches_the_definitions(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 160; seed++)
        run_case(seed);
}

/* What a dense-report test checks of one random window and its report. */
typedef void (*dense_check)(struct matrix *m, const sf_report *rep);

/* Random windows (seeds 1 to `seeds`) of up to the given stages, ranks and
 * steps, durations of fill kind seed % 3, each checked against its report
 * in dense mode at any rank count. */
static void check_random_dense_reports(uint64_t seeds, uint32_t max_stages, uint32_t max_ranks,
                                       uint32_t max_steps, dense_check check)
{
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        uint64_t st = seed;
        uint32_t S = 1 + (uint32_t)rand_below(&st, max_stages);
        uint32_t R = 1 + (uint32_t)rand_below(&st, max_ranks);
        uint32_t T = 1 + (uint32_t)rand_below(&st, max_steps);
        struct matrix m = matrix_new(T, R, S);
        fill(&m, &st, (int)(seed % 3));
        sf_schema schema;
        numbered_schema(&schema, S);
        sf_window_meta meta = meta_for(R);
        sf_gates g;
        sf_gates_default(&g);
        g.dense_max_ranks = SF_MAX_RANKS;
        sf_report *rep = NULL;
        assert_int_equal(sf_report_from_rows(&schema, &meta, m.rows, (size_t)T * R, &g, &rep), 0);
        check(&m, rep);
        sf_report_free(rep);
        sf_schema_clear(&schema);
        matrix_free(&m);
    }
}

/* Each rank's mean slack: over every complete step and boundary 1..S, the
 * frontier minus the rank's prefix. */
static void mean_slack_of(struct matrix *m, const sf_report *rep)
{
    uint32_t S = m->stages, R = m->ranks, T = m->steps;
    assert_int_equal(rep->n_rank_evidence, R);
    for (uint32_t i = 0; i < R; i++) {
        uint32_t r = rep->rank_evidence[i].rank;
        __int128 sum = 0;
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t k = 0; k < S; k++) {
                int64_t front = INT64_MIN, mine = 0;
                for (uint32_t q = 0; q < R; q++) {
                    int64_t p = 0;
                    for (uint32_t j = 0; j <= k; j++)
                        p += cell(m, t, q)[j];
                    front = p > front ? p : front;
                    mine = q == r ? p : mine;
                }
                sum += front - mine;
            }
        assert_int_equal(rep->rank_evidence[i].mean_slack_ns, (int64_t)(sum / (T * S)));
    }
}

/* Dense mode's mean slack per rank against its definition. */
static void mean_slack_matches_the_definition(void **state)
{
    (void)state;
    check_random_dense_reports(40, 9, 30, 12, mean_slack_of);
}

/* The cohort median of stage k at step t, by sorting the ranks' values. */
static int64_t plain_cohort_median(struct matrix *m, uint32_t t, uint32_t k, int64_t *v)
{
    for (uint32_t q = 0; q < m->ranks; q++)
        v[q] = cell(m, t, q)[k];
    return median_by_sort(v, m->ranks);
}

/* Each stage's cohort-median gain: over every step, the exposed time less
 * the end frontier with the stage clipped to its median over ranks. */
static void cohort_gains_of(struct matrix *m, const sf_report *rep)
{
    uint32_t S = m->stages, R = m->ranks, T = m->steps;
    int64_t v[100];
    assert_true(R <= 100);
    for (uint32_t k = 0; k < S; k++) {
        int64_t gain = 0;
        for (uint32_t t = 0; t < T; t++) {
            int64_t b = plain_cohort_median(m, t, k, v), exposed = 0, clipped = INT64_MIN;
            for (uint32_t q = 0; q < R; q++) {
                int64_t p = 0, *d = cell(m, t, q);
                for (uint32_t j = 0; j < S; j++)
                    p += d[j];
                int64_t cut = p - (d[k] > b ? d[k] - b : 0);
                exposed = p > exposed ? p : exposed;
                clipped = cut > clipped ? cut : clipped;
            }
            gain += exposed - clipped;
        }
        if (rep->stages[k].gain_cohort_median_ns != gain)
            fail_msg("R %u S %u stage %u: %lld, want %lld", R, S, k,
                     (long long)rep->stages[k].gain_cohort_median_ns, (long long)gain);
    }
}

/* Dense mode's cohort-median gains against their definition, up to 100
 * ranks, so that both ways of finding the medians run (the network across
 * stages up to 64 ranks where a vector unit runs it, one selection a stage
 * above). */
static void cohort_gains_match_the_definition(void **state)
{
    (void)state;
    check_random_dense_reports(60, 8, 100, 6, cohort_gains_of);
}

/* Lanes for the network (lane % 19 picks a kind): ties; series spread over
 * 2^62 (mix 0) or, below zero, reaching from 2^31 under their first value
 * to 2^31 - 1 over it, the most that the AVX2 form's 32-bit offsets hold
 * (mixes 1 and 2), and lane 17 at the bottom of int64, whose offsets'
 * base lies below it; values at the bounds. Mix 2 puts one value of lane 18
 * one past that reach, over the first value in one run of 19 lanes and
 * under it in the next, so those runs fall back to 64 bits. */
static void fill_network_lanes(int64_t *v, uint32_t n, size_t lanes, int mix, uint64_t *st)
{
    const int64_t base = -(INT64_C(1) << 40), half = INT64_C(1) << 31;
    for (uint32_t t = 0; t < n; t++)
        for (size_t l = 0; l < lanes; l++) {
            size_t kind = l % 19;
            int64_t *x = &v[(size_t)t * lanes + l];
            if (kind < 6)
                *x = rand_below(st, 3);
            else if (kind < 12 && mix == 0)
                *x = rand_below(st, INT64_C(1) << 62) - (INT64_C(1) << 61);
            else if (kind < 12)
                *x = base + (t == 0   ? 0
                             : t == 1 ? -half
                             : t == 2 ? half - 1
                                      : rand_below(st, 2 * half) - half);
            else if (kind == 18 && mix == 2)
                *x = t == 0 ? 0 : t == 1 ? (l / 19 % 2 ? -half - 1 : half) : rand_below(st, half);
            else if (kind == 17 && mix > 0)
                *x = INT64_MIN + rand_below(st, 3);
            else
                *x = SF_MAX_DURATION_NS - rand_below(st, 2);
        }
}

static void check_medians(const int64_t *copy, uint32_t n, size_t lanes, const int64_t *got)
{
    int64_t series[SF__MEDIAN_NET_MAX];
    for (size_t l = 0; l < lanes; l++) {
        for (uint32_t t = 0; t < n; t++)
            series[t] = copy[(size_t)t * lanes + l];
        assert_int_equal(got[l], median_by_sort(series, n));
    }
}

/* The offsets form reading the same series in place from a wider array
 * (a group of ranks within a step of rows): the same result as from the
 * series alone, r, and the same medians. The array's other values would
 * break any series they were read into. */
static void check_narrow_in_place(const sf__median_net *net, const sf__vec *form,
                                  const int64_t *copy, uint32_t n, size_t lanes, int r,
                                  const int64_t *got)
{
    size_t stride = lanes + 5;
    int64_t *wide = malloc((size_t)n * stride * sizeof *wide);
    int64_t *again = malloc(lanes * sizeof *again);
    assert_non_null(wide);
    assert_non_null(again);
    for (uint32_t t = 0; t < n; t++)
        for (size_t l = 0; l < stride; l++)
            wide[t * stride + l] = l < lanes ? copy[t * lanes + l] : INT64_MIN + t;
    assert_int_equal(sf__median_net_narrow(net, form, wide, stride, lanes, again), r);
    if (r == 0)
        assert_memory_equal(again, got, lanes * sizeof *got);
    free(wide);
    free(again);
}

/* Every form this CPU has against a sort of each lane; the offsets (AVX2
 * and AVX-512) exactly where mix 1 made every span fit, from the series
 * alone and in place. */
static void check_network_forms(const sf__median_net *net, const int64_t *copy, int64_t *v,
                                uint32_t n, size_t lanes, int mix, int64_t *got)
{
    for (int isa = SF__ISA_GENERIC; isa < SF__ISA_COUNT; isa++) {
        const sf__vec *form = sf__vec_form((enum sf__isa)isa);
        if (form == NULL)
            continue; /* this CPU lacks the form */
        memcpy(v, copy, (size_t)n * lanes * sizeof *v);
        sf__median_net_run(net, form, v, lanes, got);
        check_medians(copy, n, lanes, got);
        int r = sf__median_net_narrow(net, form, copy, lanes, lanes, got);
        if (r == -ENOTSUP)
            continue; /* no form on offsets */
        assert_int_equal(r, mix == 1 || n == 1 ? 0 : -ERANGE);
        if (r == 0)
            check_medians(copy, n, lanes, got);
        check_narrow_in_place(net, form, copy, n, lanes, r, got);
    }
}

/* Every instruction set this CPU has, every count the network takes, every
 * mix of fill_network_lanes, against a sort: 19 lanes (two whole vectors of
 * 8 and a part; a run of 16 offsets and a part) and 48 (a group of 8 ranks
 * of 6 stages, as the build runs it). */
static void median_network_lanes(size_t lanes)
{
    uint64_t st = 42 + lanes;
    int64_t *v = malloc(SF__MEDIAN_NET_MAX * lanes * sizeof *v);
    int64_t *copy = malloc(SF__MEDIAN_NET_MAX * lanes * sizeof *copy);
    int64_t *got = malloc(lanes * sizeof *got);
    assert_non_null(v);
    assert_non_null(copy);
    assert_non_null(got);
    for (uint32_t n = 1; n <= SF__MEDIAN_NET_MAX; n++) {
        sf__median_net *net = NULL;
        assert_int_equal(sf__median_net_new(n, &net), 0);
        for (int mix = 0; mix < 3; mix++) {
            fill_network_lanes(copy, n, lanes, mix, &st);
            check_network_forms(net, copy, v, n, lanes, mix, got);
        }
        sf__median_net_free(net);
    }
    free(v);
    free(copy);
    free(got);
}

static void median_network_matches_a_sort(void **state)
{
    (void)state;
    median_network_lanes(19);
    median_network_lanes(48);
    sf__median_net *net = NULL;
    assert_int_equal(sf__median_net_new(SF__MEDIAN_NET_MAX + 1, &net), -EINVAL);
    assert_int_equal(sf__median_net_new(0, &net), -EINVAL);
}

/* The register passes as sorters, by the 0-1 principle: a comparator
 * network sorts every input if it sorts every input of 0s and 1s. Each
 * input is a mask, bit w the value of wire w; a column holds 16 of them.
 * The pass must leave each sorted, the same count of 1s, and every wire
 * from `wires` on untouched. */
enum { PASS_LANES = 16, PASS_UNTOUCHED = 7 };

static void check_pass(const sf__vec *form, enum sf__net_pass pass, uint32_t wires,
                       const uint64_t *inputs, size_t n_inputs)
{
    uint32_t col[64 * PASS_LANES];
    for (size_t i0 = 0; i0 < n_inputs; i0 += PASS_LANES) {
        for (uint32_t w = 0; w < 64; w++)
            for (size_t l = 0; l < PASS_LANES; l++)
                col[w * PASS_LANES + l] =
                    w >= wires ? PASS_UNTOUCHED : i0 + l < n_inputs && inputs[i0 + l] >> w & 1;
        assert_int_equal(sf__median_net_pass(form, pass, col, wires), 0);
        for (size_t l = 0; l < PASS_LANES; l++) {
            uint64_t in = i0 + l < n_inputs ? inputs[i0 + l] : 0;
            uint32_t ones =
                (uint32_t)__builtin_popcountll(wires < 64 ? in & ((UINT64_C(1) << wires) - 1) : in);
            for (uint32_t w = 0; w < 64; w++)
                assert_int_equal(col[w * PASS_LANES + l],
                                 w >= wires ? PASS_UNTOUCHED : w >= wires - ones);
        }
    }
}

/* A mask of `ones` 1s at random wires among [from, from + wires). */
static uint64_t random_ones(uint32_t from, uint32_t wires, uint32_t ones, uint64_t *st)
{
    uint64_t m = 0;
    for (uint32_t placed = 0; placed < ones;) {
        uint64_t bit = UINT64_C(1) << (from + (uint32_t)rand_below(st, wires));
        placed += !(m & bit);
        m |= bit;
    }
    return m;
}

/* The 1s at the top of [from, from + wires): a sorted block. */
static uint64_t top_ones(uint32_t from, uint32_t wires, uint32_t ones)
{
    return ones ? ((UINT64_C(1) << ones) - 1) << (from + wires - ones) : 0;
}

/* Every 0-1 input of each tile size; for a pair of tiles, every count of 1s
 * in each tile (the merge then sees every pair of sorted tiles), placed at
 * random; for the round p = 32, every pair of sorted blocks of 32 and the
 * rest. */
static void network_passes_sort(void **state)
{
    (void)state;
    static uint64_t inputs[1 << 16];
    uint64_t st = 7;
    for (int isa = SF__ISA_AVX2; isa < SF__ISA_COUNT; isa++) {
        const sf__vec *form = sf__vec_form((enum sf__isa)isa);
        if (form == NULL)
            continue;
        for (uint32_t wires = 1; wires <= 16; wires++) {
            for (uint64_t m = 0; m < UINT64_C(1) << wires; m++)
                inputs[m] = m;
            check_pass(form, SF__NET_PASS_TILE, wires, inputs, (size_t)1 << wires);
        }
    }
    const sf__vec *avx512 = sf__vec_form(SF__ISA_AVX512);
    if (avx512 == NULL)
        return;
    for (uint32_t wires = 1; wires <= 32; wires++) {
        uint32_t low = wires < 16 ? wires : 16, high = wires - low;
        size_t n = 0;
        for (uint32_t a = 0; a <= low; a++)
            for (uint32_t b = 0; b <= high; b++)
                inputs[n++] =
                    random_ones(0, low, a, &st) | (high ? random_ones(16, high, b, &st) : 0);
        check_pass(avx512, SF__NET_PASS_PAIR, wires, inputs, n);
    }
    for (uint32_t wires = 33; wires <= 64; wires++) {
        size_t n = 0;
        for (uint32_t a = 0; a <= 32; a++)
            for (uint32_t b = 0; b <= wires - 32; b++)
                inputs[n++] = top_ones(0, 32, a) | top_ones(32, wires - 32, b);
        check_pass(avx512, SF__NET_PASS_ROUND32, wires, inputs, n);
    }
}

/* The counts each pass takes, and the forms that lack it. */
static void network_passes_refuse_what_they_lack(void **state)
{
    (void)state;
    uint32_t col[64 * PASS_LANES] = {0};
    const sf__vec *avx512 = sf__vec_form(SF__ISA_AVX512), *avx2 = sf__vec_form(SF__ISA_AVX2);
    const sf__vec *generic = sf__vec_form(SF__ISA_GENERIC);
    /* the counts are checked before the form: any form refuses them */
    const sf__vec *any = avx512 ? avx512 : generic;
    assert_int_equal(sf__median_net_pass(any, SF__NET_PASS_TILE, col, 0), -EINVAL);
    assert_int_equal(sf__median_net_pass(any, SF__NET_PASS_TILE, col, 17), -EINVAL);
    assert_int_equal(sf__median_net_pass(any, SF__NET_PASS_PAIR, col, 33), -EINVAL);
    assert_int_equal(sf__median_net_pass(any, SF__NET_PASS_ROUND32, col, 32), -EINVAL);
    assert_int_equal(sf__median_net_pass(any, SF__NET_PASS_ROUND32, col, 65), -EINVAL);
    assert_int_equal(sf__median_net_pass(any, (enum sf__net_pass)3, col, 1), -EINVAL);
    assert_int_equal(sf__median_net_pass(generic, SF__NET_PASS_TILE, col, 1), -ENOTSUP);
    if (avx2 != NULL)
        assert_int_equal(sf__median_net_pass(avx2, SF__NET_PASS_PAIR, col, 20), -ENOTSUP);
    for (size_t i = 0; i < 64 * PASS_LANES; i++)
        assert_int_equal(col[i], 0);
}

/* The wide selection (a step's median over ranks) on shapes that stress a
 * quickselect: ties, runs of the minimum (the equal split), sorted,
 * reversed, organ pipe, values at the bounds; sizes around its vector
 * width and its scalar cut-off, and large ones. */
static void wide_median_matches_a_sort(void **state)
{
    (void)state;
    static const size_t sizes[] = {1,   2,   63,  64,  65,  66,   71,   72,   73,    100,  127,
                                   128, 129, 255, 256, 257, 1000, 1001, 4097, 16384, 20001};
    size_t max = 20001;
    int64_t *v = malloc(max * sizeof *v), *want = malloc(max * sizeof *want);
    int64_t *tmp = malloc((3 * max + 24) * sizeof *tmp);
    uint64_t st = 7;
    unsigned forms_run = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int shape = 0; shape < 10; shape++) {
            size_t n = sizes[i];
            for (size_t j = 0; j < n; j++) {
                int64_t x;
                switch (shape) {
                case 0:
                    x = rand_below(&st, 3);
                    break;
                case 1:
                    x = j < n * 3 / 4 ? 5 : 5 + rand_below(&st, 100);
                    break;
                case 2:
                    x = (int64_t)j;
                    break;
                case 3:
                    x = (int64_t)(n - j);
                    break;
                case 4:
                    x = (int64_t)(j < n / 2 ? j : n - j);
                    break;
                case 5:
                    x = SF_MAX_DURATION_NS - rand_below(&st, 2);
                    break;
                case 6:
                    x = 42;
                    break;
                case 7: /* half the values the minimum: the median straddles its run */
                    x = j % 2 ? 5 : 6 + rand_below(&st, 100);
                    break;
                case 8: /* half one large value: for even n the median's lower
                         * half is the largest of the values a split left behind */
                    x = j % 2 ? INT64_C(1) << 40 : rand_below(&st, INT64_C(1) << 30);
                    break;
                default:
                    x = rand_below(&st, INT64_C(1) << 50);
                    break;
                }
                v[j] = want[j] = x;
            }
            int64_t expect = median_by_sort(want, n);
            for (int isa = SF__ISA_GENERIC; isa < SF__ISA_COUNT; isa++) {
                const sf__vec *form = sf__vec_form((enum sf__isa)isa);
                if (form == NULL)
                    continue;                   /* this CPU lacks the form */
                memcpy(want, v, n * sizeof *v); /* every form gets the same input */
                int64_t got = sf__median_wide(form, want, n, tmp);
                if (got != expect)
                    fail_msg("isa %d n %zu shape %d: %lld, want %lld", isa, n, shape,
                             (long long)got, (long long)expect);
                forms_run |= 1u << isa;
            }
            if (sf__median_wide(sf__vec_chosen(), v, n, tmp) != expect)
                fail_msg("best form, n %zu shape %d", n, shape);
        }
    /* The generic form runs everywhere; AVX2 wherever the CPU has it. */
    assert_true(forms_run & 1u << SF__ISA_GENERIC);
    assert_true(!sf__vec_form(SF__ISA_AVX2) || forms_run & 1u << SF__ISA_AVX2);
    free(v);
    free(want);
    free(tmp);
}

/* The cohort clipping (exposure.c) in every vector form this CPU has, for
 * every stage count a form takes, against its definition: each
 * candidate's end frontier with its member stages clipped to the baseline,
 * over rows of ties, spread values and the bounds. */
static void clipping_matches_the_definition(void **state)
{
    (void)state;
    unsigned forms_run = 0;
    for (uint64_t seed = 1; seed <= 48; seed++) {
        uint64_t st = seed;
        uint32_t S = 1 + (uint32_t)(seed % 8), n = 1 + (uint32_t)rand_below(&st, 40);
        struct matrix m = matrix_new(1, n, S);
        fill(&m, &st, (int)(seed % 3));
        sf_schema schema;
        if (seed % 2 == 0 && S >= 3)
            synchronizing_schema(&schema, S);
        else
            numbered_schema(&schema, S);
        sf_window_meta meta = meta_for(n);
        sf_summary *s = NULL;
        assert_int_equal(sf_summary_alloc(&schema, &meta, 0, &s), 0);
        int64_t baseline[SF_MAX_STAGES], want[2 * SF_MAX_STAGES], got[2 * SF_MAX_STAGES];
        for (uint32_t k = 0; k < S; k++)
            baseline[k] = m.d[rand_below(&st, (uint64_t)n * S)];
        for (uint32_t c = 0; c < s->cand.n; c++)
            want[c] = INT64_MIN;
        for (uint32_t r = 0; r < n; r++) {
            const int64_t *d = &m.d[(size_t)r * S];
            int64_t p = 0;
            for (uint32_t k = 0; k < S; k++)
                p += d[k];
            for (uint32_t c = 0; c < s->cand.n; c++) {
                int64_t cut = 0;
                for (uint32_t k = 0; k < S; k++)
                    if (s->cand.member_mask[c] >> k & 1 && d[k] > baseline[k])
                        cut += d[k] - baseline[k];
                want[c] = p - cut > want[c] ? p - cut : want[c];
            }
        }
        for (int isa = SF__ISA_AVX2; isa < SF__ISA_COUNT; isa++) {
            const sf__vec *form = sf__vec_form((enum sf__isa)isa);
            if (form == NULL || !sf__vec_folds(form, S))
                continue; /* this CPU lacks the form */
            for (uint32_t c = 0; c < s->cand.n; c++)
                got[c] = INT64_MIN;
            form->clip_rows(s, m.d, n, baseline, got);
            for (uint32_t c = 0; c < s->cand.n; c++)
                if (got[c] != want[c])
                    fail_msg("isa %d S %u candidate %u: %lld, want %lld", isa, S, c,
                             (long long)got[c], (long long)want[c]);
            forms_run |= 1u << isa;
        }
        sf_summary_free(s);
        sf_schema_clear(&schema);
        matrix_free(&m);
    }
    assert_true(!sf__vec_form(SF__ISA_AVX2) || forms_run & 1u << SF__ISA_AVX2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fast_fold_matches_the_definitions),
        cmocka_unit_test(median_network_matches_a_sort),
        cmocka_unit_test(network_passes_sort),
        cmocka_unit_test(network_passes_refuse_what_they_lack),
        cmocka_unit_test(wide_median_matches_a_sort),
        cmocka_unit_test(clipping_matches_the_definition),
        cmocka_unit_test(mean_slack_matches_the_definition),
        cmocka_unit_test(cohort_gains_match_the_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests of sfd's history store without the daemon: the report codec
 * round trip (the same JSON and text bytes), corrupt and truncated bodies,
 * the max_history_mb bound (oldest rows evicted, pages in use and the file
 * stay under it), an oversized record, the bounded startup read, and the
 * rows codec: a window's rows round trip, damaged bodies give no row.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "history.h"
#include "history_codec.h"
#include "report_json.h"
#include "report_text.h"
#include "rows_codec.h"
#include <stagefrontier/change.h>

/* A real report of a 3-rank window of 8 steps with a slow rank. */
static sf_report *make_report(int64_t index)
{
    sf_schema schema;
    sf_gates gates;
    sf_gates_default(&gates);
    gates.warmup_steps = 0;
    gates.window_steps = 8;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    uint32_t S = schema.n_stages, world = 3, steps = 8;
    sf_window_meta meta = {.index = index, .segment = 1, .world_size = world};
    sf_window_range(index, 0, 8, &meta.first_step, &meta.last_step);
    sf_row *rows = calloc(world * steps, sizeof(*rows));
    int64_t *d = calloc((size_t)world * steps * S, sizeof(*d));
    assert_non_null(rows);
    assert_non_null(d);
    for (uint32_t i = 0; i < world * steps; i++) {
        int64_t *di = d + (size_t)i * S;
        for (uint32_t k = 0; k < S; k++)
            di[k] = 1000000 + 1000 * k + (i % world == 2 && k == 2 ? 3000000 : 0);
        rows[i] = (sf_row){.step = meta.first_step + i / world,
                           .rank = i % world,
                           .d = di,
                           .role = i % world ? "worker" : "chief"};
    }
    sf_report *r = NULL;
    assert_int_equal(sf_report_from_rows(&schema, &meta, rows, world * steps, &gates, &r), 0);
    free(rows);
    free(d);
    sf_schema_clear(&schema);
    return r;
}

static char *render(const sf_report *r)
{
    json_t *o = NULL, *a = json_array();
    assert_int_equal(sf_report_to_json(r, &o), 0);
    json_array_append_new(a, o);
    char *js = sf_report_array_dumps(a);
    json_decref(a);
    char *text = NULL, *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(sf_report_write_text(r, f) < 0, 0);
    fclose(f);
    assert_true(asprintf(&out, "%s\n--\n%s", js, text) > 0);
    free(js);
    free(text);
    return out;
}

/* Packs and unpacks r; the copy must render the same JSON and text bytes. */
static sf_report *round_trip(const sf_report *r)
{
    sf_report *back = NULL;
    uint8_t *buf;
    size_t len;
    assert_int_equal(sfd_report_pack(r, &buf, &len), 0);
    assert_int_equal(sfd_report_unpack(buf, len, &back), 0);
    char *a = render(r), *b = render(back);
    assert_string_equal(a, b);
    free(a);
    free(b);
    free(buf);
    return back;
}

static void round_trip_renders_the_same_bytes(void **state)
{
    (void)state;
    sf_report *r = make_report(5), *back = round_trip(r);
    assert_int_equal(back->meta.index, 5);
    assert_int_equal(back->n_rank_evidence, r->n_rank_evidence);
    assert_true(back->n_rank_evidence > 0);
    sf_report_free(back);
    sf_report_free(r);
}

/* Arrival points survive the store: a split backward whose rank 2 arrives
 * 3 ms late, one unmarked row, a verdict made fixed by two windows. */
static void round_trip_keeps_arrival_points(void **state)
{
    (void)state;
    sf_schema schema;
    sf_gates gates;
    sf_gates_default(&gates);
    assert_int_equal(
        sf_schema_init_sync(&schema, 1, 6, sf_default_stage_names, NULL, 1, UINT64_C(1) << 2), 0);
    uint32_t S = schema.n_stages, world = 3, steps = 8;
    int64_t d[24][7];
    sf_row rows[24];
    sf_straggler_history h = {0};
    sf_report *r = NULL, *back = NULL;
    for (int64_t index = 0; index < 2; index++) {
        sf_window_meta meta = {.index = index, .segment = 1, .world_size = world};
        sf_window_range(index, 0, 8, &meta.first_step, &meta.last_step);
        for (uint32_t i = 0; i < world * steps; i++) {
            for (uint32_t k = 0; k < S; k++)
                d[i][k] = 1000000;
            d[i][2] += i % world == 2 ? 3000000 : 0;
            d[i][3] = i % world == 2 ? 0 : 3000000; /* everyone leaves backward together */
            rows[i] = (sf_row){.step = meta.first_step + i / world,
                               .rank = i % world,
                               .d = d[i],
                               .flags = i == 1 ? SF_ROW_ARRIVAL_MISSING : 0};
        }
        sf_report_free(r);
        r = NULL;
        assert_int_equal(sf_report_from_rows(&schema, &meta, rows, world * steps, &gates, &r), 0);
        sf_straggler_track(&h, r);
    }
    assert_true(r->straggler.present);
    assert_int_equal(r->straggler.rank, 2);
    assert_int_equal(r->straggler.persistence, SF_PERSIST_FIXED);
    assert_int_equal(r->arrival_missing_steps, 1);
    assert_non_null(r->critical_path.chain);
    back = round_trip(r);
    assert_int_equal(back->schema.sync_mask, UINT64_C(1) << 2);
    sf_report_free(back);
    sf_report_free(r);
    sf_schema_clear(&schema);
}

/* A 3-rank window of 8 steps, rank 2 slow_ns slower in stage 2: its summary. */
static sf_summary *slow_summary(const sf_schema *schema, int64_t slow_ns)
{
    uint32_t S = schema->n_stages;
    sf_window_meta meta = {.index = 7, .segment = 1, .world_size = 3};
    sf_window_range(7, 0, 8, &meta.first_step, &meta.last_step);
    sf_row rows[24];
    int64_t d[24 * SF_MAX_STAGES];
    for (uint32_t i = 0; i < 24; i++) {
        for (uint32_t k = 0; k < S; k++)
            d[i * S + k] =
                1000000 + 1000 * k + 37 * (i / 3 % 3) + (i % 3 == 2 && k == 2 ? slow_ns : 0);
        rows[i] = (sf_row){.step = meta.first_step + i / 3, .rank = i % 3, .d = &d[i * S]};
    }
    sf_summary *s = NULL;
    assert_int_equal(sf_summary_build(schema, &meta, rows, 24, true, &s), 0);
    return s;
}

/* A report as an older codec stored it: the same bytes less what came
 * after it at the end. Before ST10 (the communication verdict: 76 bytes),
 * before STR9 (the stall, here absent: 4 bytes), before
 * STR8 (the share shifts' sizes), and also before STR7 (pooling, the
 * measured windows). */
static sf_report *from_older_codec(const sf_report *r, char version)
{
    sf_report *back = NULL;
    uint8_t *buf;
    size_t len, sizes = 8 * (size_t)r->change->n_stages;
    for (uint32_t k = 0; k < r->change->n_stages; k++)
        sizes += 8 * (size_t)r->change->stages[k].floor_tested;
    /* ST13's sync groups (a word each) and wait rule (three words), ST12's
     * cohorts and pipeline view (three words without a view), ST11's change
     * communication test (six words and a shift), ST10's verdict, then the
     * older parts. */
    size_t later = 4 * (size_t)__builtin_popcountll(r->schema.sync_mask) + 4 * 3 + 4 * 3 + 4 * 6 +
                   32 + 76 + (version < '9' ? 4 : 0) + (version < '8' ? sizes : 0) +
                   (version < '7' ? 4 + 8 * (size_t)r->change->n_measured : 0);
    assert_false(r->stall.present);
    assert_false(r->pipeline.present);
    assert_int_equal(sfd_report_pack(r, &buf, &len), 0);
    assert_memory_equal(buf, "ST13", 4);
    buf[2] = 'R';
    buf[3] = (uint8_t)version;
    assert_int_equal(sfd_report_unpack(buf, len, &back), -EINVAL); /* trailing bytes */
    assert_int_equal(sfd_report_unpack(buf, len - later, &back), 0);
    free(buf);
    return back;
}

/* The change of rank 2's slower stage 2 against the clean window, with
 * `floors` sync floor tests, packed and unpacked: every field back as it was. */
static void change_round_trip(const sf_schema *schema, uint32_t floors)
{
    sf_gates gates;
    sf_gates_default(&gates);
    sf_summary *clean = slow_summary(schema, 0), *slow = slow_summary(schema, 3000000);
    sf_reference *ref = NULL;
    sf_report *r = NULL;
    assert_int_equal(sf_reference_build((const sf_summary *const *)&clean, 1, &ref), 0);
    assert_int_equal(sf_report_compute(slow, &gates, &r), 0);
    assert_int_equal(sf_report_attach_change(r, slow, NULL, ref), 0);
    assert_true(r->change->n_route > 0 && r->whatif->n_ranks > 0);
    uint32_t tested = 0;
    for (uint32_t k = 0; k < r->change->n_stages; k++)
        tested += r->change->stages[k].floor_tested;
    assert_int_equal(tested, floors);
    r->change->n_measured = 3; /* as if pooled with the two windows before */
    r->change->measured_windows[0] = r->meta.index - 2;
    r->change->measured_windows[1] = r->meta.index - 1;
    r->change->measured_windows[2] = r->meta.index;
    sf_report *back = round_trip(r);
    assert_non_null(back->change);
    assert_memory_equal(back->change, r->change, sizeof *r->change);
    sf_report_free(back);
    back = from_older_codec(r, '9');
    assert_memory_equal(back->change, r->change, sizeof *r->change);
    assert_false(back->straggler.communication || back->comm.present);
    sf_report_free(back);
    back = from_older_codec(r, '8');
    assert_memory_equal(back->change, r->change, sizeof *r->change);
    sf_report_free(back);
    back = from_older_codec(r, '7');
    assert_int_equal(back->change->n_measured, 3);
    for (uint32_t k = 0; k < r->change->n_stages; k++) {
        assert_true(r->change->stages[k].share_delay_ns != SF_NULL_NS);
        assert_int_equal(back->change->stages[k].share_delay_ns, SF_NULL_NS);
        assert_int_equal(back->change->stages[k].floor_share_delay_ns, SF_NULL_NS);
    }
    sf_report_free(back);
    back = from_older_codec(r, '6');
    assert_int_equal(back->change->n_measured, 1);
    assert_int_equal(back->change->measured_windows[0], r->meta.index);
    assert_non_null(back->whatif);
    assert_memory_equal(back->whatif, r->whatif, sizeof *r->whatif);
    sf_report_free(back);
    /* A tested communication change (ST11) comes back as it was. */
    r->change->comm = (sf_comm_change){.tested = true,
                                       .sync_stage = 2,
                                       .shift = {2000000, 1500000, 2500000, 0.001},
                                       .rank = 1,
                                       .led_steps = 7,
                                       .eligible_steps = 8,
                                       .significant = true};
    back = round_trip(r);
    assert_memory_equal(&back->change->comm, &r->change->comm, sizeof r->change->comm);
    sf_report_free(back);
    sf_report_free(r);
    sf_reference_free(ref);
    sf_summary_free(clean);
    sf_summary_free(slow);
}

/* A stall (STR9) comes back as it was, and renders the same lines; one
 * naming a rank beyond the world or a share above 1 is refused. */
static void round_trip_keeps_the_stall(void **state)
{
    (void)state;
    sf_schema schema;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    sf_gates gates;
    sf_gates_default(&gates);
    sf_summary *s = slow_summary(&schema, 0);
    sf_report *r = NULL;
    assert_int_equal(sf_report_compute(s, &gates, &r), 0);
    r->stall = (sf_stall){.present = true,
                          .step = r->first_step + 1,
                          .stage = 1,
                          .group = r->schema.group_of[1],
                          .rank = 2,
                          .excess_ns = 12000000000,
                          .share = 0.95};
    sf_report *back = round_trip(r);
    assert_true(back->stall.present && back->stall.step == r->stall.step &&
                back->stall.stage == 1 && back->stall.group == r->stall.group &&
                back->stall.rank == 2 && back->stall.excess_ns == r->stall.excess_ns &&
                back->stall.share == r->stall.share);
    sf_report_free(back);
    uint8_t *buf;
    size_t len;
    for (int bad = 0; bad < 2; bad++) {
        sf_stall keep = r->stall;
        if (bad == 0)
            r->stall.rank = r->meta.world_size;
        else
            r->stall.share = 1.5;
        assert_int_equal(sfd_report_pack(r, &buf, &len), 0);
        assert_int_equal(sfd_report_unpack(buf, len, &back), -EINVAL);
        free(buf);
        r->stall = keep;
    }
    sf_report_free(r);
    sf_summary_free(s);
    sf_schema_clear(&schema);
}

/* The cohorts and the pipeline view (ST12) come back as they were and render
 * the same bytes: 2 pipeline stages x 2 replicas, rank 1 (stage 0) slow in
 * backward; a view naming a rank beyond the world, or one on a report
 * whose cohorts do not apply, is refused. */
static void round_trip_keeps_the_pipeline_view(void **state)
{
    (void)state;
    static const char *const rec[] = {"data", "forward", "backward", "other"};
    static const char *const layout[4] = {"pp=0/2,dp=0/2", "pp=0/2,dp=1/2", "pp=1/2,dp=0/2",
                                          "pp=1/2,dp=1/2"};
    sf_schema schema;
    assert_int_equal(sf_schema_init_sync(&schema, 1, 4, rec, NULL, 1, 1u << 2), 0);
    sf_gates gates;
    sf_gates_default(&gates);
    sf_parallel par[4];
    int64_t d[20 * 4 * 5];
    sf_row rows[20 * 4];
    for (uint32_t r = 0; r < 4; r++)
        assert_int_equal(sf_parallel_parse(layout[r], &par[r], NULL, 0), 0);
    for (uint32_t t = 0; t < 20; t++) {
        for (uint32_t r = 0; r < 4; r++) {
            int64_t *x = &d[(t * 4 + r) * 5];
            x[0] = 10000000 + 1000 * ((t * 7 + r * 3) % 11);
            x[1] = (50 + 20 * (r / 2)) * 1000000 + 1000 * ((t * 5 + r) % 13);
            x[2] = (r == 1 ? 110 : 80) * 1000000 + 1000 * ((t * 3 + r * 7) % 17);
            x[4] = 5000000;
        }
        for (uint32_t r = 0; r < 4; r += 2) {
            int64_t *a = &d[(t * 4 + r) * 5], *b = a + 5;
            int64_t pa = a[0] + a[1] + a[2], pb = b[0] + b[1] + b[2], top = pa > pb ? pa : pb;
            a[3] = top - pa;
            b[3] = top - pb;
        }
        for (uint32_t r = 0; r < 4; r++)
            rows[t * 4 + r] =
                (sf_row){.step = t, .rank = r, .d = &d[(t * 4 + r) * 5], .parallel = &par[r]};
    }
    sf_window_meta meta = {.index = 0, .first_step = 0, .last_step = 19, .world_size = 4};
    sf_report *r = NULL;
    assert_int_equal(sf_report_from_rows(&schema, &meta, rows, 80, &gates, &r), 0);
    assert_true(r->pipeline.present && r->pipeline.origin);
    sf_report *back = round_trip(r);
    assert_int_equal(back->cohorts, SF_COHORTS_APPLIED);
    assert_int_equal(back->n_cohorts, 2);
    assert_true(back->pipeline.present);
    assert_int_equal(back->pipeline.origin_rank, 1);
    assert_memory_equal(back->pipeline.stages, r->pipeline.stages, 2 * sizeof *r->pipeline.stages);
    assert_memory_equal(back->pipeline.step_delay, r->pipeline.step_delay,
                        (size_t)r->steps * 2 * sizeof *r->pipeline.step_delay);
    sf_report_free(back);
    uint8_t *buf;
    size_t len;
    for (int bad = 0; bad < 2; bad++) {
        sf_pipeline_view keep = r->pipeline;
        enum sf_cohort_state cohorts = r->cohorts;
        if (bad == 0)
            r->pipeline.origin_rank = 4;
        else
            r->cohorts = SF_COHORTS_NONE;
        assert_int_equal(sfd_report_pack(r, &buf, &len), 0);
        assert_int_equal(sfd_report_unpack(buf, len, &back), -EINVAL);
        free(buf);
        r->pipeline = keep;
        r->cohorts = cohorts;
    }
    sf_report_free(r);
    sf_schema_clear(&schema);
}

/* The sync groups and the wait rule (ST13) come back as they were and render
 * the same bytes: 2 pipeline stages x 2 replicas whose stage 1 waits for
 * stage 0's activations at a pp sync point, rank 1 (stage 0) 10 ms slow: the
 * wait rule names it, its victim rank 3. A report as ST12 stored it reads
 * back with every stage spanning the world; a wait rule outside tp and pp,
 * or a victim beyond the world, is refused. */
static void round_trip_keeps_the_wait_rule(void **state)
{
    (void)state;
    static const char *const rec[] = {"data", "forward", "backward", "other"};
    static const char *const layout[4] = {"pp=0/2,dp=0/2", "pp=0/2,dp=1/2", "pp=1/2,dp=0/2",
                                          "pp=1/2,dp=1/2"};
    static const uint8_t groups[2] = {SF_SYNC_PP, SF_SYNC_DP};
    const int64_t ms = 1000000;
    sf_schema schema;
    assert_int_equal(sf_schema_init_sync(&schema, 1, 4, rec, NULL, 1, 3u << 1), 0);
    assert_int_equal(sf_schema_set_sync_groups(&schema, groups, 2), 0);
    sf_gates gates;
    sf_gates_default(&gates);
    sf_parallel par[4];
    int64_t d[40 * 4 * 6], w[40 * 4 * 4];
    sf_row rows[40 * 4];
    for (uint32_t r = 0; r < 4; r++)
        assert_int_equal(sf_parallel_parse(layout[r], &par[r], NULL, 0), 0);
    for (uint32_t t = 0; t < 40; t++) {
        int64_t end[4], top = 0;
        for (uint32_t dp = 0; dp < 2; dp++) {
            int64_t *a = &d[(t * 4 + dp) * 6], *b = &d[(t * 4 + 2 + dp) * 6];
            int64_t *wa = &w[(t * 4 + dp) * 4], *wb = &w[(t * 4 + 2 + dp) * 4];
            a[0] = b[0] = 5 * ms + 1000 * ((t * 7 + dp * 3) % 11);
            a[1] = 20 * ms + 1000 * ((t * 5 + dp) % 13) + (dp == 1 ? 10 * ms : 0);
            a[2] = 0;
            end[dp] = a[0] + a[1];
            wa[0] = 0, wa[2] = 1;
            int64_t enter = b[0] + ms, exit = end[dp] > enter ? end[dp] : enter;
            b[1] = ms;
            b[2] = exit - enter + 20 * ms + 1000 * ((t * 3 + dp) % 17);
            end[2 + dp] = enter + b[2];
            wb[0] = exit - enter, wb[2] = 1;
        }
        for (uint32_t r = 0; r < 4; r++) {
            int64_t *x = &d[(t * 4 + r) * 6];
            x[3] = 30 * ms + 1000 * ((t * 11 + r * 5) % 19);
            top = end[r] + x[3] > top ? end[r] + x[3] : top;
        }
        for (uint32_t r = 0; r < 4; r++) {
            int64_t *x = &d[(t * 4 + r) * 6], *y = &w[(t * 4 + r) * 4];
            x[4] = top - end[r] - x[3];
            x[5] = 5 * ms;
            y[1] = x[4], y[3] = 1;
            rows[t * 4 + r] =
                (sf_row){.step = t, .rank = r, .d = x, .sync_wait = y, .parallel = &par[r]};
        }
    }
    sf_window_meta meta = {.index = 0, .first_step = 0, .last_step = 39, .world_size = 4};
    sf_report *r = NULL;
    assert_int_equal(sf_report_from_rows(&schema, &meta, rows, 160, &gates, &r), 0);
    assert_true(r->straggler.present && r->straggler.wait_rule);
    assert_int_equal(r->straggler.rank, 1);
    assert_int_equal(r->straggler.victim_rank, 3);
    sf_report *back = round_trip(r);
    assert_true(back->straggler.wait_rule);
    assert_int_equal(back->straggler.group, SF_SYNC_PP);
    assert_int_equal(back->straggler.victim_rank, 3);
    assert_memory_equal(back->schema.sync_group, r->schema.sync_group, sizeof r->schema.sync_group);
    sf_report_free(back);
    uint8_t *buf;
    size_t len;
    assert_int_equal(sfd_report_pack(r, &buf, &len), 0);
    buf[3] = '2'; /* "ST12": without the last two sync groups and three words */
    assert_int_equal(sfd_report_unpack(buf, len - 4 * 5, &back), 0);
    assert_false(back->straggler.wait_rule);
    assert_int_equal(back->schema.sync_group[1], SF_SYNC_WORLD);
    sf_report_free(back);
    free(buf);
    for (int bad = 0; bad < 3; bad++) {
        sf_straggler keep = r->straggler;
        if (bad == 0)
            r->straggler.group = SF_SYNC_DP;
        else if (bad == 1)
            r->straggler.victim_rank = 4;
        else
            r->straggler.group = SF_SYNC_GROUP_MAX + 1;
        assert_int_equal(sfd_report_pack(r, &buf, &len), 0);
        assert_int_equal(sfd_report_unpack(buf, len, &back), -EINVAL);
        free(buf);
        r->straggler = keep;
    }
    sf_report_free(r);
    sf_schema_clear(&schema);
}

/* Without sync points, and with one (stage 2 becomes "s2" and
 * "s2.sync_wait", which gets a sync floor test). */
static void round_trip_keeps_the_change(void **state)
{
    (void)state;
    sf_schema schema;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    change_round_trip(&schema, 0);
    sf_schema_clear(&schema);
    const char *names[] = {"s0", "s1", "s2", "s3"};
    assert_int_equal(sf_schema_init_sync(&schema, 1, 4, names, NULL, 1, UINT64_C(1) << 2), 0);
    change_round_trip(&schema, 1);
    sf_schema_clear(&schema);
}

static void corrupt_bodies_are_refused(void **state)
{
    (void)state;
    sf_report *r = make_report(0), *back = NULL;
    uint8_t *buf;
    size_t len;
    assert_int_equal(sfd_report_pack(r, &buf, &len), 0);
    for (size_t n = 0; n < len; n++) /* every truncation */
        assert_int_equal(sfd_report_unpack(buf, n, &back), -EINVAL);
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    assert_int_equal(sfd_report_unpack(longer, len + 1, &back), -EINVAL); /* trailing byte */
    buf[0] ^= 0xff;                                                       /* wrong magic */
    assert_int_equal(sfd_report_unpack(buf, len, &back), -EINVAL);
    free(longer);
    free(buf);
    sf_report_free(r);
}

/* ---- the rows codec ---------------------------------------------------------- */

/* Four rows of two ranks over a schema whose backward synchronizes, so the
 * rows carry issue lags (one row without any), sync waits (row 2 none, row
 * 3 none marked, which reads back as none), roles and event figures. */
struct rows_fixture {
    sf_schema schema;
    int64_t d[4][SF_MAX_STAGES], lag[4][1], wait[4][2];
    sf_parallel par[2]; /* pp=r/2: rank 1's rows carry them, rank 0's none */
    sf_row rows[4];
};

static void rows_fixture(struct rows_fixture *f)
{
    static const char *const names[] = {"data", "forward", "backward", "optimizer", "residual"};
    assert_int_equal(sf_schema_init_sync(&f->schema, 1, 5, names, NULL, 1, 1u << 2), 0);
    for (uint32_t r = 0; r < 2; r++)
        f->par[r] = (sf_parallel){.declared = 1u << SF_PAR_PP,
                                  .index = {[SF_PAR_PP] = r},
                                  .size = {2, 1, 1, 1, 1},
                                  .schedule = SF_SCHEDULE_1F1B};
    for (uint32_t i = 0; i < 4; i++) {
        for (uint32_t k = 0; k < f->schema.n_stages; k++)
            f->d[i][k] = 1000 * (k + 1) + i;
        f->lag[i][0] = i == 3 ? -1 : 10 * (int64_t)i;
        f->wait[i][0] = i == 3 ? -1 : 100 + (int64_t)i; /* within backward and its sync wait */
        f->wait[i][1] = i == 3 ? 0 : 1 + (int64_t)i;
        f->rows[i] = (sf_row){.step = 40 + i / 2,
                              .rank = i % 2,
                              .flags = i == 1 ? SF_ROW_NON_MONOTONIC : 0,
                              .overlap_ns = i,
                              .d = f->d[i],
                              .issue_lag = i == 2 ? NULL : f->lag[i],
                              .sync_wait = i == 2 ? NULL : f->wait[i],
                              .role = i % 2 ? "worker" : "chief",
                              .parallel = i % 2 ? &f->par[1] : NULL,
                              .event_state = i == 0 ? SF_EVENT_READY : SF_EVENT_NONE,
                              .event_cpu_ns = i == 0 ? 700 : 0,
                              .event_gpu_ns = i == 0 ? 650 : 0};
    }
}

struct rows_seen {
    const struct rows_fixture *f;
    bool v1; /* read from SFW1 bytes: no sync waits */
    uint32_t n;
    sf_rows_header header;
};

static int check_row(void *ctx, const sf_rows_header *header, const sf_row *row)
{
    struct rows_seen *seen = ctx;
    const sf_row *want = &seen->f->rows[seen->n++];
    seen->header = *header;
    assert_int_equal(row->step, want->step);
    assert_int_equal(row->rank, want->rank);
    assert_int_equal(row->flags, want->flags);
    assert_int_equal(row->overlap_ns, want->overlap_ns);
    assert_string_equal(row->role, want->role);
    assert_int_equal(row->event_state, want->event_state);
    assert_int_equal(row->event_cpu_ns, want->event_cpu_ns);
    assert_int_equal(row->event_gpu_ns, want->event_gpu_ns);
    assert_memory_equal(row->d, want->d, seen->f->schema.n_stages * sizeof(int64_t));
    assert_true((row->parallel == NULL) == (want->parallel == NULL));
    if (want->parallel != NULL)
        assert_memory_equal(row->parallel, want->parallel, sizeof(sf_parallel));
    assert_true((row->issue_lag == NULL) == (want->issue_lag == NULL));
    if (want->issue_lag != NULL)
        assert_int_equal(row->issue_lag[0], want->issue_lag[0]);
    bool marked = want->sync_wait != NULL && want->sync_wait[0] >= 0 && !seen->v1;
    assert_true((row->sync_wait != NULL) == marked);
    if (marked)
        assert_memory_equal(row->sync_wait, want->sync_wait, 2 * sizeof(int64_t));
    return 0;
}

static void rows_round_trip(void **state)
{
    (void)state;
    struct rows_fixture f;
    rows_fixture(&f);
    uint8_t *buf;
    size_t len;
    assert_int_equal(sf_rows_pack(&f.schema, 2, 3, 7, f.rows, 4, &buf, &len), 0);
    struct rows_seen seen = {.f = &f};
    assert_int_equal(sf_rows_unpack(buf, len, &f.schema, 2, check_row, &seen), 0);
    assert_int_equal(seen.n, 4);
    assert_int_equal(seen.header.segment, 3);
    assert_int_equal(seen.header.index, 7);
    assert_int_equal(seen.header.n_rows, 4);
    free(buf);
    sf_schema_clear(&f.schema);
}

static int count_row(void *ctx, const sf_rows_header *header, const sf_row *row)
{
    (void)header;
    (void)row;
    (*(uint32_t *)ctx)++;
    return 0;
}

/* The fixture's rows as SFW1 stored them: the same bytes less each row's
 * wait flag (52 bytes into the row) and waits (at its end). */
static size_t rows_as_v1(const struct rows_fixture *f, const uint8_t *buf, size_t len, uint8_t *out)
{
    size_t row_len[4], rows = 0;
    for (int i = 0; i < 4; i++) {
        const sf_row *r = &f->rows[i];
        bool waits = r->sync_wait != NULL && r->sync_wait[0] >= 0;
        row_len[i] = 56 + (r->parallel ? 52 : 4) + 8 * (size_t)f->schema.n_stages +
                     (r->issue_lag ? 8 : 0) + (waits ? 16 : 0);
        rows += row_len[i];
    }
    size_t head = len - rows, n = head, at = head;
    memcpy(out, buf, head);
    memcpy(out, "FSW1", 4); /* "SFW1", little-endian */
    for (int i = 0; i < 4; i++) {
        bool waits = f->rows[i].sync_wait != NULL && f->rows[i].sync_wait[0] >= 0;
        size_t keep = row_len[i] - 4 - (waits ? 16 : 0);
        memcpy(out + n, buf + at, 52);
        memcpy(out + n + 52, buf + at + 56, keep - 52);
        n += keep;
        at += row_len[i];
    }
    return n;
}

/* Rows stored by SFW1, before sync waits, still read, without any; a wait
 * beyond its stage refuses the body. */
static void rows_before_waits_read(void **state)
{
    (void)state;
    struct rows_fixture f;
    rows_fixture(&f);
    uint8_t *buf;
    size_t len;
    assert_int_equal(sf_rows_pack(&f.schema, 2, 3, 7, f.rows, 4, &buf, &len), 0);
    assert_memory_equal(buf, "FSW2", 4);
    uint8_t *v1 = malloc(len);
    size_t v1_len = rows_as_v1(&f, buf, len, v1);
    struct rows_seen seen = {.f = &f, .v1 = true};
    assert_int_equal(sf_rows_unpack(v1, v1_len, &f.schema, 2, check_row, &seen), 0);
    assert_int_equal(seen.n, 4);
    /* and SFW2 bytes called SFW1 do not read */
    memcpy(buf, v1, 4);
    assert_int_equal(sf_rows_unpack(buf, len, &f.schema, 2, count_row, &seen.n), -EINVAL);
    free(v1);
    free(buf);
    f.wait[1][0] = f.d[1][2] + f.d[1][3] + 1;
    assert_int_equal(sf_rows_pack(&f.schema, 2, 3, 7, f.rows, 4, &buf, &len), 0);
    seen.n = 0;
    assert_int_equal(sf_rows_unpack(buf, len, &f.schema, 2, count_row, &seen.n), -EINVAL);
    assert_int_equal(seen.n, 0);
    free(buf);
    sf_schema_clear(&f.schema);
}

/* Truncated, extended, foreign (another schema or world size) or damaged
 * bodies are refused before any row is given out. */
static void damaged_rows_give_no_row(void **state)
{
    (void)state;
    struct rows_fixture f;
    rows_fixture(&f);
    uint8_t *buf;
    size_t len;
    uint32_t visited = 0;
    assert_int_equal(sf_rows_pack(&f.schema, 2, 0, 1, f.rows, 4, &buf, &len), 0);
    for (size_t n = 0; n < len; n++)
        assert_int_equal(sf_rows_unpack(buf, n, &f.schema, 2, count_row, &visited), -EINVAL);
    uint8_t *longer = calloc(1, len + 1);
    memcpy(longer, buf, len);
    assert_int_equal(sf_rows_unpack(longer, len + 1, &f.schema, 2, count_row, &visited), -EINVAL);
    assert_int_equal(sf_rows_unpack(buf, len, &f.schema, 1, count_row, &visited), -EINVAL);
    sf_schema other;
    assert_int_equal(sf_schema_init_default(&other, 1), 0);
    assert_int_equal(sf_rows_unpack(buf, len, &other, 2, count_row, &visited), -EINVAL);
    /* The last row's first duration made negative: the row check refuses the
     * whole body, though the rows before it decode. */
    size_t last_d = len - (size_t)(f.schema.n_stages + 1) * 8;
    buf[last_d + 7] = 0x80;
    assert_int_equal(sf_rows_unpack(buf, len, &f.schema, 2, count_row, &visited), -EINVAL);
    assert_int_equal(visited, 0);
    /* Coordinates that do not fit the world (index 5 of 2) refuse the body. */
    f.par[1].index[SF_PAR_PP] = 5;
    uint8_t *bad;
    size_t bad_len;
    assert_int_equal(sf_rows_pack(&f.schema, 2, 0, 1, f.rows, 4, &bad, &bad_len), 0);
    assert_int_equal(sf_rows_unpack(bad, bad_len, &f.schema, 2, count_row, &visited), -EINVAL);
    assert_int_equal(visited, 0);
    free(bad);
    free(longer);
    free(buf);
    sf_schema_clear(&other);
    sf_schema_clear(&f.schema);
}

struct tmp {
    char dir[64], path[128];
};

static void tmp_store(struct tmp *t)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/sfd-history-unit-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof t->path, "%s/%s", t->dir, SFD_HISTORY_FILE);
}

static void tmp_remove(struct tmp *t)
{
    char p[160];
    static const char *const suffix[] = {"", "-wal", "-shm", ".reserve", ".link"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s%s", t->path, suffix[i]);
        unlink(p);
    }
    rmdir(t->dir);
}

static int put_one(struct sfd_store *s, const char *job, int64_t window, size_t size,
                   uint64_t *evicted)
{
    uint8_t *body = malloc(size);
    for (size_t i = 0; i < size; i++)
        body[i] = (uint8_t)(i * 131 + (size_t)window);
    struct sfd_store_key k = {SFD_HISTORY_REPORT, 1000, job, 0, window};
    const uint8_t *bodies[1] = {body};
    int r = sfd_store_put(s, &k, bodies, &size, 1, evicted);
    free(body);
    return r;
}

struct seen {
    int64_t windows[64];
    char jobs[64][16];
    size_t n;
};

static int collect(void *ctx, const struct sfd_store_key *key, const uint8_t *body, size_t len)
{
    struct seen *s = ctx;
    (void)body;
    (void)len;
    if (s->n < 64) {
        snprintf(s->jobs[s->n], sizeof s->jobs[0], "%s", key->job);
        s->windows[s->n++] = key->window;
    }
    return 0;
}

/* 600 records of 4 KiB into a 512 KiB store: the oldest go, the newest stay,
 * and neither the pages in use nor the file ever pass the bound by more than
 * the pages of one transaction. */
static void the_bound_evicts_the_oldest(void **state)
{
    (void)state;
    const uint64_t max = 512u << 10;
    struct tmp t;
    struct sfd_store *s;
    const char *err;
    uint64_t evicted = 0, used, count;
    tmp_store(&t);
    assert_int_equal(sfd_store_open(t.path, max, &s, &err), 0);
    for (int64_t w = 0; w < 600; w++) {
        assert_int_equal(put_one(s, "bound", w, 4096, &evicted), 1);
        assert_int_equal(sfd_store_used_bytes(s, &used), 0);
        assert_true(used <= max);
    }
    assert_true(evicted > 400);
    assert_int_equal(sfd_store_count(s, &count), 0);
    assert_int_equal(count + evicted, 600);
    struct seen seen = {.n = 0};
    assert_int_equal(sfd_store_recent(s, SFD_HISTORY_REPORT, 4, 3, collect, &seen), 0);
    assert_int_equal(seen.n, 3);
    assert_int_equal(seen.windows[0], 599);
    assert_int_equal(seen.windows[2], 597);
    sfd_store_close(s);
    struct stat st;
    assert_int_equal(stat(t.path, &st), 0);
    assert_true((uint64_t)st.st_size <= max + (64u << 10));
    tmp_remove(&t);
}

static void an_oversized_record_is_refused(void **state)
{
    (void)state;
    struct tmp t;
    struct sfd_store *s;
    const char *err;
    uint64_t evicted = 0, count;
    tmp_store(&t);
    assert_int_equal(sfd_store_open(t.path, 64u << 10, &s, &err), 0);
    assert_int_equal(put_one(s, "small", 0, 1000, &evicted), 1);
    assert_int_equal(put_one(s, "huge", 1, 128u << 10, &evicted), -EFBIG);
    assert_int_equal(sfd_store_count(s, &count), 0);
    assert_int_equal(count, 1); /* the failed batch left nothing, took nothing */
    sfd_store_close(s);
    tmp_remove(&t);
}

/* Jobs come most recently written first, each with its newest records. */
static void the_startup_read_is_bounded(void **state)
{
    (void)state;
    struct tmp t;
    struct sfd_store *s;
    const char *err;
    uint64_t evicted = 0;
    tmp_store(&t);
    assert_int_equal(sfd_store_open(t.path, 16u << 20, &s, &err), 0);
    const char *jobs[] = {"a", "b", "c"};
    for (int64_t w = 0; w < 10; w++)
        for (int j = 0; j < 3; j++)
            assert_int_equal(put_one(s, jobs[j], w, 100, &evicted), 1);
    assert_int_equal(put_one(s, "a", 3, 100, &evicted), 1); /* rewrite: "a" is newest */
    struct seen seen = {.n = 0};
    assert_int_equal(sfd_store_recent(s, SFD_HISTORY_REPORT, 2, 4, collect, &seen), 0);
    assert_int_equal(seen.n, 8);
    assert_string_equal(seen.jobs[0], "a");
    assert_int_equal(seen.windows[0], 9);
    assert_string_equal(seen.jobs[4], "c");
    assert_int_equal(seen.windows[7], 6);
    assert_int_equal(evicted, 0);
    sfd_store_close(s);
    /* Reopening finds the same rows. */
    assert_int_equal(sfd_store_open(t.path, 16u << 20, &s, &err), 0);
    uint64_t count;
    assert_int_equal(sfd_store_count(s, &count), 0);
    assert_int_equal(count, 30);
    sfd_store_close(s);
    tmp_remove(&t);
}

static void write_bytes(const char *path, off_t at, int byte, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    uint8_t buf[4096];
    memset(buf, byte, sizeof buf);
    for (size_t done = 0; done < n; done += sizeof buf)
        assert_int_equal(pwrite(fd, buf, sizeof buf, at + (off_t)done), (ssize_t)sizeof buf);
    close(fd);
}

/* A store of 30 records of 2 KiB, closed (its WAL folded into the file). */
static void filled_store(struct tmp *t)
{
    struct sfd_store *s;
    const char *err;
    uint64_t evicted = 0;
    tmp_store(t);
    assert_int_equal(sfd_store_open(t->path, 16u << 20, &s, &err), 0);
    for (int64_t w = 0; w < 30; w++)
        assert_int_equal(put_one(s, "f", w, 2048, &evicted), 1);
    sfd_store_close(s);
}

static void garbage_and_damaged_pages_fail_the_check(void **state)
{
    (void)state;
    struct tmp t;
    struct sfd_store *s = NULL;
    const char *err;
    tmp_store(&t);
    write_bytes(t.path, 0, 'g', 8192); /* garbage from byte 0 */
    assert_int_equal(sfd_store_open(t.path, 16u << 20, &s, &err), -EUCLEAN);
    assert_null(s);
    tmp_remove(&t);

    filled_store(&t);
    write_bytes(t.path, 2 * 4096, 0xa5, 4 * 4096); /* pages 3 to 6 */
    assert_int_equal(sfd_store_open(t.path, 16u << 20, &s, &err), -EUCLEAN);
    assert_string_equal(err, "fails SQLite's quick_check");
    assert_int_equal(sfd_store_open_at(AT_FDCWD, t.path, 16u << 20, SFD_STORE_READONLY, &s, &err),
                     -EUCLEAN);
    tmp_remove(&t);
}

static void a_symbolic_link_is_refused(void **state)
{
    (void)state;
    struct tmp t;
    struct sfd_store *s = NULL;
    const char *err;
    char target[200];
    filled_store(&t);
    snprintf(target, sizeof target, "%s.link", t.path);
    assert_int_equal(rename(t.path, target), 0);
    assert_int_equal(symlink(target, t.path), 0);
    assert_int_equal(sfd_store_open(t.path, 16u << 20, &s, &err), -ELOOP);
    assert_string_equal(err, "is a symbolic link, refused");
    assert_null(s);
    /* The WAL beside it is opened by SQLite by path: a link there too. */
    char wal[200];
    assert_int_equal(unlink(t.path), 0);
    assert_int_equal(rename(target, t.path), 0);
    snprintf(wal, sizeof wal, "%s-wal", t.path);
    assert_int_equal(symlink(target, wal), 0);
    assert_int_equal(sfd_store_open(t.path, 16u << 20, &s, &err), -ELOOP);
    assert_string_equal(err, "its -wal is not a regular file, refused");
    assert_null(s);
    unlink(wal);
    tmp_remove(&t);
}

static void read_only_reads_and_room_is_made(void **state)
{
    (void)state;
    struct tmp t;
    struct sfd_store *s;
    const char *err;
    uint64_t evicted = 0, count;
    char reserve[200];
    struct stat st;
    filled_store(&t);
    assert_int_equal(sfd_store_open_at(AT_FDCWD, t.path, 16u << 20, SFD_STORE_READONLY, &s, &err),
                     0);
    struct seen seen = {.n = 0};
    assert_int_equal(sfd_store_recent(s, SFD_HISTORY_REPORT, 4, 8, collect, &seen), 0);
    assert_int_equal(seen.n, 8);
    assert_true(put_one(s, "ro", 0, 100, &evicted) < 0); /* a read-only handle never writes */
    sfd_store_close(s);

    assert_int_equal(sfd_store_open(t.path, 16u << 20, &s, &err), 0);
    snprintf(reserve, sizeof reserve, "%s.reserve", t.path);
    assert_int_equal(stat(reserve, &st), 0);
    assert_true(st.st_blocks * 512 >= (1 << 20)); /* min(16 MiB / 4, 1 MiB) */
    assert_int_equal(sfd_store_make_room(s, 5, &evicted), 0);
    assert_int_equal(evicted, 30);            /* max(5, 32) asked, 30 there */
    assert_int_equal(stat(reserve, &st), -1); /* given back */
    assert_int_equal(sfd_store_count(s, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(sfd_store_make_room(s, 5, &evicted), -ENOSPC); /* nothing left to evict */
    assert_int_equal(sfd_store_keep_reserve(s), 0);
    assert_int_equal(stat(reserve, &st), 0);
    sfd_store_close(s);
    tmp_remove(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_renders_the_same_bytes),
        cmocka_unit_test(round_trip_keeps_arrival_points),
        cmocka_unit_test(round_trip_keeps_the_change),
        cmocka_unit_test(round_trip_keeps_the_stall),
        cmocka_unit_test(round_trip_keeps_the_pipeline_view),
        cmocka_unit_test(round_trip_keeps_the_wait_rule),
        cmocka_unit_test(corrupt_bodies_are_refused),
        cmocka_unit_test(rows_round_trip),
        cmocka_unit_test(rows_before_waits_read),
        cmocka_unit_test(damaged_rows_give_no_row),
        cmocka_unit_test(the_bound_evicts_the_oldest),
        cmocka_unit_test(an_oversized_record_is_refused),
        cmocka_unit_test(the_startup_read_is_bounded),
        cmocka_unit_test(garbage_and_damaged_pages_fail_the_check),
        cmocka_unit_test(a_symbolic_link_is_refused),
        cmocka_unit_test(read_only_reads_and_room_is_made),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

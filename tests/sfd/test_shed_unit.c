/*
 * Shedding before decoding (daemon/sfd/shed.c) without sockets: the wire
 * peek against protobuf-c's own encoding and malformed frames; a batch all
 * for closed windows refused unread as late records; a batch met once a
 * turn of the loop has taken its fill dropped unread, counted and noted in
 * its windows; a batch that can be neither is only counted, its records
 * unread.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frames.h"
#include "loop_fixture.h"
#include "sfd.h"

static void peek_reads_what_the_decoder_reads(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 2, 64, 1024};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len;
        uint8_t *buf = batch_frame(sizes[i], 300 + (int64_t)i, &len);
        struct sfd_batch_peek pk;
        assert_int_equal(sfd_batch_peek(buf, len, &pk), 0);
        assert_int_equal(pk.n_records, sizes[i]);
        assert_int_equal(pk.first_step, 300 + (int64_t)i);
        assert_int_equal(pk.last_step, 300 + (int64_t)i + (int64_t)sizes[i] - 1);
        for (size_t cut = 0; cut < len; cut++) /* every truncation is refused */
            if (cut != 0)
                assert_int_equal(sfd_batch_peek(buf, cut, &pk), -EINVAL);
        free(buf);
    }
    /* The drop report is read as well, range and all. */
    size_t len;
    struct frame_drops drops = {.total = 9, .first_step = 40, .last_step = 48};
    uint8_t *buf = batch_frame_dropping(2, 50, &drops, &len);
    struct sfd_batch_peek pk;
    assert_int_equal(sfd_batch_peek(buf, len, &pk), 0);
    assert_true(pk.drops.has_total && pk.drops.has_first && pk.drops.has_last);
    assert_int_equal(pk.drops.total, 9);
    assert_int_equal(pk.drops.first_step, 40);
    assert_int_equal(pk.drops.last_step, 48);
    free(buf);
    buf = batch_frame(2, 50, &len);
    assert_int_equal(sfd_batch_peek(buf, len, &pk), 0);
    assert_false(pk.drops.has_total || pk.drops.has_first || pk.drops.has_last);
    free(buf);
    /* Not a batch: a hello, an empty frame, a group key, a bare key. */
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    Stagefrontier__Hello h = STAGEFRONTIER__HELLO__INIT;
    h.job_id = "j";
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO;
    m.hello = &h;
    uint8_t hello[256];
    size_t n = stagefrontier__client_message__pack(&m, hello);
    assert_int_equal(sfd_batch_peek(hello, n, &pk), -EINVAL);
    assert_int_equal(sfd_batch_peek(hello, 0, &pk), -EINVAL);
    static const uint8_t group[] = {0x13, 0x14}, bare[] = {0x12};
    assert_int_equal(sfd_batch_peek(group, sizeof(group), &pk), -EINVAL);
    assert_int_equal(sfd_batch_peek(bare, sizeof(bare), &pk), -EINVAL);
}

struct fx {
    struct sfd d;
    uv_loop_t loop;
    struct sfd_job *job;
    struct sfd_conn conn[2];
};

static int setup(void **state)
{
    static struct fx fx;
    memset(fx.conn, 0, sizeof(fx.conn));
    loop_fixture_open(&fx.d, &fx.loop);
    sfd_ingest_init(&fx.d);
    fx.d.cfg.window_grace_ms = 100;
    fx.job = loop_fixture_job(&fx.d, "shed");
    for (uint32_t r = 0; r < 2; r++) /* as if both ranks had said hello */
        fx.conn[r] =
            (struct sfd_conn){.sfd = &fx.d, .job = fx.job, .rank = r, .hello = true, .pid = -1};
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    loop_fixture_close(&fx->d);
    sfd_ingest_free(&fx->d);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    return 0;
}

static void add(struct fx *fx, uint32_t rank, int64_t first, int64_t last)
{
    int64_t d[6] = {1000, 2000, 3000, 400, 500, 60};
    enum sfd_reject why;
    for (int64_t s = first; s <= last; s++) {
        sf_row row = {.step = s, .d = d};
        assert_int_equal(sfd_window_add(fx->job, rank, &row, &why), 0);
    }
}

/* Window 0 closed at its deadline without rank 1's steps 2 and 3: when they
 * come, they are refused as late without being decoded. */
static void late_batches_are_refused_unread(void **state)
{
    struct fx *fx = *state;
    add(fx, 0, 0, 4);
    add(fx, 1, 0, 1);
    sfd_windows_tick(&fx->d, fx->job->open[0]->deadline_ms + 1000);
    assert_int_equal(fx->job->closed_max, 0);
    uv_update_time(&fx->loop); /* the loop is not behind */
    size_t len;
    uint8_t *buf = batch_frame(2, 2, &len);
    struct sfd_batch_peek pk;
    assert_int_equal(sfd_shed_check(&fx->conn[1], buf, len, &pk), SFD_SHED_LATE);
    uint64_t late = fx->d.ctr.rejected[SFD_REJ_LATE], batches = fx->d.ctr.batches;
    assert_int_equal(sfd_ingest_handle(&fx->conn[1], buf, len), 0);
    assert_int_equal(fx->d.ctr.rejected[SFD_REJ_LATE], late + 2);
    assert_int_equal(fx->d.ctr.batches, batches); /* never decoded */
    assert_int_equal(fx->job->rejected, 2);
    free(buf);
    /* Steps 2..5 reach into window 1, still open: decoded as usual. */
    buf = batch_frame(4, 2, &len);
    assert_int_equal(sfd_shed_check(&fx->conn[1], buf, len, &pk), SFD_SHED_NONE);
    free(buf);
    /* Rank 0 has sent step 4 already: a resend is a duplicate, for the decoder. */
    buf = batch_frame(2, 2, &len);
    assert_int_equal(sfd_shed_check(&fx->conn[0], buf, len, &pk), SFD_SHED_NONE);
    free(buf);
}

/* A new turn of the loop: its clock moves (polled, bounded). */
static void next_turn(struct fx *fx)
{
    uint64_t turn = uv_now(&fx->loop), give_up = uv_hrtime() + UINT64_C(5000000000);
    while (uv_now(&fx->loop) == turn && uv_hrtime() < give_up)
        uv_update_time(&fx->loop);
    assert_true(uv_now(&fx->loop) != turn);
}

/* Once SFD_SHED_FULL_TURNS turns in a row have each taken
 * SFD_SHED_TURN_RECORDS records, the next full turn's further batches are
 * dropped unread: counted as shed, daemon-wide and for the job, and noted
 * as dropped in the windows of their steps. The next turn takes batches
 * again. */
static void batches_are_shed_while_the_loop_is_behind(void **state)
{
    struct fx *fx = *state;
    size_t big_len, len;
    uint8_t *big = batch_frame(1024, 100, &big_len), *buf = batch_frame(3, 5, &len);
    struct sfd_batch_peek pk;
    /* SFD_SHED_FULL_TURNS full turns in a row shed nothing yet */
    for (int turn = 0; turn <= SFD_SHED_FULL_TURNS; turn++) {
        next_turn(fx);
        for (int i = 0; i < SFD_SHED_TURN_RECORDS / 1024; i++)
            assert_int_equal(sfd_shed_check(&fx->conn[0], big, big_len, &pk), SFD_SHED_NONE);
        if (turn < SFD_SHED_FULL_TURNS) /* a moment's backlog: taken */
            assert_int_equal(sfd_shed_check(&fx->conn[0], big, big_len, &pk), SFD_SHED_NONE);
    }
    assert_int_equal(sfd_shed_check(&fx->conn[0], buf, len, &pk), SFD_SHED_BEHIND);
    assert_int_equal(sfd_ingest_handle(&fx->conn[0], buf, len), 0);
    assert_int_equal(fx->d.ctr.shed_batches, 1);
    assert_int_equal(fx->d.ctr.shed_records, 3);
    assert_int_equal(fx->job->shed_records, 3);
    assert_int_equal(fx->d.ctr.records, 0);
    assert_int_equal(fx->d.ctr.batches, 0);
    assert_int_equal(fx->job->n_open, 1); /* window 1 (steps 4..7) holds the note */
    assert_int_equal(fx->job->open[0]->meta.index, 1);
    assert_int_equal(fx->job->open[0]->meta.dropped_records, 3);
    /* a frame that is not a batch is never shed: the decoder judges it */
    static const uint8_t junk[] = {0x12, 0x05, 0x01};
    assert_int_equal(sfd_shed_check(&fx->conn[0], junk, sizeof(junk), &pk), SFD_SHED_NONE);
    /* the next turn takes batches again until it has taken its fill */
    next_turn(fx);
    assert_int_equal(sfd_shed_check(&fx->conn[0], buf, len, &pk), SFD_SHED_NONE);
    free(big);
    free(buf);
}

/* A batch dropped unread still reports the client's drops: a late batch
 * and a shed one each add what their drop total adds, in the windows of the
 * steps they name; a total below what the client already said is ignored. */
static void shed_batches_keep_their_drop_reports(void **state)
{
    struct fx *fx = *state;
    add(fx, 0, 0, 4);
    add(fx, 1, 0, 1);
    sfd_windows_tick(&fx->d, fx->job->open[0]->deadline_ms + 1000);
    uv_update_time(&fx->loop);
    size_t len;
    struct frame_drops drops = {.total = 2, .first_step = 2, .last_step = 3};
    uint8_t *buf = batch_frame_dropping(2, 2, &drops, &len);
    assert_int_equal(sfd_ingest_handle(&fx->conn[1], buf, len), 0);
    assert_int_equal(fx->d.ctr.batches, 0); /* refused unread as late */
    assert_int_equal(fx->job->rejected, 2);
    assert_int_equal(fx->d.ctr.dropped, 2);
    assert_int_equal(fx->job->dropped, 2);
    free(buf);
    drops = (struct frame_drops){.total = 1}; /* lower than said: ignored */
    buf = batch_frame_dropping(2, 2, &drops, &len);
    assert_int_equal(sfd_ingest_handle(&fx->conn[1], buf, len), 0);
    assert_int_equal(fx->job->rejected, 4);
    assert_int_equal(fx->job->dropped, 2);
    free(buf);
    /* The loop is behind: rank 0's batch for window 1 is shed, and its
     * report of 5 drops at steps 5..6 lands in window 1 (steps 4..7) with the
     * 3 shed. */
    size_t big_len;
    uint8_t *big = batch_frame(1024, 100, &big_len);
    struct sfd_batch_peek pk;
    for (int turn = 0; turn <= SFD_SHED_FULL_TURNS; turn++) {
        next_turn(fx);
        for (int i = 0; i <= SFD_SHED_TURN_RECORDS / 1024; i++)
            sfd_shed_check(&fx->conn[0], big, big_len, &pk);
    }
    drops = (struct frame_drops){.total = 5, .first_step = 5, .last_step = 6};
    buf = batch_frame_dropping(3, 5, &drops, &len);
    assert_int_equal(sfd_shed_check(&fx->conn[0], buf, len, &pk), SFD_SHED_BEHIND);
    assert_int_equal(sfd_ingest_handle(&fx->conn[0], buf, len), 0);
    assert_int_equal(fx->d.ctr.shed_records, 3);
    assert_int_equal(fx->d.ctr.dropped, 7);
    assert_int_equal(fx->job->dropped, 7);
    assert_int_equal(fx->job->open[0]->meta.index, 1);
    assert_int_equal(fx->job->open[0]->meta.dropped_records, 3 + 5);
    free(buf);
    free(big);
}

/* A rank whose last steps were all dropped reports them with its last
 * delivered batch, far past its own highest step; the bound follows the
 * job's highest step, which its peer has shown, so every drop counts. */
static void tail_drops_count_up_to_the_jobs_highest_step(void **state)
{
    struct fx *fx = *state;
    add(fx, 1, 0, 30); /* the peer has shown step 30 */
    fx->conn[0].schema_hash = 0x1234;
    uv_update_time(&fx->loop);
    size_t len;
    struct frame_drops drops = {.total = 20, .first_step = 2, .last_step = 21};
    uint8_t *buf = batch_frame_dropping(2, 0, &drops, &len);
    assert_int_equal(sfd_ingest_handle(&fx->conn[0], buf, len), 0);
    assert_int_equal(fx->d.ctr.batches, 1);
    assert_int_equal(fx->job->dropped, 20);
    free(buf);
    /* Past the job's highest step and its window of horizon, still bounded:
     * steps 0..34 at most, 2 delivered, 20 counted already. */
    drops = (struct frame_drops){.total = 1000, .first_step = 22, .last_step = 1000};
    buf = batch_frame_dropping(1, 2, &drops, &len);
    assert_int_equal(sfd_ingest_handle(&fx->conn[0], buf, len), 0);
    assert_int_equal(fx->job->dropped, 30 + 4 + 1 - 3);
    free(buf);
}

/* The rule reads inside a batch's records only when it needs their steps:
 * a rank whose next step is in a window still open can send nothing late,
 * so its batches are counted for the turn from their record keys alone
 * (one whose records hold no step is counted and left to the decoder); a
 * rank whose next step is in a closed window has its steps read. */
static void a_rank_that_keeps_up_is_counted_from_its_record_keys(void **state)
{
    struct fx *fx = *state;
    add(fx, 0, 0, 4);
    add(fx, 1, 0, 1);
    sfd_windows_tick(&fx->d, fx->job->open[0]->deadline_ms + 1000);
    assert_int_equal(fx->job->closed_max, 0);
    next_turn(fx);
    size_t len;
    uint8_t *buf = batch_frame(3, 5, &len);
    struct sfd_batch_peek pk;
    assert_int_equal(sfd_shed_check(&fx->conn[0], buf, len, &pk), SFD_SHED_NONE);
    assert_int_equal(fx->d.turn_records, 3);
    free(buf);
    /* a record with no step: counted, never peeked, left to the decoder */
    static const uint8_t stepless[] = {0x12, 0x04, 0x0a, 0x02, 0x10, 0x01};
    assert_int_equal(sfd_batch_peek(stepless, sizeof(stepless), &pk), -EINVAL);
    assert_int_equal(sfd_shed_check(&fx->conn[0], stepless, sizeof(stepless), &pk), SFD_SHED_NONE);
    assert_int_equal(fx->d.turn_records, 4);
    /* rank 1's next step (2) is in closed window 0: its steps are read, and
     * a batch reaching into window 1 is taken and counted */
    buf = batch_frame(4, 2, &len);
    assert_int_equal(sfd_shed_check(&fx->conn[1], buf, len, &pk), SFD_SHED_NONE);
    assert_int_equal(fx->d.turn_records, 8);
    free(buf);
    /* ... while one that is all late is refused and not counted */
    buf = batch_frame(2, 2, &len);
    assert_int_equal(sfd_shed_check(&fx->conn[1], buf, len, &pk), SFD_SHED_LATE);
    assert_int_equal(pk.n_records, 2);
    assert_int_equal(fx->d.turn_records, 8);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(peek_reads_what_the_decoder_reads),
        cmocka_unit_test_setup_teardown(late_batches_are_refused_unread, setup, teardown),
        cmocka_unit_test_setup_teardown(batches_are_shed_while_the_loop_is_behind, setup, teardown),
        cmocka_unit_test_setup_teardown(shed_batches_keep_their_drop_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(tail_drops_count_up_to_the_jobs_highest_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_rank_that_keeps_up_is_counted_from_its_record_keys, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

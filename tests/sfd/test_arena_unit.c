/*
 * The decode arena (daemon/sfd/arena.c) under the decoder sfd uses: client
 * messages decoded in one reused arena equal the same messages decoded with
 * malloc; a message larger than the buffer spills and grows it; under
 * AddressSanitizer a reset leaves the old fields poisoned.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frames.h"
#include "ingest.pb-c.h"
#include "sfd.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifdef ASAN
#include <sanitizer/asan_interface.h>
#endif

static void assert_same_batch(const Stagefrontier__RecordBatch *a,
                              const Stagefrontier__RecordBatch *b)
{
    assert_int_equal(a->n_records, b->n_records);
    assert_int_equal(a->schema_hash, b->schema_hash);
    for (size_t i = 0; i < a->n_records; i++) {
        const Stagefrontier__StepRecord *x = a->records[i], *y = b->records[i];
        assert_int_equal(x->step, y->step);
        assert_int_equal(x->has_overlap_ns, y->has_overlap_ns);
        assert_int_equal(x->overlap_ns, y->overlap_ns);
        assert_int_equal(x->n_durations_ns, y->n_durations_ns);
        assert_memory_equal(x->durations_ns, y->durations_ns, x->n_durations_ns * sizeof(int64_t));
    }
}

static const struct sfd_limits lim = {.max_ranks = SF_MAX_RANKS, .frame_max_bytes = 1u << 20};

/* Batches of many sizes, one after another in the same arena, decode as
 * they do with malloc; once the buffer has grown to the largest, no
 * message spills again. */
static void arena_messages_equal_malloc_ones(void **state)
{
    (void)state;
    struct sfd_arena a;
    sfd_arena_init(&a);
    static const size_t sizes[] = {1, 64, 7, 1024, 3, 512, 1024, 64, 1};
    uint64_t grown = 0;
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            size_t len;
            uint8_t *buf = batch_frame(sizes[i], (int64_t)(i * 5000), &len);
            Stagefrontier__ClientMessage *in_arena, *in_heap;
            enum sfd_reject why;
            assert_int_equal(sfd_message_decode(buf, len, &lim, &a.pb, &in_arena, &why), 0);
            assert_int_equal(sfd_message_decode(buf, len, &lim, NULL, &in_heap, &why), 0);
            assert_int_equal(in_arena->body_case, STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH);
            assert_same_batch(in_arena->batch, in_heap->batch);
            sfd_message_free(in_arena, &a.pb);
            sfd_message_free(in_heap, NULL);
            sfd_arena_reset(&a);
            free(buf);
            if (round == 1) /* the first round grew the buffer to the largest */
                assert_int_equal(a.spills, grown);
        }
        grown = a.spills;
        assert_true(grown >= 1 && grown <= 3); /* at 1, 64 and 1024 records at most */
    }
    assert_true(a.cap > 0 && a.cap <= SFD_ARENA_KEEP_MAX);
    sfd_arena_free(&a);
}

/* A message that fails to decode leaves nothing behind after the reset. */
static void undecodable_frames_reset_cleanly(void **state)
{
    (void)state;
    struct sfd_arena a;
    sfd_arena_init(&a);
    size_t len;
    uint8_t *buf = batch_frame(300, 0, &len);
    Stagefrontier__ClientMessage *m;
    enum sfd_reject why;
    for (size_t cut = 1; cut < len; cut += len / 7) { /* truncated frames */
        int r = sfd_message_decode(buf, cut, &lim, &a.pb, &m, &why);
        if (r == 0)
            sfd_message_free(m, &a.pb);
        else
            assert_int_equal(why, SFD_REJ_UNDECODABLE);
        sfd_arena_reset(&a);
        assert_int_equal(a.used, 0);
        assert_null(a.spill);
    }
    free(buf);
    sfd_arena_free(&a);
}

/* Under ASan the fields of a message are poisoned once the arena is reset:
 * a handler that kept a pointer into the last message would be caught. */
static void reset_poisons_the_old_message(void **state)
{
    (void)state;
#ifdef ASAN
    struct sfd_arena a;
    sfd_arena_init(&a);
    size_t len;
    uint8_t *buf = batch_frame(16, 0, &len);
    Stagefrontier__ClientMessage *m;
    enum sfd_reject why;
    for (int i = 0; i < 2; i++) { /* the second decode fits without spilling */
        assert_int_equal(sfd_message_decode(buf, len, &lim, &a.pb, &m, &why), 0);
        if (i == 0) {
            sfd_message_free(m, &a.pb);
            sfd_arena_reset(&a);
        }
    }
    const int64_t *field = m->batch->records[3]->durations_ns;
    assert_false(__asan_address_is_poisoned(field));
    assert_int_equal(field[2], 2003);
    sfd_message_free(m, &a.pb);
    sfd_arena_reset(&a);
    assert_true(__asan_address_is_poisoned(field));
    assert_true(__asan_address_is_poisoned(m));
    free(buf);
    sfd_arena_free(&a);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(arena_messages_equal_malloc_ones),
        cmocka_unit_test(undecodable_frames_reset_cleanly),
        cmocka_unit_test(reset_poisons_the_old_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

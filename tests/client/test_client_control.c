/*
 * Unit tests of the client's decoder of sfd's capture requests
 * (client/lib/control.c, docs/CLIENT.md "Captures"): the fields reach
 * sf_capture_request, communication among them (absent on an ordinary
 * capture, as from an sfd older than the field), and a field out of its
 * bounds is refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client_internal.h"
#include "ingest.pb-c.h"

static uint8_t arena_buf[SF__CONTROL_ARENA];

/* Packs a ControlMessage with this request and decodes it as the client does. */
static int decode(const Stagefrontier__CaptureRequest *q, sf_capture_request *ret)
{
    Stagefrontier__ControlMessage m = STAGEFRONTIER__CONTROL_MESSAGE__INIT;
    m.body_case = STAGEFRONTIER__CONTROL_MESSAGE__BODY_CAPTURE;
    m.capture = (Stagefrontier__CaptureRequest *)q;
    uint8_t buf[64];
    assert_true(stagefrontier__control_message__get_packed_size(&m) <= sizeof buf);
    size_t len = stagefrontier__control_message__pack(&m, buf);
    struct sf__arena arena = {.base = arena_buf, .cap = sizeof arena_buf};
    return sf__control_decode(buf, len, &arena, ret);
}

static void test_communication(void **state)
{
    (void)state;
    Stagefrontier__CaptureRequest q = STAGEFRONTIER__CAPTURE_REQUEST__INIT;
    q.id = 41;
    q.steps = 5;
    sf_capture_request r;
    /* absent: an ordinary capture */
    assert_int_equal(decode(&q, &r), 0);
    assert_true(r.id == 41 && r.steps == 5 && r.kinds == 0 && r.first_step == -1 && r.step == -1 &&
                r.communication == 0);
    /* a communication verdict's capture */
    q.has_communication = true;
    q.communication = true;
    assert_int_equal(decode(&q, &r), 0);
    assert_true(r.id == 41 && r.steps == 5 && r.communication == 1);
    /* present and false */
    q.communication = false;
    assert_int_equal(decode(&q, &r), 0);
    assert_int_equal(r.communication, 0);
    /* with kinds */
    q.communication = true;
    q.has_kinds = true;
    q.kinds = SF_CAPTURE_KIND_CPU | SF_CAPTURE_KIND_CUDA;
    assert_int_equal(decode(&q, &r), 0);
    assert_true(r.kinds == (SF_CAPTURE_KIND_CPU | SF_CAPTURE_KIND_CUDA) && r.communication == 1);
}

static void test_bounds(void **state)
{
    (void)state;
    Stagefrontier__CaptureRequest q = STAGEFRONTIER__CAPTURE_REQUEST__INIT;
    q.id = 41;
    q.steps = 5;
    q.has_communication = true;
    q.communication = true;
    sf_capture_request r;
    q.steps = SF_CAPTURE_MAX_STEPS + 1;
    assert_int_equal(decode(&q, &r), -ERANGE);
    q.steps = 5;
    q.id = 0;
    assert_int_equal(decode(&q, &r), -ERANGE);
    q.id = 41;
    q.has_kinds = true;
    q.kinds = 4; /* an unknown kind bit: refused, unlike the communication field */
    assert_int_equal(decode(&q, &r), -ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_communication),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

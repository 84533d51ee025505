/*
 * Unit tests of text_escape.h: what passes, what becomes \xNN, and cutting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "text_escape.h"

static void expect_escaped(const char *in, size_t len, const char *want)
{
    char out[256];
    size_t need = sf_text_escape(in, len, out, sizeof out);
    assert_string_equal(out, want);
    assert_int_equal(need, strlen(want));
    assert_int_equal(sf_text_is_clean(in, len), strcmp(in, want) == 0 && strlen(in) == len);
}

static void test_plain_and_utf8_unchanged(void **state)
{
    (void)state;
    expect_escaped("/run/trace.json.gz", 18, "/run/trace.json.gz");
    expect_escaped("r\xc3\xa9sum\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 17,
                   "r\xc3\xa9sum\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    expect_escaped("a\\b", 3, "a\\b");
}

static void test_controls_escaped(void **state)
{
    (void)state;
    expect_escaped("\x1b[2J", 4, "\\x1b[2J");
    expect_escaped("a\nb\r\t\x7f", 6, "a\\x0ab\\x0d\\x09\\x7f");
    expect_escaped("x\0y", 3, "x\\x00y");
    expect_escaped("\xc2\x9b"
                   "31m",
                   5, "\\xc2\\x9b31m"); /* C1 CSI as UTF-8 */
}

static void test_invalid_utf8_escaped(void **state)
{
    (void)state;
    expect_escaped("\x9b", 1, "\\x9b");                   /* raw C1 / continuation */
    expect_escaped("\xc0\xaf", 2, "\\xc0\\xaf");          /* overlong '/' */
    expect_escaped("\xed\xa0\x80", 3, "\\xed\\xa0\\x80"); /* surrogate */
    expect_escaped("\xe2\x82", 2, "\\xe2\\x82");          /* cut character */
    expect_escaped("\xf5\x80\x80\x80", 4, "\\xf5\\x80\\x80\\x80");
}

static void test_cut_at_escape_boundary(void **state)
{
    (void)state;
    char out[6];
    assert_int_equal(sf_text_escape("ab\x1b"
                                    "cd",
                                    5, out, sizeof out),
                     8);
    assert_string_equal(out, "ab"); /* \x1b does not fit whole: nothing after it */
    char one[1];
    assert_int_equal(sf_text_escape("abc", 3, one, sizeof one), 3);
    assert_string_equal(one, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_utf8_unchanged),
        cmocka_unit_test(test_controls_escaped),
        cmocka_unit_test(test_invalid_utf8_escaped),
        cmocka_unit_test(test_cut_at_escape_boundary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

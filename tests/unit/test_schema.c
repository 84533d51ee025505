/*
 * Schemas: name rules, groups (explicit and @k microsteps), the hash that
 * clients compute independently, and argument checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "matrix.h"

/* An independent FNV-1a 64 of the documented byte layout. */
static uint64_t reference_hash(uint32_t version, uint32_t n, const char *const *names,
                               const char *const *groups)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    unsigned char v[4] = {version & 0xff, (version >> 8) & 0xff, (version >> 16) & 0xff,
                          version >> 24};
    for (int i = 0; i < 4; i++)
        h = (h ^ v[i]) * UINT64_C(0x100000001b3);
    for (uint32_t i = 0; i < n; i++)
        for (int part = 0; part < 2; part++) {
            const char *s = part ? groups[i] : names[i];
            for (size_t j = 0; j <= strlen(s); j++)
                h = (h ^ (unsigned char)s[j]) * UINT64_C(0x100000001b3);
        }
    return h;
}

static void default_schema(void **state)
{
    (void)state;
    sf_schema s;
    assert_int_equal(sf_schema_init_default(&s, 1), 0);
    assert_int_equal(s.n_stages, 6);
    assert_string_equal(s.names[5], "step.other_cpu_wall");
    assert_int_equal(s.n_groups, 6);
    assert_false(s.microstep_indexed);
    assert_true(s.hash == reference_hash(1, 6, sf_default_stage_names, sf_default_stage_names));
    assert_int_equal(sf_schema_stage_index(&s, "optim.step_cpu_wall"), 4);
    assert_int_equal(sf_schema_stage_index(&s, "nope"), -ENOENT);
    sf_schema copy;
    assert_int_equal(sf_schema_copy(&copy, &s), 0);
    assert_true(sf_schema_equal(&s, &copy));
    sf_schema_clear(&copy);
    sf_schema_clear(&s);
}

static void microsteps_group_by_parent(void **state)
{
    (void)state;
    sf_schema s;
    assert_int_equal(sf_schema_init_default(&s, 4), 0);
    assert_int_equal(s.n_stages, 15);
    assert_int_equal(s.accumulation, 4);
    assert_true(s.microstep_indexed);
    assert_string_equal(s.names[4], "model.fwd_loss_cpu_wall@1");
    assert_string_equal(s.groups[4], "model.fwd_loss_cpu_wall");
    assert_int_equal(s.group_of[4], s.group_of[1]);
    assert_int_equal(s.n_groups, 6);
    const char *groups[15];
    for (int i = 0; i < 15; i++)
        groups[i] = s.groups[i];
    assert_true(s.hash == reference_hash(1, 15, (const char *const *)s.names, groups));
    sf_schema_clear(&s);
}

static void explicit_groups(void **state)
{
    (void)state;
    const char *names[] = {"load", "decode", "fwd", "other"};
    const char *groups[] = {"data", "data", NULL, ""};
    sf_schema s;
    assert_int_equal(sf_schema_init(&s, 3, 4, names, groups, 1), 0);
    assert_int_equal(s.n_groups, 3);
    assert_string_equal(s.group_names[0], "data");
    assert_string_equal(s.groups[2], "fwd");
    assert_string_equal(s.groups[3], "other");
    const char *eff[] = {"data", "data", "fwd", "other"};
    assert_true(s.hash == reference_hash(3, 4, names, eff));
    sf_schema_clear(&s);
}

static void bad_names_are_rejected(void **state)
{
    (void)state;
    sf_schema s;
    const char *dup[] = {"a", "a"};
    const char *space[] = {"a b", "c"};
    const char *comma[] = {"a,b", "c"};
    const char *empty[] = {"", "c"};
    char long_name[SF_MAX_NAME_LEN + 2];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *too_long[] = {long_name, "c"};
    assert_int_equal(sf_schema_init(&s, 1, 2, dup, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(&s, 1, 2, space, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(&s, 1, 2, comma, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(&s, 1, 2, empty, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(&s, 1, 2, too_long, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(&s, 1, 0, dup, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(&s, 1, SF_MAX_STAGES + 1, dup, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(&s, 1, 2, NULL, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(NULL, 1, 2, space, NULL, 1), -EINVAL);
    assert_int_equal(sf_schema_init(&s, 1, 2, (const char *[]){"a", "b"}, NULL, 0), -EINVAL);
    assert_int_equal(sf_schema_init_default(&s, SF_MAX_ACCUMULATION + 1), -EINVAL);
    assert_int_equal(sf_schema_stage_index(NULL, "a"), -EINVAL);
}

static void window_index_arithmetic(void **state)
{
    (void)state;
    assert_int_equal(sf_window_index(19, 20, 100), -1);
    assert_int_equal(sf_window_index(20, 20, 100), 0);
    assert_int_equal(sf_window_index(119, 20, 100), 0);
    assert_int_equal(sf_window_index(120, 20, 100), 1);
    assert_int_equal(sf_window_index(5, 0, 0), -1);
    int64_t first, last;
    sf_window_range(3, 20, 100, &first, &last);
    assert_int_equal(first, 320);
    assert_int_equal(last, 419);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_schema),          cmocka_unit_test(microsteps_group_by_parent),
        cmocka_unit_test(explicit_groups),         cmocka_unit_test(bad_names_are_rejected),
        cmocka_unit_test(window_index_arithmetic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

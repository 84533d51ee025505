/*
 * Parallel coordinates: the SF_PARALLEL parser's strictness (gaps, duplicates,
 * out of range, malformed numbers and schedules), the per-rank check against
 * the world (sizes that do not tile), the canonical text and the cohort
 * relation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "stagefrontier/parallel.h"

static void parses_full_form(void **state)
{
    (void)state;
    sf_parallel p;
    char err[128];
    assert_int_equal(sf_parallel_parse("pp=1/4,tp=0/8,dp=3/16", &p, err, sizeof err), 0);
    assert_int_equal(p.declared, 1u << SF_PAR_PP | 1u << SF_PAR_TP | 1u << SF_PAR_DP);
    assert_int_equal(p.index[SF_PAR_PP], 1);
    assert_int_equal(p.size[SF_PAR_PP], 4);
    assert_int_equal(p.index[SF_PAR_TP], 0);
    assert_int_equal(p.size[SF_PAR_TP], 8);
    assert_int_equal(p.index[SF_PAR_DP], 3);
    assert_int_equal(p.size[SF_PAR_DP], 16);
    assert_int_equal(p.size[SF_PAR_CP], 1);
    assert_int_equal(p.size[SF_PAR_EP], 1);
    assert_int_equal(p.schedule, SF_SCHEDULE_NONE);
    assert_int_equal(sf_parallel_check(&p, 512, NULL), 0);

    assert_int_equal(sf_parallel_parse("dp=0/2,pp=1/2,schedule=interleaved:4", &p, err, sizeof err),
                     0);
    assert_int_equal(p.schedule, SF_SCHEDULE_INTERLEAVED);
    assert_int_equal(p.virtual_stages, 4);
    char text[SF_PARALLEL_TEXT_MAX + 1];
    int len = sf_parallel_format(&p, text, sizeof text);
    assert_int_equal(len, (int)strlen(text));
    assert_string_equal(text, "pp=1/2,dp=0/2,schedule=interleaved:4");
    sf_parallel back;
    assert_int_equal(sf_parallel_parse(text, &back, NULL, 0), 0);
    assert_true(sf_parallel_equal(&p, &back));

    assert_int_equal(sf_parallel_parse("pp=0/2,schedule=1f1b,ep=1/2,cp=0/1", &p, NULL, 0), 0);
    assert_int_equal(p.schedule, SF_SCHEDULE_1F1B);
    assert_int_equal(sf_parallel_parse("pp=0/2,schedule=gpipe", &p, NULL, 0), 0);
    assert_int_equal(p.schedule, SF_SCHEDULE_GPIPE);
}

/* Each malformed text is refused, says why, and leaves *ret alone. */
static void refuses_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",                                     /* empty */
        "pp=1/4,,tp=0/8",                       /* a gap between items */
        ",pp=1/4",                              /* leading gap */
        "pp=1/4,",                              /* trailing gap */
        "pp=1/4,pp=0/4",                        /* duplicate dimension */
        "pp=4/4",                               /* index out of range */
        "pp=5/4",                               /* index out of range */
        "pp=0/0",                               /* empty group */
        "pp=-1/4",                              /* a sign */
        "pp=+1/4",                              /* a sign */
        "pp=01/4",                              /* a leading zero */
        "pp=1/04",                              /* a leading zero */
        "pp=1",                                 /* no size */
        "pp=/4",                                /* no index */
        "pp=1/4x",                              /* trailing junk */
        "pp 1/4",                               /* no '=' */
        "xx=0/2",                               /* unknown dimension */
        "PP=0/2",                               /* case matters */
        "pp=0/2097153",                         /* size past 2^21 */
        "pp=0/2048,tp=0/2048",                  /* product past 2^21 */
        "schedule=1f1b",                        /* no dimension, schedule without pp */
        "dp=0/2,schedule=1f1b",                 /* schedule without pp */
        "pp=0/2,schedule=zb",                   /* unknown schedule */
        "pp=0/2,schedule=interleaved:1",        /* V below 2 */
        "pp=0/2,schedule=interleaved:65",       /* V past 64 */
        "pp=0/2,schedule=interleaved",          /* no V */
        "pp=0/2,schedule=gpipe,schedule=gpipe", /* schedule twice */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sf_parallel p = {.declared = 77};
        char err[128] = "";
        print_message("%s\n", bad[i]);
        assert_int_equal(sf_parallel_parse(bad[i], &p, err, sizeof err), -EINVAL);
        assert_true(err[0] != '\0');
        assert_int_equal(p.declared, 77);
    }
    char long_text[300];
    memset(long_text, 'a', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    sf_parallel p;
    assert_int_equal(sf_parallel_parse(long_text, &p, NULL, 0), -EINVAL);
    assert_int_equal(sf_parallel_parse(NULL, &p, NULL, 0), -EINVAL);
}

/* Sizes that do not multiply to the world, and hand-filled structs out of
 * range, fail the check with a reason. */
static void check_against_world(void **state)
{
    (void)state;
    sf_parallel p;
    const char *why = NULL;
    assert_int_equal(sf_parallel_parse("pp=1/2,dp=1/2", &p, NULL, 0), 0);
    assert_int_equal(sf_parallel_check(&p, 4, &why), 0);
    assert_null(why);
    assert_int_equal(sf_parallel_check(&p, 8, &why), -EINVAL);
    assert_non_null(strstr(why, "world size"));
    assert_int_equal(sf_parallel_check(&p, 3, &why), -EINVAL);

    sf_parallel bad = p;
    bad.index[SF_PAR_DP] = 2;
    assert_int_equal(sf_parallel_check(&bad, 4, &why), -EINVAL);
    assert_non_null(strstr(why, "index"));
    bad = p;
    bad.size[SF_PAR_TP] = 2; /* a size on an undeclared dimension */
    assert_int_equal(sf_parallel_check(&bad, 8, &why), -EINVAL);
    bad = p;
    bad.declared |= 1u << 7;
    assert_int_equal(sf_parallel_check(&bad, 4, &why), -EINVAL);
    bad = p;
    bad.schedule = SF_SCHEDULE_INTERLEAVED; /* without V */
    assert_int_equal(sf_parallel_check(&bad, 4, &why), -EINVAL);
    bad.virtual_stages = 2;
    assert_int_equal(sf_parallel_check(&bad, 4, &why), 0);
    bad.schedule = 9;
    assert_int_equal(sf_parallel_check(&bad, 4, &why), -EINVAL);
    sf_parallel none;
    sf_parallel_init(&none);
    assert_int_equal(sf_parallel_check(&none, 1, &why), -EINVAL);

    /* Sizes whose product passes 2^64 are refused, whatever it would wrap
     * to: the product is checked as it grows. */
    sf_parallel wrap;
    sf_parallel_init(&wrap);
    wrap.declared = (1u << SF_PAR_DIMS) - 1;
    for (int d = 0; d < SF_PAR_DIMS; d++)
        wrap.size[d] = 1u << 16; /* 2^80: wraps to 0 in 64 bits */
    assert_int_equal(sf_parallel_world(&wrap), 0);
    assert_int_equal(sf_parallel_check(&wrap, 0, &why), -EINVAL);
    /* sizes under 2^21 each whose product passes 2^64, against a world of 4 */
    wrap.size[0] = 641, wrap.size[1] = 957203, wrap.size[2] = 65537, wrap.size[3] = 65537,
    wrap.size[4] = 4;
    assert_int_equal(sf_parallel_check(&wrap, 4, &why), -EINVAL);
    assert_int_equal(sf_parallel_world(&p), 4);
}

/* Cohorts: ranks that differ only in dp or ep share one; pp, tp or cp (or a
 * different shape) part them. Tuples are unique over the whole world. */
static void cohort_relation(void **state)
{
    (void)state;
    sf_parallel a, b;
    assert_int_equal(sf_parallel_parse("pp=1/2,tp=0/2,dp=0/2,ep=0/2", &a, NULL, 0), 0);
    assert_int_equal(sf_parallel_parse("pp=1/2,tp=0/2,dp=1/2,ep=1/2", &b, NULL, 0), 0);
    assert_true(sf_parallel_same_shape(&a, &b));
    assert_true(sf_parallel_same_cohort(&a, &b));
    assert_false(sf_parallel_equal(&a, &b));
    assert_int_equal(sf_parallel_cohort(&a), sf_parallel_cohort(&b));
    assert_int_not_equal(sf_parallel_tuple(&a), sf_parallel_tuple(&b));
    assert_int_equal(sf_parallel_parse("pp=0/2,tp=0/2,dp=0/2,ep=0/2", &b, NULL, 0), 0);
    assert_false(sf_parallel_same_cohort(&a, &b));
    assert_int_equal(sf_parallel_parse("pp=1/2,tp=1/2,dp=0/2,ep=0/2", &b, NULL, 0), 0);
    assert_false(sf_parallel_same_cohort(&a, &b));
    assert_int_equal(sf_parallel_parse("pp=1/2,tp=0/2,dp=0/4", &b, NULL, 0), 0);
    assert_false(sf_parallel_same_cohort(&a, &b)); /* another shape */

    /* Every tuple of a 2 x 3 x 2 world is distinct and below the world. */
    uint8_t used[12] = {0};
    for (uint32_t pp = 0; pp < 2; pp++)
        for (uint32_t tp = 0; tp < 3; tp++)
            for (uint32_t dp = 0; dp < 2; dp++) {
                char text[64];
                snprintf(text, sizeof text, "pp=%u/2,tp=%u/3,dp=%u/2", pp, tp, dp);
                assert_int_equal(sf_parallel_parse(text, &a, NULL, 0), 0);
                uint64_t t = sf_parallel_tuple(&a);
                assert_true(t < 12);
                assert_int_equal(used[t]++, 0);
                assert_int_equal(sf_parallel_cohort(&a), pp * 3 + tp);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_full_form),
        cmocka_unit_test(refuses_malformed),
        cmocka_unit_test(check_against_world),
        cmocka_unit_test(cohort_relation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

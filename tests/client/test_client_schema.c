/*
 * The schema hash the client sends must equal the one sfd computes. Checked
 * against an independent reading of the definition here and, when the
 * accounting core is built, against sf_schema_init() itself.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <stagefrontier/client.h>
#include "client_internal.h"
#ifdef SF_HAVE_CORE
#include <stagefrontier/accounting.h>
#endif

/* The definition, read literally: FNV-1a 64 over version (4 bytes LE), then
 * name, 0, group, 0 for each stage. */
static uint64_t reference_hash(uint32_t version, uint32_t n, const char *const *names,
                               const char *const *groups)
{
    uint64_t h = 14695981039346656037ull;
    uint8_t v[4];
    for (int i = 0; i < 4; i++)
        v[i] = (uint8_t)(version >> (8 * i));
    for (int i = 0; i < 4; i++)
        h = (h ^ v[i]) * 1099511628211ull;
    for (uint32_t s = 0; s < n; s++) {
        for (const char *p = names[s];; p++) {
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
            if (*p == '\0')
                break;
        }
        for (const char *p = groups[s];; p++) {
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
            if (*p == '\0')
                break;
        }
    }
    return h;
}

static sf_client *open_schema(const char *const *names, const char *const *groups, uint32_t n,
                              uint32_t accumulation)
{
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "schema";
    o.socket_path = "/nonexistent-stagefrontier-test/ingest.sock";
    o.rank = 0, o.world_size = 1;
    o.stage_names = names;
    o.stage_groups = groups;
    o.n_stages = n;
    o.accumulation = accumulation;
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    return c;
}

static void default_schema(void **s)
{
    (void)s;
    static const char *const names[] = {"data.next_wait",          "model.fwd_loss_cpu_wall",
                                        "model.backward_cpu_wall", "callbacks.cpu_wall",
                                        "optim.step_cpu_wall",     "step.other_cpu_wall"};
    sf_client *c = open_schema(NULL, NULL, 0, 1);
    assert_int_equal(sf_client_schema_hash(c), reference_hash(1, 6, names, names));
    sf_client_close(c);
}

static void accumulation_schema(void **s)
{
    (void)s;
    const char *names[12], *groups[12];
    char buf[6][48];
    static const char *const base[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                       "model.backward_cpu_wall"};
    int n = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++) {
            snprintf(buf[n], sizeof buf[n], "%s@%d", base[i], k);
            names[n] = buf[n];
            groups[n] = base[i];
            n++;
        }
    static const char *const tail[] = {"callbacks.cpu_wall", "optim.step_cpu_wall",
                                       "step.other_cpu_wall"};
    for (int i = 0; i < 3; i++, n++)
        names[n] = groups[n] = tail[i];
    sf_client *c = open_schema(NULL, NULL, 0, 2);
    assert_int_equal(sf_stage_count(c), n);
    for (int i = 0; i < n; i++)
        assert_string_equal(sf_stage_name(c, i), names[i]);
    assert_int_equal(sf_client_schema_hash(c), reference_hash(1, (uint32_t)n, names, groups));
    sf_client_close(c);
}

static void custom_groups(void **s)
{
    (void)s;
    static const char *const names[] = {"load", "fwd@0", "fwd@1", "x@y", "rest"};
    static const char *const groups[] = {"io", NULL, "", "", ""};
    static const char *const eff[] = {"io", "fwd", "fwd", "x@y", "rest"};
    sf_client *c = open_schema(names, groups, 5, 2);
    assert_int_equal(sf_client_schema_hash(c), reference_hash(1, 5, names, eff));
    sf_client *d = open_schema(names, NULL, 5, 2);
    assert_true(sf_client_schema_hash(c) != sf_client_schema_hash(d));
    sf_client_close(c);
    sf_client_close(d);
}

#ifdef SF_HAVE_CORE
static void matches_core(void **s)
{
    (void)s;
    for (uint32_t k = 1; k <= 20; k++) {
        sf_schema core;
        assert_int_equal(sf_schema_init_default(&core, k), 0);
        sf_client *c = open_schema(NULL, NULL, 0, k);
        assert_int_equal(sf_client_schema_hash(c), core.hash);
        assert_int_equal((uint32_t)sf_stage_count(c), core.n_stages);
        for (uint32_t i = 0; i < core.n_stages; i++) {
            assert_string_equal(sf_stage_name(c, (int)i), core.names[i]);
            assert_string_equal(c->schema.groups[i], core.groups[i]);
        }
        sf_client_close(c);
        sf_schema_clear(&core);
    }
    static const char *const names[] = {"load", "fwd@0", "fwd@1", "x@y", "rest"};
    static const char *const groups[] = {"io", NULL, "", "", ""};
    sf_schema core;
    assert_int_equal(sf_schema_init(&core, 1, 5, names, groups, 2), 0);
    sf_client *c = open_schema(names, groups, 5, 2);
    assert_int_equal(sf_client_schema_hash(c), core.hash);
    sf_client_close(c);
    sf_schema_clear(&core);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_schema),
        cmocka_unit_test(accumulation_schema),
        cmocka_unit_test(custom_groups),
#ifdef SF_HAVE_CORE
        cmocka_unit_test(matches_core),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

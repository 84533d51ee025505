/* Unit tests of the import reduction (import_steps.c) and the mapping
 * (import_map.c): order independence, interval compaction under many
 * out-of-order ranges, overlap precedence, step numbering and mapping file
 * errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "import_steps.h"

struct range {
    const char *name;
    int64_t a, b;
};

static struct import_map load_default(void)
{
    struct import_map m;
    char err[200];
    assert_int_equal(import_map_load(NULL, &m, err, sizeof err), 0);
    return m;
}

/* Rows of the ranges fed in the given order; rows[i] holds S+1 values. */
static size_t reduce(struct import_map *m, const struct range *r, size_t n, const size_t *order,
                     int64_t rows[][SF_MAX_STAGES], int64_t *steps)
{
    struct step_acc acc;
    struct replay_input in = {0};
    struct replay_part *p = sfctl_input_add_part(&in);
    uint64_t totals[SF_MAX_STAGES] = {0};
    char err[200];
    step_acc_init(&acc, m);
    assert_int_equal(import_map_schema(m, &p->schema), 0);
    for (size_t i = 0; i < n; i++) {
        const struct range *x = &r[order ? order[i] : i];
        assert_int_equal(step_acc_add(&acc, x->name, x->a, x->b), 0);
    }
    assert_int_equal(step_acc_rows(&acc, 3, p, totals, err, sizeof err), 0);
    sfctl_part_finish(p);
    size_t rows_n = p->n_rows;
    for (size_t i = 0; i < rows_n; i++) {
        assert_int_equal(p->rows[i].rank, 3);
        steps[i] = p->rows[i].step;
        memcpy(rows[i], p->rows[i].d, p->schema.n_stages * sizeof(int64_t));
    }
    sfctl_replay_input_clear(&in);
    step_acc_clear(&acc);
    return rows_n;
}

static void test_precedence_and_clipping(void **state)
{
    (void)state;
    struct import_map m = load_default();
    const struct range r[] = {
        {"ProfilerStep#7", 1000, 2000},
        {"data.next_wait", 900, 1100}, /* clipped to 1000 */
        {"model.fwd_loss_cpu_wall", 1100, 1400},
        {"nn.Module: Linear", 1150, 1200}, /* inside forward */
        {"autograd::engine::evaluate_function: X", 1400, 1700},
        {"callbacks.cpu_wall", 1650, 1750},      /* 50 left to it */
        {"Optimizer.step#SGD.step", 1700, 2500}, /* clipped to 2000 */
        {"aten::mm", 1000, 2000},                /* unmapped */
    };
    int64_t rows[4][SF_MAX_STAGES], steps[4];
    assert_int_equal(reduce(&m, r, 8, NULL, rows, steps), 1);
    assert_int_equal(steps[0], 7);
    const int64_t want[] = {100, 300, 300, 50, 250, 0};
    assert_memory_equal(rows[0], want, sizeof want);
    import_map_clear(&m);
}

/* Many disjoint ranges fed backwards force compaction while growing; the
 * rows must equal those of the same ranges in time order. */
static void test_order_independent(void **state)
{
    (void)state;
    struct import_map m = load_default();
    enum { STEPS = 5, PER = 300, N = STEPS * (PER + 1) };
    struct range *r = calloc(N, sizeof *r);
    size_t *order = calloc(N, sizeof *order);
    size_t n = 0;
    for (int s = 0; s < STEPS; s++) {
        int64_t t = (int64_t)s * 100000;
        r[n++] = (struct range){"ProfilerStep#1", t, t + 100000};
        for (int k = 0; k < PER; k++) /* 300 backward pieces, 10 ns apart */
            r[n++] = (struct range){"autograd::engine::evaluate_function: A", t + k * 300,
                                    t + k * 300 + 290 - (k % 3) * 100};
    }
    for (size_t i = 0; i < N; i++)
        order[i] = N - 1 - i;
    for (int s = 0; s < STEPS; s++) /* distinct step numbers */
        r[s * (PER + 1)].name =
            (const char *[]){"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4",
                             "ProfilerStep#5"}[s];
    int64_t a[STEPS][SF_MAX_STAGES] = {{0}}, b[STEPS][SF_MAX_STAGES] = {{0}};
    int64_t sa[STEPS], sb[STEPS];
    assert_int_equal(reduce(&m, r, N, NULL, a, sa), STEPS);
    assert_int_equal(reduce(&m, r, N, order, b, sb), STEPS);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(sa, sb, sizeof sa);
    int64_t backward = 0;
    for (int k = 0; k < PER; k++)
        backward += 290 - (k % 3) * 100;
    assert_int_equal(a[2][2], backward);
    assert_int_equal(a[2][5], 100000 - backward);
    free(r);
    free(order);
    import_map_clear(&m);
}

static void test_step_errors(void **state)
{
    (void)state;
    struct import_map m = load_default();
    struct step_acc acc;
    struct replay_input in = {0};
    struct replay_part *p = sfctl_input_add_part(&in);
    uint64_t totals[SF_MAX_STAGES] = {0};
    char err[200];
    assert_int_equal(import_map_schema(&m, &p->schema), 0);
    step_acc_init(&acc, &m);
    assert_int_equal(step_acc_rows(&acc, 0, p, totals, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no step range"));
    assert_int_equal(step_acc_add(&acc, "ProfilerStep#4", 0, 10), 0);
    assert_int_equal(step_acc_add(&acc, "ProfilerStep#4", 10, 20), 0);
    assert_int_equal(step_acc_rows(&acc, 0, p, totals, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "step 4 appears twice"));
    step_acc_clear(&acc);
    sfctl_replay_input_clear(&in);
    import_map_clear(&m);
}

static void test_step_number(void **state)
{
    (void)state;
    assert_int_equal(step_number("ProfilerStep#12"), 12);
    assert_int_equal(step_number("step 3 of 10"), 10);
    assert_int_equal(step_number("train_step"), -1);
    assert_int_equal(step_number("ProfilerStep#99999999999999999999"), -1);
}

static int load_text(const char *text, char *err, size_t errlen)
{
    char path[] = "/tmp/sf-map-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    struct import_map m;
    int r = import_map_load(path, &m, err, errlen);
    if (r == 0)
        import_map_clear(&m);
    unlink(path);
    return r;
}

static void test_map_files(void **state)
{
    (void)state;
    char err[200];
    assert_int_equal(load_text("[steps]\nmatch = S*\n[stage a]\nmatch = a*\n[stage b]\n"
                               "match = b*\n[residual]\nname = rest\n",
                               err, sizeof err),
                     0);
    assert_int_equal(load_text("[stage a]\nmatch = a\n", err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no [steps]"));
    assert_int_equal(load_text("[steps]\nmatch = S\n[stage a]\nmatch = a\n[stage a]\nmatch = b\n",
                               err, sizeof err),
                     0); /* one section written twice in a row is one section */
    assert_int_equal(load_text("[steps]\nmatch = S\n[stage a]\nmatch = a\n[steps]\nmatch = T\n"
                               "[stage a]\nmatch = b\n",
                               err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "defined twice"));
    assert_int_equal(load_text("[steps]\nmatch = S\n[stage rest]\nmatch = a\n[residual]\n"
                               "name = rest\n",
                               err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "also the residual"));
    assert_int_equal(load_text("[steps]\nmatch = S\n[bogus]\nmatch = a\n", err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "line 4: unknown section [bogus]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precedence_and_clipping),
        cmocka_unit_test(test_order_independent),
        cmocka_unit_test(test_step_errors),
        cmocka_unit_test(test_step_number),
        cmocka_unit_test(test_map_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

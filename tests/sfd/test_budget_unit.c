/*
 * Unit tests of sfd's memory budget (budget.c) and its use by the job table
 * and windows (jobs.c, windows.c) without sockets: limits, job quotas,
 * eviction of a uid's own oldest kept rows with its reports kept, rank
 * pages, and every byte returned when the jobs go.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "loop_fixture.h"
#include "sfd.h"

#define UID_A 1000
#define UID_B 1001

struct fx {
    struct sfd d;
    uv_loop_t loop;
};

static int setup(void **state)
{
    static struct fx fx;
    loop_fixture_open(&fx.d, &fx.loop);
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    loop_fixture_close(&fx->d);
    /* every byte charged to a job went back with it */
    assert_int_equal(fx->d.mem.used, 0);
    assert_int_equal(fx->d.mem.n_uids, 0);
    sfd_budget_free(&fx->d.mem);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    return 0;
}

static struct sfd_job *new_job(struct fx *fx, const char *id, uid_t uid, uint32_t world)
{
    enum sfd_reject why;
    struct sfd_job *job;
    sf_schema schema;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    assert_int_equal(sfd_job_find_or_create(&fx->d, id, uid, 0, &job, &why), 0);
    assert_int_equal(sfd_job_bind_shape(job, &schema, world), 0);
    sf_schema_clear(&schema);
    job->n_live = 1;
    return job;
}

/* Closes `windows` complete windows of a one-rank job. */
static void close_windows(struct sfd_job *job, int64_t first_window, int windows)
{
    int64_t d[6] = {1000, 2000, 3000, 400, 500, 60};
    enum sfd_reject why;
    for (int64_t s = first_window * 4; s < (first_window + windows) * 4; s++) {
        sf_row row = {.step = s, .d = d};
        assert_int_equal(sfd_window_add(job, 0, &row, &why), 0);
    }
}

static void limits_refuse_and_release(void **state)
{
    (void)state;
    struct sfd_budget b = {0};
    struct sfd_budget_limits lim = {.total = 1000, .per_uid = 600};
    assert_int_equal(sfd_budget_job_add(&b, UID_A, 4), 0);
    assert_int_equal(sfd_budget_job_add(&b, UID_B, 4), 0);
    assert_int_equal(sfd_budget_charge(&b, &lim, UID_A, SFD_MEM_WINDOWS, 600), 0);
    /* the share is spent: one more byte is refused and nothing is charged */
    assert_int_equal(sfd_budget_charge(&b, &lim, UID_A, SFD_MEM_WINDOWS, 1), -ENOMEM);
    assert_int_equal(sfd_budget_uid_bytes(&b, UID_A), 600);
    /* B has its share, but only 400 bytes of the total are left */
    assert_int_equal(sfd_budget_charge(&b, &lim, UID_B, SFD_MEM_REPORTS, 401), -ENOMEM);
    assert_int_equal(sfd_budget_charge(&b, &lim, UID_B, SFD_MEM_REPORTS, 400), 0);
    assert_int_equal(b.used, 1000);
    assert_int_equal(b.by_kind[SFD_MEM_WINDOWS], 600);
    assert_int_equal(b.by_kind[SFD_MEM_REPORTS], 400);
    /* forced charges pass the limits (reports stay) */
    sfd_budget_force(&b, UID_B, SFD_MEM_REPORTS, 50);
    assert_int_equal(b.used, 1050);
    sfd_budget_uncharge(&b, UID_A, SFD_MEM_WINDOWS, 600);
    /* 450 bytes of B's are left in the total */
    assert_int_equal(sfd_budget_charge(&b, &lim, UID_A, SFD_MEM_WINDOWS, 551), -ENOMEM);
    assert_int_equal(sfd_budget_charge(&b, &lim, UID_A, SFD_MEM_WINDOWS, 550), 0);
    sfd_budget_uncharge(&b, UID_B, SFD_MEM_REPORTS, 450);
    /* an uncharge never goes below zero */
    sfd_budget_uncharge(&b, UID_A, SFD_MEM_WINDOWS, 5000);
    assert_int_equal(b.used, 0);
    assert_int_equal(b.by_kind[SFD_MEM_WINDOWS], 0);
    sfd_budget_job_remove(&b, UID_A);
    sfd_budget_job_remove(&b, UID_B);
    assert_int_equal(b.n_uids, 0);
    sfd_budget_free(&b);
}

static void job_quota_per_uid(void **state)
{
    (void)state;
    struct sfd_budget b = {0};
    assert_int_equal(sfd_budget_job_add(&b, UID_A, 2), 0);
    assert_int_equal(sfd_budget_job_add(&b, UID_A, 2), 0);
    assert_int_equal(sfd_budget_job_add(&b, UID_A, 2), -EDQUOT);
    assert_int_equal(sfd_budget_job_add(&b, UID_B, 2), 0);
    assert_int_equal(sfd_budget_share(&b, UID_B)->jobs, 1);
    /* a uid's job that ends frees its place for the next */
    sfd_budget_job_remove(&b, UID_A);
    assert_int_equal(sfd_budget_job_add(&b, UID_A, 2), 0);
    assert_int_equal(sfd_budget_job_add(&b, UID_A, 2), -EDQUOT);
    sfd_budget_free(&b);
}

static void same_id_two_uids_are_two_jobs(void **state)
{
    struct fx *fx = *state;
    struct sfd_job *a = new_job(fx, "train", UID_A, 1);
    struct sfd_job *b = new_job(fx, "train", UID_B, 1);
    assert_ptr_not_equal(a, b);
    assert_ptr_equal(sfd_job_lookup(&fx->d, UID_A, "train", 0), a);
    assert_ptr_equal(sfd_job_lookup(&fx->d, UID_B, "train", 0), b);
    assert_null(sfd_job_lookup(&fx->d, 0, "train", 0));
    fx->d.cfg.max_jobs_per_uid = 2;
    new_job(fx, "second", UID_A, 1);
    enum sfd_reject why = SFD_REJ_COUNT;
    struct sfd_job *j;
    assert_int_equal(sfd_job_find_or_create(&fx->d, "third", UID_A, 0, &j, &why), -EDQUOT);
    assert_int_equal(why, SFD_REJ_MAX_JOBS_PER_UID);
    assert_int_equal(sfd_job_find_or_create(&fx->d, "third", UID_B, 0, &j, &why), 0);
}

/* A uid at its job cap forgets its own oldest idle job, never another
 * uid's, and is refused only when none of its jobs is idle. */
static void uid_cap_forgets_own_oldest_idle_job(void **state)
{
    struct fx *fx = *state;
    fx->d.cfg.max_jobs_per_uid = 2;
    struct sfd_job *old = new_job(fx, "old", UID_A, 1);
    struct sfd_job *other = new_job(fx, "other", UID_B, 1);
    new_job(fx, "newer", UID_A, 1);
    old->n_live = 0;
    old->last_active_ms = 1;
    other->n_live = 0;
    other->last_active_ms = 0; /* older, but B's */
    struct sfd_job *j;
    enum sfd_reject why = SFD_REJ_COUNT;
    assert_int_equal(sfd_job_find_or_create(&fx->d, "third", UID_A, 0, &j, &why), 0);
    j->n_live = 1;
    assert_null(sfd_job_lookup(&fx->d, UID_A, "old", 0));
    assert_ptr_equal(sfd_job_lookup(&fx->d, UID_B, "other", 0), other);
    assert_int_equal(sfd_budget_share(&fx->d.mem, UID_A)->jobs, 2);
    assert_int_equal(sfd_job_find_or_create(&fx->d, "fourth", UID_A, 0, &j, &why), -EDQUOT);
    assert_int_equal(why, SFD_REJ_MAX_JOBS_PER_UID);
}

static void over_share_evicts_own_oldest_kept_rows(void **state)
{
    struct fx *fx = *state;
    struct sfd_job *a = new_job(fx, "a", UID_A, 1);
    struct sfd_job *b = new_job(fx, "b", UID_B, 1);
    close_windows(a, 0, 2);
    close_windows(b, 0, 3);
    close_windows(a, 2, 1);
    assert_int_equal(a->n_stored, 3);
    assert_int_equal(b->n_stored, 3);
    uint64_t kept = a->stored[0].rows.bytes;
    assert_true(kept > 0);
    assert_int_equal(a->mem[SFD_MEM_KEPT_ROWS], 3 * kept);
    assert_true(a->mem[SFD_MEM_REPORTS] > 0);

    /* A asks for just more than its share has left: its oldest kept rows go */
    fx->d.cfg.max_memory_per_uid_mb = 1;
    uint64_t share = 1u << 20, used = sfd_budget_uid_bytes(&fx->d.mem, UID_A);
    uint64_t ask = share - used + 1;
    assert_int_equal(sfd_mem_reserve(&fx->d, UID_A, SFD_MEM_WINDOWS, ask), 0);
    assert_true(a->stored[0].rows_evicted);
    assert_false(a->stored[1].rows_evicted);
    assert_non_null(a->stored[0].report); /* the report stays */
    assert_int_equal(a->evicted_windows, 1);
    sfd_budget_uncharge(&fx->d.mem, UID_A, SFD_MEM_WINDOWS, ask);

    /* More than A can ever free: all of A's rows go, then it is refused;
     * B keeps every row. */
    assert_int_equal(sfd_mem_reserve(&fx->d, UID_A, SFD_MEM_WINDOWS, share), -ENOMEM);
    for (uint32_t i = 0; i < a->n_stored; i++) {
        assert_true(a->stored[i].rows_evicted);
        assert_non_null(a->stored[i].report);
    }
    for (uint32_t i = 0; i < b->n_stored; i++)
        assert_false(b->stored[i].rows_evicted);
    assert_int_equal(b->evicted_windows, 0);
    assert_int_equal(a->mem[SFD_MEM_KEPT_ROWS], 0);

    /* A's new records are refused and say why */
    fx->d.cfg.max_memory_per_uid_mb = 0;
    int64_t d[6] = {1000, 2000, 3000, 400, 500, 60};
    sf_row row = {.step = 100, .d = d};
    enum sfd_reject why = SFD_REJ_COUNT;
    assert_int_equal(sfd_window_add(a, 0, &row, &why), -ENOSPC);
    assert_int_equal(why, SFD_REJ_MEMORY);
    fx->d.cfg.max_memory_per_uid_mb = 128;
}

static void rank_state_grows_with_ranks_not_world_size(void **state)
{
    struct fx *fx = *state;
    struct sfd_job *j = new_job(fx, "big", UID_A, SF_MAX_RANKS);
    uint64_t dir = (SF_MAX_RANKS / SFD_RANK_PAGE) * sizeof(struct sfd_rank *);
    assert_int_equal(j->mem[SFD_MEM_RANKS], dir);
    assert_int_equal(sfd_job_rank_peek(j, 200000)->last_step, -1);
    assert_int_equal(j->mem[SFD_MEM_RANKS], dir);
    struct sfd_rank *rk;
    assert_int_equal(sfd_job_rank(j, 200000, &rk), 0);
    assert_int_equal(sfd_job_rank(j, 200001, &rk), 0);
    assert_int_equal(j->mem[SFD_MEM_RANKS], dir + SFD_RANK_PAGE * sizeof(struct sfd_rank));
    assert_int_equal(sfd_job_rank(j, SF_MAX_RANKS, &rk), -ERANGE);
    rk->last_step = 7;
    assert_int_equal(sfd_job_rank_peek(j, 200001)->last_step, 7);
}

static void counters_saturate(void **state)
{
    (void)state;
    uint64_t c = (uint64_t)INT64_MAX - 2;
    sfd_sat_add(&c, 1);
    assert_int_equal(c, (uint64_t)INT64_MAX - 1);
    sfd_sat_add(&c, UINT64_MAX);
    assert_int_equal(c, (uint64_t)INT64_MAX);
    sfd_sat_add(&c, 5);
    assert_int_equal(c, (uint64_t)INT64_MAX);
}

static void job_refs_parse(void **state)
{
    (void)state;
    struct sfd_job_ref r;
    assert_int_equal(sfd_job_ref_parse("train", &r), 0);
    assert_false(r.has_uid);
    assert_string_equal(r.id, "train");
    assert_int_equal(sfd_job_ref_parse("1000/a:b", &r), 0);
    assert_true(r.has_uid);
    assert_int_equal(r.uid, 1000);
    assert_string_equal(r.id, "a:b");
    assert_int_equal(sfd_job_ref_parse("/train", &r), -EINVAL);
    assert_int_equal(sfd_job_ref_parse("10x/train", &r), -EINVAL);
    assert_int_equal(sfd_job_ref_parse("1000/", &r), -EINVAL);
    assert_int_equal(sfd_job_ref_parse("1/2/x", &r), -EINVAL);
    assert_int_equal(sfd_job_ref_parse("4294967295/x", &r), -EINVAL);
    assert_int_equal(sfd_job_ref_parse("99999999999/x", &r), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(limits_refuse_and_release),
        cmocka_unit_test(job_quota_per_uid),
        cmocka_unit_test(counters_saturate),
        cmocka_unit_test(job_refs_parse),
        cmocka_unit_test_setup_teardown(same_id_two_uids_are_two_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(uid_cap_forgets_own_oldest_idle_job, setup, teardown),
        cmocka_unit_test_setup_teardown(over_share_evicts_own_oldest_kept_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(rank_state_grows_with_ranks_not_world_size, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

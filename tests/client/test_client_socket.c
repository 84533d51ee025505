/*
 * The client against a real SOCK_SEQPACKET listener owned by the test:
 * hello contents and batches, daemon absent, listener re-created (reconnect
 * with a new hello), a listener that never reads (socket full), and a fork()
 * child that must stay silent. Every wait polls a socket with a timeout.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <stagefrontier/accounting.h>
#include <stagefrontier/client.h>
#include "client_internal.h"
#include "listener.h"

#define WAIT_MS 20000

static sf_client *open_at(const char *path, uint32_t buffer, uint32_t batch)
{
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "sock-job";
    o.socket_path = path;
    o.rank = 2, o.world_size = 4, o.local_rank = 1;
    o.role = "trainer";
    o.buffer_records = buffer;
    o.batch_records = batch;
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    return c;
}

static void run_steps(sf_client *c, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(sf_step_begin(c, -1), 0);
        for (int s = 0; s < 3; s++) {
            assert_int_equal(sf_stage_begin(c, s), 0);
            assert_int_equal(sf_stage_end(c, s), 0);
        }
        assert_int_equal(sf_step_end(c), 0);
    }
}

static sf_client_stats stats(const sf_client *c)
{
    sf_client_stats st;
    assert_int_equal(sf_client_get_stats(c, &st), 0);
    return st;
}

static Stagefrontier__Hello *expect_hello(struct tl *l, Stagefrontier__ClientMessage **ret_m)
{
    Stagefrontier__ClientMessage *m = tl_recv(l, WAIT_MS);
    assert_non_null(m);
    assert_int_equal(m->body_case, STAGEFRONTIER__CLIENT_MESSAGE__BODY_HELLO);
    *ret_m = m;
    return m->hello;
}

/* Reads batches until n records arrived; checks each record's closure. */
static void expect_records(struct tl *l, const sf_client *c, int64_t first_step, size_t n,
                           uint64_t *ret_dropped_total)
{
    size_t got = 0;
    while (got < n) {
        Stagefrontier__ClientMessage *m = tl_recv(l, WAIT_MS);
        assert_non_null(m);
        assert_int_equal(m->body_case, STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH);
        Stagefrontier__RecordBatch *b = m->batch;
        assert_int_equal(b->schema_hash, sf_client_schema_hash(c));
        assert_true(b->has_dropped_total);
        if (ret_dropped_total)
            *ret_dropped_total = b->dropped_total;
        for (size_t i = 0; i < b->n_records; i++) {
            Stagefrontier__StepRecord *r = b->records[i];
            assert_int_equal(r->step, first_step + (int64_t)(got + i));
            assert_int_equal(r->n_durations_ns, 6);
            int64_t sum = 0;
            for (size_t s = 0; s < 6; s++) {
                assert_true(r->durations_ns[s] >= 0);
                sum += r->durations_ns[s];
            }
            assert_int_equal(sum, r->step_wall_ns);
        }
        got += b->n_records;
        stagefrontier__client_message__free_unpacked(m, NULL);
    }
    assert_int_equal(got, n);
}

/* Burns CPU until the monotonic clock moved by at least ns. */
static void spin(int64_t ns)
{
    int64_t t0 = sf__now_ns();
    while (sf__now_ns() - t0 < ns)
        ;
}

/* Backward synchronizing: the Hello names it, the hash is the split
 * schema's, a marked step carries its arrival, an unmarked one none. */
static void arrivals_on_the_wire(void **s)
{
    (void)s;
    struct tl l;
    assert_int_equal(tl_start(&l), 0);
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "sync-job";
    o.socket_path = l.path;
    o.rank = 0, o.world_size = 2, o.local_rank = 0;
    const char *sync[] = {"model.backward_cpu_wall"};
    o.sync_stages = sync;
    o.n_sync_stages = 1;
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    assert_int_equal(tl_accept(&l, WAIT_MS), 0);
    Stagefrontier__ClientMessage *m;
    Stagefrontier__Hello *h = expect_hello(&l, &m);
    assert_int_equal(h->n_stage_names, 6);
    assert_int_equal(h->n_sync_stages, 1);
    assert_int_equal(h->sync_stages[0], 2);
    sf_schema split;
    assert_int_equal(sf_schema_init_sync(&split, 1, 6, sf_default_stage_names, NULL, 1, 1u << 2),
                     0);
    assert_int_equal(h->schema_hash, split.hash);
    assert_int_equal(sf_client_schema_hash(c), split.hash);
    sf_schema_clear(&split);
    stagefrontier__client_message__free_unpacked(m, NULL);

    /* No synchronizing stage open: a counted violation. */
    assert_int_equal(sf_step_begin(c, 0), 0);
    assert_int_equal(sf_stage_arrive(c), -EINVAL);
    assert_int_equal(sf_stage_begin(c, 1), 0);
    assert_int_equal(sf_stage_arrive(c), -EINVAL);
    assert_int_equal(sf_stage_end(c, 1), 0);
    assert_int_equal(sf_stage_begin(c, 2), 0);
    spin(300000);
    assert_int_equal(sf_stage_arrive(c), 0);
    spin(300000);
    assert_int_equal(sf_stage_end(c, 2), 0);
    assert_int_equal(sf_step_end(c), 0);
    assert_int_equal(stats(c).violations, 2);
    assert_int_equal(sf_step_begin(c, 1), 0);
    assert_int_equal(sf_stage_begin(c, 2), 0);
    assert_int_equal(sf_stage_end(c, 2), 0);
    assert_int_equal(sf_step_end(c), 0);
    /* Step 2: an issue before the arrival is refused; after it, the issue
     * and the completion (from another stage's point of view: any thread)
     * land 200 us apart. */
    assert_int_equal(sf_step_begin(c, 2), 0);
    assert_int_equal(sf_stage_begin(c, 2), 0);
    assert_int_equal(sf_stage_issue(c), -EINVAL);
    spin(100000);
    assert_int_equal(sf_stage_arrive(c), 0);
    spin(200000);
    assert_int_equal(sf_stage_issue(c), 2);
    spin(200000);
    assert_int_equal(sf_stage_complete(c, 2), 0);
    assert_int_equal(sf_stage_complete(c, 1), -EINVAL);
    assert_int_equal(sf_stage_end(c, 2), 0);
    assert_int_equal(sf_step_end(c), 0);
    assert_int_equal(stats(c).violations, 3);
    /* Step 3: a completion left over from step 2 is older than this
     * step's issue and is not shipped. */
    assert_int_equal(sf_step_begin(c, 3), 0);
    assert_int_equal(sf_stage_begin(c, 2), 0);
    assert_int_equal(sf_stage_arrive(c), 0);
    assert_int_equal(sf_stage_issue(c), 2);
    assert_int_equal(sf_stage_end(c, 2), 0);
    assert_int_equal(sf_step_end(c), 0);
    assert_int_equal(sf_client_flush(c), 0);

    m = tl_recv(&l, WAIT_MS);
    assert_non_null(m);
    assert_int_equal(m->body_case, STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH);
    assert_int_equal(m->batch->n_records, 4);
    const Stagefrontier__StepRecord *r0 = m->batch->records[0], *r1 = m->batch->records[1];
    assert_int_equal(r0->n_durations_ns, 6);
    assert_int_equal(r0->n_arrivals, 1);
    assert_int_equal(r0->arrivals[0]->stage, 2);
    assert_true(r0->arrivals[0]->own_ns >= 300000);
    assert_true(r0->durations_ns[2] - r0->arrivals[0]->own_ns >= 300000);
    assert_false(r0->arrivals[0]->has_issue_ns);
    assert_int_equal(r1->n_arrivals, 0);
    const Stagefrontier__StepRecord *r2 = m->batch->records[2], *r3 = m->batch->records[3];
    assert_int_equal(r2->n_arrivals, 1);
    const Stagefrontier__Arrival *a2 = r2->arrivals[0];
    assert_true(a2->has_issue_ns && a2->has_complete_ns);
    assert_true(a2->issue_ns - a2->own_ns >= 200000);
    assert_true(a2->complete_ns - a2->issue_ns >= 200000);
    assert_true(a2->complete_ns <= r2->durations_ns[2]);
    assert_int_equal(r3->n_arrivals, 1);
    assert_true(r3->arrivals[0]->has_issue_ns);
    assert_false(r3->arrivals[0]->has_complete_ns);
    stagefrontier__client_message__free_unpacked(m, NULL);
    sf_client_close(c);
    tl_stop(&l);
}

/* Synchronizing groups (docs/CLIENT.md): the Hello names each stage's
 * group, and many sync points in one stage accumulate their waits and
 * count, a send counting one without a wait. */
static void sync_points_on_the_wire(void **s)
{
    (void)s;
    struct tl l;
    assert_int_equal(tl_start(&l), 0);
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "sync-points";
    o.socket_path = l.path;
    o.rank = 0, o.world_size = 2, o.local_rank = 0;
    /* Out of stage order on purpose: the groups follow their stages. */
    const char *sync[] = {"model.backward_cpu_wall", "model.fwd_loss_cpu_wall"};
    const char *bad[] = {"dp", "xp"}, *groups[] = {NULL, "tp"};
    o.sync_stages = sync;
    o.n_sync_stages = 2;
    o.sync_groups = bad;
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), -EINVAL);
    o.sync_groups = groups;
    assert_int_equal(sf_client_open(&o, &c), 0);
    assert_int_equal(tl_accept(&l, WAIT_MS), 0);
    Stagefrontier__ClientMessage *m;
    Stagefrontier__Hello *h = expect_hello(&l, &m);
    assert_int_equal(h->n_sync_stages, 2);
    assert_int_equal(h->n_sync_groups, 2);
    assert_int_equal(h->sync_groups[0], 2); /* forward: tp */
    assert_int_equal(h->sync_groups[1], 0); /* backward: world */
    stagefrontier__client_message__free_unpacked(m, NULL);

    /* Step 0: three sync points of 100 us in the forward, then a send. */
    assert_int_equal(sf_step_begin(c, 0), 0);
    assert_int_equal(sf_sync_enter(c), -EINVAL); /* no stage open */
    assert_int_equal(sf_stage_begin(c, 1), 0);
    for (int i = 0; i < 3; i++) {
        spin(50000);
        assert_int_equal(sf_sync_enter(c), 1);
        spin(100000);
        assert_int_equal(sf_sync_exit(c), 0);
    }
    assert_int_equal(sf_sync_exit(c), -EINVAL); /* no enter open */
    assert_int_equal(sf_sync_send(c), 0);
    assert_int_equal(sf_stage_end(c, 1), 0);
    assert_int_equal(sf_stage_begin(c, 2), 0);
    assert_int_equal(sf_stage_end(c, 2), 0);
    assert_int_equal(sf_step_end(c), 0);
    assert_int_equal(stats(c).violations, 2);
    /* Step 1: an enter never exited counts nothing; the arrival stands. */
    assert_int_equal(sf_step_begin(c, 1), 0);
    assert_int_equal(sf_stage_begin(c, 1), 0);
    assert_int_equal(sf_sync_enter(c), 1);
    assert_int_equal(sf_stage_end(c, 1), 0);
    assert_int_equal(sf_step_end(c), 0);
    assert_int_equal(sf_client_flush(c), 0);

    m = tl_recv(&l, WAIT_MS);
    assert_non_null(m);
    assert_int_equal(m->body_case, STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH);
    assert_int_equal(m->batch->n_records, 2);
    const Stagefrontier__StepRecord *r0 = m->batch->records[0], *r1 = m->batch->records[1];
    assert_int_equal(r0->n_arrivals, 1);
    const Stagefrontier__Arrival *a = r0->arrivals[0];
    assert_int_equal(a->stage, 1);
    assert_true(a->has_wait_ns && a->has_waits);
    assert_int_equal(a->waits, 4);
    assert_true(a->wait_ns >= 300000);
    assert_true(a->wait_ns <= r0->durations_ns[1] - 150000); /* the spins outside */
    assert_true(a->own_ns >= 450000);                        /* the send, last */
    assert_int_equal(r1->n_arrivals, 1);
    assert_false(r1->arrivals[0]->has_wait_ns);
    assert_false(r1->arrivals[0]->has_waits);
    stagefrontier__client_message__free_unpacked(m, NULL);
    sf_client_close(c);
    tl_stop(&l);
}

/* The hello's GPU: CUDA_VISIBLE_DEVICES's entry at the local rank, its only
 * entry, or none; and no local rank when none is known. */
static void hello_gpu(const char *visible, int local_rank, const char *want)
{
    struct tl l;
    assert_int_equal(tl_start(&l), 0);
    if (visible != NULL)
        setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    else
        unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("LOCAL_RANK");
    sf_client_options o;
    sf_client_options_init(&o);
    o.job_id = "gpu-job";
    o.socket_path = l.path;
    o.rank = 0, o.world_size = 4, o.local_rank = local_rank;
    sf_client *c = NULL;
    assert_int_equal(sf_client_open(&o, &c), 0);
    assert_int_equal(tl_accept(&l, WAIT_MS), 0);
    Stagefrontier__ClientMessage *m;
    Stagefrontier__Hello *h = expect_hello(&l, &m);
    assert_int_equal(h->has_local_rank, local_rank >= 0);
    if (want == NULL)
        assert_null(h->gpu);
    else
        assert_string_equal(h->gpu, want);
    stagefrontier__client_message__free_unpacked(m, NULL);
    sf_client_close(c);
    tl_stop(&l);
    unsetenv("CUDA_VISIBLE_DEVICES");
}

static void hello_gpu_from_env(void **s)
{
    (void)s;
    hello_gpu("0,1,2,3", 2, "2");
    hello_gpu("GPU-8d0a6c1e-2b7f", 3, "GPU-8d0a6c1e-2b7f"); /* one device per process */
    hello_gpu("4,5", 3, NULL);                              /* beyond the list */
    hello_gpu("4,5", -1, NULL);                             /* no local rank */
    hello_gpu("-1", 0, NULL);                               /* CUDA's "no device" */
    hello_gpu("0,bad id", 1, NULL);
    hello_gpu(NULL, 1, NULL);
}

static void hello_and_batches(void **s)
{
    (void)s;
    struct tl l;
    assert_int_equal(tl_start(&l), 0);
    setenv("SF_PARALLEL", "pp=1/2,dp=0/2,schedule=interleaved:2", 1);
    sf_client *c = open_at(l.path, 0, 0);
    unsetenv("SF_PARALLEL");
    assert_int_equal(tl_accept(&l, WAIT_MS), 0);
    Stagefrontier__ClientMessage *m;
    Stagefrontier__Hello *h = expect_hello(&l, &m);
    assert_int_equal(h->protocol_version, 1);
    /* the coordinates, as SF_PARALLEL said them */
    assert_non_null(h->parallel);
    assert_non_null(h->parallel->pp);
    assert_int_equal(h->parallel->pp->index, 1);
    assert_int_equal(h->parallel->pp->size, 2);
    assert_non_null(h->parallel->dp);
    assert_int_equal(h->parallel->dp->index, 0);
    assert_int_equal(h->parallel->dp->size, 2);
    assert_null(h->parallel->tp);
    assert_null(h->parallel->ep);
    assert_int_equal(h->parallel->schedule, STAGEFRONTIER__PARALLEL__SCHEDULE__INTERLEAVED);
    assert_int_equal(h->parallel->virtual_stages, 2);
    assert_string_equal(h->job_id, "sock-job");
    assert_int_equal(h->rank, 2);
    assert_int_equal(h->world_size, 4);
    assert_int_equal(h->local_rank, 1);
    assert_int_equal(h->pid, (uint32_t)getpid());
    assert_non_null(h->host);
    assert_string_equal(h->role, "trainer");
    assert_int_equal(h->n_stage_names, 6);
    assert_int_equal(h->n_stage_groups, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(h->stage_names[i], sf_stage_name(c, (int)i));
        assert_string_equal(h->stage_groups[i], h->stage_names[i]);
    }
    assert_string_equal(h->stage_names[5], "step.other_cpu_wall");
    assert_int_equal(h->schema_hash, sf_client_schema_hash(c));
    assert_int_equal(h->accumulation, 1);
    assert_true(h->has_channel);
    assert_int_equal(h->channel, 0);
    assert_int_equal(h->connection_generation, 0);
    assert_false(h->has_last_sent_step);
    stagefrontier__client_message__free_unpacked(m, NULL);

    run_steps(c, 3);
    assert_int_equal(sf_client_flush(c), 0);
    uint64_t dropped = 99;
    expect_records(&l, c, 0, 3, &dropped);
    assert_int_equal(dropped, 0);
    sf_client_stats st = stats(c);
    assert_int_equal(st.steps, 3);
    assert_int_equal(st.records_sent, 3);
    assert_int_equal(st.records_dropped, 0);
    assert_int_equal(st.send_syscalls, 1 + st.batches_sent);
    assert_int_equal(st.connects, 1);
    assert_int_equal(st.connected, 1);
    sf_client_close(c);
    tl_stop(&l);
}

static void daemon_absent(void **s)
{
    (void)s;
    struct tl l;
    assert_int_equal(tl_start(&l), 0);
    tl_close_listener(&l); /* the directory exists, the socket does not */
    sf_client *c = open_at(l.path, 0, 0);
    run_steps(c, 50);
    assert_int_equal(sf_client_flush(c), 0);
    sf_client_stats st = stats(c);
    assert_int_equal(st.steps, 50);
    assert_int_equal(st.records_dropped, 50);
    assert_int_equal(st.records_sent, 0);
    assert_int_equal(st.connected, 0);
    assert_int_equal(st.connects, 0);
    sf_client_close(c);
    tl_stop(&l);
}

static void reconnect_sends_new_hello(void **s)
{
    (void)s;
    struct tl l;
    assert_int_equal(tl_start(&l), 0);
    sf_client *c = open_at(l.path, 0, 0);
    assert_int_equal(tl_accept(&l, WAIT_MS), 0);
    Stagefrontier__ClientMessage *m;
    expect_hello(&l, &m);
    stagefrontier__client_message__free_unpacked(m, NULL);
    run_steps(c, 2);
    sf_client_flush(c);
    expect_records(&l, c, 0, 2, NULL);

    /* The daemon goes away: the next send fails and drops are counted. */
    tl_close_conn(&l);
    tl_close_listener(&l);
    for (int i = 0; i < 1000 && stats(c).connected; i++) {
        run_steps(c, 1);
        sf_client_flush(c);
    }
    assert_int_equal(stats(c).connected, 0);
    assert_true(stats(c).records_dropped >= 1);

    /* It comes back: the client reconnects after its backoff. */
    assert_int_equal(tl_listen(&l), 0);
    int accepted = -1;
    for (int i = 0; i < 2000 && accepted < 0; i++) {
        run_steps(c, 1);
        sf_client_flush(c);
        accepted = tl_accept(&l, 10);
    }
    assert_int_equal(accepted, 0);
    Stagefrontier__Hello *h = expect_hello(&l, &m);
    assert_true(h->connection_generation > 0);
    assert_true(h->has_last_sent_step);
    assert_int_equal(h->last_sent_step, 1);
    stagefrontier__client_message__free_unpacked(m, NULL);
    sf_client_stats st = stats(c);
    assert_int_equal(st.connects, 2);
    assert_int_equal(st.reconnects, 1);

    /* The first batch after the gap names the dropped steps. */
    run_steps(c, 1);
    sf_client_flush(c);
    m = tl_recv(&l, WAIT_MS);
    assert_non_null(m);
    assert_int_equal(m->body_case, STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH);
    st = stats(c);
    assert_int_equal(m->batch->dropped_total, st.records_dropped);
    assert_true(m->batch->has_dropped_first_step);
    assert_int_equal(m->batch->dropped_first_step, 2);
    assert_true(m->batch->dropped_last_step >= 2);
    assert_int_equal(st.records_sent + st.records_dropped + c->ring.count, st.steps);
    stagefrontier__client_message__free_unpacked(m, NULL);
    sf_client_close(c);
    tl_stop(&l);
}

static void listener_never_reads(void **s)
{
    (void)s;
    struct tl l;
    assert_int_equal(tl_start(&l), 0);
    sf_client *c = open_at(l.path, 256, 64);
    assert_int_equal(tl_accept(&l, WAIT_MS), 0);
    int steps = 0;
    while (stats(c).records_dropped == 0 && steps < 400000) {
        run_steps(c, 100); /* every call returns 0: asserted inside */
        steps += 100;
    }
    sf_client_stats st = stats(c);
    assert_int_equal(st.steps, (uint64_t)steps);
    assert_true(st.records_dropped > 0);
    assert_true(st.records_sent > 0);
    assert_int_equal(st.connected, 1);
    assert_int_equal(st.records_sent + st.records_dropped + c->ring.count, st.steps);
    sf_client_close(c);
    tl_stop(&l);
}

/* Exit status of the child: 0 when inert and silent. */
static int child_body(sf_client *c, uint64_t syscalls_before)
{
    int bad = 0;
    for (int i = 0; i < 20; i++) {
        bad |= sf_step_begin(c, 1000 + i) != 0;
        bad |= sf_stage_begin(c, 0) != 0;
        bad |= sf_stage_end(c, 0) != 0;
        bad |= sf_step_end(c) != 0;
    }
    bad |= sf_client_flush(c) != 0;
    sf_client_stats st;
    sf_client_get_stats(c, &st);
    bad |= st.send_syscalls != syscalls_before;
    bad |= c->tr.fd != -1; /* the inherited socket is closed */
    sf_client_close(c);
    return bad;
}

static void fork_child_is_inert(void **s)
{
    (void)s;
    struct tl l;
    assert_int_equal(tl_start(&l), 0);
    sf_client *c = open_at(l.path, 0, 0);
    assert_int_equal(tl_accept(&l, WAIT_MS), 0);
    Stagefrontier__ClientMessage *m;
    expect_hello(&l, &m);
    stagefrontier__client_message__free_unpacked(m, NULL);
    uint64_t before = stats(c).send_syscalls;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_body(c, before));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    /* The parent's connection still works, and carries only its steps. */
    run_steps(c, 3);
    sf_client_flush(c);
    assert_int_equal(stats(c).records_sent, 3);
    sf_client_close(c);
    size_t records = 0;
    while ((m = tl_recv(&l, WAIT_MS)) != NULL) {
        assert_int_equal(m->body_case, STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH);
        for (size_t i = 0; i < m->batch->n_records; i++)
            assert_true(m->batch->records[i]->step < 1000);
        records += m->batch->n_records;
        stagefrontier__client_message__free_unpacked(m, NULL);
    }
    assert_int_equal(records, 3);
    tl_stop(&l);
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would kill the test: it must never come */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hello_and_batches),    cmocka_unit_test(hello_gpu_from_env),
        cmocka_unit_test(arrivals_on_the_wire), cmocka_unit_test(sync_points_on_the_wire),
        cmocka_unit_test(daemon_absent),        cmocka_unit_test(reconnect_sends_new_hello),
        cmocka_unit_test(listener_never_reads), cmocka_unit_test(fork_child_is_inert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * End to end through libsfclient: with event_sample_fraction set and a CUDA
 * runtime loaded (the double, RTLD_GLOBAL), every step's record reaches a
 * test-owned ingest socket carrying its CUDA-event sample. Mode "nolib": no
 * runtime loaded, the same options, the records carry no sample and training
 * calls all succeed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_cudart.h"
#include "ingest.pb-c.h"
#include "stagefrontier/client.h"

#define STEPS 12

static bool nolib;
static char dir[64], path[108];
static int lfd = -1;
static struct fake_cudart_ctl *ctl;

static int setup(void **state)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/sf-evt-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/ingest.sock", dir);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 4) < 0)
        return -1;
    if (!nolib) {
        fake_cudart_ctl_fn fn;
        void *lib = dlopen(FAKE_CUDART_PATH, RTLD_NOW | RTLD_GLOBAL);
        if (!lib)
            return -1;
        *(void **)&fn = dlsym(lib, "fake_cudart_control");
        ctl = fn();
        ctl->elapsed_ms = 3.5f;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    close(lfd);
    unlink(path);
    rmdir(dir);
    return 0;
}

static Stagefrontier__ClientMessage *next_msg(int fd)
{
    static uint8_t buf[1 << 17];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t n;
    if (poll(&p, 1, 30000) != 1)
        return NULL;
    n = recv(fd, buf, sizeof buf, 0);
    return n > 0 ? stagefrontier__client_message__unpack(NULL, (size_t)n, buf) : NULL;
}

static void test_samples_ride_the_records(void **state)
{
    sf_client_options o;
    sf_client *c = NULL;
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int fwd, fd, ready = 0, records = 0, with_event = 0;
    Stagefrontier__ClientMessage *m;
    (void)state;

    sf_client_options_init(&o);
    o.socket_path = path;
    o.job_id = "job-events";
    o.rank = 0;
    o.world_size = 1;
    o.local_rank = 0;
    o.event_sample_fraction = 1.0;
    assert_int_equal(sf_client_open(&o, &c), 0);
    fwd = sf_stage_id(c, "model.fwd_loss_cpu_wall");
    assert_true(fwd >= 0);
    for (int64_t t = 0; t < STEPS; t++) {
        assert_int_equal(sf_step_begin(c, t), 0);
        assert_int_equal(sf_stage_begin(c, fwd), 0);
        assert_int_equal(sf_stage_end(c, fwd), 0);
        assert_int_equal(sf_step_end(c), 0);
    }
    sf_client_close(c); /* flushes what the socket takes */

    assert_int_equal(poll(&p, 1, 30000), 1);
    fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    while ((m = next_msg(fd)) != NULL) {
        if (m->body_case == STAGEFRONTIER__CLIENT_MESSAGE__BODY_BATCH) {
            for (size_t i = 0; i < m->batch->n_records; i++) {
                const Stagefrontier__StepRecord *r = m->batch->records[i];
                records++;
                if (!r->event)
                    continue;
                with_event++;
                if (r->event->state == STAGEFRONTIER__EVENT_SAMPLE__STATE__READY) {
                    ready++;
                    assert_true(r->event->has_gpu_ns);
                    assert_int_equal(r->event->gpu_ns, 3500000);
                    assert_true(r->event->has_cpu_ns);
                    assert_true(r->event->cpu_ns >= 0);
                }
            }
        }
        stagefrontier__client_message__free_unpacked(m, NULL);
    }
    close(fd);
    assert_int_equal(records, STEPS);
    if (nolib) {
        assert_int_equal(with_event, 0);
    } else {
        assert_int_equal(ready, STEPS);
        assert_int_equal(ctl->syncs, 0);
        assert_int_equal(ctl->created, ctl->destroyed); /* the pool went with close */
        assert_true(ctl->created > 0);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_samples_ride_the_records)};
    nolib = argc > 1 && strcmp(argv[1], "nolib") == 0;
    return cmocka_run_group_tests_name(nolib ? "client_events_nolib" : "client_events", tests,
                                       setup, teardown);
}

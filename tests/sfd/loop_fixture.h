/*
 * Test helper: an sfd without sockets on a real libuv loop (timers, config
 * defaults, windows of 4 steps, no warmup), and its teardown. Header-only;
 * the tests that include it use cmocka's assertions.
 */
#ifndef SF_TEST_LOOP_FIXTURE_H
#define SF_TEST_LOOP_FIXTURE_H

#include <string.h>

#include "sfd.h"

static inline void loop_fixture_open(struct sfd *d, uv_loop_t *loop)
{
    memset(d, 0, sizeof(*d));
    assert_int_equal(uv_loop_init(loop), 0);
    d->loop = loop;
    sfd_config_default(&d->cfg);
    d->cfg.gates.warmup_steps = 0;
    d->cfg.gates.window_steps = 4;
    sfd_log_init(SFD_LOG_ERR);
    assert_int_equal(sfd_timers_init(d), 0);
}

/* A job of the default stages and world size 2, both ranks connected. */
static inline struct sfd_job *loop_fixture_job(struct sfd *d, const char *id)
{
    enum sfd_reject why;
    sf_schema schema;
    struct sfd_job *job;
    assert_int_equal(sf_schema_init_default(&schema, 1), 0);
    assert_int_equal(sfd_job_find_or_create(d, id, 1000, 0, &job, &why), 0);
    assert_int_equal(sfd_job_bind_shape(job, &schema, 2), 0);
    sf_schema_clear(&schema);
    job->n_live = 2;
    return job;
}

/* Stops the timers, runs the loop dry and frees every job. */
static inline void loop_fixture_close(struct sfd *d)
{
    d->stopping = true;
    uv_close((uv_handle_t *)&d->tick, NULL);
    uv_close((uv_handle_t *)&d->prom_timer, NULL);
    uv_run(d->loop, UV_RUN_DEFAULT);
    sfd_jobs_free_all(d);
}

#endif

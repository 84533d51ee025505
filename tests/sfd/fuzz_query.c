/*
 * Fuzz target: sfd's query request decoder and answers, against a daemon
 * context holding one job with a closed window (so REPORT, RANKS and RECORD
 * reach real data). No sockets are involved.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sfd d;
static uv_loop_t loop;

static void setup(void)
{
    enum sfd_reject why;
    struct sfd_job *job;
    sf_schema schema;

    uv_loop_init(&loop);
    d.loop = &loop;
    sfd_config_default(&d.cfg);
    d.cfg.gates.warmup_steps = 0;
    d.cfg.gates.window_steps = 2;
    uv_timer_init(&loop, &d.tick);
    sfd_log_init(SFD_LOG_ERR);
    if (sf_schema_init_default(&schema, 1) < 0 ||
        sfd_job_find_or_create(&d, "fuzz-job", 0, 0, &job, &why) < 0 ||
        sfd_job_bind_shape(job, &schema, 2) < 0)
        abort();
    sf_schema_clear(&schema);
    int64_t dur[6] = {1000, 2000, 3000, 400, 500, 60};
    for (int64_t step = 0; step < 2; step++)
        for (uint32_t rank = 0; rank < 2; rank++) {
            sf_row row = {.step = step, .rank = rank, .d = dur};
            dur[rank] += 777;
            if (sfd_window_add(job, rank, &row, &why) < 0)
                abort();
        }
    if (sfd_job_latest_report(job) == NULL) /* the window must have closed */
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    char *text = NULL;
    size_t len;
    struct sfd_query_err err;
    if (!ready) {
        setup();
        ready = 1;
    }
    if (sfd_query_answer(&d, 1000, size > 0 && (data[0] & 1), data, size, &text, &len, &err) == 0)
        free(text);
    return 0;
}

/*
 * History store benchmark (figures in docs/PERFORMANCE.md, "Durable history"):
 * write throughput of sfd's SQLite store in reports/s beside the disk's own
 * append rate, and the event loop's worst stall while reports are written
 * through the writer thread, beside the same loop with history off and with
 * the same writes done inline on the loop.
 *   bench_history DIR [SECONDS]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "history.h"
#include "history_codec.h"
#include "sfd.h"

#define BATCH 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The report of a dense window of 8 ranks x 100 steps x 6 stages, the size
 * sfd writes for a typical single-node job. */
static sf_report *make_report(void)
{
    sf_schema schema;
    sf_gates gates;
    sf_gates_default(&gates);
    gates.warmup_steps = 0;
    if (sf_schema_init_default(&schema, 1) < 0)
        exit(1);
    uint32_t S = schema.n_stages, world = 8, steps = 100;
    sf_window_meta meta = {.index = 0, .world_size = world};
    sf_window_range(0, 0, gates.window_steps, &meta.first_step, &meta.last_step);
    sf_row *rows = calloc((size_t)world * steps, sizeof(*rows));
    int64_t *d = calloc((size_t)world * steps * S, sizeof(*d));
    srand(7);
    for (uint32_t i = 0; i < world * steps; i++) {
        for (uint32_t k = 0; k < S; k++)
            d[(size_t)i * S + k] = 1000000 * (k + 1) + rand() % 200000;
        rows[i] = (sf_row){.step = i / world, .rank = i % world, .d = d + (size_t)i * S};
    }
    sf_report *r = NULL;
    if (sf_report_from_rows(&schema, &meta, rows, (size_t)world * steps, &gates, &r) < 0)
        exit(1);
    free(rows);
    free(d);
    sf_schema_clear(&schema);
    return r;
}

static void clear_store(const char *dir)
{
    char p[4200];
    static const char *const suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s%s", dir, SFD_HISTORY_FILE, suffix[i]);
        unlink(p);
    }
}

/* ---- throughput ---------------------------------------------------------------- */

/* The anchor: the same bytes appended to a plain file, fdatasync per batch
 * (what a commit costs at most) and without (the page cache). */
static double append_rate(const char *dir, const uint8_t *body, size_t len, double secs, bool sync)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/anchor.bin", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        exit(1);
    uint64_t n = 0;
    double t0 = now_s();
    while (now_s() - t0 < secs) {
        for (int i = 0; i < BATCH; i++, n++)
            if (write(fd, body, len) != (ssize_t)len)
                exit(1);
        if (sync)
            fdatasync(fd);
        if (n % 8192 == 0 && ftruncate(fd, 0) < 0) /* bounded file */
            exit(1);
    }
    double rate = (double)n / (now_s() - t0);
    close(fd);
    unlink(p);
    return rate;
}

static double store_rate(const char *dir, const uint8_t *body, size_t len, double secs,
                         uint64_t max_bytes, uint64_t *ret_evicted)
{
    char p[4200];
    struct sfd_store *s;
    const char *err;
    clear_store(dir);
    snprintf(p, sizeof p, "%s/%s", dir, SFD_HISTORY_FILE);
    if (sfd_store_open(p, max_bytes, &s, &err) < 0) {
        fprintf(stderr, "bench_history: %s: %s\n", p, err);
        exit(1);
    }
    struct sfd_store_key keys[BATCH];
    const uint8_t *bodies[BATCH];
    size_t lens[BATCH];
    uint64_t n = 0, evicted = 0;
    double t0 = now_s();
    while (now_s() - t0 < secs) {
        for (int i = 0; i < BATCH; i++, n++) {
            keys[i] = (struct sfd_store_key){SFD_HISTORY_REPORT, 1000, "bench", 0, (int64_t)n};
            bodies[i] = body;
            lens[i] = len;
        }
        if (sfd_store_put(s, keys, bodies, lens, BATCH, &evicted) < 0)
            exit(1);
    }
    double rate = (double)n / (now_s() - t0);
    sfd_store_close(s);
    clear_store(dir);
    *ret_evicted = evicted;
    return rate;
}

/* ---- loop stall ------------------------------------------------------------------ */

enum mode { MODE_OFF, MODE_THREAD, MODE_INLINE };

struct stall {
    struct sfd *d;
    struct sfd_job *job;
    sf_report *report;
    enum mode mode;
    struct sfd_store *inline_store;
    uint32_t per_tick;
    uint64_t last_ns, worst_gap_ns, worst_put_ns, puts, ticks;
    uint64_t *gaps, *put_ns; /* samples, for the 99th percentiles */
    size_t n_gaps, n_puts, cap;
    double until;
    uv_timer_t timer;
};

static void put_inline(struct stall *st)
{
    uint8_t *body;
    size_t len;
    if (sfd_report_pack(st->report, &body, &len) < 0)
        exit(1);
    struct sfd_store_key k = {SFD_HISTORY_REPORT, 1000, "bench", 0, st->report->meta.index};
    const uint8_t *bodies[1] = {body};
    uint64_t ev = 0;
    sfd_store_put(st->inline_store, &k, bodies, &len, 1, &ev);
    free(body);
}

/* Every millisecond: how late this tick is, then a burst of reports. */
static void on_tick(uv_timer_t *t)
{
    struct stall *st = t->data;
    uint64_t now = uv_hrtime();
    if (st->last_ns != 0 && now - st->last_ns > st->worst_gap_ns)
        st->worst_gap_ns = now - st->last_ns;
    if (st->last_ns != 0 && st->n_gaps < st->cap)
        st->gaps[st->n_gaps++] = now - st->last_ns;
    st->ticks++;
    for (uint32_t i = 0; i < st->per_tick && st->mode != MODE_OFF; i++) {
        uint64_t a = uv_hrtime();
        st->report->meta.index++;
        if (st->mode == MODE_THREAD)
            sfd_history_put_report(st->d, st->job, st->report);
        else
            put_inline(st);
        uint64_t b = uv_hrtime();
        if (b - a > st->worst_put_ns)
            st->worst_put_ns = b - a;
        if (st->n_puts < st->cap)
            st->put_ns[st->n_puts++] = b - a;
        st->puts++;
    }
    st->last_ns = uv_hrtime();
    if (now_s() >= st->until)
        uv_timer_stop(t);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double p99_ms(uint64_t *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_u64);
    return (double)v[(n * 99) / 100] / 1e6;
}

static void stall_run(const char *dir, sf_report *report, enum mode mode, uint32_t per_tick,
                      double secs)
{
    static const char *const names[] = {"history off", "writer thread", "inline on loop"};
    static struct sfd d;
    uv_loop_t loop;
    enum sfd_reject why;
    struct stall st = {.d = &d, .report = report, .mode = mode, .per_tick = per_tick};
    memset(&d, 0, sizeof(d));
    clear_store(dir);
    uv_loop_init(&loop);
    d.loop = &loop;
    sfd_config_default(&d.cfg);
    snprintf(d.cfg.state_dir, sizeof d.cfg.state_dir, "%s", dir);
    d.cfg.max_history_mb = 64;
    if (sfd_job_find_or_create(&d, "bench", 1000, 0, &st.job, &why) < 0)
        exit(1);
    if (mode == MODE_THREAD && (sfd_history_start(&d) < 0 || d.history == NULL))
        exit(1);
    if (mode == MODE_INLINE) {
        char p[4200];
        const char *err;
        snprintf(p, sizeof p, "%s/%s", dir, SFD_HISTORY_FILE);
        if (sfd_store_open(p, 64u << 20, &st.inline_store, &err) < 0)
            exit(1);
    }
    st.cap = (size_t)(secs * 1000 * (per_tick + 1)) + 1024;
    st.gaps = calloc(st.cap, sizeof(*st.gaps));
    st.put_ns = calloc(st.cap, sizeof(*st.put_ns));
    if (st.gaps == NULL || st.put_ns == NULL)
        exit(1);
    uv_timer_init(&loop, &st.timer);
    st.timer.data = &st;
    st.until = now_s() + secs;
    uv_timer_start(&st.timer, on_tick, 1, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&st.timer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    double t0 = now_s();
    struct sfd_history_stats hs = {0};
    if (mode == MODE_THREAD)
        sfd_history_get_stats(&d, &hs);
    sfd_history_stop(&d); /* drains the queue: off the loop's clock */
    double drain = now_s() - t0;
    sfd_store_close(st.inline_store);
    sfd_jobs_free_all(&d);
    uv_loop_close(&loop);
    clear_store(dir);
    printf("%-15s %9.0f %8.3f %8.3f %8.3f %8.3f %8llu", names[mode], (double)st.puts / secs,
           p99_ms(st.gaps, st.n_gaps), (double)st.worst_gap_ns / 1e6, p99_ms(st.put_ns, st.n_puts),
           (double)st.worst_put_ns / 1e6, (unsigned long long)st.ticks);
    free(st.gaps);
    free(st.put_ns);
    if (mode == MODE_THREAD)
        printf("   queue_dropped %llu, drain at stop %.3f s", (unsigned long long)hs.queue_dropped,
               drain);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_history DIR [SECONDS]\n");
        return 2;
    }
    const char *dir = argv[1];
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    sfd_log_init(SFD_LOG_WARNING);
    sf_report *report = make_report();
    uint8_t *body;
    size_t len;
    if (sfd_report_pack(report, &body, &len) < 0)
        return 1;
    printf("report body %zu bytes (8 ranks x 100 steps x 6 stages, dense); %.1f s per run\n\n", len,
           secs);
    printf("throughput, batches of %d        reports/s      MB/s\n", BATCH);
    double a = append_rate(dir, body, len, secs, false);
    printf("anchor: write(2), no sync      %11.0f %9.1f\n", a, a * (double)len / 1e6);
    a = append_rate(dir, body, len, secs, true);
    printf("anchor: write + fdatasync      %11.0f %9.1f\n", a, a * (double)len / 1e6);
    uint64_t ev = 0;
    a = store_rate(dir, body, len, secs, 1ull << 40, &ev);
    printf("store, unbounded               %11.0f %9.1f\n", a, a * (double)len / 1e6);
    a = store_rate(dir, body, len, secs, 8u << 20, &ev);
    printf("store, max_history_mb = 8      %11.0f %9.1f   (%llu evicted)\n", a,
           a * (double)len / 1e6, (unsigned long long)ev);

    printf("\nloop stall, 1 ms timer: gap between ticks and time in one put, in ms\n");
    printf("mode            reports/s  gap p99    worst  put p99    worst    ticks\n");
    for (uint32_t per_tick = 1; per_tick <= 16; per_tick *= 16) {
        printf("-- %u reports per tick\n", per_tick);
        stall_run(dir, report, MODE_OFF, per_tick, secs);
        stall_run(dir, report, MODE_THREAD, per_tick, secs);
        stall_run(dir, report, MODE_INLINE, per_tick, secs);
    }
    free(body);
    sf_report_free(report);
    return 0;
}

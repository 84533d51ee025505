/*
 * Writes the seed corpus of fuzz_side_nccl: framed NcclBatch datagrams like
 * the plugin ships (several windows, communicators and stages, kernel timing
 * present and absent), plus a hello and an oversized-count case.
 * Usage: gen_side_corpus DIR
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.pb-c.h"

static size_t frame(uint8_t *out, const Stagefrontier__ClientMessage *m)
{
    size_t n = stagefrontier__client_message__pack(m, out + 2);
    out[0] = (uint8_t)(n & 0xff);
    out[1] = (uint8_t)(n >> 8);
    return n + 2;
}

static size_t batch(uint8_t *out, int64_t step, const char *comm, const char *stage, size_t n_aggs,
                    uint64_t count, int timed)
{
    Stagefrontier__NcclAggregate aggs[8], *ptr[8];
    Stagefrontier__NcclBatch b = STAGEFRONTIER__NCCL_BATCH__INIT;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    static const char *colls[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                  "Send",      "Recv",      "AlltoAll",      "Reduce"};
    for (size_t i = 0; i < n_aggs && i < 8; i++) {
        stagefrontier__nccl_aggregate__init(&aggs[i]);
        aggs[i].collective = (char *)colls[i];
        aggs[i].datatype = "ncclFloat32";
        aggs[i].algorithm = i % 2 ? "TREE" : "RING";
        aggs[i].protocol = "SIMPLE";
        aggs[i].has_size_bucket = aggs[i].has_count = aggs[i].has_bytes = 1;
        aggs[i].size_bucket = (uint32_t)(10 + i);
        aggs[i].count = count;
        aggs[i].bytes = count << (10 + i);
        if (timed) {
            aggs[i].has_gpu_time_ns = aggs[i].has_timed_count = 1;
            aggs[i].gpu_time_ns = count * 1000;
            aggs[i].timed_count = count;
        }
        ptr[i] = &aggs[i];
    }
    b.step = step;
    b.comm_name = (char *)comm;
    b.has_comm_hash = b.has_comm_ranks = b.has_comm_nodes = 1;
    b.comm_hash = 0x1234;
    b.comm_ranks = 8;
    b.comm_nodes = 2;
    b.enclosing_stage = (char *)stage;
    b.n_aggregates = n_aggs;
    b.aggregates = ptr;
    b.has_dropped_events = 1;
    b.dropped_events = 3;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL;
    m.nccl = &b;
    return frame(out, &m);
}

/* A batch that carries only an enqueue point, as the plugin ships it. */
static size_t enqueue_point(uint8_t *out, int64_t step, const char *stage, uint64_t offset_ns)
{
    Stagefrontier__NcclBatch b = STAGEFRONTIER__NCCL_BATCH__INIT;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    b.step = step;
    b.comm_name = (char *)"ddp";
    b.enclosing_stage = (char *)stage;
    b.has_last_enqueue_ns = 1;
    b.last_enqueue_ns = offset_ns;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL;
    m.nccl = &b;
    return frame(out, &m);
}

/* An enqueue point with its kernel's start and end (0 for none). */
static size_t kernel_point(uint8_t *out, int64_t step, uint64_t offset_ns, uint64_t start_ns,
                           uint64_t end_ns, bool has_start, bool has_end)
{
    Stagefrontier__NcclBatch b = STAGEFRONTIER__NCCL_BATCH__INIT;
    Stagefrontier__ClientMessage m = STAGEFRONTIER__CLIENT_MESSAGE__INIT;
    b.step = step;
    b.comm_name = (char *)"ddp";
    b.enclosing_stage = (char *)"model.backward_cpu_wall";
    b.has_last_enqueue_ns = 1;
    b.last_enqueue_ns = offset_ns;
    b.has_kernel_start_ns = has_start;
    b.kernel_start_ns = start_ns;
    b.has_kernel_end_ns = has_end;
    b.kernel_end_ns = end_ns;
    m.body_case = STAGEFRONTIER__CLIENT_MESSAGE__BODY_NCCL;
    m.nccl = &b;
    return frame(out, &m);
}

static int put(const char *dir, const char *name, const uint8_t *buf, size_t n)
{
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n)
        return -1;
    return fclose(f);
}

int main(int argc, char **argv)
{
    static uint8_t buf[1 << 16];
    size_t n = 0;
    if (argc != 2)
        return 2;
    n = batch(buf, 5, "ddp", "model.backward_cpu_wall", 1, 40, 1);
    if (put(argv[1], "one_batch", buf, n) < 0)
        return 1;
    n = 0;
    for (int64_t s = 0; s < 40; s += 3)
        n += batch(buf + n, s, s % 2 ? "tp" : "dp", s % 4 ? "model.backward_cpu_wall" : "",
                   (size_t)(s % 8) + 1, (uint64_t)s + 1, (int)(s % 3));
    if (put(argv[1], "many_windows", buf, n) < 0)
        return 1;
    n = batch(buf, 9, "x", "model.fwd_loss_cpu_wall", 8, UINT64_MAX / 2, 1);
    n += batch(buf + n, 9, "x", "model.fwd_loss_cpu_wall", 8, UINT64_MAX / 2, 1);
    if (put(argv[1], "saturating", buf, n) < 0)
        return 1;
    n = batch(buf, 1, "warm", "model.backward_cpu_wall", 2, 1, 0);
    if (put(argv[1], "warmup_only", buf, n) < 0)
        return 1;
    /* Enqueue points: in range, in a stage that is not synchronizing, past
     * the stage's duration, past any stage's bound. */
    n = enqueue_point(buf, 6, "model.backward_cpu_wall", 400000);
    n += enqueue_point(buf + n, 7, "model.fwd_loss_cpu_wall", 10);
    n += enqueue_point(buf + n, 8, "model.backward_cpu_wall", UINT64_C(1) << 40);
    n += enqueue_point(buf + n, 9, "model.backward_cpu_wall", UINT64_MAX);
    if (put(argv[1], "enqueue_points", buf, n) < 0)
        return 1;
    /* Kernel times: in order, past the stage's duration (a GPU that starts
     * after the host left), before the enqueue, end before start, one
     * without the other, past any stage's bound. */
    n = kernel_point(buf, 6, 400000, 450000, 700000, true, true);
    n += kernel_point(buf + n, 7, 400000, 900000, 1200000, true, true);
    n += kernel_point(buf + n, 8, 400000, 300000, 700000, true, true);
    n += kernel_point(buf + n, 9, 400000, 500000, 450000, true, true);
    n += kernel_point(buf + n, 10, 400000, 500000, 0, true, false);
    n += kernel_point(buf + n, 11, 400000, 0, 500000, false, true);
    n += kernel_point(buf + n, 12, 400000, 500000, UINT64_C(1) << 43, true, true);
    return put(argv[1], "kernel_points", buf, n) < 0;
}

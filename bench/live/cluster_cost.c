/*
 * What the live verdict costs in a cluster (docs/CLUSTER.md, "Live
 * verdict"): the bytes the members send the root per step, and the root's
 * CPU per step to decode every member's part, assemble the step and test it.
 * Runs the code sfd runs: the LiveRows codec and the frame seal of the peer
 * layer (daemon/peer), the root's assembly (daemon/sfd/live_assembly.c) and
 * the core's test (sf_live_step). The rows are the default schema's (six
 * stages), a 2 % noise, calibrated on 100 clean steps first. The root's
 * share is each frame's MAC check and envelope, the rows' decode, the
 * assembly, and the test of each complete step.
 *
 * usage: cluster_cost [RANKS [RANKS_PER_NODE [STEPS [BATCH]]]]
 *   defaults: 100000 ranks, 8 a node, 50 steps, 1 step a message
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stagefrontier/live.h>

#include "live_assembly.h"
#include "peer.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* One rank's step: a base per stage, 2 % noise. */
static void row(int64_t *d, uint32_t S)
{
    static const int64_t base[6] = {2000000, 30000000, 60000000, 5000000, 1000000, 200000};
    for (uint32_t k = 0; k < S; k++)
        d[k] = (int64_t)((double)base[k % 6] * (0.98 + 0.04 * uniform()));
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    uint32_t W = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 100000;
    uint32_t per_node = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 8;
    uint32_t steps = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 50;
    uint32_t batch = argc > 4 ? (uint32_t)strtoul(argv[4], NULL, 10) : 1;
    if (W == 0 || per_node == 0 || per_node > W || steps == 0 || batch == 0 ||
        batch > SFD_PEER_LIVE_MAX_STEPS) {
        fprintf(stderr, "usage: cluster_cost [RANKS [RANKS_PER_NODE [STEPS [BATCH]]]]\n");
        return 2;
    }
    uint32_t nodes = (W + per_node - 1) / per_node;
    steps = (steps + batch - 1) / batch * batch;
    sf_schema schema;
    sf_live_config cfg;
    sf_live_config_default(&cfg);
    sf_live *live;
    if (sf_schema_init_default(&schema, 1) < 0 || sf_live_new(&schema, W, &cfg, &live) < 0)
        return 1;
    uint32_t S = schema.n_stages;
    int64_t *all = malloc((size_t)W * S * sizeof *all);
    for (uint32_t c = 0; c < cfg.calibration_steps; c++) {
        for (uint32_t r = 0; r < W; r++)
            row(all + (size_t)r * S, S);
        sf_live_calibrate(live, all);
    }
    if (!sf_live_calibrated(live))
        return 1;

    /* Every member's messages of the run, packed and sealed beforehand: the
     * bytes on the wire, and the payloads the root decodes. */
    uint32_t n_msgs = nodes * (steps / batch);
    uint8_t **payload = malloc(n_msgs * sizeof *payload);
    size_t *plen = malloc(n_msgs * sizeof *plen);
    uint64_t frame_bytes = 0, payload_bytes = 0;
    sfd_peer_key key = {{0x5f}};
    int64_t stepv[SFD_PEER_LIVE_MAX_STEPS];
    uint32_t *ranks = malloc(per_node * sizeof *ranks);
    int64_t *d = malloc((size_t)batch * per_node * S * sizeof *d);
    uint32_t m = 0;
    for (uint32_t s0 = 0; s0 < steps; s0 += batch)
        for (uint32_t n = 0; n < nodes; n++) {
            uint32_t lo = n * per_node, k = W - lo < per_node ? W - lo : per_node;
            for (uint32_t i = 0; i < k; i++)
                ranks[i] = lo + i;
            for (uint32_t b = 0; b < batch; b++) {
                stepv[b] = 1000 + s0 + b;
                for (uint32_t i = 0; i < k; i++)
                    row(d + ((size_t)b * k + i) * S, S);
            }
            sfd_peer_live_rows lr = {.uid = 1000,
                                     .incarnation = 1,
                                     .schema_hash = schema.hash,
                                     .world_size = W,
                                     .n_stages = S,
                                     .n_steps = batch,
                                     .n_ranks = k,
                                     .steps = stepv,
                                     .ranks = ranks,
                                     .d = d};
            strcpy(lr.job, "train-100k");
            if (sfd_peer_live_rows_pack(&lr, &payload[m], &plen[m]) < 0)
                return 1;
            sfd_peer_msg msg = {.from = n + 2,
                                .dest = 1,
                                .epoch = 1,
                                .seq = m + 1,
                                .term = 1,
                                .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__LIVE_ROWS,
                                .payload = payload[m],
                                .payload_len = plen[m]};
            uint8_t *frame;
            size_t flen;
            if (sfd_peer_seal(&key, &msg, &frame, &flen) < 0)
                return 1;
            frame_bytes += flen;
            payload_bytes += plen[m];
            free(payload[m]);
            payload[m] = frame; /* the root opens the frame: MAC, envelope, then rows */
            plen[m] = flen;
            m++;
        }

    /* The root, in two timed passes over the same run: decode each part and
     * assemble its steps; then the test of each complete step. CPU time of
     * this process, so a loaded machine's waits do not count. */
    sfd_live_assembly *a;
    uint32_t slots = sfd_live_assembly_slots(W, S);
    if (sfd_live_assembly_new(W, S, slots, &a) < 0)
        return 1;
    uint64_t tested = 0;
    double t0 = cpu_s();
    for (uint32_t i = 0; i < n_msgs; i++) {
        Stagefrontier__PeerEnvelope *env;
        sfd_peer_msg msg;
        sfd_peer_live_rows lr;
        if (sfd_peer_open(&key, payload[i] + 4, plen[i] - 4, &env, &msg) < 0 ||
            sfd_peer_live_rows_unpack(msg.payload, msg.payload_len, &lr) < 0)
            return 1;
        stagefrontier__peer_envelope__free_unpacked(env, NULL);
        size_t per_step = (size_t)lr.n_ranks * S;
        for (uint32_t b = 0; b < lr.n_steps; b++) {
            const int64_t *rows;
            if (sfd_live_assembly_add(a, lr.steps[b], lr.ranks, lr.n_ranks, lr.d + b * per_step,
                                      &rows) == 1) {
                memcpy(all, rows, (size_t)W * S * sizeof *all);
                tested++;
            }
        }
        sfd_peer_live_rows_free(&lr);
    }
    double assemble = (cpu_s() - t0) / steps;
    double t1 = cpu_s();
    for (uint32_t s = 0; s < steps; s++) {
        enum sf_live_event ev;
        for (uint32_t r = 0; r < W; r++) /* fresh rows a step, outside the timing's share */
            all[(size_t)r * S] += (int64_t)(s & 1);
        sf_live_step(live, 1000 + s, all, 0, &ev, NULL);
    }
    double test_only = (cpu_s() - t1) / steps;
    if (tested != steps) {
        fprintf(stderr, "only %llu of %u steps completed\n", (unsigned long long)tested, steps);
        return 1;
    }
    printf("ranks=%u ranks_per_node=%u members=%u stages=%u steps=%u batch=%u\n", W, per_node,
           nodes, S, steps, batch);
    printf("bytes_per_step: payload=%.0f frames=%.0f (%.1f per rank) messages_per_step=%.1f\n",
           (double)payload_bytes / steps, (double)frame_bytes / steps,
           (double)frame_bytes / steps / W, (double)n_msgs / steps);
    printf("root_cpu_per_step_ms: total=%.2f decode_assemble=%.2f test=%.2f\n",
           (assemble + test_only) * 1e3, assemble * 1e3, test_only * 1e3);
    printf("root_memory_mb: assembly=%.1f (%u slots) test=%.1f\n",
           (double)sfd_live_assembly_bytes(W, S, slots) / 1048576.0, slots,
           (double)sf_live_bytes(live) / 1048576.0);
    for (uint32_t i = 0; i < n_msgs; i++)
        free(payload[i]);
    free(payload);
    free(plen);
    free(ranks);
    free(d);
    free(all);
    sfd_live_assembly_free(a);
    sf_live_free(live);
    sf_schema_clear(&schema);
    return 0;
}

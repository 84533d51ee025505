/*
 * Writes the seed corpora of the peer fuzz targets: sealed frames of every
 * message type, packed summaries (mergeable and dense) and capture requests
 * and outcomes. Run by hand:
 * peer_corpus_gen tests/fuzz/corpus
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

static const sfd_peer_key fuzz_key = {{0x5f}};

static void put(const char *dir, const char *name, uint8_t lead, const uint8_t *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        exit(1);
    if (lead != 0xff)
        fputc(lead, f);
    fwrite(p, 1, n, f);
    fclose(f);
}

static sf_summary *sample(bool dense)
{
    sf_schema sc;
    sf_schema_init_default(&sc, 1);
    sf_window_meta meta = {.index = 3, .first_step = 320, .last_step = 419, .world_size = 4};
    int64_t d[4 * 3 * 6];
    sf_row rows[12];
    for (int i = 0; i < 12; i++) {
        for (int s = 0; s < 6; s++)
            d[i * 6 + s] = 2000000 * (i % 4 + 1) + 37 * s + 1000 * (i / 4);
        rows[i] = (sf_row){.step = 320 + i / 4,
                           .rank = (uint32_t)(i % 4),
                           .d = &d[i * 6],
                           .role = i % 2 ? "x" : ""};
    }
    sf_summary *s = NULL;
    sf_summary_build(&sc, &meta, rows, 12, dense, &s);
    sf_schema_clear(&sc);
    return s;
}

/* Capture requests and outcomes: packed for fuzz_peer_capture, and sealed
 * as frames (and bare payloads) for fuzz_peer_frame. */
static void captures(const char *dir, const char *fr)
{
    char cp[4096];
    snprintf(cp, sizeof cp, "%s/fuzz_peer_capture", dir);
    sfd_peer_capture_request q = {.id = 4242,
                                  .n_ranks = 2,
                                  .ranks = {5, 1},
                                  .control_rank = 1,
                                  .steps = 5,
                                  .automatic = true,
                                  .window = 7,
                                  .created_at_ms = 1700000000000};
    snprintf(q.job, sizeof q.job, "job-7");
    snprintf(q.reason, sizeof q.reason, "route: rank 5 led the routed stage for 2 windows");
    sfd_peer_capture_result r = {.id = 4242,
                                 .rank = 5,
                                 .state = STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__DONE,
                                 .node = 3,
                                 .first_step = 80,
                                 .last_step = 84,
                                 .started_at_ms = 1700000000100,
                                 .finished_at_ms = 1700000000900};
    snprintf(r.job, sizeof r.job, "job-7");
    snprintf(r.text, sizeof r.text, "/var/lib/sf/captures/job-7-rank5.json.gz");
    uint8_t *b;
    size_t l;
    sfd_peer_capture_request_pack(&q, &b, &l);
    put(cp, "request", 0xff, b, l);
    put(fr, "capture_request_payload", 1, b, l);
    sfd_peer_msg m = {.from = 1,
                      .dest = 2,
                      .epoch = 9,
                      .seq = 6,
                      .term = 2,
                      .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__CAPTURE_REQUEST,
                      .payload = b,
                      .payload_len = l};
    uint8_t *frame;
    size_t flen;
    sfd_peer_seal(&fuzz_key, &m, &frame, &flen);
    put(fr, "capture_request", 0, frame, flen);
    free(frame);
    free(b);
    sfd_peer_capture_result_pack(&r, &b, &l);
    put(cp, "result_done", 0xff, b, l);
    put(fr, "capture_result_payload", 1, b, l);
    m.type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__CAPTURE_RESULT;
    m.from = 3;
    m.dest = 1;
    m.payload = b;
    m.payload_len = l;
    sfd_peer_seal(&fuzz_key, &m, &frame, &flen);
    put(fr, "capture_result", 0, frame, flen);
    free(frame);
    free(b);
    r.state = STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__NOT_CONNECTED;
    r.node = 0;
    r.first_step = r.last_step = -1;
    snprintf(r.text, sizeof r.text, "no node hosts the rank");
    sfd_peer_capture_result_pack(&r, &b, &l);
    put(cp, "result_not_connected", 0xff, b, l);
    free(b);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char fr[4096], su[4096];
    snprintf(fr, sizeof fr, "%s/fuzz_peer_frame", argv[1]);
    snprintf(su, sizeof su, "%s/fuzz_peer_summary", argv[1]);
    for (int dense = 0; dense < 2; dense++) {
        sf_summary *s = sample(dense);
        uint8_t *buf;
        size_t len;
        sfd_peer_summary_pack(s, "job-7", dense, 2, &buf, &len);
        put(su, dense ? "dense" : "mergeable", 0xff, buf, len);
        sfd_peer_msg m = {.from = 2,
                          .dest = 1,
                          .epoch = 9,
                          .seq = 4,
                          .term = 2,
                          .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__SUMMARY,
                          .payload = buf,
                          .payload_len = len};
        uint8_t *frame;
        size_t flen;
        sfd_peer_seal(&fuzz_key, &m, &frame, &flen);
        put(fr, dense ? "summary_dense" : "summary", 0, frame, flen);
        Stagefrontier__Report r = STAGEFRONTIER__REPORT__INIT;
        r.job_id = "job-7";
        r.window = 3;
        r.root_id = 1;
        r.root_term = 2;
        r.merged.data = buf;
        r.merged.len = len;
        uint8_t *rb;
        size_t rl;
        sfd_peer_pack(&r.base, &rb, &rl);
        put(fr, dense ? "report_payload_dense" : "report_payload", 1, rb, rl);
        free(rb);
        free(frame);
        free(buf);
        sf_summary_free(s);
    }
    Stagefrontier__Heartbeat hb = STAGEFRONTIER__HEARTBEAT__INIT;
    Stagefrontier__WindowKey k = STAGEFRONTIER__WINDOW_KEY__INIT, *kp = &k;
    k.job_id = "job-7";
    k.window = 3;
    hb.node_id = 2;
    hb.term = 2;
    hb.has_root_id = hb.has_is_root = true;
    hb.root_id = 2;
    hb.is_root = true;
    hb.n_pending = 1;
    hb.pending = &kp;
    hb.has_epoch_seen = hb.has_epoch_closed = true;
    hb.epoch_seen = 9;
    hb.epoch_closed = true;
    uint8_t *b;
    size_t l;
    sfd_peer_pack(&hb.base, &b, &l);
    put(fr, "heartbeat_payload", 1, b, l);
    sfd_peer_msg m = {.from = 2,
                      .dest = 1,
                      .epoch = 9,
                      .seq = 5,
                      .term = 2,
                      .type = STAGEFRONTIER__PEER_ENVELOPE__TYPE__HEARTBEAT,
                      .payload = b,
                      .payload_len = l};
    uint8_t *frame;
    size_t flen;
    sfd_peer_seal(&fuzz_key, &m, &frame, &flen);
    put(fr, "heartbeat", 0, frame, flen);
    free(frame);
    free(b);
    /* a down heartbeat of a 10-member cluster: the root's view and its age */
    uint8_t view[2] = {0xff, 0x02};
    hb.node_id = 9; /* 1 + 9 % cap = 10 members in the fuzz target */
    hb.has_root_view = hb.has_root_age_ms = true;
    hb.root_view = (ProtobufCBinaryData){sizeof view, view};
    hb.root_age_ms = 300;
    hb.is_root = false;
    sfd_peer_pack(&hb.base, &b, &l);
    put(fr, "heartbeat_view_payload", 1, b, l);
    free(b);
    hb.has_root_view = false; /* an up heartbeat: the subtree's set */
    hb.has_subtree_live = true;
    hb.subtree_live = (ProtobufCBinaryData){sizeof view, view};
    sfd_peer_pack(&hb.base, &b, &l);
    put(fr, "heartbeat_subtree_payload", 1, b, l);
    free(b);
    captures(argv[1], fr);
    Stagefrontier__RootClaim c = STAGEFRONTIER__ROOT_CLAIM__INIT;
    c.candidate_id = 1;
    c.term = 4;
    sfd_peer_pack(&c.base, &b, &l);
    put(fr, "claim_payload", 1, b, l);
    free(b);
    return 0;
}

/*
 * Writes the seed corpora of the peer fuzz targets: sealed frames of every
 * message type, packed summaries (mergeable and dense) and capture requests
 * (one for a communication verdict) and outcomes, a summary with a
 * communication part, a dense one with group sync waits, each naming its job by the whole key
 * (owner uid, job id, incarnation), and the same with the owner or incarnation missing or out of
 * bounds; the live verdict's rows (LiveRows), good and out of bounds.
 * Run by hand: peer_corpus_gen tests/fuzz/corpus
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

/* The key of every seed's job: uid 1000's job-7, its second run. */
#define SEED_UID 1000u
#define SEED_INCARNATION 2u

/* The job key's fields as a bad seed sets them: absent, or a value. */
typedef struct owner_case {
    const char *name;
    bool has_uid;
    uint32_t uid;
    bool has_incarnation;
    uint32_t incarnation;
} owner_case;

static const owner_case owner_cases[] = {
    {"no_owner", false, 0, true, 1},
    {"no_incarnation", true, SEED_UID, false, 0},
    {"uid_none", true, UINT32_MAX, true, 1},
    {"uid_daemon", true, UINT32_MAX - 1, true, 1},
    {"incarnation_0", true, SEED_UID, true, 0},
    {"incarnation_past_max", true, SEED_UID, true, SF_MAX_INCARNATION + 1},
    {"root_last_incarnation", true, 0, true, SF_MAX_INCARNATION}, /* valid: the bounds */
};
#define N_OWNER_CASES (sizeof owner_cases / sizeof owner_cases[0])

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

/* A mergeable summary with a communication part: a synchronizing backward
 * stage, 4 ranks, rank 2 issuing its all-reduce 3 ms after its arrival,
 * rank 3 without issue marks. */
static void comm_seed(const char *su)
{
    static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                           "model.backward_cpu_wall", "step.other_cpu_wall"};
    sf_schema sc;
    sf_schema_init_sync(&sc, 1, 4, recorded, NULL, 1, 1u << 2);
    sf_window_meta meta = {.index = 3, .first_step = 320, .last_step = 419, .world_size = 4};
    int64_t d[12 * 5], lag[12];
    sf_row rows[12];
    for (int i = 0; i < 12; i++) {
        int r = i % 4;
        lag[i] = r == 2 ? 3000000 : 40000 + 1000 * r;
        int64_t *x = &d[i * 5];
        x[0] = 1000000, x[1] = 10000000, x[2] = 20000000 + 1000 * i, x[4] = 2000000;
        x[3] = 4000000;
        rows[i] = (sf_row){.step = 320 + i / 4,
                           .rank = (uint32_t)r,
                           .d = x,
                           .role = "",
                           .issue_lag = r == 3 ? NULL : &lag[i]};
    }
    sf_summary *s = NULL;
    if (sf_summary_build(&sc, &meta, rows, 12, false, &s) < 0)
        exit(1);
    sfd_window_key key = {.job = "job-7",
                          .uid = SEED_UID,
                          .incarnation = SEED_INCARNATION,
                          .window = s->meta.index,
                          .segment = s->meta.segment};
    uint8_t *buf;
    size_t len;
    sfd_peer_summary_pack(s, &key, false, 2, &buf, &len);
    put(su, "comm", 0xff, buf, len);
    free(buf);
    sf_summary_free(s);
    sf_schema_clear(&sc);
}

/* Summaries with a cohort part: 4 ranks, pp=2 x dp=2, a synchronizing
 * backward, rank 1 late in it; mergeable and dense. */
static void cohort_seed(const char *su)
{
    static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                           "model.backward_cpu_wall", "step.other_cpu_wall"};
    static const char *const layout[4] = {"pp=0/2,dp=0/2", "pp=0/2,dp=1/2", "pp=1/2,dp=0/2",
                                          "pp=1/2,dp=1/2"};
    sf_schema sc;
    sf_schema_init_sync(&sc, 1, 4, recorded, NULL, 1, 1u << 2);
    sf_window_meta meta = {.index = 3, .first_step = 320, .last_step = 419, .world_size = 4};
    sf_parallel par[4];
    for (int r = 0; r < 4; r++)
        if (sf_parallel_parse(layout[r], &par[r], NULL, 0) < 0)
            exit(1);
    int64_t d[12 * 5];
    sf_row rows[12];
    for (int i = 0; i < 12; i++) {
        int r = i % 4;
        int64_t *x = &d[i * 5];
        x[0] = 1000000, x[1] = 10000000 + 2000000 * (r / 2), x[4] = 2000000;
        x[2] = 20000000 + 1000 * i + (r == 1 ? 5000000 : 0);
        x[3] = r % 2 ? 0 : 5000000;
        rows[i] = (sf_row){
            .step = 320 + i / 4, .rank = (uint32_t)r, .d = x, .role = "", .parallel = &par[r]};
    }
    for (int dense = 0; dense < 2; dense++) {
        sf_summary *s = NULL;
        if (sf_summary_build(&sc, &meta, rows, 12, dense, &s) < 0 || s->cohort == NULL)
            exit(1);
        sfd_window_key key = {.job = "job-7",
                              .uid = SEED_UID,
                              .incarnation = SEED_INCARNATION,
                              .window = s->meta.index,
                              .segment = s->meta.segment};
        uint8_t *buf;
        size_t len;
        sfd_peer_summary_pack(s, &key, false, 2, &buf, &len);
        put(su, dense ? "cohort_dense" : "cohort", 0xff, buf, len);
        free(buf);
        sf_summary_free(s);
    }
    sf_schema_clear(&sc);
}

/* A dense summary with group sync waits: 4 ranks, tp=2 x dp=2, a forward
 * whose collectives span the tp pair (rank 1 slow, rank 0 waiting for it
 * at 3 sync points) and a backward that spans dp. */
static void waits_seed(const char *su)
{
    static const char *const recorded[] = {"data.next_wait", "model.fwd_loss_cpu_wall",
                                           "model.backward_cpu_wall", "step.other_cpu_wall"};
    static const char *const layout[4] = {"tp=0/2,dp=0/2", "tp=1/2,dp=0/2", "tp=0/2,dp=1/2",
                                          "tp=1/2,dp=1/2"};
    static const uint8_t groups[2] = {SF_SYNC_TP, SF_SYNC_DP};
    sf_schema sc;
    if (sf_schema_init_sync(&sc, 1, 4, recorded, NULL, 1, 3u << 1) < 0 ||
        sf_schema_set_sync_groups(&sc, groups, 2) < 0)
        exit(1);
    sf_window_meta meta = {.index = 3, .first_step = 320, .last_step = 419, .world_size = 4};
    sf_parallel par[4];
    for (int r = 0; r < 4; r++)
        if (sf_parallel_parse(layout[r], &par[r], NULL, 0) < 0)
            exit(1);
    int64_t d[12 * 6], w[12 * 4];
    sf_row rows[12];
    for (int i = 0; i < 12; i++) {
        int r = i % 4;
        int64_t *x = &d[i * 6], *y = &w[i * 4];
        x[0] = 1000000, x[1] = 20000000 + (r == 1 ? 4000000 : 0), x[2] = 1000000;
        x[3] = 30000000 + 1000 * i, x[4] = r == 3 ? 0 : 2000000, x[5] = 2000000;
        y[0] = r == 0 ? 4000000 : 100000, y[1] = x[4], y[2] = 3, y[3] = 1;
        rows[i] = (sf_row){.step = 320 + i / 4,
                           .rank = (uint32_t)r,
                           .d = x,
                           .role = "",
                           .sync_wait = y,
                           .parallel = &par[r]};
    }
    sf_summary *s = NULL;
    if (sf_summary_build(&sc, &meta, rows, 12, true, &s) < 0 || s->dense->sync_wait == NULL)
        exit(1);
    sfd_window_key key = {.job = "job-7",
                          .uid = SEED_UID,
                          .incarnation = SEED_INCARNATION,
                          .window = s->meta.index,
                          .segment = s->meta.segment};
    uint8_t *buf;
    size_t len;
    sfd_peer_summary_pack(s, &key, false, 2, &buf, &len);
    put(su, "waits_dense", 0xff, buf, len);
    free(buf);
    sf_summary_free(s);
    sf_schema_clear(&sc);
}

/* Capture requests and outcomes: packed for fuzz_peer_capture, and sealed
 * as frames (and bare payloads) for fuzz_peer_frame. */
static void captures(const char *dir, const char *fr)
{
    char cp[4096];
    snprintf(cp, sizeof cp, "%s/fuzz_peer_capture", dir);
    sfd_peer_capture_request q = {.uid = SEED_UID,
                                  .incarnation = SEED_INCARNATION,
                                  .id = 4242,
                                  .n_ranks = 2,
                                  .ranks = {5, 1},
                                  .control_rank = 1,
                                  .steps = 5,
                                  .automatic = true,
                                  .window = 7,
                                  .created_at_ms = 1700000000000};
    snprintf(q.job, sizeof q.job, "job-7");
    snprintf(q.reason, sizeof q.reason, "route: rank 5 led the routed stage for 2 windows");
    sfd_peer_capture_result r = {.uid = SEED_UID,
                                 .incarnation = SEED_INCARNATION,
                                 .id = 4242,
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
    /* a communication verdict's capture (valid), and the flag on an
     * operator's capture (refused) */
    sfd_peer_capture_request qc = q;
    qc.communication = true;
    snprintf(qc.reason, sizeof qc.reason,
             "communication: rank 5's collective in model.backward started late for 2 windows");
    uint8_t *bc;
    size_t lc;
    sfd_peer_capture_request_pack(&qc, &bc, &lc);
    put(cp, "request_communication", 0xff, bc, lc);
    free(bc);
    Stagefrontier__PeerCaptureRequest mo = STAGEFRONTIER__PEER_CAPTURE_REQUEST__INIT;
    mo.job_id = q.job;
    mo.has_owner_uid = mo.has_incarnation = true;
    mo.owner_uid = q.uid;
    mo.incarnation = q.incarnation;
    mo.capture_id = q.id;
    mo.n_ranks = q.n_ranks;
    mo.ranks = q.ranks;
    mo.steps = q.steps;
    mo.has_automatic = mo.has_communication = true;
    mo.automatic = false;
    mo.communication = true;
    sfd_peer_pack(&mo.base, &bc, &lc);
    put(cp, "request_communication_operator", 0xff, bc, lc);
    free(bc);
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
    /* the job key missing or out of bounds, on a request and on a result */
    for (size_t i = 0; i < N_OWNER_CASES; i++) {
        const owner_case *oc = &owner_cases[i];
        char name[128];
        Stagefrontier__PeerCaptureRequest mq = STAGEFRONTIER__PEER_CAPTURE_REQUEST__INIT;
        mq.job_id = q.job;
        mq.has_owner_uid = oc->has_uid;
        mq.owner_uid = oc->uid;
        mq.has_incarnation = oc->has_incarnation;
        mq.incarnation = oc->incarnation;
        mq.capture_id = q.id;
        mq.n_ranks = q.n_ranks;
        mq.ranks = q.ranks;
        mq.steps = q.steps;
        mq.reason = q.reason;
        sfd_peer_pack(&mq.base, &b, &l);
        snprintf(name, sizeof name, "request_%s", oc->name);
        put(cp, name, 0xff, b, l);
        snprintf(name, sizeof name, "capture_request_payload_%s", oc->name);
        put(fr, name, 1, b, l);
        free(b);
        Stagefrontier__PeerCaptureResult mr = STAGEFRONTIER__PEER_CAPTURE_RESULT__INIT;
        mr.job_id = r.job;
        mr.has_owner_uid = oc->has_uid;
        mr.owner_uid = oc->uid;
        mr.has_incarnation = oc->has_incarnation;
        mr.incarnation = oc->incarnation;
        mr.capture_id = r.id;
        mr.rank = r.rank;
        mr.state = STAGEFRONTIER__PEER_CAPTURE_RESULT__STATE__FAILED;
        mr.text = r.text;
        sfd_peer_pack(&mr.base, &b, &l);
        snprintf(name, sizeof name, "result_%s", oc->name);
        put(cp, name, 0xff, b, l);
        free(b);
    }
}

/* Summaries, reports and acknowledgements whose job key is missing or out
 * of bounds (and one at the bounds, valid). */
static void bad_keys(const char *su, const char *fr)
{
    sf_summary *s = sample(false);
    sfd_window_key key = {.job = "job-7",
                          .uid = SEED_UID,
                          .incarnation = SEED_INCARNATION,
                          .window = s->meta.index,
                          .segment = s->meta.segment};
    for (size_t i = 0; i < N_OWNER_CASES; i++) {
        const owner_case *oc = &owner_cases[i];
        char name[128];
        Stagefrontier__Summary *m = NULL;
        sfd_peer_summary_encode(s, &key, &m);
        m->has_owner_uid = oc->has_uid;
        m->owner_uid = oc->uid;
        m->has_incarnation = oc->has_incarnation;
        m->incarnation = oc->incarnation;
        uint8_t *b, *rb;
        size_t l, rl;
        sfd_peer_pack(&m->base, &b, &l);
        sfd_peer_summary_msg_free(m);
        snprintf(name, sizeof name, "key_%s", oc->name);
        put(su, name, 0xff, b, l);
        /* a report whose own key is bad, around a merged summary as bad */
        Stagefrontier__Report r = STAGEFRONTIER__REPORT__INIT;
        r.job_id = key.job;
        r.has_owner_uid = oc->has_uid;
        r.owner_uid = oc->uid;
        r.has_incarnation = oc->has_incarnation;
        r.incarnation = oc->incarnation;
        r.window = key.window;
        r.root_id = 1;
        r.root_term = 2;
        r.merged.data = b;
        r.merged.len = l;
        sfd_peer_pack(&r.base, &rb, &rl);
        snprintf(name, sizeof name, "report_payload_%s", oc->name);
        put(fr, name, 1, rb, rl);
        free(rb);
        free(b);
        Stagefrontier__SummaryAck a = STAGEFRONTIER__SUMMARY_ACK__INIT;
        a.job_id = key.job;
        a.has_owner_uid = oc->has_uid;
        a.owner_uid = oc->uid;
        a.has_incarnation = oc->has_incarnation;
        a.incarnation = oc->incarnation;
        a.window = key.window;
        a.has_report = a.report = true;
        sfd_peer_pack(&a.base, &b, &l);
        snprintf(name, sizeof name, "ack_payload_%s", oc->name);
        put(fr, name, 1, b, l);
        free(b);
    }
    sf_summary_free(s);
}

/* Catch-up after a restart: sealed requests and answers, their payloads,
 * and payloads out of bounds. */
static void catchups(const char *fr)
{
    static const struct {
        const char *name;
        uint32_t type, value;
    } cases[] = {
        {"catchup_request", STAGEFRONTIER__PEER_ENVELOPE__TYPE__CATCHUP_REQUEST, 16},
        {"catchup_request_keep_0", STAGEFRONTIER__PEER_ENVELOPE__TYPE__CATCHUP_REQUEST, 0},
        {"catchup_request_keep_past_max", STAGEFRONTIER__PEER_ENVELOPE__TYPE__CATCHUP_REQUEST,
         SFD_PEER_CATCHUP_KEEP_MAX + 1},
        {"catchup_done", STAGEFRONTIER__PEER_ENVELOPE__TYPE__CATCHUP_DONE, 3},
        {"catchup_done_past_max", STAGEFRONTIER__PEER_ENVELOPE__TYPE__CATCHUP_DONE,
         SFD_PEER_CATCHUP_REPORTS_MAX + 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Stagefrontier__CatchUpRequest q = STAGEFRONTIER__CATCH_UP_REQUEST__INIT;
        Stagefrontier__CatchUpDone d = STAGEFRONTIER__CATCH_UP_DONE__INIT;
        q.keep_windows = d.reports = cases[i].value;
        bool request = cases[i].type == STAGEFRONTIER__PEER_ENVELOPE__TYPE__CATCHUP_REQUEST;
        uint8_t *buf, *frame;
        size_t len, flen;
        if (sfd_peer_pack(request ? &q.base : &d.base, &buf, &len) < 0)
            exit(1);
        char name[128];
        snprintf(name, sizeof name, "%s_payload", cases[i].name);
        put(fr, name, 1, buf, len);
        sfd_peer_msg m = {.from = 3,
                          .dest = 1,
                          .epoch = 9,
                          .seq = 5,
                          .term = 2,
                          .type = cases[i].type,
                          .payload = buf,
                          .payload_len = len};
        if (sfd_peer_seal(&fuzz_key, &m, &frame, &flen) < 0)
            exit(1);
        put(fr, cases[i].name, 0, frame, flen);
        free(frame);
        free(buf);
    }
}

/* LiveRows: a member's part of two steps, and the same out of bounds. */
static void lives(const char *dir)
{
    char lv[4096];
    snprintf(lv, sizeof lv, "%s/fuzz_peer_live", dir);
    static const int64_t steps[2] = {40, 41};
    static const uint32_t ranks[3] = {2, 3, 7};
    int64_t d[2 * 3 * 4];
    for (size_t i = 0; i < 24; i++)
        d[i] = 1000 * (int64_t)i + 7;
    Stagefrontier__LiveRows m = STAGEFRONTIER__LIVE_ROWS__INIT;
    m.job_id = "job-7";
    m.has_owner_uid = m.has_incarnation = true;
    m.owner_uid = SEED_UID;
    m.incarnation = SEED_INCARNATION;
    m.schema_hash = 0x1234567890abcdefull;
    m.world_size = 8;
    m.n_stages = 4;
    m.n_steps = 2;
    m.steps = (int64_t *)steps;
    m.n_ranks = 3;
    m.ranks = (uint32_t *)ranks;
    m.n_d = 24;
    m.d = d;
    uint8_t *b;
    size_t l;
    sfd_peer_pack(&m.base, &b, &l);
    put(lv, "two_steps", 0xff, b, l);
    free(b);
    m.world_size = 4; /* covers the whole world: completes a step in the assembly */
    static const uint32_t all[4] = {0, 1, 2, 3};
    m.ranks = (uint32_t *)all;
    m.n_ranks = 4;
    m.n_stages = 3;
    sfd_peer_pack(&m.base, &b, &l);
    put(lv, "whole_world", 0xff, b, l);
    free(b);
    m.world_size = 2; /* ranks outside the world */
    sfd_peer_pack(&m.base, &b, &l);
    put(lv, "rank_outside_world", 0xff, b, l);
    free(b);
    m.world_size = 8;
    m.n_d = 23; /* short of steps x ranks x stages */
    sfd_peer_pack(&m.base, &b, &l);
    put(lv, "values_short", 0xff, b, l);
    free(b);
    m.n_d = 24;
    m.n_stages = 4;
    m.n_ranks = 3;
    m.ranks = (uint32_t *)ranks;
    d[5] = -1; /* a negative duration */
    sfd_peer_pack(&m.base, &b, &l);
    put(lv, "duration_negative", 0xff, b, l);
    free(b);
    d[5] = 5;
    m.has_owner_uid = false;
    sfd_peer_pack(&m.base, &b, &l);
    put(lv, "no_owner", 0xff, b, l);
    free(b);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char fr[4096], su[4096];
    snprintf(fr, sizeof fr, "%s/fuzz_peer_frame", argv[1]);
    snprintf(su, sizeof su, "%s/fuzz_peer_summary", argv[1]);
    catchups(fr);
    comm_seed(su);
    cohort_seed(su);
    waits_seed(su);
    for (int dense = 0; dense < 2; dense++) {
        sf_summary *s = sample(dense);
        sfd_window_key key = {.job = "job-7",
                              .uid = SEED_UID,
                              .incarnation = SEED_INCARNATION,
                              .window = s->meta.index,
                              .segment = s->meta.segment};
        uint8_t *buf;
        size_t len;
        sfd_peer_summary_pack(s, &key, dense, 2, &buf, &len);
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
        r.has_owner_uid = r.has_incarnation = true;
        r.owner_uid = SEED_UID;
        r.incarnation = SEED_INCARNATION;
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
    k.has_owner_uid = k.has_incarnation = true;
    k.owner_uid = SEED_UID;
    k.incarnation = SEED_INCARNATION;
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
    /* the root's window list naming a job without its owner */
    k.has_owner_uid = false;
    sfd_peer_pack(&hb.base, &b, &l);
    put(fr, "heartbeat_payload_no_owner", 1, b, l);
    free(b);
    k.has_owner_uid = true;
    /* an acknowledgement of a stored report */
    Stagefrontier__SummaryAck ack = STAGEFRONTIER__SUMMARY_ACK__INIT;
    ack.job_id = "job-7";
    ack.has_owner_uid = ack.has_incarnation = true;
    ack.owner_uid = SEED_UID;
    ack.incarnation = SEED_INCARNATION;
    ack.window = 3;
    ack.has_report = ack.report = true;
    sfd_peer_pack(&ack.base, &b, &l);
    put(fr, "ack_payload", 1, b, l);
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
    lives(argv[1]);
    bad_keys(su, fr);
    Stagefrontier__RootClaim c = STAGEFRONTIER__ROOT_CLAIM__INIT;
    c.candidate_id = 1;
    c.term = 4;
    sfd_peer_pack(&c.base, &b, &l);
    put(fr, "claim_payload", 1, b, l);
    free(b);
    return 0;
}

/*
 * Summary benchmark: plays thousands of synthetic sfd nodes over the real
 * peer protocol (length framing, HMAC envelopes, TCP on loopback) to one
 * real root node running in a child process, directly (a star) and through
 * the fan-in tree, and measures:
 *   - bytes per node per window against ranks per node (mergeable, dense);
 *   - the dense payload of 32 ranks x 40 steps;
 *   - root CPU per window (from /proc/PID/schedstat) and report latency
 *     (last summary written -> first report received) at a given rank count.
 * In tree mode the generator performs the inner nodes' merges itself (their
 * CPU is theirs, not the root's) and sends the root exactly what its direct
 * children would: each child's own summary and the merge of its subtree.
 *
 * usage: sf_bench_summaries [--ranks N] [--ranks-per-node R] [--steps T]
 *                           [--windows W] [--fanout F] [--mode tree|direct|both]
 * Any ranks and ranks per node: the last node holds the remainder. Whatever
 * stops the run (bad options, a cap, too few descriptors, the root dying, a
 * timeout) is said on stderr and exits 1.
 */
#define _GNU_SOURCE /* pipe2 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "node_internal.h"

#define T(x) STAGEFRONTIER__PEER_ENVELOPE__TYPE__##x
#define S 6
#define HB_MS 200
#define FT_MS 2000

typedef struct opts {
    uint32_t ranks, per_node, steps, windows, fanout;
    const char *mode;
} opts;

static sfd_peer_key key;
/* The generator's loop, run between heavy steps so its heartbeats keep the
 * root's majority lease (and our measurement) honest. */
static uv_loop_t *pump_loop;

static void pump(void)
{
    if (pump_loop != NULL)
        uv_run(pump_loop, UV_RUN_NOWAIT);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("sf_bench_summaries: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15u;
    x ^= x >> 29;
    return x;
}

/* One synthetic node's summary of one window: per_node ranks, `steps` steps. */
static sf_summary *node_summary(const sf_schema *sc, uint32_t world, uint32_t first_rank,
                                uint32_t n_ranks, uint32_t steps, int64_t window, bool dense)
{
    sf_window_meta meta = {.index = window,
                           .first_step = 20 + window * steps,
                           .last_step = 20 + (window + 1) * steps - 1,
                           .world_size = world};
    size_t n = (size_t)n_ranks * steps;
    int64_t *d = malloc(n * S * sizeof *d);
    sf_row *rows = malloc(n * sizeof *rows);
    if (d == NULL || rows == NULL)
        die("out of memory for %zu rows", n);
    size_t k = 0;
    for (uint32_t t = 0; t < steps; t++) {
        for (uint32_t r = 0; r < n_ranks; r++, k++) {
            uint32_t rank = first_rank + r;
            for (uint32_t s = 0; s < S; s++)
                d[k * S + s] =
                    100000 +
                    (int64_t)(mix(((uint64_t)t << 40) ^ ((uint64_t)rank << 8) ^ s) % 9000000);
            rows[k] = (sf_row){.step = meta.first_step + t, .rank = rank, .d = &d[k * S]};
        }
    }
    sf_summary *s = NULL;
    int r = sf_summary_build(sc, &meta, rows, n, dense, &s);
    if (r < 0)
        die("summary of ranks %u..%u: %s", first_rank, first_rank + n_ranks - 1, strerror(-r));
    free(d);
    free(rows);
    return s;
}

/* The job every synthetic node reports: one owner, one incarnation. */
static sfd_window_key bench_key(const sf_summary *s)
{
    sfd_window_key k = {.job = "bench-job",
                        .uid = 1000,
                        .incarnation = 1,
                        .window = s->meta.index,
                        .segment = s->meta.segment};
    return k;
}

static size_t frame_bytes(const sf_summary *s)
{
    uint8_t *p, *f;
    size_t n, fl;
    sfd_window_key wk = bench_key(s);
    if (sfd_peer_summary_pack(s, &wk, false, 2, &p, &n) < 0)
        die("cannot pack a summary");
    sfd_peer_msg m = {.from = 2,
                      .dest = 1,
                      .epoch = 1,
                      .seq = 1,
                      .term = 1,
                      .type = T(SUMMARY),
                      .payload = p,
                      .payload_len = n};
    if (sfd_peer_seal(&key, &m, &f, &fl) < 0)
        die("cannot seal a frame");
    free(p);
    free(f);
    return fl;
}

static void sizes(const opts *o)
{
    sf_schema sc;
    sf_schema_init_default(&sc, 1);
    printf("bytes per node per window (%u steps, %u stages, sealed frame):\n", o->steps, S);
    printf("%16s %14s %14s\n", "ranks_per_node", "mergeable_B", "dense_B");
    static const uint32_t rpn[] = {1, 4, 16, 32, 64, 256, 1024};
    for (size_t i = 0; i < sizeof rpn / sizeof rpn[0]; i++) {
        sf_summary *m = node_summary(&sc, 4096, 1024, rpn[i], o->steps, 0, false);
        sf_summary *d = node_summary(&sc, 4096, 1024, rpn[i], o->steps, 0, true);
        printf("%16u %14zu %14zu\n", rpn[i], frame_bytes(m), frame_bytes(d));
        sf_summary_free(m);
        sf_summary_free(d);
    }
    sf_summary *d = node_summary(&sc, 32, 0, 32, 40, 0, true);
    size_t b = frame_bytes(d);
    printf("dense 32 ranks x 40 steps: %zu B = %.3f MB (paper's evidence packet: 0.11 MB; "
           "ratio %.2f)\n",
           b, (double)b / 1e6, (double)b / 110000.0);
    sf_summary_free(d);
    sf_schema_clear(&sc);
}

/* ---- the root, in a child process -------------------------------------- */

static sf_gates gates;
static int commit_pipe[2]; /* root -> generator: the window index of each final report */

static void root_deliver(void *ctx, const sfd_window_key *k, uint32_t root, uint64_t term,
                         const sf_summary *merged)
{
    (void)ctx;
    (void)k;
    (void)root;
    (void)term;
    sf_report *r = NULL; /* what sfd does with it: the report */
    if (sf_report_compute(merged, &gates, &r) == 0)
        sf_report_free(r);
    int64_t w = k->window;
    if (write(commit_pipe[1], &w, sizeof w) != sizeof w)
        _exit(1);
}

static sfd_peer_config make_config(uint32_t n_nodes, uint16_t root_port, uint16_t gen_port,
                                   uint32_t fanout)
{
    sfd_peer_config cfg;
    sfd_peer_config_init(&cfg);
    cfg.node_id = 1;
    cfg.n_members = n_nodes + 1;
    cfg.members = calloc(cfg.n_members, sizeof *cfg.members);
    for (uint32_t i = 0; i < cfg.n_members; i++) {
        cfg.members[i].id = i + 1;
        strcpy(cfg.members[i].host, "127.0.0.1");
        cfg.members[i].port = i == 0 ? root_port : gen_port;
    }
    strcpy(cfg.key_file, "-");
    cfg.heartbeat_ms = HB_MS;
    cfg.failure_timeout_ms = FT_MS;
    cfg.fanout = fanout;
    cfg.summary_deadline_ms = 60000;
    /* Every synthetic member dials from 127.0.0.1 at once: the per-address
     * limit on unauthenticated connections is for real clusters. */
    cfg.preauth_max = cfg.preauth_per_addr = cfg.n_members + 16;
    /* ... and thousands of first heartbeats queue behind each other in one
     * generator process: give them a minute, not 2 s, to authenticate. */
    cfg.auth_timeout_ms = 60000;
    return cfg;
}

static void run_root(int listen_fd, sfd_peer_config *cfg)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    sf_gates_default(&gates);
    sfd_peer_hooks hooks = {.deliver = root_deliver};
    sfd_peer_node *node = NULL;
    int r = sfd_peer_node_new(&loop, cfg, &key, &hooks, &node);
    if (r < 0 || (r = sfd_peer_node_start(node, listen_fd)) < 0) {
        fprintf(stderr, "sf_bench_summaries: the root cannot start with %u members: %s\n",
                cfg->n_members, strerror(-r));
        _exit(1);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    _exit(0);
}

static uint64_t cpu_ns(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long ns = 0;
    bool ok = f != NULL && fscanf(f, "%llu", &ns) == 1;
    if (f)
        fclose(f);
    if (!ok)
        die("cannot read the root's CPU time from %s", path);
    return ns;
}

/* The root's CPU per second of wall time while the synthetic nodes run for
 * `seconds` (their heartbeats keep going on loop). */
static double root_cpu_ms_per_s(uv_loop_t *loop, pid_t pid, double seconds)
{
    uint64_t c0 = cpu_ns(pid);
    double t0 = now_s();
    while (now_s() - t0 < seconds)
        uv_run(loop, UV_RUN_ONCE);
    return (double)(cpu_ns(pid) - c0) / 1e6 / (now_s() - t0);
}

/* ---- the generator: synthetic nodes ------------------------------------- */

typedef struct synth {
    uint32_t id;
    uv_tcp_t tcp;
    uv_connect_t req;
    bool up;
    uint64_t seq;
    struct gen *g;
} synth;

typedef struct inconn {
    uv_tcp_t tcp;
    sfd_peer_framer f;
    struct gen *g;
} inconn;

typedef struct gen {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t hb;
    synth *nodes;
    uint32_t n;
    uint32_t connected;
    uint64_t epoch, term;
    bool root_ready;
    int64_t want_window;
    uint32_t reports_seen, reports_want;
    double first_report;
    uint32_t writes_pending;
    int64_t committed; /* last window the root made final */
    double committed_at;
    double last_write;
    uint64_t bytes_sent;
    pid_t root_pid;
    uint32_t fanout;     /* the root's tree; n + 1 or more is a star */
    uint32_t live_bytes; /* liveness sets: one bit per member, id order */
    uint8_t **subtree;   /* per direct child of the root: its subtree's set */
    uint8_t *scratch;
    uv_timer_t late;    /* the acknowledgements past a proposal's prompt bound */
    uint32_t late_from; /* the first node held back */
    int64_t late_window;
    uint32_t late_segment;
} gen;

typedef struct wreq {
    uv_write_t w;
    uint8_t *buf;
    gen *g;
    bool summary;
} wreq;

static void on_written(uv_write_t *w, int status)
{
    wreq *r = (wreq *)w;
    (void)status;
    r->g->writes_pending--;
    if (r->summary)
        r->g->last_write = now_s();
    free(r->buf);
    free(r);
}

static void synth_send(gen *g, synth *s, uint32_t type, const uint8_t *p, size_t n)
{
    if (!s->up)
        return;
    sfd_peer_msg m = {.from = s->id,
                      .dest = 1,
                      .epoch = g->epoch,
                      .seq = ++s->seq,
                      .term = g->term,
                      .type = type,
                      .payload = p,
                      .payload_len = n};
    wreq *r = calloc(1, sizeof *r);
    size_t fl;
    if (r == NULL || sfd_peer_seal(&key, &m, &r->buf, &fl) < 0)
        die("cannot seal a frame of %zu bytes for node %u", n, s->id);
    r->g = g;
    r->summary = type == T(SUMMARY);
    g->writes_pending++;
    g->bytes_sent += fl;
    uv_buf_t b = uv_buf_init((char *)r->buf, (unsigned)fl);
    int rc = uv_write(&r->w, (uv_stream_t *)&s->tcp, &b, 1, on_written);
    if (rc < 0)
        die("node %u: write: %s", s->id, uv_strerror(rc));
}

static void synth_send_msg(gen *g, synth *s, uint32_t type, const ProtobufCMessage *m)
{
    uint8_t *p;
    size_t n;
    if (sfd_peer_pack(m, &p, &n) < 0)
        die("cannot pack a message");
    synth_send(g, s, type, p, n);
    free(p);
}

/* Liveness as members send it (docs/CLUSTER.md, "Liveness"): before a root
 * is in force every node heartbeats it; then only the root's direct children
 * do, each with its subtree's set (a star: every node, with its own bit). */
static void subtrees_init(gen *g)
{
    g->live_bytes = (g->n + 1 + 7) / 8;
    g->scratch = calloc(g->live_bytes, 1);
    if (g->fanout > g->n)
        return;
    g->subtree = calloc(g->fanout, sizeof *g->subtree);
    for (uint32_t c = 0; c < g->fanout; c++)
        g->subtree[c] = calloc(g->live_bytes, 1);
    for (uint32_t p = 1; p <= g->n; p++) {
        uint32_t top = p;
        while ((top - 1) / g->fanout != 0)
            top = (top - 1) / g->fanout;
        g->subtree[top - 1][p / 8] |= (uint8_t)(1u << (p % 8)); /* member index p = id p + 1 */
    }
}

static void on_hb(uv_timer_t *t)
{
    gen *g = t->data;
    bool star = g->fanout > g->n;
    uint32_t senders = !g->root_ready || star ? g->n : g->fanout;
    for (uint32_t i = 0; i < senders; i++) {
        Stagefrontier__Heartbeat hb = STAGEFRONTIER__HEARTBEAT__INIT;
        hb.node_id = g->nodes[i].id;
        hb.term = g->term;
        hb.has_root_id = true;
        hb.root_id = g->root_ready ? 1 : 0;
        uint8_t *set = NULL;
        if (g->root_ready && star) {
            set = g->scratch;
            set[(i + 1) / 8] |= (uint8_t)(1u << ((i + 1) % 8));
        } else if (g->root_ready) {
            set = g->subtree[i];
        }
        if (set != NULL) {
            hb.has_subtree_live = true;
            hb.subtree_live = (ProtobufCBinaryData){g->live_bytes, set};
        }
        synth_send_msg(g, &g->nodes[i], T(HEARTBEAT), &hb.base);
        if (set == g->scratch)
            memset(g->scratch, 0, g->live_bytes);
    }
}

static void send_report_acks(gen *g, int64_t window, uint32_t segment, uint32_t from, uint32_t to)
{
    for (uint32_t i = from; i < to; i++) {
        Stagefrontier__SummaryAck a = STAGEFRONTIER__SUMMARY_ACK__INIT;
        a.job_id = "bench-job";
        a.window = window;
        a.segment = segment;
        a.has_report = a.report = true;
        synth_send_msg(g, &g->nodes[i], T(SUMMARY_ACK), &a.base);
    }
}

static void poll_commits(gen *g)
{
    int64_t w;
    while (read(commit_pipe[0], &w, sizeof w) == sizeof w) {
        g->committed = w;
        g->committed_at = now_s();
    }
}

static void on_late_acks(uv_timer_t *t)
{
    gen *g = t->data;
    poll_commits(g);
    if (g->committed < g->late_window)
        send_report_acks(g, g->late_window, g->late_segment, g->late_from, g->n);
}

/* Every member gets the proposal (down the tree) and tells the root it
 * holds it: the nodes below its prompt bound at once, the others only if
 * it is not final two heartbeat periods later, as sfd's members do
 * (docs/CLUSTER.md). Node i + 2 is member index i + 1. */
static void report_acks(gen *g, const Stagefrontier__Report *r)
{
    uint32_t bound = r->has_prompt_acks_below ? r->prompt_acks_below : g->n + 1;
    uint32_t prompt = bound > g->n ? g->n : (bound > 0 ? bound - 1 : 0);
    send_report_acks(g, r->window, r->segment, 0, prompt);
    g->late_from = prompt;
    g->late_window = r->window;
    g->late_segment = r->segment;
    uv_timer_start(&g->late, on_late_acks, 2 * HB_MS, 0);
}

static int on_root_frame(void *ctx, uint8_t *body, uint32_t len)
{
    inconn *c = ctx;
    gen *g = c->g;
    Stagefrontier__PeerEnvelope *env = NULL;
    sfd_peer_msg m;
    if (sfd_peer_open(&key, body, len, &env, &m) < 0 || m.dest < 2 || m.dest > g->n + 1)
        return 0;
    if (m.term > g->term)
        g->term = m.term;
    synth *s = &g->nodes[m.dest - 2];
    if (m.type == T(ROOT_CLAIM)) {
        Stagefrontier__RootVote v = STAGEFRONTIER__ROOT_VOTE__INIT;
        v.candidate_id = 1;
        v.term = m.term;
        v.granted = true;
        synth_send_msg(g, s, T(ROOT_VOTE), &v.base);
    } else if (m.type == T(HEARTBEAT)) {
        Stagefrontier__Heartbeat *hb =
            stagefrontier__heartbeat__unpack(NULL, m.payload_len, m.payload);
        if (hb != NULL && hb->is_root)
            g->root_ready = true;
        stagefrontier__heartbeat__free_unpacked(hb, NULL);
    } else if (m.type == T(REPORT)) {
        Stagefrontier__Report *r = stagefrontier__report__unpack(NULL, m.payload_len, m.payload);
        if (r != NULL && r->window == g->want_window) {
            if (g->reports_seen++ == 0) {
                g->first_report = now_s();
                report_acks(g, r);
            }
        }
        stagefrontier__report__free_unpacked(r, NULL);
    }
    stagefrontier__peer_envelope__free_unpacked(env, NULL);
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t n, uv_buf_t *b)
{
    (void)h;
    b->base = malloc(n);
    b->len = n;
}

static void on_inconn_closed(uv_handle_t *h)
{
    inconn *c = h->data;
    sfd_peer_framer_clear(&c->f);
    free(c);
}

/* A link the root closed (it redials links it has not heard on) is closed
 * here too, or the descriptors of its past links would pile up. */
static void on_root_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    inconn *c = st->data;
    if (n > 0)
        sfd_peer_framer_feed(&c->f, (const uint8_t *)b->base, (size_t)n, on_root_frame, c);
    else if (n < 0 && !uv_is_closing((uv_handle_t *)st))
        uv_close((uv_handle_t *)st, on_inconn_closed);
    free(b->base);
}

static void on_root_dial(uv_stream_t *server, int status)
{
    gen *g = server->data;
    if (status < 0)
        return;
    inconn *c = calloc(1, sizeof *c);
    uv_tcp_init(g->loop, &c->tcp);
    c->tcp.data = c;
    c->g = g;
    sfd_peer_framer_init(&c->f, SFD_PEER_FRAME_MAX);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) == 0)
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_root_read);
}

static void on_drain(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    (void)st;
    (void)n;
    free(b->base); /* outbound links: nothing comes back */
}

static void on_connected(uv_connect_t *req, int status)
{
    synth *s = req->data;
    if (status < 0)
        die("node %u: connect: %s", s->id, uv_strerror(status));
    s->up = true;
    s->g->connected++;
    uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_drain);
}

static void run_until(gen *g, bool (*done)(gen *), double timeout, const char *what)
{
    double end = now_s() + timeout;
    int status;
    while (!done(g)) {
        if (waitpid(g->root_pid, &status, WNOHANG) == g->root_pid)
            die("the root died (%s %d) while waiting for %s",
                WIFSIGNALED(status) ? "signal" : "exit status",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), what);
        if (now_s() > end)
            die("timed out after %.0f s waiting for %s", timeout, what);
        uv_run(g->loop, UV_RUN_ONCE);
    }
}

static bool all_connected(gen *g)
{
    static double last;
    if (now_s() - last > 2) {
        last = now_s();
        fprintf(stderr, "bench: %u/%u connected, root %s, term %llu\n", g->connected, g->n,
                g->root_ready ? "ready" : "not yet", (unsigned long long)g->term);
    }
    return g->connected == g->n && g->root_ready;
}
static bool reports_in(gen *g)
{
    poll_commits(g);
    return g->reports_seen >= g->reports_want && g->writes_pending == 0 &&
           g->committed == g->want_window;
}

/* Frames the root receives for one window: every node's own summary
 * (direct), or what its direct children send in the tree. */
static void window_frames(const opts *o, const sf_schema *sc, uint32_t n, int64_t w, bool tree,
                          sf_summary ***ret, uint32_t **ret_from, uint32_t *ret_n)
{
    sf_summary **own = calloc(n + 1, sizeof *own);
    for (uint32_t p = 1; p <= n; p++) {
        uint32_t first = (p - 1) * o->per_node;
        uint32_t count = o->ranks - first < o->per_node ? o->ranks - first : o->per_node;
        own[p] = node_summary(sc, o->ranks, first, count, o->steps, w, false);
        pump();
    }
    sf_summary **out = calloc(2 * n + 2, sizeof *out);
    uint32_t *from = calloc(2 * n + 2, sizeof *from);
    uint32_t k = 0;
    if (!tree) {
        for (uint32_t p = 1; p <= n; p++) {
            out[k] = own[p];
            from[k++] = p + 1;
        }
        free(own);
        *ret = out, *ret_from = from, *ret_n = k;
        return;
    }
    /* sub[p]: the merge of p's whole subtree, built bottom-up (positions
     * 1..n, root at 0; the parent of p is (p - 1) / fanout). */
    sf_summary **sub = calloc(n + 1, sizeof *sub);
    sf_summary **kids = calloc(n + 1, sizeof *kids);
    for (uint32_t p = n; p >= 1; p--) {
        pump();
        if (sf_summary_clone(own[p], &sub[p]) < 0 ||
            (kids[p] != NULL && sf_summary_merge(sub[p], kids[p]) < 0))
            die("cannot merge the subtree of position %u", p);
        uint32_t parent = (p - 1) / o->fanout;
        if (parent >= 1) {
            if (kids[parent] == NULL)
                kids[parent] = sub[p], sub[p] = NULL;
            else if (sf_summary_merge(kids[parent], sub[p]) < 0)
                die("cannot merge position %u into its parent", p);
        }
    }
    for (uint32_t p = 1; p <= n; p++) {
        if (p <= o->fanout) {
            out[k] = own[p], from[k++] = p + 1;
            if (kids[p] != NULL)
                out[k] = kids[p], from[k++] = p + 1;
        } else {
            sf_summary_free(own[p]);
            sf_summary_free(kids[p]);
        }
        sf_summary_free(sub[p]);
    }
    free(sub);
    free(kids);
    free(own);
    *ret = out, *ret_from = from, *ret_n = k;
}

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The anchor of the root's CPU per window, measured beside it: what any
 * root must spend on the same frames to authenticate (HMAC) and decode them
 * into summaries, with no socket, merge or report. */
static double decode_floor_ms(uint8_t **packed, const size_t *plen, const uint32_t *from,
                              uint32_t k)
{
    double total = 0;
    for (uint32_t i = 0; i < k; i++) {
        sfd_peer_msg m = {.from = from[i],
                          .dest = 1,
                          .epoch = 1,
                          .seq = 1,
                          .term = 1,
                          .type = T(SUMMARY),
                          .payload = packed[i],
                          .payload_len = plen[i]};
        uint8_t *frame;
        size_t fl;
        if (sfd_peer_seal(&key, &m, &frame, &fl) < 0)
            die("cannot seal a frame");
        double t0 = thread_cpu_ms();
        Stagefrontier__PeerEnvelope *env = NULL;
        sfd_peer_msg got;
        sf_summary *s = NULL;
        sfd_window_key wk;
        bool resent;
        if (sfd_peer_open(&key, frame + 4, fl - 4, &env, &got) < 0 ||
            sfd_peer_summary_unpack(got.payload, got.payload_len, &s, &wk, &resent) < 0)
            die("the anchor cannot open its own frame");
        sf_summary_free(s);
        stagefrontier__peer_envelope__free_unpacked(env, NULL);
        total += thread_cpu_ms() - t0;
        free(frame);
    }
    return total;
}

/* Nodes of the run: the last one holds what is left when the ranks are not
 * a multiple of the ranks per node. */
static uint32_t nodes_of(const opts *o)
{
    return (uint32_t)(((uint64_t)o->ranks + o->per_node - 1) / o->per_node);
}

static int run_mode(const opts *o, bool tree)
{
    uint32_t n = nodes_of(o);
    uint32_t fanout = tree ? o->fanout : n + 1;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) < 0 || listen(lfd, 4096) < 0)
        die("root listener on loopback: %s", strerror(errno));
    uint16_t root_port = ntohs(a.sin_port);

    if (pipe2(commit_pipe, O_NONBLOCK | O_CLOEXEC) < 0)
        die("pipe: %s", strerror(errno));
    uv_loop_t loop;
    uv_loop_init(&loop);
    gen g = {.loop = &loop, .n = n, .want_window = -1, .committed = -1};
    g.epoch = 1; /* a fresh root: any first epoch within the step */
    uv_tcp_init(&loop, &g.listener);
    g.listener.data = &g;
    struct sockaddr_in ga;
    uv_ip4_addr("127.0.0.1", 0, &ga);
    uv_tcp_bind(&g.listener, (struct sockaddr *)&ga, 0);
    if (uv_listen((uv_stream_t *)&g.listener, 4096, on_root_dial) < 0)
        die("generator listener on loopback failed");
    int gl = sizeof ga;
    uv_tcp_getsockname(&g.listener, (struct sockaddr *)&ga, &gl);

    sfd_peer_config cfg = make_config(n, root_port, ntohs(ga.sin_port), fanout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    g.root_pid = pid;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the generator */
        run_root(lfd, &cfg);
    }
    close(lfd);
    sfd_peer_config_clear(&cfg);

    g.nodes = calloc(n, sizeof *g.nodes);
    struct sockaddr_in ra;
    uv_ip4_addr("127.0.0.1", root_port, &ra);
    for (uint32_t i = 0; i < n; i++) {
        synth *s = &g.nodes[i];
        s->id = i + 2;
        s->g = &g;
        s->req.data = s;
        uv_tcp_init(&loop, &s->tcp);
        uv_tcp_nodelay(&s->tcp, 1);
        uv_tcp_connect(&s->req, &s->tcp, (struct sockaddr *)&ra, on_connected);
    }
    g.fanout = fanout;
    subtrees_init(&g);
    uv_timer_init(&loop, &g.hb);
    g.hb.data = &g;
    uv_timer_start(&g.hb, on_hb, 0, HB_MS);
    uv_timer_init(&loop, &g.late);
    g.late.data = &g;
    run_until(&g, all_connected, 120, "every node connected and a root elected");
    pump_loop = &loop;

    sf_schema sc;
    sf_schema_init_default(&sc, 1);
    printf("%s: %u ranks, %u nodes x %u ranks, %u steps/window, fanout %u\n",
           tree ? "tree" : "direct", o->ranks, n, o->per_node, o->steps, fanout);
    printf("%8s %10s %12s %14s %14s %14s %14s\n", "window", "frames", "bytes", "root_cpu_ms",
           "anchor_ms", "report_ms", "final_ms");
    double cpu_sum = 0, lat_sum = 0, fin_sum = 0, floor_sum = 0;
    for (uint32_t w = 0; w < o->windows; w++) {
        sf_summary **frames;
        uint32_t *from, k;
        window_frames(o, &sc, n, w, tree, &frames, &from, &k);
        g.want_window = w;
        g.reports_seen = 0;
        g.reports_want = tree ? (fanout < n ? fanout : n) : n;
        uint8_t **packed = calloc(k, sizeof *packed);
        size_t *plen = calloc(k, sizeof *plen);
        for (uint32_t i = 0; i < k; i++) {
            sfd_window_key wk = bench_key(frames[i]);
            if (sfd_peer_summary_pack(frames[i], &wk, false, from[i], &packed[i], &plen[i]) < 0)
                die("cannot pack the summary of node %u", from[i]);
            sf_summary_free(frames[i]);
            pump();
        }
        free(frames);
        double floor_ms = decode_floor_ms(packed, plen, from, k);
        uint64_t bytes0 = g.bytes_sent;
        uint64_t cpu0 = cpu_ns(pid);
        for (uint32_t i = 0; i < k; i++) {
            synth_send(&g, &g.nodes[from[i] - 2], T(SUMMARY), packed[i], plen[i]);
            free(packed[i]);
        }
        free(packed);
        free(plen);
        free(from);
        run_until(&g, reports_in, 120, "the window's final report");
        uint64_t cpu1 = cpu_ns(pid);
        double cpu_ms = (double)(cpu1 - cpu0) / 1e6, lat_ms = (g.first_report - g.last_write) * 1e3;
        if (lat_ms < 0)
            lat_ms = 0; /* the report came before the last write's callback ran */
        double fin_ms = (g.committed_at - g.last_write) * 1e3;
        printf("%8u %10u %12llu %14.1f %14.2f %14.1f %14.1f\n", w, k,
               (unsigned long long)(g.bytes_sent - bytes0), cpu_ms, floor_ms, lat_ms, fin_ms);
        cpu_sum += cpu_ms;
        floor_sum += floor_ms;
        lat_sum += lat_ms;
        fin_sum += fin_ms;
    }
    /* The root's idle cost of membership (heartbeats in and out), per second,
     * over 3 s (15 heartbeat periods), after 3 s in which the window's tail
     * is worked off: at thousands of members, the acknowledgements of its
     * report past the majority that made it final. */
    double tail = root_cpu_ms_per_s(&loop, pid, 3.0), idle = root_cpu_ms_per_s(&loop, pid, 3.0);
    printf("%s mean: root cpu %.1f ms/window (anchor: authenticate and decode the same frames "
           "%.2f ms), report pushed %.1f ms and final %.1f ms after the last summary; idle root "
           "cpu %.1f ms/s (%u members, heartbeats %s; %.1f ms/s in the 3 s before, with the "
           "window's tail)\n\n",
           tree ? "tree" : "direct", cpu_sum / o->windows, floor_sum / o->windows,
           lat_sum / o->windows, fin_sum / o->windows, idle, n + 1,
           fanout > n ? "from every member (a star)" : "from the root's children", tail);
    pump_loop = NULL;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(commit_pipe[0]);
    close(commit_pipe[1]);
    sf_schema_clear(&sc);
    return 0; /* the generator's handles die with the process */
}

/* A positive count up to `max`, or a loud exit. */
static uint32_t parse_count(const char *name, const char *text, uint32_t max)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v == 0 || v > max)
        die("%s must be an integer in 1..%u, not \"%s\"", name, max, text);
    return (uint32_t)v;
}

int main(int argc, char **argv)
{
    opts o = {
        .ranks = 100000, .per_node = 32, .steps = 100, .windows = 5, .fanout = 8, .mode = "both"};
    static const struct option lo[] = {{"ranks", required_argument, NULL, 'r'},
                                       {"ranks-per-node", required_argument, NULL, 'p'},
                                       {"steps", required_argument, NULL, 's'},
                                       {"windows", required_argument, NULL, 'w'},
                                       {"fanout", required_argument, NULL, 'f'},
                                       {"mode", required_argument, NULL, 'm'},
                                       {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'r':
            o.ranks = parse_count("--ranks", optarg, SF_MAX_RANKS);
            break;
        case 'p':
            o.per_node = parse_count("--ranks-per-node", optarg, SF_MAX_RANKS);
            break;
        case 's':
            o.steps = parse_count("--steps", optarg, SF_MAX_WINDOW_STEPS);
            break;
        case 'w':
            o.windows = parse_count("--windows", optarg, 1000);
            break;
        case 'f':
            o.fanout = parse_count("--fanout", optarg, SFD_PEER_MAX_MEMBERS);
            break;
        case 'm':
            o.mode = optarg;
            break;
        default:
            die("usage: sf_bench_summaries [--ranks N] [--ranks-per-node R] [--steps T] "
                "[--windows W] [--fanout F] [--mode tree|direct|both]");
        }
    }
    if (optind < argc)
        die("unexpected argument \"%s\"", argv[optind]);
    if (strcmp(o.mode, "tree") != 0 && strcmp(o.mode, "direct") != 0 && strcmp(o.mode, "both") != 0)
        die("--mode must be tree, direct or both, not \"%s\"", o.mode);
    if (o.per_node > o.ranks)
        die("--ranks-per-node %u exceeds --ranks %u", o.per_node, o.ranks);
    uint32_t members = nodes_of(&o) + 1;
    if (members > SFD_PEER_MAX_MEMBERS)
        die("%u ranks at %u per node make %u members, above the cap of %u: raise "
            "--ranks-per-node",
            o.ranks, o.per_node, members, SFD_PEER_MAX_MEMBERS);
    if (sodium_init() < 0)
        die("libsodium cannot start");
    /* The root dials every member and every member dials the root; the
     * generator holds both ends of the members' side. */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 2 * (rlim_t)members + 64)
        die("%u members need %u descriptors, the limit is %llu: raise the hard limit "
            "(ulimit -Hn) or --ranks-per-node",
            members, 2 * members + 64, (unsigned long long)rl.rlim_cur);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    randombytes_buf(key.k, sizeof key.k);
    sizes(&o);
    printf("\n");
    int rc = 0;
    if (strcmp(o.mode, "direct") == 0 || strcmp(o.mode, "both") == 0)
        rc |= run_mode(&o, false);
    if (strcmp(o.mode, "tree") == 0 || strcmp(o.mode, "both") == 0)
        rc |= run_mode(&o, true);
    return rc;
}

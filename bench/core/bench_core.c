/*
 * Accounting-core benchmark (docs/SPEC.md section 6, "accounting"): the frontier
 * pass in rank-stage cells per second and the full dense report, on seeded
 * synthetic matrices. It owns the matrix generator and the --dump format that
 * the NumPy reference reads; it never changes how the core computes anything.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stagefrontier/accounting.h>

#include "bench_rng.h"
#include "core_internal.h"

#define BENCH_STAGES 6
#define DUMP_MAGIC INT64_C(0x314d424346534653) /* "SFSFCBM1" little-endian */

struct shape {
    uint32_t ranks, steps, stages;
};

static const struct shape shapes[] = {{8, 100, 6}, {1024, 100, 6}, {16384, 100, 6}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

struct opts {
    const char *dump_dir; /* write each matrix here, then benchmark */
    const char *tsv_path; /* machine-readable results for run.sh */
    int reps;             /* best-of repetitions */
    uint64_t seed;
    uint32_t only_ranks; /* 0: every shape */
    bool report_only;    /* time sf_report_from_rows alone (for profilers) */
};

/* ---- the matrix ---------------------------------------------------------- */

/* A training-like step: per-stage base times (data, forward, backward,
 * callbacks, optimizer, residual), a fixed per-rank bias, per-cell noise,
 * rare spikes, and one slow rank whose data stalls the others show as extra
 * backward time (they wait for it in the gradient all-reduce). Layout
 * [steps][ranks][stages], int64 ns. */
static void generate(const struct shape *sh, uint64_t seed, int64_t *d)
{
    static const double base_ns[BENCH_STAGES] = {3e6, 40e6, 80e6, 1e6, 12e6, 0.4e6};
    uint64_t st = seed ^ ((uint64_t)sh->ranks << 32) ^ sh->steps;
    uint32_t S = sh->stages, R = sh->ranks, slow = (R * 5) / 8;
    double *bias = malloc((size_t)R * S * sizeof *bias);
    if (bias == NULL)
        abort();
    for (size_t i = 0; i < (size_t)R * S; i++)
        bias[i] = 1.0 + 0.03 * uniform_pm1(&st);
    for (uint32_t t = 0; t < sh->steps; t++) {
        int64_t stall =
            uniform_pm1(&st) < 0.4 ? (int64_t)(30e6 * (1.0 + 0.5 * uniform_pm1(&st))) : 0;
        for (uint32_t r = 0; r < R; r++) {
            int64_t *row = &d[((size_t)t * R + r) * S];
            for (uint32_t s = 0; s < S; s++) {
                double v = base_ns[s % BENCH_STAGES] * bias[(size_t)r * S + s] *
                           (1.0 + 0.02 * uniform_pm1(&st));
                if (uniform_pm1(&st) > 0.998)
                    v *= 3.0;
                row[s] = (int64_t)v;
            }
            if (r == slow)
                row[0] += stall;
            else
                row[2] += stall;
        }
    }
    free(bias);
}

static int dump_matrix(const char *dir, const struct shape *sh, const int64_t *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/matrix_%u_%u_%u.bin", dir, sh->ranks, sh->steps, sh->stages);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -errno;
    int64_t header[4] = {DUMP_MAGIC, sh->steps, sh->ranks, sh->stages};
    size_t cells = (size_t)sh->steps * sh->ranks * sh->stages;
    int r = 0;
    if (fwrite(header, sizeof header, 1, f) != 1 || fwrite(d, sizeof *d, cells, f) != cells)
        r = -EIO;
    if (fclose(f) != 0 && r == 0)
        r = -errno;
    return r;
}

/* ---- the frontier pass ---------------------------------------------------- */

/* Prefix sums over stages and the max over ranks per boundary, then the
 * advances, summed over steps: exactly the per-row work of the frontier.
 * Inlined with a constant S so the frontier stays in registers. */
static inline __attribute__((always_inline)) void
frontier_pass_s(const int64_t *d, uint32_t T, uint32_t R, uint32_t S, int64_t *adv)
{
    for (uint32_t t = 0; t < T; t++) {
        int64_t F[SF_MAX_STAGES] = {0};
        const int64_t *row = &d[(size_t)t * R * S];
        for (uint32_t r = 0; r < R; r++, row += S) {
            int64_t p = 0;
            for (uint32_t s = 0; s < S; s++) {
                p += row[s];
                F[s] = p > F[s] ? p : F[s];
            }
        }
        int64_t prev = 0;
        for (uint32_t s = 0; s < S; s++) {
            adv[s] += F[s] - prev;
            prev = F[s];
        }
    }
}

static void frontier_pass(const int64_t *d, uint32_t T, uint32_t R, uint32_t S, int64_t *adv)
{
    memset(adv, 0, S * sizeof *adv);
    if (S == 6)
        frontier_pass_s(d, T, R, 6, adv);
    else
        frontier_pass_s(d, T, R, S, adv);
}

/* ---- timing ---------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile int64_t sink;

/* Best per-call time of the frontier pass over reps measurements, each
 * repeating the pass enough times to last about 2 ms. */
static double time_frontier(const int64_t *d, const struct shape *sh, int reps, int64_t *adv)
{
    uint32_t T = sh->steps, R = sh->ranks, S = sh->stages;
    double t0 = now_s();
    frontier_pass(d, T, R, S, adv);
    double once = now_s() - t0;
    long inner = once > 0 ? (long)(2e-3 / once) + 1 : 1000;
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        t0 = now_s();
        for (long i = 0; i < inner; i++) {
            frontier_pass(d, T, R, S, adv);
            sink += adv[S - 1];
        }
        double per = (now_s() - t0) / (double)inner;
        best = per < best ? per : best;
    }
    return best;
}

/* The memory ceiling of the frontier pass: a plain sum over the same
 * matrix, timed the same way. Four accumulators keep it load-bound. */
static double time_stream(const int64_t *d, size_t cells, int reps)
{
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        double t0 = now_s();
        size_t i = 0;
        for (; i + 4 <= cells; i += 4) {
            s0 += d[i];
            s1 += d[i + 1];
            s2 += d[i + 2];
            s3 += d[i + 3];
        }
        for (; i < cells; i++)
            s0 += d[i];
        double dt = now_s() - t0;
        sink += s0 + s1 + s2 + s3;
        best = dt < best ? dt : best;
    }
    return best;
}

/* Best time of sf_summary_build (with the internal build flags, 0 for the
 * public call); the last summary is kept in *ret_last. */
static double time_summary(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                           size_t n_rows, bool dense, unsigned flags, int reps,
                           sf_summary **ret_last)
{
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        sf_summary *s = NULL;
        double t0 = now_s();
        int r = sf__summary_build(schema, meta, rows, n_rows, dense, flags, &s);
        double dt = now_s() - t0;
        if (r < 0) {
            fprintf(stderr, "bench_core: sf_summary_build: %s\n", strerror(-r));
            exit(1);
        }
        sf_summary_free(*ret_last);
        *ret_last = s;
        best = dt < best ? dt : best;
    }
    return best;
}

/* The report's second half alone: sf_report_compute on a dense summary. */
static double time_compute(const sf_summary *s, const sf_gates *gates, int reps)
{
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        sf_report *rep = NULL;
        double t0 = now_s();
        int r = sf_report_compute(s, gates, &rep);
        double dt = now_s() - t0;
        if (r < 0) {
            fprintf(stderr, "bench_core: sf_report_compute: %s\n", strerror(-r));
            exit(1);
        }
        sink += rep->steps;
        sf_report_free(rep);
        best = dt < best ? dt : best;
    }
    return best;
}

/* A floor for any exact dense report: the two median passes the design
 * requires (each rank's median over steps, each step's median over ranks,
 * per stage), on contiguous copies with the core's own sf_median_i64. Every
 * cell passes through two selections, whatever the rest of the layout. */
static double median_passes(const int64_t *d, const struct shape *sh, int64_t *scratch)
{
    uint32_t T = sh->steps, R = sh->ranks, S = sh->stages;
    int64_t acc = 0;
    double t0 = now_s();
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t k = 0; k < S; k++) {
            for (uint32_t t = 0; t < T; t++)
                scratch[t] = d[((size_t)t * R + r) * S + k];
            acc += sf_median_i64(scratch, T);
        }
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t k = 0; k < S; k++) {
            for (uint32_t r = 0; r < R; r++)
                scratch[r] = d[((size_t)t * R + r) * S + k];
            acc += sf_median_i64(scratch, R);
        }
    double dt = now_s() - t0;
    sink += acc;
    return dt;
}

static double time_median_floor(const int64_t *d, const struct shape *sh, int reps)
{
    size_t n = sh->ranks > sh->steps ? sh->ranks : sh->steps;
    int64_t *scratch = malloc(n * sizeof *scratch);
    if (scratch == NULL)
        return 0;
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        double dt = median_passes(d, sh, scratch);
        best = dt < best ? dt : best;
    }
    free(scratch);
    return best;
}

static double time_report(const sf_schema *schema, const sf_window_meta *meta, const sf_row *rows,
                          size_t n_rows, const sf_gates *gates, int reps, sf_report **ret_last)
{
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        sf_report *rep = NULL;
        double t0 = now_s();
        int r = sf_report_from_rows(schema, meta, rows, n_rows, gates, &rep);
        double dt = now_s() - t0;
        if (r < 0) {
            fprintf(stderr, "bench_core: sf_report_from_rows: %s\n", strerror(-r));
            exit(1);
        }
        best = dt < best ? dt : best;
        sf_report_free(*ret_last);
        *ret_last = rep;
    }
    return best;
}

/* ---- one shape --------------------------------------------------------------- */

struct result {
    double frontier_s, summary_s, report_s;
    double dense_build_s, compute_s; /* the report's two halves, timed apart */
    double median_floor_s;           /* the two median passes alone */
    double stream_s;                 /* a plain read of the matrix */
    int64_t adv[SF_MAX_STAGES];
    sf_report *report;
};

static void tsv_list(FILE *f, const int64_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%s%" PRId64, i ? "," : "", v[i]);
}

/* One line per shape, tab-separated, for run.sh: "c", ranks, steps, stages,
 * then seconds (frontier, mergeable summary, report, dense build, compute),
 * exposed ns, advances, rank-median gains, cohort-median gains (comma lists
 * in ns), the label bit set, then seconds (median passes, plain read). */
static void tsv_write(FILE *f, const struct shape *sh, const struct result *res)
{
    const sf_report *r = res->report;
    int64_t rm[SF_MAX_STAGES], co[SF_MAX_STAGES], adv[SF_MAX_STAGES];
    for (uint32_t k = 0; k < sh->stages; k++) {
        rm[k] = r->stages[k].gain_rank_median_ns;
        co[k] = r->stages[k].gain_cohort_median_ns;
        adv[k] = r->stages[k].advance_ns;
    }
    fprintf(f, "c\t%u\t%u\t%u\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%" PRId64 "\t", sh->ranks, sh->steps,
            sh->stages, res->frontier_s, res->summary_s, res->report_s, res->dense_build_s,
            res->compute_s, (int64_t)r->exposed_total_ns);
    tsv_list(f, adv, sh->stages);
    fputc('\t', f);
    tsv_list(f, rm, sh->stages);
    fputc('\t', f);
    tsv_list(f, co, sh->stages);
    fprintf(f, "\t%u\t%.9g\t%.9g\n", r->labels, res->median_floor_s, res->stream_s);
}

static int run_shape(const struct shape *sh, const struct opts *o, struct result *res)
{
    size_t n_rows = (size_t)sh->steps * sh->ranks;
    int64_t *d = malloc(n_rows * sh->stages * sizeof *d);
    sf_row *rows = calloc(n_rows, sizeof *rows);
    sf_schema schema;
    int r = sf_schema_init_default(&schema, 1);
    if (d == NULL || rows == NULL || r < 0) {
        free(d);
        free(rows);
        return r < 0 ? r : -ENOMEM;
    }
    generate(sh, o->seed, d);
    if (o->dump_dir && (r = dump_matrix(o->dump_dir, sh, d)) < 0) {
        fprintf(stderr, "bench_core: cannot write the matrix under %s: %s\n", o->dump_dir,
                strerror(-r));
        goto out;
    }
    for (size_t i = 0; i < n_rows; i++)
        rows[i] = (sf_row){.step = (int64_t)(i / sh->ranks),
                           .rank = (uint32_t)(i % sh->ranks),
                           .d = &d[i * sh->stages]};
    sf_window_meta meta = {.first_step = 0, .last_step = sh->steps - 1, .world_size = sh->ranks};
    sf_gates gates;
    sf_gates_default(&gates);
    if (gates.dense_max_ranks < sh->ranks)
        gates.dense_max_ranks = sh->ranks; /* dense mode at every size: all gains */
    frontier_pass(d, sh->steps, sh->ranks, sh->stages, res->adv);
    if (!o->report_only) {
        sf_summary *sum = NULL;
        /* The pass is short: more repetitions find a quiet moment on a shared machine. */
        res->frontier_s = time_frontier(d, sh, o->reps < 20 ? 20 : o->reps, res->adv);
        res->stream_s = time_stream(d, n_rows * sh->stages, o->reps < 20 ? 20 : o->reps);
        res->summary_s = time_summary(&schema, &meta, rows, n_rows, false, 0, o->reps, &sum);
        res->dense_build_s = time_summary(&schema, &meta, rows, n_rows, true, 0, o->reps, &sum);
        res->compute_s = time_compute(sum, &gates, o->reps);
        res->median_floor_s = time_median_floor(d, sh, o->reps);
        sf_summary_free(sum);
    }
    res->report_s = time_report(&schema, &meta, rows, n_rows, &gates, o->reps, &res->report);
    for (uint32_t k = 0; k < sh->stages; k++)
        if (res->adv[k] != res->report->stages[k].advance_ns) {
            fprintf(stderr, "bench_core: frontier pass and core disagree at stage %u\n", k);
            r = -EPROTO;
        }
out:
    sf_schema_clear(&schema);
    free(rows);
    free(d);
    return r;
}

/* ---- main ----------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out, "usage: bench_core [--dump DIR] [--tsv FILE] [--reps N] [--seed N] [--ranks N]\n"
                 "                  [--report-only]\n"
                 "Times the frontier pass, sf_summary_build (mergeable) and the dense\n"
                 "sf_report_from_rows at (ranks, steps, stages) = (8|1024|16384, 100, 6),\n"
                 "or at (N, 100, 6) alone with --ranks N (2 to 16384). The environment's\n"
                 "SF_CORE_ISA=generic|avx2|avx512 runs that form of the core's kernels.\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.reps = 5, .seed = 20260611};
    for (int i = 1; i < argc; i++) {
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(argv[i], "--report-only") == 0) {
            o->report_only = true;
            continue;
        }
        if (next == NULL)
            return -EINVAL;
        if (strcmp(argv[i], "--dump") == 0)
            o->dump_dir = next;
        else if (strcmp(argv[i], "--tsv") == 0)
            o->tsv_path = next;
        else if (strcmp(argv[i], "--reps") == 0)
            o->reps = atoi(next);
        else if (strcmp(argv[i], "--seed") == 0)
            o->seed = strtoull(next, NULL, 10);
        else if (strcmp(argv[i], "--ranks") == 0)
            o->only_ranks = (uint32_t)strtoul(next, NULL, 10);
        else
            return -EINVAL;
        i++;
    }
    bool ranks_ok = o->only_ranks == 0 || (o->only_ranks >= 2 && o->only_ranks <= 16384);
    return ranks_ok && o->reps >= 1 && o->reps <= 1000 ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse_args(argc, argv, &o) < 0) {
        usage(stderr);
        return 2;
    }
    FILE *tsv = o.tsv_path ? fopen(o.tsv_path, "w") : NULL;
    if (o.tsv_path && tsv == NULL) {
        perror(o.tsv_path);
        return 1;
    }
    printf("%-20s %13s %13s %13s %11s %11s %11s %11s\n", "ranks x steps x st", "frontier c/s",
           "read c/s", "summary c/s", "report ms", "=build ms", "+compute ms", "medians ms");
    /* --ranks N: that one shape, whether or not it is one of the three */
    struct shape only = {o.only_ranks, 100, 6};
    const struct shape *run = o.only_ranks ? &only : shapes;
    size_t n_run = o.only_ranks ? 1 : N_SHAPES;
    int rc = 0;
    for (size_t i = 0; i < n_run && rc == 0; i++) {
        const struct shape *sh = &run[i];
        struct result res = {0};
        if (run_shape(sh, &o, &res) < 0) {
            rc = 1;
            sf_report_free(res.report);
            break;
        }
        double cells = (double)sh->ranks * sh->steps * sh->stages;
        char name[64];
        snprintf(name, sizeof name, "%u x %u x %u", sh->ranks, sh->steps, sh->stages);
        if (o.report_only)
            printf("%-20s %13s %13s %13s %11.3f\n", name, "-", "-", "-", res.report_s * 1e3);
        else
            printf("%-20s %13.3e %13.3e %13.3e %11.3f %11.3f %11.3f %11.3f\n", name,
                   cells / res.frontier_s, cells / res.stream_s, cells / res.summary_s,
                   res.report_s * 1e3, res.dense_build_s * 1e3, res.compute_s * 1e3,
                   res.median_floor_s * 1e3);
        fflush(stdout);
        if (tsv)
            tsv_write(tsv, sh, &res);
        sf_report_free(res.report);
    }
    if (tsv && fclose(tsv) != 0)
        rc = 1;
    return rc;
}

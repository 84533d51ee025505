/*
 * `sfctl import kineto|nsys FILES...` (docs/IMPORT.md): one trace per rank in,
 * stage-matrix rows out, as a JSON Lines recording, a wide CSV, or straight
 * to the replay report. This file owns the command line, the checks across
 * files (ranks, jobs, empty stages) and the output; the format readers own
 * parsing and import_steps.c the reduction.
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "import.h"
#include "recording.h"
#include "sfctl.h"
#include "sfctl_args.h"
#include "text_escape.h"

struct import_opts {
    import_reader_fn read;
    const char *format;
    const char *out, *map_path, *rank_from, *job;
    bool csv, replay, allow_empty;
    struct sfctl_report_opts report;
    char **files;
    int n_files;
};

/* What the checks across files need of each file. */
struct file_summary {
    const char *path;
    int64_t rank;
    struct import_file_info info;
    int64_t t_min, t_max; /* step span on the file's clock */
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: sfctl import kineto FILE... [options]   (torch.profiler Chrome traces, .gz ok)\n"
        "       sfctl import nsys FILE.sqlite... [options] (nsys export --type sqlite)\n"
        "options:\n"
        "  -o FILE             write FILE (.csv: wide CSV, else JSON Lines); default stdout\n"
        "  --csv               wide CSV on standard output\n"
        "  --map FILE          stage mapping (INI); default: the built-in mapping\n"
        "  --rank-from REGEX   rank from the file name: the first group's digits\n"
        "  --job ID            job id written in the recording header\n"
        "  --allow-empty-stage accept a mapped stage that no trace fills\n"
        "  --replay            print the replay report instead of rows; then also\n"
        "                      --json --window-steps N --warmup-steps N --tau X --gates FILE\n"
        "                      --baseline FILE --baseline-windows N\n");
}

/* The import's own options; the report options are replay's. */
static int import_opt(struct import_opts *o, int c, const char *arg)
{
    switch (c) {
    case 'o':
        o->out = arg;
        return 0;
    case 'm':
        o->map_path = arg;
        return 0;
    case 'r':
        o->rank_from = arg;
        return 0;
    case 'J':
        o->job = arg;
        return 0;
    case 'c':
        o->csv = true;
        return 0;
    case 'e':
        o->allow_empty = true;
        return 0;
    case 'R':
        o->replay = true;
        return 0;
    default:
        return -EINVAL;
    }
}

static int parse_opts(int argc, char **argv, struct import_opts *o)
{
    static const struct option longopts[] = {
        {"map", required_argument, NULL, 'm'},
        {"rank-from", required_argument, NULL, 'r'},
        {"job", required_argument, NULL, 'J'},
        {"csv", no_argument, NULL, 'c'},
        {"allow-empty-stage", no_argument, NULL, 'e'},
        {"replay", no_argument, NULL, 'R'},
        SFCTL_REPORT_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct sfctl_args p; /* the usage is printed by the caller */
    sfctl_args_init(&p, "sfctl import", NULL, argc, argv, "", longopts);
    if (argc < 2) {
        sfctl_args_fail(&p, "name the trace format: kineto or nsys");
        return -EINVAL;
    }
    o->format = argv[1];
    if (strcmp(argv[1], "kineto") == 0)
        o->read = sfctl_import_kineto_read;
    else if (strcmp(argv[1], "nsys") == 0)
        o->read = sfctl_import_nsys_read;
    else if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return 1;
    else {
        sfctl_args_fail(&p, "unknown trace format '%s' (kineto or nsys)", argv[1]);
        return -EINVAL;
    }
    sfctl_args_init(&p, "sfctl import", NULL, argc - 1, argv + 1, "o:h", longopts);
    argc--;
    argv++;
    int c;
    while ((c = sfctl_args_next(&p)) != -1) {
        if (c == SFCTL_ARGS_BAD)
            return -EINVAL;
        int r = sfctl_report_opt(&o->report, c, optarg);
        if (r < 0) {
            sfctl_args_fail(&p, "at most 8 gate flags");
            return r;
        }
        if (r == 1)
            continue;
        if (c == 'h')
            return 1;
        if (import_opt(o, c, optarg) < 0)
            return -EINVAL;
    }
    bool report_flags = o->report.json || o->report.gates_path || o->report.n_flags > 0;
    if (optind >= argc) {
        sfctl_args_fail(&p, "name the trace FILE(s), one per rank");
        return -EINVAL;
    }
    if (report_flags && !o->replay) {
        sfctl_args_fail(&p, "the report options need --replay");
        return -EINVAL;
    }
    if (o->replay && (o->out || o->csv)) {
        sfctl_args_fail(&p, "--replay prints the report: -o and --csv do not apply");
        return -EINVAL;
    }
    if (o->out && (strcmp(o->out, "-") == 0))
        o->out = NULL;
    const char *dot = o->out ? strrchr(o->out, '.') : NULL;
    if (dot && strcmp(dot, ".csv") == 0)
        o->csv = true;
    o->files = argv + optind;
    o->n_files = argc - optind;
    return 0;
}

/* ---- ranks ------------------------------------------------------------------- */

static int rank_from_name(const regex_t *re, const char *path, int64_t *ret)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return -ENOMEM;
    const char *base = basename(copy);
    regmatch_t m[2];
    int r = -ENOENT;
    if (regexec(re, base, 2, m, 0) == 0) {
        regoff_t a = re->re_nsub >= 1 && m[1].rm_so >= 0 ? m[1].rm_so : m[0].rm_so;
        regoff_t b = re->re_nsub >= 1 && m[1].rm_so >= 0 ? m[1].rm_eo : m[0].rm_eo;
        int64_t v = 0;
        r = b > a && b - a <= 9 ? 0 : -ENOENT;
        for (regoff_t i = a; i < b && r == 0; i++) {
            if (base[i] < '0' || base[i] > '9')
                r = -ENOENT;
            v = v * 10 + (base[i] - '0');
        }
        if (r == 0)
            *ret = v;
    }
    free(copy);
    return r;
}

/* The file's rank: distributedInfo, else --rank-from, else 0 for a lone file. */
static int resolve_rank(const struct import_opts *o, const regex_t *re, struct file_summary *f)
{
    int64_t named = -1;
    if (re) {
        int r = rank_from_name(re, f->path, &named);
        if (r == -ENOMEM)
            return r;
        if (r < 0 && f->info.rank < 0) {
            fprintf(stderr, "sfctl import: %s: --rank-from '%s' finds no rank in the file name\n",
                    f->path, o->rank_from);
            return -EINVAL;
        }
    }
    if (f->info.rank >= 0 && named >= 0 && named != f->info.rank) {
        fprintf(stderr,
                "sfctl import: %s: distributedInfo says rank %" PRId64
                " but the file name gives rank %" PRId64 "\n",
                f->path, f->info.rank, named);
        return -EINVAL;
    }
    f->rank = f->info.rank >= 0 ? f->info.rank : named;
    if (f->rank < 0 && o->n_files == 1)
        f->rank = 0;
    if (f->rank < 0) {
        fprintf(stderr,
                "sfctl import: %s: no rank: the trace carries no distributedInfo; name it with "
                "--rank-from REGEX\n",
                f->path);
        return -EINVAL;
    }
    if (f->rank >= SF_MAX_RANKS) {
        fprintf(stderr, "sfctl import: %s: rank %" PRId64 " is beyond 262143\n", f->path, f->rank);
        return -EINVAL;
    }
    return 0;
}

/* ---- checks across files ----------------------------------------------------- */

static int check_same_job(const struct file_summary *fs, int n)
{
    for (int i = 1; i < n; i++) {
        const struct import_file_info *a = &fs[0].info, *b = &fs[i].info;
        if (a->world_size >= 0 && b->world_size >= 0 && a->world_size != b->world_size) {
            fprintf(stderr,
                    "sfctl import: %s: traces from different jobs: world size %" PRId64
                    ", but %s says %" PRId64 "\n",
                    fs[i].path, b->world_size, fs[0].path, a->world_size);
            return -EINVAL;
        }
        if (a->backend[0] && b->backend[0] && strcmp(a->backend, b->backend) != 0) {
            fprintf(stderr,
                    "sfctl import: %s: traces from different jobs: backend %s, but %s says %s\n",
                    fs[i].path, b->backend, fs[0].path, a->backend);
            return -EINVAL;
        }
    }
    /* Ranks of one job run at the same time: on a shared clock, every pair of
     * step spans overlaps. */
    int latest_start = 0, earliest_end = 0;
    for (int i = 0; i < n; i++) {
        if (!fs[i].info.absolute_time)
            return 0;
        if (fs[i].t_min > fs[latest_start].t_min)
            latest_start = i;
        if (fs[i].t_max < fs[earliest_end].t_max)
            earliest_end = i;
    }
    if (fs[latest_start].t_min >= fs[earliest_end].t_max) {
        fprintf(stderr,
                "sfctl import: %s: traces from different jobs: its steps begin %.3f s after "
                "the last step of %s ends\n",
                fs[latest_start].path,
                (double)(fs[latest_start].t_min - fs[earliest_end].t_max) / 1e9,
                fs[earliest_end].path);
        return -EINVAL;
    }
    return 0;
}

static int cmp_by_rank(const void *x, const void *y)
{
    const struct file_summary *a = x, *b = y;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* The ranks of 0..world-1 that no trace has, as "1, 4" (cut short past
 * the buffer). */
static void missing_ranks(const struct file_summary *fs, int n, int64_t world, char *list,
                          size_t cap)
{
    size_t used = 0;
    list[0] = '\0';
    for (int64_t r = 0, i = 0; r < world && used < cap - 16; r++) {
        if (i < n && fs[i].rank == r) {
            i++;
            continue;
        }
        used += (size_t)snprintf(list + used, cap - used, "%s%" PRId64, used ? ", " : "", r);
    }
}

/* Sorts fs by rank; each rank at most once, below the world size. A
 * partial set (a capture's suspect and control ranks) is taken: the rows
 * keep their ranks in the whole world, and the missing ones are named. */
static int check_ranks(struct file_summary *fs, int n, uint32_t *ret_world)
{
    qsort(fs, (size_t)n, sizeof *fs, cmp_by_rank);
    for (int i = 1; i < n; i++)
        if (fs[i].rank == fs[i - 1].rank) {
            fprintf(stderr, "sfctl import: %s: rank %" PRId64 " is duplicated: %s has it too\n",
                    fs[i].path, fs[i].rank, fs[i - 1].path);
            return -EINVAL;
        }
    int64_t world = fs[n - 1].rank + 1;
    if (fs[0].info.world_size >= 0) {
        if (fs[n - 1].rank >= fs[0].info.world_size) {
            fprintf(stderr,
                    "sfctl import: %s: rank %" PRId64 " is beyond the world size %" PRId64 "\n",
                    fs[n - 1].path, fs[n - 1].rank, fs[0].info.world_size);
            return -EINVAL;
        }
        world = fs[0].info.world_size;
    }
    if (world != n) {
        char list[200];
        missing_ranks(fs, n, world, list, sizeof list);
        fprintf(stderr,
                "sfctl import: ranks missing from the %d traces (world size %" PRId64
                "): %s; the rows cover the %d ranks traced\n",
                n, world, list, n);
    }
    *ret_world = (uint32_t)world;
    return 0;
}

static int check_empty_stages(const struct import_map *m, const uint64_t *total, bool allow)
{
    for (size_t k = 0; k < m->n_explicit; k++) {
        if (total[k] > 0)
            continue;
        fprintf(stderr,
                "sfctl import: %s: stage %s is empty in every trace: no range matches its "
                "patterns%s\n",
                m->source, m->names[k], allow ? " (kept at zero: --allow-empty-stage)" : "");
        if (!allow)
            return -EINVAL;
    }
    return 0;
}

/* ---- output -------------------------------------------------------------------- */

static int write_jsonl(FILE *f, const struct replay_part *p, const char *job)
{
    sf_gates gates;
    sf_gates_default(&gates);
    json_t *header = sf_recording_header(job, &p->schema, p->world_size, &gates);
    if (header == NULL || json_dumpf(header, f, JSON_COMPACT) < 0)
        return json_decref(header), -EIO;
    json_decref(header);
    fputc('\n', f);
    for (size_t i = 0; i < p->n_rows; i++) {
        json_t *row = sf_recording_row(&p->rows[i], &p->schema);
        int r = row == NULL || json_dumpf(row, f, JSON_COMPACT) < 0 ? -EIO : 0;
        json_decref(row);
        if (r < 0)
            return r;
        fputc('\n', f);
    }
    return 0;
}

static void put_seconds(FILE *f, int64_t ns)
{
    fprintf(f, ",%" PRId64 ".%09" PRId64, ns / 1000000000, ns % 1000000000);
}

static int write_csv(FILE *f, const struct replay_part *p)
{
    uint32_t S = p->schema.n_stages;
    fputs("step,rank", f);
    for (uint32_t k = 0; k < S; k++)
        fprintf(f, ",%s", p->schema.names[k]);
    fputs(",step_wall\n", f);
    for (size_t i = 0; i < p->n_rows; i++) {
        const sf_row *row = &p->rows[i];
        int64_t wall = 0;
        fprintf(f, "%" PRId64 ",%" PRIu32, row->step, row->rank);
        for (uint32_t k = 0; k < S; k++) {
            put_seconds(f, row->d[k]);
            wall += row->d[k];
        }
        put_seconds(f, wall);
        fputc('\n', f);
    }
    return 0;
}

/* Writes to PATH.tmp and renames, so a failed import leaves no half file. */
static int write_output(const struct import_opts *o, const struct replay_part *p)
{
    if (o->out == NULL) {
        int r = o->csv ? write_csv(stdout, p) : write_jsonl(stdout, p, o->job);
        return r == 0 && fflush(stdout) == 0 ? 0 : -EIO;
    }
    size_t len = strlen(o->out) + 5;
    char *tmp = malloc(len);
    if (tmp == NULL)
        return -ENOMEM;
    snprintf(tmp, len, "%s.tmp", o->out);
    FILE *f = fopen(tmp, "w");
    int r = f ? 0 : -errno;
    if (r == 0) {
        r = o->csv ? write_csv(f, p) : write_jsonl(f, p, o->job);
        if (ferror(f))
            r = -EIO;
        if (fclose(f) != 0 && r == 0)
            r = -errno;
        if (r == 0 && rename(tmp, o->out) != 0)
            r = -errno;
        if (r < 0)
            unlink(tmp);
    }
    if (r < 0)
        fprintf(stderr, "sfctl import: %s: %s\n", o->out, strerror(-r));
    free(tmp);
    return r;
}

/* ---- the command ------------------------------------------------------------------ */

/* A file's error, which may quote the file: escaped for the terminal. */
static void print_file_error(const char *path, const char *err)
{
    char shown[SF_TEXT_ESCAPED_SIZE(400)];
    sf_text_escape(err, strnlen(err, 400), shown, sizeof shown);
    fprintf(stderr, "sfctl import: %s: %s\n", path, shown);
}

static int exit_code(int r, int inconsistent)
{
    if (r == 0)
        return SFCTL_EXIT_OK;
    if (r == -ENOMEM) {
        fprintf(stderr, "sfctl import: out of memory\n");
        return SFCTL_EXIT_INTERNAL;
    }
    return inconsistent ? SFCTL_EXIT_INCONSISTENT : SFCTL_EXIT_INPUT;
}

/* Reads one file into part; fills its summary. */
static int import_file(const struct import_opts *o, struct import_map *map, const regex_t *re,
                       struct file_summary *fs, struct replay_part *part, uint64_t *totals,
                       bool *inconsistent)
{
    struct step_acc acc;
    char err[400] = "";
    step_acc_init(&acc, map);
    fs->info = (struct import_file_info){.rank = -1, .world_size = -1};
    int r = o->read(fs->path, &acc, &fs->info, err, sizeof err);
    if (r < 0 && r != -ENOMEM)
        print_file_error(fs->path, err);
    if (r == 0 && (r = resolve_rank(o, re, fs)) < 0)
        *inconsistent = fs->info.rank >= 0; /* two sources disagree */
    if (r == 0) {
        fs->t_min = acc.t_min + fs->info.time_offset_ns;
        fs->t_max = acc.t_max + fs->info.time_offset_ns;
        r = step_acc_rows(&acc, (uint32_t)fs->rank, part, totals, err, sizeof err);
        if (r < 0 && r != -ENOMEM)
            print_file_error(fs->path, err);
    }
    step_acc_clear(&acc);
    return r;
}

static int import_all(const struct import_opts *o, struct import_map *map, const regex_t *re,
                      struct replay_input *in, bool *inconsistent)
{
    struct replay_part *part = sfctl_input_add_part(in);
    struct file_summary *fs = calloc((size_t)o->n_files, sizeof *fs);
    uint64_t totals[SF_MAX_STAGES] = {0};
    int r = part && fs ? import_map_schema(map, &part->schema) : -ENOMEM;
    for (int i = 0; i < o->n_files && r == 0; i++) {
        fs[i].path = o->files[i];
        r = import_file(o, map, re, &fs[i], part, totals, inconsistent);
    }
    if (r == 0) {
        *inconsistent = true;
        if ((r = check_same_job(fs, o->n_files)) == 0 &&
            (r = check_ranks(fs, o->n_files, &part->world_size)) == 0)
            r = check_empty_stages(map, totals, o->allow_empty);
    }
    if (r == 0) {
        *inconsistent = false;
        sfctl_part_finish(part);
        uint64_t bytes = 0;
        for (int i = 0; i < o->n_files; i++)
            bytes += fs[i].info.bytes;
        fprintf(stderr, "sfctl import: %d %s trace%s, %.1f MB, %zu rows of %u stages\n", o->n_files,
                o->format, o->n_files == 1 ? "" : "s", (double)bytes / 1e6, part->n_rows,
                part->schema.n_stages);
    }
    free(fs);
    return r;
}

int sfctl_cmd_import(int argc, char **argv)
{
    struct import_opts o = {.job = "imported"};
    int r = parse_opts(argc, argv, &o);
    if (r != 0) {
        usage(r < 0 ? stderr : stdout);
        return r < 0 ? SFCTL_EXIT_USAGE : SFCTL_EXIT_OK;
    }
    if (sfctl_report_opts_check(&o.report, "sfctl import") < 0)
        return SFCTL_EXIT_USAGE;
    regex_t re;
    if (o.rank_from && regcomp(&re, o.rank_from, REG_EXTENDED) != 0) {
        fprintf(stderr, "sfctl import: --rank-from '%s' is not a valid regular expression\n",
                o.rank_from);
        return SFCTL_EXIT_USAGE;
    }
    struct import_map map;
    char err[300];
    r = import_map_load(o.map_path, &map, err, sizeof err);
    if (r < 0) {
        if (r != -ENOMEM)
            print_file_error(o.map_path ? o.map_path : "(built-in)", err);
        if (o.rank_from)
            regfree(&re);
        return exit_code(r, false);
    }
    struct replay_input in = {0};
    bool inconsistent = false;
    r = import_all(&o, &map, o.rank_from ? &re : NULL, &in, &inconsistent);
    if (r == 0 && o.replay)
        r = sfctl_replay_report(&in, o.files[0], &o.report);
    else if (r == 0)
        r = write_output(&o, &in.parts[0]);
    sfctl_replay_input_clear(&in);
    import_map_clear(&map);
    if (o.rank_from)
        regfree(&re);
    return exit_code(r, inconsistent);
}

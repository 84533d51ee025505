/*
 * `sfctl export --format perfetto`: Chrome trace JSON of one window or a
 * range of windows, from a live job or a replay file (docs/PICTURES.md). This
 * file owns the command line; daemon/report/perfetto.c writes the events.
 */
#include <errno.h>
#include <string.h>

#include "perfetto.h"
#include "picture_source.h"
#include "sfctl.h"
#include "sfctl_args.h"

static const char usage_text[] =
    "usage: sfctl export [JOB | --file FILE] [--format perfetto] [--window N | --windows A-B]\n"
    "                    -o OUT.json [--gates FILE] [--window-steps N] [--warmup-steps N]\n"
    "                    [--tau X] [--baseline FILE | --baseline-windows N]\n"
    "Chrome trace JSON (Perfetto UI, chrome://tracing) of the latest full window, or of\n"
    "the windows asked for: one track per rank, the frontier's track, verdicts.\n"
    "--format perfetto is the default (and the one format).\n";

static int parse_args(int argc, char **argv, struct picture_select *sel, struct picture_source *src)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'F'},
        {"window", required_argument, NULL, 'W'},
        {"windows", required_argument, NULL, 'R'},
        PICTURE_SOURCE_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    *sel = (struct picture_select){-1, -1};
    const char *format = NULL;
    struct sfctl_args p;
    sfctl_args_init(&p, src->prog, src->usage, argc, argv, "o:", longopts);
    int c;
    while ((c = sfctl_args_next(&p)) != -1) {
        if (c == SFCTL_ARGS_BAD)
            return SFCTL_EXIT_USAGE;
        if (picture_source_opt(src, c, optarg))
            continue;
        if ((c == 'W' || c == 'R') && sel->first >= 0)
            return picture_usage_error(src, "%s", "--window and --windows exclude each other");
        if ((c == 'W' || c == 'R') && picture_parse_windows(optarg, c == 'R', sel) < 0)
            return picture_usage_error(src, "invalid window selection '%s'", optarg);
        if (c == 'F')
            format = optarg;
    }
    /* Perfetto is the one format, so it is the default; a .json OUT or none
     * at all gets it without --format. */
    if (format != NULL && strcmp(format, "perfetto") != 0)
        return picture_usage_error(src, "unknown format '%s' (the one format is perfetto)", format);
    return picture_source_args(src, argc, argv, optind);
}

struct export_ctx {
    sf_trace_writer w;
    size_t windows;
};

static int export_window(const struct window_job *job, const sf_summary *summary,
                         const sf_report *report, const sf_reference *ref, void *user)
{
    (void)ref;
    struct export_ctx *c = user;
    c->windows++;
    return sf_trace_window(&c->w, summary, report, job->part->rows + job->first_row, job->n_rows);
}

static int export(struct picture_select *sel, struct picture_source *src)
{
    int ex = picture_source_select(src, sel);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    struct picture_out out;
    ex = picture_out_open(&out, "sfctl export", src->out);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    struct export_ctx c = {0};
    int r = sf_trace_begin(&c.w, out.f, src->file ? src->file : src->job);
    if (r == 0)
        r = picture_source_each(src, sel, export_window, &c);
    if (r == 0)
        r = sf_trace_end(&c.w);
    if (r < 0) {
        if (r == -EIO)
            fprintf(stderr, "sfctl export: cannot write %s\n", src->out);
        picture_out_abort(&out);
        return r == -EINVAL ? SFCTL_EXIT_INPUT : SFCTL_EXIT_INTERNAL;
    }
    return picture_out_commit(&out, "sfctl export");
}

int sfctl_cmd_export(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage_text, stdout);
        return SFCTL_EXIT_OK;
    }
    struct picture_select sel;
    struct picture_source src = {.prog = "sfctl export", .usage = usage_text};
    int ex = parse_args(argc, argv, &sel, &src);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    ex = picture_source_load(&src);
    if (ex == SFCTL_EXIT_OK)
        ex = export(&sel, &src);
    picture_source_clear(&src);
    return ex;
}

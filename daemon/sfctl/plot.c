/*
 * `sfctl plot`: draws one window's heatmap or frontier ledger, or a job's
 * windows, from a live job or a replay file (docs/PICTURES.md). This file owns
 * the command line and the flow; the numbers come from daemon/report/picture.c
 * and the drawing from plot_cairo.c. Output files appear whole or not at all.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "picture_source.h"
#include "plot_cairo.h"
#include "sfctl.h"
#include "sfctl_args.h"
#include "sfctl_live.h"

enum plot_kind { KIND_HEATMAP, KIND_FRONTIER, KIND_WINDOWS, KIND_PIPELINE };

struct plot_opts {
    enum plot_kind kind;
    enum sf_heat_metric metric;
    enum plot_format format;
    const char *out, *data;
    struct picture_select sel;
};

/* What the walk over the windows collects. */
struct plot_ctx {
    const struct plot_opts *o;
    const char *prog;
    sf_heatmap *heatmap;
    sf_ledger *ledger;
    sf_pipeline_picture *pipeline;
    sf_window_series series;
    int error; /* the model's build error, for the message */
    int64_t error_window;
};

static const char usage_text[] =
    "usage: sfctl plot [JOB | --file FILE] [--kind heatmap|frontier|windows|pipeline]\n"
    "                  [--metric leads|slack|change] [--window N] -o OUT.svg|.png|.pdf\n"
    "                  [--data FILE.json] [--gates FILE] [--window-steps N] [--warmup-steps N]\n"
    "                  [--tau X] [--baseline FILE | --baseline-windows N]\n"
    "Draws the latest full window (or --window N) of a live job or of a replay file;\n"
    "--kind windows draws every window. --data writes the numbers drawn, as JSON.\n";

static int parse_kind(const char *s, enum plot_kind *ret)
{
    static const char *const names[] = {"heatmap", "frontier", "windows", "pipeline"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *ret = (enum plot_kind)i;
            return 0;
        }
    return -EINVAL;
}

static int parse_format(const char *path, enum plot_format *ret)
{
    const char *dot = strrchr(path, '.');
    if (dot == NULL)
        return -EINVAL;
    if (strcmp(dot, ".svg") == 0)
        *ret = PLOT_SVG;
    else if (strcmp(dot, ".png") == 0)
        *ret = PLOT_PNG;
    else if (strcmp(dot, ".pdf") == 0)
        *ret = PLOT_PDF;
    else
        return -EINVAL;
    return 0;
}

static int parse_args(int argc, char **argv, struct plot_opts *o, struct picture_source *src)
{
    static const struct option longopts[] = {
        {"kind", required_argument, NULL, 'k'},
        {"metric", required_argument, NULL, 'm'},
        {"window", required_argument, NULL, 'W'},
        {"data", required_argument, NULL, 'd'},
        PICTURE_SOURCE_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    *o = (struct plot_opts){.kind = KIND_HEATMAP, .sel = {-1, -1}};
    struct sfctl_args p;
    sfctl_args_init(&p, src->prog, src->usage, argc, argv, "o:", longopts);
    int c;
    while ((c = sfctl_args_next(&p)) != -1) {
        if (c == SFCTL_ARGS_BAD)
            return SFCTL_EXIT_USAGE;
        if (picture_source_opt(src, c, optarg))
            continue;
        if (c == 'k' && parse_kind(optarg, &o->kind) < 0)
            return picture_usage_error(
                src, "unknown kind '%s' (heatmap, frontier, windows or pipeline)", optarg);
        if (c == 'm' && sf_heat_metric_parse(optarg, &o->metric) < 0)
            return picture_usage_error(src, "unknown metric '%s' (leads, slack or change)", optarg);
        if (c == 'W' && picture_parse_windows(optarg, false, &o->sel) < 0)
            return picture_usage_error(src, "invalid --window '%s'", optarg);
        if (c == 'd')
            o->data = optarg;
    }
    int ex = picture_source_args(src, argc, argv, optind);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    o->out = src->out;
    if (parse_format(o->out, &o->format) < 0)
        return picture_usage_error(src, "cannot tell the format of '%s' (.svg, .png or .pdf)",
                                   o->out);
    if (o->kind == KIND_WINDOWS && o->sel.first >= 0)
        return picture_usage_error(src, "%s",
                                   "--kind windows draws every window; --window does not apply");
    return SFCTL_EXIT_OK;
}

/* ---- models ----------------------------------------------------------------- */

static int build_window(const struct window_job *job, const sf_summary *summary,
                        const sf_report *report, const sf_reference *ref, void *user)
{
    struct plot_ctx *c = user;
    if (c->o->kind == KIND_WINDOWS)
        return sf_window_series_add(&c->series, report);
    if (c->heatmap != NULL || c->ledger != NULL || c->pipeline != NULL)
        return 0; /* a later segment of the same index: the first is drawn */
    int r = c->o->kind == KIND_HEATMAP
                ? sf_heatmap_build(summary, report, ref, job->part->rows + job->first_row,
                                   job->n_rows, c->o->metric, SF_HEATMAP_MAX_ROWS, &c->heatmap)
            : c->o->kind == KIND_PIPELINE ? sf_pipeline_picture_build(summary, report, &c->pipeline)
                                          : sf_ledger_build(summary, report, &c->ledger);
    if (r == -ENODATA || r == -ENOENT || r == -ENOTSUP) {
        c->error = r;
        c->error_window = job->meta.index;
        return -ECANCELED;
    }
    return r;
}

static int model_error(const struct plot_ctx *c, const char *label)
{
    const char *why = c->error == -ENODATA ? "has no complete step: nothing to draw"
                      : c->error == -ENOENT && c->o->kind == KIND_PIPELINE
                          ? "has no pipeline view: its ranks declared no coordinates that make "
                            "cohorts of two or more pipeline stages (docs/ACCOUNTING.md)"
                      : c->error == -ENOENT
                          ? "has no baseline yet: --metric change needs one (docs/CHANGE.md)"
                          : "has a baseline without per-rank medians (mergeable mode): "
                            "--metric change needs a dense window";
    fprintf(stderr, "sfctl plot: %s: window %lld %s\n", label, (long long)c->error_window, why);
    return SFCTL_EXIT_NOT_FOUND;
}

/* ---- output ----------------------------------------------------------------- */

static int data_json(const struct plot_ctx *c, const struct plot_layout *l, json_t **ret)
{
    int r = c->heatmap    ? sf_heatmap_to_json(c->heatmap, ret)
            : c->ledger   ? sf_ledger_to_json(c->ledger, ret)
            : c->pipeline ? sf_pipeline_picture_to_json(c->pipeline, ret)
                          : sf_window_series_to_json(&c->series, ret);
    if (r < 0)
        return r;
    static const char *const formats[] = {"svg", "png", "pdf"};
    json_object_set_new(*ret, "picture",
                        json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "format",
                                  formats[c->o->format], "width", l->width, "height", l->height,
                                  "grid_x", l->grid_x, "grid_y", l->grid_y, "cell_width", l->cell_w,
                                  "cell_height", l->cell_h));
    return 0;
}

static int write_data(const struct plot_ctx *c, const struct plot_layout *l,
                      struct picture_out *out)
{
    json_t *data;
    if (data_json(c, l, &data) < 0)
        return SFCTL_EXIT_INTERNAL;
    int ex = json_dumpf(data, out->f, JSON_INDENT(1) | JSON_REAL_PRECISION(9)) == 0
                 ? SFCTL_EXIT_OK
                 : SFCTL_EXIT_INTERNAL;
    json_decref(data);
    if (ex == SFCTL_EXIT_OK)
        fputc('\n', out->f);
    return ex;
}

/* Both files are written to temp names first and renamed only when both are
 * complete, so a failure leaves neither. */
static int write_outputs(const struct plot_ctx *c, const char *title)
{
    struct plot_picture p = {.title = title,
                             .heatmap = c->heatmap,
                             .ledger = c->ledger,
                             .pipeline = c->pipeline,
                             .series = c->heatmap || c->ledger || c->pipeline ? NULL : &c->series};
    struct plot_layout l;
    plot_measure(&p, &l);
    struct picture_out img = {0}, data = {0};
    char err[200] = "";
    int ex = picture_out_open(&img, c->prog, c->o->out);
    if (ex == SFCTL_EXIT_OK && c->o->data)
        ex = picture_out_open(&data, c->prog, c->o->data);
    if (ex == SFCTL_EXIT_OK && plot_render(&p, c->o->format, img.f, err, sizeof err) < 0) {
        fprintf(stderr, "%s: cannot draw %s: %s\n", c->prog, c->o->out, err[0] ? err : "no memory");
        ex = SFCTL_EXIT_INTERNAL;
    }
    if (ex == SFCTL_EXIT_OK && c->o->data)
        ex = write_data(c, &l, &data);
    bool drawn = false;
    if (ex == SFCTL_EXIT_OK)
        drawn = (ex = picture_out_commit(&img, c->prog)) == SFCTL_EXIT_OK;
    if (ex == SFCTL_EXIT_OK && c->o->data)
        ex = picture_out_commit(&data, c->prog);
    if (ex != SFCTL_EXIT_OK && drawn)
        unlink(c->o->out); /* the picture went in, its data did not */
    picture_out_abort(&img);
    picture_out_abort(&data);
    plot_release();
    return ex;
}

static void make_title(char *buf, size_t len, const struct plot_opts *o,
                       const struct picture_source *src)
{
    static const char *const kinds[] = {"heatmap", "frontier ledger", "windows",
                                        "pipeline stage x step"};
    if (o->kind == KIND_WINDOWS)
        snprintf(buf, len, "%s: %s", src->label, kinds[o->kind]);
    else
        snprintf(buf, len, "%s, window %lld: %s", src->label, (long long)o->sel.first,
                 kinds[o->kind]);
}

static int plot(struct plot_opts *o, struct picture_source *src)
{
    struct plot_ctx c = {.o = o, .prog = "sfctl plot"};
    struct picture_select all = {0, INT64_MAX};
    int ex = o->kind == KIND_WINDOWS ? SFCTL_EXIT_OK : picture_source_select(src, &o->sel);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    int r = picture_source_each(src, o->kind == KIND_WINDOWS ? &all : &o->sel, build_window, &c);
    if (r == -ECANCELED)
        ex = model_error(&c, src->label);
    else if (r < 0)
        ex = r == -ENOMEM ? SFCTL_EXIT_INTERNAL : SFCTL_EXIT_INPUT;
    else if (o->kind == KIND_WINDOWS && c.series.n_points == 0) {
        fprintf(stderr, "sfctl plot: %s: no window (every step is within the warmup steps)\n",
                src->label);
        ex = SFCTL_EXIT_NOT_FOUND;
    }
    if (ex == SFCTL_EXIT_OK) {
        char title[400];
        make_title(title, sizeof title, o, src);
        ex = write_outputs(&c, title);
    }
    sf_heatmap_free(c.heatmap);
    sf_ledger_free(c.ledger);
    sf_pipeline_picture_free(c.pipeline);
    sf_window_series_clear(&c.series);
    return ex;
}

int sfctl_cmd_plot(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage_text, stdout);
        return SFCTL_EXIT_OK;
    }
    struct plot_opts o;
    struct picture_source src = {.prog = "sfctl plot", .usage = usage_text};
    int ex = parse_args(argc, argv, &o, &src);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    ex = picture_source_load(&src);
    if (ex == SFCTL_EXIT_OK)
        ex = plot(&o, &src);
    picture_source_clear(&src);
    return ex;
}

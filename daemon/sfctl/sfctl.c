/*
 * sfctl main: global options (--socket, $SF_QUERY_SOCKET) and the table of
 * subcommands. Each command lives in its own file and returns an exit code
 * of sfctl.h; this file only dispatches.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <stagefrontier/accounting.h>

#include "import.h"
#include "sfctl.h"
#include "sfctl_args.h"
#include "sfctl_live.h"
#include "peers.h" /* peer layer: sfctl peers */

struct sfctl_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *args, *help;
};

static const struct sfctl_command commands[] = {
    {"status", sfctl_cmd_status, "[--json]", "daemon counters: connections, records, rejections"},
    {"jobs", sfctl_cmd_jobs, "[JOB] [--json]", "jobs visible to the caller (or one job)"},
    {"report", sfctl_cmd_report, "[JOB] [--window N | --last N] [--json]",
     "report of the latest (or a given) window"},
    {"ranks", sfctl_cmd_ranks, "JOB [--json]", "ranks of a job and their connections"},
    {"watch", sfctl_cmd_watch, "JOB [--wait] [--count N] [--interval MS] [--json]",
     "redraw the report as windows close"},
    {"record", sfctl_cmd_record, "JOB [-o FILE]", "JSON Lines dump of the kept windows"},
    {"baseline", sfctl_cmd_baseline, "JOB [--pin WINDOW | --clear] [--json]",
     "show, pin or clear the reference of the change"},
    {"replay", sfctl_cmd_replay, "FILE [--json] ...", "offline report of a CSV or recording"},
    {"import", sfctl_cmd_import,
     "kineto|nsys FILE... [-o FILE] [--rank-from RE] [--map F] [--job ID] [--replay]",
     "stage rows from torch.profiler or Nsight Systems traces"},
    {"plot", sfctl_cmd_plot, "[JOB | --file FILE] [--kind K] -o OUT.svg|.png|.pdf",
     "--kind heatmap, frontier, windows or pipeline picture (cairo)"},
    {"export", sfctl_cmd_export, "[JOB | --file FILE] [--format perfetto] -o OUT",
     "Chrome trace JSON of windows for Perfetto"},
    {"capture", sfctl_cmd_capture, "JOB [--ranks 3,5 | --suspects] [--steps N] [--json]",
     "ask the ranks for a profiler trace; prints the capture id"},
    {"captures", sfctl_cmd_captures, "JOB [--json]",
     "captures of a job: window, reason, ranks, steps, state, trace paths"},
    {"events", sfctl_cmd_events, "JOB [--json]",
     "starts and ends of the job's live verdict (docs/LIVE.md)"},
    {"peers", sfctl_cmd_peers_view, "[--json]",
     "members, root, term, heartbeats, summaries in flight"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: sfctl [--socket PATH] COMMAND [ARGS]\n"
               "       sfctl --help | --version | COMMAND --help\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-8s %-42s %s\n", commands[i].name, commands[i].args, commands[i].help);
    fprintf(f, "\nThe query socket is --socket, else $SF_QUERY_SOCKET, else %s.\n",
            SF_DEFAULT_QUERY_SOCKET);
}

/* `sfctl COMMAND --help` (or -h) anywhere before a lone "--". */
static bool wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

static int command_usage(const struct sfctl_command *c)
{
    /* These document their input formats and every option themselves. */
    if (c->run == sfctl_cmd_replay || c->run == sfctl_cmd_import || c->run == sfctl_cmd_plot ||
        c->run == sfctl_cmd_export)
        return c->run(2, (char *[]){(char *)c->name, "--help", NULL});
    printf("usage: sfctl [--socket PATH] %s %s\n  %s\n", c->name, c->args, c->help);
    return SFCTL_EXIT_OK;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    (void)sf_core_isa(); /* an SF_CORE_ISA this CPU lacks is refused now, not mid-command */
    struct sfctl_args a;
    sfctl_args_init(&a, "sfctl", NULL, argc, argv, "+h", opts);
    int opt;
    while ((opt = sfctl_args_next(&a)) != -1) {
        if (opt == 's') {
            sfctl_set_socket_path(optarg);
        } else if (opt == 'h') {
            usage(stdout);
            return SFCTL_EXIT_OK;
        } else if (opt == 'V') {
            printf("sfctl %s\n", SF_VERSION);
            return SFCTL_EXIT_OK;
        } else {
            usage(stderr);
            return SFCTL_EXIT_USAGE;
        }
    }
    int i = optind;
    if (i >= argc) {
        fprintf(stderr, "sfctl: name a COMMAND\n");
        usage(stderr);
        return SFCTL_EXIT_USAGE;
    }
    for (size_t c = 0; c < N_COMMANDS; c++)
        if (strcmp(argv[i], commands[c].name) == 0)
            return wants_help(argc - i, argv + i) ? command_usage(&commands[c])
                                                  : commands[c].run(argc - i, argv + i);
    fprintf(stderr, "sfctl: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return SFCTL_EXIT_USAGE;
}

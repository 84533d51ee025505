/*
 * sfctl-plot: the helper that `sfctl plot` runs (plot_exec.c), the only
 * program of sfctl's that links cairo. Invoked as `sfctl-plot plot ARGS`,
 * with the query socket in $SF_QUERY_SOCKET; it runs the plot command
 * (plot.c) and nothing else.
 */
#include <stdio.h>
#include <string.h>

#include "sfctl.h"

static int command_usage(void)
{
    return sfctl_cmd_plot(2, (char *[]){"plot", "--help", NULL});
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "plot") != 0) {
        fprintf(stderr, "usage: sfctl-plot plot [ARGS]: run by `sfctl plot`\n");
        return SFCTL_EXIT_USAGE;
    }
    /* `plot ... --help` anywhere before a lone "--", as sfctl's dispatch does */
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return command_usage();
    return sfctl_cmd_plot(argc - 1, argv + 1);
}

/*
 * sfctl's `plot`: the drawing needs cairo, which a headless node should not
 * have to install, so it lives in a helper of its own, sfctl-plot (package
 * stagefrontier-plot, docs/PACKAGING.md). This file finds the helper and
 * runs it in sfctl's place with the same arguments and query socket; it
 * draws nothing itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sfctl.h"
#include "sfctl_live.h"

#define PLOT_HELPER_NAME "sfctl-plot"

/* Where the helper may be, in order: beside this sfctl (a build tree), in
 * ../libexec/stagefrontier from it (a relocated install), where the build
 * installs it. */
static int helper_candidates(char out[][PATH_MAX], int max)
{
    char exe[PATH_MAX];
    int n = 0;
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        const char *dir = dirname(exe);
        if (n < max && snprintf(out[n], PATH_MAX, "%s/" PLOT_HELPER_NAME, dir) < PATH_MAX)
            n++;
        if (n < max && snprintf(out[n], PATH_MAX, "%s/../libexec/stagefrontier/" PLOT_HELPER_NAME,
                                dir) < PATH_MAX)
            n++;
    }
    if (n < max && snprintf(out[n], PATH_MAX, "%s", SF_PLOT_HELPER) < PATH_MAX)
        n++;
    return n;
}

int sfctl_cmd_plot(int argc, char **argv)
{
    char paths[3][PATH_MAX];
    int n = helper_candidates(paths, 3);
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (args == NULL) {
        fprintf(stderr, "sfctl plot: out of memory\n");
        return SFCTL_EXIT_INTERNAL;
    }
    /* sfctl-plot plot ARGS...: the helper parses them as sfctl would */
    args[0] = (char *)PLOT_HELPER_NAME;
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    /* --socket was sfctl's global option: the helper reads the environment */
    if (setenv("SF_QUERY_SOCKET", sfctl_socket_path(), 1) < 0) {
        fprintf(stderr, "sfctl plot: %s\n", strerror(errno));
        free(args);
        return SFCTL_EXIT_INTERNAL;
    }
    for (int i = 0; i < n; i++)
        if (access(paths[i], X_OK) == 0) {
            execv(paths[i], args);
            fprintf(stderr, "sfctl plot: cannot run %s: %s\n", paths[i], strerror(errno));
            free(args);
            return SFCTL_EXIT_INTERNAL;
        }
    fprintf(stderr,
            "sfctl plot: drawing needs the stagefrontier-plot package, which holds %s "
            "(not installed); sfctl export and sfctl record work without it\n",
            SF_PLOT_HELPER);
    free(args);
    return SFCTL_EXIT_INTERNAL;
}

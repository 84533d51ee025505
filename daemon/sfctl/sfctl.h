/*
 * sfctl: the operator's command line. Each subcommand lives in its own file and
 * is registered in the table in sfctl.c. Commands print their own output and
 * return an exit code from the list below (documented in docs/SFCTL.md).
 */
#ifndef SFCTL_H
#define SFCTL_H

enum sfctl_exit {
    SFCTL_EXIT_OK = 0,
    SFCTL_EXIT_INTERNAL = 1,     /* out of memory, unexpected failure */
    SFCTL_EXIT_USAGE = 2,        /* bad command line */
    SFCTL_EXIT_INPUT = 3,        /* bad input file (replay) or bad gates file */
    SFCTL_EXIT_NO_DAEMON = 4,    /* the daemon's socket cannot be reached */
    SFCTL_EXIT_NOT_FOUND = 5,    /* unknown job or window */
    SFCTL_EXIT_DENIED = 6,       /* the daemon refused the query */
    SFCTL_EXIT_INCONSISTENT = 7, /* import: each file reads, but they do not fit together */
};

int sfctl_cmd_replay(int argc, char **argv);
int sfctl_cmd_plot(int argc, char **argv);   /* plot.c in sfctl-plot; plot_exec.c in sfctl */
int sfctl_cmd_export(int argc, char **argv); /* export.c */

#endif

/*
 * The getopt loop every sfctl subcommand runs through, so a bad command line
 * reads the same everywhere: "sfctl CMD: unknown option '--frob'", "sfctl
 * CMD: option '--window' needs a value", "sfctl CMD: --window takes a
 * whole number >= 0, not 'abc'", then the command's usage, exit 2.
 */
#ifndef SFCTL_ARGS_H
#define SFCTL_ARGS_H

#include <getopt.h>
#include <stdint.h>

/* sfctl_args_next's answer after it printed a bad option: return
 * SFCTL_EXIT_USAGE. Distinct from every option value and from -1. */
#define SFCTL_ARGS_BAD (-2)

struct sfctl_args {
    const char *prog;  /* "sfctl report": prefixes every message */
    const char *usage; /* a whole usage text ("usage: ...\n"), or the line after "sfctl CMD" */
    int argc;
    char **argv;
    const struct option *longopts;
    char shortopts[64]; /* the caller's, led by ':' so a missing value is told apart */
    int longindex;      /* of the option just returned, -1 for a short one */
    int last;           /* the option just returned */
};

/* Starts a parse of argv[1..] (argv[0] is the command). shortopts as for
 * getopt_long ("+" first stops at the first operand). */
void sfctl_args_init(struct sfctl_args *a, const char *prog, const char *usage, int argc,
                     char **argv, const char *shortopts, const struct option *longopts);
/* The next option as getopt_long returns it (its value in optarg), -1 after
 * the last one (operands from optind on), or SFCTL_ARGS_BAD when it printed
 * why the option is bad and the usage. */
int sfctl_args_next(struct sfctl_args *a);
/* The option just returned, as its user would write it: "--window", "-o". */
const char *sfctl_args_name(const struct sfctl_args *a, char *buf, size_t len);
/* Prints "PROG: <message>" (printf format) and the usage; returns
 * SFCTL_EXIT_USAGE. */
int sfctl_args_fail(const struct sfctl_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* optarg of the option just returned as a whole decimal number >= lo: 0,
 * or SFCTL_EXIT_USAGE after "PROG: --window takes a whole number >= 0, not
 * 'abc'" (what names it, e.g. "a window index"). *ret is set only on
 * success. */
int sfctl_args_i64(const struct sfctl_args *a, const char *what, int64_t lo, int64_t *ret);

/* The same parts for a command's other checks: sfctl_usage_error prints
 * "sfctl CMD: WHY" (when why is not NULL) and the usage line, and returns
 * SFCTL_EXIT_USAGE; sfctl_parse_i64 takes a whole decimal number >= lo (0,
 * or -EINVAL and *ret untouched). */
int sfctl_usage_error(const char *cmd, const char *usage, const char *why);
int sfctl_parse_i64(const char *s, int64_t lo, int64_t *ret);

#endif

/*
 * sfctl's shared option loop (sfctl_args.h): getopt_long with its own
 * messages turned off, and one wording for each way an option can be wrong.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfctl.h"
#include "sfctl_args.h"

void sfctl_args_init(struct sfctl_args *a, const char *prog, const char *usage, int argc,
                     char **argv, const char *shortopts, const struct option *longopts)
{
    *a = (struct sfctl_args){
        .prog = prog, .usage = usage, .argc = argc, .argv = argv, .longopts = longopts};
    /* A leading '+' must stay first; ':' comes right after it. */
    const char *rest = shortopts[0] == '+' ? shortopts + 1 : shortopts;
    snprintf(a->shortopts, sizeof a->shortopts, "%s:%s", shortopts[0] == '+' ? "+" : "", rest);
    optind = 0; /* GNU: start afresh, whatever parsed argv before */
    opterr = 0;
}

static void put_usage(const struct sfctl_args *a)
{
    if (a->usage == NULL)
        return;
    if (strncmp(a->usage, "usage:", 6) == 0)
        fputs(a->usage, stderr);
    else
        fprintf(stderr, "usage: %s %s\n", a->prog, a->usage);
}

int sfctl_args_fail(const struct sfctl_args *a, const char *fmt, ...)
{
    fprintf(stderr, "%s: ", a->prog);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    put_usage(a);
    return SFCTL_EXIT_USAGE;
}

/* The argument getopt stopped on: the one before optind. */
static const char *offending(const struct sfctl_args *a)
{
    return optind > 0 && optind <= a->argc ? a->argv[optind - 1] : "?";
}

int sfctl_args_next(struct sfctl_args *a)
{
    a->longindex = -1;
    int c = getopt_long(a->argc, a->argv, a->shortopts, a->longopts, &a->longindex);
    a->last = c;
    if (c == ':') {
        sfctl_args_fail(a, "option '%s' needs a value", offending(a));
        return SFCTL_ARGS_BAD;
    }
    if (c != '?')
        return c;
    const char *arg = offending(a);
    if (strncmp(arg, "--", 2) == 0 && strchr(arg, '=') != NULL && optopt != 0)
        sfctl_args_fail(a, "option '%.*s' takes no value", (int)(strchr(arg, '=') - arg), arg);
    else if (strncmp(arg, "--", 2) == 0 || optopt == 0)
        sfctl_args_fail(a, "unknown option '%s'", arg);
    else
        sfctl_args_fail(a, "unknown option '-%c'", optopt);
    return SFCTL_ARGS_BAD;
}

const char *sfctl_args_name(const struct sfctl_args *a, char *buf, size_t len)
{
    if (a->longindex >= 0)
        snprintf(buf, len, "--%s", a->longopts[a->longindex].name);
    else
        snprintf(buf, len, "-%c", a->last > 0 ? a->last : '?');
    return buf;
}

int sfctl_parse_i64(const char *s, int64_t lo, int64_t *ret)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s || v < lo)
        return -EINVAL;
    *ret = v;
    return 0;
}

int sfctl_usage_error(const char *cmd, const char *usage, const char *why)
{
    if (why != NULL)
        fprintf(stderr, "sfctl %s: %s\n", cmd, why);
    fprintf(stderr, "usage: sfctl %s %s\n", cmd, usage);
    return SFCTL_EXIT_USAGE;
}

int sfctl_args_i64(const struct sfctl_args *a, const char *what, int64_t lo, int64_t *ret)
{
    int64_t v;
    if (optarg == NULL || sfctl_parse_i64(optarg, lo, &v) < 0) {
        char name[64];
        return sfctl_args_fail(a, "%s takes %s >= %lld, not '%s'",
                               sfctl_args_name(a, name, sizeof name), what, (long long)lo,
                               optarg != NULL ? optarg : "");
    }
    *ret = v;
    return 0;
}

/*
 * `sfctl capture JOB [--ranks 3,5 | --suspects] [--steps N] [--json]` asks a
 * job's ranks for a profiler trace and prints the capture id;
 * `sfctl captures JOB [--json]` lists the job's captures (docs/SFCTL.md).
 * Speaks only the query protocol; sfd decides who may capture what.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfctl.h"
#include "sfctl_args.h"
#include "sfctl_live.h"

#define CAPTURE_USAGE "JOB [--ranks 3,5 | --suspects] [--steps N] [--json]"
#define MAX_RANKS SF_MAX_CAPTURE_RANKS

struct capture_args {
    const char *job;
    uint32_t ranks[MAX_RANKS];
    uint32_t n_ranks, steps;
    bool suspects, json;
};

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *ret)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi)
        return -EINVAL;
    *ret = (uint32_t)v;
    return 0;
}

/* "3,5,7": at most MAX_RANKS ranks, each a number. */
static int parse_ranks(const char *list, struct capture_args *a)
{
    char buf[256];
    if (strlen(list) >= sizeof buf)
        return -EINVAL;
    strcpy(buf, list);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (a->n_ranks == MAX_RANKS || parse_u32(tok, 0, UINT32_MAX - 1, &a->ranks[a->n_ranks]) < 0)
            return -EINVAL;
        a->n_ranks++;
    }
    return a->n_ranks > 0 ? 0 : -EINVAL;
}

static int parse_capture(int argc, char **argv, struct capture_args *a)
{
    static const struct option opts[] = {
        {"ranks", required_argument, NULL, 'r'},
        {"suspects", no_argument, NULL, 's'},
        {"steps", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct capture_args){0};
    struct sfctl_args p;
    sfctl_args_init(&p, "sfctl capture", CAPTURE_USAGE, argc, argv, "r:sn:j", opts);
    int c;
    while ((c = sfctl_args_next(&p)) != -1) {
        switch (c) {
        case 'r':
            if (parse_ranks(optarg, a) < 0)
                return sfctl_args_fail(&p, "--ranks takes 1..%d rank numbers, not '%s'", MAX_RANKS,
                                       optarg);
            break;
        case 's':
            a->suspects = true;
            break;
        case 'n':
            if (parse_u32(optarg, 1, SF_MAX_CAPTURE_STEPS, &a->steps) < 0)
                return sfctl_args_fail(&p, "--steps takes 1..%d, not '%s'", SF_MAX_CAPTURE_STEPS,
                                       optarg);
            break;
        case 'j':
            a->json = true;
            break;
        default:
            return SFCTL_EXIT_USAGE;
        }
    }
    if (optind == argc)
        return sfctl_args_fail(&p, "name a JOB (sfctl jobs lists them)");
    if (optind != argc - 1)
        return sfctl_args_fail(&p, "unexpected argument '%s'", argv[optind + 1]);
    if (a->suspects == (a->n_ranks > 0))
        return sfctl_args_fail(&p, "name the ranks or --suspects, not both");
    a->job = argv[optind];
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_capture(int argc, char **argv)
{
    struct capture_args a;
    int ex = parse_capture(argc, argv, &a);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    struct sfctl_request req = {.kind = SFCTL_Q_CAPTURE,
                                .job_id = a.job,
                                .window = -1,
                                .ranks = a.ranks,
                                .n_ranks = a.n_ranks,
                                .suspects = a.suspects,
                                .steps = a.steps};
    json_t *o;
    char *text;
    ex = sfctl_ask(&req, &o, &text);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    if (a.json)
        printf("%s\n", text);
    else
        printf("%lld\n", sfctl_json_int(o, "id"));
    json_decref(o);
    free(text);
    return SFCTL_EXIT_OK;
}

static void show_capture(json_t *k)
{
    char created[40];
    sfctl_format_time(json_object_get(k, "created_at"), created, sizeof created);
    char window[24] = "-";
    if (json_is_integer(json_object_get(k, "window")))
        snprintf(window, sizeof window, "%lld", sfctl_json_int(k, "window"));
    printf("capture %lld  %s  %s  window %s  %lld steps  %s\n  reason: %s\n%s",
           sfctl_json_int(k, "id"), created, sfctl_json_str(k, "trigger"), window,
           sfctl_json_int(k, "steps"), sfctl_json_str(k, "state"), sfctl_json_str(k, "reason"),
           json_is_true(json_object_get(k, "communication"))
               ? "  communication: the ranks were asked to record their collectives\n"
               : "");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(k, "ranks"), i, t)
    {
        char steps[48] = "";
        if (json_is_integer(json_object_get(t, "first_step")))
            snprintf(steps, sizeof steps, " steps %lld-%lld", sfctl_json_int(t, "first_step"),
                     sfctl_json_int(t, "last_step"));
        json_t *path = json_object_get(t, "path"), *err = json_object_get(t, "error");
        char node[32] = "";
        if (json_is_integer(json_object_get(t, "node")))
            snprintf(node, sizeof node, " on node %lld", sfctl_json_int(t, "node"));
        printf("  rank %lld%s%s: %s%s%s%s\n", sfctl_json_int(t, "rank"),
               json_is_true(json_object_get(t, "control")) ? " (control)" : "", node,
               sfctl_json_str(t, "state"), steps,
               json_is_string(path) || json_is_string(err) ? "  " : "",
               json_is_string(path)  ? json_string_value(path)
               : json_is_string(err) ? json_string_value(err)
                                     : "");
    }
}

static int show_captures(json_t *captures, const char *job)
{
    (void)job;
    size_t i;
    json_t *k;
    json_array_foreach(captures, i, k) show_capture(k);
    if (json_array_size(captures) == 0)
        printf("(no captures)\n");
    return SFCTL_EXIT_OK;
}

int sfctl_cmd_captures(int argc, char **argv)
{
    return sfctl_show(argc, argv, "JOB [--json]", true, SFCTL_Q_CAPTURES, show_captures);
}

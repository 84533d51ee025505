/*
 * `sfctl baseline JOB [--pin WINDOW | --clear] [--json]`: shows, pins or
 * clears the reference a live job's change is measured against
 * (docs/SFCTL.md). Speaks only the query protocol.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfctl.h"
#include "sfctl_args.h"
#include "sfctl_live.h"

#define USAGE "JOB [--pin WINDOW | --clear] [--json]"

struct baseline_args {
    const char *job;
    int64_t pin;
    bool clear, json;
};

static int parse(int argc, char **argv, struct baseline_args *a)
{
    static const struct option opts[] = {
        {"pin", required_argument, NULL, 'p'},
        {"clear", no_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    *a = (struct baseline_args){.pin = -1};
    struct sfctl_args p;
    sfctl_args_init(&p, "sfctl baseline", USAGE, argc, argv, "p:cj", opts);
    int c;
    while ((c = sfctl_args_next(&p)) != -1) {
        switch (c) {
        case 'p':
            if (sfctl_args_i64(&p, "a window index", 0, &a->pin) != 0)
                return SFCTL_EXIT_USAGE;
            break;
        case 'c':
            a->clear = true;
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
    if (a->clear && a->pin >= 0)
        return sfctl_args_fail(&p, "--pin and --clear exclude each other");
    a->job = argv[optind];
    return SFCTL_EXIT_OK;
}

static void show(json_t *o)
{
    json_t *b = json_object_get(o, "baseline");
    const char *job = json_string_value(json_object_get(o, "job"));
    if (!json_is_object(b)) {
        printf("%s: no baseline yet (%lld of %lld eligible windows collected)\n", job ? job : "?",
               sfctl_json_int(o, "collected"), sfctl_json_int(o, "wanted"));
        return;
    }
    json_t *w = json_object_get(b, "windows");
    printf("%s: baseline windows", job ? job : "?");
    for (size_t i = 0; i < json_array_size(w); i++)
        printf("%s%lld", i ? ", " : " ", (long long)json_integer_value(json_array_get(w, i)));
    printf(" (segment %lld, %lld steps, %s, %s mode)\n", sfctl_json_int(b, "segment"),
           sfctl_json_int(b, "steps"),
           json_is_true(json_object_get(b, "pinned")) ? "pinned" : "automatic",
           json_string_value(json_object_get(b, "mode")));
}

int sfctl_cmd_baseline(int argc, char **argv)
{
    struct baseline_args a;
    int ex = parse(argc, argv, &a);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    struct sfctl_request req = {
        .kind = SFCTL_Q_BASELINE, .job_id = a.job, .window = a.pin, .clear = a.clear};
    json_t *o;
    char *text;
    ex = sfctl_ask(&req, &o, &text);
    if (ex != SFCTL_EXIT_OK)
        return ex;
    if (a.json)
        printf("%s\n", text);
    else
        show(o);
    json_decref(o);
    free(text);
    return SFCTL_EXIT_OK;
}

/*
 * The JSON Lines recording reader: a header line, then rows, with a window
 * line closing each window sfd reported (docs/FORMATS.md). A later header
 * starts a new schema segment. The line decoders live in daemon/report so
 * the writer and the reader cannot drift apart.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "recording.h"
#include "replay.h"
#include "strutil.h"

static int add_window(struct replay_part *p, const sf_window_meta *meta)
{
    if (p->n_windows == p->cap_windows) {
        size_t cap = p->cap_windows ? 2 * p->cap_windows : 16;
        struct replay_window *w = realloc(p->windows, cap * sizeof *w);
        if (w == NULL)
            return -ENOMEM;
        p->windows = w;
        p->cap_windows = cap;
    }
    p->windows[p->n_windows++] = (struct replay_window){
        .meta = *meta, .first_row = p->open_first_row, .n_rows = p->n_rows - p->open_first_row};
    p->open_first_row = p->n_rows;
    return 0;
}

struct jsonl_state {
    struct replay_input *input;
    struct replay_part *part; /* the segment rows go to; NULL before a header */
    sf_gates gates;
};

static int on_header(struct jsonl_state *st, json_t *obj, size_t line, char *err, size_t errlen)
{
    char why[200];
    struct replay_part *p = sfctl_input_add_part(st->input);
    if (p == NULL)
        return -ENOMEM;
    st->part = NULL;
    if (sf_recording_parse_header(obj, &p->schema, &p->world_size, &st->gates, why, sizeof why) < 0)
        return sfctl_fail_at(err, errlen, line, 1, "header: %s", why);
    st->part = p;
    st->input->has_gates = st->input->has_gates || json_object_get(obj, "gates") != NULL;
    st->input->gates = st->gates;
    return 0;
}

static int on_row(struct jsonl_state *st, json_t *obj, size_t line, char *err, size_t errlen)
{
    char why[200];
    int64_t d[SF_MAX_STAGES];
    sf_row row;
    if (st->part == NULL)
        return sfctl_fail_at(err, errlen, line, 1, "row before any header");
    sf_parallel par;
    int64_t waits[2 * SF_MAX_STAGES];
    bool has_par, has_waits;
    if (sf_recording_parse_row(obj, &st->part->schema, &row, d, why, sizeof why) < 0 ||
        sf_recording_parse_row_parallel(obj, &par, &has_par, why, sizeof why) < 0 ||
        sf_recording_parse_row_waits(obj, &st->part->schema, waits, &has_waits, why, sizeof why) <
            0)
        return sfctl_fail_at(err, errlen, line, 1, "row: %s", why);
    row.parallel = has_par ? &par : NULL;     /* copied by sfctl_part_add_row */
    row.sync_wait = has_waits ? waits : NULL; /* copied too */
    if (row.rank >= st->part->world_size)
        return sfctl_fail_at(err, errlen, line, 1, "row: rank %u is not below the world size %u",
                             row.rank, st->part->world_size);
    return sfctl_part_add_row(st->part, &row, row.role);
}

static int on_window(struct jsonl_state *st, json_t *obj, size_t line, char *err, size_t errlen)
{
    char why[200];
    sf_window_meta meta;
    if (st->part == NULL)
        return sfctl_fail_at(err, errlen, line, 1, "window before any header");
    if (sf_recording_parse_window(obj, &meta, why, sizeof why) < 0)
        return sfctl_fail_at(err, errlen, line, 1, "window: %s", why);
    return add_window(st->part, &meta);
}

static int on_reference(struct jsonl_state *st, json_t *obj, size_t line, char *err, size_t errlen)
{
    char why[200];
    struct replay_part *p = st->part;
    if (p == NULL)
        return sfctl_fail_at(err, errlen, line, 1, "reference before any header");
    if (p->reference != NULL || p->n_rows > 0)
        return sfctl_fail_at(err, errlen, line, 1, "reference must follow its header, once");
    int r = sf_recording_parse_reference(obj, &p->schema, p->world_size, &p->reference, why,
                                         sizeof why);
    return r < 0 ? sfctl_fail_at(err, errlen, line, 1, "reference: %s", why) : 0;
}

static int on_line(struct jsonl_state *st, const char *text, size_t line, char *err, size_t errlen)
{
    json_error_t je;
    json_t *obj = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (obj == NULL)
        return sfctl_fail_at(err, errlen, line, (size_t)(je.column > 0 ? je.column : 1),
                             "invalid JSON: %s", je.text);
    const char *type = json_string_value(json_object_get(obj, "type"));
    int r;
    if (!json_is_object(obj) || type == NULL)
        r = sfctl_fail_at(err, errlen, line, 1, "each line must be an object with a \"type\"");
    else if (strcmp(type, "header") == 0)
        r = on_header(st, obj, line, err, errlen);
    else if (strcmp(type, "row") == 0)
        r = on_row(st, obj, line, err, errlen);
    else if (strcmp(type, "window") == 0)
        r = on_window(st, obj, line, err, errlen);
    else if (strcmp(type, "reference") == 0)
        r = on_reference(st, obj, line, err, errlen);
    else
        r = sfctl_fail_at(err, errlen, line, 1, "unknown line type \"%s\"", type);
    json_decref(obj);
    return r;
}

static int check_parts(const struct replay_input *in, size_t line, char *err, size_t errlen)
{
    if (in->n_parts == 0)
        return sfctl_fail_at(err, errlen, line + 1, 1, "empty file: no header line");
    size_t rows = 0;
    for (size_t i = 0; i < in->n_parts; i++)
        rows += in->parts[i].n_rows;
    return rows ? 0 : sfctl_fail_at(err, errlen, line + 1, 1, "no rows after the header");
}

int sfctl_read_jsonl(FILE *in, const sf_gates *gates, struct replay_input *ret, char *err,
                     size_t errlen)
{
    struct replay_input input = {0};
    struct jsonl_state st = {.input = &input, .gates = *gates};
    char *text = malloc(REPLAY_MAX_LINE + 1);
    size_t line = 0;
    int r = text ? 0 : -ENOMEM, got = 0;
    while (r == 0 && (got = sfctl_read_line(in, text, line + 1, err, errlen)) > 0) {
        line++;
        if (!sf_is_blank(text))
            r = on_line(&st, text, line, err, errlen);
    }
    if (r == 0 && got < 0)
        r = got;
    free(text);
    if (r == 0)
        r = check_parts(&input, line, err, errlen);
    if (r < 0) {
        sfctl_replay_input_clear(&input);
        return r;
    }
    for (size_t i = 0; i < input.n_parts; i++)
        sfctl_part_finish(&input.parts[i]);
    *ret = input;
    return 0;
}

/*
 * The wide CSV replay format: `step,rank,<stage 1>,…,<stage S>[,step_wall]`,
 * durations in seconds, the last stage column being the residual (docs/SPEC.md
 * section 5). Every field is checked; the first problem is reported with its
 * line and column, and nothing is guessed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "strutil.h"

#define CSV_MAX_FIELDS (2 + SF_MAX_STAGES + 1)

struct csv_line {
    char *fields[CSV_MAX_FIELDS];
    size_t columns[CSV_MAX_FIELDS]; /* 1-based character column of each field */
    size_t n;
    bool too_many;
};

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Splits in place on commas. Quoting is not part of the format: stage names
 * and numbers never contain commas. */
static void split_line(char *text, struct csv_line *out)
{
    out->n = 0;
    out->too_many = false;
    char *p = text;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (out->n == CSV_MAX_FIELDS) {
            out->too_many = true;
            return;
        }
        out->columns[out->n] = (size_t)(p - text) + 1;
        out->fields[out->n++] = trim(p);
        if (comma == NULL)
            return;
        p = comma + 1;
    }
}

/* The residual is named step.other_cpu_wall, or ends in "residual". */
static bool is_residual_name(const char *name)
{
    size_t n = strlen(name);
    return strcmp(name, "step.other_cpu_wall") == 0 ||
           (n >= 8 && strcmp(name + n - 8, "residual") == 0);
}

struct csv_header {
    uint32_t n_stages;
    bool has_wall;
    size_t n_fields;
};

static int parse_header(struct csv_line *h, struct replay_part *p, struct csv_header *ret,
                        char *err, size_t errlen)
{
    if (h->too_many)
        return sfctl_fail_at(err, errlen, 1, 1, "too many columns (at most %d stages)",
                             SF_MAX_STAGES);
    if (h->n < 3 || strcmp(h->fields[0], "step") != 0 || strcmp(h->fields[1], "rank") != 0)
        return sfctl_fail_at(err, errlen, 1, 1,
                             "header must be step,rank,<stage 1>,...,<residual>[,step_wall]");
    struct csv_header hd = {.n_fields = h->n};
    hd.has_wall = strcmp(h->fields[h->n - 1], "step_wall") == 0;
    hd.n_stages = (uint32_t)(h->n - 2 - hd.has_wall);
    const char *const *names = (const char *const *)&h->fields[2];
    if (hd.n_stages == 0 || !is_residual_name(names[hd.n_stages - 1]))
        return sfctl_fail_at(
            err, errlen, 1, h->columns[h->n - 1 - hd.has_wall],
            "missing residual column: the last stage column must be step.other_cpu_wall "
            "(or a name ending in \"residual\")");
    int r = sf_schema_init(&p->schema, 1, hd.n_stages, names, NULL,
                           sf_accumulation_of(names, hd.n_stages));
    if (r < 0)
        return sfctl_fail_at(err, errlen, 1, h->columns[2],
                             "invalid stage names (empty, duplicate, "
                             "longer than %d bytes, or with spaces, quotes or commas)",
                             SF_MAX_NAME_LEN);
    *ret = hd;
    return 0;
}

static int parse_integer(const char *text, long long lo, long long hi, long long *ret)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int duration_field(const struct csv_line *l, size_t f, const char *name, size_t line,
                          int64_t max, int64_t *ret, char *err, size_t errlen)
{
    static const char *const reasons[] = {
        [SECONDS_NOT_A_NUMBER] = "not a number",
        [SECONDS_NEGATIVE] = "negative duration",
        [SECONDS_NOT_FINITE] = "NaN or infinite value",
        [SECONDS_BEYOND_INT64] = "value beyond the int64 nanosecond range",
    };
    enum seconds_error e = sfctl_parse_seconds(l->fields[f], ret);
    if (e != SECONDS_OK)
        return sfctl_fail_at(err, errlen, line, l->columns[f], "%s (%s): \"%s\"", reasons[e], name,
                             l->fields[f]);
    if (*ret > max)
        return sfctl_fail_at(err, errlen, line, l->columns[f],
                             "%s (%s): \"%s\" exceeds the bound of %.0f s", "value too large", name,
                             l->fields[f], (double)max / 1e9);
    return 0;
}

static int parse_row(const struct csv_line *l, const struct csv_header *hd, struct replay_part *p,
                     size_t line, char *err, size_t errlen)
{
    if (l->too_many || l->n != hd->n_fields)
        return sfctl_fail_at(err, errlen, line, 1, "ragged row: expected %zu fields, found %s%zu",
                             hd->n_fields, l->too_many ? "more than " : "", l->n);
    long long step, rank;
    if (parse_integer(l->fields[0], 0, INT64_MAX / 2, &step) < 0)
        return sfctl_fail_at(err, errlen, line, l->columns[0],
                             "step must be a non-negative integer: \"%s\"", l->fields[0]);
    if (parse_integer(l->fields[1], 0, SF_MAX_RANKS - 1, &rank) < 0)
        return sfctl_fail_at(err, errlen, line, l->columns[1],
                             "rank must be an integer in [0, %u): \"%s\"", SF_MAX_RANKS,
                             l->fields[1]);
    int64_t d[SF_MAX_STAGES], explicit_sum = 0;
    for (uint32_t s = 0; s < hd->n_stages; s++) {
        int r = duration_field(l, 2 + s, p->schema.names[s], line, SF_MAX_DURATION_NS, &d[s], err,
                               errlen);
        if (r < 0)
            return r;
        if (s + 1 < hd->n_stages)
            explicit_sum += d[s];
    }
    sf_row row = {.step = step, .rank = (uint32_t)rank, .d = d};
    if (hd->has_wall) {
        int64_t wall;
        int r = duration_field(l, l->n - 1, "step_wall", line, SF_MAX_DURATION_NS * SF_MAX_STAGES,
                               &wall, err, errlen);
        if (r < 0)
            return r;
        row.overlap_ns = explicit_sum > wall ? explicit_sum - wall : 0;
    }
    return sfctl_part_add_row(p, &row, NULL) < 0 ? -ENOMEM : 0;
}

/* Duplicates are found after loading: sort an index by (step, rank, line). */
struct row_key {
    int64_t step;
    uint32_t rank;
    size_t line;
};

static int cmp_key(const void *a, const void *b)
{
    const struct row_key *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

static int check_duplicates(const struct replay_part *p, const size_t *lines, char *err,
                            size_t errlen)
{
    struct row_key *keys = malloc((p->n_rows ? p->n_rows : 1) * sizeof *keys);
    if (keys == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < p->n_rows; i++)
        keys[i] = (struct row_key){p->rows[i].step, p->rows[i].rank, lines[i]};
    qsort(keys, p->n_rows, sizeof *keys, cmp_key);
    int r = 0;
    for (size_t i = 1; i < p->n_rows && r == 0; i++)
        if (keys[i].step == keys[i - 1].step && keys[i].rank == keys[i - 1].rank)
            r = sfctl_fail_at(err, errlen, keys[i].line, 1,
                              "duplicate (step %lld, rank %u): first seen on line %zu",
                              (long long)keys[i].step, keys[i].rank, keys[i - 1].line);
    free(keys);
    return r;
}

static uint32_t distinct_ranks(const struct replay_part *p)
{
    int n = sf_distinct_ranks(p->rows, p->n_rows);
    return n > 0 ? (uint32_t)n : 1;
}

static int read_rows(FILE *in, struct replay_part *p, const struct csv_header *hd, size_t *line,
                     size_t **lines, char *err, size_t errlen)
{
    char *text = malloc(REPLAY_MAX_LINE + 1);
    size_t cap_lines = 0;
    int r = text ? 0 : -ENOMEM, got = 0;
    struct csv_line l;
    while (r == 0 && (got = sfctl_read_line(in, text, *line + 1, err, errlen)) > 0) {
        (*line)++;
        if (sf_is_blank(text))
            continue;
        split_line(text, &l);
        r = parse_row(&l, hd, p, *line, err, errlen);
        if (r == 0 && p->n_rows > cap_lines) {
            cap_lines = p->cap_rows;
            size_t *grown = realloc(*lines, cap_lines * sizeof **lines);
            if (grown == NULL)
                r = -ENOMEM;
            else
                *lines = grown;
        }
        if (r == 0)
            (*lines)[p->n_rows - 1] = *line;
    }
    if (r == 0 && got < 0)
        r = got;
    free(text);
    return r;
}

int sfctl_read_csv(FILE *in, struct replay_input *ret, char *err, size_t errlen)
{
    struct replay_input input = {0};
    struct replay_part *p = sfctl_input_add_part(&input);
    char *text = malloc(REPLAY_MAX_LINE + 1);
    size_t line = 0, *lines = NULL;
    struct csv_line header;
    struct csv_header hd = {0};
    int r = p && text ? 0 : -ENOMEM, got = 0;
    while (r == 0 && (got = sfctl_read_line(in, text, line + 1, err, errlen)) > 0) {
        line++;
        if (!sf_is_blank(text))
            break;
    }
    if (r == 0 && got < 0)
        r = got;
    if (r == 0 && got == 0)
        r = sfctl_fail_at(err, errlen, line + 1, 1, "empty file");
    if (r == 0) {
        split_line(text, &header);
        r = parse_header(&header, p, &hd, err, errlen);
    }
    if (r == 0)
        r = read_rows(in, p, &hd, &line, &lines, err, errlen);
    if (r == 0 && p->n_rows == 0)
        r = sfctl_fail_at(err, errlen, line + 1, 1, "no data rows after the header");
    if (r == 0)
        r = check_duplicates(p, lines, err, errlen);
    free(text);
    free(lines);
    if (r < 0) {
        sfctl_replay_input_clear(&input);
        return r;
    }
    sfctl_part_finish(p);
    p->world_size = distinct_ranks(p);
    *ret = input;
    return 0;
}

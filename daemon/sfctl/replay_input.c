/*
 * Storage of replay input shared by the CSV and JSON Lines readers, and the
 * exact decimal-seconds parser: "0.1" must become 100000000 ns, never
 * 99999999 through a binary double.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <stdio.h>

#include "replay.h"
#include <stagefrontier/bounded_line.h>

int sfctl_fail_at(char *err, size_t errlen, size_t line, size_t col, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%zu:%zu: %s", line, col, msg);
    return -EINVAL;
}

int sfctl_read_line(FILE *in, char *buf, size_t line, char *err, size_t errlen)
{
    size_t len;
    switch (sf_read_line(in, buf, REPLAY_MAX_LINE + 1, &len)) {
    case SF_LINE_OK:
        return 1;
    case SF_LINE_EOF:
        return 0;
    case SF_LINE_TOO_LONG:
        return sfctl_fail_at(err, errlen, line, 1, "line longer than %u bytes: refused",
                             REPLAY_MAX_LINE);
    case SF_LINE_NUL:
        return sfctl_fail_at(err, errlen, line, len + 1, "NUL byte: not a text file");
    case SF_LINE_ERROR:
        break;
    }
    int e = errno ? errno : EIO;
    snprintf(err, errlen, "%zu:1: %s", line, strerror(e));
    return -e;
}

struct replay_part *sfctl_input_add_part(struct replay_input *in)
{
    struct replay_part *parts = realloc(in->parts, (in->n_parts + 1) * sizeof *parts);
    if (parts == NULL)
        return NULL;
    in->parts = parts;
    memset(&parts[in->n_parts], 0, sizeof parts[0]);
    return &parts[in->n_parts++];
}

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 256;
    while (n < need)
        n *= 2;
    void *p = realloc(*buf, n * elem);
    if (p == NULL)
        return -ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

/* Durations are stored apart from rows and tied to them by sfctl_part_finish,
 * since the storage moves while it grows. */
int sfctl_part_add_row(struct replay_part *p, const sf_row *row, const char *role)
{
    size_t S = p->schema.n_stages, cap = p->cap_rows;
    if (p->n_rows >= SIZE_MAX / (S * sizeof(int64_t)) - 1)
        return -ENOMEM;
    int r = grow((void **)&p->rows, &cap, p->n_rows + 1, sizeof *p->rows);
    if (r == 0 && cap != p->cap_rows) {
        int64_t *d = realloc(p->durations, cap * S * sizeof *d);
        char **roles = realloc(p->roles, cap * sizeof *roles);
        sf_parallel *pars = realloc(p->pars, cap * sizeof *pars);
        size_t W = 2 * (size_t)__builtin_popcountll(p->schema.sync_mask);
        int64_t *waits = realloc(p->waits, cap * (W ? W : 1) * sizeof *waits);
        bool *has_waits = realloc(p->has_waits, cap * sizeof *has_waits);
        if (waits)
            p->waits = waits;
        if (has_waits)
            p->has_waits = has_waits;
        if (d)
            p->durations = d;
        if (roles)
            p->roles = roles;
        if (pars)
            p->pars = pars;
        if (d == NULL || roles == NULL || pars == NULL || waits == NULL || has_waits == NULL)
            return -ENOMEM;
        p->cap_rows = cap;
    }
    if (r < 0)
        return r;
    char *role_copy = role && role[0] ? strdup(role) : NULL;
    if (role && role[0] && role_copy == NULL)
        return -ENOMEM;
    memcpy(&p->durations[p->n_rows * S], row->d, S * sizeof(int64_t));
    p->rows[p->n_rows] = *row;
    p->roles[p->n_rows] = role_copy;
    if (row->parallel != NULL)
        p->pars[p->n_rows] = *row->parallel;
    else
        sf_parallel_init(&p->pars[p->n_rows]);
    size_t W = 2 * (size_t)__builtin_popcountll(p->schema.sync_mask);
    p->has_waits[p->n_rows] = row->sync_wait != NULL && W > 0;
    if (p->has_waits[p->n_rows])
        memcpy(&p->waits[p->n_rows * W], row->sync_wait, W * sizeof(int64_t));
    p->n_rows++;
    return 0;
}

int sfctl_part_finish(struct replay_part *p)
{
    for (size_t i = 0; i < p->n_rows; i++) {
        p->rows[i].d = &p->durations[i * p->schema.n_stages];
        p->rows[i].role = p->roles[i];
        p->rows[i].parallel = p->pars[i].declared ? &p->pars[i] : NULL;
        size_t W = 2 * (size_t)__builtin_popcountll(p->schema.sync_mask);
        p->rows[i].sync_wait = p->has_waits[i] ? &p->waits[i * W] : NULL;
    }
    return 0;
}

void sfctl_replay_input_clear(struct replay_input *in)
{
    for (size_t i = 0; i < in->n_parts; i++) {
        struct replay_part *p = &in->parts[i];
        for (size_t j = 0; j < p->n_rows; j++)
            free(p->roles[j]);
        free(p->roles);
        free(p->pars);
        free(p->waits);
        free(p->has_waits);
        free(p->rows);
        free(p->durations);
        free(p->windows);
        sf_reference_free(p->reference);
        sf_schema_clear(&p->schema);
    }
    free(in->parts);
    memset(in, 0, sizeof *in);
}

/* ---- decimal seconds ------------------------------------------------------ */

static bool is_non_finite(const char *t)
{
    if (*t == '+' || *t == '-')
        t++;
    return !strcasecmp(t, "nan") || !strcasecmp(t, "inf") || !strcasecmp(t, "infinity");
}

/* Splits "123.456e-7" into significant digits and a power of ten. */
static enum seconds_error split_decimal(const char *t, char *digits, size_t cap, size_t *ret_n,
                                        long *ret_exp)
{
    size_t n = 0;
    long exp = 0;
    bool any = false, dot = false;
    for (; *t; t++) {
        if (*t == '.' && !dot) {
            dot = true;
            continue;
        }
        if (!isdigit((unsigned char)*t))
            break;
        any = true;
        if (n == 0 && *t == '0') { /* leading zeros carry no digits */
            exp -= dot;
            continue;
        }
        if (n < cap) {
            digits[n++] = *t;
            exp -= dot;
        } else if (!dot) {
            exp++; /* integer digits past the cap only scale */
        }          /* fraction digits past the cap are dropped */
    }
    if (!any)
        return SECONDS_NOT_A_NUMBER;
    if (*t == 'e' || *t == 'E') {
        char *end;
        errno = 0;
        long e = strtol(t + 1, &end, 10);
        if (end == t + 1 || errno != 0 || e > 100000 || e < -100000)
            return SECONDS_NOT_A_NUMBER;
        exp += e;
        t = end;
    }
    if (*t != '\0')
        return SECONDS_NOT_A_NUMBER;
    *ret_n = n;
    *ret_exp = exp;
    return SECONDS_OK;
}

enum seconds_error sfctl_parse_seconds(const char *text, int64_t *ret_ns)
{
    if (is_non_finite(text))
        return SECONDS_NOT_FINITE;
    bool negative = *text == '-';
    if (*text == '-' || *text == '+')
        text++;
    char digits[64];
    size_t n;
    long exp;
    enum seconds_error e = split_decimal(text, digits, sizeof digits, &n, &exp);
    if (e != SECONDS_OK)
        return e;
    exp += 9; /* seconds -> ns */
    if (n == 0) {
        *ret_ns = 0;
        return SECONDS_OK;
    }
    if (negative)
        return SECONDS_NEGATIVE;
    if ((long)n + exp > 19)
        return SECONDS_BEYOND_INT64;
    unsigned __int128 v = 0;
    long keep = (long)n + exp; /* integer digits of the ns value */
    for (long i = 0; i < keep; i++)
        v = v * 10 + (unsigned)(i < (long)n ? digits[i] - '0' : 0);
    if (keep >= 0 && keep < (long)n && digits[keep] >= '5')
        v++; /* round half up: durations are >= 0 */
    if (v > INT64_MAX)
        return SECONDS_BEYOND_INT64;
    *ret_ns = (int64_t)v;
    return SECONDS_OK;
}

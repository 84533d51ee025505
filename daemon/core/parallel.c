/*
 * Parallel coordinates: the strict parser of SF_PARALLEL, the canonical text,
 * the per-rank check against the world and the cohort relation
 * (stagefrontier/parallel.h). Pure; compiled into the client and the core, so
 * both read the same rules.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "stagefrontier/parallel.h"

static const char *const dim_names[SF_PAR_DIMS] = {"pp", "tp", "dp", "cp", "ep"};

const char *sf_parallel_dim_name(enum sf_parallel_dim d)
{
    return (unsigned)d < SF_PAR_DIMS ? dim_names[d] : NULL;
}

void sf_parallel_init(sf_parallel *ret)
{
    memset(ret, 0, sizeof *ret);
    for (int d = 0; d < SF_PAR_DIMS; d++)
        ret->size[d] = 1;
}

static int fail(char *err, size_t cap, const char *what, const char *item, size_t len)
{
    if (err != NULL && cap > 0)
        snprintf(err, cap, "%s in \"%.*s\"", what, (int)(len > 48 ? 48 : len), item);
    return -EINVAL;
}

/* A decimal in p..end with no sign and no leading zero (but "0"), at most max. */
static bool decimal(const char *p, const char *end, uint64_t max, uint32_t *ret)
{
    uint64_t v = 0;
    if (p == end || end - p > 8 || (*p == '0' && end - p > 1))
        return false;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > max)
        return false;
    *ret = (uint32_t)v;
    return true;
}

static int parse_schedule(const char *v, const char *end, sf_parallel *p)
{
    size_t n = (size_t)(end - v);
    if (n == 5 && memcmp(v, "gpipe", 5) == 0)
        p->schedule = SF_SCHEDULE_GPIPE;
    else if (n == 4 && memcmp(v, "1f1b", 4) == 0)
        p->schedule = SF_SCHEDULE_1F1B;
    else if (n > 12 && memcmp(v, "interleaved:", 12) == 0 &&
             decimal(v + 12, end, SF_PARALLEL_MAX_VIRTUAL, &p->virtual_stages) &&
             p->virtual_stages >= 2)
        p->schedule = SF_SCHEDULE_INTERLEAVED;
    else
        return -EINVAL;
    return 0;
}

/* One "key=value" item of end - item bytes. */
static int parse_item(const char *item, const char *end, sf_parallel *p, bool *seen_schedule,
                      char *err, size_t cap)
{
    size_t len = (size_t)(end - item);
    const char *eq = memchr(item, '=', len);
    if (eq == NULL)
        return fail(err, cap, "expected key=value", item, len);
    size_t klen = (size_t)(eq - item);
    if (klen == 8 && memcmp(item, "schedule", 8) == 0) {
        if (*seen_schedule)
            return fail(err, cap, "schedule given twice", item, len);
        *seen_schedule = true;
        if (parse_schedule(eq + 1, end, p) < 0)
            return fail(err, cap, "schedule is gpipe, 1f1b or interleaved:V (V 2..64)", item, len);
        return 0;
    }
    int d = 0;
    while (d < SF_PAR_DIMS && !(klen == 2 && memcmp(item, dim_names[d], 2) == 0))
        d++;
    if (d == SF_PAR_DIMS)
        return fail(err, cap, "unknown key (pp, tp, dp, cp, ep, schedule)", item, len);
    if (p->declared & (1u << d))
        return fail(err, cap, "dimension given twice", item, len);
    const char *slash = memchr(eq + 1, '/', (size_t)(end - eq - 1));
    uint32_t index, size;
    if (slash == NULL || !decimal(eq + 1, slash, SF_PARALLEL_MAX_SIZE, &index) ||
        !decimal(slash + 1, end, SF_PARALLEL_MAX_SIZE, &size))
        return fail(err, cap, "expected index/size", item, len);
    if (size == 0 || index >= size)
        return fail(err, cap, "index must be below size", item, len);
    p->declared |= 1u << d;
    p->index[d] = index;
    p->size[d] = size;
    return 0;
}

uint64_t sf_parallel_world(const sf_parallel *p)
{
    uint64_t product = 1; /* stops past 2^21: five sizes of 2^21 would wrap 64 bits */
    for (int d = 0; d < SF_PAR_DIMS && product <= SF_PARALLEL_MAX_SIZE; d++)
        product *= p->size[d] <= SF_PARALLEL_MAX_SIZE ? p->size[d] : SF_PARALLEL_MAX_SIZE + 1u;
    return product > SF_PARALLEL_MAX_SIZE ? 0 : product;
}

int sf_parallel_parse(const char *text, sf_parallel *ret, char *err, size_t err_cap)
{
    sf_parallel p;
    bool seen_schedule = false;
    sf_parallel_init(&p);
    if (text == NULL || text[0] == '\0')
        return fail(err, err_cap, "empty", "", 0);
    size_t n = strnlen(text, SF_PARALLEL_TEXT_MAX + 1);
    if (n > SF_PARALLEL_TEXT_MAX)
        return fail(err, err_cap, "too long", text, n);
    for (const char *item = text;;) {
        const char *comma = memchr(item, ',', (size_t)(text + n - item));
        const char *end = comma ? comma : text + n;
        if (end == item)
            return fail(err, err_cap, "empty item", text, n);
        int r = parse_item(item, end, &p, &seen_schedule, err, err_cap);
        if (r < 0)
            return r;
        if (comma == NULL)
            break;
        item = comma + 1;
    }
    if (p.declared == 0)
        return fail(err, err_cap, "no dimension", text, n);
    if (p.schedule != SF_SCHEDULE_NONE && !(p.declared & (1u << SF_PAR_PP)))
        return fail(err, err_cap, "a schedule needs pp", text, n);
    if (sf_parallel_world(&p) == 0)
        return fail(err, err_cap, "sizes multiply past 2^21 ranks", text, n);
    *ret = p;
    return 0;
}

/* snprintf at *at of cap, keeping the would-be length in *at. */
static void append(char *buf, size_t cap, size_t *at, const char *fmt, const char *name, uint32_t x,
                   uint32_t y)
{
    int r = snprintf(buf + (*at < cap ? *at : cap), *at < cap ? cap - *at : 0, fmt, *at ? "," : "",
                     name, x, y);
    *at += r > 0 ? (size_t)r : 0;
}

int sf_parallel_format(const sf_parallel *p, char *buf, size_t cap)
{
    static const char *const sched[] = {"", "gpipe", "1f1b", "interleaved"};
    size_t at = 0;
    if (cap > 0)
        buf[0] = '\0';
    for (int d = 0; d < SF_PAR_DIMS; d++)
        if (p->declared & (1u << d))
            append(buf, cap, &at, "%s%s=%u/%u", dim_names[d], p->index[d], p->size[d]);
    if (p->schedule == SF_SCHEDULE_INTERLEAVED)
        append(buf, cap, &at, "%sschedule=%s:%u", sched[p->schedule], p->virtual_stages, 0);
    else if (p->schedule == SF_SCHEDULE_GPIPE || p->schedule == SF_SCHEDULE_1F1B)
        append(buf, cap, &at, "%sschedule=%s", sched[p->schedule], 0, 0);
    return (int)at;
}

int sf_parallel_check(const sf_parallel *p, uint32_t world_size, const char **ret_reason)
{
    const char *why = NULL;
    if (p->declared == 0 || (p->declared & ~((1u << SF_PAR_DIMS) - 1)))
        why = "no dimension, or an unknown one";
    for (int d = 0; why == NULL && d < SF_PAR_DIMS; d++) {
        bool given = p->declared & (1u << d);
        if (p->size[d] == 0 || p->size[d] > SF_PARALLEL_MAX_SIZE || p->index[d] >= p->size[d] ||
            (!given && p->size[d] != 1))
            why = "an index not below its size";
    }
    if (why == NULL &&
        (p->schedule > SF_SCHEDULE_INTERLEAVED ||
         (p->schedule == SF_SCHEDULE_INTERLEAVED) !=
             (p->virtual_stages >= 2 && p->virtual_stages <= SF_PARALLEL_MAX_VIRTUAL) ||
         (p->schedule != SF_SCHEDULE_INTERLEAVED && p->virtual_stages != 0) ||
         (p->schedule != SF_SCHEDULE_NONE && !(p->declared & (1u << SF_PAR_PP)))))
        why = "a malformed pipeline schedule";
    if (why == NULL && (sf_parallel_world(p) == 0 || sf_parallel_world(p) != world_size))
        why = "group sizes that do not multiply to the world size";
    if (ret_reason != NULL)
        *ret_reason = why;
    return why ? -EINVAL : 0;
}

bool sf_parallel_same_shape(const sf_parallel *a, const sf_parallel *b)
{
    return a->declared == b->declared && memcmp(a->size, b->size, sizeof a->size) == 0 &&
           a->schedule == b->schedule && a->virtual_stages == b->virtual_stages;
}

bool sf_parallel_equal(const sf_parallel *a, const sf_parallel *b)
{
    return sf_parallel_same_shape(a, b) && memcmp(a->index, b->index, sizeof a->index) == 0;
}

bool sf_parallel_same_cohort(const sf_parallel *a, const sf_parallel *b)
{
    return sf_parallel_same_shape(a, b) && a->index[SF_PAR_PP] == b->index[SF_PAR_PP] &&
           a->index[SF_PAR_TP] == b->index[SF_PAR_TP] && a->index[SF_PAR_CP] == b->index[SF_PAR_CP];
}

uint64_t sf_parallel_tuple(const sf_parallel *p)
{
    uint64_t t = 0;
    for (int d = 0; d < SF_PAR_DIMS; d++)
        t = t * p->size[d] + p->index[d];
    return t;
}

uint64_t sf_parallel_cohort(const sf_parallel *p)
{
    static const int dims[] = {SF_PAR_PP, SF_PAR_TP, SF_PAR_CP};
    uint64_t t = 0;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        t = t * p->size[dims[i]] + p->index[dims[i]];
    return t;
}

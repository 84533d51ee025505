/*
 * Streaming Chrome-trace reader. A small recursive-descent JSON parser over a
 * 64 KiB window: it validates the whole document (RFC 8259 syntax, depth at
 * most 64) but keeps only the few event fields the importer needs, so memory
 * does not grow with the trace. jansson decodes whole documents only; it is
 * used here for the small distributedInfo object, captured whole.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "trace_json.h"

#define READ_CHUNK 65536
#define MAX_DEPTH 64
#define INFO_MAX 65536 /* bytes of distributedInfo kept for jansson */
#define NUMBER_MAX 64

struct reader {
    trace_read_fn read;
    void *read_ctx;
    trace_event_fn on_event;
    void *user;
    struct trace_meta *meta;
    char *err;
    size_t errlen;
    int read_error; /* set when the read function failed */
    unsigned char *buf;
    size_t pos, len;
    uint64_t base; /* stream offset of buf[0] */
    bool eof;
    char *capture; /* distributedInfo bytes while capturing */
    size_t capture_len;
    bool capturing;
};

static int fail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct reader *r, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "byte %llu: %s", (unsigned long long)(r->base + r->pos), msg);
    return -EINVAL;
}

static int refill(struct reader *r)
{
    if (r->eof)
        return 0;
    r->base += r->len;
    r->pos = r->len = 0;
    ssize_t n = r->read(r->read_ctx, r->buf, READ_CHUNK, r->err, r->errlen);
    if (n < 0) {
        r->read_error = (int)n;
        return (int)n;
    }
    if (n == 0)
        r->eof = true;
    r->len = (size_t)n;
    return 0;
}

/* Next byte without consuming it; -1 at the end, or a negative errno - 1
 * below that on a read error. */
static inline int peek(struct reader *r)
{
    if (r->pos < r->len)
        return r->buf[r->pos];
    if (refill(r) < 0)
        return -2;
    return r->pos < r->len ? r->buf[r->pos] : -1;
}

static int capture_byte(struct reader *r, unsigned char c)
{
    if (r->capture_len == INFO_MAX)
        return fail(r, "distributedInfo is larger than %d bytes", INFO_MAX);
    r->capture[r->capture_len++] = (char)c;
    return 0;
}

static inline int advance(struct reader *r)
{
    if (r->capturing)
        return capture_byte(r, r->buf[r->pos++]);
    r->pos++;
    return 0;
}

static int unexpected(struct reader *r, int c, const char *want)
{
    if (c == -2)
        return r->read_error;
    if (c == -1)
        return fail(r, "truncated JSON: the input ends where %s was expected", want);
    if (c >= 0x20 && c < 0x7f)
        return fail(r, "expected %s, found '%c'", want, c);
    return fail(r, "expected %s, found byte 0x%02x", want, c);
}

static int skip_ws(struct reader *r)
{
    for (;;) {
        while (r->pos < r->len) { /* the common case: no call per byte */
            unsigned char c = r->buf[r->pos];
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
                return c;
            int e = advance(r);
            if (e < 0)
                return e - 2; /* keep errors below -2 apart from bytes */
        }
        int c = peek(r);
        if (c < 0)
            return c;
    }
}

/* Consumes the expected byte c after whitespace. */
static int expect(struct reader *r, int want, const char *what)
{
    int c = skip_ws(r);
    if (c < -2)
        return c + 2;
    if (c != want)
        return unexpected(r, c, what);
    return advance(r);
}

static int hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int read_hex4(struct reader *r, unsigned *ret)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = peek(r), h = hex_value(c);
        if (h < 0)
            return unexpected(r, c, "a hex digit of a \\u escape");
        int e = advance(r);
        if (e < 0)
            return e;
        v = v << 4 | (unsigned)h;
    }
    *ret = v;
    return 0;
}

/* Appends b to out while there is room (one byte kept for the NUL). */
static void put(char *out, size_t cap, size_t *n, bool *cut, unsigned char b)
{
    if (out == NULL)
        return;
    if (*n + 1 < cap)
        out[(*n)++] = (char)b;
    else
        *cut = true;
}

static void put_utf8(char *out, size_t cap, size_t *n, bool *cut, unsigned cp)
{
    if (cp < 0x80) {
        put(out, cap, n, cut, (unsigned char)cp);
    } else if (cp < 0x800) {
        put(out, cap, n, cut, (unsigned char)(0xc0 | cp >> 6));
        put(out, cap, n, cut, (unsigned char)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        put(out, cap, n, cut, (unsigned char)(0xe0 | cp >> 12));
        put(out, cap, n, cut, (unsigned char)(0x80 | (cp >> 6 & 0x3f)));
        put(out, cap, n, cut, (unsigned char)(0x80 | (cp & 0x3f)));
    } else {
        put(out, cap, n, cut, (unsigned char)(0xf0 | cp >> 18));
        put(out, cap, n, cut, (unsigned char)(0x80 | (cp >> 12 & 0x3f)));
        put(out, cap, n, cut, (unsigned char)(0x80 | (cp >> 6 & 0x3f)));
        put(out, cap, n, cut, (unsigned char)(0x80 | (cp & 0x3f)));
    }
}

static int read_escape(struct reader *r, char *out, size_t cap, size_t *n, bool *cut)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    int c = peek(r);
    const char *hit = c > 0 ? strchr(from, c) : NULL;
    if (hit == NULL && c != 'u')
        return unexpected(r, c, "an escape character");
    int e = advance(r);
    if (e < 0)
        return e;
    if (hit) {
        put(out, cap, n, cut, (unsigned char)to[hit - from]);
        return 0;
    }
    unsigned cp, low;
    if ((e = read_hex4(r, &cp)) < 0)
        return e;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return fail(r, "lone low surrogate in a \\u escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (peek(r) != '\\' || (e = advance(r)) < 0 || peek(r) != 'u' || (e = advance(r)) < 0)
            return e < 0 ? e : fail(r, "high surrogate without its low half");
        if ((e = read_hex4(r, &low)) < 0)
            return e;
        if (low < 0xdc00 || low > 0xdfff)
            return fail(r, "high surrogate without its low half");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    put_utf8(out, cap, n, cut, cp);
    return 0;
}

/* Reads a string (the opening quote is next). out may be NULL to skip it;
 * otherwise it receives the decoded bytes, NUL-terminated, cut at cap - 1. */
static int read_string(struct reader *r, char *out, size_t cap, bool *ret_cut)
{
    size_t n = 0;
    bool cut = false;
    int e = advance(r); /* the opening quote */
    for (; e == 0;) {
        if (r->pos == r->len) {
            int c = peek(r);
            if (c < 0)
                return unexpected(r, c, "the end of a string");
        }
        /* Fast path: plain bytes up to the next quote, backslash or control. */
        size_t start = r->pos;
        while (r->pos < r->len) {
            unsigned char b = r->buf[r->pos];
            if (b == '"' || b == '\\' || b < 0x20)
                break;
            r->pos++;
        }
        for (size_t i = start; i < r->pos; i++) {
            put(out, cap, &n, &cut, r->buf[i]);
            if (r->capturing && (e = capture_byte(r, r->buf[i])) < 0)
                return e;
        }
        if (r->pos == r->len)
            continue;
        unsigned char b = r->buf[r->pos];
        if (b < 0x20)
            return fail(r, "control byte 0x%02x inside a string", b);
        if ((e = advance(r)) < 0)
            return e;
        if (b == '"')
            break;
        e = read_escape(r, out, cap, &n, &cut);
    }
    if (e < 0)
        return e;
    if (out)
        out[n] = '\0';
    if (ret_cut)
        *ret_cut = cut;
    return 0;
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* Appends one byte of a number, keeping room for the terminator; a number
 * too long for out is cut and flagged, never written past its end. */
static void put_number_byte(char *out, size_t *n, char c, bool *too_long)
{
    if (*n + 1 < NUMBER_MAX)
        out[(*n)++] = c;
    else
        *too_long = true;
}

static int read_digits(struct reader *r, char *out, size_t *n, bool *too_long, const char *what)
{
    int c = peek(r);
    if (!is_digit(c))
        return unexpected(r, c, what);
    for (;;) {
        while (r->pos < r->len && is_digit(r->buf[r->pos])) {
            put_number_byte(out, n, (char)r->buf[r->pos], too_long);
            int e = advance(r);
            if (e < 0)
                return e;
        }
        if (r->pos < r->len)
            return 0;
        c = peek(r);
        if (c == -2)
            return r->read_error;
        if (!is_digit(c))
            return 0;
    }
}

/* Reads a JSON number into out (NUMBER_MAX bytes); *too_long when cut. */
static int read_number(struct reader *r, char *out, bool *too_long)
{
    size_t n = 0;
    int e = 0, c = peek(r);
    *too_long = false;
    if (c == '-') {
        put_number_byte(out, &n, '-', too_long);
        if ((e = advance(r)) < 0)
            return e;
    }
    if (peek(r) == '0') {
        put_number_byte(out, &n, '0', too_long);
        if ((e = advance(r)) < 0)
            return e;
        if (is_digit(peek(r)))
            return fail(r, "a number has a leading zero");
    } else if ((e = read_digits(r, out, &n, too_long, "a digit")) < 0) {
        return e;
    }
    if (peek(r) == '.') {
        put_number_byte(out, &n, '.', too_long);
        if ((e = advance(r)) < 0 || (e = read_digits(r, out, &n, too_long, "a fraction digit")) < 0)
            return e;
    }
    if ((c = peek(r)) == 'e' || c == 'E') {
        put_number_byte(out, &n, 'e', too_long);
        if ((e = advance(r)) < 0)
            return e;
        if ((c = peek(r)) == '+' || c == '-') {
            put_number_byte(out, &n, (char)c, too_long);
            if ((e = advance(r)) < 0)
                return e;
        }
        if ((e = read_digits(r, out, &n, too_long, "an exponent digit")) < 0)
            return e;
    }
    out[n] = '\0';
    return 0;
}

static int read_literal(struct reader *r, const char *word)
{
    for (const char *w = word; *w; w++) {
        int c = peek(r);
        if (c != *w)
            return unexpected(r, c, word);
        int e = advance(r);
        if (e < 0)
            return e;
    }
    return 0;
}

static int skip_value(struct reader *r, int depth);

/* Called for each element of an array, or each member of an object after
 * its name (in key, when the walker was given room for it) and ':'. */
typedef int (*item_fn)(struct reader *r, const char *key, void *ctx);

/* Walks a container whose opening byte is next, checking its separators. */
static int walk(struct reader *r, bool object, char *key, size_t keycap, item_fn fn, void *ctx)
{
    int e = advance(r), c;
    if (e < 0)
        return e;
    const char close = object ? '}' : ']';
    if ((c = skip_ws(r)) < -2)
        return c + 2;
    if (c == close)
        return advance(r);
    for (;;) {
        if (object) {
            if ((c = skip_ws(r)) < -2)
                return c + 2;
            if (c != '"')
                return unexpected(r, c, "a member name");
            if ((e = read_string(r, key, keycap, NULL)) < 0 || (e = expect(r, ':', "':'")) < 0)
                return e;
        }
        if ((e = fn(r, key, ctx)) < 0)
            return e;
        if ((c = skip_ws(r)) < -2)
            return c + 2;
        if (c == close)
            return advance(r);
        if (c != ',')
            return unexpected(r, c, object ? "',' or '}'" : "',' or ']'");
        if ((e = advance(r)) < 0)
            return e;
    }
}

static int skip_item(struct reader *r, const char *key, void *ctx)
{
    (void)key;
    return skip_value(r, *(const int *)ctx + 1);
}

static int skip_container(struct reader *r, int depth, bool object)
{
    if (depth >= MAX_DEPTH)
        return fail(r, "nesting deeper than %d", MAX_DEPTH);
    return walk(r, object, NULL, 0, skip_item, &depth);
}

static int skip_value(struct reader *r, int depth)
{
    int c = skip_ws(r);
    if (c < -2)
        return c + 2;
    char num[NUMBER_MAX];
    bool too_long;
    switch (c) {
    case '{':
        return skip_container(r, depth, true);
    case '[':
        return skip_container(r, depth, false);
    case '"':
        return read_string(r, NULL, 0, NULL);
    case 't':
        return read_literal(r, "true");
    case 'f':
        return read_literal(r, "false");
    case 'n':
        return read_literal(r, "null");
    default:
        if (c == '-' || is_digit(c))
            return read_number(r, num, &too_long);
        return unexpected(r, c, "a value");
    }
}

/* ---- events ---------------------------------------------------------------- */

/* Microseconds in JSON decimal -> integer ns, rounded half away from zero.
 * Plain decimals (the common case) are converted with integers, exactly;
 * exponents go through long double, whose 64-bit mantissa is exact for
 * every whole-ns value below 2^63. */
static int micros_to_ns(struct reader *r, const char *text, bool too_long, const char *key,
                        int64_t *ret)
{
    const char *p = text;
    bool neg = *p == '-';
    p += neg;
    uint64_t us = 0;
    int digits = 0;
    for (; is_digit(*p) && digits < 17; p++, digits++)
        us = us * 10 + (uint64_t)(*p - '0');
    if (!too_long && !is_digit(*p) && *p != 'e') {
        uint64_t frac = 0;
        int k = 0;
        bool round_up = false;
        if (*p == '.')
            for (p++; is_digit(*p); p++, k++) {
                if (k < 3)
                    frac = frac * 10 + (uint64_t)(*p - '0');
                else if (k == 3)
                    round_up = *p >= '5';
            }
        for (; k < 3; k++)
            frac *= 10;
        uint64_t ns = us * 1000 + frac + round_up;
        *ret = neg ? -(int64_t)ns : (int64_t)ns;
        return 0;
    }
    long double v = strtold(text, NULL) * 1000.0L;
    if (too_long || !(v > -9.2e18L && v < 9.2e18L))
        return fail(r, "event \"%s\" %s is out of range", key, text);
    *ret = (int64_t)(v < 0 ? v - 0.5L : v + 0.5L);
    return 0;
}

/* A time field: a number, or skipped (and left absent) otherwise. */
static int read_time(struct reader *r, int c, const char *key, bool *has, int64_t *ret)
{
    if (c != '-' && !is_digit(c))
        return skip_value(r, 2);
    char num[NUMBER_MAX];
    bool too_long;
    int e = read_number(r, num, &too_long);
    if (e == 0 && (e = micros_to_ns(r, num, too_long, key, ret)) == 0)
        *has = true;
    return e;
}

struct event_ctx {
    struct trace_event ev;
    char name[TRACE_NAME_MAX], ph[8];
};

static int event_member(struct reader *r, const char *key, void *ctx)
{
    struct event_ctx *x = ctx;
    struct trace_event *ev = &x->ev;
    int c = skip_ws(r);
    if (c < -2)
        return c + 2;
    if (c == '"' && strcmp(key, "name") == 0) {
        ev->name = x->name;
        return read_string(r, x->name, TRACE_NAME_MAX, &ev->name_cut);
    }
    if (c == '"' && strcmp(key, "ph") == 0) {
        int e = read_string(r, x->ph, sizeof x->ph, NULL);
        ev->ph = x->ph[0];
        return e;
    }
    if (strcmp(key, "ts") == 0)
        return read_time(r, c, key, &ev->has_ts, &ev->ts_ns);
    if (strcmp(key, "dur") == 0)
        return read_time(r, c, key, &ev->has_dur, &ev->dur_ns);
    return skip_value(r, 2);
}

/* One element of the event array: an event object, or anything else
 * (validated and ignored). */
static int event_item(struct reader *r, const char *key, void *ctx)
{
    (void)key;
    (void)ctx;
    int c = skip_ws(r);
    if (c < -2)
        return c + 2;
    if (c != '{')
        return skip_value(r, 1);
    struct event_ctx x = {.ev = {.name = ""}};
    char name[16];
    int e = walk(r, true, name, sizeof name, event_member, &x);
    if (e < 0)
        return e;
    r->meta->events++;
    return r->on_event(r->user, &x.ev, r->err, r->errlen);
}

static int read_event_array(struct reader *r)
{
    return walk(r, false, NULL, 0, event_item, NULL);
}

/* ---- top level ----------------------------------------------------------------- */

static int parse_info(struct reader *r)
{
    json_error_t jerr;
    json_t *info = json_loadb(r->capture, r->capture_len, JSON_DECODE_ANY, &jerr);
    if (info == NULL)
        return fail(r, "distributedInfo: %s", jerr.text);
    int e = 0;
    if (json_is_object(info)) {
        json_t *rank = json_object_get(info, "rank"), *ws = json_object_get(info, "world_size");
        json_t *backend = json_object_get(info, "backend");
        if (rank && (!json_is_integer(rank) || json_integer_value(rank) < 0))
            e = fail(r, "distributedInfo.rank is not a non-negative integer");
        else if (ws && (!json_is_integer(ws) || json_integer_value(ws) < 1))
            e = fail(r, "distributedInfo.world_size is not a positive integer");
        if (e == 0 && rank)
            r->meta->rank = json_integer_value(rank);
        if (e == 0 && ws)
            r->meta->world_size = json_integer_value(ws);
        if (e == 0 && json_is_string(backend))
            snprintf(r->meta->backend, sizeof r->meta->backend, "%s", json_string_value(backend));
    } else {
        e = fail(r, "distributedInfo is not an object");
    }
    json_decref(info);
    return e;
}

static int capture_info(struct reader *r)
{
    int c = skip_ws(r);
    if (c < -2)
        return c + 2;
    if (r->capture == NULL && (r->capture = malloc(INFO_MAX)) == NULL)
        return -ENOMEM;
    r->capture_len = 0;
    r->capturing = true;
    int e = skip_value(r, 1);
    r->capturing = false;
    return e < 0 ? e : parse_info(r);
}

static int top_member(struct reader *r, const char *key, void *ctx)
{
    bool *seen_events = ctx;
    int c = skip_ws(r);
    if (c < -2)
        return c + 2;
    if (strcmp(key, "traceEvents") == 0) {
        if (c != '[')
            return unexpected(r, c, "the traceEvents array");
        if (*seen_events)
            return fail(r, "a second traceEvents array");
        *seen_events = true;
        return read_event_array(r);
    }
    if (strcmp(key, "distributedInfo") == 0)
        return capture_info(r);
    if (strcmp(key, "baseTimeNanoseconds") == 0 && (c == '-' || is_digit(c))) {
        char num[NUMBER_MAX];
        bool too_long;
        int e = read_number(r, num, &too_long);
        if (e < 0)
            return e;
        char *end;
        errno = 0;
        long long v = strtoll(num, &end, 10);
        if (too_long || *end != '\0' || errno != 0 || v < 0)
            return fail(r, "baseTimeNanoseconds %s is not a non-negative integer", num);
        r->meta->has_base_time = true;
        r->meta->base_time_ns = v;
        return 0;
    }
    return skip_value(r, 1);
}

static int read_top_object(struct reader *r)
{
    bool seen_events = false;
    char key[32];
    r->meta->object_format = true;
    int e = walk(r, true, key, sizeof key, top_member, &seen_events);
    if (e < 0)
        return e;
    return seen_events ? 0 : fail(r, "the trace object has no traceEvents array");
}

static int read_document(struct reader *r)
{
    int c = skip_ws(r), e;
    if (c < -2)
        return c + 2;
    if (c == -1 && r->base + r->pos == 0)
        return fail(r, "the file is empty");
    if (c == '{')
        e = read_top_object(r);
    else if (c == '[')
        e = read_event_array(r);
    else
        return unexpected(r, c, "'{' or '[' (a Chrome trace)");
    if (e < 0)
        return e;
    if ((c = skip_ws(r)) < -2)
        return c + 2;
    if (c != -1)
        return c == -2 ? r->read_error : fail(r, "data after the end of the trace");
    return 0;
}

int trace_json_read(trace_read_fn read, void *read_ctx, trace_event_fn on_event, void *user,
                    struct trace_meta *ret_meta, char *err, size_t errlen)
{
    struct trace_meta meta = {.rank = -1, .world_size = -1};
    struct reader r = {.read = read,
                       .read_ctx = read_ctx,
                       .on_event = on_event,
                       .user = user,
                       .meta = &meta,
                       .err = err,
                       .errlen = errlen};
    r.buf = malloc(READ_CHUNK);
    if (r.buf == NULL)
        return -ENOMEM;
    int e = read_document(&r);
    meta.bytes = r.base + r.pos;
    free(r.buf);
    free(r.capture);
    if (e == 0)
        *ret_meta = meta;
    return e;
}

/*
 * Little-endian primitives shared by the stored-form codecs (history_codec.c,
 * rows_codec.c): a growing encoder that records running out of memory once,
 * and a decoder that treats its bytes as hostile, turning every short read
 * into a sticky "bad" flag and zeros, so a caller checks once at the end.
 */
#ifndef SF_REPORT_BYTE_CODEC_H
#define SF_REPORT_BYTE_CODEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define STR_MAX 4096 /* the longest string either codec stores */

struct enc {
    uint8_t *buf;
    size_t len, cap;
    bool oom;
};

static inline void put_bytes(struct enc *e, const void *p, size_t n)
{
    if (e->oom)
        return;
    if (e->len + n > e->cap) {
        size_t cap = e->cap ? e->cap : 1024;
        while (cap < e->len + n)
            cap *= 2;
        uint8_t *b = realloc(e->buf, cap);
        if (b == NULL) {
            e->oom = true;
            return;
        }
        e->buf = b;
        e->cap = cap;
    }
    memcpy(e->buf + e->len, p, n);
    e->len += n;
}

/* The n low bytes of v, least significant first. */
static inline void put_le(struct enc *e, uint64_t v, int n)
{
    uint8_t b[8];
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put_bytes(e, b, (size_t)n);
}

static inline void put_u64(struct enc *e, uint64_t v)
{
    put_le(e, v, 8);
}

static inline void put_u32(struct enc *e, uint32_t v)
{
    put_le(e, v, 4);
}

static inline void put_i64(struct enc *e, int64_t v)
{
    put_u64(e, (uint64_t)v);
}

static inline void put_f64(struct enc *e, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_u64(e, bits);
}

static inline void put_str(struct enc *e, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put_u32(e, (uint32_t)n);
    put_bytes(e, s ? s : "", n);
}

struct dec {
    const uint8_t *p;
    size_t left;
    bool bad;
};

static inline bool take(struct dec *d, void *out, size_t n)
{
    if (d->bad || d->left < n) {
        d->bad = true;
        memset(out, 0, n);
        return false;
    }
    memcpy(out, d->p, n);
    d->p += n;
    d->left -= n;
    return true;
}

/* n bytes, least significant first; 0 (and d->bad) past the end. */
static inline uint64_t get_le(struct dec *d, int n)
{
    uint8_t b[8];
    uint64_t v = 0;
    take(d, b, (size_t)n);
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static inline uint64_t get_u64(struct dec *d)
{
    return get_le(d, 8);
}

static inline uint32_t get_u32(struct dec *d)
{
    return (uint32_t)get_le(d, 4);
}

static inline int64_t get_i64(struct dec *d)
{
    return (int64_t)get_u64(d);
}

static inline double get_f64(struct dec *d)
{
    uint64_t bits = get_u64(d);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static inline bool get_bool(struct dec *d)
{
    uint32_t v = get_u32(d);
    if (v > 1)
        d->bad = true;
    return v == 1;
}

/* A malloc'd NUL-terminated copy; NULL (and d->bad) on a bad length or an
 * embedded NUL. */
static inline char *get_str(struct dec *d)
{
    uint32_t n = get_u32(d);
    if (d->bad || n > STR_MAX || n > d->left) {
        d->bad = true;
        return NULL;
    }
    if (memchr(d->p, '\0', n) != NULL) {
        d->bad = true;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (s == NULL) {
        d->bad = true;
        return NULL;
    }
    memcpy(s, d->p, n);
    s[n] = '\0';
    d->p += n;
    d->left -= n;
    return s;
}

#endif

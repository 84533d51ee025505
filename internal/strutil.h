/*
 * Small string helpers shared by the client, the core, sfd, the peer layer
 * and sfctl, so each rule is written once: bounded string lengths, blank
 * lines, config booleans, the "@k" accumulation suffix and FNV-1a. Pure
 * inline functions; no allocation, no I/O. Internal: not installed.
 */
#ifndef SF_INTERNAL_STRUTIL_H
#define SF_INTERNAL_STRUTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "stagefrontier/accounting.h"

#define SF_FNV1A_OFFSET UINT64_C(0xcbf29ce484222325)
#define SF_FNV1A_PRIME UINT64_C(0x100000001b3)

/* FNV-1a over len bytes, continuing from h (SF_FNV1A_OFFSET to start). */
static inline uint64_t sf_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= SF_FNV1A_PRIME;
    }
    return h;
}

/* Whether s holds lo..hi bytes before its NUL, reading at most hi + 1.
 * NULL counts as empty. */
static inline bool sf_str_len_ok(const char *s, size_t lo, size_t hi)
{
    if (s == NULL)
        return lo == 0;
    size_t n = 0; /* strnlen's bound, without needing POSIX feature macros */
    while (n <= hi && s[n] != '\0')
        n++;
    return n >= lo && n <= hi;
}

/* Whether a line holds only blanks (space, tab, CR, LF). */
static inline bool sf_is_blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
            return false;
    return true;
}

/* A config boolean: yes/true/on/1 or no/false/off/0, case-blind. */
static inline int sf_parse_bool(const char *v, bool *ret)
{
    if (!strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "on"))
        *ret = true;
    else if (!strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcmp(v, "0") ||
             !strcasecmp(v, "off"))
        *ret = false;
    else
        return -EINVAL;
    return 0;
}

/* The accumulation factor that "@k" stage names imply: the largest k + 1
 * (k below SF_MAX_ACCUMULATION), else 1. */
static inline uint32_t sf_accumulation_of(const char *const *names, uint32_t n)
{
    uint32_t k_max = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *at = strrchr(names[i], '@');
        if (at && at[1]) {
            char *end;
            unsigned long k = strtoul(at + 1, &end, 10);
            if (*end == '\0' && k + 1 > k_max && k < SF_MAX_ACCUMULATION)
                k_max = (uint32_t)k + 1;
        }
    }
    return k_max ? k_max : 1;
}

#endif

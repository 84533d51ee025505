/*
 * The client's stage schema: default stages, their @k expansion for gradient
 * accumulation, effective groups and the FNV-1a 64 schema hash. The hash
 * must equal sf_schema_init()'s in the accounting core, which the client
 * must not link: it is written here again and cross-checked by a test.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

static const char *const default_stages[6] = {
    "data.next_wait",     "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
    "callbacks.cpu_wall", "optim.step_cpu_wall",     "step.other_cpu_wall",
};

#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME  UINT64_C(0x100000001b3)

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

/* Printable ASCII without spaces, quotes, commas or backslashes: the same
 * rule sfd applies, so a name that opens here is accepted there. */
bool sf__stage_name_valid(const char *name)
{
    size_t len = name ? strnlen(name, SF_CLIENT_MAX_NAME_LEN + 1) : 0;
    if (len == 0 || len > SF_CLIENT_MAX_NAME_LEN)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch <= ' ' || ch >= 0x7f || ch == '"' || ch == ',' || ch == '\\')
            return false;
    }
    return true;
}

/* "x@k" with k decimal: length of "x", else 0. */
static size_t parent_len(const char *name)
{
    const char *at = strrchr(name, '@');
    if (at == NULL || at == name || at[1] == '\0')
        return 0;
    for (const char *p = at + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return (size_t)(at - name);
}

uint64_t sf__schema_hash(uint32_t version, uint32_t n, const char *const *names,
                         const char *const *groups)
{
    unsigned char v[4] = {(unsigned char)version, (unsigned char)(version >> 8),
                          (unsigned char)(version >> 16), (unsigned char)(version >> 24)};
    uint64_t h = fnv1a(FNV_OFFSET, v, sizeof v);
    for (uint32_t i = 0; i < n; i++) {
        h = fnv1a(h, names[i], strlen(names[i]) + 1);
        h = fnv1a(h, groups[i], strlen(groups[i]) + 1);
    }
    return h;
}

/* Expands the defaults for accumulation K into names (each buffer 65 bytes). */
static uint32_t expand_defaults(uint32_t k_max, char (*buf)[SF_CLIENT_MAX_NAME_LEN + 1],
                                const char **names)
{
    uint32_t n = 0;
    if (k_max <= 1) {
        for (uint32_t i = 0; i < 6; i++)
            names[n++] = default_stages[i];
        return n;
    }
    for (uint32_t k = 0; k < k_max; k++)
        for (uint32_t i = 0; i < 3; i++) {
            snprintf(buf[n], sizeof buf[n], "%s@%u", default_stages[i], k);
            names[n] = buf[n];
            n++;
        }
    for (uint32_t i = 3; i < 6; i++)
        names[n++] = default_stages[i];
    return n;
}

static bool is_forward(const char *name)
{
    static const char fwd[] = "model.fwd_loss_cpu_wall";
    size_t p = parent_len(name);
    size_t len = p ? p : strlen(name);
    return len == sizeof fwd - 1 && memcmp(name, fwd, len) == 0;
}

int sf__schema_build(struct sf__schema *ret, const char *const *names,
                     const char *const *groups, uint32_t n, uint32_t accumulation)
{
    char buf[SF_CLIENT_MAX_STAGES][SF_CLIENT_MAX_NAME_LEN + 1];
    const char *dnames[SF_CLIENT_MAX_STAGES];
    if (names == NULL) {
        if (groups != NULL || accumulation > 20)    /* 3K + 3 <= 64 stages */
            return -EINVAL;
        n = expand_defaults(accumulation, buf, dnames);
        names = dnames;
    }
    if (n < 2 || n > SF_CLIENT_MAX_STAGES)
        return -EINVAL;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *g = groups ? groups[i] : NULL;
        if (!sf__stage_name_valid(names[i]) || (g != NULL && g[0] && !sf__stage_name_valid(g)))
            return -EINVAL;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return -EINVAL;
        total += 2 * (SF_CLIENT_MAX_NAME_LEN + 1);
    }
    struct sf__schema s = {.n = n};
    s.storage = malloc(total);
    if (s.storage == NULL)
        return -ENOMEM;
    char *p = s.storage;
    for (uint32_t i = 0; i < n; i++) {
        const char *g = groups ? groups[i] : NULL;
        size_t len = strlen(names[i]);
        s.names[i] = memcpy(p, names[i], len + 1);
        p += len + 1;
        if (g == NULL || g[0] == '\0') {
            g = names[i];
            len = parent_len(names[i]) ? parent_len(names[i]) : len;
        } else {
            len = strlen(g);
        }
        s.groups[i] = memcpy(p, g, len);
        s.groups[i][len] = '\0';
        p += len + 1;
        if (i + 1 < n && is_forward(names[i]))
            s.forward_mask |= UINT64_C(1) << i;
    }
    s.hash = sf__schema_hash(SF_CLIENT_SCHEMA_VERSION, n, (const char *const *)s.names,
                             (const char *const *)s.groups);
    *ret = s;
    return 0;
}

void sf__schema_free(struct sf__schema *s)
{
    if (s == NULL)
        return;
    free(s->storage);
    memset(s, 0, sizeof *s);
}

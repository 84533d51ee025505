/*
 * The client's stage schema: the options' stages (or the defaults, expanded by
 * microstep for gradient accumulation) checked, grouped and hashed by the
 * accounting core's own schema code (daemon/core/schema.c, pure and compiled
 * into this library), so the hash sfd checks is the one computed here. The
 * client keeps one flat copy of the strings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/accounting.h>

#include "client_internal.h"

bool sf__stage_name_valid(const char *name)
{
    sf_schema probe;
    const char *names[1] = {name};
    if (name == NULL || sf_schema_init(&probe, SF_CLIENT_SCHEMA_VERSION, 1, names, NULL, 1) < 0)
        return false;
    sf_schema_clear(&probe);
    return true;
}

uint64_t sf__schema_hash(uint32_t version, uint32_t n, const char *const *names,
                         const char *const *groups)
{
    sf_schema s;
    if (sf_schema_init(&s, version, n, names, groups, 1) < 0)
        return 0;
    uint64_t h = s.hash;
    sf_schema_clear(&s);
    return h;
}

/* model.fwd_loss_cpu_wall or one of its @k microsteps. */
static bool is_forward(const char *name)
{
    static const char fwd[] = "model.fwd_loss_cpu_wall";
    return strncmp(name, fwd, sizeof fwd - 1) == 0 &&
           (name[sizeof fwd - 1] == '\0' || name[sizeof fwd - 1] == '@');
}

static int core_schema(sf_schema *ret, const char *const *names, const char *const *groups,
                       uint32_t n, uint32_t accumulation)
{
    if (names == NULL) {
        if (groups != NULL)
            return -EINVAL;
        return sf_schema_init_default(ret, accumulation);
    }
    if (n < 2) /* at least one timed stage before the residual */
        return -EINVAL;
    return sf_schema_init(ret, SF_CLIENT_SCHEMA_VERSION, n, names, groups, 1);
}

int sf__schema_build(struct sf__schema *ret, const char *const *names, const char *const *groups,
                     uint32_t n, uint32_t accumulation)
{
    sf_schema core;
    int r = core_schema(&core, names, groups, n, accumulation);
    if (r < 0)
        return r == -ENOMEM ? r : -EINVAL;
    struct sf__schema s = {.n = core.n_stages, .hash = core.hash};
    s.storage = malloc((size_t)core.n_stages * 2 * (SF_CLIENT_MAX_NAME_LEN + 1));
    if (s.storage == NULL) {
        sf_schema_clear(&core);
        return -ENOMEM;
    }
    char *p = s.storage;
    for (uint32_t i = 0; i < core.n_stages; i++) {
        s.names[i] = strcpy(p, core.names[i]);
        p += strlen(p) + 1;
        s.groups[i] = strcpy(p, core.groups[i]);
        p += strlen(p) + 1;
        if (i + 1 < core.n_stages && is_forward(core.names[i]))
            s.forward_mask |= UINT64_C(1) << i;
    }
    sf_schema_clear(&core);
    *ret = s;
    return 0;
}

int sf__schema_mark_sync(struct sf__schema *s, uint64_t sync_mask)
{
    sf_schema split;
    int r =
        sf_schema_init_sync(&split, SF_CLIENT_SCHEMA_VERSION, s->n, (const char *const *)s->names,
                            (const char *const *)s->groups, 1, sync_mask);
    if (r < 0)
        return r == -ENOMEM ? r : -EINVAL;
    s->hash = sync_mask ? split.hash : s->hash;
    sf_schema_clear(&split);
    s->sync_mask = sync_mask;
    s->n_sync = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        s->sync_slot[i] = (uint8_t)s->n_sync;
        if (sync_mask >> i & 1)
            s->sync_ids[s->n_sync++] = i;
    }
    return 0;
}

void sf__schema_free(struct sf__schema *s)
{
    if (s == NULL)
        return;
    free(s->storage);
    memset(s, 0, sizeof *s);
}

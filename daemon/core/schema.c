/*
 * Stage schemas: ordered stage names with reporting groups, their hash, and
 * the default and gradient-accumulation expansions (docs/SPEC.md section 2).
 * Pure: copies strings into owned memory, nothing else.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagefrontier/accounting.h>
#include "strutil.h"

const char *const sf_default_stage_names[6] = {
    "data.next_wait",     "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
    "callbacks.cpu_wall", "optim.step_cpu_wall",     "step.other_cpu_wall",
};

/* Stage names are printable ASCII without spaces, quotes or commas, so they
 * survive CSV headers, JSON keys and Prometheus label values unchanged. */
static bool name_is_valid(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > SF_MAX_NAME_LEN)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch <= ' ' || ch >= 0x7f || ch == '"' || ch == ',' || ch == '\\')
            return false;
    }
    return true;
}

/* "x@k" -> length of "x" when k is a decimal number, else 0. */
static size_t microstep_parent_len(const char *name)
{
    const char *at = strrchr(name, '@');
    if (at == NULL || at == name || at[1] == '\0')
        return 0;
    for (const char *p = at + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return (size_t)(at - name);
}

static uint64_t schema_hash(const sf_schema *s)
{
    unsigned char version[4] = {(unsigned char)s->version, (unsigned char)(s->version >> 8),
                                (unsigned char)(s->version >> 16),
                                (unsigned char)(s->version >> 24)};
    uint64_t h = sf_fnv1a(SF_FNV1A_OFFSET, version, sizeof version);
    for (uint32_t i = 0; i < s->n_stages; i++) {
        h = sf_fnv1a(h, s->names[i], strlen(s->names[i]) + 1);
        h = sf_fnv1a(h, s->groups[i], strlen(s->groups[i]) + 1);
    }
    return h;
}

/* True when name is "<stem>.sync_wait". */
static bool is_sync_wait_of(const char *name, const char *stem)
{
    size_t n = strlen(stem), suffix = sizeof SF_SYNC_WAIT_SUFFIX - 1;
    return strncmp(name, stem, n) == 0 && strlen(name) == n + suffix &&
           strcmp(name + n, SF_SYNC_WAIT_SUFFIX) == 0;
}

static bool has_sync_wait_suffix(const char *name)
{
    size_t n = strlen(name), suffix = sizeof SF_SYNC_WAIT_SUFFIX - 1;
    return n > suffix && strcmp(name + n - suffix, SF_SYNC_WAIT_SUFFIX) == 0;
}

/* A ".sync_wait" stage must directly follow its stage, share its group and
 * not be the residual; that pair makes the stage synchronizing. */
static int mark_sync_stages(sf_schema *s)
{
    for (uint32_t i = 0; i < s->n_stages; i++) {
        if (!has_sync_wait_suffix(s->names[i]))
            continue;
        if (i == 0 || i + 1 == s->n_stages || !is_sync_wait_of(s->names[i], s->names[i - 1]) ||
            strcmp(s->groups[i], s->groups[i - 1]) != 0 || (s->sync_mask >> (i - 1) & 1))
            return -EINVAL;
        s->sync_mask |= UINT64_C(1) << (i - 1);
    }
    return 0;
}

static char *effective_group(const char *name, const char *group, const char *prev_name,
                             const char *prev_group)
{
    bool unset = group == NULL || group[0] == '\0';
    if (unset && prev_name != NULL && is_sync_wait_of(name, prev_name))
        return strdup(prev_group); /* the split's wait reports with its stage */
    if (group != NULL && group[0] != '\0')
        return strdup(group);
    size_t parent = microstep_parent_len(name);
    return parent ? strndup(name, parent) : strdup(name);
}

/* Groups need not be contiguous: microstep k of "data" and microstep k+1
 * of "data" are separated by forward and backward of microstep k. */
static void index_groups(sf_schema *s)
{
    for (uint32_t i = 0; i < s->n_stages; i++) {
        uint32_t g = 0;
        while (g < s->n_groups && strcmp(s->group_names[g], s->groups[i]) != 0)
            g++;
        if (g == s->n_groups)
            s->group_names[s->n_groups++] = s->groups[i]; /* a view, not owned */
        s->group_of[i] = g;
    }
}

void sf_schema_clear(sf_schema *schema)
{
    if (schema == NULL)
        return;
    for (uint32_t i = 0; i < schema->n_stages; i++) {
        free(schema->names[i]);
        free(schema->groups[i]);
    }
    memset(schema, 0, sizeof *schema);
}

int sf_schema_init(sf_schema *ret, uint32_t version, uint32_t n_stages, const char *const *names,
                   const char *const *groups, uint32_t accumulation)
{
    if (ret == NULL || names == NULL || n_stages < 1 || n_stages > SF_MAX_STAGES ||
        accumulation < 1 || accumulation > SF_MAX_ACCUMULATION)
        return -EINVAL;
    sf_schema s = {.version = version, .accumulation = accumulation};
    int r = -EINVAL;
    for (uint32_t i = 0; i < n_stages; i++) {
        const char *group = groups ? groups[i] : NULL;
        if (!name_is_valid(names[i]) || (group && group[0] && !name_is_valid(group)))
            goto fail;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                goto fail;
        s.names[i] = strdup(names[i]);
        s.groups[i] =
            effective_group(names[i], group, i ? s.names[i - 1] : NULL, i ? s.groups[i - 1] : NULL);
        s.n_stages = i + 1;
        if (s.names[i] == NULL || s.groups[i] == NULL) {
            r = -ENOMEM;
            goto fail;
        }
        if (microstep_parent_len(names[i]))
            s.microstep_indexed = true;
    }
    if (mark_sync_stages(&s) < 0)
        goto fail;
    index_groups(&s);
    s.hash = schema_hash(&s);
    *ret = s;
    return 0;
fail:
    sf_schema_clear(&s);
    return r;
}

int sf_schema_init_default(sf_schema *ret, uint32_t accumulation)
{
    if (accumulation <= 1)
        return sf_schema_init(ret, 1, 6, sf_default_stage_names, NULL, 1);
    if (accumulation > SF_MAX_ACCUMULATION || 3 * accumulation + 3 > SF_MAX_STAGES)
        return -EINVAL;
    char buf[SF_MAX_STAGES][SF_MAX_NAME_LEN + 1];
    const char *names[SF_MAX_STAGES];
    uint32_t n = 0;
    for (uint32_t k = 0; k < accumulation; k++)
        for (uint32_t i = 0; i < 3; i++) {
            snprintf(buf[n], sizeof buf[n], "%s@%u", sf_default_stage_names[i], k);
            names[n] = buf[n];
            n++;
        }
    for (uint32_t i = 3; i < 6; i++)
        names[n++] = sf_default_stage_names[i];
    return sf_schema_init(ret, 1, n, names, NULL, accumulation);
}

int sf_schema_init_sync(sf_schema *ret, uint32_t version, uint32_t n_recorded,
                        const char *const *names, const char *const *groups, uint32_t accumulation,
                        uint64_t recorded_sync_mask)
{
    if (names == NULL || n_recorded < 1 || n_recorded > SF_MAX_STAGES ||
        (recorded_sync_mask >> (n_recorded - 1)) != 0)
        return -EINVAL;
    uint32_t n = n_recorded + (uint32_t)__builtin_popcountll(recorded_sync_mask);
    if (n > SF_MAX_STAGES)
        return -EINVAL;
    char waits[SF_MAX_STAGES][SF_MAX_NAME_LEN + 1];
    const char *out_names[SF_MAX_STAGES], *out_groups[SF_MAX_STAGES];
    for (uint32_t i = 0, k = 0; i < n_recorded; i++) {
        const char *group = groups ? groups[i] : NULL;
        out_names[k] = names[i];
        out_groups[k++] = group;
        if (!(recorded_sync_mask >> i & 1))
            continue;
        if (names[i] == NULL || strlen(names[i]) + sizeof SF_SYNC_WAIT_SUFFIX > sizeof waits[0])
            return -EINVAL;
        snprintf(waits[k], sizeof waits[k], "%s" SF_SYNC_WAIT_SUFFIX, names[i]);
        out_names[k] = waits[k];
        out_groups[k++] = group; /* NULL or "": the stage's effective group */
    }
    return sf_schema_init(ret, version, n, out_names, groups ? out_groups : NULL, accumulation);
}

uint32_t sf_schema_recorded_stages(const sf_schema *schema)
{
    return schema->n_stages - (uint32_t)__builtin_popcountll(schema->sync_mask);
}

int sf_schema_split(const sf_schema *schema, const int64_t *recorded, const int64_t *arrival_ns,
                    int64_t *ret_d, bool *ret_missing)
{
    bool missing = false;
    for (uint32_t k = 0, i = 0; k < schema->n_stages; k++, i++) {
        int64_t a = arrival_ns ? arrival_ns[i] : -1;
        bool sync = schema->sync_mask >> k & 1;
        if (a >= 0 && !sync)
            return -EINVAL;
        if (a < -1 || a > recorded[i])
            return -ERANGE;
        if (!sync) {
            ret_d[k] = recorded[i];
            continue;
        }
        missing |= a < 0;
        ret_d[k] = a < 0 ? recorded[i] : a;
        ret_d[k + 1] = a < 0 ? 0 : recorded[i] - a;
        k++;
    }
    *ret_missing = missing;
    return 0;
}

int sf_schema_copy(sf_schema *ret, const sf_schema *src)
{
    if (ret == NULL || src == NULL)
        return -EINVAL;
    int r = sf_schema_init(ret, src->version, src->n_stages, (const char *const *)src->names,
                           (const char *const *)src->groups, src->accumulation);
    if (r == 0)
        memcpy(ret->sync_group, src->sync_group, sizeof ret->sync_group);
    return r;
}

static const char *const sync_group_names[] = {"world", "dp", "tp", "pp"};

const char *sf_sync_group_name(enum sf_sync_group g)
{
    return (unsigned)g <= SF_SYNC_GROUP_MAX ? sync_group_names[g] : "world";
}

int sf_sync_group_parse(const char *name)
{
    for (int g = 0; name != NULL && g <= SF_SYNC_GROUP_MAX; g++)
        if (strcmp(name, sync_group_names[g]) == 0)
            return g;
    return -EINVAL;
}

int sf_schema_set_sync_groups(sf_schema *schema, const uint8_t *groups, uint32_t n)
{
    if (schema == NULL || (n > 0 && groups == NULL))
        return -EINVAL;
    uint32_t n_sync = (uint32_t)__builtin_popcountll(schema->sync_mask);
    if (n != 0 && n != n_sync)
        return -EINVAL;
    for (uint32_t j = 0; j < n; j++)
        if (groups[j] > SF_SYNC_GROUP_MAX)
            return -EINVAL;
    memset(schema->sync_group, 0, sizeof schema->sync_group);
    uint32_t j = 0;
    for (uint64_t m = schema->sync_mask; m && n; m &= m - 1)
        schema->sync_group[__builtin_ctzll(m)] = groups[j++];
    return 0;
}

bool sf_schema_equal(const sf_schema *a, const sf_schema *b)
{
    if (a->hash != b->hash || a->n_stages != b->n_stages || a->version != b->version ||
        a->accumulation != b->accumulation)
        return false;
    for (uint32_t i = 0; i < a->n_stages; i++)
        if (strcmp(a->names[i], b->names[i]) != 0 || strcmp(a->groups[i], b->groups[i]) != 0)
            return false;
    return true;
}

int sf_schema_stage_index(const sf_schema *schema, const char *name)
{
    if (schema == NULL || name == NULL)
        return -EINVAL;
    for (uint32_t i = 0; i < schema->n_stages; i++)
        if (strcmp(schema->names[i], name) == 0)
            return (int)i;
    return -ENOENT;
}

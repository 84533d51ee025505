/*
 * Mapping files for `sfctl import` (docs/IMPORT.md): INI sections
 * [steps] and [stage NAME] with `match = PATTERN` lines, and [residual]
 * name. Patterns are fnmatch(3) globs over whole range names. Owns parsing,
 * validation and name classification; does no I/O besides reading the file.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "import_map.h"
#include "strutil.h"

#define CACHE_SLOTS 16384 /* power of two; at most 3/4 used */

struct map_cache_entry {
    char *name;
    int cls;
};

/* The binding's own stage names first (exact ranges from a traced job), then
 * the ops torch.profiler records for the same work. */
const char import_default_mapping[] = "[steps]\n"
                                      "match = ProfilerStep#*\n"
                                      "[stage data.next_wait]\n"
                                      "match = data.next_wait\n"
                                      "match = enumerate(DataLoader)#*__next__\n"
                                      "[stage model.fwd_loss_cpu_wall]\n"
                                      "match = model.fwd_loss_cpu_wall\n"
                                      "match = DistributedDataParallel.forward\n"
                                      "match = nn.Module: *\n"
                                      "[stage model.backward_cpu_wall]\n"
                                      "match = model.backward_cpu_wall\n"
                                      "match = autograd::engine::evaluate_function: *\n"
                                      "[stage callbacks.cpu_wall]\n"
                                      "match = callbacks.cpu_wall\n"
                                      "[stage optim.step_cpu_wall]\n"
                                      "match = optim.step_cpu_wall\n"
                                      "match = Optimizer.step#*\n"
                                      "match = Optimizer.zero_grad#*\n"
                                      "[residual]\n"
                                      "name = step.other_cpu_wall\n";

struct load_ctx {
    struct import_map *m;
    char reason[200];
    char section[128];
    int current; /* stage index of the open [stage] section, -1 steps, -2 residual */
};

static int add_pattern(struct import_patterns *p, const char *value)
{
    char **items = realloc(p->items, (p->n + 1) * sizeof *items);
    if (items == NULL)
        return -ENOMEM;
    p->items = items;
    if ((items[p->n] = strdup(value)) == NULL)
        return -ENOMEM;
    p->n++;
    return 0;
}

static int open_section(struct load_ctx *c, const char *section)
{
    struct import_map *m = c->m;
    if (strcmp(section, "steps") == 0) {
        c->current = -1;
        return 0;
    }
    if (strcmp(section, "residual") == 0) {
        c->current = -2;
        return 0;
    }
    if (strncmp(section, "stage ", 6) != 0 || section[6] == '\0') {
        snprintf(c->reason, sizeof c->reason,
                 "unknown section [%s] (want [steps], [stage NAME] or [residual])", section);
        return -EINVAL;
    }
    const char *name = section + 6;
    for (size_t i = 0; i < m->n_explicit; i++)
        if (strcmp(m->names[i], name) == 0) {
            snprintf(c->reason, sizeof c->reason, "stage \"%s\" is defined twice", name);
            return -EINVAL;
        }
    if (m->n_explicit + 1 >= SF_MAX_STAGES) {
        snprintf(c->reason, sizeof c->reason, "more than %d stages", SF_MAX_STAGES - 1);
        return -EINVAL;
    }
    if ((m->names[m->n_explicit] = strdup(name)) == NULL)
        return -ENOMEM;
    c->current = (int)m->n_explicit++;
    return 0;
}

static int on_entry(void *user, const char *section, const char *key, const char *value)
{
    struct load_ctx *c = user;
    if (strcmp(section, c->section) != 0 || section[0] == '\0') {
        if (section[0] == '\0') {
            snprintf(c->reason, sizeof c->reason, "\"%s\" outside any section", key);
            return 0;
        }
        snprintf(c->section, sizeof c->section, "%s", section);
        if (open_section(c, section) < 0)
            return 0;
    }
    if (value[0] == '\0') {
        snprintf(c->reason, sizeof c->reason, "empty value for \"%s\"", key);
        return 0;
    }
    if (c->current == -2) {
        if (strcmp(key, "name") != 0) {
            snprintf(c->reason, sizeof c->reason, "unknown key \"%s\" in [residual]", key);
            return 0;
        }
        free(c->m->names[SF_MAX_STAGES - 1]);
        c->m->names[SF_MAX_STAGES - 1] = strdup(value); /* parked until the end */
        return c->m->names[SF_MAX_STAGES - 1] != NULL;
    }
    if (strcmp(key, "match") != 0) {
        snprintf(c->reason, sizeof c->reason, "unknown key \"%s\" in [%s] (want match)", key,
                 section);
        return 0;
    }
    struct import_patterns *p = c->current == -1 ? &c->m->steps : &c->m->stage[c->current];
    if (add_pattern(p, value) < 0) {
        snprintf(c->reason, sizeof c->reason, "out of memory");
        return 0;
    }
    return 1;
}

/* Checks what a whole file must have, and puts the residual last. */
static int finish_map(struct import_map *m, char *err, size_t errlen)
{
    char *residual = m->names[SF_MAX_STAGES - 1];
    m->names[SF_MAX_STAGES - 1] = NULL;
    if (residual == NULL && (residual = strdup("step.other_cpu_wall")) == NULL)
        return -ENOMEM;
    m->names[m->n_explicit] = residual;
    if (m->steps.n == 0) {
        snprintf(err, errlen, "no [steps] section with a match pattern");
        return -EINVAL;
    }
    if (m->n_explicit == 0) {
        snprintf(err, errlen, "no [stage NAME] section");
        return -EINVAL;
    }
    for (size_t i = 0; i < m->n_explicit; i++) {
        if (m->stage[i].n == 0) {
            snprintf(err, errlen, "stage \"%s\" has no match pattern", m->names[i]);
            return -EINVAL;
        }
        if (strcmp(m->names[i], residual) == 0) {
            snprintf(err, errlen, "stage \"%s\" is also the residual", residual);
            return -EINVAL;
        }
    }
    sf_schema probe;
    if (import_map_schema(m, &probe) < 0) {
        snprintf(err, errlen, "the stage names do not form a valid schema (docs/FORMATS.md)");
        return -EINVAL;
    }
    sf_schema_clear(&probe);
    return 0;
}

int import_map_load(const char *path, struct import_map *ret, char *err, size_t errlen)
{
    struct import_map m = {.source = path ? path : "(built-in mapping)"};
    struct load_ctx c = {.m = &m, .current = -3};
    int line, r = 0;
    if (path) {
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            r = -errno;
            snprintf(err, errlen, "%s", strerror(errno));
            return r;
        }
        line = ini_parse_file(f, on_entry, &c);
        fclose(f);
    } else {
        line = ini_parse_string(import_default_mapping, on_entry, &c);
    }
    if (line != 0) {
        snprintf(err, errlen, "line %d: %s", line, c.reason[0] ? c.reason : "malformed line");
        r = -EINVAL;
    } else {
        r = finish_map(&m, err, errlen);
    }
    if (r == 0 && (m.cache = calloc(CACHE_SLOTS, sizeof *m.cache)) == NULL)
        r = -ENOMEM;
    if (r < 0) {
        import_map_clear(&m);
        return r;
    }
    *ret = m;
    return 0;
}

static void patterns_clear(struct import_patterns *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->items[i]);
    free(p->items);
}

void import_map_clear(struct import_map *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < SF_MAX_STAGES; i++) {
        free(m->names[i]);
        patterns_clear(&m->stage[i]);
    }
    patterns_clear(&m->steps);
    if (m->cache)
        for (size_t i = 0; i < CACHE_SLOTS; i++)
            free(m->cache[i].name);
    free(m->cache);
    memset(m, 0, sizeof *m);
}

static bool matches(const struct import_patterns *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (fnmatch(p->items[i], name, 0) == 0)
            return true;
    return false;
}

static int classify_uncached(const struct import_map *m, const char *name)
{
    if (matches(&m->steps, name))
        return IMPORT_STEP;
    for (size_t i = 0; i < m->n_explicit; i++)
        if (matches(&m->stage[i], name))
            return (int)i;
    return IMPORT_NONE;
}

int import_map_classify(struct import_map *m, const char *name)
{
    size_t slot = sf_fnv1a(SF_FNV1A_OFFSET, name, strlen(name)) & (CACHE_SLOTS - 1);
    for (size_t probes = 0; probes < CACHE_SLOTS; probes++) {
        struct map_cache_entry *e = &m->cache[slot];
        if (e->name == NULL)
            break;
        if (strcmp(e->name, name) == 0)
            return e->cls;
        slot = (slot + 1) & (CACHE_SLOTS - 1);
    }
    int cls = classify_uncached(m, name);
    if (m->cache_used < CACHE_SLOTS / 4 * 3 && m->cache[slot].name == NULL &&
        (m->cache[slot].name = strdup(name)) != NULL) {
        m->cache[slot].cls = cls;
        m->cache_used++;
    }
    return cls;
}

int import_map_schema(const struct import_map *m, sf_schema *ret)
{
    return sf_schema_init(ret, 1, (uint32_t)m->n_explicit + 1, (const char *const *)m->names, NULL,
                          1);
}

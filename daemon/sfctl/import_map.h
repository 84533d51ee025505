/*
 * The stage mapping of `sfctl import`: which trace ranges mark steps, and
 * which range names (fnmatch patterns) fall into each ordered stage. Loaded
 * from an INI file (inih) or the built-in default; knows nothing of files
 * or formats.
 */
#ifndef SFCTL_IMPORT_MAP_H
#define SFCTL_IMPORT_MAP_H

#include <stddef.h>
#include <stagefrontier/accounting.h>

#define IMPORT_STEP (-1) /* import_map_classify: a step range */
#define IMPORT_NONE (-2) /* matches nothing */

struct import_patterns {
    char **items;
    size_t n;
};

struct import_map {
    char *names[SF_MAX_STAGES]; /* explicit stages, residual last */
    struct import_patterns stage[SF_MAX_STAGES];
    size_t n_explicit; /* stages with patterns; names[n_explicit] is the residual */
    struct import_patterns steps;
    const char *source; /* file path, or "(built-in mapping)" */
    /* Cache of classified names: traces repeat a few thousand names millions
     * of times. Bounded; names past it are matched every time. */
    struct map_cache_entry *cache;
    size_t cache_used;
};

extern const char import_default_mapping[];

/* path NULL loads the built-in mapping. On error returns -EINVAL with
 * "LINE: reason" in err, or -ENOENT/-EACCES with strerror, or -ENOMEM. */
int import_map_load(const char *path, struct import_map *ret, char *err, size_t errlen);
void import_map_clear(struct import_map *m);

/* IMPORT_STEP, IMPORT_NONE or an explicit stage index. The first stage
 * whose pattern matches wins; step patterns are tried first. */
int import_map_classify(struct import_map *m, const char *name);

/* The schema the import writes: the explicit stages, then the residual. */
int import_map_schema(const struct import_map *m, sf_schema *ret);

#endif

/*
 * The rows codec of the history store (rows_codec.h): a window's rows, each
 * its durations, issue lags, accumulated sync waits, flags, role and
 * parallel coordinates, in a versioned little-endian form. The decoder reads the bytes twice,
 * checking every row first, so a damaged record gives no row at all rather than part of a window.
 */
#include <errno.h>
#include <string.h>

#include "byte_codec.h"
#include "rows_codec.h"

#define ROWS_MAGIC_V1 0x31575346u /* "SFW1": rows without sync waits */
#define ROWS_MAGIC 0x32575346u    /* "SFW2": SFW1, each row's sync waits after its lags */
/* The smallest stored row: step, rank, flags, overlap, role, event state,
 * two event figures, the lag flag, the declared coordinates (none) and one
 * duration (SFW1's; an SFW2 row adds its wait flag, so this bounds both). */
#define ROW_MIN_BYTES (8 + 4 + 4 + 8 + 4 + 4 + 8 + 8 + 4 + 4 + 8)

static uint32_t sync_count(const sf_schema *schema)
{
    return (uint32_t)__builtin_popcountll(schema->sync_mask);
}

struct role_table {
    uint32_t n;
    const char *names[SF_ROWS_CODEC_MAX_ROLES];
};

/* The index of role in t, adding it; -1 when the table is full. */
static int role_index(struct role_table *t, const char *role)
{
    role = role ? role : "";
    for (uint32_t i = 0; i < t->n; i++)
        if (strcmp(t->names[i], role) == 0)
            return (int)i;
    if (t->n == SF_ROWS_CODEC_MAX_ROLES)
        return -1;
    t->names[t->n] = role;
    return (int)t->n++;
}

/* The declared dimensions, then, when any, every figure of the coordinates. */
static void put_parallel(struct enc *e, const sf_parallel *p)
{
    put_u32(e, p != NULL ? p->declared : 0);
    if (p == NULL || p->declared == 0)
        return;
    for (int k = 0; k < SF_PAR_DIMS; k++) {
        put_u32(e, p->index[k]);
        put_u32(e, p->size[k]);
    }
    put_u32(e, p->schedule);
    put_u32(e, p->virtual_stages);
}

/* Whether the row has a sync wait mark: one without (NULL, or -1 at every
 * stage, as sfd keeps rows of old clients) stores none and reads back NULL,
 * which the core takes the same way. */
static bool has_waits(const sf_row *row, uint32_t n_sync)
{
    for (uint32_t j = 0; row->sync_wait != NULL && j < n_sync; j++)
        if (row->sync_wait[j] >= 0)
            return true;
    return false;
}

static void put_row(struct enc *e, const sf_row *row, uint32_t role, uint32_t n_stages,
                    uint32_t n_sync)
{
    bool waits = has_waits(row, n_sync);
    put_i64(e, row->step);
    put_u32(e, row->rank);
    put_u32(e, row->flags);
    put_i64(e, row->overlap_ns);
    put_u32(e, role);
    put_u32(e, row->event_state);
    put_i64(e, row->event_cpu_ns);
    put_i64(e, row->event_gpu_ns);
    put_u32(e, row->issue_lag != NULL);
    put_u32(e, waits);
    put_parallel(e, row->parallel);
    for (uint32_t k = 0; k < n_stages; k++)
        put_i64(e, row->d[k]);
    for (uint32_t j = 0; row->issue_lag != NULL && j < n_sync; j++)
        put_i64(e, row->issue_lag[j]);
    for (uint32_t j = 0; waits && j < 2 * n_sync; j++)
        put_i64(e, row->sync_wait[j]);
}

int sf_rows_pack(const sf_schema *schema, uint32_t world_size, uint32_t segment, int64_t index,
                 const sf_row *rows, size_t n, uint8_t **ret, size_t *ret_len)
{
    struct role_table *roles = calloc(1, sizeof(*roles));
    uint32_t *role_of = calloc(n ? n : 1, sizeof(*role_of));
    int r = roles && role_of && n <= UINT32_MAX ? 0 : -ENOMEM;
    for (size_t i = 0; i < n && r == 0; i++) {
        int k = role_index(roles, rows[i].role);
        r = k < 0 ? -EINVAL : 0;
        role_of[i] = (uint32_t)k;
    }
    struct enc e = {0};
    if (r == 0) {
        put_u32(&e, ROWS_MAGIC);
        put_u64(&e, schema->hash);
        put_u32(&e, schema->n_stages);
        put_u32(&e, sync_count(schema));
        put_u32(&e, world_size);
        put_u32(&e, segment);
        put_i64(&e, index);
        put_u32(&e, roles->n);
        for (uint32_t i = 0; i < roles->n; i++)
            put_str(&e, roles->names[i]);
        put_u32(&e, (uint32_t)n);
        for (size_t i = 0; i < n; i++)
            put_row(&e, &rows[i], role_of[i], schema->n_stages, sync_count(schema));
        r = e.oom ? -ENOMEM : 0;
    }
    free(roles);
    free(role_of);
    if (r < 0) {
        free(e.buf);
        return r;
    }
    *ret = e.buf;
    *ret_len = e.len;
    return 0;
}

/* ---- decoder --------------------------------------------------------------- */

struct stored_rows {
    sf_rows_header header;
    bool waits; /* SFW2: rows say whether they carry sync waits */
    uint32_t n_roles;
    char *roles[SF_ROWS_CODEC_MAX_ROLES];
};

static void stored_rows_clear(struct stored_rows *s)
{
    for (uint32_t i = 0; i < s->n_roles; i++)
        free(s->roles[i]);
}

static int get_header(struct dec *d, const sf_schema *schema, uint32_t world_size,
                      struct stored_rows *s)
{
    uint32_t magic = get_u32(d);
    s->waits = magic == ROWS_MAGIC;
    bool fits = (magic == ROWS_MAGIC || magic == ROWS_MAGIC_V1) && get_u64(d) == schema->hash &&
                get_u32(d) == schema->n_stages && get_u32(d) == sync_count(schema) &&
                get_u32(d) == world_size;
    s->header.segment = get_u32(d);
    s->header.index = get_i64(d);
    uint32_t n_roles = get_u32(d);
    if (d->bad || !fits || n_roles > SF_ROWS_CODEC_MAX_ROLES)
        return -EINVAL;
    for (; s->n_roles < n_roles; s->n_roles++)
        if ((s->roles[s->n_roles] = get_str(d)) == NULL)
            return -EINVAL;
    s->header.n_rows = get_u32(d);
    if (d->bad || s->header.n_rows > d->left / ROW_MIN_BYTES)
        return -EINVAL;
    return 0;
}

/* Coordinates into *p; false when they do not decode or do not fit the
 * world (sf_parallel_check). */
static bool get_parallel(struct dec *d, uint32_t world_size, sf_parallel *p)
{
    memset(p, 0, sizeof(*p));
    p->declared = get_u32(d);
    if (p->declared == 0)
        return !d->bad;
    for (int k = 0; k < SF_PAR_DIMS; k++) {
        p->index[k] = get_u32(d);
        p->size[k] = get_u32(d);
    }
    p->schedule = get_u32(d);
    p->virtual_stages = get_u32(d);
    const char *reason;
    return !d->bad && sf_parallel_check(p, world_size, &reason) == 0;
}

/* One row's arrays, as a decoded row points into them. */
struct row_bufs {
    int64_t d[SF_MAX_STAGES], lag[SF_MAX_STAGES], wait[2 * SF_MAX_STAGES];
    sf_parallel par;
};

/* One row into *row, its arrays in *b; -EINVAL when it does not decode or
 * does not pass the core's checks (its sync waits included). */
static int get_row(struct dec *d, const sf_schema *schema, uint32_t world_size,
                   const struct stored_rows *s, sf_row *row, struct row_bufs *b)
{
    row->step = get_i64(d);
    row->rank = get_u32(d);
    row->flags = get_u32(d);
    row->overlap_ns = get_i64(d);
    uint32_t role = get_u32(d), event_state = get_u32(d);
    row->event_cpu_ns = get_i64(d);
    row->event_gpu_ns = get_i64(d);
    uint32_t has_lag = get_u32(d), has_wait = s->waits ? get_u32(d) : 0;
    bool par_ok = get_parallel(d, world_size, &b->par);
    for (uint32_t k = 0; k < schema->n_stages; k++)
        b->d[k] = get_i64(d);
    for (uint32_t j = 0; has_lag == 1 && j < sync_count(schema); j++)
        b->lag[j] = get_i64(d);
    for (uint32_t j = 0; has_wait == 1 && j < 2 * sync_count(schema); j++)
        b->wait[j] = get_i64(d);
    if (d->bad || !par_ok || role >= s->n_roles || event_state > SF_EVENT_MISSING || has_lag > 1 ||
        has_wait > 1 || row->rank >= world_size)
        return -EINVAL;
    row->parallel = b->par.declared ? &b->par : NULL;
    row->role = s->roles[role];
    row->event_state = (uint8_t)event_state;
    row->d = b->d;
    row->issue_lag = has_lag ? b->lag : NULL;
    row->sync_wait = has_wait ? b->wait : NULL; /* checked by sf_row_validate */
    return sf_row_validate(row, schema) < 0 ? -EINVAL : 0;
}

/* One pass over the rows: checking only when visit is NULL. */
static int walk_rows(struct dec d, const sf_schema *schema, uint32_t world_size,
                     const struct stored_rows *s, sf_rows_visit visit, void *ctx)
{
    struct row_bufs b;
    for (uint32_t i = 0; i < s->header.n_rows; i++) {
        sf_row row = {0};
        int r = get_row(&d, schema, world_size, s, &row, &b);
        if (r == 0 && visit != NULL)
            r = visit(ctx, &s->header, &row);
        if (r < 0)
            return r;
    }
    return d.left == 0 ? 0 : -EINVAL;
}

int sf_rows_unpack(const uint8_t *buf, size_t len, const sf_schema *schema, uint32_t world_size,
                   sf_rows_visit visit, void *ctx)
{
    struct dec d = {.p = buf, .left = buf ? len : 0};
    struct stored_rows *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    int r = get_header(&d, schema, world_size, s);
    if (r == 0)
        r = walk_rows(d, schema, world_size, s, NULL, NULL);
    if (r == 0)
        r = walk_rows(d, schema, world_size, s, visit, ctx);
    stored_rows_clear(s);
    free(s);
    return r;
}

/*
 * The SQLite store under sfd's durable history: one table of records keyed
 * by (kind, uid, job, segment, window), bounded by pages in use, oldest rows
 * deleted first. Synchronous and single-threaded per handle; it knows nothing
 * of sfd (history.c calls it from its writer thread and once at startup).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "history.h"

/* Bumped on an incompatible change of the table; an older file is dropped
 * and started afresh rather than misread. */
#define STORE_SCHEMA_VERSION 1
#define STR_(x) #x
#define STR(x) STR_(x)
/* Rows deleted per eviction round, so one round frees a useful amount. */
#define EVICT_BATCH 32

struct sfd_store {
    sqlite3 *db;
    uint64_t max_bytes;
    sqlite3_stmt *insert, *evict;
};

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS records ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " kind INTEGER NOT NULL, uid INTEGER NOT NULL, job TEXT NOT NULL,"
    " segment INTEGER NOT NULL, window INTEGER NOT NULL,"
    " body BLOB NOT NULL,"
    " UNIQUE (kind, uid, job, segment, window));"
    "CREATE INDEX IF NOT EXISTS records_job ON records (uid, job, id);";

/* The single integer a statement answers. */
static int query_int64(struct sfd_store *s, const char *sql, int64_t *ret)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return -EIO;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *ret = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -EIO;
}

int sfd_store_used_bytes(struct sfd_store *s, uint64_t *ret)
{
    int64_t pages, free_pages, page_size;
    if (query_int64(s, "PRAGMA page_count", &pages) < 0 ||
        query_int64(s, "PRAGMA freelist_count", &free_pages) < 0 ||
        query_int64(s, "PRAGMA page_size", &page_size) < 0 || pages < free_pages ||
        free_pages < 0 || page_size <= 0)
        return -EIO;
    *ret = (uint64_t)(pages - free_pages) * (uint64_t)page_size;
    return 0;
}

int sfd_store_count(struct sfd_store *s, uint64_t *ret)
{
    int64_t n;
    int r = query_int64(s, "SELECT count(*) FROM records", &n);
    if (r == 0)
        *ret = (uint64_t)n;
    return r;
}

static int errno_of(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_READONLY:
        return -EROFS;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return -EACCES;
    case SQLITE_CANTOPEN:
        return -ENOENT;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    default:
        return -EIO;
    }
}

static int exec(struct sfd_store *s, const char *sql)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : errno_of(rc);
}

/* WAL keeps the writer from blocking readers and makes each commit one
 * sequential append; NORMAL loses at most the last commits on power loss,
 * never the file. Incremental auto-vacuum lets evictions give pages back. */
static int configure(struct sfd_store *s, const char **ret_err)
{
    int64_t version = 0;
    int r;
    *ret_err = "cannot set the journal mode";
    if ((r = exec(s, "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL;"
                     "PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit = 4194304;"
                     "PRAGMA secure_delete = OFF;")) < 0)
        return r;
    *ret_err = "cannot read the schema version";
    if ((r = query_int64(s, "PRAGMA user_version", &version)) < 0)
        return r;
    if (version != 0 && version != STORE_SCHEMA_VERSION) {
        *ret_err = "cannot replace a store of another schema version";
        if ((r = exec(s, "DROP TABLE IF EXISTS records")) < 0)
            return r;
    }
    *ret_err = "cannot create the table";
    if ((r = exec(s, schema_sql)) < 0)
        return r;
    if ((r = exec(s, "PRAGMA user_version = " STR(STORE_SCHEMA_VERSION))) < 0)
        return r;
    *ret_err = "cannot prepare statements";
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO records (kind, uid, job, segment, window, body)"
                           " VALUES (?, ?, ?, ?, ?, ?)",
                           -1, &s->insert, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db,
                           "DELETE FROM records WHERE id IN"
                           " (SELECT id FROM records ORDER BY id LIMIT ?)",
                           -1, &s->evict, NULL) != SQLITE_OK)
        return -EIO;
    return 0;
}

/* The store holds every user's reports: only sfd's user may read it, with
 * or without systemd's UMask. SQLite gives the -wal and -shm files the mode
 * of the main file. */
static int create_private(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    struct stat st;
    int r = fstat(fd, &st) == 0 && (st.st_mode & 077) && fchmod(fd, 0600) < 0 ? -errno : 0;
    close(fd);
    return r;
}

int sfd_store_open(const char *path, uint64_t max_bytes, struct sfd_store **ret,
                   const char **ret_err)
{
    int r = create_private(path);
    if (r < 0) {
        *ret_err = "cannot create the file";
        return r;
    }
    struct sfd_store *s = calloc(1, sizeof(*s));
    *ret_err = "out of memory";
    if (s == NULL)
        return -ENOMEM;
    s->max_bytes = max_bytes;
    int rc = sqlite3_open_v2(
        path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    r = rc == SQLITE_OK ? 0 : errno_of(rc);
    if (r == 0) /* another process on the same file: wait on the writer thread, briefly */
        sqlite3_busy_timeout(s->db, 1000);
    if (r < 0)
        *ret_err = "cannot open the file";
    else
        r = configure(s, ret_err);
    if (r == 0 && sqlite3_db_readonly(s->db, "main") == 1) {
        *ret_err = "the file is read-only";
        r = -EROFS;
    }
    if (r < 0) {
        sfd_store_close(s);
        return r;
    }
    *ret = s;
    return 0;
}

void sfd_store_close(struct sfd_store *s)
{
    if (s == NULL)
        return;
    sqlite3_finalize(s->insert);
    sqlite3_finalize(s->evict);
    sqlite3_close(s->db);
    free(s);
}

static int insert_one(struct sfd_store *s, const struct sfd_store_key *k, const uint8_t *body,
                      size_t len)
{
    sqlite3_stmt *st = s->insert;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, k->kind);
    sqlite3_bind_int64(st, 2, (int64_t)k->uid);
    sqlite3_bind_text(st, 3, k->job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, k->segment);
    sqlite3_bind_int64(st, 5, k->window);
    sqlite3_bind_blob(st, 6, body, (int)len, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_clear_bindings(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : errno_of(rc);
}

/* Deletes the oldest rows until the pages in use fit the bound, then hands
 * the freed pages back to the file system. */
static int evict(struct sfd_store *s, uint64_t *ret_evicted)
{
    uint64_t used;
    int r;
    while ((r = sfd_store_used_bytes(s, &used)) == 0 && used > s->max_bytes) {
        sqlite3_reset(s->evict);
        sqlite3_bind_int(s->evict, 1, EVICT_BATCH);
        int rc = sqlite3_step(s->evict);
        sqlite3_reset(s->evict);
        if (rc != SQLITE_DONE)
            return errno_of(rc);
        int n = sqlite3_changes(s->db);
        if (n == 0)
            break; /* empty, and still over: the bound is below one page set */
        *ret_evicted += (uint64_t)n;
    }
    if (r == 0)
        r = exec(s, "PRAGMA incremental_vacuum");
    return r;
}

int sfd_store_put(struct sfd_store *s, const struct sfd_store_key *keys,
                  const uint8_t *const *bodies, const size_t *lens, size_t n, uint64_t *ret_evicted)
{
    uint64_t evicted = 0;
    int r = exec(s, "BEGIN IMMEDIATE");
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r == 0; i++) {
        r = lens[i] > s->max_bytes ? -ENOSPC : 0;
        if (r == 0)
            r = insert_one(s, &keys[i], bodies[i], lens[i]);
    }
    if (r == 0)
        r = evict(s, &evicted);
    if (r == 0)
        r = exec(s, "COMMIT");
    if (r < 0) {
        exec(s, "ROLLBACK");
        return r;
    }
    if (ret_evicted != NULL)
        *ret_evicted += evicted;
    return (int)n;
}

static int visit_job(struct sfd_store *s, uint32_t kind, int64_t uid, const char *job,
                     uint32_t per_job, sfd_store_visit visit, void *ctx)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT segment, window, body FROM records"
                           " WHERE kind = ? AND uid = ? AND job = ?"
                           " ORDER BY segment DESC, window DESC LIMIT ?",
                           -1, &st, NULL) != SQLITE_OK)
        return -EIO;
    sqlite3_bind_int64(st, 1, kind);
    sqlite3_bind_int64(st, 2, uid);
    sqlite3_bind_text(st, 3, job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, per_job);
    int rc, r = 0;
    while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t seg = sqlite3_column_int64(st, 0);
        struct sfd_store_key key = {
            .kind = kind,
            .uid = (uid_t)uid,
            .job = job,
            .segment = seg >= 0 && seg <= UINT32_MAX ? (uint32_t)seg : 0,
            .window = sqlite3_column_int64(st, 1),
        };
        const uint8_t *body = sqlite3_column_blob(st, 2);
        int len = sqlite3_column_bytes(st, 2);
        r = visit(ctx, &key, body, body ? (size_t)len : 0);
    }
    sqlite3_finalize(st);
    return r < 0 ? r : 0;
}

int sfd_store_recent(struct sfd_store *s, uint32_t kind, uint32_t max_jobs, uint32_t per_job,
                     sfd_store_visit visit, void *ctx)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT uid, job, max(id) AS last FROM records WHERE kind = ?"
                           " GROUP BY uid, job ORDER BY last DESC LIMIT ?",
                           -1, &st, NULL) != SQLITE_OK)
        return -EIO;
    sqlite3_bind_int64(st, 1, kind);
    sqlite3_bind_int64(st, 2, max_jobs);
    int rc, r = 0;
    while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *job = sqlite3_column_text(st, 1);
        if (job == NULL)
            continue;
        char *copy = strdup((const char *)job);
        if (copy == NULL) {
            r = -ENOMEM;
            break;
        }
        r = visit_job(s, kind, sqlite3_column_int64(st, 0), copy, per_job, visit, ctx);
        free(copy);
    }
    sqlite3_finalize(st);
    return r;
}

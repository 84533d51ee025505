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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "history.h"

/* Bumped on an incompatible change of the table; an older file is dropped
 * and started afresh rather than misread. */
#define STORE_SCHEMA_VERSION 1
#define STR_(x) #x
#define STR(x) STR_(x)
/* Rows deleted per eviction round, so one round frees a useful amount. */
#define EVICT_BATCH 32
#define NAME_MAX_ 256

/* Pages between automatic checkpoints: the WAL stays small, so that the
 * space a checkpoint needs after a full disk is small too. */
#define WAL_AUTOCHECKPOINT_PAGES 128
/* The spare file kept beside a writable store: given back on a full disk so
 * that the eviction of the oldest rows (itself a write) can commit. */
#define RESERVE_MAX (1u << 20)

struct sfd_store {
    sqlite3 *db;
    uint64_t max_bytes;
    sqlite3_stmt *insert, *evict;
    int dirfd;               /* the held state directory (dup), -1 read-only */
    char reserve[NAME_MAX_]; /* "<name>.reserve" */
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
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sfd_store_errno(rc);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *ret = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : sfd_store_errno(rc == SQLITE_DONE ? SQLITE_ERROR : rc);
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

int sfd_store_errno(int rc)
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
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return -EUCLEAN; /* damaged: history.c sets the file aside */
    default:
        return -EIO;
    }
}

static int exec(struct sfd_store *s, const char *sql)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sfd_store_errno(rc);
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
                     "PRAGMA secure_delete = OFF;"
                     "PRAGMA wal_autocheckpoint = " STR(WAL_AUTOCHECKPOINT_PAGES) ";")) < 0)
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
    if (version != STORE_SCHEMA_VERSION && /* no write for a current store */
        (r = exec(s, "PRAGMA user_version = " STR(STORE_SCHEMA_VERSION))) < 0)
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

/* SQLite's own check, quick form (b-tree structure, not index contents):
 * a store with damaged pages reads back wrong or not at all, and is set
 * aside by the caller instead of failing every write for the process's life. */
static int quick_check(struct sfd_store *s)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sfd_store_errno(rc);
    rc = sqlite3_step(st);
    const unsigned char *verdict = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
    int r = rc == SQLITE_ROW ? (verdict && strcmp((const char *)verdict, "ok") == 0 ? 0 : -EUCLEAN)
                             : sfd_store_errno(rc == SQLITE_DONE ? SQLITE_CORRUPT : rc);
    sqlite3_finalize(st);
    return r;
}

/* The store holds every user's reports: only sfd's user may read it, with
 * or without systemd's UMask. SQLite gives the -wal and -shm files the mode
 * of the main file. Opened below the held directory, never through a link:
 * the descriptor names the file SQLite must be found to have opened. */
/* SQLite opens the -wal, -shm and -journal beside the store by path, with
 * O_CREAT: one that exists must be a plain file, never a link out. */
static int companions_plain(int dirfd, const char *name, const char **ret_err)
{
    static const char *const suffix[] = {"-wal", "-shm", "-journal"};
    static const char *const refused[] = {"its -wal is not a regular file, refused",
                                          "its -shm is not a regular file, refused",
                                          "its -journal is not a regular file, refused"};
    char path[NAME_MAX_ + 16];
    for (size_t i = 0; i < 3; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s%s", name, suffix[i]);
        if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
            *ret_err = refused[i];
            return S_ISLNK(st.st_mode) ? -ELOOP : -EINVAL;
        }
    }
    return 0;
}

static int open_private(int dirfd, const char *name, bool readonly, struct stat *ret,
                        const char **ret_err)
{
    int rc = companions_plain(dirfd, name, ret_err);
    if (rc < 0)
        return rc;
    int flags = readonly ? O_RDONLY : O_RDWR | O_CREAT;
    int fd = openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) {
        int r = -errno;
        *ret_err = r == -ELOOP ? "is a symbolic link, refused" : "cannot create the file";
        return r;
    }
    int r = fstat(fd, ret) < 0 ? -errno : 0;
    if (r == 0 && !S_ISREG(ret->st_mode)) {
        *ret_err = "is not a regular file, refused";
        r = -EINVAL;
    }
    if (r == 0 && !readonly && (ret->st_mode & 077) && fchmod(fd, 0600) < 0)
        r = -errno;
    if (r < 0 && *ret_err == NULL)
        *ret_err = "cannot create the file";
    close(fd);
    return r;
}

/* SQLite opens by path: /proc/self/fd/<dirfd>/<name> starts at the held
 * directory. SQLite resolves that magic link to a path (so SQLITE_OPEN_NOFOLLOW,
 * which refuses any link on the way, cannot be used), and the file it opened
 * is then checked to be the one openat found with O_NOFOLLOW (same device
 * and inode) and the name still to be no link. */
static int same_file(struct sfd_store *s, int dirfd, const char *name, const struct stat *want)
{
    struct stat at, opened;
    const char *path = sqlite3_db_filename(s->db, "main");
    if (path == NULL || stat(path, &opened) < 0 ||
        fstatat(dirfd, name, &at, AT_SYMLINK_NOFOLLOW) < 0)
        return -ENOENT;
    if (S_ISLNK(at.st_mode))
        return -ELOOP;
    bool same = opened.st_dev == want->st_dev && opened.st_ino == want->st_ino &&
                at.st_dev == want->st_dev && at.st_ino == want->st_ino;
    return same ? 0 : -ESTALE;
}

static int open_db(struct sfd_store *s, int dirfd, const char *name, bool readonly)
{
    char path[4096 + 64], at[32] = "";
    /* immutable: no -shm, no lock, no write of any kind; a full disk or a
     * read-only mount still reads (what only the WAL holds is not seen). */
    if (dirfd != AT_FDCWD)
        snprintf(at, sizeof at, "/proc/self/fd/%d/", dirfd);
    if (snprintf(path, sizeof path, "%s%s%s%s", readonly ? "file:" : "", at, name,
                 readonly ? "?immutable=1" : "") >= (int)sizeof path)
        return -ENAMETOOLONG;
    int flags = SQLITE_OPEN_NOMUTEX |
                (readonly ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI : SQLITE_OPEN_READWRITE);
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (rc == SQLITE_OK) /* another process on the same file: wait on the writer thread, briefly */
        sqlite3_busy_timeout(s->db, 1000);
    return rc == SQLITE_OK ? 0 : sfd_store_errno(rc);
}

static void reserve_name(struct sfd_store *s, const char *name)
{
    snprintf(s->reserve, sizeof s->reserve, "%s.reserve", name);
}

int sfd_store_keep_reserve(struct sfd_store *s)
{
    if (s->dirfd < 0)
        return -EROFS;
    off_t size = (off_t)(s->max_bytes / 4 < RESERVE_MAX ? s->max_bytes / 4 : RESERVE_MAX);
    /* Remade only with room to spare: right after a full disk the room is
     * the store's, to fold its WAL in. */
    struct statvfs fs;
    struct stat have;
    bool exists = fstatat(s->dirfd, s->reserve, &have, AT_SYMLINK_NOFOLLOW) == 0 &&
                  S_ISREG(have.st_mode) && have.st_blocks * 512 >= size;
    if (exists)
        return 0;
    if (fstatvfs(s->dirfd, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < 2 * (uint64_t)size)
        return -ENOSPC;
    int fd = openat(s->dirfd, s->reserve, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    struct stat st;
    int r = fstat(fd, &st) < 0 ? -errno : 0;
    if (r == 0 && (st.st_blocks * 512 < size))
        r = -posix_fallocate(fd, 0, size);
    close(fd);
    if (r < 0) /* half a reserve frees too little to count on: none */
        unlinkat(s->dirfd, s->reserve, 0);
    return r;
}

int sfd_store_open_at(int dirfd, const char *name, uint64_t max_bytes, unsigned flags,
                      struct sfd_store **ret, const char **ret_err)
{
    bool readonly = flags & SFD_STORE_READONLY;
    struct stat want;
    *ret_err = NULL;
    if (strlen(name) + sizeof(".reserve") > NAME_MAX_ || strpbrk(name, "?#%") != NULL) {
        *ret_err = "name too long";
        return -ENAMETOOLONG;
    }
    int r = open_private(dirfd, name, readonly, &want, ret_err);
    if (r < 0)
        return r;
    struct sfd_store *s = calloc(1, sizeof(*s));
    *ret_err = "out of memory";
    if (s == NULL)
        return -ENOMEM;
    s->max_bytes = max_bytes;
    s->dirfd = -1;
    reserve_name(s, name);
    *ret_err = "cannot open the file";
    r = open_db(s, dirfd, name, readonly);
    if (r == 0 && (r = same_file(s, dirfd, name, &want)) < 0)
        *ret_err = r == -ELOOP ? "is a symbolic link, refused"
                               : "is not the file opened in the state directory, refused";
    if (r == 0 && (r = quick_check(s)) < 0)
        *ret_err = r == -EUCLEAN ? "fails SQLite's quick_check" : "cannot read the file";
    if (r == 0 && !readonly)
        r = configure(s, ret_err);
    if (r == 0 && !readonly && sqlite3_db_readonly(s->db, "main") == 1) {
        *ret_err = "the file is read-only";
        r = -EROFS;
    }
    if (r == 0 && !readonly && (s->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) < 0) {
        *ret_err = "cannot hold the directory";
        r = -errno;
    }
    if (r < 0) {
        sfd_store_close(s);
        return r;
    }
    if (!readonly)
        sfd_store_keep_reserve(s); /* best effort: a full disk may have no room for it */
    *ret = s;
    return 0;
}

int sfd_store_open(const char *path, uint64_t max_bytes, struct sfd_store **ret,
                   const char **ret_err)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= (int)sizeof dir) {
        *ret_err = "path too long";
        return -ENAMETOOLONG;
    }
    int dirfd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        *ret_err = "cannot open the directory";
        return -errno;
    }
    int r = sfd_store_open_at(dirfd, slash ? slash + 1 : path, max_bytes, 0, ret, ret_err);
    close(dirfd);
    return r;
}

void sfd_store_close(struct sfd_store *s)
{
    if (s == NULL)
        return;
    sqlite3_finalize(s->insert);
    sqlite3_finalize(s->evict);
    sqlite3_close(s->db);
    if (s->dirfd >= 0)
        close(s->dirfd);
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
    return rc == SQLITE_DONE ? 0 : sfd_store_errno(rc);
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
            return sfd_store_errno(rc);
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
    if (s->insert == NULL)
        return -EROFS; /* opened read-only */
    int r = exec(s, "BEGIN IMMEDIATE");
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r == 0; i++) {
        r = lens[i] > s->max_bytes ? -EFBIG : 0;
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

int sfd_store_make_room(struct sfd_store *s, size_t rows, uint64_t *ret_evicted)
{
    if (s->evict == NULL)
        return -EROFS;
    if (s->dirfd >= 0)
        unlinkat(s->dirfd, s->reserve, 0); /* the room the eviction itself needs */
    /* Moves what the WAL holds into the file, so that the WAL restarts from
     * its head (blocks it already has) instead of growing. It may fail for
     * want of room too; the eviction is tried all the same. */
    exec(s, "PRAGMA wal_checkpoint(TRUNCATE)");
    int r = exec(s, "BEGIN IMMEDIATE");
    if (r < 0)
        return r;
    sqlite3_reset(s->evict);
    sqlite3_bind_int64(s->evict, 1, (int64_t)(rows > EVICT_BATCH ? rows : EVICT_BATCH));
    int rc = sqlite3_step(s->evict);
    sqlite3_reset(s->evict);
    r = rc == SQLITE_DONE ? 0 : sfd_store_errno(rc);
    uint64_t n = r == 0 ? (uint64_t)sqlite3_changes(s->db) : 0;
    if (r == 0)
        r = exec(s, "PRAGMA incremental_vacuum");
    if (r == 0)
        r = exec(s, "COMMIT");
    if (r < 0) {
        exec(s, "ROLLBACK");
        return r;
    }
    exec(s, "PRAGMA wal_checkpoint(TRUNCATE)"); /* the freed pages leave the file */
    *ret_evicted += n;
    return n > 0 ? 0 : -ENOSPC;
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
        return sfd_store_errno(sqlite3_errcode(s->db));
    sqlite3_bind_int64(st, 1, kind);
    sqlite3_bind_int64(st, 2, uid);
    sqlite3_bind_text(st, 3, job, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, per_job);
    int rc = SQLITE_DONE, r = 0;
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
    if (r >= 0 && rc != SQLITE_DONE) /* a damaged page or an I/O error, not the end */
        r = sfd_store_errno(rc);
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
        return sfd_store_errno(sqlite3_errcode(s->db));
    sqlite3_bind_int64(st, 1, kind);
    sqlite3_bind_int64(st, 2, max_jobs);
    int rc = SQLITE_DONE, r = 0;
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
    if (r >= 0 && rc != SQLITE_DONE)
        r = sfd_store_errno(rc);
    sqlite3_finalize(st);
    return r;
}

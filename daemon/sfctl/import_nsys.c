/*
 * Nsight Systems reader for `sfctl import nsys`: the SQLite file of
 * `nsys export --type sqlite`, opened read-only through SQLite's C library.
 * Steps and stages come from NVTX push/pop and start/end ranges
 * (NVTX_EVENTS, names inline or in StringIds), stepped row by row so memory
 * does not follow the file. Owns the query, not the reduction.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "import.h"

#define NVTX_PUSH_POP_RANGE 59
#define NVTX_START_END_RANGE 60

static const char ranges_sql[] =
    "SELECT e.start, e.end, COALESCE(e.text, s.value) FROM NVTX_EVENTS AS e "
    "LEFT JOIN StringIds AS s ON e.textId = s.id "
    "WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL";

static bool has_table(sqlite3 *db, const char *name)
{
    sqlite3_stmt *st = NULL;
    bool found = false;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", -1,
                           &st, NULL) == SQLITE_OK &&
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) == SQLITE_OK)
        found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

/* The session's wall-clock start, which makes the report's times absolute. */
static void session_start(sqlite3 *db, struct import_file_info *info)
{
    sqlite3_stmt *st = NULL;
    if (!has_table(db, "TARGET_INFO_SESSION_START_TIME"))
        return;
    if (sqlite3_prepare_v2(db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1", -1,
                           &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER) {
        info->absolute_time = true;
        info->time_offset_ns = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
}

static int read_ranges(sqlite3 *db, struct step_acc *acc, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, ranges_sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "not an nsys SQLite export: %s", sqlite3_errmsg(db));
        return -EINVAL;
    }
    int rc, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_type(st, 0) != SQLITE_INTEGER ||
            sqlite3_column_type(st, 1) != SQLITE_INTEGER)
            continue; /* a range without integer times is not a range */
        const unsigned char *name = sqlite3_column_text(st, 2);
        r = step_acc_add(acc, name ? (const char *)name : "", sqlite3_column_int64(st, 0),
                         sqlite3_column_int64(st, 1));
    }
    if (r == 0 && rc != SQLITE_DONE) {
        snprintf(err, errlen, "reading NVTX_EVENTS: %s", sqlite3_errmsg(db));
        r = rc == SQLITE_NOMEM ? -ENOMEM : -EINVAL;
    }
    sqlite3_finalize(st);
    return r;
}

int sfctl_import_nsys_read(const char *path, struct step_acc *acc, struct import_file_info *info,
                           char *err, size_t errlen)
{
    FILE *probe = fopen(path, "rb"); /* SQLite would create a missing file's name */
    if (probe == NULL) {
        int e = errno;
        snprintf(err, errlen, "%s", strerror(e));
        return -e;
    }
    fclose(probe);
    sqlite3 *db = NULL;
    int r = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open as SQLite: %s", db ? sqlite3_errmsg(db) : "no memory");
        r = -EINVAL;
    } else if (!has_table(db, "NVTX_EVENTS")) {
        const char *why = sqlite3_errcode(db) == SQLITE_NOTADB ? "not an SQLite database"
                                                               : "no NVTX_EVENTS table (was "
                                                                 "the job traced with -t nvtx?)";
        snprintf(err, errlen, "%s", why);
        r = -EINVAL;
    } else {
        session_start(db, info);
        r = read_ranges(db, acc, err, errlen);
    }
    sqlite3_close(db);
    if (r == 0) {
        FILE *f = fopen(path, "rb");
        if (f && fseek(f, 0, SEEK_END) == 0)
            info->bytes = (uint64_t)ftell(f);
        if (f)
            fclose(f);
    }
    return r;
}

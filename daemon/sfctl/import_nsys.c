/*
 * Nsight Systems reader for `sfctl import nsys`: the SQLite file of
 * `nsys export --type sqlite`, opened read-only through SQLite's C library.
 * Steps and stages come from NVTX push/pop and start/end ranges
 * (NVTX_EVENTS, names inline or in StringIds), stepped row by row so memory
 * does not follow the file. The file is untrusted: import_nsys_guard.h
 * keeps its schema from running and bounds the work. Owns the query, not the
 * reduction.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "import.h"
#include "import_nsys_guard.h"

#define NVTX_PUSH_POP_RANGE 59
#define NVTX_START_END_RANGE 60

/* Every event comes back, so that the work between two rows is one event's
 * and the per-row bound holds; the range types are picked here. */
static const char ranges_sql[] =
    "SELECT e.start, e.end, CASE WHEN e.eventType IN (59, 60) THEN COALESCE(e.text, s.value) END, "
    "e.eventType FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s "
    "ON e.eventType IN (59, 60) AND e.text IS NULL AND e.textId = s.id";

/* The tables the queries read; a view or trigger on any of them is refused. */
static const char *const read_tables[] = {"NVTX_EVENTS", "StringIds",
                                          "TARGET_INFO_SESSION_START_TIME"};

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

static bool is_range(sqlite3_stmt *st)
{
    int64_t type = sqlite3_column_int64(st, 3);
    return (type == NVTX_PUSH_POP_RANGE || type == NVTX_START_END_RANGE) &&
           sqlite3_column_type(st, 0) == SQLITE_INTEGER &&
           sqlite3_column_type(st, 1) == SQLITE_INTEGER; /* no integer times, no range */
}

static int read_ranges(sqlite3 *db, struct nsys_budget *budget, struct step_acc *acc, char *err,
                       size_t errlen)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, ranges_sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "not an nsys SQLite export: %s", sqlite3_errmsg(db));
        return -EINVAL;
    }
    int rc, r = 0;
    while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        nsys_budget_row(budget);
        if (sqlite3_column_type(st, 3) != SQLITE_INTEGER || !is_range(st))
            continue;
        const unsigned char *name = sqlite3_column_text(st, 2);
        r = step_acc_add(acc, name ? (const char *)name : "", sqlite3_column_int64(st, 0),
                         sqlite3_column_int64(st, 1));
    }
    if (r == 0 && rc != SQLITE_DONE) {
        nsys_guard_explain(db, budget, "NVTX_EVENTS", err, errlen);
        r = rc == SQLITE_NOMEM ? -ENOMEM : -EINVAL;
    }
    sqlite3_finalize(st);
    return r;
}

int sfctl_import_nsys_read(const char *path, struct step_acc *acc, struct import_file_info *info,
                           char *err, size_t errlen)
{
    struct stat sb; /* SQLite would create a missing file's name */
    if (stat(path, &sb) != 0) {
        int e = errno;
        snprintf(err, errlen, "%s", strerror(e));
        return -e;
    }
    sqlite3 *db = NULL;
    struct nsys_budget budget;
    int r = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open as SQLite: %s", db ? sqlite3_errmsg(db) : "no memory");
        r = -EINVAL;
    }
    /* The guards go on before the first statement reads the schema. */
    if (r == 0)
        r = nsys_guard_open(db, &budget, (uint64_t)sb.st_size, err, errlen);
    if (r == 0 && !has_table(db, "NVTX_EVENTS")) {
        const char *why = sqlite3_errcode(db) == SQLITE_NOTADB ? "not an SQLite database"
                                                               : "no NVTX_EVENTS table (was "
                                                                 "the job traced with -t nvtx?)";
        snprintf(err, errlen, "%s", why);
        r = -EINVAL;
    }
    if (r == 0)
        r = nsys_guard_tables(db, read_tables, sizeof read_tables / sizeof *read_tables, err,
                              errlen);
    if (r == 0) {
        session_start(db, info);
        r = read_ranges(db, &budget, acc, err, errlen);
    }
    sqlite3_close(db);
    if (r == 0)
        info->bytes = (uint64_t)sb.st_size;
    return r;
}

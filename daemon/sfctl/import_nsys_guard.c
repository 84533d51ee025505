/*
 * The limits under which `sfctl import nsys` reads a file it did not write:
 * tables only, no schema code trusted, bounded values and bounded work.
 */
#include "import_nsys_guard.h"

#include <errno.h>
#include <stdio.h>

/* SQLite calls the handler every this many virtual-machine steps. */
#define STEPS_PER_CALL 1000u

static int count_steps(void *arg)
{
    struct nsys_budget *b = arg;
    b->row_steps += STEPS_PER_CALL;
    b->total_steps += STEPS_PER_CALL;
    if (b->row_steps > NSYS_MAX_STEPS_PER_ROW)
        b->exceeded = "row";
    else if (b->total_steps > b->max_total_steps)
        b->exceeded = "total";
    return b->exceeded != NULL; /* nonzero interrupts the statement */
}

static void set_limits(sqlite3 *db)
{
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, NSYS_MAX_VALUE_BYTES);
    sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 100000);
    sqlite3_limit(db, SQLITE_LIMIT_COLUMN, 200);
    sqlite3_limit(db, SQLITE_LIMIT_EXPR_DEPTH, 100);
    sqlite3_limit(db, SQLITE_LIMIT_COMPOUND_SELECT, 10);
    sqlite3_limit(db, SQLITE_LIMIT_VDBE_OP, 100000);
    sqlite3_limit(db, SQLITE_LIMIT_FUNCTION_ARG, 8);
    sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_limit(db, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 100);
    sqlite3_limit(db, SQLITE_LIMIT_TRIGGER_DEPTH, 1);
}

int nsys_guard_open(sqlite3 *db, struct nsys_budget *budget, uint64_t file_bytes, char *err,
                    size_t errlen)
{
    *budget = (struct nsys_budget){
        .max_total_steps = NSYS_MIN_TOTAL_STEPS + NSYS_STEPS_PER_FILE_BYTE * file_bytes,
    };
    int off = 0, on = 1;
    if (sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, &off) != SQLITE_OK ||
        sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, &on) != SQLITE_OK ||
        sqlite3_exec(db, "PRAGMA trusted_schema = OFF; PRAGMA automatic_index = OFF", NULL, NULL,
                     NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot configure SQLite: %s", sqlite3_errmsg(db));
        return -EINVAL;
    }
    set_limits(db);
    sqlite3_progress_handler(db, (int)STEPS_PER_CALL, count_steps, budget);
    return 0;
}

/* The first schema object of another kind than a table that names or
 * hangs on NAME, or NULL. */
static int schema_object(sqlite3 *db, const char *name, char *kind, size_t kindlen, char *obj,
                         size_t objlen)
{
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger') "
                           "AND (name = ?1 COLLATE NOCASE OR tbl_name = ?1 COLLATE NOCASE) "
                           "LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) != SQLITE_OK) {
        sqlite3_finalize(st);
        return -1;
    }
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        snprintf(kind, kindlen, "%s", (const char *)sqlite3_column_text(st, 0));
        snprintf(obj, objlen, "%.64s", (const char *)sqlite3_column_text(st, 1));
        found = 1;
    } else if (rc != SQLITE_DONE) {
        found = -1;
    }
    sqlite3_finalize(st);
    return found;
}

int nsys_guard_tables(sqlite3 *db, const char *const *tables, size_t count, char *err,
                      size_t errlen)
{
    for (size_t i = 0; i < count; i++) {
        char kind[16], obj[80];
        int found = schema_object(db, tables[i], kind, sizeof kind, obj, sizeof obj);
        if (found < 0) {
            snprintf(err, errlen, "cannot read the schema: %s", sqlite3_errmsg(db));
            return -EINVAL;
        }
        if (found == 0)
            continue;
        if (kind[0] == 'v')
            snprintf(err, errlen, "%s is a view, not a table: sfctl import reads tables only",
                     tables[i]);
        else
            snprintf(err, errlen,
                     "%s has a trigger (%s): sfctl import refuses files with triggers on the "
                     "tables it reads",
                     tables[i], obj);
        return -EINVAL;
    }
    return 0;
}

void nsys_guard_explain(sqlite3 *db, const struct nsys_budget *budget, const char *what, char *err,
                        size_t errlen)
{
    if (budget->exceeded && budget->exceeded[0] == 'r')
        snprintf(err, errlen,
                 "reading %s: more than %llu steps of work for one row: refused (the file makes "
                 "the reader work far beyond its size)",
                 what, (unsigned long long)NSYS_MAX_STEPS_PER_ROW);
    else if (budget->exceeded)
        snprintf(err, errlen,
                 "reading %s: more than %llu steps of work in total for a file of this size: "
                 "refused",
                 what, (unsigned long long)budget->max_total_steps);
    else if (sqlite3_errcode(db) == SQLITE_TOOBIG)
        snprintf(err, errlen, "reading %s: a value longer than %d bytes: refused", what,
                 NSYS_MAX_VALUE_BYTES);
    else
        snprintf(err, errlen, "reading %s: %s", what, sqlite3_errmsg(db));
}

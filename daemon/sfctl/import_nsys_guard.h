/*
 * Guards for reading an untrusted SQLite file in `sfctl import nsys`: the
 * file's schema is the attacker's code (views, triggers, generated columns),
 * so the reader runs only against plain tables, with SQLite's limits set low
 * and a progress handler that bounds the work per row and in total.
 */
#ifndef SF_IMPORT_NSYS_GUARD_H
#define SF_IMPORT_NSYS_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

/* Longest string or blob one value may be; NVTX names are short. */
#define NSYS_MAX_VALUE_BYTES (1024 * 1024)
/* Virtual-machine steps between two rows, and per byte of file in total. */
#define NSYS_MAX_STEPS_PER_ROW 10000000ull
#define NSYS_STEPS_PER_FILE_BYTE 64ull
#define NSYS_MIN_TOTAL_STEPS 100000000ull

struct nsys_budget {
    uint64_t row_steps;   /* steps since the last row */
    uint64_t total_steps; /* steps of the whole read */
    uint64_t max_total_steps;
    const char *exceeded; /* "row" or "total" once the handler stopped */
};

/* Sets trusted_schema off, defensive mode, the length limits and the
 * progress handler; the budget grows with the file's size. */
int nsys_guard_open(sqlite3 *db, struct nsys_budget *budget, uint64_t file_bytes, char *err,
                    size_t errlen);

/* Refuses a read table that is a view or has a trigger (0, or -EINVAL
 * with the reason in err). A missing name is left to the caller. */
int nsys_guard_tables(sqlite3 *db, const char *const *tables, size_t count, char *err,
                      size_t errlen);

/* A row came back: the per-row bound starts again. */
static inline void nsys_budget_row(struct nsys_budget *budget)
{
    budget->row_steps = 0;
}

/* Explains a failed step: the budget that stopped it, or SQLite's message. */
void nsys_guard_explain(sqlite3 *db, const struct nsys_budget *budget, const char *what, char *err,
                        size_t errlen);

#endif

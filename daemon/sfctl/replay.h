/*
 * Replay input: what the CSV and JSON Lines readers produce and the replay
 * command turns into window reports. Readers validate everything and report
 * the first problem as "LINE:COLUMN: reason".
 */
#ifndef SFCTL_REPLAY_H
#define SFCTL_REPLAY_H

#include <stdio.h>
#include <stagefrontier/change.h>

/* A window fixed by the recording itself (a "window" line after its rows). */
struct replay_window {
    sf_window_meta meta;
    size_t first_row, n_rows;
};

/* One schema segment of the input: a CSV file, or the rows that follow one
 * JSON Lines header. */
struct replay_part {
    sf_schema schema;
    uint32_t world_size;
    sf_row *rows;
    int64_t *durations; /* rows[i].d points into this after loading */
    char **roles;       /* owned role strings, one per row (may be NULL) */
    sf_parallel *pars;  /* one per row, declared == 0: none (rows[i].parallel after loading) */
    int64_t *waits;     /* 2 * sync stages per row, -1/0: none (rows[i].sync_wait after loading) */
    bool *has_waits;    /* one per row */
    size_t n_rows, cap_rows;
    struct replay_window *windows;
    size_t n_windows, cap_windows;
    size_t open_first_row;   /* rows from here on are not yet in a window line */
    sf_reference *reference; /* a recording's "reference" line, or NULL */
};

struct replay_input {
    struct replay_part *parts;
    size_t n_parts;
    bool has_gates; /* a header carried gates */
    sf_gates gates;
};

/* Readers. On error return -EINVAL (or -ENOMEM) and write "LINE:COL: reason"
 * into err. gates seeds header parsing (JSON Lines headers may override). */
int sfctl_read_csv(FILE *in, struct replay_input *ret, char *err, size_t errlen);
int sfctl_read_jsonl(FILE *in, const sf_gates *gates, struct replay_input *ret, char *err,
                     size_t errlen);
void sfctl_replay_input_clear(struct replay_input *in);

/* The report options of `sfctl replay`, shared with `sfctl import --replay`:
 * --json, --gates FILE, the gate flags (window_steps, warmup_steps, tau) and
 * the baseline of the change (--baseline FILE, --baseline-windows N). */
struct sfctl_report_opts {
    const char *gates_path;
    const char *baseline_path; /* --baseline FILE */
    bool baseline_windows;     /* --baseline-windows: collect anew, ignore a recorded reference */
    bool json;
    const char *flag_keys[8];
    const char *flag_values[8];
    int n_flags;
};

/* getopt_long entries of those options (needs <getopt.h>). */
#define SFCTL_REPORT_LONGOPTS                                                                      \
    {"json", no_argument, NULL, 'j'}, {"window-steps", required_argument, NULL, 'w'},              \
        {"warmup-steps", required_argument, NULL, 'u'}, {"tau", required_argument, NULL, 't'},     \
        {"gates", required_argument, NULL, 'g'}, {"baseline", required_argument, NULL, 'b'},       \
    {                                                                                              \
        "baseline-windows", required_argument, NULL, 'n'                                           \
    }

/* Takes one getopt result: 1 when it was a report option, 0 when not,
 * -EINVAL past 8 gate flags. */
int sfctl_report_opt(struct sfctl_report_opts *o, int c, const char *arg);
/* Checks the gate flags on the default gates before any input is read;
 * prints the reason after prog ("sfctl replay") and returns -EINVAL. */
int sfctl_report_opts_check(const struct sfctl_report_opts *o, const char *prog);

/* The reports `sfctl replay` prints, from input already in memory (used by
 * `sfctl import --replay`). label names the input in messages. Returns 0,
 * -EINVAL (message printed) or -ENOMEM. */
int sfctl_replay_report(struct replay_input *in, const char *label,
                        const struct sfctl_report_opts *o);

/* ---- the replay command's windows (replay.c) ---------------------------- */

/* A window to compute: a slice of one part's rows and its meta. */
struct window_job {
    struct replay_part *part;
    size_t first_row, n_rows;
    sf_window_meta meta;
};

/* Reads a CSV or JSON Lines file ("-": standard input), printing the reason
 * of a failure as "sfctl replay: PATH:LINE:COL: reason". */
int sfctl_replay_read(const char *path, const sf_gates *seed, struct replay_input *ret);
/* The windows of an input in order, under the given gates. */
int sfctl_replay_assemble(struct replay_input *in, const sf_gates *g, struct window_job **ret,
                          size_t *ret_n);
/* The summary and report of one window (dense up to dense_max_ranks). */
int sfctl_replay_window(const struct window_job *job, const sf_gates *g, sf_summary **ret_summary,
                        sf_report **ret_report);

/* One window as `sfctl replay` computes it: the change against the reference
 * in force (ref, NULL when none applies) and the straggler persistence over
 * the windows before it. A nonzero return stops the walk and is returned. */
typedef int (*sfctl_window_visit)(const struct window_job *job, const sf_summary *summary,
                                  const sf_report *report, const sf_reference *ref, void *user);
/* Walks the windows of input already read, in order, under the report
 * options (gates, baseline); prog prefixes messages. *ret_windows (may be
 * NULL) gets the number of windows. Returns 0, -EINVAL (message printed),
 * -ENOMEM, or what visit returned. */
int sfctl_replay_each(struct replay_input *in, const char *label, const char *prog,
                      const struct sfctl_report_opts *report, sfctl_window_visit visit, void *user,
                      size_t *ret_windows);

/* ---- the reference of a replay (replay_baseline.c) ------------------------ */

struct replay_baseline {
    struct sf_reference *ref;
    bool from_file; /* --baseline: fixed; a mismatch is an error */
    sf_reference_collector collector;
    sf_change_pool pool; /* the windows the next change pools (change_pool_windows) */
};

/* Builds the reference from the first baseline_windows eligible windows of
 * another recording or CSV. Prints a clear reason and returns -EINVAL when it
 * has none. */
int sfctl_baseline_load(const char *path, const sf_gates *g, struct replay_baseline *b);
void sfctl_baseline_clear(struct replay_baseline *b);

/* Shared by both readers. Writes "LINE:COL: message" into err; returns -EINVAL. */
int sfctl_fail_at(char *err, size_t errlen, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int sfctl_part_add_row(struct replay_part *p, const sf_row *row, const char *role);

/* The longest line either reader takes, its '\n' included. */
#define REPLAY_MAX_LINE (1u << 20)
/* One line into buf (REPLAY_MAX_LINE + 1 bytes), read no further than the
 * limit: 1 for a line, 0 at the end, or sfctl_fail_at's error for a line
 * that is too long or holds a NUL byte, or -errno for a failed read. */
int sfctl_read_line(FILE *in, char *buf, size_t line, char *err, size_t errlen);
int sfctl_part_finish(struct replay_part *p);
struct replay_part *sfctl_input_add_part(struct replay_input *in);

/* Decimal seconds -> integer ns, rounded to nearest (docs/SPEC.md section 1). */
enum seconds_error {
    SECONDS_OK = 0,
    SECONDS_NOT_A_NUMBER,
    SECONDS_NEGATIVE,
    SECONDS_NOT_FINITE,
    SECONDS_BEYOND_INT64,
};
enum seconds_error sfctl_parse_seconds(const char *text, int64_t *ret_ns);

#endif

/*
 * The live verdict (docs/LIVE.md): one-sided CUSUMs over the job's complete
 * steps, one per cell, against a baseline estimated from the job's first
 * clean complete steps. Cells:
 *   - per rank and own-work stage: the rank's duration minus the median of
 *     the other ranks' durations of that stage in the same step (its
 *     contrast), so a slowdown of the whole job does not look like a rank's;
 *   - per rank and synchronizing stage: the rank's arrival (its prefix up to
 *     the end of the stage's own work) minus the median of the other ranks'
 *     arrivals: its lateness at the sync point;
 *   - per own-work stage: the median over the ranks of its duration, for a
 *     change of the whole job;
 *   - per rank and synchronizing stage with issue marks: the rank's issue
 *     lag (arrival to the issue of its collective) minus the median of the
 *     other ranks' lags, so a rank that arrives on time but starts its
 *     collective late is named (its communication).
 * Each cell is standardized by its baseline median and robust scale (MAD);
 * its threshold follows from the job's false-alarm gate, split evenly over
 * the CUSUMs (sf_live_threshold). A rank's noisy cell (sigma large against
 * the step, as on a loaded host) runs a second, slow CUSUM whose allowance
 * comes from slow_effect_frac of the step instead of its sigma, so a shift
 * below one sigma is still named. Pure: no I/O, no clocks, no globals.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "stagefrontier/live.h"

#define MAD_TO_SIGMA 1.4826
/* The scale never goes below this share of the median step, nor 1 us: a
 * quantized clock can give a zero MAD, and a zero scale would turn any
 * jitter into an alarm. */
#define SIGMA_FLOOR_FRAC 1e-3
#define SIGMA_FLOOR_NS 1000.0
/* An increment is clipped to a fifth of the threshold above the allowance,
 * so no run of a few wild steps (a spike, a checkpoint) makes a verdict
 * alone: it takes at least five in a row. Clipping only lowers the
 * false-alarm rate below the derived one. */
#define CLIP_STEPS 5.0
/* The slow test's increment is clipped to one sigma above its allowance: a
 * noisy cell's shift is below a sigma, and a looser clip let the loaded
 * host's short runs of slow steps alarm (docs/LIVE.md, "The slow test"). */
#define SLOW_CLIP_SIGMAS 1.0
/* A noisy cell's fast test (one that also runs the slow test) takes eight
 * steps above its allowance: on a loaded host such a cell has runs of five
 * or six slow steps as the cores are shared out, and the slow test names
 * the small shifts anyway (measured: 345 false straggler verdicts in 10^6
 * bootstrapped clean steps at five, 168 at eight). */
#define NOISY_CLIP_STEPS 8.0

/* In the order a verdict prefers them (best_alarm). */
enum cell_class { CELL_CHANGE = 1, CELL_OWN = 2, CELL_COMM = 3, CELL_ARRIVAL = 4 };

/* A step's value of an issue-lag cell where some rank carried no mark. */
#define NO_VALUE INT64_MIN

/* One one-sided CUSUM of a cell. */
struct cusum {
    double k, h, clip; /* in sigmas */
    double s;          /* the statistic, sigmas */
    int64_t since_step;
    double sum_ns; /* of x - mu since since_step */
    uint32_t n;
    bool alarm;
};

struct cell {
    int64_t mu_ns;
    double mu; /* the baseline median, tracked while the cell is quiet */
    double sigma_ns;
    struct cusum fast; /* allowance half the design shift (or the effect floor) */
    struct cusum slow; /* allowance half slow_effect_frac of the step; only when slow_on */
    bool slow_on;
    bool off; /* an issue-lag cell whose baseline had too few marks: never tested */
};

struct sf_live {
    sf_schema schema;
    sf_live_config cfg;
    uint32_t world, n_stages;
    uint32_t n_own, n_sync;
    uint32_t own[SF_MAX_STAGES];  /* own-work stage indices */
    uint32_t sync[SF_MAX_STAGES]; /* synchronizing stage indices */
    uint32_t n_rank_cells;        /* world * (n_own + n_sync), 0 for one rank */
    uint32_t n_base;              /* n_rank_cells + n_own: the first issue-lag cell */
    uint32_t n_cells;             /* n_base + world * n_sync (0 of them for one rank) */
    uint32_t n_active;            /* cells tested: the issue-lag cells with a baseline */
    struct cell *cells;
    int64_t *x;          /* [n_cells] this step's values */
    int64_t *scratch;    /* [world] sorted column */
    int64_t *col;        /* [world] column in rank order */
    int64_t *calib;      /* [calibration_steps][n_cells]; freed once calibrated */
    int64_t *calib_step; /* [calibration_steps] the step's median total */
    uint32_t n_calib;
    bool calibrated;
    int64_t step_ns;
    double alpha; /* the baseline tracker's weight a step, 0: fixed */
    int64_t last_step;
    uint64_t tested;
    int32_t vcell; /* cell of the verdict, -1: none */
    sf_live_verdict verdict;
};

void sf_live_config_default(sf_live_config *ret)
{
    *ret = (sf_live_config){
        .false_alarm_steps = 864000.0, /* ten job-days of one-second steps */
        .shift_sigmas = 4.0,
        .min_effect_frac = 0.05,
        .slow_effect_frac = 0.08,
        .change_min_frac = 0.5,
        .calibration_steps = 100,
        .baseline_halflife_steps = 2000,
    };
}

int sf_live_config_validate(const sf_live_config *c)
{
    if (!(c->false_alarm_steps >= 10 && c->false_alarm_steps <= 1e15) ||
        !(c->shift_sigmas > 0 && c->shift_sigmas <= 100) ||
        !(c->min_effect_frac >= 0 && c->min_effect_frac < 1) ||
        !(c->slow_effect_frac >= 0 && c->slow_effect_frac < 1) ||
        !(c->change_min_frac >= 0 && c->change_min_frac < 10) || c->calibration_steps < 8 ||
        c->calibration_steps > SF_LIVE_MAX_CALIBRATION_STEPS ||
        !(c->baseline_halflife_steps >= 0 && c->baseline_halflife_steps <= 1e12))
        return -EINVAL;
    return 0;
}

static double siegmund_arl(double k, double h)
{
    double a = 2 * k * (h + 1.166);
    return (exp(a) - a - 1) / (2 * k * k);
}

double sf_live_threshold(double k, double arl0)
{
    if (!(k > 0) || !(arl0 >= 1) || !isfinite(k))
        return NAN;
    double lo = 0, hi = 1;
    while (siegmund_arl(k, hi) < arl0 && hi < 1e6)
        hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-9; i++) {
        double mid = (lo + hi) / 2;
        if (siegmund_arl(k, mid) < arl0)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

const char *sf_live_kind_name(enum sf_live_kind kind)
{
    switch (kind) {
    case SF_LIVE_STRAGGLER:
        return "straggler";
    case SF_LIVE_CHANGE:
        return "change";
    case SF_LIVE_STALL:
        return "stall";
    default:
        return "none";
    }
}

static bool sync_wait_stage(const sf_schema *schema, uint32_t k)
{
    return k > 0 && k <= 64 && ((schema->sync_mask >> (k - 1)) & 1);
}

static void list_stages(sf_live *l)
{
    const sf_schema *s = &l->schema;
    for (uint32_t k = 0; k + 1 < s->n_stages; k++) {
        if (!sync_wait_stage(s, k))
            l->own[l->n_own++] = k;
        if (k < 64 && ((s->sync_mask >> k) & 1))
            l->sync[l->n_sync++] = k;
    }
}

int sf_live_new(const sf_schema *schema, uint32_t world_size, const sf_live_config *config,
                sf_live **ret)
{
    if (schema == NULL || world_size == 0 || world_size > SF_MAX_RANKS || config == NULL ||
        sf_live_config_validate(config) < 0)
        return -EINVAL;
    sf_live *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -ENOMEM;
    if (sf_schema_copy(&l->schema, schema) < 0) {
        free(l);
        return -ENOMEM;
    }
    l->cfg = *config;
    l->world = world_size;
    l->n_stages = schema->n_stages;
    list_stages(l);
    l->n_rank_cells = world_size > 1 ? world_size * (l->n_own + l->n_sync) : 0;
    l->n_base = l->n_rank_cells + l->n_own;
    l->n_cells = l->n_base + (world_size > 1 ? world_size * l->n_sync : 0);
    l->last_step = INT64_MIN;
    l->alpha = config->baseline_halflife_steps > 0
                   ? 1 - exp(-log(2.0) / config->baseline_halflife_steps)
                   : 0;
    l->vcell = -1;
    size_t nc = l->n_cells ? l->n_cells : 1;
    l->cells = calloc(nc, sizeof(*l->cells));
    l->x = calloc(nc, sizeof(*l->x));
    l->scratch = calloc(world_size, sizeof(*l->scratch));
    l->col = calloc(world_size, sizeof(*l->col));
    l->calib = calloc((size_t)config->calibration_steps * nc, sizeof(*l->calib));
    l->calib_step = calloc(config->calibration_steps, sizeof(*l->calib_step));
    if (l->cells == NULL || l->x == NULL || l->scratch == NULL || l->col == NULL ||
        l->calib == NULL || l->calib_step == NULL) {
        sf_live_free(l);
        return -ENOMEM;
    }
    *ret = l;
    return 0;
}

void sf_live_free(sf_live *l)
{
    if (l == NULL)
        return;
    sf_schema_clear(&l->schema);
    free(l->cells);
    free(l->x);
    free(l->scratch);
    free(l->col);
    free(l->calib);
    free(l->calib_step);
    free(l);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts one column over the ranks: an insertion sort for the few ranks of
 * a typical job (no call per comparison), qsort beyond. */
static void sort_column(int64_t *v, uint32_t n)
{
    if (n > 32) {
        qsort(v, n, sizeof(*v), cmp_i64);
        return;
    }
    for (uint32_t i = 1; i < n; i++) {
        int64_t x = v[i];
        uint32_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Median of the sorted values v[0..n-1] with the one at position p left out
 * (p = n: none left out); n - (p < n) >= 1. */
static int64_t median_without(const int64_t *v, uint32_t n, uint32_t p)
{
    uint32_t m = p < n ? n - 1 : n;
#define AT(i) ((i) < p ? v[i] : v[(i) + 1])
    int64_t a = AT((m - 1) / 2), b = AT(m / 2);
#undef AT
    return a + (b - a) / 2;
}

/* Per-rank contrasts of one column (a stage's durations or arrivals over
 * the ranks) into out[r * stride], and the job-wide median. */
static int64_t contrasts(sf_live *l, int64_t *out, uint32_t stride)
{
    uint32_t w = l->world;
    const int64_t *col = l->col;
    memcpy(l->scratch, col, w * sizeof(*col));
    sort_column(l->scratch, w);
    if (out != NULL)
        for (uint32_t r = 0; r < w; r++)
            out[r * stride] =
                col[r] - median_without(l->scratch, w, sf__lower_bound_i64(l->scratch, w, col[r]));
    return median_without(l->scratch, w, w);
}

/* The issue-lag cells of one step into x + n_base (rank-major, one per
 * synchronizing stage): NO_VALUE for a stage where some rank carried no
 * issue mark. */
static void lag_values(sf_live *l, const int64_t *lag, int64_t *x)
{
    uint32_t w = l->world, J = l->n_sync;
    if (l->n_cells == l->n_base)
        return;
    for (uint32_t j = 0; j < J; j++) {
        bool marked = lag != NULL;
        for (uint32_t r = 0; r < w && marked; r++) {
            l->col[r] = lag[(size_t)r * J + j];
            marked = l->col[r] >= 0;
        }
        if (marked) {
            contrasts(l, x + l->n_base + j, J);
            continue;
        }
        for (uint32_t r = 0; r < w; r++)
            x[l->n_base + (size_t)r * J + j] = NO_VALUE;
    }
}

/* The value of every cell for one step into x; returns the step's median
 * total over the ranks. Rank cells are rank-major: own stages, then sync
 * stages; the job-wide cells follow, then the issue-lag cells. */
static int64_t step_values(sf_live *l, const int64_t *d, const int64_t *lag, int64_t *x)
{
    lag_values(l, lag, x);
    uint32_t w = l->world, S = l->n_stages, per_rank = l->n_own + l->n_sync;
    for (uint32_t j = 0; j < l->n_own; j++) {
        for (uint32_t r = 0; r < w; r++)
            l->col[r] = d[(size_t)r * S + l->own[j]];
        x[l->n_rank_cells + j] = contrasts(l, l->n_rank_cells ? x + j : NULL, per_rank);
    }
    for (uint32_t j = 0; j < l->n_sync; j++) {
        for (uint32_t r = 0; r < w; r++) {
            int64_t p = 0;
            for (uint32_t k = 0; k <= l->sync[j]; k++)
                p += d[(size_t)r * S + k];
            l->col[r] = p;
        }
        if (l->n_rank_cells)
            contrasts(l, x + l->n_own + j, per_rank);
    }
    for (uint32_t r = 0; r < w; r++) {
        int64_t t = 0;
        for (uint32_t k = 0; k < S; k++)
            t += d[(size_t)r * S + k];
        l->col[r] = t;
    }
    return contrasts(l, NULL, 0);
}

static int64_t median_of(int64_t *v, uint32_t n)
{
    qsort(v, n, sizeof(*v), cmp_i64);
    return median_without(v, n, n);
}

/* One cell's median, scale and allowances from the calibration steps (v: a
 * buffer of n_calib entries); true when the cell also runs the slow test:
 * a rank's cell whose fast allowance is above half of slow_effect_frac of
 * the step. */
static bool cell_baseline(sf_live *l, uint32_t c, int64_t *v)
{
    struct cell *e = &l->cells[c];
    uint32_t m = 0; /* the cell's values: an issue-lag cell's marked steps */
    for (uint32_t t = 0; t < l->n_calib; t++)
        if (l->calib[(size_t)t * l->n_cells + c] != NO_VALUE)
            v[m++] = l->calib[(size_t)t * l->n_cells + c];
    e->mu_ns = median_of(v, m);
    e->mu = (double)e->mu_ns;
    for (uint32_t t = 0; t < m; t++)
        v[t] = llabs(v[t] - e->mu_ns);
    double sigma = MAD_TO_SIGMA * (double)median_of(v, m);
    double step = (double)l->step_ns;
    e->sigma_ns = fmax(sigma, fmax(SIGMA_FLOOR_FRAC * step, SIGMA_FLOOR_NS));
    bool job_wide = c >= l->n_rank_cells && c < l->n_base;
    double min_frac = job_wide ? l->cfg.change_min_frac : l->cfg.min_effect_frac;
    double kappa = fmax(l->cfg.shift_sigmas / 2 * e->sigma_ns, min_frac / 2 * step);
    e->fast.k = kappa / e->sigma_ns;
    double slow_kappa = fmax(l->cfg.slow_effect_frac, min_frac) / 2 * step;
    e->slow_on = !job_wide && l->cfg.slow_effect_frac > 0 && slow_kappa < kappa;
    e->slow.k = slow_kappa / e->sigma_ns;
    return e->slow_on;
}

/* Median and scale of every cell from the calibration steps, then the
 * allowances and thresholds its CUSUMs run with. */
static void finish_calibration(sf_live *l)
{
    uint32_t n = l->n_calib;
    l->step_ns = median_of(l->calib_step, n);
    int64_t *v = l->calib_step; /* reused as the column buffer: n entries */
    /* An issue-lag cell needs marks on at least half of the baseline's
     * steps (and 8): a job without issue marks tests what it did before. */
    uint32_t need = n / 2 > 8 ? n / 2 : 8;
    l->n_active = 0;
    for (uint32_t c = 0; c < l->n_cells; c++) {
        uint32_t m = 0;
        for (uint32_t t = 0; t < n; t++)
            m += l->calib[(size_t)t * l->n_cells + c] != NO_VALUE;
        l->cells[c].off = m < need;
        l->n_active += !l->cells[c].off;
    }
    uint32_t n_tests = 0;
    for (uint32_t c = 0; c < l->n_cells; c++)
        if (!l->cells[c].off)
            n_tests += 1 + cell_baseline(l, c, v);
    /* The gate is split evenly over every CUSUM, the slow ones included. */
    double arl0 = l->cfg.false_alarm_steps * (n_tests ? n_tests : 1);
    for (uint32_t c = 0; c < l->n_cells; c++) {
        struct cell *e = &l->cells[c];
        if (e->off)
            continue;
        e->fast.h = sf_live_threshold(e->fast.k, arl0);
        e->fast.clip = e->fast.k + e->fast.h / (e->slow_on ? NOISY_CLIP_STEPS : CLIP_STEPS);
        if (e->slow_on) {
            e->slow.h = sf_live_threshold(e->slow.k, arl0);
            e->slow.clip = e->slow.k + fmin(e->slow.h / CLIP_STEPS, SLOW_CLIP_SIGMAS);
        }
    }
    free(l->calib);
    l->calib = NULL;
    l->calibrated = true;
}

int sf_live_calibrate_lags(sf_live *l, const int64_t *d, const int64_t *lag)
{
    if (l->calibrated)
        return 0;
    int64_t *x = l->calib + (size_t)l->n_calib * l->n_cells;
    l->calib_step[l->n_calib++] = step_values(l, d, lag, x);
    if (l->n_calib < l->cfg.calibration_steps)
        return 0;
    finish_calibration(l);
    return 1;
}

int sf_live_calibrate(sf_live *l, const int64_t *d)
{
    return sf_live_calibrate_lags(l, d, NULL);
}

int sf_live_calibrate_summary_lags(sf_live *l, const sf_summary *s, const int64_t *lags)
{
    const sf_dense *dn = s->dense;
    if (dn == NULL || dn->n_ranks != l->world || s->schema.hash != l->schema.hash)
        return 0;
    for (uint32_t i = 0; i < dn->n_ranks; i++)
        if (dn->ranks[i] != i)
            return 0;
    size_t per_step = (size_t)dn->n_ranks * l->n_stages;
    for (uint32_t t = 0; t < s->n_steps && !l->calibrated; t++) {
        bool complete = true;
        for (uint32_t r = 0; r < dn->n_ranks && complete; r++)
            complete = dn->present[(size_t)t * dn->n_ranks + r] != 0;
        const int64_t *lag = lags ? lags + (size_t)t * dn->n_ranks * l->n_sync : NULL;
        if (complete && sf_live_calibrate_lags(l, dn->d + t * per_step, lag) == 1)
            return 1;
    }
    return 0;
}

int sf_live_calibrate_summary(sf_live *l, const sf_summary *s)
{
    return sf_live_calibrate_summary_lags(l, s, NULL);
}

bool sf_live_calibrated(const sf_live *l)
{
    return l->calibrated;
}

static enum cell_class class_of(const sf_live *l, uint32_t c)
{
    if (c >= l->n_base)
        return CELL_COMM;
    if (c >= l->n_rank_cells)
        return CELL_CHANGE;
    return c % (l->n_own + l->n_sync) < l->n_own ? CELL_OWN : CELL_ARRIVAL;
}

/* x clamped to [lo, hi]: comparisons the compiler keeps inline (fmin and
 * fmax are calls into libm on the per-step path, for their NaN rules; no
 * value here is NaN). */
static inline double clamp(double x, double lo, double hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* One CUSUM update with the step's standardized value z and its shift dx
 * from the baseline (ns). */
static inline void cusum_update(struct cusum *u, double z, double dx, int64_t step)
{
    z = clamp(z, -u->clip, u->clip);
    double s = u->s + z - u->k;
    s = s > 0 ? s : 0;
    if (u->s == 0 && s > 0) {
        u->since_step = step;
        u->sum_ns = 0;
        u->n = 0;
    }
    if (s > 0) {
        u->sum_ns += dx;
        u->n++;
    }
    if (!u->alarm && s > u->h)
        u->alarm = true;
    if (u->alarm) {
        /* Capped so that the return to baseline shows within h / k steps. */
        s = s < u->h ? s : u->h;
        if (s == 0)
            u->alarm = false;
    }
    u->s = s;
}

static bool cell_alarm(const struct cell *e)
{
    return e->fast.alarm || (e->slow_on && e->slow.alarm);
}

/* The CUSUM a verdict on the cell speaks of: an alarmed one before a quiet
 * one, then the larger share of its threshold. */
static const struct cusum *cell_lead(const struct cell *e)
{
    if (!e->slow_on || (e->fast.alarm && !e->slow.alarm))
        return &e->fast;
    if (e->slow.alarm && !e->fast.alarm)
        return &e->slow;
    return e->slow.s / e->slow.h > e->fast.s / e->fast.h ? &e->slow : &e->fast;
}

static double cell_ratio(const struct cell *e)
{
    const struct cusum *u = cell_lead(e);
    return u->s / u->h;
}

/* One step of a cell: both CUSUMs, then the drift tracker. */
static void cell_update(struct cell *e, int64_t x, int64_t step, double alpha)
{
    double dx = (double)x - e->mu, z = dx / e->sigma_ns;
    cusum_update(&e->fast, z, dx, step);
    if (e->slow_on)
        cusum_update(&e->slow, z, dx, step);
    /* A quiet cell follows its baseline slowly (an exponential tracker with
     * the configured half-life, each step's pull clipped to one sigma): a
     * shared machine's load drifts by more than a fault's size over hours,
     * and a drift that slow is no verdict. Every value outside an alarm
     * counts (following only the values that leave S at 0 would pull the
     * baseline down); an alarmed cell is frozen, so a real shift stays
     * named until it is gone, and the few steps before it alarms move the
     * baseline by a few thousandths of a sigma. */
    if (!cell_alarm(e) && alpha > 0)
        e->mu += alpha * clamp(dx, -e->sigma_ns, e->sigma_ns);
}

/* The first synchronizing stage at or after stage k, or UINT32_MAX. */
static uint32_t sync_after(const sf_live *l, uint32_t k)
{
    for (uint32_t j = 0; j < l->n_sync; j++)
        if (l->sync[j] >= k)
            return l->sync[j];
    return UINT32_MAX;
}

/* Rank, stage and sync stage a cell speaks of. */
static void cell_place(const sf_live *l, uint32_t c, sf_live_verdict *v)
{
    uint32_t per_rank = l->n_own + l->n_sync;
    if (c >= l->n_base) {
        /* On the issue lag: the rank arrived, then started its collective
         * late; the delay is its communication at that sync stage. */
        v->kind = SF_LIVE_STRAGGLER;
        v->rank = (c - l->n_base) / l->n_sync;
        v->sync_stage = l->sync[(c - l->n_base) % l->n_sync];
        v->stage = v->sync_stage;
        v->communication = true;
        return;
    }
    if (c >= l->n_rank_cells) {
        v->kind = SF_LIVE_CHANGE;
        v->rank = SF_NO_RANK;
        v->stage = l->own[c - l->n_rank_cells];
        v->sync_stage = sync_after(l, v->stage);
        return;
    }
    v->kind = SF_LIVE_STRAGGLER;
    v->rank = c / per_rank;
    uint32_t j = c % per_rank;
    if (j < l->n_own) {
        v->stage = l->own[j];
        v->sync_stage = sync_after(l, v->stage);
        return;
    }
    /* At an arrival point: the origin is the rank's own-work stage up to
     * the sync point with the largest statistic (the earliest on a tie). */
    v->arrival = true;
    v->sync_stage = l->sync[j - l->n_own];
    v->stage = v->sync_stage;
    double best = 0;
    for (uint32_t i = 0; i < l->n_own && l->own[i] <= v->sync_stage; i++) {
        const struct cell *e = &l->cells[v->rank * per_rank + i];
        if (cell_ratio(e) > best) {
            best = cell_ratio(e);
            v->stage = l->own[i];
        }
    }
}

static void verdict_fill(const sf_live *l, uint32_t c, sf_live_verdict *v)
{
    const struct cell *e = &l->cells[c];
    const struct cusum *u = cell_lead(e);
    v->since_step = u->since_step;
    v->effect_s = u->n ? u->sum_ns / u->n / 1e9 : 0;
    v->statistic = u->s;
    v->threshold = u->h;
    v->baseline_ns = llround(e->mu);
    v->sigma_ns = (int64_t)llround(e->sigma_ns);
    v->cell_steps = u->n;
}

/* The alarmed cell a verdict should name: arrivals before own work before a
 * change of the whole job, then the larger statistic, then the lower index. */
static int32_t best_alarm(const sf_live *l)
{
    int32_t best = -1;
    for (uint32_t c = 0; c < l->n_cells; c++) {
        const struct cell *e = &l->cells[c];
        if (!cell_alarm(e))
            continue;
        if (best < 0 || class_of(l, c) > class_of(l, (uint32_t)best) ||
            (class_of(l, c) == class_of(l, (uint32_t)best) &&
             cell_ratio(e) > cell_ratio(&l->cells[best])))
            best = (int32_t)c;
    }
    return best;
}

static void verdict_start(sf_live *l, int32_t c, int64_t step, int64_t wall_ms)
{
    l->vcell = c;
    memset(&l->verdict, 0, sizeof l->verdict);
    cell_place(l, (uint32_t)c, &l->verdict);
    verdict_fill(l, (uint32_t)c, &l->verdict);
    l->verdict.detected_step = step;
    l->verdict.detected_at_ms = wall_ms;
}

int sf_live_step(sf_live *l, int64_t step, const int64_t *d, int64_t wall_ms,
                 enum sf_live_event *ret_event, sf_live_verdict *ret_ended)
{
    return sf_live_step_lags(l, step, d, NULL, wall_ms, ret_event, ret_ended);
}

int sf_live_step_lags(sf_live *l, int64_t step, const int64_t *d, const int64_t *lag,
                      int64_t wall_ms, enum sf_live_event *ret_event, sf_live_verdict *ret_ended)
{
    *ret_event = SF_LIVE_NO_EVENT;
    if (!l->calibrated)
        return 0;
    if (step <= l->last_step)
        return -EINVAL;
    l->last_step = step;
    l->tested++;
    step_values(l, d, lag, l->x);
    for (uint32_t c = 0; c < l->n_cells; c++)
        if (!l->cells[c].off && l->x[c] != NO_VALUE)
            cell_update(&l->cells[c], l->x[c], step, l->alpha);
    int32_t best = best_alarm(l);
    if (l->vcell >= 0) {
        bool over = !cell_alarm(&l->cells[l->vcell]);
        /* A change of the whole job gives way to a rank's verdict; a rank's
         * verdict stays on its cell until that cell is back. */
        bool outranked = best >= 0 && class_of(l, (uint32_t)l->vcell) == CELL_CHANGE &&
                         class_of(l, (uint32_t)best) != CELL_CHANGE;
        if (!over && !outranked) {
            verdict_fill(l, (uint32_t)l->vcell, &l->verdict);
            return 0;
        }
        if (ret_ended != NULL) {
            verdict_fill(l, (uint32_t)l->vcell, &l->verdict);
            *ret_ended = l->verdict;
        }
        l->vcell = -1;
        l->verdict.kind = SF_LIVE_NONE;
        *ret_event = SF_LIVE_ENDED;
    }
    if (best >= 0) {
        verdict_start(l, best, step, wall_ms);
        *ret_event = *ret_event == SF_LIVE_ENDED ? SF_LIVE_REPLACED : SF_LIVE_STARTED;
    }
    return 0;
}

const sf_live_verdict *sf_live_verdict_get(const sf_live *l)
{
    return l != NULL && l->vcell >= 0 ? &l->verdict : NULL;
}

uint32_t sf_live_cells(const sf_live *l)
{
    return l->calibrated ? l->n_active : l->n_cells;
}

uint32_t sf_live_sync_stages(const sf_live *l)
{
    return l->n_sync;
}

uint64_t sf_live_steps_tested(const sf_live *l)
{
    return l->tested;
}

size_t sf_live_bytes(const sf_live *l)
{
    size_t b = sizeof(*l) + l->n_cells * (sizeof(struct cell) + sizeof(int64_t)) +
               2 * (size_t)l->world * sizeof(int64_t);
    if (l->calib != NULL)
        b += (size_t)l->cfg.calibration_steps * (l->n_cells + 1) * sizeof(int64_t);
    return b;
}

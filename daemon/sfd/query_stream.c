/*
 * sfd streamed query answers: RECORD (a recording of the kept windows), RANKS
 * (every rank of a job) and REPORT (kept windows' reports) produced a slice at
 * a time as the reader drains its socket, so no answer is ever whole in memory
 * and the event loop spends a bounded time per slice. Owns the cursor; never
 * sends (query.c does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "recording.h"
#include "report_json.h"
#include "report_text.h"
#include "sfd.h"
#include "side_evidence.h"

#define RANKS_PER_SCAN 256 /* ranks whose hosts one pass over conns finds */
#define ITEMS_PER_CLOCK 32 /* items between deadline checks */

struct win_key {
    uint32_t segment;
    int64_t index;
};

enum qs_kind { QS_RECORD, QS_RANKS, QS_REPORT };

struct sfd_qstream {
    enum qs_kind kind;
    bool text;                 /* REPORT: the human view, else the JSON array */
    const struct sfd_job *job; /* compared, never dereferenced before found in d->jobs */
    char job_id[SF_MAX_JOB_ID_LEN + 1];
    uid_t uid;
    uint32_t segment, world_size;
    bool started;
    bool reference_sent; /* RECORD: the job's baseline line, when it has one */
    /* RECORD, REPORT: kept windows in (segment, index) order when asked */
    struct win_key *keys;
    size_t n_keys, key;
    size_t row; /* RECORD: next row of keys[key], >0: window begun;
                 * REPORT: windows sent */
    /* RANKS */
    uint32_t rank;
    const char *hosts[RANKS_PER_SCAN];
    uint32_t hosts_base;
    bool hosts_valid;
};

void sfd_qstream_free(struct sfd_qstream *s)
{
    if (s == NULL)
        return;
    free(s->keys);
    free(s);
}

static struct sfd_qstream *qstream_new(const struct sfd_job *j, enum qs_kind kind)
{
    struct sfd_qstream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->kind = kind;
    s->job = j;
    snprintf(s->job_id, sizeof(s->job_id), "%s", j->id);
    s->uid = j->uid;
    s->segment = j->segment;
    s->world_size = j->world_size;
    return s;
}

static int cmp_key(const void *a, const void *b)
{
    const struct win_key *x = a, *y = b;
    if (x->segment != y->segment)
        return x->segment < y->segment ? -1 : 1;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return 0;
}

/* The kept windows in (segment, index) order, the order reports are listed
 * in, so a replay of the dump lists its windows the same way. */
int sfd_qstream_open_record(struct sfd *d, const struct sfd_job *j, struct sfd_qstream **ret)
{
    (void)d;
    struct sfd_qstream *s = qstream_new(j, QS_RECORD);
    if (s == NULL)
        return -ENOMEM;
    s->keys = calloc(j->n_stored ? j->n_stored : 1, sizeof(*s->keys));
    if (s->keys == NULL) {
        sfd_qstream_free(s);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < j->n_stored; i++)
        /* Rows on other nodes, or freed for the memory budget: nothing to replay. */
        if (!j->stored[i].remote && !j->stored[i].rows_evicted)
            s->keys[s->n_keys++] =
                (struct win_key){j->stored[i].meta.segment, j->stored[i].meta.index};
    qsort(s->keys, s->n_keys, sizeof(*s->keys), cmp_key);
    *ret = s;
    return 0;
}

int sfd_qstream_open_ranks(struct sfd *d, const struct sfd_job *j, struct sfd_qstream **ret)
{
    (void)d;
    struct sfd_qstream *s = qstream_new(j, QS_RANKS);
    if (s == NULL)
        return -ENOMEM;
    *ret = s;
    return 0;
}

int sfd_qstream_open_report(struct sfd *d, const struct sfd_job *j, const sf_report *const *v,
                            size_t n, bool text, struct sfd_qstream **ret)
{
    (void)d;
    struct sfd_qstream *s = qstream_new(j, QS_REPORT);
    if (s == NULL)
        return -ENOMEM;
    s->text = text;
    s->keys = calloc(n ? n : 1, sizeof(*s->keys));
    if (s->keys == NULL) {
        sfd_qstream_free(s);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        s->keys[i] = (struct win_key){v[i]->meta.segment, v[i]->meta.index};
    s->n_keys = n;
    *ret = s;
    return 0;
}

/* The job as it was when asked, or NULL when it went away or (for RECORD and
 * RANKS, whose header describes it) changed shape: a job is looked up again
 * on every slice, never trusted across turns. */
static const struct sfd_job *live_job(struct sfd *d, const struct sfd_qstream *s)
{
    for (const struct sfd_job *j = d->jobs; j != NULL; j = j->next) {
        if (j != s->job)
            continue;
        if (strcmp(j->id, s->job_id) != 0 || j->uid != s->uid)
            return NULL;
        if (s->kind != QS_REPORT && (j->segment != s->segment || j->world_size != s->world_size))
            return NULL;
        return j;
    }
    return NULL;
}

/* ---- output ---------------------------------------------------------------- */

struct out {
    char **buf;
    size_t *len, *cap;
};

static int put(struct out *o, const char *p, size_t n)
{
    if (*o->len + n > *o->cap) {
        size_t cap = *o->cap ? *o->cap : SFD_QUERY_CHUNK;
        while (cap < *o->len + n)
            cap *= 2;
        char *b = realloc(*o->buf, cap);
        if (b == NULL)
            return -ENOMEM;
        *o->buf = b;
        *o->cap = cap;
    }
    memcpy(*o->buf + *o->len, p, n);
    *o->len += n;
    return 0;
}

/* Appends o's compact text (and a newline for recording lines); takes o. */
static int put_json(struct out *out, json_t *o, bool line)
{
    if (o == NULL)
        return -ENOMEM;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s == NULL)
        return -ENOMEM;
    int r = put(out, s, strlen(s));
    if (r == 0 && line)
        r = put(out, "\n", 1);
    free(s);
    return r;
}

/* ---- RECORD ----------------------------------------------------------------- */

static const struct sfd_stored *find_kept(const struct sfd_job *j, const struct win_key *k)
{
    for (uint32_t i = 0; i < j->n_stored; i++)
        if (j->stored[i].meta.segment == k->segment && j->stored[i].meta.index == k->index)
            return &j->stored[i];
    return NULL;
}

/* One line of the recording; 1 when the answer is complete. */
static int record_step(const struct sfd_job *j, struct sfd_qstream *s, struct out *o,
                       const char **ret_err)
{
    if (!s->started) {
        s->started = true;
        return put_json(o, sf_recording_header(j->id, &j->schema, j->world_size, &j->gates), true);
    }
    if (!s->reference_sent) { /* so a replay measures against the same baseline */
        s->reference_sent = true;
        const sf_reference *ref = j->base.pinned ? j->base.pinned : j->base.automatic;
        if (ref != NULL)
            return put_json(o, sf_recording_reference(ref), true);
    }
    if (s->key == s->n_keys)
        return 1;
    const struct sfd_stored *w = find_kept(j, &s->keys[s->key]);
    if (w == NULL || w->rows_evicted) { /* dropped, or its rows freed for the budget */
        if (s->row > 0) {
            *ret_err = "a window was dropped while it was being sent: read faster, or "
                       "raise keep_windows";
            return -ESTALE;
        }
        s->key++; /* dropped before it began: the recording lists the rest */
        return 0;
    }
    if (s->row < w->rows.n) {
        sf_row row;
        sfd_rows_row(j, &w->rows, s->row++, &row);
        return put_json(o, sf_recording_row(&row, &j->schema), true);
    }
    s->key++;
    s->row = 0;
    return put_json(o, sf_recording_window(&w->meta), true);
}

/* ---- REPORT ----------------------------------------------------------------- */

/* One window of the JSON array, formatted as the whole array would have it
 * (the canonical formatting, so `sfctl report --json` and `sfctl replay
 * --json` print the same bytes): a one-element array without its brackets. */
static int put_report_json(const struct sfd_job *j, const sf_report *rep, bool first, struct out *o)
{
    json_t *obj;
    int r = sf_report_to_json(rep, &obj);
    if (r < 0)
        return r;
    if ((r = sfd_side_annotate_json(j->side, rep, obj)) < 0) {
        json_decref(obj);
        return r;
    }
    json_t *a = json_array();
    if (a == NULL || json_array_append_new(a, obj) < 0) {
        json_decref(a);
        return -ENOMEM;
    }
    char *t = sf_report_array_dumps(a);
    json_decref(a);
    size_t n = t ? strlen(t) : 0;
    if (n < 4) { /* "[\n" element "\n]" */
        free(t);
        return -ENOMEM;
    }
    r = first ? 0 : put(o, ",\n", 2);
    if (r == 0)
        r = put(o, t + 2, n - 4);
    free(t);
    return r;
}

static int put_report_text(const struct sfd_job *j, const sf_report *rep, struct out *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return -ENOMEM;
    int r = sf_report_write_text(rep, f);
    if (r >= 0)
        r = sfd_side_write_text(j->side, rep, f);
    fclose(f);
    if (r >= 0)
        r = put(o, buf, len);
    free(buf);
    return r < 0 ? r : 0;
}

static int report_step(const struct sfd_job *j, struct sfd_qstream *s, struct out *o)
{
    if (!s->started) {
        s->started = true;
        return s->text ? 0 : put(o, "[\n", 2);
    }
    if (s->key == s->n_keys) {
        s->key++;
        return s->text ? 0 : put(o, "\n]", 2);
    }
    if (s->key > s->n_keys)
        return 1;
    const struct sfd_stored *w = find_kept(j, &s->keys[s->key++]);
    if (w == NULL || w->report == NULL)
        return 0; /* dropped since it was asked for: the answer lists the rest */
    bool first = s->row++ == 0;
    return s->text ? put_report_text(j, w->report, o) : put_report_json(j, w->report, first, o);
}

/* ---- RANKS ------------------------------------------------------------------ */

/* Hosts of the next RANKS_PER_SCAN ranks, from one pass over the connections. */
static void scan_hosts(struct sfd *d, const struct sfd_job *j, struct sfd_qstream *s)
{
    memset(s->hosts, 0, sizeof(s->hosts));
    s->hosts_base = s->rank;
    for (const struct sfd_conn *c = d->conns; c != NULL; c = c->next)
        if (c->job == j && c->channel == 0 && c->rank >= s->rank &&
            c->rank - s->rank < RANKS_PER_SCAN)
            s->hosts[c->rank - s->rank] = c->host;
    s->hosts_valid = true;
}

/* The same bytes the whole answer had: {"job_id":..,"world_size":..,
 * "segment":..,"ranks":[..]}, one rank object at a time. */
static int ranks_step(struct sfd *d, const struct sfd_job *j, struct sfd_qstream *s, struct out *o)
{
    if (!s->started) {
        s->started = true;
        json_t *head =
            json_pack("{s:s, s:I, s:I, s:[]}", "job_id", j->id, "world_size",
                      (json_int_t)j->world_size, "segment", (json_int_t)j->segment, "ranks");
        char *t = head ? json_dumps(head, JSON_COMPACT) : NULL;
        json_decref(head);
        if (t == NULL)
            return -ENOMEM;
        int r = put(o, t, strlen(t) - 2); /* without the closing "]}" */
        free(t);
        return r;
    }
    if (s->rank == j->world_size) {
        s->rank++;
        return put(o, "]}", 2);
    }
    if (s->rank > j->world_size)
        return 1;
    if (!s->hosts_valid || s->rank - s->hosts_base >= RANKS_PER_SCAN)
        scan_hosts(d, j, s);
    const struct sfd_rank *rk = sfd_job_rank_peek(j, s->rank);
    const char *host = s->hosts[s->rank - s->hosts_base];
    if (host == NULL && rk->host < j->n_hosts) /* the rank left: its last hello's */
        host = j->hosts[rk->host];
    if (s->rank > 0 && put(o, ",", 1) < 0)
        return -ENOMEM;
    json_t *item = json_pack("{s:I, s:b, s:I, s:s, s:s, s:I, s:I}", "rank", (json_int_t)s->rank,
                             "connected", rk->live, "pid", (json_int_t)rk->pid, "host",
                             host ? host : "", "role", j->roles[rk->role], "records",
                             (json_int_t)rk->records, "last_step", (json_int_t)rk->last_step);
    if (item != NULL) { /* what its hello said of where it runs: null when unknown */
        const char *gpu = rk->gpu > 0 && rk->gpu < j->n_hosts ? j->hosts[rk->gpu] : NULL;
        json_object_set_new(item, "local_rank",
                            rk->local_rank >= 0 ? json_integer(rk->local_rank) : json_null());
        json_object_set_new(item, "gpu", gpu ? json_string(gpu) : json_null());
        /* its parallel coordinates, as SF_PARALLEL spells them (docs/SFD.md) */
        const sf_parallel *par = sfd_job_parallel_of(j, s->rank);
        char text[SF_PARALLEL_TEXT_MAX + 32];
        if (par != NULL)
            sf_parallel_format(par, text, sizeof text);
        json_object_set_new(item, "parallel", par ? json_string(text) : json_null());
    }
    if (item != NULL) /* last seen (wall clock), position and state (liveness.c) */
        json_object_update_new(item, sfd_rank_liveness_json(j, s->rank));
    s->rank++;
    return put_json(o, item, false);
}

int sfd_qstream_fill(struct sfd *d, struct sfd_qstream *s, char **buf, size_t *len, size_t *cap,
                     size_t want, uint64_t deadline_ns, bool *ret_done, const char **ret_err)
{
    struct out o = {buf, len, cap};
    const struct sfd_job *j = live_job(d, s);
    *ret_done = false;
    if (j == NULL) {
        *ret_err = "the job ended or changed while its answer was being sent";
        return -ESTALE;
    }
    /* Hosts are pointers into connections that may have closed since. */
    s->hosts_valid = false;
    for (unsigned n = 1; *len < want; n++) {
        int r = s->kind == QS_RANKS    ? ranks_step(d, j, s, &o)
                : s->kind == QS_REPORT ? report_step(j, s, &o)
                                       : record_step(j, s, &o, ret_err);
        if (r < 0)
            return r;
        if (r == 1) {
            *ret_done = true;
            return 0;
        }
        if (deadline_ns != 0 && n % ITEMS_PER_CLOCK == 0 && uv_hrtime() >= deadline_ns)
            break;
    }
    return 0;
}

/*
 * sfd connection fairness: admission of accepted sockets (max_connections,
 * per-uid caps on ingest and query, query slots reserved for root and
 * operators_group) and the sweep that closes ingest connections that never
 * say hello and query connections that stop reading. Never reads a socket.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "sfd.h"

#define UID_BUCKETS 256

struct uid_conns {
    uid_t uid;
    uint32_t ingest, query;
    struct uid_conns *next;
};

struct sfd_uid_conns {
    struct uid_conns *bucket[UID_BUCKETS];
};

static struct uid_conns **slot_of(struct sfd *d, uid_t uid)
{
    struct uid_conns **p = &d->uid_conns->bucket[uid % UID_BUCKETS];
    while (*p != NULL && (*p)->uid != uid)
        p = &(*p)->next;
    return p;
}

static const struct uid_conns *find_uid(struct sfd *d, uid_t uid)
{
    return d->uid_conns == NULL ? NULL : *slot_of(d, uid);
}

int sfd_admit(struct sfd *d, bool query, int fd, uid_t uid, gid_t gid, bool *ret_privileged,
              enum sfd_reject *ret_why)
{
    const struct uid_conns *u = find_uid(d, uid);
    uint32_t mine = u == NULL ? 0 : query ? u->query : u->ingest;
    bool privileged = false;

    if (query) {
        privileged = sfd_query_is_operator(d, fd, uid, gid);
        /* Everyone else shares the slots below the reserve, so a flood of
         * idle clients never keeps root's `sfctl status` out. */
        uint32_t open = privileged ? SFD_MAX_QUERY_CONNS : SFD_MAX_QUERY_CONNS - SFD_QUERY_RESERVED;
        if (d->n_query_conns >= open) {
            *ret_why = SFD_REJ_MAX_CONNECTIONS;
            return -EMFILE;
        }
        if (!privileged && mine >= d->cfg.max_query_connections_per_uid) {
            *ret_why = SFD_REJ_UID_CONNECTIONS;
            return -EUSERS;
        }
    } else {
        if (d->n_conns - d->n_query_conns >= d->cfg.max_connections) {
            *ret_why = SFD_REJ_MAX_CONNECTIONS;
            return -EMFILE;
        }
        /* Root is trusted with every slot; any other uid gets its share. */
        if (uid != 0 && mine >= d->cfg.max_connections_per_uid) {
            *ret_why = SFD_REJ_UID_CONNECTIONS;
            return -EUSERS;
        }
    }
    *ret_privileged = privileged;
    return 0;
}

void sfd_admit_charge(struct sfd *d, const struct sfd_conn *c)
{
    if (d->uid_conns == NULL && (d->uid_conns = calloc(1, sizeof(*d->uid_conns))) == NULL)
        return; /* no accounting rather than no service */
    struct uid_conns **p = slot_of(d, c->uid);
    if (*p == NULL) {
        *p = calloc(1, sizeof(**p));
        if (*p == NULL)
            return;
        (*p)->uid = c->uid;
    }
    if (c->query)
        (*p)->query++;
    else
        (*p)->ingest++;
}

void sfd_admit_release(struct sfd *d, const struct sfd_conn *c)
{
    if (d->uid_conns == NULL)
        return;
    struct uid_conns **p = slot_of(d, c->uid);
    struct uid_conns *u = *p;
    if (u == NULL)
        return;
    uint32_t *n = c->query ? &u->query : &u->ingest;
    if (*n > 0)
        (*n)--;
    if (u->ingest == 0 && u->query == 0) {
        *p = u->next;
        free(u);
    }
}

void sfd_conn_limits_free(struct sfd *d)
{
    if (d->uid_conns == NULL)
        return;
    for (int i = 0; i < UID_BUCKETS; i++)
        while (d->uid_conns->bucket[i] != NULL) {
            struct uid_conns *u = d->uid_conns->bucket[i];
            d->uid_conns->bucket[i] = u->next;
            free(u);
        }
    free(d->uid_conns);
    d->uid_conns = NULL;
}

/* ---- timeouts --------------------------------------------------------------- */

static uint64_t sweep_interval_ms(const struct sfd_config *cfg)
{
    uint64_t t = cfg->hello_timeout_ms < cfg->query_idle_timeout_ms ? cfg->hello_timeout_ms
                                                                    : cfg->query_idle_timeout_ms;
    t /= 4; /* a connection outlives its timeout by at most a quarter */
    return t < 25 ? 25 : t > 1000 ? 1000 : t;
}

static bool timed_out(const struct sfd *d, const struct sfd_conn *c, uint64_t now,
                      enum sfd_reject *ret_why)
{
    if (c->query && now - c->last_io_ms >= d->cfg.query_idle_timeout_ms) {
        *ret_why = SFD_REJ_QUERY_TIMEOUT;
        return true;
    }
    if (!c->query && !c->hello && now - c->accepted_ms >= d->cfg.hello_timeout_ms) {
        *ret_why = SFD_REJ_HELLO_TIMEOUT;
        return true;
    }
    return false;
}

static void on_sweep(uv_timer_t *t)
{
    struct sfd *d = t->data;
    uint64_t now = sfd_now_ms(d);
    struct sfd_conn *next;
    for (struct sfd_conn *c = d->conns; c != NULL; c = next) {
        next = c->next; /* closing unlinks c only */
        enum sfd_reject why;
        if (!c->closing && timed_out(d, c, now, &why)) {
            sfd_count_reject_from(d, c->job, why, 1, c->pid, c->uid);
            sfd_conn_close(c);
        }
    }
    /* Re-read the interval: a reload may have changed the timeouts. */
    uv_timer_start(&d->conn_timer, on_sweep, sweep_interval_ms(&d->cfg), 0);
}

int sfd_conn_limits_start(struct sfd *d)
{
    int r = uv_timer_init(d->loop, &d->conn_timer);
    if (r < 0)
        return r;
    d->conn_timer.data = d;
    return uv_timer_start(&d->conn_timer, on_sweep, sweep_interval_ms(&d->cfg), 0);
}

void sfd_conn_limits_stop(struct sfd *d)
{
    if (d->conn_timer.loop != NULL && !uv_is_closing((uv_handle_t *)&d->conn_timer))
        uv_close((uv_handle_t *)&d->conn_timer, NULL);
}

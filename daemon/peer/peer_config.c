/*
 * Peer membership and timing from the config file: this node's id, the
 * static member list ("id@host:port,..."), the key file and the timings.
 * Parsing only; it must not open sockets or read the key.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

void sfd_peer_config_init(sfd_peer_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->heartbeat_ms = 200;
    cfg->failure_timeout_ms = 1000;
    cfg->fanout = 8;
    cfg->summary_deadline_ms = 3000;
    cfg->tree_hold_ms = 100;
    cfg->retained_max = 512;
    cfg->keep_windows = 16;
    cfg->auth_timeout_ms = 2000;
    cfg->preauth_max = 64;
    cfg->preauth_per_addr = 8;
}

void sfd_peer_config_clear(sfd_peer_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->members);
    sfd_peer_config_init(cfg);
}

static int set_path(char *dst, size_t size, const char *value)
{
    size_t n = strlen(value);
    if (n == 0 || n >= size)
        return -EINVAL;
    memcpy(dst, value, n + 1);
    return 0;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *ret)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi)
        return -EINVAL;
    *ret = (uint32_t)v;
    return 0;
}

/* "host:port" or "[v6]:port" into a member entry. */
static int parse_hostport(const char *s, char *host, size_t host_size, uint16_t *port)
{
    const char *colon;
    const char *h = s;
    size_t hlen;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':')
            return -EINVAL;
        h = s + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return -EINVAL;
        hlen = (size_t)(colon - s);
    }
    if (hlen == 0 || hlen >= host_size)
        return -EINVAL;
    uint32_t p;
    if (parse_u32(colon + 1, 1, 65535, &p) < 0)
        return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)p;
    return 0;
}

static int cmp_member(const void *a, const void *b)
{
    uint32_t x = ((const sfd_peer_member *)a)->id, y = ((const sfd_peer_member *)b)->id;
    return (x > y) - (x < y);
}

static int parse_one(char *tok, sfd_peer_member *m)
{
    while (*tok == ' ' || *tok == '\t')
        tok++;
    size_t n = strlen(tok);
    while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t'))
        tok[--n] = '\0';
    char *at = strchr(tok, '@');
    if (at == NULL)
        return -EINVAL;
    *at = '\0';
    if (parse_u32(tok, 1, SFD_PEER_ID_MAX, &m->id) < 0)
        return -EINVAL;
    return parse_hostport(at + 1, m->host, sizeof m->host, &m->port);
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 1;
    while (p < n)
        p *= 2;
    return p;
}

/* Adds one line of members: `peers` may span several lines (inih's
 * indented continuation lines, or the key repeated), since a config line is
 * short and a cluster may have SFD_PEER_MAX_MEMBERS members. Lines in id
 * order append in linear time; others sort the whole list again. */
static int parse_peers(sfd_peer_config *cfg, const char *value)
{
    size_t cap = cfg->n_members + 1;
    for (const char *p = value; *p; p++)
        cap += *p == ',';
    if (cap > SFD_PEER_MAX_MEMBERS)
        return -EINVAL;
    sfd_peer_member *m = calloc(cap - cfg->n_members, sizeof *m);
    char *copy = strdup(value);
    int r = -ENOMEM;
    uint32_t n = 0;
    if (m == NULL || copy == NULL)
        goto out;
    r = -EINVAL;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (parse_one(tok, &m[n]) < 0)
            goto out;
        n++;
    }
    if (n == 0)
        goto out;
    qsort(m, n, sizeof *m, cmp_member);
    for (uint32_t i = 1; i < n; i++)
        if (m[i].id == m[i - 1].id)
            goto out;
    uint32_t old = cfg->n_members;
    for (uint32_t i = 0; i < n; i++)
        if (old > 0 && bsearch(&m[i], cfg->members, old, sizeof *m, cmp_member) != NULL)
            goto out;
    /* Room in powers of two, so a long list of lines costs linear time. */
    sfd_peer_member *all = cfg->members;
    if (old == 0 || old + n > pow2_at_least(old)) {
        all = realloc(cfg->members, pow2_at_least(old + n) * sizeof *all);
        r = -ENOMEM;
        if (all == NULL)
            goto out;
        cfg->members = all;
    }
    memcpy(all + old, m, n * sizeof *m);
    if (old > 0 && all[old - 1].id > all[old].id)
        qsort(all, old + n, sizeof *all, cmp_member);
    cfg->n_members = old + n;
    r = 0;
out:
    free(m);
    free(copy);
    return r;
}

int sfd_peer_config_set(sfd_peer_config *cfg, const char *key, const char *value)
{
    if (cfg == NULL || key == NULL || value == NULL)
        return -EINVAL;
    if (strcmp(key, "node_id") == 0)
        return parse_u32(value, 1, SFD_PEER_ID_MAX, &cfg->node_id);
    if (strcmp(key, "peers") == 0)
        return parse_peers(cfg, value);
    if (strcmp(key, "cluster_key_file") == 0)
        return set_path(cfg->key_file, sizeof cfg->key_file, value);
    if (strcmp(key, "member_key_file") == 0)
        return set_path(cfg->member_key_file, sizeof cfg->member_key_file, value);
    if (strcmp(key, "member_pub_dir") == 0)
        return set_path(cfg->member_pub_dir, sizeof cfg->member_pub_dir, value);
    if (strcmp(key, "peer_auth_timeout_ms") == 0)
        return parse_u32(value, 50, 600000, &cfg->auth_timeout_ms);
    if (strcmp(key, "peer_preauth_max") == 0)
        return parse_u32(value, 1, 65536, &cfg->preauth_max);
    if (strcmp(key, "peer_preauth_per_addr") == 0)
        return parse_u32(value, 1, 65536, &cfg->preauth_per_addr);
    if (strcmp(key, "listen") == 0)
        return parse_hostport(value, cfg->listen_host, sizeof cfg->listen_host, &cfg->listen_port);
    if (strcmp(key, "heartbeat_ms") == 0)
        return parse_u32(value, 10, 60000, &cfg->heartbeat_ms);
    if (strcmp(key, "failure_timeout_ms") == 0)
        return parse_u32(value, 20, 600000, &cfg->failure_timeout_ms);
    if (strcmp(key, "fanout") == 0)
        return parse_u32(value, 1, SFD_PEER_MAX_MEMBERS, &cfg->fanout);
    if (strcmp(key, "summary_deadline_ms") == 0)
        return parse_u32(value, 10, 3600000, &cfg->summary_deadline_ms);
    if (strcmp(key, "tree_hold_ms") == 0)
        return parse_u32(value, 0, 60000, &cfg->tree_hold_ms);
    if (strcmp(key, "retained_max") == 0)
        return parse_u32(value, 1, 1u << 20, &cfg->retained_max);
    return -ENOENT;
}

int sfd_peer_config_state_dir(sfd_peer_config *cfg, const char *dir)
{
    if (cfg == NULL || dir == NULL)
        return -EINVAL;
    return set_path(cfg->state_dir, sizeof cfg->state_dir, dir);
}

int sfd_peer_config_index(const sfd_peer_config *cfg, uint32_t id)
{
    for (uint32_t i = 0; i < cfg->n_members; i++)
        if (cfg->members[i].id == id)
            return (int)i;
    return -ENOENT;
}

int sfd_peer_config_validate(const sfd_peer_config *cfg)
{
    bool member_keys = cfg->member_key_file[0] != '\0' || cfg->member_pub_dir[0] != '\0';
    if (cfg->node_id == 0 || cfg->n_members == 0)
        return -EINVAL;
    /* One scheme or the other: the cluster key, or every member's own key. */
    if (member_keys ? cfg->member_key_file[0] == '\0' || cfg->member_pub_dir[0] == '\0' ||
                          cfg->key_file[0] != '\0'
                    : cfg->key_file[0] == '\0')
        return -EINVAL;
    if (sfd_peer_config_index(cfg, cfg->node_id) < 0)
        return -EINVAL;
    if (cfg->failure_timeout_ms < 2 * cfg->heartbeat_ms)
        return -EINVAL;
    return 0;
}

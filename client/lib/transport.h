/*
 * Internal transport of libsfclient: one non-blocking SOCK_SEQPACKET
 * connection to sfd's ingest socket, reconnect backoff judged against a clock
 * the caller already read, and the Hello sent on every (re)connect. Shared by
 * the step-record channel (0) and the NCCL profiler plugin's channel (1).
 * It never sleeps, never blocks and never raises SIGPIPE; it does not log.
 */
#ifndef SF_CLIENT_TRANSPORT_H
#define SF_CLIENT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ingest.pb-c.h"
#include "stagefrontier/parallel.h"

#define SF__CHANNEL_STEPS 0u
#define SF__CHANNEL_NCCL 1u
#define SF__CHANNEL_HEARTBEAT 2u

#define SF__BACKOFF_MIN_NS (10 * INT64_C(1000000))   /* 10 ms */
#define SF__BACKOFF_MAX_NS (2000 * INT64_C(1000000)) /* 2 s */
/* Largest datagram either channel builds; far below the default socket buffer. */
#define SF__MAX_DATAGRAM (64 * 1024)

/* What a Hello says about this process. Strings are borrowed. */
struct sf__hello_info {
    const char *job_id;
    uint32_t rank, world_size;
    int32_t local_rank; /* -1: not known, not sent */
    const char *host;
    const char *gpu; /* NULL or "": not sent */
    uint32_t pid;
    size_t n_stages;
    char **stage_names;
    char **stage_groups;         /* NULL: no groups sent */
    const uint32_t *sync_stages; /* synchronizing stage ids, ascending */
    size_t n_sync_stages;
    const uint32_t *sync_groups; /* [n_sync_stages] their groups, or NULL: not sent */
    uint64_t schema_hash;
    uint32_t schema_version;
    uint32_t accumulation;
    const char *role;               /* NULL or "": not sent */
    uint32_t channel;               /* SF__CHANNEL_* */
    int window_steps, warmup_steps; /* -1: not sent (the daemon's) */
    const char *run_id;             /* NULL or "": not sent */
    uint32_t restart_count;
    const sf_parallel *parallel; /* NULL: no coordinates sent */
};

typedef struct sf__transport {
    int fd; /* -1 while disconnected */
    char path[108];
    const struct sf__hello_info *hello;
    uint8_t *hello_buf;      /* owner-provided, SF__MAX_DATAGRAM bytes */
    int64_t next_attempt_ns; /* no connect before this clock value */
    int64_t backoff_ns;
    bool have_last_sent_step;
    int64_t last_sent_step; /* carried in the Hello after a reconnect */
    uint64_t connects, reconnects, send_syscalls;
} sf__transport;

/* path must fit sun_path (-ENAMETOOLONG); hello and hello_buf are borrowed
 * and must outlive the transport. No syscall. */
int sf__transport_init(sf__transport *t, const char *path, const struct sf__hello_info *hello,
                       uint8_t *hello_buf);
/* Connects and sends the Hello unless connected already (0) or the backoff
 * has not expired (-EAGAIN). On failure the backoff doubles; returns -errno. */
int sf__transport_connect(sf__transport *t, int64_t now_ns);
/* One sendmsg(MSG_DONTWAIT | MSG_NOSIGNAL). 0: sent; -EAGAIN: socket full,
 * keep the data; -ENOTCONN/-EPIPE/...: the connection is gone (closed here,
 * backoff armed from now_ns), the data is lost. */
int sf__transport_send(sf__transport *t, const void *buf, size_t len, int64_t now_ns);
/* Packs m into buf (cap bytes) and sends it. -EMSGSIZE if it does not fit. */
int sf__transport_send_message(sf__transport *t, const Stagefrontier__ClientMessage *m,
                               uint8_t *buf, size_t cap, int64_t now_ns);
bool sf__transport_connected(const sf__transport *t);
/* Closes the socket; a later connect starts a new generation. */
void sf__transport_close(sf__transport *t);
/* Packs a Hello for generation gen into buf; returns its length or -EMSGSIZE. */
int sf__hello_pack(const struct sf__hello_info *info, uint32_t generation, bool have_last_sent_step,
                   int64_t last_sent_step, uint8_t *buf, size_t cap);
/* CLOCK_MONOTONIC in ns (vDSO, no syscall). */
int64_t sf__now_ns(void);

#endif

/*
 * Fuzz target: sequences of ingest datagrams from several connections driven
 * through sfd's real handlers (hello binding, batches, window assembly,
 * deadlines, closes) on socketpair-backed connections. Input: records of
 * [conn byte][len u16 le][datagram]; conn byte bit 7 closes that connection,
 * 0xFF runs every deadline. State is reset after each input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_CONNS 4

static struct sfd d;
static uv_loop_t loop;

static void setup(void)
{
    uv_loop_init(&loop);
    loop.data = &d;
    d.loop = &loop;
    sfd_config_default(&d.cfg);
    d.cfg.gates.warmup_steps = 1;
    d.cfg.gates.window_steps = 3;
    d.cfg.max_pending_steps = 64;
    d.cfg.max_jobs = 2;
    d.cfg.keep_windows = 2;
    sfd_log_init(SFD_LOG_ERR - 1); /* silent */
    sfd_timers_init(&d);
    sfd_ensure_rxbuf(&d);
    sfd_ingest_init(&d);
}

static struct sfd_conn *open_conn(int i, int *peer)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return NULL;
    struct sfd_conn *c = calloc(1, sizeof(*c));
    if (c == NULL || uv_poll_init(&loop, &c->poll, sv[0]) < 0) {
        free(c);
        close(sv[0]);
        close(sv[1]);
        return NULL;
    }
    c->sfd = &d;
    c->fd = sv[0];
    c->uid = (uid_t)(i & 1) * 1000; /* two owners */
    c->pid = 100 + i;
    c->poll.data = c;
    c->next = d.conns;
    if (d.conns)
        d.conns->prev = c;
    d.conns = c;
    d.n_conns++;
    *peer = sv[1];
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    struct sfd_conn *conns[N_CONNS] = {0};
    int peers[N_CONNS] = {-1, -1, -1, -1};
    if (!ready) {
        setup();
        ready = 1;
    }
    size_t off = 0;
    while (off + 3 <= size) {
        uint8_t tag = data[off];
        size_t len = data[off + 1] | (size_t)data[off + 2] << 8;
        off += 3;
        if (len > size - off)
            len = size - off;
        int i = tag & (N_CONNS - 1);
        if (tag == 0xFF) {
            sfd_windows_tick(&d, UINT64_MAX / 2);
        } else if (tag & 0x80) {
            sfd_conn_close(conns[i]);
            conns[i] = NULL;
        } else {
            if (conns[i] == NULL)
                conns[i] = open_conn(i, &peers[i]);
            if (conns[i] != NULL && sfd_ingest_handle(conns[i], data + off, len) < 0) {
                sfd_conn_close(conns[i]);
                conns[i] = NULL;
            }
        }
        off += len;
    }
    sfd_conns_close_all(&d);
    for (int i = 0; i < N_CONNS; i++)
        if (peers[i] >= 0)
            close(peers[i]);
    sfd_windows_tick(&d, UINT64_MAX / 2);
    uv_run(&loop, UV_RUN_NOWAIT);
    sfd_jobs_free_all(&d);
    return 0;
}

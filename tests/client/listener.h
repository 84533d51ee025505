/*
 * Test-owned stand-in for sfd's ingest socket: a SOCK_SEQPACKET listener in
 * a private temporary directory that accepts one client and decodes its
 * datagrams. Waits are poll()s on the socket with an overall timeout.
 */
#ifndef SF_TEST_LISTENER_H
#define SF_TEST_LISTENER_H

#include "ingest.pb-c.h"

struct tl {
    char dir[64];
    char path[108];
    int lfd, cfd;
};

int tl_start(struct tl *l);  /* 0 or -errno */
int tl_listen(struct tl *l); /* (re)binds l->path */
int tl_accept(struct tl *l, int timeout_ms);
/* Next datagram, decoded; NULL on timeout or end of stream. Free with
 * stagefrontier__client_message__free_unpacked(m, NULL). */
Stagefrontier__ClientMessage *tl_recv(struct tl *l, int timeout_ms);
void tl_close_conn(struct tl *l);
void tl_close_listener(struct tl *l); /* closes and unlinks */
void tl_stop(struct tl *l);           /* closes everything, removes the directory */

#endif

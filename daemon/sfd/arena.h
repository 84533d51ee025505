/*
 * The decode arena: protobuf-c's allocator over one reusable buffer, so a
 * decoded client message costs no malloc/free per field. It owns only
 * memory; it knows nothing of messages or connections.
 */
#ifndef SFD_ARENA_H
#define SFD_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* The most an arena keeps between messages; a larger message is served by
 * one-off allocations freed at the next reset. */
#define SFD_ARENA_KEEP_MAX (4u << 20)

struct sfd_arena_spill;

struct sfd_arena {
    ProtobufCAllocator pb; /* hand &pb to protobuf-c; its free is a no-op */
    uint8_t *base;
    size_t cap, used;
    size_t wanted;                 /* bytes the current message asked for */
    struct sfd_arena_spill *spill; /* allocations past cap, until the reset */
    uint64_t spills;               /* messages that did not fit (for the tests) */
};

void sfd_arena_init(struct sfd_arena *a);
/* Forgets every allocation (the message decoded in it is gone) and keeps
 * the buffer, grown to what the last message needed, up to SFD_ARENA_KEEP_MAX. */
void sfd_arena_reset(struct sfd_arena *a);
/* Frees the buffer; a reset arena is empty again. Accepts NULL. */
void sfd_arena_free(struct sfd_arena *a);

#endif

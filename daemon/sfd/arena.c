/*
 * The decode arena (arena.h): bump allocation over one buffer, reset after
 * each message. Under AddressSanitizer the free part of the buffer and a
 * red zone after each allocation are poisoned, so a read past a field or a
 * use after the reset is reported as it would be with malloc.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#if defined(__SANITIZE_ADDRESS__)
#define SFD_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SFD_ARENA_ASAN 1
#endif
#endif

#ifdef SFD_ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define REDZONE 16
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define REDZONE 0
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN 16

struct sfd_arena_spill {
    struct sfd_arena_spill *next;
    max_align_t payload[];
};

static void *spill_alloc(struct sfd_arena *a, size_t size)
{
    struct sfd_arena_spill *s = malloc(sizeof(*s) + size);
    if (s == NULL)
        return NULL;
    s->next = a->spill;
    a->spill = s;
    return s->payload;
}

static void *arena_alloc(void *data, size_t size)
{
    struct sfd_arena *a = data;
    size_t at = (a->used + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    a->wanted += size + REDZONE + ALIGN;
    if (at > a->cap || size + REDZONE > a->cap - at)
        return spill_alloc(a, size ? size : 1);
    a->used = at + size + REDZONE;
    UNPOISON(a->base + at, size);
    return a->base + at;
}

/* Memory goes back all at once, at the reset. */
static void arena_free(void *data, void *p)
{
    (void)data;
    (void)p;
}

void sfd_arena_init(struct sfd_arena *a)
{
    memset(a, 0, sizeof(*a));
    a->pb.alloc = arena_alloc;
    a->pb.free = arena_free;
    a->pb.allocator_data = a;
}

void sfd_arena_reset(struct sfd_arena *a)
{
    bool spilled = a->spill != NULL;
    while (a->spill != NULL) {
        struct sfd_arena_spill *s = a->spill;
        a->spill = s->next;
        free(s);
    }
    a->spills += spilled;
    size_t want = a->wanted < SFD_ARENA_KEEP_MAX ? a->wanted : SFD_ARENA_KEEP_MAX;
    if (spilled && want > a->cap) {
        /* grow to what the last message needed; keep the old buffer if the
         * new one cannot be had (the next message spills again) */
        uint8_t *b = malloc(want);
        if (b != NULL) {
            UNPOISON(a->base, a->cap);
            free(a->base);
            a->base = b;
            a->cap = want;
        }
    }
    POISON(a->base, a->cap);
    a->used = 0;
    a->wanted = 0;
}

void sfd_arena_free(struct sfd_arena *a)
{
    if (a == NULL)
        return;
    sfd_arena_reset(a);
    UNPOISON(a->base, a->cap);
    free(a->base);
    a->base = NULL;
    a->cap = 0;
}

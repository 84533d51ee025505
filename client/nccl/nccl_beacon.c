/*
 * Finding and reading libsfclient's side-evidence beacon from inside the NCCL
 * plugin. libsfclient may live in an object loaded RTLD_LOCAL (a Python
 * extension), so the lookup asks every loaded object by its own handle. It
 * never loads anything and never writes to the beacon.
 */
#define _GNU_SOURCE
#include "nccl_beacon.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#define FALLBACK_STAGE "model.backward_cpu_wall"

static _Atomic(struct sf_side_beacon *) beacon;

struct search {
    struct sf_side_beacon *found;
    const void *self_base;
};

/* Runs under the loader's iteration lock. dlopen(RTLD_NOLOAD) of an object
 * that is already mapped only takes a reference, which glibc allows here. */
static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct search *bs = arg;
    struct sf_side_beacon *b;
    Dl_info di;
    void *h;
    (void)size;
    if ((const void *)info->dlpi_addr == bs->self_base)
        return 0; /* our own copy of libsfclient's objects is never published */
    h = dlopen(info->dlpi_name && *info->dlpi_name ? info->dlpi_name : NULL,
               RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    b = dlsym(h, "sf_side_beacon");
    if (b && b->magic == SF_SIDE_BEACON_MAGIC && b->version == SF_SIDE_BEACON_VERSION &&
        dladdr(b, &di) && di.dli_fbase != bs->self_base) {
        bs->found = b;
        return 1; /* keep h: the beacon must stay mapped */
    }
    dlclose(h);
    return 0;
}

void sf__nccl_beacon_lookup(void)
{
    struct search bs = {NULL, NULL};
    Dl_info di;
    if (atomic_load(&beacon))
        return;
    if (dladdr((void *)sf__nccl_beacon_lookup, &di))
        bs.self_base = di.dli_fbase;
    dl_iterate_phdr(visit, &bs);
    if (bs.found)
        atomic_store(&beacon, bs.found);
}

struct sf_side_beacon *sf__nccl_beacon(void)
{
    return atomic_load_explicit(&beacon, memory_order_acquire);
}

int32_t sf__nccl_current_stage(void)
{
    struct sf_side_beacon *b = sf__nccl_beacon();
    return b ? atomic_load_explicit(&b->stage, memory_order_relaxed) : -1;
}

/* The stage id is stored with release after its start time: loading it with
 * acquire, then the start, then the id again, gives a start that belongs to
 * the id whenever both loads agree. */
bool sf__nccl_current_sync_point(int32_t *ret_stage, int64_t now_ns, int64_t *ret_offset)
{
    struct sf_side_beacon *b = sf__nccl_beacon();
    int32_t stage;
    int64_t start;

    *ret_stage = -1;
    if (!b)
        return false;
    stage = atomic_load_explicit(&b->stage, memory_order_acquire);
    *ret_stage = stage;
    if (stage < 0 || stage >= SF_MAX_STAGES ||
        !atomic_load_explicit(&b->n_names, memory_order_acquire) || !(b->sync_mask >> stage & 1))
        return false;
    start = atomic_load_explicit(&b->stage_start_ns, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&b->stage, memory_order_relaxed) != stage || start <= 0 ||
        now_ns < start)
        return false;
    *ret_offset = now_ns - start;
    return true;
}

int64_t sf__nccl_beacon_step(void)
{
    struct sf_side_beacon *b = sf__nccl_beacon();
    int64_t s;
    if (!b)
        return -1;
    s = atomic_load_explicit(&b->step, memory_order_relaxed);
    return s < 0 ? 0 : s;
}

/* Data-parallel gradient reduction is issued during backward, which is why an
 * all-reduce outside any known stage defaults there; other collectives have
 * no such convention and stay unattributed. */
const char *sf__nccl_stage_name(int32_t stage, const char *collective)
{
    struct sf_side_beacon *b = sf__nccl_beacon();
    if (b && stage >= 0 &&
        (uint32_t)stage < atomic_load_explicit(&b->n_names, memory_order_acquire))
        return b->names[stage];
    return strcmp(collective, "AllReduce") == 0 ? FALLBACK_STAGE : "";
}

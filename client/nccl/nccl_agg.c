/*
 * Aggregation core of the NCCL profiler plugin: fixed pools, atomics only, on
 * NCCL's threads. It must never block, lock or allocate: a full pool drops the
 * event and counts it. A Coll's stop means "enqueued", so nothing here treats
 * it as completion; GPU time comes only from kernel-channel timestamps.
 */
#include "nccl_agg.h"

#include <errno.h>
#include <string.h>
#include "stagefrontier/limits.h"
#include "strutil.h"

/* One field into the key hash, with a separator after it. */
static uint64_t hash_field(uint64_t h, const char *s)
{
    return sf_fnv1a(h, s, s ? strlen(s) : 0) * SF_FNV1A_PRIME;
}

void sf__nccl_agg_init(struct sf_nccl_agg *agg)
{
    memset(agg, 0, sizeof *agg);
    agg->group_tag = (struct sf_nccl_tag){SF_NCCL_H_GROUP, agg};
    agg->proxy_tag = (struct sf_nccl_tag){SF_NCCL_H_PROXY_OP, agg};
    for (size_t i = 0; i < SF_NCCL_COLL_RING; i++) {
        agg->colls[i].kind = SF_NCCL_H_COLL;
        agg->colls[i].agg = agg;
        agg->colls[i].key = UINT32_MAX;
    }
    for (size_t i = 0; i < SF_NCCL_CHILD_POOL; i++)
        agg->kchs[i].kind = SF_NCCL_H_KERNEL_CH;
}

unsigned sf__nccl_type_size(const char *dt)
{
    static const struct {
        const char *name;
        unsigned size;
    } sizes[] = {
        {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
        {"ncclFloat16", 2}, {"ncclBfloat16", 2}, {"ncclInt32", 4},      {"ncclUint32", 4},
        {"ncclFloat32", 4}, {"ncclInt64", 8},    {"ncclUint64", 8},     {"ncclFloat64", 8},
    };
    if (!dt)
        return 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(dt, sizes[i].name) == 0)
            return sizes[i].size;
    return 0;
}

uint32_t sf__nccl_size_bucket(uint64_t bytes)
{
    return bytes <= 1 ? 0 : 63u - (uint32_t)__builtin_clzll(bytes);
}

static void copy_name(char dst[SF_NCCL_NAME_LEN + 1], const char *src)
{
    size_t n = src ? strnlen(src, SF_NCCL_NAME_LEN) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

/* Open addressing with a CAS on the hash: the winner writes the strings and
 * publishes them; a loser that finds its hash already claimed counts into the
 * slot at once (the flusher only reads published slots, and counters never
 * reset, so nothing is lost). A full table drops. 64-bit FNV over the key
 * makes a collision between real keys negligible. */
static uint32_t key_find(struct sf_nccl_agg *agg, const struct sf_nccl_coll_info *ci,
                         uint32_t bucket)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    h = hash_field(h, ci->func);
    h = hash_field(h, ci->datatype);
    h = hash_field(h, ci->algo);
    h = hash_field(h, ci->proto);
    h = (h ^ bucket) * UINT64_C(0x100000001b3);
    h = (h ^ (uint32_t)ci->stage) * UINT64_C(0x100000001b3);
    h = (h ^ (uint64_t)(ci->step & 1)) * UINT64_C(0x100000001b3);
    if (h == 0)
        h = 1;
    for (uint32_t i = 0; i < SF_NCCL_MAX_KEYS; i++) {
        uint32_t idx = (uint32_t)(h + i) % SF_NCCL_MAX_KEYS;
        struct sf_nccl_key *k = &agg->keys[idx];
        uint64_t cur = atomic_load_explicit(&k->hash, memory_order_acquire);
        if (cur == h)
            return idx;
        if (cur != 0)
            continue;
        if (atomic_compare_exchange_strong_explicit(&k->hash, &cur, h, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            copy_name(k->collective, ci->func);
            copy_name(k->datatype, ci->datatype);
            copy_name(k->algorithm, ci->algo);
            copy_name(k->protocol, ci->proto);
            k->size_bucket = bucket;
            k->stage = ci->stage;
            k->epoch = (uint32_t)(ci->step & 1);
            atomic_store_explicit(&k->published, 1, memory_order_release);
            return idx;
        }
        if (cur == h)
            return idx;
    }
    return UINT32_MAX;
}

static void fetch_max_i64(_Atomic int64_t *a, int64_t v)
{
    int64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed))
        ;
}

/* A ring slot is busy only while a kernel channel of its collective is in
 * flight; a collective that never got (all) its channels is reclaimed when
 * the ring wraps, and its timing counted as lost. */
static struct sf_nccl_coll *coll_claim(struct sf_nccl_agg *agg)
{
    for (uint32_t probe = 0; probe < SF_NCCL_PROBES; probe++) {
        uint64_t n = atomic_fetch_add_explicit(&agg->coll_next, 1, memory_order_relaxed);
        struct sf_nccl_coll *c = &agg->colls[n % SF_NCCL_COLL_RING];
        uint32_t expect = 0;
        /* ch_pending doubles as the claim: UINT32_MAX marks "being set up". */
        if (!atomic_compare_exchange_strong_explicit(&c->ch_pending, &expect, UINT32_MAX,
                                                     memory_order_acq_rel, memory_order_relaxed))
            continue;
        if (c->key != UINT32_MAX &&
            atomic_load_explicit(&c->ch_done, memory_order_relaxed) < c->n_channels)
            atomic_fetch_add_explicit(&agg->timing_lost, 1, memory_order_relaxed);
        return c;
    }
    return NULL;
}

uint32_t sf__nccl_enq_slot(int64_t step, int32_t stage)
{
    return (uint32_t)(((uint64_t)step * SF_NCCL_ENQ_STAGES + (uint32_t)stage % SF_NCCL_ENQ_STAGES) %
                      SF_NCCL_ENQ_RING);
}

uint64_t sf__nccl_enq_tag(int64_t step, int32_t stage)
{
    return ((uint64_t)step << 7 | (uint32_t)stage) + 1;
}

/* Collectives of one stage are enqueued in order, so the latest store is the
 * last collective. A slot still holding an older step is simply taken over:
 * the flusher ships every step change within milliseconds, and a point it
 * never saw only leaves that row without an arrival. A writer claims the slot
 * by moving seq from even to odd; one that finds another writer inside (two
 * threads enqueuing on one communicator at the same instant) leaves the slot
 * to it rather than wait or interleave its stores: both points are of the
 * same stage at the same moment, and two writers in one slot would let the
 * flusher read one's tag with the other's offset. Returns the even seq it
 * left, which names this write, or 0 when it left the slot alone. */
static uint32_t enq_record(struct sf_nccl_agg *agg, int64_t step, int32_t stage, int64_t offset,
                           int64_t base)
{
    struct sf_nccl_enq *e = &agg->enq[sf__nccl_enq_slot(step, stage)];
    uint32_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
    if ((seq & 1) || !atomic_compare_exchange_strong_explicit(
                         &e->seq, &seq, seq + 1, memory_order_acq_rel, memory_order_relaxed))
        return 0;
    atomic_store_explicit(&e->offset_ns, offset, memory_order_relaxed);
    atomic_store_explicit(&e->base_ns, base, memory_order_relaxed);
    atomic_store_explicit(&e->gpu_start, 0, memory_order_relaxed);
    atomic_store_explicit(&e->gpu_end, 0, memory_order_relaxed);
    atomic_store_explicit(&e->tag, sf__nccl_enq_tag(step, stage), memory_order_relaxed);
    uint32_t done = seq + 2 ? seq + 2 : 2; /* never 0: 0 means "not written" */
    atomic_store_explicit(&e->seq, done, memory_order_release);
    return done;
}

/* A collective's kernel times into the point it wrote, only while that
 * write is still the slot's latest (seq unchanged): a later collective of
 * the same (step, stage) has moved the slot, and its own kernel will fill
 * it. Claimed like a write, so the flusher never reads half of it. A later
 * collective enqueued in the same instant finds the slot claimed and leaves
 * it (enq_record): the point then stays this collective's enqueue with its
 * own kernel, a consistent pair, one collective short of the last. */
static void enq_kernel(struct sf_nccl_agg *agg, uint32_t slot, uint32_t seq, uint64_t lo,
                       uint64_t hi)
{
    struct sf_nccl_enq *e = &agg->enq[slot];
    uint32_t cur = seq;
    if (!atomic_compare_exchange_strong_explicit(&e->seq, &cur, seq + 1, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return;
    atomic_store_explicit(&e->gpu_start, lo, memory_order_relaxed);
    atomic_store_explicit(&e->gpu_end, hi, memory_order_relaxed);
    atomic_store_explicit(&e->seq, seq + 2 ? seq + 2 : 2, memory_order_release);
}

int sf__nccl_enq_read_point(const struct sf_nccl_enq *e, struct sf_nccl_enq_point *ret)
{
    uint32_t s0 = atomic_load_explicit(&e->seq, memory_order_acquire);
    struct sf_nccl_enq_point p = {
        .tag = atomic_load_explicit(&e->tag, memory_order_relaxed),
        .offset_ns = atomic_load_explicit(&e->offset_ns, memory_order_relaxed),
        .base_ns = atomic_load_explicit(&e->base_ns, memory_order_relaxed),
        .gpu_start = atomic_load_explicit(&e->gpu_start, memory_order_relaxed),
        .gpu_end = atomic_load_explicit(&e->gpu_end, memory_order_relaxed),
    };
    atomic_thread_fence(memory_order_acquire);
    if ((s0 & 1) || atomic_load_explicit(&e->seq, memory_order_relaxed) != s0)
        return -EAGAIN;
    *ret = p;
    return 0;
}

int sf__nccl_enq_read(const struct sf_nccl_enq *e, uint64_t *ret_tag, int64_t *ret_offset)
{
    struct sf_nccl_enq_point p;
    int r = sf__nccl_enq_read_point(e, &p);
    if (r == 0) {
        *ret_tag = p.tag;
        *ret_offset = p.offset_ns;
    }
    return r;
}

bool sf__nccl_kernel_span(const struct sf_nccl_enq_point *p, int64_t realtime_minus_mono,
                          int64_t now_mono, struct sf_nccl_kernel_span *ret)
{
    int64_t start, end, s_off, e_off;
    if (p->gpu_start == 0 || p->gpu_end < p->gpu_start || p->gpu_end > (uint64_t)INT64_MAX)
        return false;
    if (__builtin_sub_overflow((int64_t)p->gpu_start, realtime_minus_mono, &start) ||
        __builtin_add_overflow(start, (int64_t)(p->gpu_end - p->gpu_start), &end) ||
        __builtin_sub_overflow(start, p->base_ns, &s_off) ||
        __builtin_sub_overflow(end, p->base_ns, &e_off))
        return false;
    if (start > now_mono + SF_NCCL_KERNEL_SLACK_NS ||
        s_off < p->offset_ns - SF_NCCL_KERNEL_SLACK_NS || e_off > SF_MAX_DURATION_NS)
        return false;
    if (s_off < p->offset_ns)
        s_off = p->offset_ns; /* within the clocks' slack: started at once */
    if (e_off < s_off)
        e_off = s_off;
    *ret = (struct sf_nccl_kernel_span){s_off, e_off};
    return true;
}

struct sf_nccl_coll *sf__nccl_coll_start(struct sf_nccl_agg *agg,
                                         const struct sf_nccl_coll_info *ci)
{
    uint64_t bytes = ci->count * (uint64_t)sf__nccl_type_size(ci->datatype);
    uint32_t bucket = sf__nccl_size_bucket(bytes);
    uint32_t key = key_find(agg, ci, bucket);
    struct sf_nccl_coll *c;
    uint32_t enq_seq = 0, enq_slot = 0;

    if (ci->enqueue_point && ci->enqueue_offset_ns >= 0 && ci->stage >= 0 && ci->stage < 64) {
        enq_slot = sf__nccl_enq_slot(ci->step, ci->stage);
        enq_seq = enq_record(agg, ci->step, ci->stage, ci->enqueue_offset_ns,
                             ci->enqueue_now_ns - ci->enqueue_offset_ns);
    }
    if (key == UINT32_MAX) {
        atomic_fetch_add_explicit(&agg->dropped, 1, memory_order_relaxed);
        return NULL;
    }
    fetch_max_i64(&agg->keys[key].last_step, ci->step);
    atomic_fetch_add_explicit(&agg->keys[key].count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&agg->keys[key].bytes, bytes, memory_order_relaxed);
    c = coll_claim(agg);
    if (!c) {
        atomic_fetch_add_explicit(&agg->dropped, 1, memory_order_relaxed);
        return NULL;
    }
    c->key = key;
    c->enq_slot = enq_slot;
    c->enq_seq = enq_seq;
    c->n_channels = ci->n_channels ? ci->n_channels : 1;
    atomic_store_explicit(&c->ch_done, 0, memory_order_relaxed);
    atomic_store_explicit(&c->t_min, UINT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&c->t_max, 0, memory_order_relaxed);
    atomic_store_explicit(&c->ch_pending, 0, memory_order_release);
    return c;
}

bool sf__nccl_is_coll(const struct sf_nccl_agg *agg, const void *p)
{
    const char *lo = (const char *)agg->colls, *hi = (const char *)(agg->colls + SF_NCCL_COLL_RING);
    const char *q = p;
    return q >= lo && q < hi && (size_t)(q - lo) % sizeof agg->colls[0] == 0;
}

/* Takes a reference on a collective's slot, unless the slot is being set up
 * for a newer collective (a very late channel of an old one): then no. */
static bool coll_ref(struct sf_nccl_coll *c)
{
    uint32_t v = atomic_load_explicit(&c->ch_pending, memory_order_acquire);
    do {
        if (v == UINT32_MAX)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&c->ch_pending, &v, v + 1, memory_order_acq_rel,
                                                    memory_order_acquire));
    return true;
}

struct sf_nccl_kch *sf__nccl_kch_start(struct sf_nccl_agg *agg, void *parent, uint64_t gpu_start)
{
    if (!parent || !sf__nccl_is_coll(agg, parent))
        return NULL; /* a Coll we had to drop, or not one of ours */
    for (uint32_t probe = 0; probe < SF_NCCL_PROBES; probe++) {
        uint64_t n = atomic_fetch_add_explicit(&agg->kch_next, 1, memory_order_relaxed);
        struct sf_nccl_kch *k = &agg->kchs[n % SF_NCCL_CHILD_POOL];
        uint32_t expect = 0;
        if (!atomic_compare_exchange_strong_explicit(&k->in_use, &expect, 1, memory_order_acq_rel,
                                                     memory_order_relaxed))
            continue;
        if (!coll_ref(parent)) {
            atomic_store_explicit(&k->in_use, 0, memory_order_release);
            break;
        }
        k->parent = parent;
        k->start = gpu_start;
        k->stop = 0;
        return k;
    }
    atomic_fetch_add_explicit(&agg->dropped, 1, memory_order_relaxed);
    return NULL;
}

void sf__nccl_kch_record_stop(struct sf_nccl_kch *k, uint64_t gpu_stop)
{
    if (k)
        k->stop = gpu_stop;
}

static void fetch_min(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v < cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed))
        ;
}

static void fetch_max(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                             memory_order_relaxed))
        ;
}

/* The collective's GPU time on this rank is the span from its first channel's
 * start to its last channel's stop, taken once n_channels have reported. */
void sf__nccl_kch_stop(struct sf_nccl_kch *k)
{
    struct sf_nccl_coll *c;
    struct sf_nccl_agg *agg;

    if (!k)
        return;
    c = k->parent;
    agg = c->agg;
    if (k->stop > k->start) {
        fetch_min(&c->t_min, k->start);
        fetch_max(&c->t_max, k->stop);
        if (atomic_fetch_add_explicit(&c->ch_done, 1, memory_order_acq_rel) + 1 == c->n_channels) {
            uint64_t lo = atomic_load_explicit(&c->t_min, memory_order_relaxed);
            uint64_t hi = atomic_load_explicit(&c->t_max, memory_order_relaxed);
            struct sf_nccl_key *key = &agg->keys[c->key];
            atomic_fetch_add_explicit(&key->gpu_ns, hi - lo, memory_order_relaxed);
            atomic_fetch_add_explicit(&key->timed, 1, memory_order_relaxed);
            if (c->enq_seq)
                enq_kernel(agg, c->enq_slot, c->enq_seq, lo, hi);
        }
    }
    atomic_fetch_sub_explicit(&c->ch_pending, 1, memory_order_release);
    atomic_store_explicit(&k->in_use, 0, memory_order_release);
}

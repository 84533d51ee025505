/*
 * Many medians of the same count at once, by a pruned selection network run
 * across lanes (one lane per series): every rank's median over the steps of a
 * grid window. Branchless and exact (the same values as sf_median_i64). It
 * must not be used where no vector unit makes it pay (sf__median_net_pays).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

struct sf__median_net {
    uint32_t n;
    uint32_t n_cmp;
    uint16_t (*cmp)[2]; /* compare-exchanges, in order: min to [0], max to [1] */
};

/* Batcher's odd-even merge sort on n wires: the iterative form for a power
 * of two, with every comparator that touches a wire at or above n left out.
 * That is exact for any n: those wires would hold +infinity, and every
 * comparator keeps its minimum on its lower wire, so they never move. */
static uint32_t batcher(uint32_t n, uint16_t (*out)[2])
{
    uint32_t m = 0;
    for (uint32_t p = 1; p < n; p <<= 1)
        for (uint32_t k = p; k >= 1; k >>= 1)
            for (uint32_t j = k % p; j + k < n; j += 2 * k)
                for (uint32_t i = 0; i < k && i + j + k < n; i++)
                    if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) {
                        if (out != NULL) {
                            out[m][0] = (uint16_t)(i + j);
                            out[m][1] = (uint16_t)(i + j + k);
                        }
                        m++;
                    }
    return m;
}

/* Keeps only the comparators whose outputs can still reach the median's
 * wires (n/2, and n/2 - 1 when n is even), walking the network backwards. */
static uint32_t prune(uint32_t n, uint16_t (*cmp)[2], uint32_t n_cmp)
{
    bool need[SF__MEDIAN_NET_MAX] = {false};
    need[n / 2] = true;
    if (n % 2 == 0)
        need[n / 2 - 1] = true;
    uint32_t kept = 0;
    for (uint32_t c = n_cmp; c-- > 0;) {
        uint16_t a = cmp[c][0], b = cmp[c][1];
        if (!need[a] && !need[b])
            continue;
        need[a] = need[b] = true;
        cmp[n_cmp - 1 - kept][0] = a;
        cmp[n_cmp - 1 - kept][1] = b;
        kept++;
    }
    memmove(cmp, cmp + (n_cmp - kept), kept * sizeof *cmp);
    return kept;
}

int sf__median_net_new(uint32_t n, sf__median_net **ret)
{
    if (n == 0 || n > SF__MEDIAN_NET_MAX || ret == NULL)
        return -EINVAL;
    sf__median_net *net = calloc(1, sizeof *net);
    uint32_t total = batcher(n, NULL);
    if (net == NULL || (net->cmp = malloc((total ? total : 1) * sizeof *net->cmp)) == NULL) {
        free(net);
        return -ENOMEM;
    }
    batcher(n, net->cmp);
    net->n = n;
    net->n_cmp = prune(n, net->cmp, total);
    *ret = net;
    return 0;
}

void sf__median_net_free(sf__median_net *net)
{
    if (net == NULL)
        return;
    free(net->cmp);
    free(net);
}

/* One body, compiled once per instruction set: the lane loop is what the
 * compiler turns into vector min and max. */
static inline __attribute__((always_inline)) void net_body(const sf__median_net *net, int64_t *v,
                                                           size_t lanes)
{
    for (uint32_t c = 0; c < net->n_cmp; c++) {
        int64_t *restrict a = v + (size_t)net->cmp[c][0] * lanes;
        int64_t *restrict b = v + (size_t)net->cmp[c][1] * lanes;
        for (size_t l = 0; l < lanes; l++) {
            int64_t x = a[l], y = b[l];
            a[l] = x < y ? x : y;
            b[l] = x < y ? y : x;
        }
    }
}

/* Whole groups of ranks have 8 S lanes: with the count a constant, the lane
 * loop unrolls into straight vector code, no branch per comparator. */
#define NET_BY_LANES(net, v, lanes)                                                                \
    switch (lanes) {                                                                               \
    case 48:                                                                                       \
        net_body(net, v, 48);                                                                      \
        break;                                                                                     \
    case 56:                                                                                       \
        net_body(net, v, 56);                                                                      \
        break;                                                                                     \
    case 64:                                                                                       \
        net_body(net, v, 64);                                                                      \
        break;                                                                                     \
    default:                                                                                       \
        net_body(net, v, lanes);                                                                   \
        break;                                                                                     \
    }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SF_NET_X86 1
__attribute__((target("avx2"))) static void run_avx2(const sf__median_net *net, int64_t *v,
                                                     size_t lanes)
{
    NET_BY_LANES(net, v, lanes)
}

__attribute__((target("avx512f"))) static void run_avx512(const sf__median_net *net, int64_t *v,
                                                          size_t lanes)
{
    NET_BY_LANES(net, v, lanes)
}
#endif

static bool isa_present(enum sf__net_isa isa)
{
    switch (isa) {
    case SF__NET_GENERIC:
        return true;
#ifdef SF_NET_X86
    case SF__NET_AVX2:
        return __builtin_cpu_supports("avx2");
    case SF__NET_AVX512:
        return __builtin_cpu_supports("avx512f");
#endif
    default:
        return false;
    }
}

enum sf__net_isa sf__median_net_best(void)
{
    if (isa_present(SF__NET_AVX512))
        return SF__NET_AVX512;
    if (isa_present(SF__NET_AVX2))
        return SF__NET_AVX2;
    return SF__NET_GENERIC;
}

bool sf__median_net_pays(void)
{
    return sf__median_net_best() != SF__NET_GENERIC;
}

int sf__median_net_run(const sf__median_net *net, enum sf__net_isa isa, int64_t *v, size_t lanes,
                       int64_t *ret_median)
{
    if (!isa_present(isa))
        return -ENOTSUP;
    switch (isa) {
#ifdef SF_NET_X86
    case SF__NET_AVX512:
        run_avx512(net, v, lanes);
        break;
    case SF__NET_AVX2:
        run_avx2(net, v, lanes);
        break;
#endif
    default:
        net_body(net, v, lanes);
        break;
    }
    const int64_t *hi = v + (size_t)(net->n / 2) * lanes;
    const int64_t *lo = net->n % 2 ? hi : hi - lanes;
    for (size_t l = 0; l < lanes; l++)
        ret_median[l] = lo[l] + (hi[l] - lo[l]) / 2;
    return 0;
}

/*
 * Many medians of the same count at once, by a pruned selection network run
 * across lanes (one lane per series): every rank's median over the steps of a
 * grid window. Branchless and exact (the same values as sf_median_i64). It
 * must not be used where no vector form makes it pay (net_pays). This file
 * builds the network and holds its generic form, the reference; the vector
 * forms are median_net_avx2.c and median_net_avx512.c: AVX-512 (register
 * tiles for the first rounds, then 8 lanes an instruction), AVX-512 and AVX2
 * on 32-bit offsets where the series' spans allow (register tiles too), both
 * on 64 bits where they do not.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "forms.h"
#include "median_net.h"

/* lo + (hi - lo) / 2 of two sorted values, in unsigned arithmetic: exact
 * for any int64 lo <= hi, so the networks are defined for whatever values
 * they meet (the grid fold checks a window's durations after its medians
 * are taken: docs/ACCOUNTING.md, "Exactness"). */
static inline int64_t median_of_middle(int64_t lo, int64_t hi)
{
    return (int64_t)((uint64_t)lo + ((uint64_t)hi - (uint64_t)lo) / 2);
}

static const uint32_t ROUNDS_BELOW[BELOW_LEVELS] = {TILE_WIRES, 4 * TILE_WIRES};

/* Comparators of Batcher's sort on 2^8 wires, (8^2 - 8 + 4) 2^6 - 1: the
 * most batcher() writes for n <= SF__MEDIAN_NET_MAX. */
enum { BATCHER_MAX = 3839 };
_Static_assert(SF__MEDIAN_NET_MAX <= 256, "BATCHER_MAX holds the network");

/* Batcher's odd-even merge sort on n wires into out, in one pass (a
 * window's build makes a network, so this is part of a small window's
 * cost): the iterative form for a power of two, with every comparator that
 * touches a wire at or above n left out. That is exact for any n: those
 * wires would hold +infinity, and every comparator keeps its minimum on its
 * lower wire, so they never move. ret_below[i]: how many of them come
 * from the rounds p < ROUNDS_BELOW[i], which come first. */
static uint32_t batcher(uint32_t n, uint16_t (*out)[BATCHER_MAX][2],
                        uint32_t ret_below[BELOW_LEVELS])
{
    uint32_t m = 0;
    memset(ret_below, 0, BELOW_LEVELS * sizeof *ret_below);
    for (uint32_t p = 1; p < n; p <<= 1) {
        for (uint32_t k = p; k >= 1; k >>= 1)
            for (uint32_t j = k % p; j + k < n; j += 2 * k)
                for (uint32_t i = 0; i < k && i + j + k < n; i++)
                    /* both wires in one block of 2p (a power of two): no
                     * bit at or above 2p differs; a division per test made
                     * this the cost of a small window's medians */
                    if (((i + j) ^ (i + j + k)) < 2 * p) {
                        (*out)[m][0] = (uint16_t)(i + j);
                        (*out)[m][1] = (uint16_t)(i + j + k);
                        m++;
                    }
        for (uint32_t l = 0; l < BELOW_LEVELS; l++)
            if (p < ROUNDS_BELOW[l])
                ret_below[l] = m;
    }
    return m;
}

/* Keeps only the comparators whose outputs can still reach the median's
 * wires (n/2, and n/2 - 1 when n is even), walking the network backwards.
 * Of the first below[i] comparators, ret_below[i] are kept. */
static uint32_t prune(uint32_t n, uint16_t (*cmp)[2], uint32_t n_cmp,
                      const uint32_t below[BELOW_LEVELS], uint32_t ret_below[BELOW_LEVELS])
{
    memset(ret_below, 0, BELOW_LEVELS * sizeof *ret_below);
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
        for (uint32_t l = 0; l < BELOW_LEVELS; l++)
            ret_below[l] += c < below[l];
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
    uint16_t all[BATCHER_MAX][2]; /* 15 KB */
    uint32_t below[BELOW_LEVELS], total = batcher(n, &all, below);
    sf__median_net *net = calloc(1, sizeof *net);
    if (net == NULL)
        return -ENOMEM;
    net->n = n;
    net->n_cmp = prune(n, all, total, below, net->n_below);
    if ((net->cmp = malloc((net->n_cmp ? net->n_cmp : 1) * sizeof *net->cmp)) == NULL) {
        free(net);
        return -ENOMEM;
    }
    memcpy(net->cmp, all, net->n_cmp * sizeof *net->cmp);
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

void sf__net_sort_generic(const sf__median_net *net, int64_t *v, size_t lanes)
{
    net_body(net, v, lanes, 0);
}

void sf__median_net_run(const sf__median_net *net, const sf__vec *v, int64_t *values, size_t lanes,
                        int64_t *ret_median)
{
    if (v->net_narrow != NULL && v->net_narrow(net, values, lanes, lanes, ret_median))
        return; /* else every series in 64 bits */
    v->net_sort(net, values, lanes);
    const int64_t *hi = values + (size_t)(net->n / 2) * lanes;
    const int64_t *lo = net->n % 2 ? hi : hi - lanes;
    for (size_t l = 0; l < lanes; l++)
        ret_median[l] = median_of_middle(lo[l], hi[l]);
}

int sf__median_net_pass(const sf__vec *v, enum sf__net_pass pass, uint32_t *col, uint32_t wires)
{
    /* the counts of wires each pass takes, fewest and most */
    static const uint32_t takes[][2] = {
        [SF__NET_PASS_TILE] = {1, TILE_WIRES},
        [SF__NET_PASS_PAIR] = {1, 2 * TILE_WIRES},
        [SF__NET_PASS_ROUND32] = {2 * TILE_WIRES + 1, 4 * TILE_WIRES}};
    if ((unsigned)pass > SF__NET_PASS_ROUND32 || wires < takes[pass][0] || wires > takes[pass][1])
        return -EINVAL;
    return v->net_pass != NULL && v->net_pass(pass, col, wires) ? 0 : -ENOTSUP;
}

int sf__median_net_narrow(const sf__median_net *net, const sf__vec *v, const int64_t *values,
                          size_t stride, size_t lanes, int64_t *ret_median)
{
    if (v->net_narrow == NULL || stride < lanes)
        return -ENOTSUP;
    return v->net_narrow(net, values, stride, lanes, ret_median) ? 0 : -ERANGE;
}

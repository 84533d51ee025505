/*
 * Parallel coordinates of a rank (docs/CLIENT.md, "Parallel coordinates"):
 * its index and group size in each parallel dimension (pipeline, tensor,
 * data, context, expert) and the pipeline schedule. A job whose ranks declare
 * them is compared inside cohorts (docs/ACCOUNTING.md, "Cohorts"): ranks with
 * the same coordinates except dp and ep do the same work.
 *
 * The world tiles as pp x tp x dp x cp x ep: the sizes multiply to the world
 * size and each coordinate tuple belongs to one rank. dp counts the
 * data-parallel replicas beside ep (Megatron's data-parallel size divided by
 * its expert-parallel size when ep > 1). Pure functions: no allocation, no
 * I/O; shared by the client, sfd and the accounting core.
 */
#ifndef STAGEFRONTIER_PARALLEL_H
#define STAGEFRONTIER_PARALLEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum sf_parallel_dim { SF_PAR_PP, SF_PAR_TP, SF_PAR_DP, SF_PAR_CP, SF_PAR_EP, SF_PAR_DIMS };

enum sf_pipeline_schedule {
    SF_SCHEDULE_NONE,
    SF_SCHEDULE_GPIPE,
    SF_SCHEDULE_1F1B,
    SF_SCHEDULE_INTERLEAVED
};

#define SF_PARALLEL_MAX_SIZE 2097152u /* 2^21: limits.h SF_MAX_RANKS */
#define SF_PARALLEL_MAX_VIRTUAL 64u   /* interleaved:V, 2..64 model chunks */
#define SF_PARALLEL_TEXT_MAX 128      /* bytes of SF_PARALLEL, without the NUL */

typedef struct sf_parallel {
    uint32_t declared;           /* bit d: dimension d was given; 0: no coordinates */
    uint32_t index[SF_PAR_DIMS]; /* 0 where not declared */
    uint32_t size[SF_PAR_DIMS];  /* 1 where not declared */
    uint32_t schedule;           /* enum sf_pipeline_schedule */
    uint32_t virtual_stages;     /* interleaved:V: V; else 0 */
} sf_parallel;

/* No coordinates: nothing declared, every size 1. */
void sf_parallel_init(sf_parallel *ret);
/* Parses "pp=1/4,tp=0/8,dp=3/16,schedule=1f1b": comma-separated items, each
 * dimension at most once, index/size decimals without sign or leading zero,
 * 0 <= index < size <= SF_PARALLEL_MAX_SIZE, schedule gpipe, 1f1b or
 * interleaved:V (2..64) and only with pp. -EINVAL on anything else, with a
 * one-line reason in err (may be NULL); *ret is set only on success. */
int sf_parallel_parse(const char *text, sf_parallel *ret, char *err, size_t err_cap);
/* Writes the canonical text (parse's input form, dimensions in enum order);
 * the snprintf contract. */
int sf_parallel_format(const sf_parallel *p, char *buf, size_t cap);
/* One rank's coordinates against its world: -EINVAL with a reason when an
 * index is not below its size, a size is 0, a bit outside the dimensions is
 * set, the schedule is malformed, or the sizes do not multiply to world. */
int sf_parallel_check(const sf_parallel *p, uint32_t world_size, const char **ret_reason);
/* The product of the sizes (1 where not declared), or 0 when it passes
 * SF_PARALLEL_MAX_SIZE (never wrapped) or a size is 0. */
uint64_t sf_parallel_world(const sf_parallel *p);
/* The same group sizes and schedule (what every rank of a job must share). */
bool sf_parallel_same_shape(const sf_parallel *a, const sf_parallel *b);
/* The same declared dimensions and indices and shape. */
bool sf_parallel_equal(const sf_parallel *a, const sf_parallel *b);
/* Same cohort: the same shape and the same pp, tp and cp indices (dp and ep
 * may differ). */
bool sf_parallel_same_cohort(const sf_parallel *a, const sf_parallel *b);
/* The coordinate tuple as a mixed-radix number, 0..product of sizes - 1. */
uint64_t sf_parallel_tuple(const sf_parallel *p);
/* The cohort as a mixed-radix number of pp, tp and cp. */
uint64_t sf_parallel_cohort(const sf_parallel *p);
/* The name of a dimension ("pp"...), or NULL. */
const char *sf_parallel_dim_name(enum sf_parallel_dim d);

#ifdef __cplusplus
}
#endif
#endif

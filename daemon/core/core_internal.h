/*
 * Declarations shared between the accounting core's files. Nothing here is
 * part of the public interface in include/stagefrontier/accounting.h.
 */
#ifndef SF_CORE_INTERNAL_H
#define SF_CORE_INTERNAL_H

#include <stagefrontier/accounting.h>

/* summary.c */
void sf__top2_insert(sf_top2 *t, int64_t v, uint32_t rank);
int sf__roles_add(sf_summary *s, const char *role);
void sf__dense_free(sf_dense *d);

/* exposure.c: direct-exposure gains from dense rows (cohort-median baseline). */
int sf__cohort_gains(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                     int64_t *ret_gain);
/* Mean slack per dense rank over complete steps and boundaries 1..S. */
int sf__mean_slack(const sf_summary *s, const uint32_t *complete, uint32_t n_complete,
                   int64_t *ret_slack);

/* labels.c: routing, co-critical set, labels and downgrades of a report whose
 * unit figures are filled in. */
void sf__report_route_and_label(sf_report *r, const sf_summary *s, uint32_t n_ranks);

#endif

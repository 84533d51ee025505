/*
 * The human view of a window report. It leads with the route: the routing
 * set with shares, the leader rank, the labels, and what to profile next.
 */
#ifndef SF_REPORT_TEXT_H
#define SF_REPORT_TEXT_H

#include <stdio.h>
#include <stagefrontier/accounting.h>

int sf_report_write_text(const sf_report *report, FILE *out);

#endif

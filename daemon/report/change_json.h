/*
 * The change and what-if parts of a window report: JSON objects (null when
 * the report carries none) and the human lines that lead the text view.
 */
#ifndef SF_CHANGE_JSON_H
#define SF_CHANGE_JSON_H

#include <jansson.h>
#include <stdio.h>
#include <stagefrontier/accounting.h>

json_t *sf_change_to_json(const sf_report *report);
json_t *sf_whatif_to_json(const sf_report *report);
/* "step +21.0 % vs baseline (windows 0-2): ..." or nothing without a change. */
void sf_change_write_text(const sf_report *report, FILE *out);
void sf_whatif_write_text(const sf_report *report, FILE *out);

#endif

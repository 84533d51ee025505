/*
 * The report JSON of docs/SPEC.md section 5: one window object per report.
 * Seconds as JSON numbers, null where a figure is undefined.
 */
#ifndef SF_REPORT_JSON_H
#define SF_REPORT_JSON_H

#include <jansson.h>
#include <stagefrontier/accounting.h>

/* Seconds come from integer ns, so 15 significant digits print them exactly
 * ("8.0201", not "8.0200999999999993"); live and replay share this setting. */
#define SF_JSON_REAL_PRECISION JSON_REAL_PRECISION(15)

/* Builds the window object. The caller owns *ret (json_decref). */
int sf_report_to_json(const sf_report *report, json_t **ret);
/* The gates in force as a JSON object (also used by recording headers). */
json_t *sf_gates_to_json(const sf_gates *gates);
/* Text of a JSON array of window objects, in the project's canonical
 * formatting (indent 2, keys in insertion order). Caller frees. */
char *sf_report_array_dumps(json_t *array);

#endif

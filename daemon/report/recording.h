/*
 * The JSON Lines recording format written by `sfctl record` and read by
 * `sfctl replay` (docs/FORMATS.md): a header line, then per window its rows
 * and a closing window line that carries the window's meta (drops,
 * violations, deadline cut-offs, flags), so a replay reproduces the live
 * report exactly.
 */
#ifndef SF_RECORDING_H
#define SF_RECORDING_H

#include <jansson.h>
#include <stagefrontier/change.h>

json_t *sf_recording_header(const char *job_id, const sf_schema *schema, uint32_t world_size,
                            const sf_gates *gates);
json_t *sf_recording_row(const sf_row *row, const sf_schema *schema);
json_t *sf_recording_window(const sf_window_meta *meta);
/* The job's reference (docs/CHANGE.md), written right after the header. */
json_t *sf_recording_reference(const sf_reference *ref);

/* Decoders. Each returns 0, or -EINVAL with a message in err (size errlen)
 * naming the offending key. Decoded strings point into the json object or
 * into ret-owned storage as documented per function. */

/* Fills schema (owned by the caller: sf_schema_clear), world size and gates
 * (gates start from the caller's values; keys present override). */
int sf_recording_parse_header(json_t *obj, sf_schema *ret_schema, uint32_t *ret_world_size,
                              sf_gates *gates, char *err, size_t errlen);
/* d must have room for schema->n_stages values; row->d is set to d and
 * row->role points into obj. */
int sf_recording_parse_row(json_t *obj, const sf_schema *schema, sf_row *ret_row, int64_t *d,
                           char *err, size_t errlen);
/* The row's optional "parallel" coordinates (docs/FORMATS.md): *ret_has
 * false when absent; -EINVAL when not SF_PARALLEL's strict spelling. */
/* The row's optional accumulated sync waits ("sync_wait_ns", "sync_waits"):
 * *ret_has false when absent, else ret[2 * synchronizing stages] as
 * sf_row.sync_wait holds them. */
int sf_recording_parse_row_waits(json_t *obj, const sf_schema *schema, int64_t *ret, bool *ret_has,
                                 char *err, size_t errlen);
int sf_recording_parse_row_parallel(json_t *obj, sf_parallel *ret, bool *ret_has, char *err,
                                    size_t errlen);
int sf_recording_parse_window(json_t *obj, sf_window_meta *ret_meta, char *err, size_t errlen);
/* A reference line of the part with this schema and world size. */
int sf_recording_parse_reference(json_t *obj, const sf_schema *schema, uint32_t world_size,
                                 sf_reference **ret, char *err, size_t errlen);

#endif

/*
 * The stored form of a report in sfd's durable history: a versioned
 * little-endian encoding of every sf_report field (history_codec.c). A pure
 * format: it knows the core's report and nothing of sfd or SQLite, so the
 * store and any reader of it share one definition.
 */
#ifndef SF_REPORT_HISTORY_CODEC_H
#define SF_REPORT_HISTORY_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "stagefrontier/accounting.h"

/* Encodes every field of a report, so that a decoded copy renders the same
 * JSON and text bytes. *ret is malloc'd. */
int sfd_report_pack(const sf_report *report, uint8_t **ret, size_t *ret_len);
/* Decodes and checks a packed report: every count and index is bounded by
 * the buffer and the schema, so a corrupt row is -EINVAL, never a crash.
 * Every earlier version (STR2 to the current one) still decodes. */
int sfd_report_unpack(const uint8_t *buf, size_t len, sf_report **ret);

#endif

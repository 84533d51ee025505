/*
 * The stored form of one window's rows in sfd's durable history, so that the
 * pictures and the recording of a window survive a restart
 * (docs/HISTORY.md). A pure format like history_codec.h: it knows the
 * core's sf_row and nothing of sfd or SQLite.
 */
#ifndef SF_REPORT_ROWS_CODEC_H
#define SF_REPORT_ROWS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "stagefrontier/accounting.h"

/* The most roles one stored window names (rows refer to them by index). */
#define SF_ROWS_CODEC_MAX_ROLES 256

/* Encodes the rows of the window (segment, index) of a job with this schema
 * and world size. *ret is malloc'd. -EINVAL on more than
 * SF_ROWS_CODEC_MAX_ROLES distinct roles, -ENOMEM. */
int sf_rows_pack(const sf_schema *schema, uint32_t world_size, uint32_t segment, int64_t index,
                 const sf_row *rows, size_t n, uint8_t **ret, size_t *ret_len);

/* What a stored window says about itself, read before its rows. */
typedef struct sf_rows_header {
    uint32_t segment;
    int64_t index;
    uint32_t n_rows;
} sf_rows_header;

/* Called once per row, in stored order; row and its pointers are valid for
 * the call only. A negative return stops the decode and is returned. */
typedef int (*sf_rows_visit)(void *ctx, const sf_rows_header *header, const sf_row *row);

/* Decodes rows stored for a job of this schema and world size. The bytes are
 * hostile: the schema hash and shape must match, every count is bounded by
 * the buffer, and every row passes sf_row_validate with its rank below the
 * world size and its coordinates (if any) sf_parallel_check, before the
 * first row reaches visit; otherwise -EINVAL and visit never runs. */
int sf_rows_unpack(const uint8_t *buf, size_t len, const sf_schema *schema, uint32_t world_size,
                   sf_rows_visit visit, void *ctx);

#endif

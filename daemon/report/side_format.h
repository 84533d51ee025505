/*
 * NCCL side evidence as the report shows it (docs/SIDE_EVIDENCE.md): one
 * window's communicators and aggregate rows, and their JSON and text
 * formats. Storage and bounds are sfd's (daemon/sfd/side_evidence.c).
 */
#ifndef SF_SIDE_FORMAT_H
#define SF_SIDE_FORMAT_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "stagefrontier/accounting.h"

#define SF_SIDE_NAME_MAX 32  /* collective, datatype, algorithm, protocol */
#define SF_SIDE_COMM_MAX 128 /* communicator name */

struct sf_side_comm {
    char name[SF_SIDE_COMM_MAX + 1];
    uint64_t hash;
    uint32_t ranks, nodes;
};

struct sf_side_row {
    uint16_t comm; /* index into the window's communicators */
    char stage[SF_MAX_NAME_LEN + 1];
    char coll[SF_SIDE_NAME_MAX + 1], dtype[SF_SIDE_NAME_MAX + 1];
    char algo[SF_SIDE_NAME_MAX + 1], proto[SF_SIDE_NAME_MAX + 1];
    uint32_t bucket;
    uint64_t count, bytes, gpu_ns, timed;
};

/* One window's evidence, borrowed from its store. */
struct sf_side_view {
    uint64_t batches, dropped_events;
    uint32_t n_comms, n_rows;
    const struct sf_side_comm *comms;
    const struct sf_side_row *rows;
};

/* Adds a "side_evidence" object to a report's JSON window object, and an
 * "nccl" summary on each stage object that enclosed collectives. A window
 * without rows is left untouched. 0 or -ENOMEM. */
int sf_side_annotate_json(const struct sf_side_view *w, json_t *window);
/* The same for the human view, appended after the report's text. 0 or -EIO. */
int sf_side_write_text(const struct sf_side_view *w, FILE *out);

#endif

/*
 * What each label gate takes, in words, for the messages of the programs
 * that parse gates (sfd's config, sfctl's --gates). Implemented with the
 * gate table in daemon/core/gates.c.
 */
#ifndef STAGEFRONTIER_GATES_TEXT_H
#define STAGEFRONTIER_GATES_TEXT_H

#include <stddef.h>

/* After sf_gates_set refused a value: "must be a number 0..1". Returns 0,
 * -ENOENT for an unknown key, -EINVAL for a NULL or empty buffer. */
int sf_gates_explain(const char *key, char *buf, size_t len);

#endif

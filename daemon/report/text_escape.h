/*
 * Text from outside (capture paths and errors, job ids, host names, reasons)
 * is escaped before it reaches a log line or a terminal: control bytes (C0,
 * DEL and the C1 controls U+0080..U+009F, which some terminals obey) and
 * bytes that are not valid UTF-8 become \xNN, so a terminal escape such as
 * ESC [ 2 J prints as \x1b[2J. Valid UTF-8 text is copied unchanged.
 */
#ifndef SF_TEXT_ESCAPE_H
#define SF_TEXT_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Room for the escaped form of len bytes, with the NUL. */
#define SF_TEXT_ESCAPED_SIZE(len) (4 * (size_t)(len) + 1)

/* Writes the escaped text into out (cap > 0 bytes, always NUL-terminated,
 * cut before an escape or character that does not fit). Returns the length
 * the whole escaped text has, as snprintf does. */
size_t sf_text_escape(const char *in, size_t len, char *out, size_t cap);

/* True when sf_text_escape would copy the text unchanged. */
bool sf_text_is_clean(const char *in, size_t len);

#endif

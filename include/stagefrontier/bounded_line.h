/*
 * One line of a text file, read into a fixed buffer: a reader of outside
 * files stops at its line limit while reading, so a 300 MB line costs the
 * buffer, not 300 MB (getline grows to the line). Internal: not installed.
 */
#ifndef STAGEFRONTIER_BOUNDED_LINE_H
#define STAGEFRONTIER_BOUNDED_LINE_H

#include <stddef.h>
#include <stdio.h>

enum sf_line_status {
    SF_LINE_OK,       /* a line, with its '\n' if the file had one */
    SF_LINE_EOF,      /* nothing left */
    SF_LINE_TOO_LONG, /* cap - 1 bytes read and still no '\n': refuse */
    SF_LINE_NUL,      /* a NUL byte: not text */
    SF_LINE_ERROR,    /* the read failed (errno set) */
};

/* Reads one line into buf (cap > 1 bytes, NUL-terminated, *len without
 * the NUL). Stops reading at cap - 1 bytes; the rest of the file is left. */
static inline enum sf_line_status sf_read_line(FILE *in, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;
    int c = EOF;
    enum sf_line_status status = SF_LINE_OK;
    flockfile(in);
    while (n + 1 < cap && (c = getc_unlocked(in)) != EOF) {
        if (c == '\0') {
            status = SF_LINE_NUL;
            break;
        }
        buf[n++] = (char)c;
        if (c == '\n')
            break;
    }
    if (status == SF_LINE_OK && c != '\n') {
        if (n + 1 >= cap)
            status = SF_LINE_TOO_LONG;
        else if (ferror(in))
            status = SF_LINE_ERROR;
        else if (n == 0)
            status = SF_LINE_EOF;
    }
    funlockfile(in);
    buf[n] = '\0';
    *len = n;
    return status;
}

#endif

/*
 * One line of a text file, read into a fixed buffer: a reader of outside
 * files stops at its line limit while reading, so a 300 MB line costs the
 * buffer, not 300 MB (getline grows to the line). Internal: not installed.
 */
#ifndef STAGEFRONTIER_BOUNDED_LINE_H
#define STAGEFRONTIER_BOUNDED_LINE_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum sf_line_status {
    SF_LINE_OK,       /* a line, with its '\n' if the file had one */
    SF_LINE_EOF,      /* nothing left */
    SF_LINE_TOO_LONG, /* cap - 1 bytes read and still no '\n': refuse */
    SF_LINE_NUL,      /* a NUL byte: not text */
    SF_LINE_ERROR,    /* the read failed (errno set) */
};

/* Reads one line into buf (cap > 1 bytes, NUL-terminated, *len without
 * the NUL). Stops reading at cap - 1 bytes; the rest of the file is left.
 * fgets stops at '\n', so a line that ends in one is whole and NUL-free; one
 * that does not is the last, too long, or cut by a NUL byte. (A NUL in a
 * last line without '\n' reads as the end of that line.) */
static inline enum sf_line_status sf_read_line(FILE *in, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    buf[0] = '\0';
    if (fgets(buf, (int)cap, in) == NULL)
        return ferror(in) ? SF_LINE_ERROR : SF_LINE_EOF;
    size_t n = strlen(buf);
    *len = n;
    if (n > 0 && buf[n - 1] == '\n')
        return SF_LINE_OK;
    if (n + 1 >= cap)
        return SF_LINE_TOO_LONG;
    if (ferror(in))
        return SF_LINE_ERROR;
    return feof(in) ? SF_LINE_OK : SF_LINE_NUL;
}

#endif

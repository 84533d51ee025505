/*
 * Escaping of outside text for logs and terminals (text_escape.h).
 */
#include "text_escape.h"

#include <stdint.h>

/* Length of the valid, printable UTF-8 character at s (0: escape s[0]). */
static size_t printable_char(const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    if (c >= 0x20 && c < 0x7f)
        return 1;
    size_t n;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, cp = c & 0x1fu, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, cp = c & 0x0fu, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, cp = c & 0x07u, min = 0x10000;
    } else {
        return 0; /* C0, DEL, a continuation byte or an invalid lead */
    }
    if (n > len)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0u) != 0x80u)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0; /* overlong, beyond Unicode, or a surrogate */
    if (cp >= 0x80 && cp <= 0x9f)
        return 0; /* C1 controls: CSI is U+009B */
    return n;
}

size_t sf_text_escape(const char *in, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)in;
    size_t need = 0, at = 0;
    bool cut = false;
    for (size_t i = 0; i < len;) {
        size_t n = printable_char(s + i, len - i);
        size_t width = n ? n : 4;
        if (!cut && at + width < cap) {
            if (n) {
                for (size_t k = 0; k < n; k++)
                    out[at++] = (char)s[i + k];
            } else {
                out[at++] = '\\';
                out[at++] = 'x';
                out[at++] = hex[s[i] >> 4];
                out[at++] = hex[s[i] & 0xfu];
            }
        } else {
            cut = true;
        }
        need += width;
        i += n ? n : 1;
    }
    if (cap > 0)
        out[at] = '\0';
    return need;
}

bool sf_text_is_clean(const char *in, size_t len)
{
    const unsigned char *s = (const unsigned char *)in;
    for (size_t i = 0; i < len;) {
        size_t n = printable_char(s + i, len - i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

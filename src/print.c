#include "print.h"

#include <string.h>

#include "os.h"

static void put(struct hak_printer *out, const char *s, size_t n)
{
    while (n) {
        if (out->len == sizeof(out->buf)) {
            if (out->fd < 0)
                return; /* a text kept in memory: cut, not lost */
            hak_print_flush(out);
        }
        size_t room = sizeof(out->buf) - out->len;
        size_t chunk = n < room ? n : room;
        memcpy(out->buf + out->len, s, chunk);
        out->len += chunk;
        s += chunk;
        n -= chunk;
    }
}

static void pad(struct hak_printer *out, size_t used, unsigned width)
{
    while (used++ < width)
        put(out, " ", 1);
}

void hak_print_str(struct hak_printer *out, const char *s)
{
    put(out, s, strlen(s));
}

void hak_print_text(struct hak_printer *out, const struct hak_printer *text)
{
    put(out, text->buf, text->len);
}

const char *hak_print_terminated(struct hak_printer *text)
{
    if (text->len == sizeof(text->buf))
        text->len--;
    text->buf[text->len] = '\0';
    return text->buf;
}

void hak_print_padded(struct hak_printer *out, const char *s, unsigned width)
{
    size_t n = strlen(s);
    put(out, s, n);
    pad(out, n, width);
}

void hak_print_u64(struct hak_printer *out, uint64_t value, unsigned width)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[sizeof(digits) - 1 - n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    pad(out, n, width);
    put(out, digits + sizeof(digits) - n, n);
}

void hak_print_flush(struct hak_printer *out)
{
    hak_os_write(out->fd, out->buf, out->len);
    out->len = 0;
}

void hak_print_json_string(struct hak_printer *out, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    put(out, "\"", 1);
    for (const char *end = s + len; s < end; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char escaped[2] = {'\\', (char)c};
            put(out, escaped, 2);
        } else if (c == '\n') {
            put(out, "\\n", 2);
        } else if (c < 0x20) {
            char escaped[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(out, escaped, 6);
        } else {
            put(out, (const char *)&c, 1);
        }
    }
    put(out, "\"", 1);
}

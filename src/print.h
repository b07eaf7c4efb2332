/* Formatted output that never allocates: the stats report runs inside the
 * allocator, where printf could call malloc. */
#ifndef HAK_PRINT_H
#define HAK_PRINT_H

#include <stddef.h>
#include <stdint.h>

/* fd < 0: the text stays in buf, cut at its size, for printing later. */
struct hak_printer {
    int fd;
    size_t len;
    char buf[2048];
};

void hak_print_str(struct hak_printer *out, const char *s);
/* What text (a printer with fd < 0) holds. */
void hak_print_text(struct hak_printer *out, const struct hak_printer *text);
/* The text of a printer with fd < 0 as a C string, its last byte given up
 * for the terminator when it is full (a path cut so names no file). */
const char *hak_print_terminated(struct hak_printer *text);
/* Right-aligned in width columns (0: no padding). */
void hak_print_u64(struct hak_printer *out, uint64_t value, unsigned width);
void hak_print_padded(struct hak_printer *out, const char *s, unsigned width);
void hak_print_flush(struct hak_printer *out);
/* The len bytes at s as a JSON string, quoted and escaped. */
void hak_print_json_string(struct hak_printer *out, const char *s, size_t len);

#endif

#include "fault.h"

#include <stdint.h>
#include <stdlib.h>

#include "print.h"

void hak_fatal(const char *what, const void *addr)
{
    hak_fatal_note(what, addr, NULL);
}

void hak_fatal_note(const char *what, const void *addr, const char *note)
{
    struct hak_printer out = {.fd = 2};
    hak_print_str(&out, "hakmem: ");
    hak_print_str(&out, what);
    if (addr) {
        static const char hex[] = "0123456789abcdef";
        char text[19] = "0x";
        uintptr_t value = (uintptr_t)addr;
        for (int i = 0; i < 16; i++)
            text[2 + i] = hex[(value >> (60 - 4 * i)) & 15];
        text[18] = 0;
        hak_print_str(&out, " ");
        hak_print_str(&out, text);
    }
    if (note) {
        hak_print_str(&out, " (");
        hak_print_str(&out, note);
        hak_print_str(&out, ")");
    }
    hak_print_str(&out, "\n");
    hak_print_flush(&out);
    abort();
}

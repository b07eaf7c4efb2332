#include "options.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "os.h"
#include "print.h"

/* Digits with an optional K/M/G suffix; false on anything else. */
static bool parse_number(const char *text, bool suffix_ok, uint64_t *out)
{
    uint64_t value = 0;
    const char *p = text;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (value > (UINT64_MAX - 9) / 10)
            return false;
        value = value * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    if (suffix_ok && *p) {
        switch (*p | 0x20) {
        case 'k':
            shift = 10;
            break;
        case 'm':
            shift = 20;
            break;
        case 'g':
            shift = 30;
            break;
        default:
            return false;
        }
        p++;
    }
    if (*p || (shift && value > (UINT64_MAX >> shift)))
        return false;
    *out = value << shift;
    return true;
}

static void warn(const char *name, const char *text)
{
    struct hak_printer out = {.fd = 2};
    hak_print_str(&out, "hakmem: ignoring ");
    hak_print_str(&out, name);
    hak_print_str(&out, "=");
    hak_print_str(&out, text);
    hak_print_str(&out, " (not a valid value)\n");
    hak_print_flush(&out);
}

static bool parse(const struct hak_option *opt, const char *text)
{
    uint64_t number;
    switch (opt->type) {
    case HAK_OPT_BYTES:
        if (!parse_number(text, true, &number))
            return false;
        *(size_t *)opt->value = (size_t)number;
        return true;
    case HAK_OPT_U32:
        if (!parse_number(text, false, &number) || number > UINT32_MAX)
            return false;
        *(uint32_t *)opt->value = (uint32_t)number;
        return true;
    case HAK_OPT_U64:
        if (!parse_number(text, false, &number))
            return false;
        *(uint64_t *)opt->value = number;
        return true;
    case HAK_OPT_PATH:
        if (!*text || strlen(text) >= HAK_OPTION_PATH_MAX)
            return false;
        strcpy((char *)opt->value, text);
        return true;
    case HAK_OPT_CHOICE:
        for (uint32_t i = 0; opt->choices[i]; i++) {
            if (!strcmp(text, opt->choices[i])) {
                *(uint32_t *)opt->value = i;
                return true;
            }
        }
        return false;
    }
    return false;
}

void hak_options_load(void)
{
    for (size_t i = 0; i < hak_option_count; i++) {
        const char *text = secure_getenv(hak_option_table[i].name);
        if (text && !parse(&hak_option_table[i], text))
            warn(hak_option_table[i].name, text);
    }
    /* A file named is a report asked for. */
    if (hak_options.stats_file[0] && hak_options.stats == HAK_STATS_OFF)
        hak_options.stats = HAK_STATS_TEXT;
}

static uint64_t number_value(const struct hak_option *opt)
{
    switch (opt->type) {
    case HAK_OPT_BYTES:
        return *(size_t *)opt->value;
    case HAK_OPT_U32:
        return *(uint32_t *)opt->value;
    case HAK_OPT_U64:
        return *(uint64_t *)opt->value;
    case HAK_OPT_CHOICE:
    case HAK_OPT_PATH:
        break;
    }
    return 0;
}

/* A choice's or a path's value as text ("-" for no path). */
static const char *option_text(const struct hak_option *opt)
{
    if (opt->type == HAK_OPT_CHOICE)
        return opt->choices[*(uint32_t *)opt->value];
    const char *path = opt->value;
    return *path ? path : "-";
}

void hak_options_print(struct hak_printer *out)
{
    hak_print_str(out, "options:\n");
    for (size_t i = 0; i < hak_option_count; i++) {
        const struct hak_option *opt = &hak_option_table[i];
        hak_print_str(out, "  ");
        hak_print_padded(out, opt->name, 24);
        if (opt->type == HAK_OPT_CHOICE || opt->type == HAK_OPT_PATH) {
            const char *text = option_text(opt);
            size_t len = strlen(text);
            hak_print_padded(out, "", len < 12 ? 12 - (unsigned)len : 0);
            hak_print_str(out, text);
        } else {
            hak_print_u64(out, number_value(opt), 12);
        }
        hak_print_str(out, "  ");
        hak_print_str(out, opt->help);
        hak_print_str(out, "\n");
    }
}

void hak_options_print_json(struct hak_printer *out)
{
    hak_print_str(out, "{");
    for (size_t i = 0; i < hak_option_count; i++) {
        const struct hak_option *opt = &hak_option_table[i];
        hak_print_str(out, i ? ", " : "");
        hak_print_json_string(out, opt->name, strlen(opt->name));
        hak_print_str(out, ": ");
        if (opt->type == HAK_OPT_PATH)
            hak_print_json_string(out, opt->value, strlen(opt->value));
        else if (opt->type == HAK_OPT_CHOICE)
            hak_print_json_string(out, option_text(opt), strlen(option_text(opt)));
        else
            hak_print_u64(out, number_value(opt), 0);
    }
    hak_print_str(out, "}");
}

/* HAKMEM_HUGE_PAGES=auto asks for no huge pages in a VM whose host takes
 * back the memory the guest frees, where a huge page mostly faults in the
 * host as well, unless small pages fault slowly there too.  In one such VM,
 * whose small-page faults took about 1.5 us (glibc ran the fault-bound
 * benchmarks a sixth as long as in the next one), l25, whose spans are
 * decommitted and faulted in again as it frees and reuses them, ran at
 * 53-118 k ops/s with huge pages against 237-282 k without, mid_large_mt
 * at 0.98-5.0 M against 5.8-6.2 M, large_blocks steps=200 (after a run of
 * glibc's and one of jemalloc's, as hakmem-compare runs it) at 1.7 k
 * against 3.7 k.  In another, which shadows the guest's page tables, a
 * small page's fault took 10 us, a huge page's given back to the host 3 ms
 * (6 us for each small page in it) and 0.1 ms when it was not: there huge
 * pages ran large_blocks 10 times as fast, mid_large_mt 1.9 and l25 1.4
 * times (3 alternating runs each, hakmem-compare). */
#define SLOW_SMALL_FAULT_NS 4000

bool hak_options_huge_pages_auto(bool free_memory_reported, uint64_t small_page_fault_ns)
{
    return !free_memory_reported || small_page_fault_ns >= SLOW_SMALL_FAULT_NS;
}

/* Asked once, by one thread: another that comes meanwhile gets small pages
 * for that mapping.  Small pages are timed only where the answer hangs on
 * them. */
bool hak_options_huge_pages(void)
{
    enum { UNKNOWN, ASKING, YES, NO };
    static _Atomic int verdict = UNKNOWN;
    if (hak_options.huge_pages != HAK_HUGE_AUTO)
        return hak_options.huge_pages == HAK_HUGE_ON;
    int known = atomic_load_explicit(&verdict, memory_order_relaxed);
    if (known == UNKNOWN && atomic_compare_exchange_strong(&verdict, &known, ASKING)) {
        bool reported = hak_os_free_memory_reported("");
        known = hak_options_huge_pages_auto(reported, reported ? hak_os_small_page_fault_ns() : 0)
                    ? YES
                    : NO;
        atomic_store_explicit(&verdict, known, memory_order_release);
    }
    return known == YES;
}

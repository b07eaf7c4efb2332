#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "print.h"

struct hak_options hak_options = {
    .hot_bytes = 32u << 20,
    .decay_ms = 5000,
    .small_cache = 64,
    .mid_ring = 48,
    .l25_ring = 16,
    .ring_bytes = 512u << 10,
    .numa = HAK_NUMA_AUTO,
    .numa_policy = HAK_POLICY_PREFERRED,
    .interleave_bytes = 0,
    .stats = false,
    .huge_pages = true,
    .harden = 1,
};

enum option_type { OPT_BOOL, OPT_BYTES, OPT_U32, OPT_U64, OPT_CHOICE };

struct option {
    const char *name;
    enum option_type type;
    void *value;
    const char *help;
    const char *const *choices; /* OPT_CHOICE: the value is the index */
};

static const char *const numa_modes[] = {"auto", "off", NULL};
static const char *const numa_policies[] = {"preferred", "bind", NULL};
static const char *const harden_levels[] = {"0", "1", "2", NULL};

static const struct option table[] = {
    {"HAKMEM_STATS", OPT_BOOL, &hak_options.stats, "print statistics at exit", NULL},
    {"HAKMEM_HOT_BYTES", OPT_BYTES, &hak_options.hot_bytes,
     "freed Mid/L25 spans kept resident per node (bytes; K, M, G suffixes)", NULL},
    {"HAKMEM_DECAY_MS", OPT_U64, &hak_options.decay_ms, "how long a freed span stays resident (ms)",
     NULL},
    {"HAKMEM_SMALL_CACHE", OPT_U32, &hak_options.small_cache,
     "free blocks a thread caches per small class (C0-C7)", NULL},
    {"HAKMEM_MID_RING", OPT_U32, &hak_options.mid_ring,
     "free blocks a thread caches per Mid class (1-32 KiB)", NULL},
    {"HAKMEM_L25_RING", OPT_U32, &hak_options.l25_ring,
     "free blocks a thread caches per L25 class (32 KiB-1 MiB)", NULL},
    {"HAKMEM_RING_BYTES", OPT_BYTES, &hak_options.ring_bytes,
     "bound on the bytes cached per Mid/L25 class and thread", NULL},
    {"HAKMEM_HUGE_PAGES", OPT_BOOL, &hak_options.huge_pages,
     "1: a process past 8 MiB of Mid/L25 chunks gets them in huge pages", NULL},
    {"HAKMEM_NUMA", OPT_CHOICE, &hak_options.numa, "auto: one backend per node; off: one",
     numa_modes},
    {"HAKMEM_NUMA_POLICY", OPT_CHOICE, &hak_options.numa_policy,
     "preferred (fall back to other nodes when full) or bind", numa_policies},
    {"HAKMEM_INTERLEAVE_BYTES", OPT_BYTES, &hak_options.interleave_bytes,
     "large blocks from this size are interleaved over all nodes (0: never)", NULL},
    {"HAKMEM_HARDEN", OPT_CHOICE, &hak_options.harden,
     "0: no checks; 1: encoded links, double and invalid frees; 2: also guard pages, canaries",
     harden_levels},
};

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

static bool parse(const struct option *opt, const char *text)
{
    uint64_t number;
    switch (opt->type) {
    case OPT_BOOL:
        if (strcmp(text, "0") && strcmp(text, "1"))
            return false;
        *(bool *)opt->value = text[0] == '1';
        return true;
    case OPT_BYTES:
        if (!parse_number(text, true, &number))
            return false;
        *(size_t *)opt->value = (size_t)number;
        return true;
    case OPT_U32:
        if (!parse_number(text, false, &number) || number > UINT32_MAX)
            return false;
        *(uint32_t *)opt->value = (uint32_t)number;
        return true;
    case OPT_U64:
        if (!parse_number(text, false, &number))
            return false;
        *(uint64_t *)opt->value = number;
        return true;
    case OPT_CHOICE:
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
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const char *text = getenv(table[i].name);
        if (text && !parse(&table[i], text))
            warn(table[i].name, text);
    }
}

bool hak_options_set_bytes(const char *name, size_t value)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].type == OPT_BYTES && !strcmp(table[i].name, name)) {
            __atomic_store_n((size_t *)table[i].value, value, __ATOMIC_RELAXED);
            return true;
        }
    }
    return false;
}

void hak_options_print(int fd)
{
    struct hak_printer out = {.fd = fd};
    hak_print_str(&out, "options:\n");
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const struct option *opt = &table[i];
        hak_print_str(&out, "  ");
        hak_print_padded(&out, opt->name, 24);
        switch (opt->type) {
        case OPT_BOOL:
            hak_print_u64(&out, *(bool *)opt->value, 12);
            break;
        case OPT_BYTES:
            hak_print_u64(&out, *(size_t *)opt->value, 12);
            break;
        case OPT_U32:
            hak_print_u64(&out, *(uint32_t *)opt->value, 12);
            break;
        case OPT_U64:
            hak_print_u64(&out, *(uint64_t *)opt->value, 12);
            break;
        case OPT_CHOICE: {
            const char *choice = opt->choices[*(uint32_t *)opt->value];
            size_t len = strlen(choice);
            hak_print_padded(&out, "", len < 12 ? 12 - (unsigned)len : 0);
            hak_print_str(&out, choice);
            break;
        }
        }
        hak_print_str(&out, "  ");
        hak_print_str(&out, opt->help);
        hak_print_str(&out, "\n");
    }
    hak_print_flush(&out);
}

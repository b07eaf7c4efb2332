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
    .stats = HAK_STATS_OFF,
    .huge_pages = true,
    .harden = 1,
};

enum option_type { OPT_BOOL, OPT_BYTES, OPT_U32, OPT_U64, OPT_CHOICE, OPT_PATH };

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
static const char *const stats_modes[] = {"0", "1", "json", NULL};

static const struct option table[] = {
    {"HAKMEM_STATS", OPT_CHOICE, &hak_options.stats,
     "1: print statistics at exit; json: the same as one JSON object", stats_modes},
    {"HAKMEM_STATS_FILE", OPT_PATH, hak_options.stats_file,
     "write the statistics to this file (%p: the process id), not stderr", NULL},
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
    case OPT_PATH:
        if (!*text || strlen(text) >= HAK_OPTION_PATH_MAX)
            return false;
        strcpy((char *)opt->value, text);
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
    /* A file named is a report asked for. */
    if (hak_options.stats_file[0] && hak_options.stats == HAK_STATS_OFF)
        hak_options.stats = HAK_STATS_TEXT;
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

static uint64_t number_value(const struct option *opt)
{
    switch (opt->type) {
    case OPT_BOOL:
        return *(bool *)opt->value;
    case OPT_BYTES:
        return *(size_t *)opt->value;
    case OPT_U32:
        return *(uint32_t *)opt->value;
    case OPT_U64:
        return *(uint64_t *)opt->value;
    case OPT_CHOICE:
    case OPT_PATH:
        break;
    }
    return 0;
}

/* A choice's or a path's value as text ("-" for no path). */
static const char *option_text(const struct option *opt)
{
    if (opt->type == OPT_CHOICE)
        return opt->choices[*(uint32_t *)opt->value];
    const char *path = opt->value;
    return *path ? path : "-";
}

void hak_options_print(struct hak_printer *out)
{
    hak_print_str(out, "options:\n");
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const struct option *opt = &table[i];
        hak_print_str(out, "  ");
        hak_print_padded(out, opt->name, 24);
        if (opt->type == OPT_CHOICE || opt->type == OPT_PATH) {
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
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        const struct option *opt = &table[i];
        hak_print_str(out, i ? ", " : "");
        hak_print_json_string(out, opt->name, strlen(opt->name));
        hak_print_str(out, ": ");
        if (opt->type == OPT_PATH)
            hak_print_json_string(out, opt->value, strlen(opt->value));
        else if (opt->type == OPT_CHOICE)
            hak_print_json_string(out, option_text(opt), strlen(option_text(opt)));
        else
            hak_print_u64(out, number_value(opt), 0);
    }
    hak_print_str(out, "}");
}

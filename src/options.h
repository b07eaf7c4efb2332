/* Run-time options: read once from the environment at start-up, from one
 * table (options_table.c), which is also the source of the options table in
 * README.md and hakmem(3) (tools/options-doc.c). */
#ifndef HAK_OPTIONS_H
#define HAK_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hak_numa_mode { HAK_NUMA_AUTO, HAK_NUMA_OFF };
enum hak_numa_policy { HAK_POLICY_PREFERRED, HAK_POLICY_BIND };
enum hak_stats_mode { HAK_STATS_OFF, HAK_STATS_TEXT, HAK_STATS_JSON };
enum hak_huge_mode { HAK_HUGE_AUTO, HAK_HUGE_OFF, HAK_HUGE_ON };

/* HAKMEM_STATS_FILE, with room for any path. */
#define HAK_OPTION_PATH_MAX 4096

struct hak_options {
    size_t hot_bytes;                     /* HotSpanBox budget per node and shard */
    uint64_t decay_ms;                    /* how long a span stays hot */
    uint32_t small_cache;                 /* blocks a thread caches per small class */
    uint32_t mid_ring;                    /* blocks a thread caches per Mid class */
    uint32_t l25_ring;                    /* blocks a thread caches per L25 class */
    size_t ring_bytes;                    /* bound on the bytes cached per Mid/L25 class */
    uint32_t parked_heaps;                /* exited threads' heaps kept per node for new ones */
    uint32_t numa;                        /* enum hak_numa_mode */
    uint32_t numa_policy;                 /* enum hak_numa_policy */
    size_t interleave_bytes;              /* large blocks from this size spread over all nodes */
    uint32_t stats;                       /* enum hak_stats_mode: the report at exit */
    char stats_file[HAK_OPTION_PATH_MAX]; /* where it goes ("": stderr); %p: the pid */
    uint32_t huge_pages;                  /* enum hak_huge_mode: transparent huge pages */
    uint32_t harden;                      /* hardening level 0, 1 or 2 (harden.h) */
    bool hot_bytes_fixed;                 /* set by mallopt: the HotSpanBox budget does not grow */
};

extern struct hak_options hak_options;

enum hak_option_type { HAK_OPT_BYTES, HAK_OPT_U32, HAK_OPT_U64, HAK_OPT_CHOICE, HAK_OPT_PATH };

struct hak_option {
    const char *name;
    enum hak_option_type type;
    void *value;                /* in hak_options, which holds the default until loaded */
    const char *help;           /* one line, for the statistics report */
    const char *doc;            /* for README and hakmem(3), `code` quoted; NULL: the help */
    const char *const *choices; /* HAK_OPT_CHOICE: the value is the index */
};

/* Pure data, linked on its own by tools/options-doc. */
extern const struct hak_option hak_option_table[];
extern const size_t hak_option_count;

void hak_options_load(void);
struct hak_printer;
/* The table with current values, for the stats report: as text, and as
 * one JSON object of name: value. */
void hak_options_print(struct hak_printer *out);
void hak_options_print_json(struct hak_printer *out);

/* Whether to ask for huge pages at all: HAKMEM_HUGE_PAGES, auto resolved. */
bool hak_options_huge_pages(void);
/* auto's answer, given whether the host takes back the memory this guest
 * frees and what a small page's fault costs (hak_os_small_page_fault_ns). */
bool hak_options_huge_pages_auto(bool free_memory_reported, uint64_t small_page_fault_ns);

/* The HotSpanBox budget, the one option mallopt may change while other
 * threads read it. */
static inline size_t hak_options_hot_bytes(void)
{
    return __atomic_load_n(&hak_options.hot_bytes, __ATOMIC_RELAXED);
}

/* As glibc's thresholds stop adapting once a program sets one, the
 * HotSpanBox budget stops growing past bytes. */
static inline void hak_options_set_hot_bytes(size_t bytes)
{
    __atomic_store_n(&hak_options.hot_bytes, bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&hak_options.hot_bytes_fixed, true, __ATOMIC_RELAXED);
}

static inline bool hak_options_hot_bytes_fixed(void)
{
    return __atomic_load_n(&hak_options.hot_bytes_fixed, __ATOMIC_RELAXED);
}

#endif

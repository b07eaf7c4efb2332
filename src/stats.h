/* Telemetry: process-wide counters (stats_report.c prints them). */
#ifndef HAK_STATS_H
#define HAK_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "thread_ordinal.h"

enum hak_stat {
    HAK_STAT_MAPPED_BYTES,
    HAK_STAT_UNMAPPED_BYTES,
    HAK_STAT_DECOMMITTED_BYTES,
    HAK_STAT_LENT_BYTES,    /* resident pages moved to fresh memory of another backend */
    HAK_STAT_LEND_FAILURES, /* moves of those the kernel refused or failed */
    HAK_STAT_SUPERSLABS,
    HAK_STAT_ARENA_CHUNKS,
    HAK_STAT_LARGE_ALLOCS,
    HAK_STAT_HOT_HITS,
    HAK_STAT_HOT_EVICTIONS,
    HAK_STAT_HOT_BUDGET_GROWTHS,
    HAK_STAT_ABANDONED_SLABS,
    HAK_STAT_ADOPTED_SLABS,
    HAK_STAT_THREADS,
    HAK_STAT_HEAPS_INHERITED, /* thread heaps taken over from exited threads */
    /* Gauges, up and down: the blocks in use outside the slabs. */
    HAK_STAT_LARGE_LIVE,        /* large mappings handed out */
    HAK_STAT_LARGE_LIVE_MAPPED, /* their bytes mapped */
    HAK_STAT_LARGE_LIVE_USABLE, /* their bytes usable */
    HAK_STAT_NODE_BLOCK_BYTES,  /* hak_malloc_onnode's blocks, by pages */
    /* Kernel mappings the large mappings may hold past one each: where
     * pages moved in, neighbours merged or growth start one, 62 for a
     * mapping whose starts are unknown (arena/large.c, extra_of). */
    HAK_STAT_LARGE_EXTRA_MAPPINGS,
    HAK_STAT_COUNT,
};

/* Pages hakmem hands out, by where they go: first touched (fresh memory,
 * never used or decommitted since, so the program's first write faults)
 * or reused (still resident from an earlier use).  Counted where memory
 * leaves a backend: a slab's carve, a span's block, a large mapping, and
 * the headers of chunks and metadata regions (SSM) when they are created;
 * metadata records recycled within a page are not counted. */
enum hak_page_bucket {
    HAK_PAGES_C0 = 0, /* ... C19: the small classes by index */
    HAK_PAGES_MID = 20,
    HAK_PAGES_L25,
    HAK_PAGES_SSM,
    HAK_PAGES_LARGE,
    HAK_PAGE_BUCKETS,
};

struct hak_page_counts {
    _Atomic uint64_t first;
    _Atomic uint64_t reused;
};

/* The counters and page counts come in stripes, a thread adding to the one
 * its ordinal picks, and readers sum them: with one copy, l25_steady's two
 * threads counted the HotSpanBox's hits and the L25 pages on one line, and
 * 45% of hak_hot_span_take's samples sat after its locked add.  Threads of
 * different stripes never write the same line. */
#define HAK_STAT_STRIPES 32u
_Static_assert(HAK_THREAD_ORDINALS % HAK_STAT_STRIPES == 0, "stripes in turn");

struct hak_stat_stripe {
    _Atomic uint64_t counter[HAK_STAT_COUNT];
    struct hak_page_counts pages[HAK_PAGE_BUCKETS];
} __attribute__((aligned(64)));

extern struct hak_stat_stripe hak_stat_stripes[HAK_STAT_STRIPES];

static inline struct hak_stat_stripe *hak_stat_my_stripe(void)
{
    return &hak_stat_stripes[hak_thread_ordinal() % HAK_STAT_STRIPES];
}

/* The sums over the stripes written so far. */
uint64_t hak_stat_read(enum hak_stat which);
struct hak_page_counts_now {
    uint64_t first;
    uint64_t reused;
};
struct hak_page_counts_now hak_stat_read_pages(enum hak_page_bucket bucket);
/* Bytes mapped now. */
uint64_t hak_stat_mapped_now(void);

/* Bytes mapped per node, and frees of another node's blocks by pair. */
extern _Atomic uint64_t hak_stat_node_mapped[64];
extern _Atomic uint64_t hak_stat_remote_by_pair[64][64];
/* The most each node, and all nodes together, ever had mapped, and what
 * all have now (malloc_info). */
extern _Atomic uint64_t hak_stat_node_peak[64];
extern _Atomic uint64_t hak_stat_nodes_mapped;
extern _Atomic uint64_t hak_stat_nodes_peak;

static inline void hak_stat_raise_peak(_Atomic uint64_t *peak, uint64_t value)
{
    uint64_t seen = atomic_load_explicit(peak, memory_order_relaxed);
    while (value > seen && !atomic_compare_exchange_weak_explicit(
                               peak, &seen, value, memory_order_relaxed, memory_order_relaxed))
        ;
}

static inline void hak_stat_node_map(unsigned node, int64_t bytes)
{
    uint64_t now = atomic_fetch_add_explicit(&hak_stat_node_mapped[node], (uint64_t)bytes,
                                             memory_order_relaxed) +
                   (uint64_t)bytes;
    uint64_t all =
        atomic_fetch_add_explicit(&hak_stat_nodes_mapped, (uint64_t)bytes, memory_order_relaxed) +
        (uint64_t)bytes;
    if (bytes > 0) {
        hak_stat_raise_peak(&hak_stat_node_peak[node], now);
        hak_stat_raise_peak(&hak_stat_nodes_peak, all);
    }
}

static inline void hak_stat_remote_free(unsigned from, unsigned to)
{
    atomic_fetch_add_explicit(&hak_stat_remote_by_pair[from][to], 1, memory_order_relaxed);
}

static inline void hak_stat_pages_out(enum hak_page_bucket bucket, uint64_t first, uint64_t reused)
{
    struct hak_page_counts *counts = &hak_stat_my_stripe()->pages[bucket];
    if (first)
        atomic_fetch_add_explicit(&counts->first, first, memory_order_relaxed);
    if (reused)
        atomic_fetch_add_explicit(&counts->reused, reused, memory_order_relaxed);
}

/* Counts the pages [first, end) of a block or span as handed out, where
 * those below touched (the most it ever handed out) were handed out before:
 * reused there, first touched above.  Returns the new mark. */
static inline uint64_t hak_stat_pages_handed_out(enum hak_page_bucket bucket, uint64_t first,
                                                 uint64_t end, uint64_t touched)
{
    if (end <= first)
        return touched;
    uint64_t reused = touched <= first ? 0 : (touched < end ? touched : end) - first;
    hak_stat_pages_out(bucket, end - first - reused, reused);
    return end > touched ? end : touched;
}

static inline void hak_stat_add(enum hak_stat which, uint64_t n)
{
    atomic_fetch_add_explicit(&hak_stat_my_stripe()->counter[which], n, memory_order_relaxed);
}

/* A gauge's stripes wrap below 0 when a thread takes off what another
 * put on; their sum, modulo 2^64 as well, is right (hak_stat_read). */
static inline void hak_stat_gauge(enum hak_stat which, int64_t delta)
{
    hak_stat_add(which, (uint64_t)delta);
}

/* The topology layer's account of where the nodes came from, which
 * HAKMEM_STATS prints: a text printer (fd < 0), complete when noted and
 * never written again. */
struct hak_printer;
void hak_stats_note_topology(const struct hak_printer *note);
/* The note, or NULL before the topology is known. */
const struct hak_printer *hak_stats_topology_note(void);

#endif

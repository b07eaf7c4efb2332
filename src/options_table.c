/* The options and their defaults, apart from the code that parses and prints
 * them, so that tools/options-doc can link this file alone and print the
 * options table of README.md and hakmem(3) from it. */
#include "options.h"

struct hak_options hak_options = {
    .hot_bytes = 32u << 20,
    .decay_ms = 5000,
    .small_cache = 64,
    .mid_ring = 48,
    .l25_ring = 16,
    .ring_bytes = 512u << 10,
    .parked_heaps = 4,
    .numa = HAK_NUMA_AUTO,
    .numa_policy = HAK_POLICY_PREFERRED,
    .interleave_bytes = 0,
    .stats = HAK_STATS_OFF,
    .huge_pages = HAK_HUGE_AUTO,
    .harden = 1,
};

static const char *const numa_modes[] = {"auto", "off", NULL};
static const char *const numa_policies[] = {"preferred", "bind", NULL};
static const char *const harden_levels[] = {"0", "1", "2", NULL};
static const char *const stats_modes[] = {"0", "1", "json", NULL};
static const char *const huge_modes[] = {"auto", "0", "1", NULL};

const struct hak_option hak_option_table[] = {
    {"HAKMEM_STATS", HAK_OPT_CHOICE, &hak_options.stats,
     "1: print statistics at exit; json: the same as one JSON object",
     "`1`: print per-class, per-node and page statistics when the program exits; `json`: the "
     "same as one JSON object",
     stats_modes},
    {"HAKMEM_STATS_FILE", HAK_OPT_PATH, hak_options.stats_file,
     "write the statistics to this file (%p: the process id), not stderr",
     "write the report to this file instead of stderr, appending; `%p` stands for the process id "
     "(implies `HAKMEM_STATS=1`)",
     NULL},
    {"HAKMEM_HOT_BYTES", HAK_OPT_BYTES, &hak_options.hot_bytes,
     "freed Mid/L25 spans kept resident per node and shard (bytes; K, M, G suffixes)",
     "freed Mid/L25 spans kept resident per node and shard (the HotSpanBox budget: a node's "
     "box is 4 shards, threads take one each in the order they first allocate); a shard "
     "that keeps being asked for spans it just gave back for want of room doubles it, up to "
     "8 times this, and halves it again as spans idle out; the spans of a thread's idle "
     "caches, given up as it grows in other sizes, may stay over it for the node's next "
     "SuperSlab to take their pages, until the shard's next span put or taken, the node's "
     "next fresh memory, or the decay; "
     "`mallopt(M_TRIM_THRESHOLD)` sets it for good",
     NULL},
    {"HAKMEM_DECAY_MS", HAK_OPT_U64, &hak_options.decay_ms,
     "how long a freed span, cached large block or empty SuperSlab stays resident (ms)",
     "how long, in milliseconds, a freed span, a cached large block or an empty SuperSlab stays "
     "resident before it goes back to the kernel; a freed span idle for a sixty-fourth of it lends "
     "its pages to the node's next fresh SuperSlab (moved, not faulted in again) or goes back "
     "as the node takes fresh memory for small or large blocks, and an empty SuperSlab lends its "
     "pages to the node's next fresh Mid or L25 spans, or goes back once idle that long as the "
     "node takes fresh memory for those or large blocks; a thread that keeps allocating gives "
     "back the cache of a size it has not allocated for one to two times this long, or for a "
     "sixty-fourth of it, or while it took one minor page fault for each 20 ms of it (250 at "
     "5 s); those two as it takes a slab "
     "for another size from its node (the spans its blocks leave empty then count as idle that "
     "long)",
     NULL},
    {"HAKMEM_SMALL_CACHE", HAK_OPT_U32, &hak_options.small_cache,
     "free blocks a thread caches per small class (C0-C19) at first",
     "free blocks a thread caches per small class (C0-C19) at first; a class that flushes and "
     "refills in turn grows its cache, up to 32768 blocks or 2 MiB, within 8 MiB per thread; a "
     "refill that takes a slab's longer list of freed blocks whole holds it beyond that size "
     "until the cache is next empty or flushes",
     NULL},
    {"HAKMEM_MID_RING", HAK_OPT_U32, &hak_options.mid_ring,
     "free blocks a thread caches per Mid class (1-32 KiB) at first",
     "free blocks a thread caches per Mid class (1-32 KiB) at first; a class that flushes and "
     "refills in turn grows its cache, up to 4 MiB, within the thread's share of 64 MiB of "
     "growth among the live threads (4-16 MiB) for the Mid and L25 classes up to 64 KiB",
     NULL},
    {"HAKMEM_L25_RING", HAK_OPT_U32, &hak_options.l25_ring,
     "free blocks a thread caches per L25 class (32 KiB-1 MiB) at first",
     "free blocks a thread caches per L25 class (32 KiB-1 MiB) at first; the classes up to 64 "
     "KiB grow as the Mid ones do, and the bigger ones, within 32 MiB per thread, while the "
     "program writes less than half of their blocks",
     NULL},
    {"HAKMEM_RING_BYTES", HAK_OPT_BYTES, &hak_options.ring_bytes,
     "bound on the bytes cached per Mid/L25 class and thread at first",
     "bound on the bytes one thread caches per Mid/L25 class at first", NULL},
    {"HAKMEM_PARKED_HEAPS", HAK_OPT_U32, &hak_options.parked_heaps,
     "exited threads' heaps kept per node for the next threads to take over (0: none)",
     "heaps of exited threads kept per NUMA node, their caches and slabs as the threads left "
     "them, for the node's next new threads to take over; one kept longer than "
     "`HAKMEM_DECAY_MS` (seen at any thread's next look for idle caches or the next exit), or "
     "past this many newer ones, gives its blocks and slabs back as an exiting thread's does "
     "with `0`, and so do all at `malloc_trim`",
     NULL},
    {"HAKMEM_HUGE_PAGES", HAK_OPT_CHOICE, &hak_options.huge_pages,
     "1: huge pages for Mid/L25 chunks past 8 MiB and for written large blocks; auto: as 1, "
     "but none in a VM whose host takes back freed memory, unless small pages fault slowly there",
     "`1`: once a process has 8 MiB of Mid/L25 chunks, new ones use transparent huge pages, and "
     "so do new large-block mappings while the large blocks it frees were mostly written; "
     "`auto`: as `1`, except in a virtual machine whose balloon reports free memory to the host, "
     "where a huge page mostly faults in the host too: there none, unless a small page's fault "
     "takes 4 us or more (timed once, on 8 pages), as where the hypervisor shadows the guest's "
     "page tables; `0`: never",
     huge_modes},
    {"HAKMEM_NUMA", HAK_OPT_CHOICE, &hak_options.numa, "auto: one backend per node; off: one",
     "`auto`: one backend per NUMA node; `off`: one backend for the machine, nothing bound",
     numa_modes},
    {"HAKMEM_NUMA_POLICY", HAK_OPT_CHOICE, &hak_options.numa_policy,
     "preferred (fall back to other nodes when full) or bind",
     "`preferred`: fall back to other nodes when one is full; `bind`: never", numa_policies},
    {"HAKMEM_INTERLEAVE_BYTES", HAK_OPT_BYTES, &hak_options.interleave_bytes,
     "large blocks from this size are interleaved over all nodes (0: never)",
     "blocks of at least this size are interleaved over all nodes (`0`: never)", NULL},
    {"HAKMEM_HARDEN", HAK_OPT_CHOICE, &hak_options.harden,
     "0: no checks; 1: encoded links, double and invalid frees; 2: also guard pages, canaries",
     "`0`: no checks; `1`: encoded links, double and invalid frees; `2`: also guard pages and "
     "canaries",
     harden_levels},
};

const size_t hak_option_count = sizeof(hak_option_table) / sizeof(hak_option_table[0]);

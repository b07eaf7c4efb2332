/* The data structures of hakmem, in one place.
 *
 * Memory comes from the OS in chunks aligned to 2 MiB, SuperSlabs and arena
 * chunks to their size (free finds a page's entries from the address
 * alone).  Every chunk starts with a struct hak_chunk_head; the page map
 * (arena/page_map.h) maps each 2 MiB of address space that hakmem owns to
 * the head of its chunk, so a pointer finds its owner in O(1) without
 * touching memory hakmem does not own.
 *
 *   SuperSlab  (2 MiB)  small classes C0-C19 and Mid M0-M7 (up to 4 KiB,
 *                       HAK_SUPERSLAB_CLASSES); 32 slabs of 64 KiB, slab 0
 *                       holds the header.  Per-node shared pool.
 *   Arena chunk (4 MiB) the PageArena: page spans for the other Mid slabs (up
 *                       to 32 KiB) and L25 blocks (32 KiB-1 MiB, one block
 *                       per span).  Freed spans wait in the HotSpanBox, still
 *                       mapped, before they are decommitted and coalesced.
 *   Large      (any)    one mapping per block above 1 MiB.
 *
 * A slab (struct hak_slab) is a run of memory carved into blocks of one class
 * and owned by one thread heap.  The owner allocates and frees without
 * atomics; other threads push freed blocks onto the slab's remote list.
 */
#ifndef HAK_INTERNAL_H
#define HAK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HAK_API __attribute__((visibility("default")))
/* On every global one file defines and others use: -fvisibility=hidden
 * covers definitions only, and without this the compiler reaches a global
 * declared extern through the GOT, an instruction more at each use. */
#define HAK_SHARED __attribute__((visibility("hidden")))
/* On the globals every process writes at start-up or at its first
 * allocation, which the linker would scatter over a dozen pages between
 * the big per-node tables: gathered in one section, they share three, and
 * each page spared is a page fault (two where read before written, 1-2 us
 * each) in every process.  Only globals written once or seldom (at a
 * mapping, at a thread's start or exit), and one read on a fast path
 * fills its cache lines (hak_link_keys, hak_superslab_region), so that
 * none shares a line with a neighbour written later.  AddressSanitizer
 * puts no redzones around variables in a section of their own: the
 * sanitized build leaves them where the linker puts them. */
#if defined(__SANITIZE_ADDRESS__)
#define HAK_START_UP
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAK_START_UP
#endif
#endif
#ifndef HAK_START_UP
#define HAK_START_UP __attribute__((section("hakmem_start_up")))
#endif
#define HAK_LIKELY(x) __builtin_expect(!!(x), 1)
#define HAK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HAK_NOINLINE __attribute__((noinline))
/* GCC's noipa: no caller learns anything of the function, not even that
 * it never returns, so that a fast path jumps to it with no stack frame of
 * its own.  Clang has no such attribute, and with noinline alone it still
 * finds that the function never returns, and calls it (a push in every
 * free); optnone keeps that from it too.  The functions are cold. */
#if defined(__clang__)
#define HAK_NOIPA __attribute__((noinline, optnone))
#else
#define HAK_NOIPA __attribute__((noipa))
#endif
#define HAK_CACHE_LINE 64

/* hakmem's locks guard a few list operations each: spin briefly before
 * sleeping, since a sleep and wake-up cost more than the whole section
 * (and much more on a loaded machine). */
#define HAK_LOCK_INITIALIZER PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP

#define HAK_PAGE_SHIFT 12
#define HAK_PAGE_SIZE ((size_t)1 << HAK_PAGE_SHIFT)
#define HAK_CHUNK_SHIFT 21
#define HAK_CHUNK_SIZE ((size_t)1 << HAK_CHUNK_SHIFT)

#define HAK_SUPERSLAB_SIZE HAK_CHUNK_SIZE
#define HAK_SLAB_SHIFT 16
#define HAK_SLAB_SIZE ((size_t)1 << HAK_SLAB_SHIFT)
#define HAK_SLABS_PER_SUPERSLAB (HAK_SUPERSLAB_SIZE / HAK_SLAB_SIZE)
#define HAK_SLAB_PAGES (HAK_SLAB_SIZE / HAK_PAGE_SIZE)
#define HAK_SUPERSLAB_PAGES (HAK_SUPERSLAB_SIZE / HAK_PAGE_SIZE)

#define HAK_ARENA_CHUNK_SIZE (2 * HAK_CHUNK_SIZE)
#define HAK_ARENA_PAGES (HAK_ARENA_CHUNK_SIZE / HAK_PAGE_SIZE)

#define HAK_MAX_NODES 64
/* A node's HotSpanBox is this many boxes, each with its lock; a thread
 * puts and takes in its own first (arena/hot_span_box.c). */
#define HAK_HOT_SPAN_SHARDS 4
#define HAK_NO_NODE 0xffu       /* slab: serves no blocks */
#define HAK_HEAPLESS_NODE 0xfeu /* thread: no heap yet, never equals a slab's */

/* Size classes: C0-C7 are 16 to 128 B in steps of 16, C8-C19 four per
 * doubling up to 1 KiB (160, 192, 224, 256, 320 ... 1024 B); then four per
 * doubling up to 1 MiB: Mid (1280 B ... 32 KiB) and L25 (40 KiB ... 1 MiB),
 * the 10-28 KiB blocks HAK_CLASS_COLOUR bytes longer (size_class.c).
 * Steps of a quarter waste an eighth of a block on average, where powers
 * of two wasted a quarter (redis: 148 MB resident against 99 MB with
 * jemalloc). */
#define HAK_SMALL_CLASSES 20
#define HAK_SMALL_MAX 1024
#define HAK_MID_CLASSES 20
#define HAK_MID_MAX (32 * 1024)
#define HAK_L25_CLASSES 20
#define HAK_L25_MAX (1024 * 1024)
#define HAK_NUM_CLASSES (HAK_SMALL_CLASSES + HAK_MID_CLASSES + HAK_L25_CLASSES)
#define HAK_FIRST_MID HAK_SMALL_CLASSES
/* The classes whose blocks SuperSlabs serve: the small ones, and the Mid
 * ones up to a page (1280 B ... 4 KiB), whose spans would be a slab long.
 * Blocks of both sizes then share one address space: the slabs a phase of
 * one size frees serve the next phase's other size where they lie, with
 * free's fast path for either (thread_heap.h), where Mid spans took the
 * SuperSlabs' pages by moving them (hak_shared_pool_lend) and gave them
 * back the same way, a mremap each way, in every round of a program whose
 * phases alternate (bench/phases with no pauses, 9 alternating runs:
 * 14.8M ops/s against 15.3M so, 0.90 and 0.97 of mimalloc's speed). */
#define HAK_SUPERSLAB_CLASSES (HAK_FIRST_MID + 8)
/* A SuperSlab page's byte (struct hak_superslab) holds its class below
 * HAK_PAGE_TAG_SHIFT and, above, the page tag of the heap that owns its
 * slab: one of HAK_PAGE_TAGS, dealt to heaps in turn (struct hak_thread). */
#define HAK_PAGE_TAG_SHIFT 5
#define HAK_PAGE_TAGS 8
#define HAK_PAGE_CLASS_MASK ((1u << HAK_PAGE_TAG_SHIFT) - 1)
/* A SuperSlab page's class where no block of a live slab starts. */
#define HAK_NO_PAGE_CLASS HAK_PAGE_CLASS_MASK
/* The page bytes XOR a thread's tag that carry its own tag: one per class
 * value (struct hak_thread, page_divisors). */
#define HAK_PAGE_MAGICS (HAK_PAGE_CLASS_MASK + 1)
_Static_assert(HAK_SUPERSLAB_CLASSES <= HAK_NO_PAGE_CLASS &&
                   HAK_PAGE_TAGS << HAK_PAGE_TAG_SHIFT <= 256,
               "a page's byte holds its class and its owner's tag");
#define HAK_FIRST_L25 (HAK_SMALL_CLASSES + HAK_MID_CLASSES)

enum hak_chunk_kind {
    HAK_CHUNK_SUPERSLAB = 1,
    HAK_CHUNK_ARENA,
    HAK_CHUNK_LARGE,
};

/* How free() treats a chunk's blocks (harden.h).  The page map's entry for
 * the chunk tells the level-1 path from the others (arena/page_map.h). */
enum hak_free_route {
    HAK_ROUTE_FAST = 1, /* level 1: front/thread_heap.h, inline */
    HAK_ROUTE_PLAIN,    /* level 0: unchecked, inline */
    HAK_ROUTE_CHECKED,  /* checked mode: out of line, exact */
    HAK_ROUTE_LARGE,    /* a large mapping */
};

/* At offset 0 of every chunk. */
struct hak_chunk_head {
    uint32_t kind;
    uint32_t node;
    size_t map_size;             /* bytes mapped, from the head */
    struct hak_chunk_head *next; /* in its backend's list */
    struct hak_chunk_head *prev;
    uint32_t route; /* enum hak_free_route */
    char reserved[HAK_CACHE_LINE - 36];
};

/* The view of SuperSlabs and arena chunks that free() uses: a page table
 * right after the head gives every page's slab. */
struct hak_chunk {
    struct hak_chunk_head head;
    struct hak_slab *page_slab[];
};

enum hak_slab_kind {
    HAK_SLAB_INVALID = 0, /* header pages, uncarved and guard pages, spans not in use */
    HAK_SLAB_SMALL,
    HAK_SLAB_MID,
    HAK_SLAB_L25,
    HAK_SLAB_FREE_SPAN,
    /* In the HotSpanBox: this plus the shard that holds it, so that one
     * read tells a neighbour both (arena/hot_span_box.c). */
    HAK_SLAB_HOT_SPAN,
    /* One block placed by hak_malloc_onnode. */
    HAK_SLAB_NODE_BLOCK = HAK_SLAB_HOT_SPAN + HAK_HOT_SPAN_SHARDS,
};

static inline bool hak_slab_kind_is_hot(unsigned kind)
{
    return kind - HAK_SLAB_HOT_SPAN < HAK_HOT_SPAN_SHARDS;
}

/* Where a slab is, from its owner's point of view. */
enum hak_slab_state {
    HAK_STATE_NONE = 0,
    HAK_STATE_CUR,       /* heap->cur[class] */
    HAK_STATE_PARTIAL,   /* on the heap's partial list: has free blocks */
    HAK_STATE_FULL,      /* on the heap's full list: remote frees notify */
    HAK_STATE_ABANDONED, /* owner exited with blocks still in use */
    HAK_STATE_POOL,      /* returned to its backend */
};

/* Low bits of hak_slab.remote: how a remote free must tell the owner. */
enum hak_remote_flag {
    HAK_REMOTE_NORMAL = 0,    /* the owner will look at this slab anyway */
    HAK_REMOTE_NOTIFY = 1,    /* slab is full: the next remote free queues it */
    HAK_REMOTE_NOTIFYING = 2, /* a remote free is queueing it right now */
    HAK_REMOTE_NEVER = 3,     /* no owner: nobody to tell */
    HAK_REMOTE_FLAGS = 3,
};
/* The top bits of hak_slab.remote: how many blocks the list holds, so that
 * the owner takes the count with the list and walks it only to append its
 * own free list (xmalloc_deep: 9% of the time walked the list's blocks, a
 * cache miss each, freshly written on another CPU).  Below them the first
 * block's address, under 2^48 as every user-space mapping is (x86-64 and
 * arm64 hand out no higher address unless asked); a slab has fewer blocks
 * than the count can hold. */
#define HAK_REMOTE_COUNT_SHIFT 48
#define HAK_REMOTE_COUNT_MAX ((1u << (64 - HAK_REMOTE_COUNT_SHIFT)) - 1)

struct hak_heap;

struct hak_slab {
    /* Read-mostly: set when the slab is handed to a heap, read by every free,
     * also from other threads.  Kept apart from the written fields (seed 004:
     * sharing one line between both halved HAProxy's pool throughput). */
    _Atomic(struct hak_heap *) owner;
    char *start;
    char *end;
    struct hak_chunk_head *chunk;
    uint32_t block_size;
    uint32_t capacity;
    uint32_t first_page; /* arena spans: index of the first page in chunk */
    uint32_t pages;      /* arena spans: length */
    uint8_t kind;
    uint8_t cls;
    uint8_t node;
    /* node while the slab serves blocks, HAK_NO_NODE otherwise: free()
     * compares it with the thread's node in one test, where the block is
     * not in the thread's part of the SuperSlab region (superslab.h) */
    uint8_t free_node;
    /* Pages from start ever handed out since the memory was last fresh
     * (page telemetry, and what is resident): grows on first touch, and
     * moves with pages lent between the backends (hak_os_lend). */
    uint32_t touched_pages;
    /* The block-start test's bound for its class and count of blocks
     * (hak_block_limit), so that free tests that a pointer starts one of
     * them with no load of the class table but the magic (thread_heap.h);
     * 0, which no offset passes, while a SuperSlab's slab serves no
     * blocks. */
    uint64_t block_limit;

    /* Written by the owner only. */
    void *free;
    uint32_t used; /* blocks handed out and not freed locally or collected */
    uint8_t state;
    bool queued; /* on the owner's delayed list; must not be released yet */
    /* Arena spans: its pages were never handed out since their chunk was
     * mapped, and so are zero but for the first touched_pages, which were
     * lent (hak_page_arena_alloc; calloc reads it). */
    bool fresh;
    /* The owner's page tag, which a SuperSlab's slab writes into its pages'
     * bytes beside the class (struct hak_superslab). */
    uint8_t page_tag;
    char *carve; /* first block never handed out */
    struct hak_slab *next;
    struct hak_slab *prev;
    struct hak_slab *age_next; /* HotSpanBox age order, oldest first */
    struct hak_slab *age_prev;
    uint64_t freed_ms; /* when it entered the HotSpanBox */
    char pad1[HAK_CACHE_LINE - 64];

    /* Written by other threads. */
    _Atomic(uintptr_t) remote; /* count | block list | enum hak_remote_flag */
    struct hak_slab *delayed_next;
    char pad2[HAK_CACHE_LINE - 16];
};

_Static_assert(sizeof(struct hak_slab) == 3 * HAK_CACHE_LINE, "slab layout");
_Static_assert(offsetof(struct hak_slab, free) == HAK_CACHE_LINE, "read-mostly fields, one line");

/* The kernel's mappings in a SuperSlab or an arena chunk, one when it
 * is mapped: each range of pages moved in (hak_os_lend) lands as a
 * mapping of its own, and Linux before 6.17 moves no range that lies over
 * several, so that pages move out of it one mapping at a time
 * (arena/mappings.h).  Written with atomic ORs, ANDs and adds, as
 * threads lend into different spans of one chunk at once, but when the
 * container is mapped anew, which no other thread then holds. */
struct hak_mappings {
    uint32_t lent_ranges; /* moved in since it was mapped */
    bool move_failed;     /* a move out of it failed since it was mapped */
    /* Bit p: page p may start a mapping, a range moved in having started
     * or ended there, and none moved over it since; one the kernel merged
     * with its neighbour keeps its bit, which costs a move more, not a
     * refusal. */
    uint64_t starts[HAK_ARENA_PAGES / 64];
};

struct hak_superslab {
    struct hak_chunk_head head;
    struct hak_slab *page_slab[HAK_SUPERSLAB_PAGES];
    uint32_t free_slabs; /* bit i: slab i is free */
    uint32_t used_slabs;
    uint64_t emptied_ms; /* when its last slab in use came back, as a spare */
    /* Hot spans' pages moved into its slabs, until they are mapped anew. */
    struct hak_mappings mappings;
    /* A copy of page_cls below in its part's page table, for a SuperSlab
     * of the region (arena/superslab.h), written with it; NULL outside. */
    uint8_t *region_page_cls;
    /* The class of every page's slab, where free finds it from a block's
     * address alone (hak_superslab_page_class), for the pages where page_slab
     * has the slab (set as blocks are carved, arena/slab.c), and
     * HAK_NO_PAGE_CLASS elsewhere; with the page tag of the slab's owner
     * above the class (HAK_PAGE_TAG_SHIFT), which free in the region XORs
     * with the thread's own (struct hak_thread).  By page, not by slab:
     * free has the page's number at hand for page_slab.  Apart from the
     * counts above, which the pool writes at every take and give. */
    uint8_t page_cls[HAK_SUPERSLAB_PAGES] __attribute__((aligned(HAK_CACHE_LINE)));
    struct hak_slab slabs[HAK_SLABS_PER_SUPERSLAB] __attribute__((aligned(HAK_CACHE_LINE)));
};

/* A page's entry in its arena chunk's page_info: the class of the slab it
 * belongs to, the node the slab's blocks are freed to (its free_node,
 * HAK_NO_NODE while the page is in no slab that serves blocks) and the
 * low half of the slab's start address.  free takes the class, the node
 * test and the block's offset in its slab (one subtract of the halves)
 * from it: a Mid program's slabs lie in as many lines as it has slabs, and
 * their pages' entries 8 to a line (mid_light's shape, 800k operations
 * under cachegrind: 0.65M first-level data misses where the loads of
 * page_slab and the slab took 1.05M; 1.03 to 1.06 times the operations a
 * second).  The flush and the slow paths read the slab, as they always
 * did. */
struct hak_page_info {
    uint32_t slab_start;
    uint8_t cls;
    uint8_t node;
};
_Static_assert(sizeof(struct hak_page_info) == 8 && HAK_NUM_CLASSES <= 1u << 8 &&
                   HAK_MAX_NODES < HAK_NO_NODE && HAK_NO_NODE <= UINT8_MAX,
               "a page's entry holds its class and node in a byte each");

static inline struct hak_page_info hak_page_info(const struct hak_slab *slab)
{
    return (struct hak_page_info){.slab_start = (uint32_t)(uintptr_t)slab->start,
                                  .cls = (uint8_t)slab->cls,
                                  .node = slab->free_node};
}
#define HAK_PAGE_INFO_NONE ((struct hak_page_info){.node = HAK_NO_NODE})

struct hak_arena_chunk {
    struct hak_chunk_head head;
    struct hak_slab *page_slab[HAK_ARENA_PAGES];
    /* Pages below this one have been handed out as spans: a free into a
     * free span there is a second one (arena/page_arena.c). */
    uint32_t handed_out_pages;
    /* SuperSlab pages moved into its spans, until it is unmapped. */
    struct hak_mappings mappings;
    /* Advised huge pages (page_arena.c), which a range moved in would
     * break up: its spans take none. */
    bool huge_pages;
    /* What free needs of every page (struct hak_page_info), so that it
     * reads no slab: written with page_slab, as blocks are carved
     * (arena/slab.c) and as spans are mapped (hak_span_map_pages). */
    struct hak_page_info page_info[HAK_ARENA_PAGES] __attribute__((aligned(HAK_CACHE_LINE)));
};

/* ptr's offset from the start of its page's slab: the slab is smaller than
 * 4 GiB, so the low halves' difference is the whole one. */
static inline uint32_t hak_page_info_offset(const struct hak_page_info *info, const void *ptr)
{
    return (uint32_t)(uintptr_t)ptr - info->slab_start;
}

#define HAK_SUPERSLAB_HEADER_SLABS 1
#define HAK_ARENA_HEADER_PAGES                                                                     \
    ((sizeof(struct hak_arena_chunk) + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE)
#define HAK_ARENA_USABLE_PAGES (HAK_ARENA_PAGES - HAK_ARENA_HEADER_PAGES)

_Static_assert(sizeof(struct hak_superslab) <= HAK_SLAB_SIZE - HAK_PAGE_SIZE,
               "superslab header fits slab 0 below its last page, a guard at level 2");
_Static_assert(__builtin_offsetof(struct hak_superslab, page_slab) ==
                   __builtin_offsetof(struct hak_chunk, page_slab),
               "page table offset");
_Static_assert(__builtin_offsetof(struct hak_arena_chunk, page_slab) ==
                   __builtin_offsetof(struct hak_chunk, page_slab),
               "page table offset");

#define HAK_LARGE_MAPPING_STARTS 62
/* The kernel mappings past one each, all large mappings together, at
 * which fill stops moving pages, and cached mappings stop merging and
 * growing (arena/large.c, room_for_extra). */
#define HAK_LARGE_EXTRA_MAPPINGS_MAX 2048
#define HAK_LARGE_STARTS_UNKNOWN UINT8_MAX

struct hak_large {
    struct hak_chunk_head head;
    size_t offset; /* of the block's pages from the head */
    size_t colour; /* bytes of the block in the head's page, before offset */
    size_t usable;
    size_t requested; /* the size last asked for; in checked mode a canary follows */
    uint64_t freed_ms;
    size_t touched_pages; /* of the block ever handed out (page telemetry) */
    bool cached;          /* freed, kept mapped for reuse */
    bool reusable;        /* node-bound, head page only: may be cached */
    /* Where its kernel mappings after the first may start, in pages from
     * the head, ascending: pages moved in, a neighbour merged or a mapping
     * added after it start one, and kernels before 6.17 refuse to move a
     * range over several (os.h), so that its pages move one mapping at a
     * time (arena/large.c).  fill moves no pages into a mapping past this
     * many (each lands as a kernel mapping of its own, against
     * vm.max_map_count), nor does a merge take it past them.
     * HAK_LARGE_STARTS_UNKNOWN: a live block that realloc grew past them,
     * or a move was refused (the program may have split it, with madvise
     * or mbind on part of it): fill moves none of its pages, nor any into
     * it, and it is neither split nor merged. */
    uint8_t mapping_count;
    uint32_t mapping_starts[HAK_LARGE_MAPPING_STARTS];
};

/* Per-class telemetry, written by the owning thread only. */
struct hak_class_stats {
    uint64_t allocs;       /* all allocations */
    uint64_t refills;      /* allocations that found the cache empty */
    uint64_t flushes;      /* frees that found the cache full */
    uint64_t slabs_in;     /* slabs taken from a backend or adopted */
    uint64_t slabs_out;    /* empty slabs given back */
    uint64_t remote_frees; /* blocks sent to another node's or thread's slab */
    /* Blocks taken from slabs less blocks given back to them (mallinfo's
     * in-use figure); one heap's may go negative, by blocks it collected
     * that another heap took. */
    int64_t blocks_held;
};

/* A list of slabs linked through next/prev. */
struct hak_slab_list {
    struct hak_slab *head;
};

/* Cache capacities are at most this (room is 32 bits; batches are smaller). */
#define HAK_CACHE_LIMIT_MAX 32768u

/* One per thread, made at its first refill; the fast paths never read it:
 * what they need is in struct hak_thread, in TLS. */
struct hak_heap {
    struct hak_thread *thread;       /* the owner's TLS: its caches, for stats */
    uint32_t limit[HAK_NUM_CLASSES]; /* cache capacity in blocks */
    uint32_t batch[HAK_NUM_CLASSES]; /* blocks the next refill adds */
    /* Small classes: what limit holds beyond the class's own capacity for
     * a slab's list the last refill took whole, and room for the frees
     * after it (thread_heap.c, lend_room); 0 if none.  A slab's list is
     * shorter than 2^16 blocks. */
    uint16_t lent[HAK_SMALL_CLASSES];
    bool flushed_last[HAK_NUM_CLASSES]; /* the class last left the fast path to flush */
    /* Classes of blocks over 64 KiB: the turns left before the next look
     * at whether the program writes little of their blocks, the answer of
     * the last look, and how many times the wait between looks doubled
     * while the answer was no (thread_heap.c, blocks_sparse). */
    uint16_t sparse_wait[HAK_NUM_CLASSES];
    bool sparse[HAK_NUM_CLASSES];
    uint8_t sparse_backoff[HAK_NUM_CLASSES];
    /* Small caches: what they may hold (limit[] times block sizes), and
     * each class's head and room when the caches were last looked over
     * for idle ones (thread_heap.c, sizes that fit the program). */
    uint64_t small_cache_bytes;
    /* What the Mid and L25 caches may hold beyond their first sizes: [0] of
     * the classes of blocks up to 64 KiB, [1] of the bigger ones. */
    uint64_t big_cache_growth[2];
    void *seen_head[HAK_SMALL_CLASSES];
    uint32_t seen_room[HAK_SMALL_CLASSES];
    /* Refills and flushes so far, and each class's mallocs when the caches
     * were last looked over for ones that idle for a decay period (modulo
     * 2^32, compared for equality only, as below). */
    uint32_t slow_events;
    uint64_t idle_look_ms;
    uint32_t idle_allocs[HAK_NUM_CLASSES];
    /* For release_idle_for_growth (thread_heap.c): the time of each
     * class's last refill or flush and its mallocs then; its mallocs when
     * the idle look last read the clock, and the first reading that saw
     * them change (the class malloc'd no later).
     * Milliseconds and mallocs modulo 2^32, compared for age and equality
     * only: the heap fits hak_meta_alloc's biggest record. */
    uint32_t slow_ms[HAK_NUM_CLASSES];
    uint32_t slow_allocs[HAK_NUM_CLASSES];
    uint32_t read_allocs[HAK_NUM_CLASSES];
    uint32_t active_ms[HAK_NUM_CLASSES];
    /* Each class's mallocs when release_idle_for_growth last looked, the
     * thread's growth (its minor page faults and the pages of the slabs
     * and spans it took) at the first look that saw them change (modulo
     * 2^32, for differences only), and when it last looked (microseconds,
     * CLOCK_MONOTONIC).  The heap fits the biggest meta record, 8192
     * bytes, with 128 to spare (idle_allocs' halving made room for the
     * Mid classes' foreign lists). */
    uint32_t growth_allocs[HAK_NUM_CLASSES];
    uint32_t active_growth[HAK_NUM_CLASSES];
    uint64_t growth_look_us;
    uint32_t taken_pages;                  /* of slabs and spans from the node, modulo 2^32 */
    bool discard_spans;                    /* while release_idle_for_growth releases caches */
    struct hak_slab *cur[HAK_NUM_CLASSES]; /* slab refills carve from */
    struct hak_slab_list partial[HAK_NUM_CLASSES];
    struct hak_slab_list full[HAK_NUM_CLASSES];
    uint32_t node;
    /* Blocks of other heaps' SuperSlab slabs freed here, by class: they go
     * home in runs, as many at a time as a flush of the class sends, at a
     * refill of the class and whenever its cache is emptied (thread_heap.c,
     * hak_heap_free_unowned). */
    void *foreign[HAK_SUPERSLAB_CLASSES];
    uint32_t foreign_count[HAK_SUPERSLAB_CLASSES];
    struct hak_quarantine *quarantine; /* under memcheck: front/quarantine.h */
    bool registered;                   /* thread_heap.c: heap_create */
    struct hak_heap *next_live;        /* registry, for stats */
    struct hak_heap *prev_live;
    struct hak_class_stats stats[HAK_NUM_CLASSES];

    /* Slabs queued by remote frees; written by other threads. */
    _Atomic(struct hak_slab *) delayed __attribute__((aligned(HAK_CACHE_LINE)));
};

/* What the fast paths touch, in TLS: each field lies at a fixed offset from
 * the thread pointer, which the fast paths add to the variable's offset in
 * a register (hak_my_thread), with no pointer to load from memory first (a
 * heap pointer cost malloc and free a load and an add each).  head[] and
 * room[] of the small classes take 160 and 80 bytes, a few cache lines
 * (seed 000: a bigger ring in one pool pushed another pool's hot state out
 * of L1 and cost 5%).
 *
 * room: the blocks a class's cache takes before it flushes, which free
 * counts down and tests in one instruction; in its own word, as malloc
 * counts it up in the same width (a narrower store before a wider load of
 * the same word is not forwarded: a stall on every malloc after a free).
 *
 * malloc compares *cpu_word, which the kernel rewrites whenever it moves the
 * thread to another CPU (rseq), with cpu, what it read there when it last
 * made sure that the caches hold blocks of the thread's node; on one node,
 * or without rseq, cpu_word points at a constant that always matches.  A
 * fork sets cpu to a value no CPU has, so that the thread's next malloc
 * waits for the fork to end (front/thread_heap.c, wait_for_fork).
 *
 * Other threads read room[] and allocs[] (stats, mallinfo) through
 * heap->thread while the heap is registered. */
struct hak_thread {
    /* Free blocks, linked through their first word; HAK_LIST_END when
     * none (block/block_link.h), never NULL. */
    void *head[HAK_NUM_CLASSES];
    uint32_t room[HAK_NUM_CLASSES];
    uint64_t allocs[HAK_NUM_CLASSES]; /* mallocs served, for stats */
    /* The block-start test's operands (hak_block_starts) by a SuperSlab
     * page's byte (class and owner's page tag) XOR page_tag, index i: the
     * magic number at page_divisors[i], the bound at
     * page_divisors[HAK_PAGE_MAGICS + i].  The bounds are the SuperSlab
     * classes' (hak_class_divisors) at the indexes the bytes of the pages
     * of the thread's own slabs give, and 0 for every other byte,
     * HAK_NO_PAGE_CLASS's and those of other heaps' slabs, which fails
     * every offset; so only the indexes below HAK_PAGE_MAGICS, where a
     * byte's tag is the thread's, need a magic of their own, and above
     * them the multiply reads a bound, to no effect (2 KiB less TLS, which
     * every thread's start copies, than a magic for every byte).  free
     * tests that a block of the thread's part of the region starts a block
     * of its page's class with these, where the thread's own address is at
     * hand, and reads no slab (thread_heap.h); a block of another
     * heap's slab fails the test too and goes home from the slow path, not
     * into this thread's cache, where its next malloc of the class would
     * take it back: a block of 16 B shares its cache line with three of the
     * other thread's, which both threads then write (passive false sharing,
     * Hoard's cache-scratch: 3.3 times glibc's time on two CPUs). */
    uint64_t page_divisors[HAK_PAGE_MAGICS + (1u << 8)];
    /* The heap's, shifted by HAK_PAGE_TAG_SHIFT; as wide as the index it is
     * XORed into, so that free XORs it straight from memory. */
    uint64_t page_tag;
    /* The thread's node's part of the SuperSlab region and how much of it
     * holds SuperSlabs, when last looked (arena/superslab.h): free tells
     * the node's small blocks by these two, with no test of the node.
     * HAK_REGION_UNSET and 0 without a heap, so that free takes the page
     * map, which tells a heapless thread's frees apart. */
    uintptr_t region_base;
    size_t region_used;
    /* The part's page table: the byte of the page at region_base + n
     * pages is page_table[n], one load from the offset free has at hand
     * where the SuperSlab's own copy takes two masks of the address. */
    const uint8_t *page_table;
    struct hak_heap *heap;
    uint32_t node;
    int32_t cpu;
    const volatile int32_t *cpu_word;
};

/* A thread's heap before its first allocation and after its exit: then its
 * caches are empty and its node is HAK_HEAPLESS_NODE, so both fast paths
 * fall through to the slow ones without a separate check. */
extern struct hak_heap hak_empty_heap HAK_SHARED;
extern struct hak_slab hak_empty_slab HAK_SHARED;
/* The page table's entry for pages that hold no block start: chunk headers,
 * pages of a slab not carved yet (never handed out), and pages inside a
 * block bigger than a page (hak_interior_slab), but for an L25 block's,
 * which map to its slab (arena/slab.h, hak_slab_is_whole_span).  Both
 * serve no blocks, so a free there leaves the fast path. */
extern struct hak_slab hak_invalid_slab HAK_SHARED;
extern struct hak_slab hak_interior_slab HAK_SHARED;

void hak_init(void);
/* Checked mode: whether ptr, a block hakmem owns, was asked for with other
 * than size bytes or is not aligned to alignment, as a sized free
 * (free_sized, free_aligned_sized, a sized delete) names them; false for
 * NULL and for a pointer hakmem does not own, which free refuses. */
bool hak_sized_free_mismatch(void *ptr, size_t size, size_t alignment);

#endif

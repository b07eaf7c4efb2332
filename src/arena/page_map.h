/* Which chunk owns an address: a two-level radix table over 2 MiB units of
 * the 47-bit user address space.  Lookups are lock-free and never touch
 * memory outside hakmem's own tables. */
#ifndef HAK_PAGE_MAP_H
#define HAK_PAGE_MAP_H

#include "../internal.h"

#define HAK_MAP_ADDRESS_BITS 47
#define HAK_MAP_LEAF_BITS 13
#define HAK_MAP_TOP_BITS (HAK_MAP_ADDRESS_BITS - HAK_CHUNK_SHIFT - HAK_MAP_LEAF_BITS)

/* An entry says how free() treats the 2 MiB unit.  For a chunk whose blocks
 * take the level-1 fast route (chunk->route is HAK_ROUTE_FAST) it is the
 * chunk's address, positive; a SuperSlab's has HAK_MAP_SUPERSLAB set as
 * well.  free then finds the page's slab, or its entry, from the address
 * alone (hak_superslab_page_slab, hak_arena_page_info): SuperSlabs and
 * arena chunks are as aligned as they are big, so those loads wait on no
 * load of the map's.  Any other chunk's entry is its address with
 * HAK_MAP_ROUTED set, which makes it negative, and memory hakmem does not
 * own has 0: one test (entry <= 0) sends both off the fast path.
 *
 * A top entry is its leaf's address less 8 bytes for every unit below the
 * leaf's first, so that a leaf too is indexed by the whole unit number; 0
 * for no leaf (page_map.c keeps a leaf from where that would read as 0). */
#define HAK_MAP_ROUTED ((uintptr_t)1 << 63)
#define HAK_MAP_SUPERSLAB ((uintptr_t)1)

typedef _Atomic(uintptr_t) hak_map_leaf[1 << HAK_MAP_LEAF_BITS];

extern _Atomic uintptr_t hak_page_map_top[1 << HAK_MAP_TOP_BITS] HAK_SHARED;

static inline uintptr_t hak_page_map_entry(const void *ptr)
{
    uintptr_t unit = (uintptr_t)ptr >> HAK_CHUNK_SHIFT;
    uintptr_t top = unit >> HAK_MAP_LEAF_BITS;
    if (HAK_UNLIKELY(top >= (1u << HAK_MAP_TOP_BITS)))
        return 0;
    uintptr_t leaf = atomic_load_explicit(&hak_page_map_top[top], memory_order_relaxed);
    if (HAK_UNLIKELY(!leaf))
        return 0;
    return atomic_load_explicit((_Atomic uintptr_t *)(leaf + unit * sizeof(uintptr_t)),
                                memory_order_relaxed);
}

static inline struct hak_chunk_head *hak_page_map_lookup(const void *ptr)
{
    return (struct hak_chunk_head *)(hak_page_map_entry(ptr) &
                                     ~(HAK_MAP_ROUTED | HAK_MAP_SUPERSLAB));
}

/* The slab of a block in a SuperSlab or arena chunk. */
static inline struct hak_slab *hak_chunk_slab(struct hak_chunk_head *chunk, const void *ptr)
{
    size_t page = ((uintptr_t)ptr - (uintptr_t)chunk) >> HAK_PAGE_SHIFT;
    return ((struct hak_chunk *)chunk)->page_slab[page];
}

/* The SuperSlab that holds ptr, an aligned unit, and ptr's page in it. */
static inline const struct hak_superslab *hak_superslab_at(const void *ptr)
{
    return (const struct hak_superslab *)((uintptr_t)ptr & ~(HAK_SUPERSLAB_SIZE - 1));
}

static inline size_t hak_superslab_page(const void *ptr)
{
    return ((uintptr_t)ptr >> HAK_PAGE_SHIFT) % HAK_SUPERSLAB_PAGES;
}

/* The slab of ptr's page in the SuperSlab that holds it.  A SuperSlab is
 * one aligned unit with its page table at a fixed place, so the address
 * alone finds the page's slab: free's store into the thread's cache, whose
 * address takes the slab's class, then waits on two loads, not on the two
 * of the page map before them (fixed_size at level 1: 130 M pairs/s
 * through the entry, 168 M so).  The caller knows that the SuperSlab is
 * hakmem's, from the SuperSlab region or the page map; page is ptr's
 * (hak_superslab_page), which free in the region has from its offset
 * there without a copy of ptr. */
static inline struct hak_slab *hak_superslab_page_slab(const void *ptr, size_t page)
{
    return hak_superslab_at(ptr)->page_slab[page];
}

/* The class of ptr's slab in the SuperSlab that holds it, read beside the
 * slab rather than from it: free's store into the thread's cache then
 * waits on one load, not two (fixed_size at level 1: 142-160 M pairs/s
 * through the slab, 165-183 M so).  HAK_NO_PAGE_CLASS where no block of
 * a live slab starts.  A slab takes a class only while it holds no block,
 * so the two differ only under a free of a block that is not live, as the
 * slab's other fields may then be torn too. */
static inline size_t hak_superslab_page_class(const void *ptr, size_t page)
{
    return __atomic_load_n(&hak_superslab_at(ptr)->page_cls[page], __ATOMIC_RELAXED) &
           HAK_PAGE_CLASS_MASK;
}

/* The same for an arena chunk, which is as aligned as it is big: its page
 * table too is at a fixed place, and free's loads of the slab and class
 * wait on no load of the page map's. */
static inline const struct hak_arena_chunk *hak_arena_chunk_at(const void *ptr)
{
    return (const struct hak_arena_chunk *)((uintptr_t)ptr & ~(HAK_ARENA_CHUNK_SIZE - 1));
}

static inline size_t hak_arena_page(const void *ptr)
{
    return ((uintptr_t)ptr >> HAK_PAGE_SHIFT) % HAK_ARENA_PAGES;
}

static inline struct hak_slab *hak_arena_page_slab(const void *ptr, size_t page)
{
    return hak_arena_chunk_at(ptr)->page_slab[page];
}

static inline const struct hak_page_info *hak_arena_page_info(const void *ptr, size_t page)
{
    return &hak_arena_chunk_at(ptr)->page_info[page];
}

/* Maps [base, base + size) to chunk; base is 2 MiB aligned.  The entry
 * encodes chunk->route, so the head must be written first.  False when a
 * table could not be allocated (and the range is then cleared). */
bool hak_page_map_set(void *base, size_t size, struct hak_chunk_head *chunk);
void hak_page_map_clear(void *base, size_t size);
/* Once the topology is known: chunks mapped before it count as node 0's
 * but were placed by first touch, wherever their threads ran; they move
 * there, once per process. */
void hak_page_map_place_early_chunks(void);
/* Held across fork(). */
void hak_page_map_lock(void);
void hak_page_map_unlock(void);

#endif

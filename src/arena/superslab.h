/* The SuperSlab: a 2 MiB chunk cut into 64 KiB slabs for the small classes. */
#ifndef HAK_SUPERSLAB_H
#define HAK_SUPERSLAB_H

#include "../internal.h"

/* Where the address space allows, the SuperSlabs of the level-1 fast
 * route lie side by side in one reserved range, the region, from its base
 * up to used bytes: then free knows a SuperSlab's block by subtracting and
 * comparing, with no load that waits on the pointer, where the page map
 * takes two loads and five tests.  A SuperSlab there is never unmapped:
 * when it leaves the spares (past its decay, crowded out, or at
 * malloc_trim) its slabs' pages go back to the kernel and it waits for
 * reuse (shared_pool.c), so that every address below used keeps a
 * SuperSlab's header.  The region is reserved as big as the machine's
 * memory (hak_os_reserve, which gives its unused part back under a limit
 * the program sets below what the process has); SuperSlabs beyond it, and
 * all of them under an address-space limit or on another route, are mapped
 * one by one.
 *
 * The region is reserved at start-up (hak_superslab_region_init), before
 * malloc hands out a block, so base never changes while free reads it.
 * free reads both fields without atomic loads, which lets the compiler fold
 * them into its subtract and compare (three instructions fewer than two
 * atomic loads, a copy and the arithmetic): a stale used is smaller, and
 * only sends a block of a SuperSlab this thread has not heard of through
 * the page map, where setup() registered it before used grew. */
struct hak_superslab_region {
    uintptr_t base; /* set once, at start-up; 0 without a region */
    size_t used;    /* grows only, under the lock, once a SuperSlab there is registered */
} __attribute__((aligned(HAK_CACHE_LINE)));
extern struct hak_superslab_region hak_superslab_region HAK_SHARED;

/* ptr's distance from the region's base, which is below used when ptr
 * lies in one of the region's SuperSlabs. */
static inline uintptr_t hak_superslab_region_offset(const void *ptr)
{
    return (uintptr_t)ptr - hak_superslab_region.base;
}

static inline bool hak_superslab_region_holds(const void *ptr)
{
    return hak_superslab_region_offset(ptr) < hak_superslab_region.used;
}

/* Reserves the region where the fast route and the address space allow;
 * called once by hak_init. */
void hak_superslab_region_init(void);
/* Maps and registers a SuperSlab on node; NULL with errno ENOMEM. */
struct hak_superslab *hak_superslab_create(unsigned node);
/* For one outside the region. */
void hak_superslab_destroy(struct hak_superslab *ss);
/* Held across fork(). */
void hak_superslab_region_lock(void);
void hak_superslab_region_unlock(void);

static inline struct hak_superslab *hak_superslab_of(const struct hak_slab *slab)
{
    return (struct hak_superslab *)slab->chunk;
}

static inline unsigned hak_superslab_index(const struct hak_slab *slab)
{
    return (unsigned)(slab - hak_superslab_of(slab)->slabs);
}

#endif

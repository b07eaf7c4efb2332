/* The SuperSlab: a 2 MiB chunk cut into 64 KiB slabs for the small classes. */
#ifndef HAK_SUPERSLAB_H
#define HAK_SUPERSLAB_H

#include "../internal.h"

/* Where the address space allows, the SuperSlabs of the level-1 fast
 * route lie side by side in one reserved range, the region, from its base
 * up to used bytes: then free knows a SuperSlab's block by subtracting and
 * comparing, with no load that waits on the pointer, where the page map
 * takes two loads and five tests.  A SuperSlab there is never unmapped:
 * when it leaves the spares (past its decay, or at malloc_trim)
 * its slabs' pages go back to the kernel and it waits for reuse
 * (shared_pool.c), so that every address below used keeps a
 * SuperSlab's header.  The region is reserved as big as the machine's
 * memory (hak_os_reserve, which gives its unused part back under a limit
 * the program sets below what the process has); SuperSlabs beyond it, and
 * all of them under an address-space limit or on another route, are mapped
 * one by one.
 *
 * base is HAK_REGION_UNSET until it is set, once, before used first grows.
 * On x86-64 free reads base without an atomic load and used after it (a
 * plain load there, which acquires), so that the compiler folds each into
 * the subtract and the compare: a thread that reads base unset, whatever
 * used it reads then, finds every user-space pointer's offset past used,
 * as it does while used is 0.  Elsewhere free reads used first, with
 * acquire, and base after it: a used above 0 comes with the base set
 * before it.  A stale used is smaller, and only sends a block of a
 * SuperSlab this thread has not heard of through the page map, where
 * setup() registered it before used grew. */
struct hak_superslab_region {
    uintptr_t base;      /* set once, under the lock, before used first grows */
    _Atomic size_t used; /* grows only, once a SuperSlab there is registered */
} __attribute__((aligned(HAK_CACHE_LINE)));
extern struct hak_superslab_region hak_superslab_region HAK_SHARED;

/* The base of no region: above every user-space address, so that any
 * user-space pointer minus it is above every used. */
#define HAK_REGION_UNSET ((uintptr_t)1 << 63)
_Static_assert(sizeof(uintptr_t) == 8, "the region's unset base is 2^63");

static inline bool hak_superslab_region_exists(void)
{
    return hak_superslab_region.base != HAK_REGION_UNSET;
}

/* Whether ptr lies in one of the region's SuperSlabs; *offset: ptr's
 * distance from the region's base, which free has at hand for the page's
 * number. */
static inline bool hak_superslab_region_find(const void *ptr, uintptr_t *offset)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    /* Compared in memory, as GCC does not fold an atomic load into the
     * compare (one instruction more in every free). */
    bool below;
    *offset = (uintptr_t)ptr - hak_superslab_region.base;
    __asm__("{cmpq %2, %1|cmp %1, %2}"
            : "=@ccb"(below)
            : "r"(*offset), "m"(hak_superslab_region.used));
    return below;
#else
    size_t used = atomic_load_explicit(&hak_superslab_region.used, memory_order_acquire);
    *offset = (uintptr_t)ptr - hak_superslab_region.base;
    return *offset < used;
#endif
}

static inline bool hak_superslab_region_holds(const void *ptr)
{
    uintptr_t offset;
    return hak_superslab_region_find(ptr, &offset);
}

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

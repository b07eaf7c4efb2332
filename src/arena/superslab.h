/* The SuperSlab: a 2 MiB chunk cut into 64 KiB slabs for the small classes. */
#ifndef HAK_SUPERSLAB_H
#define HAK_SUPERSLAB_H

#include <string.h>

#include "../internal.h"

/* Where the address space allows, the SuperSlabs of the level-1 fast
 * route lie side by side in one reserved range, the region, cut into one
 * part per node: node n's SuperSlabs lie from base + n * part_size up to
 * used[n].  A thread keeps its node's part in TLS (struct hak_thread), and
 * free knows a block of a SuperSlab of the thread's own node by subtracting
 * and comparing, with no load that waits on the pointer, where the page map
 * takes two loads and five tests, and with no test of the node: the part
 * is the node's.  A SuperSlab there is never unmapped: when it leaves the
 * spares (past its decay, or at malloc_trim) its slabs' pages go back to
 * the kernel and it waits for reuse (shared_pool.c), so that every address
 * below a part's used keeps a SuperSlab's header.  The region is reserved
 * as big as the machine's memory (hak_os_reserve, which gives what each
 * part never used back under a limit the program sets below what the
 * process has), one part per node the process could allocate from at
 * start-up (hak_numa_node_bound); SuperSlabs beyond a full part, those of
 * a node past the parts, and all of them under an address-space limit or
 * on another route, are mapped one by one.
 *
 * base, parts and part_size are set once, under the lock, before any used
 * first grows; a used read with acquire above 0 comes with them set.  A
 * thread's copy of its part's used may be stale, smaller: that only sends
 * a block of a SuperSlab the thread has not heard of through the page map,
 * where setup() registered it before used grew. */
struct hak_superslab_region {
    uintptr_t base;
    size_t part_size;
    unsigned parts;
    _Atomic size_t used[HAK_MAX_NODES];
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

/* Where node's part of the region starts, in *base, and how much of it
 * holds SuperSlabs; HAK_REGION_UNSET and 0 while it holds none, and for a
 * node past the parts (or no node). */
static inline size_t hak_superslab_region_part(unsigned node, uintptr_t *base)
{
    size_t used = node < HAK_MAX_NODES
                      ? atomic_load_explicit(&hak_superslab_region.used[node], memory_order_acquire)
                      : 0;
    *base =
        used ? hak_superslab_region.base + node * hak_superslab_region.part_size : HAK_REGION_UNSET;
    return used;
}

/* Whether ptr lies in one of the region's SuperSlabs (slow paths). */
static inline bool hak_superslab_region_holds(const void *ptr)
{
    const struct hak_superslab_region *region = &hak_superslab_region;
    if (!hak_superslab_region_exists() || !region->part_size)
        return false;
    uintptr_t offset = (uintptr_t)ptr - region->base;
    size_t part = offset / region->part_size;
    return part < region->parts &&
           offset % region->part_size <
               atomic_load_explicit(&region->used[part], memory_order_acquire);
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

/* Free's class byte of each of slab's pages (hak_superslab_page_class)
 * says that no block starts there, until the slab carves blocks of a class
 * again (arena/slab.c): a slab taking a class, or going back to the pool. */
static inline void hak_superslab_clear_page_classes(const struct hak_slab *slab)
{
    memset(&hak_superslab_of(slab)->page_cls[hak_superslab_index(slab) * HAK_SLAB_PAGES],
           HAK_NO_SMALL_CLASS, HAK_SLAB_PAGES);
}

#endif

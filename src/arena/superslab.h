/* The SuperSlab: a 2 MiB chunk cut into 64 KiB slabs for the small classes
 * and the Mid ones up to a page (HAK_SUPERSLAB_CLASSES). */
#ifndef HAK_SUPERSLAB_H
#define HAK_SUPERSLAB_H

#include <string.h>

#include "../internal.h"

/* Where the address space allows, the SuperSlabs of the level-1 fast
 * route lie side by side in one reserved range, the region, cut into one
 * part per node: node n's part starts at base + n * part_size with its
 * page table, table_size bytes, and its SuperSlabs follow the table up to
 * used[n] bytes after it.  A thread keeps its node's part in TLS (struct
 * hak_thread), and free knows a block of a SuperSlab of the thread's own
 * node by subtracting and comparing, with no load that waits on the
 * pointer, where the page map takes two loads and five tests, and with no
 * test of the node: the part is the node's.  The page table holds a byte
 * for each page of the part's SuperSlabs, a copy of the SuperSlab's own
 * page_cls (struct hak_superslab): free reads it at the block's offset
 * from the part's first SuperSlab, which it has at hand, shifted by the
 * page size, one load where the SuperSlab's copy needs the block's address
 * masked twice first.  Its pages are made memory 8 SuperSlabs' bytes at a
 * time as SuperSlabs are, one page for 16 MiB.  A SuperSlab there is never
 * unmapped: when it leaves the spares (past its decay, or at malloc_trim)
 * its slabs' pages go back to the kernel and it waits for reuse
 * (shared_pool.c), so that every address below a part's used keeps a
 * SuperSlab's header and its bytes in the table.  The region is reserved
 * as big as the machine's memory, and a 4096th more for the tables
 * (hak_os_reserve, which gives what of each part's table and SuperSlabs
 * was never used back under a limit the program sets below what the
 * process has), one part per node the process could allocate from at
 * start-up (hak_numa_node_bound); SuperSlabs beyond a full part, those of
 * a node past the parts, and all of them under an address-space limit or
 * on another route, are mapped one by one.
 *
 * base, parts, part_size and table_size are set once, under the lock,
 * before any used first grows; a used read with acquire above 0 comes with
 * them set.  A thread's copy of its part's used may be stale, smaller:
 * that only sends a block of a SuperSlab the thread has not heard of
 * through the page map, where setup() registered it before used grew. */
struct hak_superslab_region {
    uintptr_t base;
    size_t part_size;
    size_t table_size;
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

/* Where node's SuperSlabs in the region start, in *base, and how much of
 * the part after that holds SuperSlabs; HAK_REGION_UNSET and 0 while it
 * holds none, and for a node past the parts (or no node).  *page_table:
 * the part's page table, NULL with no SuperSlabs. */
static inline size_t hak_superslab_region_part(unsigned node, uintptr_t *base,
                                               const uint8_t **page_table)
{
    const struct hak_superslab_region *region = &hak_superslab_region;
    size_t used =
        node < HAK_MAX_NODES ? atomic_load_explicit(&region->used[node], memory_order_acquire) : 0;
    uintptr_t part = region->base + node * region->part_size;
    *page_table = used ? (const uint8_t *)part : NULL;
    *base = used ? part + region->table_size : HAK_REGION_UNSET;
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
    /* Below the table_size, the difference wraps past every used. */
    return part < region->parts &&
           offset % region->part_size - region->table_size <
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

/* Free's byte of ss's page (struct hak_superslab, page_cls), and its
 * copy in the region's page table.  Atomic: an adopter rewrites the tag
 * while other threads free the slab's blocks, who read either value
 * (page_map.h). */
static inline void hak_superslab_set_page_byte(struct hak_superslab *ss, size_t page, uint8_t byte)
{
    __atomic_store_n(&ss->page_cls[page], byte, __ATOMIC_RELAXED);
    if (ss->region_page_cls)
        __atomic_store_n(&ss->region_page_cls[page], byte, __ATOMIC_RELAXED);
}

/* The same byte for count of ss's pages from first. */
static inline void hak_superslab_set_page_bytes(struct hak_superslab *ss, size_t first,
                                                size_t count, uint8_t byte)
{
    for (size_t page = first; page < first + count; page++)
        hak_superslab_set_page_byte(ss, page, byte);
}

/* Free's class byte of each of slab's pages (hak_superslab_page_class)
 * says that no block starts there, until the slab carves blocks of a class
 * again (arena/slab.c): a slab taking a class, or going back to the pool. */
static inline void hak_superslab_clear_page_classes(const struct hak_slab *slab)
{
    hak_superslab_set_page_bytes(hak_superslab_of(slab), hak_superslab_index(slab) * HAK_SLAB_PAGES,
                                 HAK_SLAB_PAGES, HAK_NO_PAGE_CLASS);
}

#endif

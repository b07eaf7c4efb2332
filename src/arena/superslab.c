#include "superslab.h"

#include <string.h>

#include "../fork_locks.h"
#include "../harden.h"
#include "../numa/binding.h"
#include "../numa/node.h"
#include "../os.h"
#include "../stats.h"
#include "page_map.h"

struct hak_superslab_region hak_superslab_region HAK_START_UP = {.base = HAK_REGION_UNSET};

/* Makes the fresh memory at ss a SuperSlab of node's, registered;
 * region_page_cls: its bytes in the region's page table, or NULL. */
static bool setup(struct hak_superslab *ss, unsigned node, uint8_t *region_page_cls)
{
    hak_numa_bind(ss, HAK_SUPERSLAB_SIZE, node);
    ss->head.kind = HAK_CHUNK_SUPERSLAB;
    ss->head.node = node;
    ss->head.map_size = HAK_SUPERSLAB_SIZE;
    ss->head.route = hak_harden.route;
    /* No page holds a block until a slab carves it (arena/slab.c). */
    for (unsigned p = 0; p < HAK_SUPERSLAB_PAGES; p++)
        ss->page_slab[p] = &hak_invalid_slab;
    ss->region_page_cls = region_page_cls;
    hak_superslab_set_page_bytes(ss, 0, HAK_SUPERSLAB_PAGES, HAK_NO_PAGE_CLASS);
    for (unsigned i = 0; i < HAK_SLABS_PER_SUPERSLAB; i++) {
        struct hak_slab *slab = &ss->slabs[i];
        slab->chunk = &ss->head;
        slab->node = (uint8_t)node;
        slab->free_node = HAK_NO_NODE;
        slab->start = (char *)ss + (size_t)i * HAK_SLAB_SIZE;
        slab->end = slab->start;
        slab->kind = i < HAK_SUPERSLAB_HEADER_SLABS ? HAK_SLAB_INVALID : HAK_SLAB_SMALL;
        slab->state = HAK_STATE_POOL;
        /* Level 2: the slab's last page is its guard, whatever its class,
         * and the header's, under the first slab's first block. */
        if (hak_harden.guard_bytes)
            hak_os_guard(slab->start + HAK_SLAB_SIZE - hak_harden.guard_bytes,
                         hak_harden.guard_bytes);
    }
    ss->free_slabs = (uint32_t)(((uint64_t)1 << HAK_SLABS_PER_SUPERSLAB) - 1) &
                     ~(uint32_t)((1u << HAK_SUPERSLAB_HEADER_SLABS) - 1);
    if (!hak_page_map_set(ss, HAK_SUPERSLAB_SIZE, &ss->head))
        return false;
    hak_stat_pages_out(HAK_PAGES_SSM,
                       (sizeof(struct hak_superslab) + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE, 0);
    hak_stat_add(HAK_STAT_SUPERSLABS, 1);
    hak_stat_node_map(node, HAK_SUPERSLAB_SIZE);
    return true;
}

/* The region's reservation, made at the first SuperSlab of the fast route
 * (under the lock), as big as the machine's memory, in a part per node the
 * process could allocate from at start-up: false where there is none.  Not at
 * start-up: a program that sets itself an address-space limit before
 * hakmem maps its first SuperSlab measures what it has without the
 * reservation, and gets no region (hak_os_reserve). */
static bool region_reserved(void)
{
    static bool tried HAK_START_UP;
    if (!tried) {
        tried = true;
        unsigned parts = hak_numa_node_bound();
        size_t superslabs = hak_os_memory_bytes() / parts & ~(HAK_SUPERSLAB_SIZE - 1);
        /* A byte a page, in whole SuperSlabs, which stay aligned after it. */
        size_t table_size =
            (superslabs / HAK_PAGE_SIZE + HAK_SUPERSLAB_SIZE - 1) & ~(HAK_SUPERSLAB_SIZE - 1);
        size_t part_size = table_size + superslabs;
        void *base =
            superslabs ? hak_os_reserve(table_size, part_size, parts, HAK_SUPERSLAB_SIZE) : NULL;
        if (base) {
            hak_superslab_region.part_size = part_size;
            hak_superslab_region.table_size = table_size;
            hak_superslab_region.parts = parts;
            hak_superslab_region.base = (uintptr_t)base;
        }
    }
    return hak_superslab_region_exists();
}

/* The SuperSlab used bytes into part's SuperSlabs (those after its page
 * table), made memory and set up with its bytes in the table; NULL where
 * it could not be, with nothing made memory. */
static struct hak_superslab *map_in_part(char *part, size_t used, unsigned node)
{
    struct hak_superslab *ss =
        (struct hak_superslab *)(part + hak_superslab_region.table_size + used);
    uint8_t *table_bytes = (uint8_t *)part + used / HAK_SUPERSLAB_SIZE * HAK_SUPERSLAB_PAGES;
    /* Each of the table's pages with the first of the SuperSlabs it holds
     * the bytes of, on their node. */
    bool table_page = (uintptr_t)table_bytes % HAK_PAGE_SIZE == 0;
    if (!hak_os_map_reserved(ss, HAK_SUPERSLAB_SIZE))
        return NULL;
    if (table_page) {
        if (!hak_os_map_reserved(table_bytes, HAK_PAGE_SIZE)) {
            hak_os_unmap_reserved(ss, HAK_SUPERSLAB_SIZE);
            return NULL;
        }
        hak_numa_bind(table_bytes, HAK_PAGE_SIZE, node);
    }
    if (setup(ss, node, table_bytes)) {
        if (table_page)
            hak_stat_pages_out(HAK_PAGES_SSM, 1, 0);
        return ss;
    }
    if (table_page)
        hak_os_unmap_reserved(table_bytes, HAK_PAGE_SIZE);
    hak_os_unmap_reserved(ss, HAK_SUPERSLAB_SIZE);
    return NULL;
}

/* A SuperSlab at the end of node's part of the region, or NULL when the
 * part is full, given back, or not there. */
static struct hak_superslab *create_in_region(unsigned node)
{
    if (hak_harden.route != HAK_ROUTE_FAST)
        return NULL;
    struct hak_superslab *ss = NULL;
    hak_superslab_region_lock();
    const struct hak_superslab_region *region = &hak_superslab_region;
    if (region_reserved() && node < region->parts) {
        _Atomic size_t *used_of_part = &hak_superslab_region.used[node];
        size_t used = atomic_load_explicit(used_of_part, memory_order_relaxed);
        if (used < region->part_size - region->table_size)
            ss = map_in_part((char *)region->base + node * region->part_size, used, node);
        /* After the head, the page bytes and the page map's entries, which
         * a thread that reads the new used finds set (superslab.h). */
        if (ss)
            atomic_store_explicit(used_of_part, used + HAK_SUPERSLAB_SIZE, memory_order_release);
    }
    hak_superslab_region_unlock();
    return ss;
}

struct hak_superslab *hak_superslab_create(unsigned node)
{
    struct hak_superslab *ss = create_in_region(node);
    if (ss)
        return ss;
    ss = hak_os_map_aligned(HAK_SUPERSLAB_SIZE, HAK_SUPERSLAB_SIZE);
    if (!ss)
        return NULL;
    if (!setup(ss, node, NULL)) {
        hak_os_unmap(ss, HAK_SUPERSLAB_SIZE);
        return NULL;
    }
    return ss;
}

void hak_superslab_destroy(struct hak_superslab *ss)
{
    hak_stat_node_map(ss->head.node, -(int64_t)HAK_SUPERSLAB_SIZE);
    hak_page_map_clear(ss, HAK_SUPERSLAB_SIZE);
    hak_os_forget_lent(ss->mappings.lent_ranges);
    hak_os_unmap(ss, HAK_SUPERSLAB_SIZE);
}

void hak_superslab_region_lock(void)
{
    pthread_mutex_lock(&hak_fork_locks.superslab_region.mutex);
}

void hak_superslab_region_unlock(void)
{
    pthread_mutex_unlock(&hak_fork_locks.superslab_region.mutex);
}

#include "superslab.h"

#include "../harden.h"
#include "../numa/binding.h"
#include "../os.h"
#include "../stats.h"
#include "page_map.h"

struct hak_superslab *hak_superslab_create(unsigned node)
{
    struct hak_superslab *ss = hak_os_map_aligned(HAK_SUPERSLAB_SIZE, HAK_SUPERSLAB_SIZE);
    if (!ss)
        return NULL;
    hak_numa_bind(ss, HAK_SUPERSLAB_SIZE, node);
    ss->head.kind = HAK_CHUNK_SUPERSLAB;
    ss->head.node = node;
    ss->head.map_size = HAK_SUPERSLAB_SIZE;
    ss->head.route = hak_harden.route;
    /* No page holds a block until a slab carves it (arena/slab.c). */
    for (unsigned p = 0; p < HAK_SUPERSLAB_PAGES; p++)
        ss->page_slab[p] = &hak_invalid_slab;
    for (unsigned i = 0; i < HAK_SLABS_PER_SUPERSLAB; i++) {
        struct hak_slab *slab = &ss->slabs[i];
        slab->chunk = &ss->head;
        slab->node = (uint8_t)node;
        slab->free_node = HAK_NO_NODE;
        slab->start = (char *)ss + (size_t)i * HAK_SLAB_SIZE;
        slab->end = slab->start;
        slab->kind = i < HAK_SUPERSLAB_HEADER_SLABS ? HAK_SLAB_INVALID : HAK_SLAB_SMALL;
        slab->state = HAK_STATE_POOL;
        /* Level 2: the slab's last page is its guard, whatever its class. */
        if (hak_harden.guard_bytes && i >= HAK_SUPERSLAB_HEADER_SLABS)
            hak_os_guard(slab->start + HAK_SLAB_SIZE - hak_harden.guard_bytes,
                         hak_harden.guard_bytes);
    }
    ss->free_slabs = (uint32_t)(((uint64_t)1 << HAK_SLABS_PER_SUPERSLAB) - 1) &
                     ~(uint32_t)((1u << HAK_SUPERSLAB_HEADER_SLABS) - 1);
    if (!hak_page_map_set(ss, HAK_SUPERSLAB_SIZE, &ss->head)) {
        hak_os_unmap(ss, HAK_SUPERSLAB_SIZE);
        return NULL;
    }
    hak_stat_pages_out(HAK_PAGES_SSM,
                       (sizeof(struct hak_superslab) + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE, 0);
    hak_stat_add(HAK_STAT_SUPERSLABS, 1);
    hak_stat_node_map(node, HAK_SUPERSLAB_SIZE);
    return ss;
}

void hak_superslab_destroy(struct hak_superslab *ss)
{
    hak_stat_node_map(ss->head.node, -(int64_t)HAK_SUPERSLAB_SIZE);
    hak_page_map_clear(ss, HAK_SUPERSLAB_SIZE);
    hak_os_unmap(ss, HAK_SUPERSLAB_SIZE);
}

#include "large.h"

#include <errno.h>

#include "../os.h"
#include "../stats.h"
#include "page_map.h"

void *hak_large_alloc(size_t size, size_t align, unsigned node)
{
    size_t offset = align > HAK_PAGE_SIZE ? align : HAK_PAGE_SIZE;
    size_t map_align = align > HAK_CHUNK_SIZE ? align : HAK_CHUNK_SIZE;
    size_t total = offset + ((size + HAK_PAGE_SIZE - 1) & ~(HAK_PAGE_SIZE - 1));
    if (total < size || total > ((size_t)1 << HAK_MAP_ADDRESS_BITS)) {
        errno = ENOMEM;
        return NULL;
    }
    struct hak_large *large = hak_os_map_aligned(total, map_align);
    if (!large)
        return NULL;
    hak_os_bind(large, total, node);
    large->head.kind = HAK_CHUNK_LARGE;
    large->head.node = node;
    large->head.map_size = total;
    large->offset = offset;
    large->usable = total - offset;
    if (!hak_page_map_set(large, total, &large->head)) {
        hak_os_unmap(large, total);
        errno = ENOMEM;
        return NULL;
    }
    hak_stat_add(HAK_STAT_LARGE_ALLOCS, 1);
    return (char *)large + offset;
}

void hak_large_free(struct hak_large *large, void *ptr)
{
    if (ptr != hak_large_block(large))
        hak_fatal("free of a pointer inside a large block", ptr);
    size_t total = large->head.map_size;
    hak_page_map_clear(large, total);
    hak_os_unmap(large, total);
}

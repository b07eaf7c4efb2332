#include "node_block.h"

#include "hot_span_box.h"
#include "page_arena.h"
#include "slab.h"

void *hak_node_block_alloc(size_t size, unsigned node)
{
    uint32_t pages = (uint32_t)((size + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE);
    if (pages == 0)
        pages = 1;
    struct hak_slab *span = hak_hot_span_take(node, pages);
    if (!span)
        span = hak_page_arena_alloc(node, pages);
    if (!span)
        return NULL;
    span->kind = HAK_SLAB_NODE_BLOCK;
    span->block_size = pages * (uint32_t)HAK_PAGE_SIZE;
    span->capacity = 1;
    span->end = span->start + span->block_size;
    hak_slab_count_pages(span, 0, span->block_size,
                         span->block_size <= HAK_MID_MAX ? HAK_PAGES_MID : HAK_PAGES_L25);
    return span->start;
}

void hak_node_block_free(struct hak_slab *span, void *ptr)
{
    if (ptr != span->start)
        hak_fatal("free of a pointer inside a block", ptr);
    hak_hot_span_put(span);
}

#include "node_block.h"

#include "../fault.h"
#include "../block/canary.h"
#include "../harden.h"
#include "../memcheck.h"
#include "../os.h"
#include "hot_span_box.h"
#include "page_arena.h"
#include "slab.h"
#include "span_bins.h"

/* Checked mode: room for the canary's record; level 2: a guard page after. */
void *hak_node_block_alloc(size_t size, unsigned node)
{
    size_t need = size + (hak_harden.checked ? HAK_CANARY_BYTES : 0);
    uint32_t pages = (uint32_t)((need + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE);
    if (pages == 0)
        pages = 1;
    uint32_t span_pages = pages + hak_harden.guard_bytes / (uint32_t)HAK_PAGE_SIZE;
    struct hak_slab *span = hak_hot_span_take(node, span_pages);
    if (!span)
        span = hak_page_arena_alloc(node, span_pages);
    if (!span)
        return NULL;
    span->kind = HAK_SLAB_NODE_BLOCK;
    span->block_size = pages * (uint32_t)HAK_PAGE_SIZE;
    span->capacity = 1;
    span->end = span->start + span->block_size;
    /* The page table may still describe the span's last use (arena/slab.c). */
    hak_span_map_pages(span, span->first_page, span->pages);
    if (hak_harden.guard_bytes)
        hak_os_guard(span->end, hak_harden.guard_bytes);
    if (hak_harden.checked) {
        hak_memcheck_undefined(span->start, span->block_size);
        hak_canary_set(span->start, span->block_size, size);
        hak_memcheck_malloclike(span->start, size, false);
    }
    hak_slab_count_pages(span, 0, span->block_size,
                         span->block_size <= HAK_MID_MAX ? HAK_PAGES_MID : HAK_PAGES_L25);
    hak_stat_gauge(HAK_STAT_NODE_BLOCK_BYTES, span->block_size);
    return span->start;
}

static void check_start(const struct hak_slab *span, const void *ptr)
{
    if (ptr != span->start)
        hak_fatal_note("free of a pointer inside a block:", ptr, "node block");
}

size_t hak_node_block_requested(struct hak_slab *span, void *ptr)
{
    check_start(span, ptr);
    return hak_canary_check(ptr, span->block_size, "node block");
}

void hak_node_block_free(struct hak_slab *span, void *ptr)
{
    if (hak_harden.checked)
        hak_node_block_requested(span, ptr);
    else
        check_start(span, ptr);
    if (hak_harden.guard_bytes)
        hak_os_unguard(span->end, hak_harden.guard_bytes);
    hak_stat_gauge(HAK_STAT_NODE_BLOCK_BYTES, -(int64_t)span->block_size);
    hak_hot_span_put(span);
}

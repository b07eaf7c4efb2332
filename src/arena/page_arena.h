/* The PageArena: page spans carved from 4 MiB chunks, one arena per node.
 * It holds only clean spans (never touched, or decommitted); recently freed
 * dirty spans wait in the HotSpanBox in front of it.  Freed spans coalesce
 * with their free neighbours. */
#ifndef HAK_PAGE_ARENA_H
#define HAK_PAGE_ARENA_H

#include "../internal.h"

/* A span of pages (1 .. HAK_ARENA_USABLE_PAGES): its descriptor, with start,
 * pages, chunk and node set and every page mapped to it.  NULL with errno
 * ENOMEM. */
struct hak_slab *hak_page_arena_alloc(unsigned node, uint32_t pages);
/* The same, but up to most pages where the free span found holds them, in
 * a chunk of small pages: the spare SuperSlabs' pages move in at once
 * (hak_hot_span_take_fresh), and the span keeps as many whole spans of
 * pages pages as they filled, at least one; the pages past it stay in the
 * arena, fresh where they were. */
struct hak_slab *hak_page_arena_alloc_up_to(unsigned node, uint32_t pages, uint32_t most);
/* The pages of span past keep (fewer than its pages) under a descriptor
 * of their own, not yet mapped to it, which the caller hands to where they
 * go (hak_page_arena_free, the HotSpanBox's put: both map them); span keeps
 * its first keep pages, and each of the two the touched ones among its
 * own.  NULL, span unchanged, where no descriptor could be had. */
struct hak_slab *hak_span_cut_tail(struct hak_slab *span, uint32_t keep);
/* Whether ptr, in span (the entry of its page, a span now free: in the
 * HotSpanBox or the arena), lies in pages once handed out.  Lock-free, for
 * naming a fault: the answer may be stale. */
bool hak_page_arena_was_handed_out(const struct hak_slab *span, const void *ptr);
/* Takes back a clean span. */
void hak_page_arena_free(struct hak_slab *span);
/* malloc_trim: unmaps node's wholly free chunks, also the one the arena
 * keeps for the next request; returns the bytes unmapped. */
size_t hak_page_arena_release_free(unsigned node);
/* Once an address-space limit is in force: every node's spare chunks
 * (mapped, never touched) are unmapped, as they would count against it. */
void hak_page_arena_release_spares(void);

/* The first nodes nodes' locks, for fork. */
void hak_page_arena_lock_all(unsigned nodes);
void hak_page_arena_unlock_all(unsigned nodes);

#endif

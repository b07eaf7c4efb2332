/* The HotSpanBox: spans freed recently stay mapped and resident, and are
 * handed out again before the PageArena touches a fresh page.  Neighbouring
 * hot spans merge, and a longer one is cut for a shorter request.  A node's
 * box is HAK_HOT_SPAN_SHARDS shards, each with its lock: a thread puts in
 * its own and takes from it first.  Each is bounded by a byte budget,
 * which grows for a program that asks again for what it gave back
 * (hot_span_box.c), and by age (HAKMEM_HOT_BYTES, HAKMEM_DECAY_MS); what
 * falls out is decommitted and returned to the PageArena. */
#ifndef HAK_HOT_SPAN_BOX_H
#define HAK_HOT_SPAN_BOX_H

#include "../internal.h"

/* Descriptors a shard keeps from its merges for its splits, rather than
 * hand each back to the metadata allocator and ask it for another, both
 * under its one lock. */
#define HAK_HOT_SPAN_SPARE_DESCS 8

/* pages pages of hot memory on node: the front of the shortest hot span
 * that is long enough, the most recently freed of that length, in the
 * calling thread's shard, or else in the first other shard that has one;
 * or NULL. */
struct hak_slab *hak_hot_span_take(unsigned node, uint32_t pages);
/* A span of pages pages from node's PageArena, where the box had none:
 * where spare SuperSlabs may lend, up to HAK_LEND_AHEAD_SPANS spans' worth
 * of their pages move in at once (one mremap, some 6 us whatever its
 * length), and the whole spans they filled past this one, no more than a
 * quarter of HAKMEM_HOT_BYTES and with it no longer than a chunk's usable
 * pages, wait in the box for the next requests
 * (hak_page_arena_alloc_up_to). */
struct hak_slab *hak_hot_span_take_fresh(unsigned node, uint32_t pages);
#define HAK_LEND_AHEAD_SPANS 16
/* Keeps a freed (dirty) span. */
void hak_hot_span_put(struct hak_slab *span);
/* A freed span nothing is expected to take soon: kept as a stale one,
 * the oldest, for a SuperSlab to take its pages (hak_hot_span_lend) or to
 * go back to the kernel first; without a box (HAKMEM_HOT_BYTES=0)
 * decommitted and returned to the PageArena now. */
void hak_hot_span_discard(struct hak_slab *span);
/* The bytes node's box holds (mallinfo); adds its spans to count. */
size_t hak_hot_span_retained(unsigned node, uint64_t *count);
/* malloc_trim: every hot span of node is decommitted and returned to the
 * PageArena now, whatever its age; returns the bytes decommitted. */
size_t hak_hot_span_release_all(unsigned node);
/* The spans of node idle for HAKMEM_DECAY_MS are decommitted and returned
 * to the PageArena, as the box's own puts and takes would do: for a
 * process whose threads keep allocating, but never spans (thread_heap.c,
 * caches that idle). */
void hak_hot_span_release_aged(unsigned node);
/* Before node maps fresh memory for small or large blocks (a SuperSlab
 * made, or a retired one taken, whose pages went back): the spans idle
 * for a sixty-fourth of HAKMEM_DECAY_MS (78 ms by default) are decommitted
 * and returned to the PageArena.  Kept resident, they would add to the peak
 * footprint of a program that freed them and then grows in other sizes,
 * which they cannot serve (redis: the list nodes of one phase, 24 MB of
 * spans never taken again, held through the phases that followed), and
 * only the box's own puts and takes would ever age them out.  An eighth
 * let them stay through about half of redis-benchmark's runs; a sixteenth
 * (312 ms) kept LPOP's freed list nodes from the SuperSlabs of the HSET
 * that follows it a test later (peak 103 MB against 87 now; mimalloc 87). */
void hak_hot_span_release_stale(unsigned node);
#define HAK_HOT_SPAN_STALE_FRACTION 64
/* Moves the resident pages of node's spans, oldest first, young ones too,
 * to dst, up to size bytes, or to less than HAK_LEND_GRAIN from it: the
 * fresh slabs of a SuperSlab, which then fault none in
 * (arena/shared_pool.h).  Young ones too: a program that alternates its
 * phases with no pause makes or takes back SuperSlabs some milliseconds
 * after it freed its spans, and with stale ones alone (78 ms) the
 * SuperSlabs faulted in their pages while the spans stayed resident, for
 * the next phase of those sizes; the spans that phase misses take the
 * spares' pages back (arena/shared_pool.h).  Each span lends its last
 * resident pages first, in whole grains (HAK_LEND_GRAIN: where ranges
 * moved in lie among them, from grain line to grain line, those past the
 * last line given back); one left with none goes back to the PageArena,
 * one with some stays the oldest.  One that can move no grain lends none:
 * a stale one goes back decommitted, a young one stays.  Returns the bytes
 * of dst taken, to being the mappings of dst's SuperSlab, at to_base
 * (mappings.h). */
size_t hak_hot_span_lend(unsigned node, char *dst, size_t size, struct hak_mappings *to,
                         const char *to_base);

/* The first nodes nodes' locks, for fork. */
void hak_hot_span_lock_all(unsigned nodes);
void hak_hot_span_unlock_all(unsigned nodes);

#endif

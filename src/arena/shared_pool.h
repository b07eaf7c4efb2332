/* The per-node shared pool of SuperSlabs: where thread heaps get slabs for
 * the small classes and give empty ones back. */
#ifndef HAK_SHARED_POOL_H
#define HAK_SHARED_POOL_H

#include "../internal.h"

/* A free slab of node (its start set, not yet assigned); NULL with errno
 * ENOMEM.  A SuperSlab made or taken back from the retired (its pages
 * given back) first moves the pages of the node's hot spans into its free
 * slabs (hak_hot_span_lend), before any other thread sees it: a phase of
 * small blocks after one of bigger ones faults none in where the other
 * left resident pages (bench/phases; redis's HSET after its LPOP); so do
 * the free slabs of a SuperSlab in use whose pages went to spans
 * (hak_shared_pool_lend), reserved meanwhile, when the one to be taken is
 * among them.  A retired SuperSlab whose slabs took such ranges has them
 * mapped anew, one kernel mapping again, rather than decommitted. */
struct hak_slab *hak_shared_pool_take(unsigned node);
/* An empty slab goes back to its SuperSlab; a SuperSlab that empties stays
 * as it is, a spare (outside the SuperSlab region, one of four at most),
 * until it lends its pages to the node's spans (hak_shared_pool_lend) or
 * has been free for HAKMEM_DECAY_MS: it is unmapped, or in the region its
 * pages go back (superslab.h).  Ages are looked at when
 * a SuperSlab empties and by hak_shared_pool_release_aged, so a program
 * that stops allocating altogether keeps its spares until malloc_trim, as
 * it keeps its threads' caches. */
void hak_shared_pool_give(struct hak_slab *slab);
/* Every spare of node free for HAKMEM_DECAY_MS leaves, as above. */
void hak_shared_pool_release_aged(unsigned node);
/* Before node maps a large block anew: the spares free for a sixty-fourth of
 * HAKMEM_DECAY_MS leave, oldest first, four at a call (the next calls take
 * the others), as the HotSpanBox's stale spans leave before a SuperSlab is
 * made (hot_span_box.h).  Kept resident, the spares would add to the peak
 * footprint of a program that freed its small blocks of one phase and
 * grows in bigger ones in the next. */
void hak_shared_pool_release_stale(unsigned node);
/* Before node hands out fresh memory for Mid or L25 blocks (a span of the
 * PageArena, whose pages are untouched or were given back): the resident
 * pages of the spares' wholly touched free slabs, oldest spare first, move
 * to [dst, dst + size), from its first grain line (mappings.h), in place
 * of the untouched pages there (hak_os_lend), and those spares leave, but
 * for the last, which stays while it holds pages (in the SuperSlab region;
 * one outside leaves too); then those of the free slabs of SuperSlabs in
 * use, which come back with no page (with what a failed move left).  A
 * spare lends before it is stale (as above) only in the region; the oldest
 * spare that cannot stops the spares' lending until it is stale, and one
 * the kernel refused a move leaves, however young.  Where they cannot fill
 * need bytes of dst (the span's own; the rest is lent ahead,
 * hot_span_box.h), the stale spares left leave as above.  Returns the
 * bytes of dst so filled, the pages before the grain line with them where
 * any moved (with those of a move the kernel refused, which may hold some
 * of the pages: calloc zeroes them), to being the mappings of dst's chunk,
 * at to_base (mappings.h).  A program whose small blocks of one phase give
 * way to bigger ones in the next takes no page faults for the memory the
 * first left (phases: 46k faults in place of 81k, 0.09 s of system time in
 * place of 0.13), and keeps no more resident than before. */
size_t hak_shared_pool_lend(unsigned node, char *dst, size_t size, size_t need,
                            struct hak_mappings *to, const char *to_base);
/* Whether node has a spare that may lend now, or a SuperSlab in use may
 * have a free slab to lend, as read without the lock.
 * Whether the kernel lets pages move (hak_os_can_lend, which reads
 * /proc/self/status) is hak_shared_pool_lend's question, not asked for a
 * span in huge pages: a short-lived process reads no /proc file
 * (test_startup_reads). */
bool hak_shared_pool_may_lend(unsigned node);
/* malloc_trim: unmaps node's spare SuperSlabs (decommits those in the
 * region) and decommits the pages its free slabs ever handed out; returns
 * the bytes unmapped or decommitted. */
size_t hak_shared_pool_release(unsigned node);

/* The first nodes nodes' locks, for fork. */
void hak_shared_pool_lock_all(unsigned nodes);
void hak_shared_pool_unlock_all(unsigned nodes);

#endif

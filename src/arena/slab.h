/* A slab: one run of memory carved into blocks of one class.  These helpers
 * are shared by every backend that hands slabs to thread heaps. */
#ifndef HAK_SLAB_H
#define HAK_SLAB_H

#include "../internal.h"
#include "../block/size_class.h"
#include "../stats.h"

/* Makes slab the owner's, carved into blocks of cls over [start, start + bytes);
 * page_tag: the owner's (struct hak_slab). */
void hak_slab_assign(struct hak_slab *slab, struct hak_heap *owner, uint8_t page_tag, unsigned cls,
                     char *start, size_t bytes);

/* Carves the fresh blocks that start in the carve's page (one block bigger
 * than a page) onto the free list, in front of it and in address order;
 * returns how many, 0 when the slab has none left.  Pages are touched as
 * they are needed. */
uint32_t hak_slab_extend(struct hak_slab *slab);

/* Counts the pages over [from, to), byte offsets from the slab's start, as
 * handed out: first touched above its touched_pages, reused below.  A page
 * the range shares with an earlier one was counted then. */
void hak_slab_count_pages(struct hak_slab *slab, size_t from, size_t to,
                          enum hak_page_bucket bucket);

/* A span leaves its owner for every class and span to come, all its blocks
 * free: their free-list words are cleared, so that no block or node block
 * carved from the memory later, at other offsets, hands the program a link
 * (block/block_link.h) past its first two words.  A SuperSlab's slab is
 * cleared when it takes another class (hak_slab_assign), over every page
 * it touched. */
void hak_slab_clear_free_words(const struct hak_slab *slab);
/* The same over every page the slab touched, for a SuperSlab's slab that
 * takes another class or lends its pages to a span (shared_pool.h). */
void hak_slab_clear_touched_free_words(const struct hak_slab *slab);

/* Moves blocks that other threads freed onto the free list; returns how many. */
uint32_t hak_slab_collect_remote(struct hak_slab *slab);

/* Arms the remote list so that the next remote free queues the slab on its
 * owner's delayed list.  False when blocks arrived meanwhile (collect them). */
bool hak_slab_arm_notify(struct hak_slab *slab);

/* Undoes hak_slab_arm_notify.  Returns true when a remote free already
 * queued the slab (it must stay until the owner drains its delayed list). */
bool hak_slab_disarm_notify(struct hak_slab *slab);

/* The owner leaves: no later remote free may look at the owner's heap. */
void hak_slab_disown(struct hak_slab *slab);
/* A new owner takes an abandoned slab, and its pages its page tag. */
void hak_slab_adopt(struct hak_slab *slab, struct hak_heap *owner, uint8_t page_tag);

/* Pushes blocks freed by a thread that does not own the slab: a chain of
 * count blocks linked through first words from head to tail, or a single
 * block. */
void hak_slab_remote_free_chain(struct hak_slab *slab, void *head, void *tail, uint32_t count);

static inline void hak_slab_remote_free(struct hak_slab *slab, void *block)
{
    hak_slab_remote_free_chain(slab, block, block, 1);
}

/* An L25 slab is one block, its span exactly (size_class.c).  Its pages
 * keep mapping to the span's descriptor, which is the slab, from the
 * PageArena or the HotSpanBox to their return, and only its first page's
 * word (struct hak_arena_chunk) tells free of the block: a pointer inside
 * the block finds the slab, whose block test refuses it.  That is three
 * writes fewer per page, up to 256 pages, per malloc and free (l25, one
 * thread, under callgrind: 2629 instructions per operation, 1292). */
static inline bool hak_slab_is_whole_span(const struct hak_slab *slab)
{
    return slab->kind == HAK_SLAB_L25;
}

/* Whether block starts one of the blocks slab has carved (a multiply by
 * the class's magic number instead of a division): the exact test of a
 * pointer freed into a slab that serves blocks. */
static inline bool hak_slab_starts_carved_block(const struct hak_slab *slab, const void *block)
{
    uint32_t offset = (uint32_t)((const char *)block - slab->start);
    return (const char *)block >= slab->start && (const char *)block < slab->carve &&
           hak_class_starts_block(slab->cls, offset);
}

/* The blocks on slab's free list: of those it carved, the ones neither
 * handed out nor waiting in its remote list (both counted in used). */
static inline uint32_t hak_slab_listed(const struct hak_slab *slab)
{
    return (uint32_t)(slab->carve - slab->start) / slab->block_size - slab->used;
}

static inline bool hak_slab_has_free(const struct hak_slab *slab)
{
    return slab->free || slab->carve + slab->block_size <= slab->end;
}

#endif

/* Blocks above 1 MiB, big alignments, and blocks realloc grows past 256 KiB,
 * or past 64 KiB by half or more at once or while the node holds few large
 * blocks (so that they grow on without copies): one mapping each, its head
 * on the first page.  Freed mappings are kept per node for reuse, split,
 * coalesced and moved between blocks (large.c), since faulting big blocks in
 * again is what makes them slow. */
#ifndef HAK_LARGE_H
#define HAK_LARGE_H

#include "../internal.h"

/* A block of at least size bytes aligned to align (a power of two), its
 * first size bytes zero if zeroed; NULL with errno ENOMEM.  A malloc's
 * block asks for HAK_LARGE_MALLOC_ALIGN: its start is then free to move
 * along the head's page (colour_for). */
void *hak_large_alloc(size_t size, size_t align, unsigned node, bool zeroed);
#define HAK_LARGE_MALLOC_ALIGN 16
void hak_large_free(struct hak_large *large, void *ptr);
/* The block resized to size without copying it: in place, or grown by
 * moving its pages to a bigger mapping; NULL when it cannot be. */
void *hak_large_resize(struct hak_large *large, size_t size);
/* Whether node's live large blocks are few, fewer than a quarter of the
 * mappings its cache keeps: realloc then makes a buffer that grows a little
 * at a time large early (malloc_api.c). */
bool hak_large_few_live(unsigned node);
/* The bytes of the freed mappings node keeps for reuse (mallinfo); adds
 * their number to count. */
size_t hak_large_cached(unsigned node, uint64_t *count);
/* malloc_trim: unmaps every freed mapping node keeps for reuse; returns the
 * bytes unmapped. */
size_t hak_large_release_cached(unsigned node);

static inline size_t hak_large_usable(const struct hak_large *large)
{
    return large->usable;
}

/* The block starts colour bytes into the head's page, before its own pages
 * (large.c, colour_for). */
static inline void *hak_large_block(const struct hak_large *large)
{
    return (char *)large + large->offset - large->colour;
}

/* The last 2 MiB unit of a mapping may hold other memory past its end. */
static inline bool hak_large_contains(const struct hak_large *large, const void *ptr)
{
    return (uintptr_t)ptr - (uintptr_t)large < large->head.map_size;
}

/* The first nodes nodes' locks, for fork. */
void hak_large_lock_all(unsigned nodes);
void hak_large_unlock_all(unsigned nodes);

#endif

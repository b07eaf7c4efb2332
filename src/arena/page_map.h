/* Which chunk owns an address: a two-level radix table over 2 MiB units of
 * the 47-bit user address space.  Lookups are lock-free and never touch
 * memory outside hakmem's own tables. */
#ifndef HAK_PAGE_MAP_H
#define HAK_PAGE_MAP_H

#include "../internal.h"

#define HAK_MAP_ADDRESS_BITS 47
#define HAK_MAP_LEAF_BITS 13
#define HAK_MAP_TOP_BITS (HAK_MAP_ADDRESS_BITS - HAK_CHUNK_SHIFT - HAK_MAP_LEAF_BITS)

typedef _Atomic(struct hak_chunk_head *) hak_map_leaf[1 << HAK_MAP_LEAF_BITS];

extern _Atomic(hak_map_leaf *) hak_page_map_top[1 << HAK_MAP_TOP_BITS];

static inline struct hak_chunk_head *hak_page_map_lookup(const void *ptr)
{
    uintptr_t unit = (uintptr_t)ptr >> HAK_CHUNK_SHIFT;
    uintptr_t top = unit >> HAK_MAP_LEAF_BITS;
    if (HAK_UNLIKELY(top >= (1u << HAK_MAP_TOP_BITS)))
        return NULL;
    hak_map_leaf *leaf = atomic_load_explicit(&hak_page_map_top[top], memory_order_relaxed);
    if (HAK_UNLIKELY(!leaf))
        return NULL;
    return atomic_load_explicit(&(*leaf)[unit & ((1u << HAK_MAP_LEAF_BITS) - 1)],
                                memory_order_relaxed);
}

/* The slab of a block in a SuperSlab or arena chunk. */
static inline struct hak_slab *hak_chunk_slab(struct hak_chunk_head *chunk, const void *ptr)
{
    size_t page = ((uintptr_t)ptr - (uintptr_t)chunk) >> HAK_PAGE_SHIFT;
    return ((struct hak_chunk *)chunk)->page_slab[page];
}

/* Maps [base, base + size) to chunk; base is 2 MiB aligned.  False when a
 * table could not be allocated. */
bool hak_page_map_set(void *base, size_t size, struct hak_chunk_head *chunk);
void hak_page_map_clear(void *base, size_t size);
/* Once the topology is known: chunks mapped before it count as node 0's
 * but were placed by first touch, wherever their threads ran; they move
 * there, once per process. */
void hak_page_map_place_early_chunks(void);
/* Held across fork(). */
void hak_page_map_lock(void);
void hak_page_map_unlock(void);

#endif

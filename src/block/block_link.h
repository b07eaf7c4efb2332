/* How free blocks link to each other, hardened (issue 7): the link in a free
 * block's first word is stored XOR a per-process random key and checked when
 * it is followed, and the second word carries a random tag while the block
 * is free, so a second free of it is caught.  Every block is at least 16
 * bytes and 16-byte aligned, so both words exist and a decoded link must be
 * 16-byte aligned. */
#ifndef HAK_BLOCK_LINK_H
#define HAK_BLOCK_LINK_H

#include "../fault.h"
#include "../internal.h"

struct hak_link_keys {
    uintptr_t link; /* low four bits set: a zeroed link never decodes; 0 at level 0 */
    uintptr_t free_tag;
    uintptr_t canary; /* checked mode: block/canary.h */
} __attribute__((aligned(HAK_CACHE_LINE)));

extern struct hak_link_keys hak_link_keys HAK_SHARED;

/* From the kernel's per-exec random bytes; called once by hak_init. */
void hak_block_link_init(void);

void hak_fatal_double_free(const void *block, unsigned cls) __attribute__((noreturn, cold));

/* Where every list of free blocks ends: the last block links here, and a
 * thread's empty cache has it for its head (struct hak_thread), so that
 * malloc's fast path, which pops the head, needs no test for an empty
 * cache.  Its first word decodes as a corrupted link under every key (the
 * key's low four bits are all set, or all clear at level 0), and the fast
 * path leaves on that for the refill, which tells the end from a
 * corruption.  Read-only: nothing is ever written to it. */
struct hak_list_end {
    uintptr_t words[2];
} __attribute__((aligned(16)));
extern const struct hak_list_end hak_list_end HAK_SHARED;
#define HAK_LIST_END ((void *)&hak_list_end)

/* next: a block or HAK_LIST_END, never NULL (a cache's head, a run's next
 * block): the fast path stores it with no test. */
static inline void hak_link_set(void *block, const void *next)
{
    *(uintptr_t *)block = (uintptr_t)next ^ hak_link_keys.link;
}

/* A link or a cache's head as a list: the block, or NULL for none. */
static inline void *hak_list_or_null(const void *list)
{
    return list == HAK_LIST_END ? NULL : (void *)list;
}

/* hak_link_set where NULL stands for the end (a slab's list, which may be
 * empty). */
static inline void hak_link_set_or_end(void *block, const void *next)
{
    hak_link_set(block, next ? next : HAK_LIST_END);
}

/* Level 0 only, where the key is 0. */
static inline void hak_link_set_plain(void *block, const void *next)
{
    *(const void **)block = next;
}

/* The link in block, decoded: valid when hak_link_corrupted says not. */
static inline uintptr_t hak_link_decode(const void *block)
{
    return *(const uintptr_t *)block ^ hak_link_keys.link;
}

static inline bool hak_link_corrupted(uintptr_t next)
{
    return next & 15;
}

/* Aborts.  Not declared noreturn, so that malloc's fast path can jump to it
 * and needs no stack frame of its own for the call. */
void *hak_fatal_corrupted_link(const void *block) __attribute__((cold));

/* The next block, or HAK_LIST_END after the last: what a cache's head
 * takes. */
static inline void *hak_link_next(const void *block)
{
    uintptr_t next = hak_link_decode(block);
    if (HAK_UNLIKELY(hak_link_corrupted(next)))
        hak_fatal_corrupted_link(block);
    return (void *)next;
}

/* The next block, or NULL after the last. */
static inline void *hak_link_get(const void *block)
{
    return hak_list_or_null(hak_link_next(block));
}

static inline bool hak_block_tagged_free(const void *block)
{
    return ((const uintptr_t *)block)[1] == hak_link_keys.free_tag;
}

static inline void hak_block_tag_free(void *block)
{
    ((uintptr_t *)block)[1] = hak_link_keys.free_tag;
}

/* A block handed out keeps neither word of the free list: its tag would
 * make a free of it a double free, and its link, which the program can read
 * before it writes the block, would give the key away (the key XOR the
 * address that the next malloc of the class returns). */
static inline void hak_block_clear_free_words(void *block)
{
    ((uintptr_t *)block)[0] = 0;
    ((uintptr_t *)block)[1] = 0;
}

#endif

#include "slab.h"

#include <immintrin.h>
#include <string.h>

#include "../block/block_link.h"
#include "../block/size_class.h"
#include "../memcheck.h"
#include "superslab.h"

static inline uintptr_t flag_of(uintptr_t word)
{
    return word & HAK_REMOTE_FLAGS;
}

_Static_assert(HAK_SLAB_SIZE / 16 <= HAK_REMOTE_COUNT_MAX,
               "a SuperSlab's slab of the smallest blocks fits the remote count");

#define REMOTE_LIST_BITS (((uintptr_t)1 << HAK_REMOTE_COUNT_SHIFT) - 1 - HAK_REMOTE_FLAGS)

static inline void *list_of(uintptr_t word)
{
    return (void *)(word & REMOTE_LIST_BITS);
}

static inline uint32_t count_of(uintptr_t word)
{
    return (uint32_t)(word >> HAK_REMOTE_COUNT_SHIFT);
}

/* word with head pushed: count more blocks in front of its list. */
static inline uintptr_t pushed(uintptr_t word, void *head, uint32_t count)
{
    return (uintptr_t)head | flag_of(word) |
           ((uintptr_t)(count_of(word) + count) << HAK_REMOTE_COUNT_SHIFT);
}

static struct hak_slab **page_entry(const struct hak_slab *slab, const char *addr)
{
    struct hak_chunk *chunk = (struct hak_chunk *)slab->chunk;
    return &chunk->page_slab[((uintptr_t)addr - (uintptr_t)chunk) >> HAK_PAGE_SHIFT];
}

/* The entries for free of the arena chunk's pages that map_carved just
 * mapped, [from, to) (struct hak_arena_chunk), as their page_slab entries
 * say: the slab's where a carved block starts, none inside a block.  A
 * pointer into a page not carved yet, or inside a block bigger than a page
 * (though the next block, not carved yet, may start in its last page),
 * then leaves the fast path, to be refused. */
static void set_page_info(const struct hak_slab *slab, const char *from, const char *to)
{
    struct hak_arena_chunk *chunk = (struct hak_arena_chunk *)slab->chunk;
    struct hak_page_info info = hak_page_info(slab);
    size_t last = ((uintptr_t)to - 1 - (uintptr_t)chunk) >> HAK_PAGE_SHIFT;
    for (size_t page = ((uintptr_t)from - (uintptr_t)chunk) >> HAK_PAGE_SHIFT; page <= last; page++)
        chunk->page_info[page] = chunk->page_slab[page] == slab ? info : HAK_PAGE_INFO_NONE;
}

/* The same for a SuperSlab's pages: their class and the owner's page tag
 * where the slab's blocks start, HAK_NO_PAGE_CLASS inside a block that
 * runs on from the page before. */
static void set_page_class(const struct hak_slab *slab, const char *from, const char *to)
{
    struct hak_superslab *ss = hak_superslab_of(slab);
    size_t last = ((uintptr_t)to - 1 - (uintptr_t)ss) >> HAK_PAGE_SHIFT;
    uint8_t byte = (uint8_t)(slab->cls | slab->page_tag);
    for (size_t page = ((uintptr_t)from - (uintptr_t)ss) >> HAK_PAGE_SHIFT; page <= last; page++)
        hak_superslab_set_page_byte(
            ss, page, ss->page_slab[page] == slab ? byte : (uint8_t)HAK_NO_PAGE_CLASS);
}

/* Free blocks are memcheck's no-go area but for their link and tag. */
static void memcheck_carved(const struct hak_slab *slab, char *from, char *to)
{
    size_t size = slab->block_size;
    if (hak_harden.memcheck)
        for (char *block = from; block < to; block += size)
            hak_memcheck_noaccess(block + 2 * sizeof(void *), size - 2 * sizeof(void *));
}

/* The page table learns of blocks as they are carved: pages with a block
 * start map to the slab, pages inside a block bigger than a page to
 * hak_interior_slab.  Pages not carved yet keep hak_invalid_slab.  Either
 * sentinel sends a free there off the fast path, to be refused.  An L25
 * slab's pages map to it throughout (hak_slab_is_whole_span). */
static void map_carved(struct hak_slab *slab, char *from, char *to)
{
    size_t size = slab->block_size;
    if (hak_slab_is_whole_span(slab)) {
        set_page_info(slab, from, from + 1);
        memcheck_carved(slab, from, to);
        return;
    }
    struct hak_slab **next = page_entry(slab, from);
    if (size <= HAK_PAGE_SIZE) {
        /* A block starts in every page up to the last block's. */
        for (struct hak_slab **last = page_entry(slab, to - size); next <= last;)
            *next++ = slab;
    } else {
        for (char *block = from; block < to; block += size) {
            struct hak_slab **entry = page_entry(slab, block);
            while (next < entry)
                *next++ = &hak_interior_slab;
            *entry = slab;
            next = entry + 1;
        }
    }
    for (struct hak_slab **last = page_entry(slab, to - 1); next <= last;)
        *next++ = &hak_interior_slab;
    if (slab->chunk->kind == HAK_CHUNK_ARENA)
        set_page_info(slab, from, to);
    else if (slab->chunk->kind == HAK_CHUNK_SUPERSLAB)
        set_page_class(slab, from, to);
    memcheck_carved(slab, from, to);
}

/* The free-list words of the slab's class's blocks that start below end. */
static void clear_free_words_below(const struct hak_slab *slab, const char *end)
{
    for (char *block = slab->start; block < end; block += slab->block_size)
        hak_block_clear_free_words(block);
}

void hak_slab_assign(struct hak_slab *slab, struct hak_heap *owner, uint8_t page_tag, unsigned cls,
                     char *start, size_t bytes)
{
    uint32_t size = hak_class_size[cls];
    /* Blocks of the class the slab had start where the new class's may not:
     * their free-list words would be inside blocks handed out.  Those in
     * every page it touched, the pages since given back (decommit_free_slabs)
     * excepted, which are zero: of its last use, and of each use of the
     * class before it, back to the last change of class, which cleared the
     * class before (a use that carved less than one before it leaves the
     * earlier one's words past its carve). */
    if (slab->kind == HAK_SLAB_SMALL && slab->cls != cls)
        hak_slab_clear_touched_free_words(slab);
    if (!hak_slab_is_whole_span(slab))
        for (char *page = start; page < start + bytes; page += HAK_PAGE_SIZE)
            *page_entry(slab, page) = &hak_invalid_slab;
    /* Whatever the memory held before, hakmem writes it afresh. */
    hak_memcheck_undefined(start, bytes);
    slab->start = start;
    slab->end = start + (bytes / size) * size;
    slab->block_size = size;
    slab->capacity = (uint32_t)(bytes / size);
    slab->block_limit = hak_block_limit(cls, slab->capacity);
    slab->cls = (uint8_t)cls;
    if (slab->chunk->kind == HAK_CHUNK_SUPERSLAB)
        hak_superslab_clear_page_classes(slab);
    slab->free_node = slab->node;
    slab->free = NULL;
    slab->used = 0;
    slab->queued = false;
    slab->carve = start;
    slab->page_tag = page_tag;
    slab->next = slab->prev = NULL;
    atomic_store_explicit(&slab->remote, HAK_REMOTE_NORMAL, memory_order_relaxed);
    atomic_store_explicit(&slab->owner, owner, memory_order_release);
}

uint32_t hak_slab_extend(struct hak_slab *slab)
{
    char *block = slab->carve;
    uint32_t size = slab->block_size;
    if (block + size > slab->end)
        return 0;
    /* The blocks that start in the carve's page, or one block bigger than a
     * page: carving writes each block's first words, so a bigger batch
     * would fault in pages nobody asked for (a compiler's first 8 KiB
     * malloc touched 32 pages when big blocks were carved sixteen at a
     * time, and most short processes take one or two blocks of each Mid
     * class they use).  Every block that starts in the page, the one that
     * runs on into the next too: free's fast path takes a block start in a
     * page carved for a block (front/thread_heap.h), and one left uncarved there
     * went into the cache, handed out by the next malloc and again when
     * carved. */
    char *limit = size > HAK_PAGE_SIZE ? block + size
                                       : (char *)(((uintptr_t)block | (HAK_PAGE_SIZE - 1)) + 1);
    if (limit > slab->end)
        limit = slab->end;
    void *head = slab->free;
    char *last = block;
    char *next = block + size;
    uint32_t carved = 1;
    /* Tagged free like a freed block: a free of one never handed out is
     * a double free (block/block_link.h). */
    while (next < limit) {
        hak_link_set(last, next);
        hak_block_tag_free(last);
        last = next;
        next += size;
        carved++;
    }
    hak_link_set_or_end(last, head);
    hak_block_tag_free(last);
    slab->free = block;
    slab->carve = last + size;
    map_carved(slab, block, slab->carve);
    unsigned cls = slab->cls;
    enum hak_page_bucket bucket = hak_class_is_small(cls) ? (enum hak_page_bucket)cls
                                  : hak_class_is_l25(cls) ? HAK_PAGES_L25
                                                          : HAK_PAGES_MID;
    hak_slab_count_pages(slab, (size_t)(block - slab->start), (size_t)(slab->carve - slab->start),
                         bucket);
    return carved;
}

void hak_slab_count_pages(struct hak_slab *slab, size_t from, size_t to,
                          enum hak_page_bucket bucket)
{
    slab->touched_pages = (uint32_t)hak_stat_pages_handed_out(
        bucket, (from + HAK_PAGE_SIZE - 1) >> HAK_PAGE_SHIFT,
        (to + HAK_PAGE_SIZE - 1) >> HAK_PAGE_SHIFT, slab->touched_pages);
}

void hak_slab_clear_free_words(const struct hak_slab *slab)
{
    clear_free_words_below(slab, slab->carve);
}

void hak_slab_clear_touched_free_words(const struct hak_slab *slab)
{
    if (!slab->block_size)
        return; /* never given a class: it carved no blocks */
    clear_free_words_below(slab, slab->start + (size_t)slab->touched_pages * HAK_PAGE_SIZE);
}

uint32_t hak_slab_collect_remote(struct hak_slab *slab)
{
    uintptr_t word = atomic_load_explicit(&slab->remote, memory_order_relaxed);
    while (list_of(word)) {
        if (atomic_compare_exchange_weak_explicit(&slab->remote, &word, flag_of(word),
                                                  memory_order_acquire, memory_order_relaxed))
            break;
    }
    void *list = list_of(word);
    if (!list)
        return 0;
    if (slab->free) {
        void *tail = list;
        for (void *next; (next = hak_link_get(tail)); tail = next)
            ;
        hak_link_set(tail, slab->free);
    }
    slab->free = list;
    uint32_t count = count_of(word);
    slab->used -= count;
    return count;
}

bool hak_slab_arm_notify(struct hak_slab *slab)
{
    uintptr_t expected = HAK_REMOTE_NORMAL;
    return atomic_compare_exchange_strong_explicit(&slab->remote, &expected, HAK_REMOTE_NOTIFY,
                                                   memory_order_acq_rel, memory_order_relaxed);
}

/* Waits out a remote free that is queueing the slab on its owner's list. */
static uintptr_t wait_not_notifying(struct hak_slab *slab)
{
    uintptr_t word = atomic_load_explicit(&slab->remote, memory_order_acquire);
    while (flag_of(word) == HAK_REMOTE_NOTIFYING) {
        _mm_pause();
        word = atomic_load_explicit(&slab->remote, memory_order_acquire);
    }
    return word;
}

static void set_flag(struct hak_slab *slab, uintptr_t flag)
{
    uintptr_t word = wait_not_notifying(slab);
    for (;;) {
        if (flag_of(word) == HAK_REMOTE_NOTIFYING) {
            word = wait_not_notifying(slab);
            continue;
        }
        uintptr_t next = (word & ~(uintptr_t)HAK_REMOTE_FLAGS) | flag;
        if (atomic_compare_exchange_weak_explicit(&slab->remote, &word, next, memory_order_acq_rel,
                                                  memory_order_acquire))
            return;
    }
}

bool hak_slab_disarm_notify(struct hak_slab *slab)
{
    uintptr_t word = wait_not_notifying(slab);
    for (;;) {
        if (flag_of(word) == HAK_REMOTE_NOTIFYING) {
            word = wait_not_notifying(slab);
            continue;
        }
        if (flag_of(word) != HAK_REMOTE_NOTIFY)
            return true; /* a remote free has queued it */
        if (atomic_compare_exchange_weak_explicit(
                &slab->remote, &word, (word & ~(uintptr_t)HAK_REMOTE_FLAGS) | HAK_REMOTE_NORMAL,
                memory_order_acq_rel, memory_order_acquire))
            return false;
    }
}

void hak_slab_disown(struct hak_slab *slab)
{
    set_flag(slab, HAK_REMOTE_NEVER);
    atomic_store_explicit(&slab->owner, NULL, memory_order_release);
}

void hak_slab_adopt(struct hak_slab *slab, struct hak_heap *owner, uint8_t page_tag)
{
    slab->page_tag = page_tag;
    if (slab->chunk->kind == HAK_CHUNK_SUPERSLAB && slab->carve > slab->start)
        set_page_class(slab, slab->start, slab->carve);
    atomic_store_explicit(&slab->owner, owner, memory_order_release);
    slab->queued = false;
    set_flag(slab, HAK_REMOTE_NORMAL);
}

static void queue_on_owner(struct hak_slab *slab)
{
    struct hak_heap *owner = atomic_load_explicit(&slab->owner, memory_order_acquire);
    struct hak_slab *head = atomic_load_explicit(&owner->delayed, memory_order_relaxed);
    do {
        slab->delayed_next = head;
    } while (!atomic_compare_exchange_weak_explicit(&owner->delayed, &head, slab,
                                                    memory_order_release, memory_order_relaxed));
}

void hak_slab_remote_free_chain(struct hak_slab *slab, void *head, void *tail, uint32_t count)
{
    if (HAK_UNLIKELY((uintptr_t)head & ~REMOTE_LIST_BITS))
        hak_fatal("remote free of a block above 2^48", head);
    uintptr_t word = atomic_load_explicit(&slab->remote, memory_order_relaxed);
    for (;;) {
        uintptr_t flag = flag_of(word);
        if (flag == HAK_REMOTE_NOTIFYING) {
            _mm_pause();
            word = atomic_load_explicit(&slab->remote, memory_order_relaxed);
            continue;
        }
        if (flag == HAK_REMOTE_NOTIFY) {
            /* Claim the notification; others wait until the slab is queued. */
            if (!atomic_compare_exchange_weak_explicit(&slab->remote, &word,
                                                       (word & ~(uintptr_t)HAK_REMOTE_FLAGS) |
                                                           HAK_REMOTE_NOTIFYING,
                                                       memory_order_acquire, memory_order_relaxed))
                continue;
            queue_on_owner(slab);
            /* Only the owner's collection can change the word now. */
            word = atomic_load_explicit(&slab->remote, memory_order_relaxed);
            do {
                hak_link_set_or_end(tail, list_of(word));
            } while (!atomic_compare_exchange_weak_explicit(
                &slab->remote, &word, pushed(word & ~(uintptr_t)HAK_REMOTE_FLAGS, head, count),
                memory_order_release, memory_order_relaxed));
            return;
        }
        hak_link_set_or_end(tail, list_of(word));
        if (atomic_compare_exchange_weak_explicit(&slab->remote, &word, pushed(word, head, count),
                                                  memory_order_release, memory_order_relaxed))
            return;
    }
}

#include "thread_heap.h"

#include <errno.h>
#include <string.h>

#include "../arena/abandoned.h"
#include "../arena/hot_span_box.h"
#include "../arena/large.h"
#include "../arena/meta.h"
#include "../arena/node_block.h"
#include "../arena/page_arena.h"
#include "../arena/page_map.h"
#include "../arena/shared_pool.h"
#include "../arena/slab.h"
#include "../arena/superslab.h"
#include "../fault.h"
#include "../fork_locks.h"
#include "../harden.h"
#include "../memcheck.h"
#include "../numa/node.h"
#include "../options.h"
#include "../os.h"
#include "../stats.h"
#include "../block/canary.h"
#include "quarantine.h"

/* What cpu_word points at where no move needs a look: it matches
 * hak_tls.cpu, read from it, but after a fork marked the thread
 * (FORK_CPU). */
static const int32_t unwatched_cpu;

__thread struct hak_thread hak_tls __attribute__((tls_model("initial-exec"))) = {
    .head = {[0 ... HAK_NUM_CLASSES - 1] = HAK_LIST_END},
    .heap = &hak_empty_heap,
    .node = HAK_HEAPLESS_NODE,
    .region_base = HAK_REGION_UNSET,
    .cpu_word = &unwatched_cpu,
};

static pthread_key_t exit_key HAK_START_UP;

/* Set once the thread's heap has gone at its exit: a free from a later
 * destructor must not make a heap that nothing would take down. */
static __thread bool heap_gone __attribute__((tls_model("initial-exec")));

/* Live heaps, and the counters of heaps whose threads have exited.  count:
 * the live heaps, parked ones (below) among them, which parked leaves out
 * where threads are counted. */
static struct {
    struct hak_heap *live;
    _Atomic unsigned count;
    _Atomic unsigned parked;
    struct hak_class_stats retired[HAK_NUM_CLASSES];
} registry HAK_START_UP;

/* heap onto the registry's live list, which is locked. */
static void link_live(struct hak_heap *heap)
{
    heap->prev_live = NULL;
    heap->next_live = registry.live;
    if (registry.live)
        registry.live->prev_live = heap;
    registry.live = heap;
    atomic_fetch_add_explicit(&registry.count, 1, memory_order_relaxed);
}

/* Where threads are counted: the live heaps less the parked ones. */
static unsigned live_threads(void)
{
    unsigned count = atomic_load_explicit(&registry.count, memory_order_relaxed);
    unsigned parked = atomic_load_explicit(&registry.parked, memory_order_relaxed);
    return count > parked ? count - parked : 0;
}

/* ---- the heap's slab lists ---- */

static void list_push(struct hak_slab_list *list, struct hak_slab *slab)
{
    slab->prev = NULL;
    slab->next = list->head;
    if (list->head)
        list->head->prev = slab;
    list->head = slab;
}

static void list_remove(struct hak_slab_list *list, struct hak_slab *slab)
{
    if (slab->prev)
        slab->prev->next = slab->next;
    else
        list->head = slab->next;
    if (slab->next)
        slab->next->prev = slab->prev;
    slab->next = slab->prev = NULL;
}

static struct hak_slab *list_pop(struct hak_slab_list *list)
{
    struct hak_slab *slab = list->head;
    if (slab)
        list_remove(list, slab);
    return slab;
}

/* Looks again at how much of the thread's node's part of the SuperSlab
 * region holds SuperSlabs (struct hak_thread): when the thread may have
 * come by a slab of a SuperSlab it has not heard of, or changed nodes. */
static void see_region_part(struct hak_thread *thread)
{
    thread->region_used =
        hak_superslab_region_part(thread->node, &thread->region_base, &thread->page_table);
}

static void set_thread_node(struct hak_thread *thread, unsigned node)
{
    thread->node = node;
    see_region_part(thread);
}

/* ---- getting slabs ---- */

/* Moves the blocks other threads freed onto slab's free list; they leave
 * the blocks heap holds. */
static uint32_t collect(struct hak_heap *heap, struct hak_slab *slab)
{
    uint32_t count = hak_slab_collect_remote(slab);
    heap->stats[slab->cls].blocks_held -= count;
    return count;
}

/* The heap's page tag as its slabs keep it, and write into their pages'
 * bytes (struct hak_slab): the thread's, narrowed from the width free
 * XORs it at. */
static uint8_t page_tag_of(const struct hak_heap *heap)
{
    return (uint8_t)heap->thread->page_tag;
}

static void release_idle_for_growth(struct hak_heap *heap, unsigned keep);

/* A slab or span from node's backend, idle classes' blocks given back
 * first (release_idle_for_growth): a SuperSlab's slab for the small classes
 * and the Mid ones up to a page (HAK_SUPERSLAB_CLASSES), a span for the
 * others.  At level 2 the last page of a SuperSlab's slab is its guard,
 * for good (arena/superslab.c); a span gets one more page, guarded while
 * it serves blocks (release_to_backend). */
static struct hak_slab *fresh_slab(struct hak_heap *heap, unsigned cls)
{
    release_idle_for_growth(heap, cls);
    if (hak_class_in_superslab(cls)) {
        struct hak_slab *slab = hak_shared_pool_take(heap->node);
        if (slab) {
            hak_slab_assign(slab, heap, page_tag_of(heap), cls, slab->start,
                            HAK_SLAB_SIZE - hak_harden.guard_bytes);
            heap->taken_pages += HAK_SLAB_PAGES;
        }
        return slab;
    }
    uint32_t bytes = hak_class_span_bytes[cls];
    uint32_t pages = (bytes + hak_harden.guard_bytes) / (uint32_t)HAK_PAGE_SIZE;
    struct hak_slab *span = hak_hot_span_take(heap->node, pages);
    if (!span)
        span = hak_hot_span_take_fresh(heap->node, pages);
    if (!span)
        return NULL;
    heap->taken_pages += pages;
    span->kind = hak_class_is_l25(cls) ? HAK_SLAB_L25 : HAK_SLAB_MID;
    hak_slab_assign(span, heap, page_tag_of(heap), cls, span->start, bytes);
    if (hak_harden.guard_bytes)
        hak_os_guard(span->start + bytes, hak_harden.guard_bytes);
    return span;
}

static struct hak_slab *take_parked_slab(unsigned node, unsigned cls);

static struct hak_slab *next_slab(struct hak_heap *heap, unsigned cls)
{
    struct hak_slab *slab = list_pop(&heap->partial[cls]);
    if (slab)
        return slab;
    slab = hak_abandoned_pop(heap->node, cls);
    if (!slab)
        slab = take_parked_slab(heap->node, cls);
    if (slab) {
        hak_slab_adopt(slab, heap, page_tag_of(heap));
        collect(heap, slab);
    } else {
        slab = fresh_slab(heap, cls);
    }
    if (slab) {
        heap->stats[cls].slabs_in++;
        see_region_part(heap->thread);
    }
    return slab;
}

/* ---- giving slabs back ---- */

/* discard: the span's class idles while its thread grows in others
 * (release_idle_for_growth): a stale hot span, as no Mid or L25 malloc is
 * likely to take it before it ages out. */
static void release_to_backend(struct hak_slab *slab, bool discard)
{
    if (slab->kind == HAK_SLAB_SMALL) {
        hak_shared_pool_give(slab); /* cleared if it takes another class */
        return;
    }
    /* The HotSpanBox and the PageArena reuse and merge spans whole; an
     * L25 span's free blocks are guarded too (quarantine_pages). */
    if (hak_harden.guard_bytes) {
        size_t bytes = (size_t)slab->pages * HAK_PAGE_SIZE;
        size_t guarded = slab->kind == HAK_SLAB_L25 ? bytes : hak_harden.guard_bytes;
        hak_os_unguard(slab->start + bytes - guarded, guarded);
    }
    hak_slab_clear_free_words(slab);
    if (discard)
        hak_hot_span_discard(slab);
    else
        hak_hot_span_put(slab);
}

/* A full slab got a block back (locally, or collected from its remote list). */
static void unfull(struct hak_heap *heap, struct hak_slab *slab)
{
    list_remove(&heap->full[slab->cls], slab);
    slab->state = HAK_STATE_PARTIAL;
    list_push(&heap->partial[slab->cls], slab);
}

static void retire_if_empty(struct hak_heap *heap, struct hak_slab *slab)
{
    if (slab->state == HAK_STATE_PARTIAL && slab->used == 0 && !slab->queued) {
        list_remove(&heap->partial[slab->cls], slab);
        heap->stats[slab->cls].slabs_out++;
        release_to_backend(slab, heap->discard_spans);
    }
}

static void drain_delayed(struct hak_heap *heap)
{
    struct hak_slab *slab = atomic_exchange_explicit(&heap->delayed, NULL, memory_order_acquire);
    while (slab) {
        struct hak_slab *next = slab->delayed_next;
        slab->queued = false;
        collect(heap, slab);
        if (slab->state == HAK_STATE_FULL)
            unfull(heap, slab);
        retire_if_empty(heap, slab);
        slab = next;
    }
}

/* Blocks went home to a slab that was full or is now empty. */
static HAK_NOINLINE void settle(struct hak_heap *heap, struct hak_slab *slab)
{
    if (slab->state == HAK_STATE_FULL) {
        if (hak_slab_disarm_notify(slab))
            slab->queued = true;
        unfull(heap, slab);
    }
    retire_if_empty(heap, slab);
}

/* Blocks of a slab this heap owns, linked from head to tail, leave the
 * caches for good. */
static void return_run(struct hak_heap *heap, struct hak_slab *slab, void *head, void *tail,
                       uint32_t count)
{
    hak_link_set_or_end(tail, slab->free);
    slab->free = head;
    slab->used -= count;
    heap->stats[slab->cls].blocks_held -= count;
    if (slab->state == HAK_STATE_FULL || slab->used == 0)
        settle(heap, slab);
}

/* ---- checks (issue 7) ---- */

/* The slab of a block hakmem handed out. */
static struct hak_slab *slab_of(void *block)
{
    return hak_chunk_slab(hak_page_map_lookup(block), block);
}

/* slab, or where the fast path passed none the block's page's: a block of
 * the thread's part of the region (hak_heap_free_in_region), as the fast
 * path found it, or of an arena chunk (hak_heap_free_in_page). */
static struct hak_slab *given_or_own_slab(struct hak_slab *slab, void *block)
{
    if (slab)
        return slab;
    uintptr_t offset;
    if (hak_heap_region_find(&hak_tls, block, &offset))
        return hak_superslab_page_slab(block, hak_superslab_page(block));
    return hak_arena_page_slab(block, hak_arena_page(block));
}

static char *class_note(char note[16], unsigned cls)
{
    memcpy(note, "class ", 6);
    hak_class_name(cls, note + 6);
    return note;
}

static bool serves_blocks(const struct hak_slab *slab)
{
    uint8_t kind = slab->kind;
    return slab->free_node != HAK_NO_NODE &&
           (kind == HAK_SLAB_SMALL || kind == HAK_SLAB_MID || kind == HAK_SLAB_L25);
}

/* The slab of the block that covers an interior page (hak_interior_slab):
 * the entry of the nearest page before it that is not interior. */
static struct hak_slab *slab_before(const void *ptr)
{
    struct hak_chunk *chunk = (struct hak_chunk *)hak_page_map_lookup(ptr);
    size_t page = ((uintptr_t)ptr - (uintptr_t)chunk) >> HAK_PAGE_SHIFT;
    while (chunk->page_slab[page] == &hak_interior_slab)
        page--;
    return chunk->page_slab[page];
}

/* Aborts for a pointer that starts no block of a live slab: inside a block
 * when its page lies inside one bigger than a page; a double free where a
 * block started that has gone back with its whole slab or span (to the
 * shared pool, the HotSpanBox or the PageArena); else never handed out.  A
 * freed span no longer knows where its blocks were: any 16-byte aligned
 * pointer into its pages that were handed out counts as a block start. */
static __attribute__((noreturn, cold)) void refuse(struct hak_slab *slab, void *block)
{
    char note[16];
    if (slab == &hak_interior_slab) {
        slab = slab_before(block);
        if (serves_blocks(slab))
            hak_fatal_note("free of a pointer inside a block:", block, class_note(note, slab->cls));
    }
    /* A pooled small slab keeps its class and how far it was carved. */
    if (slab->kind == HAK_SLAB_SMALL && slab->free_node == HAK_NO_NODE &&
        (char *)block < slab->carve &&
        (size_t)((char *)block - slab->start) % slab->block_size == 0)
        hak_fatal_double_free(block, slab->cls);
    if ((uintptr_t)block % 16 == 0 && hak_page_arena_was_handed_out(slab, block))
        hak_fatal_note("double free of", block, "freed span");
    hak_fatal("free of a pointer hakmem never handed out:", block);
}

/* The whole test behind the fast path's block-start one: block must be a
 * block a live slab handed out; slab is its page's entry. */
static void check_block(struct hak_slab *slab, void *block)
{
    char note[16];
    if (HAK_UNLIKELY(!serves_blocks(slab) || (char *)block >= slab->carve))
        refuse(slab, block);
    if (!hak_class_starts_block(slab->cls, (uint32_t)((char *)block - slab->start)))
        hak_fatal_note("free of a pointer inside a block:", block, class_note(note, slab->cls));
}

/* noipa: so that no caller learns that it never returns (thread_heap.h). */
HAK_NOIPA void hak_heap_free_invalid(void *block, struct hak_slab *slab)
{
    slab = given_or_own_slab(slab, block);
    /* A page that holds no block start (header, uncarved and interior
     * pages) has no tag to read: check_block names what it is. */
    if (slab != &hak_invalid_slab && slab != &hak_interior_slab && hak_block_tagged_free(block))
        hak_fatal_double_free(block, slab->cls);
    check_block(slab, block);
    /* The fast path sends a block here for its offset or its tag, and
     * check_block refuses every pointer that starts no block; kept for
     * safety should the two ever disagree. */
    hak_fatal("free of a misaligned pointer:", block);
}

/* ---- slow paths ---- */

static uint32_t cache_limit(unsigned cls)
{
    uint32_t size = hak_class_size[cls];
    uint32_t blocks = hak_class_is_small(cls) ? hak_options.small_cache
                      : hak_class_is_l25(cls) ? hak_options.l25_ring
                                              : hak_options.mid_ring;
    uint64_t by_bytes = hak_options.ring_bytes / size;
    if (!hak_class_is_small(cls) && by_bytes < blocks)
        blocks = (uint32_t)by_bytes;
    if (blocks > HAK_CACHE_LIMIT_MAX)
        blocks = HAK_CACHE_LIMIT_MAX;
    return blocks ? blocks : 1;
}

#define REFILL_BYTES (32u << 10)

/* Half the cache, so that it neither refills nor flushes again soon, but no
 * more than 32 KiB: linking a block in writes to it, and pages of big blocks
 * should be touched only when they are handed out. */
static uint32_t full_batch(uint32_t limit, unsigned cls)
{
    uint32_t batch = limit / 2;
    uint32_t by_bytes = REFILL_BYTES / hak_class_size[cls];
    return batch < by_bytes ? batch : by_bytes;
}

/* A page's worth at first, with the block the refill hands out (one block
 * more of a class of more than half a page), doubling with every refill up
 * to the full batch: most processes are short and allocate a few blocks of
 * a class, and should not fault in pages of blocks they never use (issue
 * 8).  A batch of a whole page's worth besides the block handed out touched
 * a second page of every fresh slab: a forked child's first mallocs, one
 * of each class, faulted twice per class. */
static uint32_t first_batch(uint32_t limit, unsigned cls)
{
    uint32_t by_page = HAK_PAGE_SIZE / hak_class_size[cls];
    by_page = by_page > 1 ? by_page - 1 : 1;
    uint32_t full = full_batch(limit, cls);
    return by_page < full ? by_page : full;
}

/* ---- cache sizes that fit the program ----
 *
 * A program that allocates batches bigger than a small class's cache, then
 * frees them all, makes the cache flush and refill in turn, a few blocks
 * each time (glibc's malloc benchmark: 28% of the time).  Such a class
 * doubles its cache at every turn from flushes to refills or back, up to
 * CACHE_MAX_BLOCKS and CACHE_MAX_CLASS_BYTES.  What the small caches of a
 * thread may hold together is bounded in bytes, CACHE_THREAD_BYTES: a
 * class that would pass it first empties the caches of the classes that
 * sat idle since the last such look, back to their first size.  Only the
 * blocks grow: the per-class state the fast paths read stays one word each
 * (seed 000: a bigger ring in one pool pushed another pool's hot state out
 * of L1).  The bounds fit a program that tears down and rebuilds some ten
 * thousand small objects at a time (cxx_churn: with 8192 blocks, 512 KiB a
 * class and 2 MiB a thread, half its frees of 32-80 B blocks went home one
 * by one and came back in refills; with these, 1 in 200, 9% faster, and
 * the same peak RSS, since the blocks were the program's a moment before).
 *
 * Mid and L25 classes of blocks up to SPARSE_CHECK_MIN grow the same way,
 * up to CACHE_MAX_BIG_CLASS_BYTES, and in all by the thread's share of
 * CACHE_BIG_BYTES_ALL_THREADS among the live threads, from
 * CACHE_THREAD_BIG_MIN to CACHE_THREAD_BIG_MAX (big_cache_bound); a class
 * that flushes while its thread holds more than its share, as when more
 * threads started since it grew, shrinks by the excess
 * (limit_within_share).  Past the floor, what the process's threads hold
 * together stays within the budget but for classes that keep their blocks
 * without flushing: those that idle until the decay (look_for_idle), and
 * threads that stopped allocating.  A program whose count of live blocks
 * of such a class swings by more than the first cache sends blocks home
 * and takes them back without end, and each trip costs the same whatever the
 * block's size: a span to the HotSpanBox and back, under one of its
 * locks, and carved again (mid_light: 40 KiB blocks, a trip on one malloc
 * in ten, a quarter of hakmem's instructions; 512 blocks of 8-32 KiB
 * allocated, then freed, in turn: with 4 MiB a thread, the classes over
 * 16 KiB carved a span every ten mallocs, 1.8 times tcmalloc's time; with
 * 16 MiB, level with it).  A freed block of these classes stays resident
 * in the cache as it would in the HotSpanBox.
 *
 * The classes of bigger blocks grow only while the program writes little
 * of them (blocks_sparse), by CACHE_THREAD_SPARSE_BYTES in all: a cached
 * block then pins a page or two, not its size, for as long as the program
 * keeps to that (a look every SPARSE_RECHECK_TURNS turns while it does).
 * l25_light (blocks of 64 KiB-1 MiB of which the program writes 64 B) ran
 * at a third of mimalloc's speed when they kept their first sizes, one
 * block for the classes over 256 KiB, which holds none; l25, which writes
 * its blocks whole, peaked 4% higher when they grew as the smaller ones
 * do.  With 16 MiB in all, l25_light's 64 blocks a thread still took a
 * span from the HotSpanBox, under a lock, at one malloc in six: 7.75M
 * ops/s against 14.5M with 32 MiB, which kept half as much resident
 * (3.9 MB against 7.3 MB: fewer fresh spans carved). */
#define CACHE_MAX_BLOCKS HAK_CACHE_LIMIT_MAX
#define CACHE_MAX_CLASS_BYTES (2048u << 10)
#define CACHE_THREAD_BYTES (8192u << 10)
#define CACHE_MAX_BIG_CLASS_BYTES (4u << 20)
#define CACHE_BIG_BYTES_ALL_THREADS (64u << 20)
#define CACHE_THREAD_BIG_MIN (4u << 20)
#define CACHE_THREAD_BIG_MAX (16u << 20)
#define SPARSE_CHECK_MIN (64u << 10)
#define CACHE_THREAD_SPARSE_BYTES (32u << 20)

static uint32_t cache_max(unsigned cls)
{
    uint32_t base = cache_limit(cls);
    uint32_t size = hak_class_size[cls];
    uint32_t max =
        (hak_class_is_small(cls) ? CACHE_MAX_CLASS_BYTES : CACHE_MAX_BIG_CLASS_BYTES) / size;
    if (max > CACHE_MAX_BLOCKS)
        max = CACHE_MAX_BLOCKS;
    return max > base ? max : base;
}

/* What the caches of a thread's Mid and L25 classes that are not
 * sparse_checked may grow by beyond their first sizes, in all: its share
 * of CACHE_BIG_BYTES_ALL_THREADS among the live threads, and the parked
 * heaps, which keep theirs. */
static uint64_t big_cache_bound(void)
{
    unsigned threads = atomic_load_explicit(&registry.count, memory_order_relaxed);
    uint64_t share = CACHE_BIG_BYTES_ALL_THREADS / (threads ? threads : 1);
    return share < CACHE_THREAD_BIG_MIN   ? CACHE_THREAD_BIG_MIN
           : share > CACHE_THREAD_BIG_MAX ? CACHE_THREAD_BIG_MAX
                                          : share;
}

/* Whether cls grows out of the thread's sparse bound (blocks_sparse). */
static bool sparse_checked(unsigned cls)
{
    return hak_class_size[cls] > SPARSE_CHECK_MIN;
}

static void flush_list(struct hak_heap *heap, void *list, bool adopt);

/* The blocks of cls's cache, NULL for none. */
static void *cached_list(const struct hak_heap *heap, unsigned cls)
{
    return hak_list_or_null(heap->thread->head[cls]);
}

/* The room a small class's cache holds for a slab's list (lend_room). */
static uint32_t lent_room(const struct hak_heap *heap, unsigned cls)
{
    return hak_class_is_small(cls) ? heap->lent[cls] : 0;
}

/* Sets a class's capacity; the blocks cached stay, so room follows. */
static void set_limit(struct hak_heap *heap, unsigned cls, uint32_t limit)
{
    uint64_t *bytes = hak_class_is_small(cls) ? &heap->small_cache_bytes
                                              : &heap->big_cache_growth[sparse_checked(cls)];
    *bytes -= (uint64_t)heap->limit[cls] * hak_class_size[cls];
    *bytes += (uint64_t)limit * hak_class_size[cls];
    heap->thread->room[cls] += limit - heap->limit[cls];
    heap->limit[cls] = limit;
}

/* cls's cache, empty, gives back the room lend_room lent it. */
static void return_lent_room(struct hak_heap *heap, unsigned cls)
{
    uint32_t lent = lent_room(heap, cls);
    if (lent) {
        set_limit(heap, cls, heap->limit[cls] - lent);
        heap->lent[cls] = 0;
    }
}

/* The blocks of other heaps' SuperSlab slabs of class cls freed here go home
 * (hak_heap_free_unowned); adopt: at a refill of the class, which adopts
 * the slabs of exited threads among them (flush_list). */
static void send_foreign(struct hak_heap *heap, unsigned cls, bool adopt)
{
    void *list = heap->foreign[cls];
    heap->foreign[cls] = NULL;
    heap->foreign_count[cls] = 0;
    flush_list(heap, list, adopt);
}

/* The blocks of cls's cache go back to their slabs, with those waiting to
 * go home. */
static void flush_cache(struct hak_heap *heap, unsigned cls)
{
    void *list = cached_list(heap, cls);
    heap->thread->head[cls] = HAK_LIST_END;
    heap->thread->room[cls] = heap->limit[cls];
    return_lent_room(heap, cls);
    flush_list(heap, list, false);
    if (hak_class_in_superslab(cls))
        send_foreign(heap, cls, false);
}

/* A cache's blocks go back to their slabs, and it starts again from its
 * first size; the current slab too goes back to its backend once none of
 * its blocks is the program's (an L25 span is one block, which only the
 * cache held), as the partial ones already do. */
static void release_cache(struct hak_heap *heap, unsigned cls)
{
    flush_cache(heap, cls);
    set_limit(heap, cls, cache_limit(cls));
    heap->flushed_last[cls] = false;
    /* What the program writes of its blocks is asked again at the next turn. */
    heap->sparse_wait[cls] = 0;
    heap->sparse[cls] = false;
    heap->sparse_backoff[cls] = 0;
    struct hak_slab *cur = heap->cur[cls];
    if (cur == &hak_empty_slab)
        return;
    collect(heap, cur);
    if (cur->used == 0 && !cur->queued) {
        heap->cur[cls] = &hak_empty_slab;
        heap->stats[cls].slabs_out++;
        release_to_backend(cur, heap->discard_spans);
    }
}

/* Classes other than cls whose caches have not moved since the last look
 * give their blocks back and start again from their first size. */
static void shrink_idle(struct hak_heap *heap, unsigned cls)
{
    for (unsigned other = 0; other < HAK_SMALL_CLASSES; other++) {
        if (other != cls && heap->limit[other] > cache_limit(other) &&
            heap->thread->head[other] == heap->seen_head[other] &&
            heap->thread->room[other] == heap->seen_room[other])
            release_cache(heap, other);
        heap->seen_head[other] = heap->thread->head[other];
        heap->seen_room[other] = heap->thread->room[other];
    }
}

/* Whether cls's cache or current slab keeps anything release_cache gives
 * back. */
static bool holds_blocks(struct hak_heap *heap, unsigned cls)
{
    return cached_list(heap, cls) || heap->limit[cls] > cache_limit(cls) ||
           heap->cur[cls] != &hak_empty_slab ||
           (hak_class_in_superslab(cls) && heap->foreign_count[cls]);
}

/* Every IDLE_LOOK_EVENTS refills and flushes a heap reads the clock, and
 * once HAKMEM_DECAY_MS passed since its last look, every class of any size
 * that served no malloc since then gives back its cached blocks and its
 * emptied current slab, as freed spans and large blocks decay: a thread
 * that took a burst of big blocks and moved on to other sizes keeps none
 * of them past two decay periods.  Mid and L25 caches (up to 48 MiB of
 * growth per thread, their first sizes besides) kept their blocks as long
 * as the thread lived.  The spans their blocks emptied then age in the
 * node's HotSpanBox, which this look ages too: only puts and takes of
 * spans did; so are the node's spare SuperSlabs, which a program that
 * stopped freeing small blocks would otherwise keep.
 * It also gives back the SuperSlab region's unused reservation where a
 * limit the program set since keeps the process over it (os.h).
 * A thread that stops allocating altogether keeps its caches until it
 * exits or calls malloc_trim: the fast paths pay for no clock. */
#define IDLE_LOOK_EVENTS 64

/* A reading of the clock, now: the classes that malloc'd since the last
 * are active as of now. */
static void note_active_classes(struct hak_heap *heap, uint64_t now)
{
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        uint32_t allocs = (uint32_t)heap->thread->allocs[cls];
        if (allocs != heap->read_allocs[cls]) {
            heap->read_allocs[cls] = allocs;
            heap->active_ms[cls] = (uint32_t)now;
        }
    }
}

static void retire_parked_heaps(uint64_t now, uint64_t age_ms);

static void look_for_idle(struct hak_heap *heap, unsigned keep)
{
    /* A coarse clock, from the vDSO: some 20 ns. */
    uint64_t now = hak_os_now_ms();
    heap->slow_ms[keep] = (uint32_t)now;
    heap->slow_allocs[keep] = (uint32_t)heap->thread->allocs[keep];
    if (++heap->slow_events % IDLE_LOOK_EVENTS)
        return;
    note_active_classes(heap, now);
    if (!hak_os_aged(now, heap->idle_look_ms, hak_options.decay_ms))
        return;
    heap->idle_look_ms = now;
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        uint32_t allocs = (uint32_t)heap->thread->allocs[cls];
        if (cls != keep && allocs == heap->idle_allocs[cls] && holds_blocks(heap, cls))
            release_cache(heap, cls);
        heap->idle_allocs[cls] = allocs;
    }
    hak_hot_span_release_aged(heap->node);
    hak_shared_pool_release_aged(heap->node);
    retire_parked_heaps(now, hak_options.decay_ms);
    hak_os_release_reservation_over_limit();
}

/* The least time between two looks, by the precise clock: the coarse one
 * ticks every 4 ms where the kernel's tick is 250 Hz, and a thread that
 * moved on faults in 5 MB meanwhile (bench/phases).  No less: a class
 * counts as seen active where it malloc'd since the last look, and a
 * thread that cycles many classes of big blocks (l25: 16 classes of
 * 64 KiB-1 MiB, written whole) faults in 1 MiB between two mallocs of one,
 * whose cache went back at every look when looks came every 64 pages
 * taken (88.7M instructions against 49.9M, callgrind). */
#define GROWTH_LOOK_US 1000

/* The growth its thread takes while a class serves no malloc, for the
 * class to count as idle: a release costs the class a flush and its
 * cache's growth again, some microseconds for a cache of 4 MiB, where 250
 * faults took a few hundred.  A longer decay keeps idle caches through
 * more growth, as it keeps them longer: an hour (the NUMA guest's
 * remote-free test) through 180k pages, some 700 MiB. */
static uint32_t idle_growth(void)
{
    uint64_t pages = hak_options.decay_ms / HAK_IDLE_GROWTH_DECAY_MS;
    return pages < UINT32_MAX ? (uint32_t)pages : UINT32_MAX;
}

/* Before the heap takes a slab or span from its node's backend for cls: the
 * classes that served no malloc for a sixty-fourth of HAKMEM_DECAY_MS or
 * more give their blocks back: none since a refill or flush that long ago,
 * or none since the reading of the clock that first saw their last
 * (note_active_classes), that long ago; and so do those that served none
 * while the thread grew by a page per HAK_IDLE_GROWTH_DECAY_MS of the
 * decay (250 at its default, some 1 MiB; idle_growth), its growth read once
 * a look (a class that malloc'd since the last never counts): a program
 * that moves on to other sizes at once, as a compiler's passes do, grows
 * that much within milliseconds (bench/phases with no pauses: 114 MB
 * resident at its peak, 29k faults, when only the clock told).  Growth is
 * the thread's minor faults and the pages of the slabs and spans it took
 * from its node, resident already or not (fresh ones count twice, taken
 * and faulted in: half a MiB of those): a program that alternates its
 * phases with no pause takes its next phase's memory from what the last
 * one of those sizes left, with no fault, and with faults alone its idle
 * caches kept 20 MB of 1-4 KiB blocks, and most of their spans, through
 * every phase of small blocks (bench/phases with no pause, 100 rounds:
 * 117.6 MB at the peak).  The spans a release empties go to the
 * HotSpanBox as stale ones, whose pages the SuperSlabs the node makes or
 * takes back next take in place of fresh ones, and which go back to the
 * kernel first (arena/hot_span_box.h, arena/shared_pool.h).  A program
 * whose work moved on to other sizes (a phase of 1-4 KiB blocks, then one
 * of small ones) would otherwise keep the last phase's caches, up to 16 MiB
 * a thread, and their spans in the HotSpanBox, resident through the next
 * for a decay period (bench/phases: 19-20 MB of caches and 5-7 MB of
 * spans).  Once a millisecond at most (an L25 class takes a span at every
 * refill), every idle class at once: the spans reach the box before the
 * next phase's SuperSlabs fault their pages in.  (When the spans were
 * decommitted here, twelve idle Mid classes released at once took 344
 * madvise calls and 6 ms in one malloc, and it was one class a look.) */
static void release_idle_for_growth(struct hak_heap *heap, unsigned keep)
{
    uint64_t now_us = hak_os_now_us();
    if (now_us - heap->growth_look_us < GROWTH_LOOK_US)
        return;
    heap->growth_look_us = now_us;
    uint64_t now = hak_os_now_ms();
    uint64_t stale = hak_options.decay_ms / HAK_HOT_SPAN_STALE_FRACTION;
    uint32_t stale_ms = stale < UINT32_MAX ? (uint32_t)stale : UINT32_MAX;
    uint32_t growth = (uint32_t)hak_os_thread_minor_faults() + heap->taken_pages;
    uint32_t idle_after = idle_growth();
    /* Growth tells only where pages can move (hak_os_can_lend: not before
     * Linux 5.7, nor with locked memory): the spans a release empties lend
     * their pages to the SuperSlabs the growth takes, and are otherwise
     * given back while those fault in fresh ones (bench/phases with no
     * pauses, every move refused: 51.0k faults with the rule, 29.0k
     * without, for the same peak RSS).  Asked only when growth would tell,
     * for the first answer reads /proc/self/status, which a process's first
     * slabs would pay for (bench/startup_threads). */
    enum { NOT_ASKED, MOVES, NO_MOVES } moves = NOT_ASKED;
    heap->discard_spans = true;
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        uint32_t allocs = (uint32_t)heap->thread->allocs[cls];
        /* Active since the last look; or the count went back (a forked
         * child's thread counts from 0), from which it counts anew. */
        bool seen_active = allocs != heap->growth_allocs[cls] || growth < heap->active_growth[cls];
        if (seen_active) {
            heap->growth_allocs[cls] = allocs;
            heap->active_growth[cls] = growth;
        }
        bool idle =
            (allocs == heap->slow_allocs[cls] && (uint32_t)now - heap->slow_ms[cls] >= stale_ms) ||
            (allocs == heap->read_allocs[cls] && (uint32_t)now - heap->active_ms[cls] >= stale_ms);
        bool idle_by_growth =
            !idle && !seen_active && growth - heap->active_growth[cls] >= idle_after;
        if (cls == keep || !(idle || idle_by_growth) || !holds_blocks(heap, cls))
            continue;
        if (idle_by_growth && moves == NOT_ASKED)
            moves = hak_os_can_lend() ? MOVES : NO_MOVES;
        if (idle_by_growth && moves == NO_MOVES)
            continue;
        release_cache(heap, cls);
        /* Idle from now on: a current slab with blocks in use stays, and
         * would be looked at again at every look. */
        heap->slow_ms[cls] = heap->active_ms[cls] = (uint32_t)now;
        heap->active_growth[cls] = growth;
    }
    heap->discard_spans = false;
}

/* Whether the program writes little of the blocks of cls, a class that is
 * sparse_checked: fewer than half the pages of the last block its cache
 * took are resident, asked by a mincore call at the first turn and then
 * every SPARSE_RECHECK_TURNS turns while the answer is yes.  While it is
 * no, the wait doubles at each look that says no again, up to 256 turns:
 * the cache keeps its first size meanwhile, and a late look only delays
 * its growth, where a stale yes would let it grow over blocks the program
 * now writes whole.  Asked at every 16th turn, l25_steady (two threads
 * cycling 64 KiB-1 MiB blocks they write whole, whose caches turn at one
 * operation in four) made 28.9k calls in 2M operations, each walking some
 * 136 pages: three times mimalloc's kernel time; with the doubling, 1.9k
 * calls, and 0.03-0.05 s of system time in place of 0.08-0.10 (3-5% more
 * operations a second, 1M cycles).  Where the kernel cannot tell, the
 * blocks count as written: the cache keeps its first size.  Huge pages
 * make every block resident, and so they are: a cached block pins its
 * size there. */
#define SPARSE_RECHECK_TURNS 16
#define SPARSE_RECHECK_MAX_BACKOFF 4 /* doublings of the wait: 256 turns */

static bool blocks_sparse(struct hak_heap *heap, unsigned cls)
{
    void *block = cached_list(heap, cls);
    if (block && heap->sparse_wait[cls]-- == 0) {
        size_t size = hak_class_size[cls], resident;
        bool sparse =
            hak_os_resident_pages(block, size, &resident) && resident * 2 < size / HAK_PAGE_SIZE;
        if (sparse)
            heap->sparse_backoff[cls] = 0;
        else if (heap->sparse_backoff[cls] < SPARSE_RECHECK_MAX_BACKOFF)
            heap->sparse_backoff[cls]++;
        heap->sparse[cls] = sparse;
        heap->sparse_wait[cls] = (SPARSE_RECHECK_TURNS << heap->sparse_backoff[cls]) - 1;
    }
    return heap->sparse[cls];
}

/* A class that turned from refills to flushes or back: a bigger cache,
 * when the thread's bound allows.  False when it has no more room than
 * before: it did not grow, or room lent to it (lend_room) covered the
 * growth, which is its own from then on.  A class
 * whose blocks the program now writes whole goes back to its first size,
 * the blocks its cache holds beyond it to the HotSpanBox (flush_half), or
 * the cache is empty (refill). */
static bool grow(struct hak_heap *heap, unsigned cls)
{
    if (sparse_checked(cls) && !blocks_sparse(heap, cls)) {
        set_limit(heap, cls, cache_limit(cls));
        return false;
    }
    /* From the class's own capacity: room lend_room lent it covers the
     * growth as far as it goes, and is its own from then on. */
    uint32_t limit = heap->limit[cls];
    uint32_t own = limit - lent_room(heap, cls);
    uint32_t max = cache_max(cls);
    if (own >= max)
        return false;
    uint32_t grown = own * 2 < max ? own * 2 : max;
    if (grown <= limit) { /* room was lent: a small class */
        heap->lent[cls] = (uint16_t)(limit - grown);
        return false;
    }
    uint64_t extra = (uint64_t)(grown - limit) * hak_class_size[cls];
    if (!hak_class_is_small(cls)) {
        bool checked = sparse_checked(cls);
        if (heap->big_cache_growth[checked] + extra >
            (checked ? CACHE_THREAD_SPARSE_BYTES : big_cache_bound()))
            return false;
    } else if (heap->small_cache_bytes + extra > CACHE_THREAD_BYTES) {
        shrink_idle(heap, cls);
        if (heap->small_cache_bytes + extra > CACHE_THREAD_BYTES)
            return false;
    }
    set_limit(heap, cls, grown);
    if (hak_class_is_small(cls))
        heap->lent[cls] = 0;
    return true;
}

/* A short-lived single-threaded process never pays for topology discovery
 * (issue 8): it waits for a second thread or this much memory. */
#define DISCOVERY_BYTES (8u << 20)
static atomic_bool topology_checked;

static void discover_topology(void)
{
    /* Waits while another thread discovers: set the flag only after, and
     * not from hwloc's own allocations in the middle of it, or other threads
     * would stop waiting and take node-0 memory. */
    hak_numa_discover();
    hak_page_map_place_early_chunks();
    if (hak_numa_discovery_settled())
        atomic_store_explicit(&topology_checked, true, memory_order_relaxed);
}

static void maybe_discover_topology(void)
{
    uint64_t mapped = hak_stat_mapped_now();
    if (live_threads() < 2 && mapped < DISCOVERY_BYTES)
        return;
    discover_topology();
}

static void move_to_node(struct hak_heap *heap, unsigned node);

/* While fork holds hakmem's locks (hak_heap_hold_for_fork to
 * hak_heap_release_after_fork), the other threads' next malloc waits for it
 * to end, as it does where the C library's malloc holds its arenas' locks
 * through a fork.  Threads that kept allocating kept their CPUs in the
 * process, and the kernel then interrupted each such CPU to flush its TLB
 * for every batch of the parent's pages fork write-protected:
 * bench/fork_churn (two threads allocating as the main thread forks) ran
 * 291-325 forks a second, jemalloc's 410-441, and 439-487 with the wait
 * (7 alternating runs).
 * No test on the fast paths: the fork makes the threads' CPUs read as
 * moved (FORK_CPU), and malloc's test of the CPU sends them here.  The
 * forking thread itself never waits (forking_here), and no thread waits
 * here longer than HAK_FORK_WAIT_MS: one may hold a lock that fork takes
 * after its handlers and allocate meanwhile (glibc's NSS database lock,
 * read by fork, is held while nsswitch.conf is loaded again).  A malloc
 * that needs a lock fork holds (a new thread's first, a refill from the
 * backends, a large block) waits for it as before, as does a free that
 * does; the others go on. */
#define FORK_CPU (-1)
static __thread bool forking_here __attribute__((tls_model("initial-exec")));

static void wait_for_fork(void)
{
    if (HAK_LIKELY(!atomic_load_explicit(&hak_fork_locks.forking, memory_order_acquire)) ||
        forking_here)
        return;
    if (hak_os_lock_within(&hak_fork_locks.heap_registry.mutex, HAK_FORK_WAIT_MS))
        pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
}

/* Makes sure the caches hold blocks of the node the thread runs on, and
 * watches the CPU from here on.  The CPU is recorded before the node is
 * read, so that a move in between shows at the next malloc.  The word is
 * looked up again each time: the process may have found its nodes since. */
static void follow_cpu(struct hak_heap *heap)
{
    wait_for_fork();
    const volatile int32_t *word = hak_numa_cpu_word();
    hak_tls.cpu_word = word ? word : &unwatched_cpu;
    hak_tls.cpu = *hak_tls.cpu_word;
    unsigned node = hak_numa_thread_node();
    if (HAK_UNLIKELY(node != heap->node))
        move_to_node(heap, node);
}

_Static_assert(sizeof(struct hak_heap) <= HAK_META_MAX_BYTES, "a heap is one meta record");

static struct hak_heap *unpark(unsigned node, const struct hak_heap *wanted);

/* heap as the calling thread's: in its TLS, of its node, and its exit
 * hook's to take down or park. */
static void make_mine(struct hak_heap *heap)
{
    hak_tls.heap = heap;
    set_thread_node(&hak_tls, heap->node);
    pthread_setspecific(exit_key, heap);
}

/* The thread's heap: one an exited thread of its node parked (below),
 * wanted if it is one of them, else a new one. */
static struct hak_heap *heap_create(const struct hak_heap *wanted)
{
    hak_init();
    struct hak_heap *heap = heap_gone ? NULL : unpark(hak_numa_thread_node(), wanted);
    if (heap) {
        make_mine(heap);
        hak_stat_add(HAK_STAT_HEAPS_INHERITED, 1);
        return heap;
    }
    heap = hak_meta_alloc(sizeof(struct hak_heap));
    if (!heap)
        return NULL;
    heap->thread = &hak_tls;
    memcpy(hak_tls.page_divisors, hak_class_divisors.magic,
           HAK_SUPERSLAB_CLASSES * sizeof(hak_class_divisors.magic[0]));
    memcpy(hak_tls.page_divisors + HAK_PAGE_MAGICS, hak_class_divisors.limit,
           HAK_SUPERSLAB_CLASSES * sizeof(hak_class_divisors.limit[0]));
    /* Dealt in turn, so that up to HAK_PAGE_TAGS threads tell each other's
     * blocks apart (more share tags, and take each other's blocks of a
     * shared tag into their caches, as all did before tags). */
    static _Atomic unsigned next_page_tag;
    unsigned tag = atomic_fetch_add_explicit(&next_page_tag, 1, memory_order_relaxed);
    hak_tls.page_tag = tag % HAK_PAGE_TAGS << HAK_PAGE_TAG_SHIFT;
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        heap->cur[cls] = &hak_empty_slab;
        heap->limit[cls] = cache_limit(cls);
        heap->thread->room[cls] = heap->limit[cls];
        heap->batch[cls] = first_batch(heap->limit[cls], cls);
        if (hak_class_is_small(cls))
            heap->small_cache_bytes += (uint64_t)heap->limit[cls] * hak_class_size[cls];
    }
    heap->node = hak_numa_thread_node();
    if (hak_harden.memcheck)
        heap->quarantine = hak_quarantine_create();
    /* A heap made for a destructor's malloc after the thread's exit hook
     * ran may never see the hook again, and its TLS goes unannounced: no
     * other thread may read it through the registry. */
    heap->registered = !heap_gone;
    if (heap->registered) {
        pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
        link_live(heap);
        pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
    }
    make_mine(heap);
    hak_stat_add(HAK_STAT_THREADS, 1);
    return heap;
}

/* The current slab once it has free blocks, moving to another slab when it
 * has none; NULL when the backend has no memory.  *carved: how many blocks
 * it carved where the slab's list was empty, the list then being those
 * blocks alone, in address order (hak_slab_extend); 0 otherwise. */
static struct hak_slab *slab_with_free(struct hak_heap *heap, unsigned cls, uint32_t *carved)
{
    struct hak_slab *slab = heap->cur[cls];
    *carved = 0;
    for (;;) {
        if (slab != &hak_empty_slab) {
            if (slab->free || (*carved = hak_slab_extend(slab)) || collect(heap, slab))
                return slab;
            if (slab->queued) {
                /* Arming it again would queue it twice. */
                drain_delayed(heap);
                continue;
            }
            if (!hak_slab_arm_notify(slab))
                continue; /* a remote free just arrived */
            slab->state = HAK_STATE_FULL;
            list_push(&heap->full[cls], slab);
        }
        slab = next_slab(heap, cls);
        if (!slab) {
            heap->cur[cls] = &hak_empty_slab;
            return NULL;
        }
        slab->state = HAK_STATE_CUR;
        heap->cur[cls] = slab;
    }
}

/* Takes up to want blocks, in the order the slabs hand them out, in front
 * of the list *head, from slab (slab_with_free's, with its carved) first;
 * returns how many.  Runs of the slabs' free lists move whole, and only a
 * run's last block is written.  Each block is read once for its link, but
 * in a run just carved: its blocks follow each other, and the run's last
 * is found by address (bench/phases' small phases read 1.1M such links
 * again, carved a moment before). */
static uint32_t take_blocks(struct hak_heap *heap, unsigned cls, struct hak_slab *slab,
                            uint32_t carved, uint32_t want, void **head)
{
    void *first = NULL;
    void *last = NULL;
    uint32_t taken = 0;
    while (slab) {
        uint32_t room = want - taken;
        void *run = slab->free;
        void *run_last = run;
        void *next;
        uint32_t count = 1;
        if (carved) {
            count = carved < room ? carved : room;
            run_last = (char *)run + (size_t)(count - 1) * slab->block_size;
            next = count < carved ? (char *)run_last + slab->block_size : NULL;
        } else {
            while ((next = hak_link_get(run_last)) && count < room) {
                run_last = next;
                count++;
            }
        }
        slab->free = next;
        if (last)
            hak_link_set(last, run);
        else
            first = run;
        last = run_last;
        slab->used += count;
        heap->stats[cls].blocks_held += count;
        taken += count;
        if (taken == want)
            break;
        slab = slab_with_free(heap, cls, &carved);
    }
    if (last) {
        hak_link_set_or_end(last, *head);
        *head = first;
    }
    return taken;
}

/* The whole free list of slab, slab_with_free's, as the cache's blocks,
 * when it holds from least to most blocks: it moves without a read of any
 * block, where take_blocks reads each block's link, a cache miss for every
 * block freed a while ago (88% of take_blocks' time in cxx_churn).  Each
 * link is still checked, when malloc pops its block.  The slab's carved
 * blocks are those handed out (used) and those on its list; blocks on the
 * list were written when carved or freed, so no page is touched for the
 * first time.  0 when the list is shorter or longer. */
static uint32_t take_whole_list(struct hak_heap *heap, struct hak_slab *slab, uint32_t least,
                                uint32_t most, void **head)
{
    uint32_t listed = hak_slab_listed(slab);
    if (listed < least || listed > most)
        return 0;
    *head = slab->free;
    slab->free = NULL;
    slab->used += listed;
    heap->stats[slab->cls].blocks_held += listed;
    return listed;
}

/* Checked mode: the live block just below block in its slab must have its
 * canary intact, for a write just under block lands in that canary, as
 * does an overflow of the neighbour, which may never be freed.  Only the
 * slab's owner hands out blocks and resizes them in place, and so writes
 * canaries: another thread could see one half written.  Another thread may
 * free below meanwhile, though, and a free's link and tag overwrite the
 * canary of a block asked for less than 16 bytes.  Its first write is the
 * tag (hak_heap_free_checked), so the tag is read again after a broken
 * canary: this leans on the hardware keeping the order of the fences'
 * plain stores and loads, as x86 and Arm do; to C they are a race.  (An L25
 * span is one block, with nothing below it: a free there guards the
 * block's pages, which this read would fault on.)  Memcheck sees such
 * writes itself. */
static void check_below(struct hak_heap *heap, struct hak_slab *slab, char *block)
{
    char note[16];
    if (block == slab->start || hak_harden.memcheck ||
        atomic_load_explicit(&slab->owner, memory_order_relaxed) != heap)
        return;
    char *below = block - slab->block_size;
    if (hak_block_tagged_free(below) || hak_canary_intact(below, slab->block_size))
        return;
    atomic_thread_fence(memory_order_acquire);
    if (!hak_block_tagged_free(below))
        hak_canary_check(below, slab->block_size, class_note(note, slab->cls));
}

/* Level 2: a free L25 block, but for the page with its link and tag, is a
 * guard until it is handed out again or its span goes back to the backend
 * (release_to_backend), so that a write after free faults, as it would on
 * memory glibc gave back with munmap.  Its blocks are page-aligned. */
static bool quarantine_pages(const struct hak_slab *slab)
{
    return hak_harden.guard_bytes && slab->kind == HAK_SLAB_L25;
}

/* Checked mode: one block of a class that fits size and the canary's
 * record and is aligned as well as cls; the cache stays empty, so that
 * every malloc comes here. */
static void *alloc_checked(struct hak_heap *heap, unsigned cls, size_t size)
{
    unsigned fit = cls;
    uint32_t align = hak_class_align(cls);
    while (fit < HAK_NUM_CLASSES &&
           (hak_class_size[fit] < size + HAK_CANARY_BYTES || hak_class_align(fit) < align))
        fit++;
    if (fit == HAK_NUM_CLASSES)
        return hak_large_alloc(size, align, heap->node, false);
    heap->stats[fit].refills++;
    void *block = NULL;
    uint32_t carved;
    struct hak_slab *slab = slab_with_free(heap, fit, &carved);
    if (!take_blocks(heap, fit, slab, carved, 1, &block)) {
        errno = ENOMEM;
        return NULL;
    }
    heap->thread->allocs[fit]++;
    if (quarantine_pages(slab))
        hak_os_unguard((char *)block + HAK_PAGE_SIZE, slab->block_size - HAK_PAGE_SIZE);
    check_below(heap, slab, block);
    hak_block_clear_free_words(block);
    hak_canary_set(block, hak_class_size[fit], size);
    hak_memcheck_malloclike(block, size, false);
    return block;
}

/* The calling thread's heap, made if need be, its caches of the node the
 * thread runs on; NULL (ENOMEM) when there is no memory for it. */
static struct hak_heap *heap_for_refill(void)
{
    struct hak_heap *heap = hak_tls.heap;
    if (heap == &hak_empty_heap) {
        heap = heap_create(NULL);
        if (!heap) {
            errno = ENOMEM;
            return NULL;
        }
    }
    /* Here the heap is consistent, so hwloc may allocate through it. */
    if (HAK_UNLIKELY(!atomic_load_explicit(&topology_checked, memory_order_relaxed)))
        maybe_discover_topology();
    follow_cpu(heap);
    return heap;
}

/* The room a refill leaves in a cache of limit blocks, so that the frees
 * after it find room for half as many before a flush, which would walk
 * the blocks the refill took and send them back; one at least, for a free
 * counts room down to 0 and flushes there (a cache of one block:
 * HAKMEM_SMALL_CACHE=1, or a Mid class bigger than HAKMEM_RING_BYTES). */
static uint32_t frees_room(uint32_t limit)
{
    return limit > 1 ? limit / 2 : 1;
}

/* Room in cls's cache, which is empty, for a small class's slab list too
 * long for the cache to take whole and still leave frees room for half its
 * size (frees_room), so that refill takes it whole, with that room left:
 * lent within the thread's bound on its small caches, until the cache is
 * next empty (refill, flush_cache) or flushes (flush_half; a flush that
 * grows the cache keeps what it lent as growth, as far as the doubling
 * goes).  Lent, not made the cache's own: a grown cache keeps half its
 * capacity at each flush, and the slabs its blocks sit in cannot go back
 * for other classes; grown to the list's length for good, xthread's peak
 * RSS was 7.9 MB against 4.7, and phases_long's 6% higher.  A slab's list
 * is shorter than 2^16 blocks, of 16 bytes at least (block_link.h). */
_Static_assert(HAK_SLAB_SIZE / 16 <= UINT16_MAX, "a slab's list fits struct hak_heap's lent");

static void lend_room(struct hak_heap *heap, unsigned cls, uint32_t listed)
{
    uint32_t limit = heap->limit[cls];
    uint32_t lent = listed - 1 + frees_room(limit) - limit;
    if (heap->small_cache_bytes + (uint64_t)lent * hak_class_size[cls] > CACHE_THREAD_BYTES)
        return;
    set_limit(heap, cls, limit + lent);
    heap->lent[cls] = (uint16_t)lent;
}

/* A block of cls for heap, whose cache of cls is empty: the block and a
 * batch for the cache from the class's slabs. */
static void *refill(struct hak_heap *heap, size_t size, unsigned cls)
{
    return_lent_room(heap, cls); /* before grow below doubles it */
    if (atomic_load_explicit(&heap->delayed, memory_order_relaxed))
        drain_delayed(heap);
    if (HAK_UNLIKELY(hak_harden.checked))
        return alloc_checked(heap, cls, size);
    if (heap->flushed_last[cls]) {
        heap->flushed_last[cls] = false;
        grow(heap, cls);
    }
    look_for_idle(heap, cls);
    if (hak_class_in_superslab(cls) && heap->foreign[cls])
        send_foreign(heap, cls, true);
    heap->stats[cls].refills++;
    uint32_t batch = heap->batch[cls];
    /* By the cache's first size: one that grew takes no bigger batches, to
     * touch no more pages than before (issue 8), only flushes less. */
    uint32_t full = full_batch(cache_limit(cls), cls);
    if (batch < full)
        heap->batch[cls] = batch * 2 < full ? batch * 2 : full;
    /* The block to hand out and a batch for the cache, which is empty, in
     * the order the slabs give them, ascending in a fresh one, so that the
     * block after the one returned is the next malloc's: a write past the
     * end of a block reaches the link the next malloc checks. */
    void *block = NULL;
    /* A list of freed blocks is taken whole, with no read of its links,
     * however short, where it leaves the cache room for the frees after
     * (frees_room): its blocks were freed a while ago, often by another
     * thread, and reading them one after another waits on a cache miss
     * each, where malloc's pops read them one at a time while the program
     * works (hak_heap_take).  xthread ran 1.64 times as fast (40% of its
     * time had gone to such reads), xmalloc_deep 1.16 times, when those
     * pops also prefetched each next block.  A short list walked and
     * taken with the next slabs' blocks, as before, left xthread at
     * 1.12-1.26; one put behind the blocks taken next, carved or the next
     * slab's, at 1.21-1.41 and phases at 0.96 (its program wrote blocks
     * carved afresh before the freed ones).  A small class's longer list
     * is taken whole too where the cache can be lent room for it
     * (lend_room): the blocks a consumer thread freed, or a thread that
     * exited, run to hundreds (xthread 1.49 times as fast again, xmalloc
     * 1.45, at 0.84-0.86 of the peak RSS, 5 alternating runs; a stress in
     * the manner of mimalloc-bench's mstress 1.16).  A run just carved is
     * taken whole only from the batch up (to half the cache and one
     * block), its end found by address, as take_blocks does. */
    uint32_t carved;
    struct hak_slab *slab = slab_with_free(heap, cls, &carved);
    uint32_t taken = 0;
    if (slab) {
        uint32_t listed = hak_slab_listed(slab);
        uint32_t most = heap->limit[cls] - frees_room(heap->limit[cls]) + 1;
        if (!carved && hak_class_is_small(cls) && listed > most) {
            lend_room(heap, cls, listed);
            most = heap->limit[cls] - frees_room(heap->limit[cls] - lent_room(heap, cls)) + 1;
        }
        taken = take_whole_list(heap, slab, carved ? batch + 1 : 1, most, &block);
    }
    if (!taken)
        taken = take_blocks(heap, cls, slab, carved, batch + 1, &block);
    if (!taken) {
        errno = ENOMEM;
        return NULL;
    }
    heap->thread->head[cls] = hak_link_next(block);
    heap->thread->room[cls] -= taken - 1;
    heap->thread->allocs[cls]++;
    hak_block_clear_free_words(block);
    return block;
}

/* refill, and where it finds no memory, once more after hak_heap_trim gave
 * some back. */
static void *refill_or_trim(struct hak_heap *heap, size_t size, unsigned cls)
{
    int saved_errno = errno;
    void *block = refill(heap, size, cls);
    if (HAK_UNLIKELY(!block) && hak_heap_trim()) {
        block = refill(heap, size, cls);
        if (block) /* a success shows no error of the attempt that failed */
            errno = saved_errno;
    }
    return block;
}

void *hak_heap_refill(size_t size, size_t cls)
{
    struct hak_heap *heap = heap_for_refill();
    if (!heap)
        return NULL;
    /* Not empty after a move to another CPU of the same node. */
    void *cached = cached_list(heap, cls);
    if (cached)
        return hak_heap_pop(heap->thread, cls, cached);
    return refill_or_trim(heap, size, cls);
}

/* A span of its own for the one block of an L25 class, past the cache and
 * the class's slabs with free blocks, which the caller found it has none
 * of; *dirty: the bytes from the block's start that may not be zero, the
 * pages lent to a span never handed out (struct hak_slab), all of them in
 * any other (carving wrote only the two words handing the block out
 * clears).  NULL when the backend has no memory. */
static void *block_of_own_span(struct hak_heap *heap, unsigned cls, size_t *dirty)
{
    struct hak_slab *slab = fresh_slab(heap, cls);
    if (!slab)
        return NULL;
    *dirty = slab->fresh ? (size_t)slab->touched_pages * HAK_PAGE_SIZE : SIZE_MAX;
    heap->stats[cls].slabs_in++;
    heap->stats[cls].refills++;
    hak_slab_extend(slab);
    void *block = slab->free;
    slab->free = NULL;
    slab->used = 1;
    heap->stats[cls].blocks_held++;
    /* Full, as slab_with_free leaves a slab with no free block: a remote
     * free of the block notifies.  Nobody else knows the slab yet. */
    hak_slab_arm_notify(slab);
    slab->state = HAK_STATE_FULL;
    list_push(&heap->full[cls], slab);
    heap->thread->allocs[cls]++;
    hak_block_clear_free_words(block);
    return block;
}

/* Whether the class has blocks to reuse in the slabs refill takes first
 * (next_slab), among them those another thread freed into the current
 * one.  Abandoned slabs count whether or not they have free blocks: refill
 * adopts them, and calloc clears the block whole. */
static bool has_blocks_to_reuse(struct hak_heap *heap, unsigned cls)
{
    if (atomic_load_explicit(&heap->delayed, memory_order_relaxed))
        drain_delayed(heap);
    struct hak_slab *cur = heap->cur[cls];
    if (cur != &hak_empty_slab)
        collect(heap, cur);
    return (cur != &hak_empty_slab && hak_slab_has_free(cur)) || heap->partial[cls].head ||
           hak_abandoned_any(heap->node, cls);
}

void *hak_heap_alloc_zeroed(size_t size, size_t cls)
{
    struct hak_heap *heap = heap_for_refill();
    if (!heap)
        return NULL;
    /* block_of_own_span's failure may set it before refill_or_trim's. */
    int saved_errno = errno;
    void *block = cached_list(heap, cls);
    if (block) {
        block = hak_heap_pop(heap->thread, cls, block);
        memset(block, 0, size);
        return block;
    }
    size_t dirty = SIZE_MAX;
    /* Checked mode (level 2, memcheck) keeps canaries and guard pages, and
     * memcheck tracks what is defined: its blocks take the usual way. */
    if (!hak_harden.checked && !has_blocks_to_reuse(heap, cls)) {
        look_for_idle(heap, cls);
        block = block_of_own_span(heap, cls, &dirty);
    }
    if (!block) {
        block = refill_or_trim(heap, size, cls);
        dirty = SIZE_MAX;
    }
    if (block) {
        memset(block, 0, dirty < size ? dirty : size);
        errno = saved_errno;
    }
    return block;
}

/* A slab whose owner exited, blocks of which this heap freed and sends
 * home as it refills their class: the heap adopts it, as a refill would
 * (next_slab), and the blocks go back to it with no atomic push; it waits
 * on the partial list, which next_slab takes before fresh memory, and the
 * blocks of the slab the thread frees after go into its cache, which its
 * pages' tag now admits (hak_slab_adopt).  A thread that takes over the
 * blocks of an exited one (larson's generations) takes over their slabs
 * with them.  Only at a refill, where the heap allocates the class, and
 * one slab a refill, as next_slab adopts: a heap adopting at a free might
 * never allocate the class again, and never collect what other threads
 * free into the slab (two threads freeing the blocks of exited ones held
 * 12.6 MB more each round). */
static bool adopt_abandoned(struct hak_heap *heap, struct hak_slab *slab)
{
    if (slab->node != heap->node || !hak_abandoned_take(slab))
        return false;
    hak_slab_adopt(slab, heap, page_tag_of(heap));
    collect(heap, slab);
    heap->stats[slab->cls].slabs_in++;
    slab->state = HAK_STATE_PARTIAL;
    list_push(&heap->partial[slab->cls], slab);
    see_region_part(heap->thread);
    return true;
}

/* Blocks leave the cache in runs of one slab's blocks, as they lie in the
 * list (blocks freed together mostly share a slab): one page-map look-up,
 * one atomic push for another heap's slab, one write per run; adopt: an
 * exited thread's slab is adopted (adopt_abandoned). */
static void flush_list(struct hak_heap *heap, void *list, bool adopt)
{
    while (list) {
        struct hak_slab *slab = slab_of(list);
        check_block(slab, list);
        void *tail = list;
        void *next;
        uint32_t count = 1;
        while ((next = hak_link_get(tail)) && hak_slab_starts_carved_block(slab, next)) {
            tail = next;
            count++;
        }
        struct hak_heap *owner = atomic_load_explicit(&slab->owner, memory_order_relaxed);
        bool adopted = adopt && !owner && adopt_abandoned(heap, slab);
        if (adopted)
            adopt = false; /* one slab */
        if (owner == heap || adopted) {
            return_run(heap, slab, list, tail, count);
        } else {
            hak_slab_remote_free_chain(slab, list, tail, count);
            heap->stats[slab->cls].remote_frees += count;
        }
        list = next;
    }
}

static HAK_NOINLINE void flush_half(struct hak_heap *heap, unsigned cls);

/* A cached block that starts no block of its page's slab. */
static __attribute__((noreturn, cold)) void refuse_cached(struct hak_slab *slab, void *block)
{
    check_block(slab, block);
    hak_fatal("free of a pointer hakmem never handed out:", block); /* below the slab's start */
}

/* A full cache that keeps getting blocks of this heap's slabs (a program
 * tearing down more than the cache holds) sends each straight home, as it
 * comes, while its slab is at hand: return_run's work, with no frame.  A
 * flush of half the cache would look each run's slab up again, and the
 * blocks of a class freed together mostly alternate between many slabs,
 * in runs of two or three.  A slab this heap owns serves blocks; the fast
 * path tested that the block starts one of them (hak_block_starts, with
 * the bound of its slab or of its page's class), and here the rest of
 * check_block's test: not past its carved blocks.  Its link,
 * written just now by the fast path, needs no check. */
void hak_heap_flush(void *block, size_t cls, struct hak_slab *slab)
{
    struct hak_heap *heap = hak_tls.heap;
    slab = given_or_own_slab(slab, block);
    if (HAK_UNLIKELY(!heap->flushed_last[cls] ||
                     atomic_load_explicit(&slab->owner, memory_order_relaxed) != heap)) {
        flush_half(heap, cls);
        return;
    }
    if (HAK_UNLIKELY((uintptr_t)((char *)block - slab->start) >=
                     (uintptr_t)(slab->carve - slab->start)))
        refuse_cached(slab, block);
    hak_tls.head[cls] = (void *)hak_link_decode(block);
    hak_tls.room[cls] = 1;
    heap->stats[cls].flushes++;
    heap->stats[cls].blocks_held--;
    hak_link_set_or_end(block, slab->free);
    slab->free = block;
    if (HAK_UNLIKELY(--slab->used == 0 || slab->state == HAK_STATE_FULL))
        settle(heap, slab); /* calls only in tail position: no frame */
}

void hak_heap_flush_plain(void *block, size_t cls, struct hak_slab *slab)
{
    if (HAK_UNLIKELY(!hak_class_starts_block(cls, hak_slab_block_offset(slab, block))))
        refuse_cached(slab, block);
    hak_heap_flush(block, cls, slab);
}

/* The capacity cls keeps at a flush: less by what its thread's Mid and
 * L25 caches grew past its share (big_cache_bound), which falls as more
 * threads start; no less than its first size.  Only by the excess, so
 * that a thread count that swings costs a class a little of its cache,
 * not all of its growth. */
static uint32_t limit_within_share(const struct hak_heap *heap, unsigned cls)
{
    uint32_t limit = heap->limit[cls];
    uint64_t growth = heap->big_cache_growth[false], bound = big_cache_bound();
    uint32_t size = hak_class_size[cls], first = cache_limit(cls);
    if (hak_class_is_small(cls) || sparse_checked(cls) || growth <= bound || limit <= first)
        return limit;
    uint64_t excess = (growth - bound + size - 1) / size;
    return limit - first > excess ? limit - (uint32_t)excess : first;
}

/* The cache's older half leaves it, in runs (flush_list); the first flush
 * after refills may grow the cache instead, and a Mid or L25 class of a
 * thread past its share shrinks first (limit_within_share).  Room lent to
 * the cache (lend_room) goes back here: it keeps half its own capacity,
 * grown or not. */
static void flush_half(struct hak_heap *heap, unsigned cls)
{
    if (!heap->flushed_last[cls]) {
        heap->flushed_last[cls] = true;
        if (grow(heap, cls))
            return; /* room for more now */
    }
    /* Idle classes give their blocks back before this one shrinks. */
    look_for_idle(heap, cls);
    /* A thread that frees blocks other threads of its node allocated,
     * from SuperSlabs made since it last took a slab, frees them through
     * the page map until it looks again. */
    see_region_part(heap->thread);
    uint32_t lent = lent_room(heap, cls);
    uint32_t limit = limit_within_share(heap, cls) - lent;
    if (lent)
        heap->lent[cls] = 0; /* given back with the limit, below */
    /* Keep the most recently freed half: it is the one still in cache. */
    uint32_t keep = limit / 2;
    heap->stats[cls].flushes++;
    void *list;
    if (keep == 0) {
        list = cached_list(heap, cls);
        heap->thread->head[cls] = HAK_LIST_END;
    } else {
        void *last = heap->thread->head[cls];
        for (uint32_t i = 1; i < keep; i++)
            last = hak_link_get(last);
        list = hak_link_get(last);
        hak_link_set(last, HAK_LIST_END);
    }
    /* Room for the old capacity, then the new: room never passes below 0
     * for hak_heap_usage to read. */
    heap->thread->room[cls] = heap->limit[cls] - keep;
    if (limit != heap->limit[cls])
        set_limit(heap, cls, limit);
    flush_list(heap, list, false);
}

/* A free block of a slab another heap owns, or none, goes home. */
static void send_home(struct hak_heap *heap, struct hak_slab *slab, void *block)
{
    if (heap != &hak_empty_heap) {
        heap->stats[slab->cls].remote_frees++;
        hak_stat_remote_free(heap->node, slab->node);
    }
    hak_slab_remote_free(slab, block);
}

void hak_heap_free_other(void *block, struct hak_slab *slab)
{
    slab = given_or_own_slab(slab, block);
    if (slab->kind == HAK_SLAB_NODE_BLOCK) {
        hak_node_block_free(slab, block);
        return;
    }
    /* A thread that only frees (the consumer of blocks another thread
     * allocates) gets a heap too: its frees then go through the cache and
     * home in chains, one atomic push per run of one slab's blocks, not one
     * each.  Where the block's owner is parked, the thread takes it over
     * (unpark), and the block is its own. */
    if (hak_tls.heap == &hak_empty_heap && !heap_gone && serves_blocks(slab) &&
        heap_create(atomic_load_explicit(&slab->owner, memory_order_relaxed))) {
        if (!hak_harden.level) {
            hak_heap_free_plain(slab, slab->cls, block);
            return;
        }
        if (slab->free_node == hak_tls.node) { /* else home, below */
            if (slab->kind == HAK_SLAB_SMALL &&
                atomic_load_explicit(&slab->owner, memory_order_relaxed) != hak_tls.heap)
                hak_heap_free_unowned(block, slab);
            else
                hak_heap_free_mine(&hak_tls,
                                   hak_slab_starts_block(slab, hak_slab_block_offset(slab, block)),
                                   slab->cls, block, slab, hak_heap_free_invalid);
            return;
        }
    }
    check_block(slab, block);
    if (hak_harden.level) { /* level 0 neither tags nor checks tags */
        if (hak_block_tagged_free(block))
            hak_fatal_double_free(block, slab->cls);
        hak_block_tag_free(block);
    }
    send_home(hak_tls.heap, slab, block);
}

/* A SuperSlab's block whose slab another heap owns (or that is not sound, which
 * hak_heap_free_invalid names).  Such blocks wait, by class, until as many
 * as a flush of the class sends have come (half the cache's own capacity,
 * without room lent to it), or
 * the thread refills the class: then they go home in runs of a slab's
 * blocks, one atomic push each, as the blocks of one class freed together
 * mostly share a slab, and at the refill the slabs of exited threads among
 * them are adopted (adopt_abandoned; larson, eight threads: 0.87 times the
 * speed before page tags without, 0.93 with).  Even the blocks of classes
 * that fill whole cache lines, which share no line with another thread's:
 * taken into the cache, they went home at its flushes all the same, and
 * the slabs of exited threads among them waited for a refill that chose
 * them (larson, two threads: 0.91 times the speed).  The tests are the fast
 * path's, with the class from the page's byte or the slab given: the
 * sending refuses a block past its slab's carved blocks, as a flush
 * does. */
void hak_heap_free_unowned(void *block, struct hak_slab *slab)
{
    uint32_t offset = hak_superslab_block_offset(block);
    unsigned cls;
    bool starts;
    if (slab) {
        cls = slab->cls;
        starts = hak_slab_starts_block(slab, offset);
    } else {
        cls = (unsigned)hak_superslab_page_class(block, hak_superslab_page(block));
        starts = hak_class_in_superslab(cls) && hak_class_starts_block(cls, offset);
    }
    if (!starts || hak_block_tagged_free(block)) {
        hak_heap_free_invalid(block, slab);
        return;
    }
    struct hak_heap *heap = hak_tls.heap;
    hak_block_tag_free(block);
    hak_link_set_or_end(block, heap->foreign[cls]);
    heap->foreign[cls] = block;
    if (++heap->foreign_count[cls] >= (heap->limit[cls] - lent_room(heap, cls) + 1) / 2)
        send_foreign(heap, cls, false);
}

/* A checked free block leaves the quarantine, or skips it: its link and tag
 * words are hakmem's again. */
static void give_back(struct hak_heap *heap, struct hak_slab *slab, void *block)
{
    hak_memcheck_defined(block, 2 * sizeof(void *));
    if (atomic_load_explicit(&slab->owner, memory_order_relaxed) == heap)
        return_run(heap, slab, block, block, 1);
    else
        send_home(heap, slab, block);
}

void hak_heap_free_checked(struct hak_slab *slab, void *block)
{
    char note[16];
    /* First, so that memcheck also describes a bad free. */
    hak_memcheck_freelike(block);
    if (slab->kind == HAK_SLAB_NODE_BLOCK) {
        hak_node_block_free(slab, block);
        return;
    }
    check_block(slab, block);
    size_t bytes = slab->block_size;
    hak_memcheck_defined(block, bytes);
    if (hak_block_tagged_free(block))
        hak_fatal_double_free(block, slab->cls);
    hak_canary_check(block, bytes, class_note(note, slab->cls));
    struct hak_heap *heap = hak_tls.heap;
    check_below(heap, slab, block);
    hak_memcheck_defined(block, 2 * sizeof(void *));
    hak_block_tag_free(block);
    /* The tag before the link, for the owner's check_below. */
    atomic_thread_fence(memory_order_release);
    hak_memcheck_noaccess(block, bytes);
    if (quarantine_pages(slab))
        hak_os_guard((char *)block + HAK_PAGE_SIZE, bytes - HAK_PAGE_SIZE);
    if (heap->quarantine) {
        block = hak_quarantine_push(heap->quarantine, block);
        if (!block)
            return;
        slab = slab_of(block);
    }
    give_back(heap, slab, block);
}

bool hak_heap_resize_checked(struct hak_slab *slab, void *block, size_t size)
{
    char note[16];
    /* A node block moves, as fresh node memory is what its caller asked. */
    if (slab->kind == HAK_SLAB_NODE_BLOCK)
        return false;
    check_block(slab, block);
    /* Memcheck reports a freed block itself, and would report this read
     * past a live block's requested bytes. */
    if (!hak_harden.memcheck && hak_block_tagged_free(block))
        hak_fatal_note("realloc of a freed block:", block, class_note(note, slab->cls));
    size_t bytes = slab->block_size, need = size + HAK_CANARY_BYTES;
    if (need > bytes || need <= bytes / 2)
        return false;
    /* The owner reads the canary of the block below each one it hands out
     * or takes back (check_below), which another thread's rewrite would
     * show half done: such a thread moves the block instead, to a slab of
     * its own, where the next resize stays in place. */
    if (atomic_load_explicit(&slab->owner, memory_order_relaxed) != hak_tls.heap)
        return false;
    size_t old = hak_canary_resize(block, bytes, size, class_note(note, slab->cls));
    hak_memcheck_resized(block, old, size);
    return true;
}

size_t hak_heap_requested_size(struct hak_slab *slab, void *block)
{
    char note[16];
    if (slab->kind == HAK_SLAB_NODE_BLOCK)
        return hak_node_block_requested(slab, block);
    check_block(slab, block);
    if (!hak_harden.memcheck && hak_block_tagged_free(block)) /* as above */
        hak_fatal_note("use of a freed block:", block, class_note(note, slab->cls));
    return hak_canary_check(block, slab->block_size, class_note(note, slab->cls));
}

static void add_stats(struct hak_class_stats *total, const struct hak_heap *heap, unsigned cls)
{
    const struct hak_class_stats *s = &heap->stats[cls];
    total->allocs += heap->thread->allocs[cls];
    total->refills += s->refills;
    total->flushes += s->flushes;
    total->slabs_in += s->slabs_in;
    total->slabs_out += s->slabs_out;
    total->remote_frees += s->remote_frees;
    total->blocks_held += s->blocks_held;
}

/* ---- malloc_trim ---- */

static void flush_all(struct hak_heap *heap)
{
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
        flush_cache(heap, cls);
}

/* Slabs of exited threads whose blocks have all been freed since (onto
 * their remote lists) go back to their backends; heap collects, as an
 * adopter would. */
static void release_abandoned(struct hak_heap *heap)
{
    for (unsigned node = 0; node < hak_numa_node_count(); node++) {
        for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
            struct hak_slab *in_use = NULL;
            for (struct hak_slab *slab = hak_abandoned_take_all(node, cls), *next; slab;
                 slab = next) {
                next = slab->next;
                collect(heap, slab);
                if (slab->used == 0) {
                    release_to_backend(slab, false);
                } else {
                    slab->next = in_use;
                    in_use = slab;
                }
            }
            hak_abandoned_restore(in_use);
        }
    }
}

static void trim_heap(struct hak_heap *heap)
{
    drain_delayed(heap);
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        release_cache(heap, cls);
        /* Blocks other threads freed make more slabs empty. */
        for (struct hak_slab *slab = heap->partial[cls].head, *next; slab; slab = next) {
            next = slab->next;
            collect(heap, slab);
            retire_if_empty(heap, slab);
        }
    }
    release_abandoned(heap);
}

bool hak_heap_trim(void)
{
    struct hak_heap *heap = hak_tls.heap;
    if (heap != &hak_empty_heap)
        trim_heap(heap);
    retire_parked_heaps(UINT64_MAX, 0);
    size_t released = 0;
    for (unsigned node = 0; node < hak_numa_node_count(); node++) {
        /* Hot spans first: they return to the PageArena, whose chunks
         * they may leave wholly free. */
        released += hak_hot_span_release_all(node);
        released += hak_page_arena_release_free(node);
        released += hak_large_release_cached(node);
        released += hak_shared_pool_release(node);
    }
    return released != 0;
}

/* ---- thread exit ---- */

/* Empty slabs go back to their backend, the others onto *abandon. */
static void leave_slab(struct hak_heap *heap, struct hak_slab *slab, struct hak_slab **abandon)
{
    collect(heap, slab);
    if (slab->used == 0) {
        release_to_backend(slab, false);
    } else {
        slab->next = *abandon;
        *abandon = slab;
    }
}

/* Empties the caches and gives up every slab: empty ones go back to their
 * backend, the others are abandoned for another heap to adopt. */
static void leave_all_slabs(struct hak_heap *heap)
{
    flush_all(heap);
    /* Disown first: once no slab names this heap, no remote free can queue
     * one on it, and the heap's memory can be reused. */
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        if (heap->cur[cls] != &hak_empty_slab)
            hak_slab_disown(heap->cur[cls]);
        for (struct hak_slab *slab = heap->partial[cls].head; slab; slab = slab->next)
            hak_slab_disown(slab);
        for (struct hak_slab *slab = heap->full[cls].head; slab; slab = slab->next)
            hak_slab_disown(slab);
    }
    for (struct hak_slab *slab = atomic_exchange(&heap->delayed, NULL); slab;
         slab = slab->delayed_next)
        slab->queued = false;
    struct hak_slab *abandon = NULL;
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        if (heap->cur[cls] != &hak_empty_slab)
            leave_slab(heap, heap->cur[cls], &abandon);
        heap->cur[cls] = &hak_empty_slab;
        struct hak_slab *slab;
        while ((slab = list_pop(&heap->partial[cls])))
            leave_slab(heap, slab, &abandon);
        while ((slab = list_pop(&heap->full[cls])))
            leave_slab(heap, slab, &abandon);
    }
    hak_abandoned_push(abandon);
}

/* The thread runs on another node now: from here on it gets memory there. */
static void move_to_node(struct hak_heap *heap, unsigned node)
{
    leave_all_slabs(heap);
    heap->node = node;
    set_thread_node(heap->thread, node);
}

void hak_heap_follow_thread_node(void)
{
    struct hak_heap *heap = hak_tls.heap;
    if (heap == &hak_empty_heap)
        return;
    /* A thread that pins itself cares where its memory is, however young
     * the process. */
    if (!atomic_load_explicit(&topology_checked, memory_order_relaxed))
        discover_topology();
    follow_cpu(heap);
}

/* heap's counters join those of exited threads; the registry is locked. */
static void retire_stats(const struct hak_heap *heap)
{
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
        add_stats(&registry.retired[cls], heap, cls);
}

/* Takes heap off the registry, its counters into the retired ones; the
 * registry is locked. */
static void unregister(struct hak_heap *heap)
{
    if (heap->registered) {
        heap->registered = false;
        atomic_fetch_sub_explicit(&registry.count, 1, memory_order_relaxed);
        if (heap->prev_live)
            heap->prev_live->next_live = heap->next_live;
        else
            registry.live = heap->next_live;
        if (heap->next_live)
            heap->next_live->prev_live = heap->prev_live;
    }
    retire_stats(heap);
}

/* ---- heaps of exited threads, for the next threads ---- */

/* A thread that exits parks its heap as it is, its caches and slabs with
 * it, and the next thread of its node to need a heap takes it over (the
 * one that owns the block it frees first, if its first call frees one); a
 * heap parked longer than HAKMEM_DECAY_MS (seen at any thread's next look
 * for idle caches or the next parking), or past the HAKMEM_PARKED_HEAPS
 * newest, leaves as an exiting thread's heap did before: its caches
 * flushed into their slabs, its empty slabs back to their backends and the
 * others abandoned for other heaps to adopt (as every heap does with
 * HAKMEM_PARKED_HEAPS=0).  Programs that start threads for a piece of work
 * each (mimalloc-bench's mstress starts two a round, larson a generation
 * after another) paid for that at every exit, the flush a cache miss per
 * cached block, and for a fresh heap at every start, its caches and slabs
 * grown again, its pages faulted in: mstress took 2.02 s against 2.31 s
 * (7 alternating runs), with 5.6k page faults against 8.0k and 23.2 MB
 * resident at its peak against 24.6.  Its Mid and L25 caches given back
 * at parking, it took 2.15 s, 8.4k faults and 34.6 MB: the next thread
 * took fresh spans for the blocks it would have found.  Only the blocks
 * of other heaps' slabs go home at parking, as at an exit before.
 * A parked heap stays in the registry, its thread's TLS copied into the
 * record that parks it, for heap->thread to point at: its counters stay
 * counted once, and mallinfo counts its cached blocks as free.  Blocks of
 * its slabs other threads free meanwhile wait on its delayed list, as for
 * a live heap.  The lists are the registry's, under its lock. */
struct parked_heap {
    struct hak_thread thread;
    struct hak_heap *heap;
    struct parked_heap *next; /* older */
    uint64_t since_ms;
};
_Static_assert(sizeof(struct parked_heap) <= HAK_META_MAX_BYTES,
               "a parked heap is one meta record");

static struct parked_heap *parked[HAK_MAX_NODES] HAK_START_UP;

/* The blocks of other heaps' slabs in cls's cache go home, the heap's own
 * stay, in their order: a block of an arena span (Mid over a page, L25)
 * freed from another thread's span enters the cache (a SuperSlab's too at
 * level 0), and parked, it would be lost to its owner until the heap is
 * taken over or leaves.  Those caches hold some dozens of blocks.  At
 * level 1 a SuperSlab's block of a heap that shares the thread's page tag
 * (past HAK_PAGE_TAGS threads) stays so parked: the caches of the
 * SuperSlab classes are not walked. */
static void send_others_home(struct hak_heap *heap, unsigned cls)
{
    void *own = NULL, *own_last = NULL, *others = NULL, *others_last = NULL;
    uint32_t sent = 0;
    for (void *block = cached_list(heap, cls), *next; block; block = next) {
        next = hak_link_get(block);
        if (atomic_load_explicit(&slab_of(block)->owner, memory_order_relaxed) == heap) {
            if (own_last)
                hak_link_set(own_last, block);
            else
                own = block;
            own_last = block;
        } else {
            if (others_last)
                hak_link_set(others_last, block);
            else
                others = block;
            others_last = block;
            sent++;
        }
    }
    if (!sent)
        return;
    if (own_last)
        hak_link_set(own_last, HAK_LIST_END);
    heap->thread->head[cls] = own ? own : HAK_LIST_END;
    heap->thread->room[cls] += sent;
    hak_link_set(others_last, HAK_LIST_END);
    flush_list(heap, others, false);
}

/* record onto node's list, newest first by the time it was parked; the
 * registry is locked.  Here and in unlink_parked the links are stored
 * atomically: unpark and take_parked_slab look at a list's head unlocked
 * first. */
static void park_record(struct parked_heap *record, unsigned node)
{
    struct parked_heap **link = &parked[node];
    while (*link && (*link)->since_ms > record->since_ms)
        link = &(*link)->next;
    record->next = *link;
    __atomic_store_n(link, record, __ATOMIC_RELAXED);
    atomic_fetch_add_explicit(&registry.parked, 1, memory_order_relaxed);
}

/* The parked record at *link, off its list; the registry is locked. */
static struct parked_heap *unlink_parked(struct parked_heap **link)
{
    struct parked_heap *record = *link;
    __atomic_store_n(link, record->next, __ATOMIC_RELAXED);
    atomic_fetch_sub_explicit(&registry.parked, 1, memory_order_relaxed);
    return record;
}

/* The exited thread's heap, whose caches were in TLS: parked, unless
 * checked mode or memcheck keeps per-block state a takeover would have to
 * carry (canaries, the quarantine), or the heap was made after the exit
 * hook ran (unregistered). */
static bool park(struct hak_heap *heap)
{
    if (!hak_options.parked_heaps || !heap->registered || heap->quarantine || hak_harden.checked)
        return false;
    struct parked_heap *record = hak_meta_alloc(sizeof(*record));
    if (!record)
        return false;
    for (unsigned cls = 0; cls < HAK_SUPERSLAB_CLASSES; cls++)
        if (heap->foreign[cls])
            send_foreign(heap, cls, false);
    for (unsigned cls = hak_harden.level ? HAK_SUPERSLAB_CLASSES : 0; cls < HAK_NUM_CLASSES; cls++)
        send_others_home(heap, cls);
    record->heap = heap;
    record->since_ms = hak_os_now_ms();
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    record->thread = hak_tls;
    heap->thread = &record->thread;
    park_record(record, heap->node);
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
    return true;
}

/* A heap parked on node, taken over by the calling thread, whose TLS takes
 * its caches: wanted if it is parked there, else the newest; NULL if none.
 * A thread whose first call frees a block takes over the heap that owns
 * it: a thread that carries on an exited thread's work (larson's
 * generations, a pool's replaced worker) then frees into its own heap,
 * not as remote frees into a heap another thread took over, whose slabs
 * hold the blocks until it collects them (larson's two lanes: 15-18 MB of
 * peak RSS, against 14.0 so). */
static struct hak_heap *unpark(unsigned node, const struct hak_heap *wanted)
{
    if (!__atomic_load_n(&parked[node], __ATOMIC_RELAXED))
        return NULL;
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    struct parked_heap **link = &parked[node];
    while (wanted && *link && (*link)->heap != wanted)
        link = &(*link)->next;
    if (!*link)
        link = &parked[node];
    struct parked_heap *record = *link ? unlink_parked(link) : NULL;
    struct hak_heap *heap = NULL;
    if (record) {
        heap = record->heap;
        hak_tls = record->thread;
        /* The exited thread's CPU word went with its TLS: the first malloc
         * finds the CPU moved and looks it up (follow_cpu). */
        hak_tls.cpu_word = &unwatched_cpu;
        hak_tls.cpu = FORK_CPU;
        heap->thread = &hak_tls;
    }
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
    if (record)
        hak_meta_free(record, sizeof(*record));
    return heap;
}

/* The parked heaps of every node older than age_ms at now, and those past
 * the HAKMEM_PARKED_HEAPS newest, leave (a thread exit's way, before
 * parking). */
static void retire_parked_heaps(uint64_t now, uint64_t age_ms)
{
    if (!atomic_load_explicit(&registry.parked, memory_order_relaxed))
        return;
    struct parked_heap *leaving = NULL;
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    for (unsigned node = 0; node < HAK_MAX_NODES; node++) {
        unsigned kept = 0;
        for (struct parked_heap **link = &parked[node]; *link;) {
            struct parked_heap *record = *link;
            if (kept < hak_options.parked_heaps && !hak_os_aged(now, record->since_ms, age_ms)) {
                kept++;
                link = &record->next;
                continue;
            }
            unlink_parked(link);
            record->next = leaving;
            leaving = record;
        }
    }
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
    for (struct parked_heap *record = leaving, *next; record; record = next) {
        next = record->next;
        struct hak_heap *heap = record->heap;
        leave_all_slabs(heap);
        pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
        unregister(heap);
        pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
        hak_meta_free(heap, sizeof(struct hak_heap));
        hak_meta_free(record, sizeof(*record));
    }
}

/* Whether record's heap has a partial slab of cls, or delayed slabs that
 * may become one; the registry is locked. */
static bool may_give_slab(const struct parked_heap *record, unsigned cls)
{
    return record && (record->heap->partial[cls].head ||
                      atomic_load_explicit(&record->heap->delayed, memory_order_relaxed));
}

/* A slab of cls with free blocks from the newest heap parked on node, for
 * a live heap that would take a fresh one: a thread that starts before
 * another exits cannot take over its heap, and frees the exited thread's
 * blocks (larson's generations), which before parking went to slabs it
 * adopted from the exited heap, and now to the parked heap's, which they
 * queue on its delayed list.  The heap leaves the list while its delayed
 * slabs are drained, and goes back: no lock is held meanwhile, and no
 * other thread takes it over or retires it (nor does malloc_trim, nor a
 * fork's child find it).  NULL if none. */
static struct hak_slab *take_parked_slab(unsigned node, unsigned cls)
{
    if (!__atomic_load_n(&parked[node], __ATOMIC_RELAXED))
        return NULL;
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    struct parked_heap *record =
        may_give_slab(parked[node], cls) ? unlink_parked(&parked[node]) : NULL;
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
    if (!record)
        return NULL;
    struct hak_heap *heap = record->heap;
    if (atomic_load_explicit(&heap->delayed, memory_order_relaxed))
        drain_delayed(heap);
    struct hak_slab *slab = list_pop(&heap->partial[cls]);
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    park_record(record, node);
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
    return slab;
}

/* Whether heap is parked; the registry is locked. */
static bool is_parked(const struct hak_heap *heap)
{
    for (unsigned node = 0; node < HAK_MAX_NODES; node++)
        for (const struct parked_heap *record = parked[node]; record; record = record->next)
            if (record->heap == heap)
                return true;
    return false;
}

/* The exiting thread's heap, taken down or parked, leaves its TLS: a
 * later destructor's free makes no heap, and its malloc an unregistered
 * one (heap_gone). */
static void leave_heap(void)
{
    hak_tls.heap = &hak_empty_heap;
    set_thread_node(&hak_tls, HAK_HEAPLESS_NODE);
    heap_gone = true;
}

void hak_heap_thread_exit(void *arg)
{
    struct hak_heap *heap = arg;
    if (park(heap)) {
        for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
            hak_tls.head[cls] = HAK_LIST_END;
        memset(hak_tls.allocs, 0, sizeof(hak_tls.allocs));
        leave_heap();
        retire_parked_heaps(hak_os_now_ms(), hak_options.decay_ms);
        return;
    }
    if (heap->quarantine) {
        for (void *block; (block = hak_quarantine_pop(heap->quarantine));)
            give_back(heap, slab_of(block), block);
        hak_quarantine_destroy(heap->quarantine);
    }
    leave_all_slabs(heap);
    leave_heap();
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    unregister(heap);
    /* A heap made for a later destructor's malloc counts from zero. */
    memset(hak_tls.allocs, 0, sizeof(hak_tls.allocs));
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
    hak_meta_free(heap, sizeof(struct hak_heap));
}

void hak_heap_forget_other_threads(void)
{
    struct hak_heap *own = hak_tls.heap;
    for (struct hak_heap *heap = registry.live; heap; heap = heap->next_live)
        if (heap != own && !is_parked(heap))
            retire_stats(heap);
    /* No write to the other threads' heaps: their pages stay shared with
     * the parent (a fork that copied them cost a fault each).  Parked ones,
     * whose caches no thread's TLS holds, stay, for the child's threads. */
    registry.live = NULL;
    atomic_store_explicit(&registry.count, 0, memory_order_relaxed);
    if (own != &hak_empty_heap && own->registered)
        link_live(own);
    for (unsigned node = 0; node < HAK_MAX_NODES; node++)
        for (struct parked_heap *record = parked[node]; record; record = record->next)
            link_live(record->heap);
}

bool hak_heap_setup(void)
{
    return pthread_key_create(&exit_key, hak_heap_thread_exit) == 0;
}

void hak_heap_sum_stats(struct hak_class_stats totals[HAK_NUM_CLASSES])
{
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        const struct hak_class_stats *r = &registry.retired[cls];
        totals[cls].allocs += r->allocs;
        totals[cls].refills += r->refills;
        totals[cls].flushes += r->flushes;
        totals[cls].slabs_in += r->slabs_in;
        totals[cls].slabs_out += r->slabs_out;
        totals[cls].remote_frees += r->remote_frees;
        totals[cls].blocks_held += r->blocks_held;
    }
    for (struct hak_heap *heap = registry.live; heap; heap = heap->next_live)
        for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
            add_stats(&totals[cls], heap, cls);
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
}

void hak_heap_usage(struct hak_heap_usage *usage)
{
    struct hak_class_stats totals[HAK_NUM_CLASSES] = {0};
    uint64_t cached[HAK_NUM_CLASSES] = {0};
    hak_heap_sum_stats(totals);
    /* Other threads change their caches meanwhile: the figure is a
     * snapshot, not exact while they run. */
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    for (struct hak_heap *heap = registry.live; heap; heap = heap->next_live)
        for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
            /* Read while the owner may resize the cache, which moves limit
             * and room by the same amount: read on either side of a resize,
             * they count that many blocks too few or too many for a moment
             * (a difference below zero counts none). */
            int64_t held = (int64_t)heap->limit[cls] -
                           (int64_t)__atomic_load_n(&heap->thread->room[cls], __ATOMIC_RELAXED);
            cached[cls] += held > 0 ? (uint64_t)held : 0;
            /* Other heaps' blocks on their way home: free, as the cache's. */
            if (hak_class_in_superslab(cls))
                cached[cls] += __atomic_load_n(&heap->foreign_count[cls], __ATOMIC_RELAXED);
        }
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
    *usage = (struct hak_heap_usage){0};
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        int64_t live = totals[cls].blocks_held - (int64_t)cached[cls];
        if (live > 0)
            usage->in_use_bytes += (uint64_t)live * hak_class_size[cls];
        usage->cached_blocks += cached[cls];
        usage->cached_bytes += cached[cls] * hak_class_size[cls];
    }
}

void hak_heap_hold_for_fork(void)
{
    pthread_mutex_lock(&hak_fork_locks.heap_registry.mutex);
    forking_here = true;
    atomic_store_explicit(&hak_fork_locks.forking, true, memory_order_release);
    /* Read by its owner with no atomic load, and written by it in
     * follow_cpu: a stale read, or the owner's write of its CPU over this
     * one, lets that thread's mallocs run on through the fork, as they did
     * before; one that reads it after the fork goes to the refill, which
     * reads the CPU again. */
    struct hak_heap *own = hak_tls.heap;
    for (struct hak_heap *heap = registry.live; heap; heap = heap->next_live)
        if (heap != own)
            __atomic_store_n(&heap->thread->cpu, FORK_CPU, __ATOMIC_RELAXED);
}

void hak_heap_release_after_fork(void)
{
    atomic_store_explicit(&hak_fork_locks.forking, false, memory_order_relaxed);
    forking_here = false;
    pthread_mutex_unlock(&hak_fork_locks.heap_registry.mutex);
}

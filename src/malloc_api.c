/* The public entry points: the standard allocation functions and their hak_
 * twins (the same code under two names). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "arena/large.h"
#include "arena/node_block.h"
#include "arena/page_map.h"
#include "arena/slab.h"
#include "arena/superslab.h"
#include "fault.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "harden.h"
#include "internal.h"
#include "numa/node.h"
#include "os.h"

/* Exports name as another name of target, the same code. */
#define EXPORT_AS(name, target) HAK_API __typeof__(target) name __attribute__((alias(#target)))

static void *fail_nomem(void)
{
    errno = ENOMEM;
    return NULL;
}

/* Where realloc moves a growing block to a large mapping, from which on it
 * grows without copies (hak_large_resize): from 64 KiB a block of 32 KiB
 * or more that grows by half or more at once (a vector that doubles: from
 * 256 KiB, it was copied into each class on the way, 512 KiB a buffer, a
 * third of realloc_grow's time), and one that grows by less while the
 * thread's node holds few large blocks (hak_large_few_live); from 256 KiB
 * one that grows by less, however many there are, whose mapping then grows
 * by half at least at each step (hak_large_resize).  A buffer grown by an
 * eighth at a time (CPython's lists) was copied into every L25 class up to
 * 256 KiB on its way, 0.75 of the 0.87 MiB a round of realloc_eighths
 * copied; but many such buffers each took a mapping of their own, more
 * than the large cache keeps: 2000 grown to 80 KiB in turn ran at 0.54
 * times the speed, every one mapped and unmapped, twice the faults.  A
 * smaller block that jumps past 64 KiB at once is no such vector: moved
 * to a mapping of its own, it faulted all its pages in, and its free
 * unmapped them
 * (bench/phases big_every=8, blocks of 1-4 KiB made 40-200 KiB: 645k
 * faults in 20 rounds, 8.0M ops/s); in an L25 class it reuses the pages of
 * the blocks freed before it. */
#define REALLOC_LARGE_FROM (HAK_L25_MAX / 4)
#define REALLOC_LARGE_EARLY_FROM (HAK_L25_MAX / 16)
#define REALLOC_GROWING_FROM (REALLOC_LARGE_EARLY_FROM / 2)

/* Whether realloc moves a block of old usable bytes that is to hold size
 * to a large mapping (see above). */
static bool grows_into_large(size_t old, size_t size)
{
    if (size <= old || old < REALLOC_GROWING_FROM || size <= REALLOC_LARGE_EARLY_FROM)
        return false;
    return size >= old + old / 2 || size > REALLOC_LARGE_FROM ||
           hak_large_few_live(hak_tls.heap->node);
}

/* The bytes realloc asks for when it moves a block of old usable bytes
 * that is to hold size.  A block that grows by less than half, over 1 KiB,
 * gets half as much again as it had: a program that grows a buffer by an
 * eighth at a time (CPython's lists and bytearrays) or by a few bytes
 * (string builders) then finds the room in place for the next few
 * reallocs, instead of a copy into the next class at nearly every one, 4
 * classes to a doubling (a buffer grown by eighths to 256 KiB copied
 * 1.5 MiB; glibc grows it in place at the top of its heap).  No more than
 * the power of two size fits, though: buffers that stop growing there
 * (Redis's list nodes, 8 KiB, grown by each push) ended in blocks of 10
 * and 12 KiB, and redis-benchmark's LPUSH peaked at 77.2 MB, against
 * 70.0 now (mimalloc 69.7); one move more per doubling for the buffers
 * that grow on.  Checked mode too (keep_exact_size). */
static size_t moved_request(size_t old, size_t size)
{
    if (size <= old || size <= HAK_SMALL_MAX || size >= old + old / 2)
        return size;
    size_t power_of_two = (size_t)1 << (64 - __builtin_clzll(size - 1));
    return old + old / 2 < power_of_two ? old + old / 2 : power_of_two;
}

/* A block of node's backends, past the thread caches: a mapping of its
 * own, or for a node block (hak_malloc_onnode) up to HAK_L25_MAX, a span. */
static void *alloc_in_backend(size_t size, size_t align, unsigned node, bool zeroed,
                              bool node_block)
{
    if (node_block && size <= HAK_L25_MAX)
        return hak_node_block_alloc(size, node);
    return hak_large_alloc(size, align, node, zeroed);
}

/* The same, and where it finds no memory, once more after hak_heap_trim
 * gave some back, unless no memory given back could make room for it: a
 * program that probes with sizes past memory would otherwise empty every
 * cache at each probe (a failing malloc(2^60) and 272 small and Mid ones
 * in turn: 95 us a turn where they took 0.94). */
static void *alloc_in_backend_or_trim(size_t size, size_t align, unsigned node, bool zeroed,
                                      bool node_block)
{
    int saved_errno = errno;
    void *block = alloc_in_backend(size, align, node, zeroed, node_block);
    if (HAK_UNLIKELY(!block) && hak_os_could_map(size) && hak_heap_trim()) {
        block = alloc_in_backend(size, align, node, zeroed, node_block);
        if (block) /* a success shows no error of the attempt that failed */
            errno = saved_errno;
    }
    return block;
}

static HAK_NOINLINE void *alloc_large(size_t size, size_t align, bool zeroed)
{
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    hak_init();
    return alloc_in_backend_or_trim(size, align, hak_tls.heap->node, zeroed, false);
}

/* Memory the page map gives a chunk whose head holds no kind or route of
 * one: a program's write far outside its blocks, or its own mapping over
 * the head, put something else there.  Out of line: the callers' frames
 * stay as they were. */
static HAK_NOIPA __attribute__((cold)) void refuse_overwritten_head(const void *ptr)
{
    hak_fatal("pointer into a chunk whose head was overwritten:", ptr);
}

/* The chunk that owns ptr, or NULL for memory hakmem does not own. */
static struct hak_chunk_head *owner_of(const void *ptr)
{
    struct hak_chunk_head *chunk = hak_page_map_lookup(ptr);
    if (!chunk)
        return NULL;
    if (chunk->kind - HAK_CHUNK_SUPERSLAB > HAK_CHUNK_LARGE - HAK_CHUNK_SUPERSLAB)
        refuse_overwritten_head(ptr);
    if (chunk->kind == HAK_CHUNK_LARGE && !hak_large_contains((struct hak_large *)chunk, ptr))
        return NULL;
    return chunk;
}

static inline void *alloc(size_t size)
{
    if (HAK_LIKELY(size <= HAK_SMALL_MAX))
        return hak_heap_alloc(hak_small_class(size), size);
    if (HAK_LIKELY(size <= HAK_L25_MAX))
        return hak_heap_alloc(hak_mid_class(size), size);
    return alloc_large(size, HAK_LARGE_MALLOC_ALIGN, false);
}

/* Bytes usable at ptr, which lies in chunk: in checked mode exactly those
 * asked for, since the canary follows them. */
static size_t usable_size(struct hak_chunk_head *chunk, void *ptr)
{
    if (chunk->kind == HAK_CHUNK_LARGE) {
        struct hak_large *large = (struct hak_large *)chunk;
        if (large->cached)
            hak_fatal_note("use of a freed block:", ptr, "large block");
        if (ptr != hak_large_block(large))
            hak_fatal("pointer inside a large block", ptr);
        return hak_harden.checked ? large->requested : hak_large_usable(large);
    }
    struct hak_slab *slab = hak_chunk_slab(chunk, ptr);
    if (slab->kind != HAK_SLAB_SMALL && slab->kind != HAK_SLAB_MID && slab->kind != HAK_SLAB_L25 &&
        slab->kind != HAK_SLAB_NODE_BLOCK)
        hak_fatal("pointer hakmem never handed out", ptr);
    /* An L25 slab's pages all map to it (hak_slab_is_whole_span); a node
     * block is one block too. */
    if ((hak_slab_is_whole_span(slab) || slab->kind == HAK_SLAB_NODE_BLOCK) && ptr != slab->start)
        hak_fatal("pointer inside a block", ptr);
    return hak_harden.checked ? hak_heap_requested_size(slab, ptr) : slab->block_size;
}

/* flatten: GCC would rather jump to alloc, one instruction more per malloc.
 * aligned(64), here and on free: where the two start within a cache line
 * moved with every change to the code before them, and their speed with
 * it (mid_batch 6% and batch_free 13% slower at one place than at the
 * next, with the same instructions). */
HAK_API __attribute__((flatten, aligned(64))) void *hak_malloc(size_t size)
{
    return alloc(size);
}

/* Level 1's free of a block in a SuperSlab, whose slab and class the
 * entries for its page give (page_map.h): page is ptr's in the SuperSlab. */
static inline void free_superslab_block(void *ptr, size_t page)
{
    hak_heap_free(hak_superslab_page_slab(ptr, page), hak_superslab_page_class(ptr, page), ptr,
                  hak_superslab_block_offset(ptr));
}

/* Frees the level-1 path does not take; inline, for level 0's sake. */
static inline void free_routed(struct hak_chunk_head *chunk, void *ptr)
{
    uint32_t route = __atomic_load_n(&chunk->route, __ATOMIC_RELAXED);
    if (HAK_LIKELY(route == HAK_ROUTE_PLAIN)) {
        /* A SuperSlab's slab and class from the address, as level 1's free
         * takes them (there the entry tells the kind): the kind only steers
         * a branch, and the loads wait on no load of chunk. */
        if (HAK_LIKELY(chunk->kind == HAK_CHUNK_SUPERSLAB)) {
            size_t page = hak_superslab_page(ptr);
            hak_heap_free_plain(hak_superslab_page_slab(ptr, page),
                                hak_superslab_page_class(ptr, page), ptr);
        } else {
            struct hak_slab *slab = hak_chunk_slab(chunk, ptr);
            hak_heap_free_plain(slab, slab->cls, ptr);
        }
    } else if (route == HAK_ROUTE_LARGE)
        hak_large_free((struct hak_large *)chunk, ptr);
    else if (HAK_LIKELY(route == HAK_ROUTE_CHECKED))
        hak_heap_free_checked(hak_chunk_slab(chunk, ptr), ptr);
    else
        refuse_overwritten_head(ptr);
}

/* No pointer reaches free or realloc from before hakmem was in place: the
 * dynamic loader and glibc never free what the loader's own early allocator
 * handed out (README, Hardening).  So a pointer outside hakmem's memory is a
 * fault of the program's, stopped as every other allocator stops it. */
/* Not declared noreturn, nor so discovered (noipa): free then jumps here
 * and needs no stack frame of its own for a call. */
static HAK_NOIPA __attribute__((cold)) void refuse_foreign(const char *call, const void *ptr)
{
    hak_fatal(call, ptr);
}

HAK_API __attribute__((aligned(64))) void hak_free(void *ptr)
{
    struct hak_thread *self = hak_my_thread();
    uintptr_t part_offset;
    if (HAK_LIKELY(hak_heap_region_find(self, ptr, &part_offset))) {
        hak_heap_free_in_region(self, ptr, part_offset);
        return;
    }
    uintptr_t entry = hak_page_map_entry(ptr);
    if (HAK_UNLIKELY((intptr_t)entry <= 0)) { /* page_map.h: one test for both */
        if (entry)
            free_routed((struct hak_chunk_head *)(entry & ~HAK_MAP_ROUTED), ptr);
        else if (ptr)
            refuse_foreign("free of a pointer hakmem never handed out:", ptr);
        return;
    }
    if (HAK_LIKELY(entry & HAK_MAP_SUPERSLAB)) {
        free_superslab_block(ptr, hak_superslab_page(ptr));
    } else {
        const struct hak_page_info *info = hak_arena_page_info(ptr, hak_arena_page(ptr));
        hak_heap_free_in_page(info, ptr, hak_page_info_offset(info, ptr));
    }
}

HAK_API void *hak_calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total))
        return fail_nomem();
    if (total > HAK_L25_MAX)
        return alloc_large(total, HAK_LARGE_MALLOC_ALIGN, true); /* fresh mappings are zero */
    if (total > HAK_MID_MAX)
        return hak_heap_alloc_zeroed(total, hak_mid_class(total));
    void *ptr = alloc(total);
    if (ptr)
        memset(ptr, 0, total);
    return ptr;
}

/* Checked mode: fresh, just handed out for more than size bytes (with
 * moved_request's headroom), keeps size exactly, as if resized in place:
 * the rest lies behind its canary, for the next reallocs to grow into in
 * place.  Without the headroom a block grown a little at a time moved at
 * every class, and a large one at every page, to a mapping faulted in
 * anew (a buffer grown by 16 B to 1 MiB: 2.5 s and 599k faults at level 2,
 * 0.03 s at level 1).  Where its resize is refused (a request just past
 * 4, 8 or 16 KiB lands in a class of twice that, for its alignment, and
 * size would fill half of it or less), a block of size takes its place. */
static void *keep_exact_size(void *fresh, size_t size)
{
    struct hak_chunk_head *chunk = owner_of(fresh);
    bool kept = chunk->kind == HAK_CHUNK_LARGE
                    ? hak_large_resize((struct hak_large *)chunk, size) != NULL
                    : hak_heap_resize_checked(hak_chunk_slab(chunk, fresh), fresh, size);
    if (kept)
        return fresh;
    void *exact = alloc(size);
    hak_free(fresh);
    return exact;
}

/* Whether a block of old usable bytes stays where it is when realloc'd to
 * size: size fits and fills more than half of it. */
static inline bool stays_in_place(size_t size, size_t old)
{
    return size <= old && size > old / 2;
}

/* realloc of a block of old usable bytes to size, 0 < size <= PTRDIFF_MAX,
 * that no resize in place of a large or checked block took: the block
 * itself where it stays in place, else a new one.  Out of line, so that
 * hak_realloc's way for a block that stays needs no stack frame. */
static HAK_NOINLINE void *keep_or_move(void *ptr, size_t size, size_t old)
{
    if (stays_in_place(size, old) && !hak_harden.checked)
        return ptr;
    /* A block that keeps growing becomes a large one early, from which on
     * it grows without being copied (hak_large_resize). */
    size_t request = moved_request(old, size);
    bool to_large = grows_into_large(old, size);
    void *fresh = NULL;
    size_t asked = 0; /* the bytes fresh was handed out for */
    /* Where an attempt may fail before one succeeds (the large path, the
     * headroom): a call, not made in every realloc that moves. */
    bool may_retry = to_large || request > size;
    int saved_errno = may_retry ? errno : 0;
    if (to_large) {
        /* A checked large block never grows past its mapping, which its
         * guard page ends: the headroom comes with the mapping. */
        asked = hak_harden.checked ? request : size;
        fresh = alloc_large(asked, HAK_LARGE_MALLOC_ALIGN, false);
    }
    /* Out of mappings (vm.max_map_count), a block up to 1 MiB still fits a
     * class, and the realloc succeeds as if the large path had not failed;
     * a bigger one would only ask for a mapping again. */
    if (!fresh && (!to_large || request <= HAK_L25_MAX))
        fresh = alloc(asked = request);
    if (!fresh && asked > size) /* no memory for the headroom: what was asked */
        fresh = alloc(asked = size);
    if (fresh && hak_harden.checked && asked > size)
        fresh = keep_exact_size(fresh, size);
    if (!fresh)
        return NULL;
    if (may_retry) /* a success shows no error of the attempts that failed */
        errno = saved_errno;
    memcpy(fresh, ptr, size < old ? size : old);
    hak_free(ptr);
    return fresh;
}

/* Whether a slab of a fast-route chunk (never in checked mode) serves
 * ptr's block, found as free finds the slab, and *usable, its bytes, where
 * it does: by its page's byte in the thread's node's part of the SuperSlab
 * region (the class, below the owner's tag), else by its page's entry in
 * the page map.  Any other pointer (a large block, a routed chunk's, a
 * page where no block starts, one off a block's start in an arena chunk,
 * memory hakmem does not own) takes the long way, through the chunk's head
 * and the slab, which cost bench/phases, whose reallocs are of 1-4 KiB
 * blocks, 5% of its time in owner_of and usable_size, on three loads that
 * missed the cache one after the other.  Like free, it does not read the
 * chunk's head, and so does not see one overwritten. */
static inline bool slab_block_usable(void *ptr, size_t *usable)
{
    struct hak_thread *self = hak_my_thread();
    uintptr_t part_offset;
    if (hak_heap_region_find(self, ptr, &part_offset)) {
        unsigned cls = hak_heap_region_page_byte(self, part_offset) & HAK_PAGE_CLASS_MASK;
        if (!hak_class_in_superslab(cls)) /* a page where no block starts */
            return false;
        *usable = hak_class_size[cls];
        return true;
    }
    uintptr_t entry = hak_page_map_entry(ptr);
    if (HAK_UNLIKELY((intptr_t)entry <= 0))
        return false;
    if (HAK_LIKELY(entry & HAK_MAP_SUPERSLAB)) {
        const struct hak_slab *slab = hak_superslab_page_slab(ptr, hak_superslab_page(ptr));
        if (HAK_UNLIKELY(slab->free_node == HAK_NO_NODE))
            return false;
        *usable = slab->block_size;
        return true;
    }
    /* The page's entry, as free reads it: an L25 block's other pages have
     * none. */
    const struct hak_page_info *info = hak_arena_page_info(ptr, hak_arena_page(ptr));
    size_t cls = info->cls;
    if (HAK_UNLIKELY(info->node == HAK_NO_NODE ||
                     !hak_class_starts_block(cls, hak_page_info_offset(info, ptr))))
        return false;
    *usable = hak_class_size[cls];
    return true;
}

/* realloc of a block hakmem handed out, the long way: through its chunk's
 * head. */
static HAK_NOINLINE void *realloc_block(void *ptr, size_t size)
{
    if (size == 0) {
        hak_free(ptr);
        return NULL;
    }
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    struct hak_chunk_head *chunk = owner_of(ptr);
    if (!chunk)
        refuse_foreign("realloc of a pointer hakmem never handed out:", ptr);
    if (chunk->kind == HAK_CHUNK_LARGE) {
        struct hak_large *large = (struct hak_large *)chunk;
        /* A mapping refused or retried smaller on the way is no error of
         * the caller's, whether the block grows or moves after. */
        int saved = errno;
        void *resized = ptr == hak_large_block(large) ? hak_large_resize(large, size) : NULL;
        errno = saved;
        if (resized)
            return resized;
    }
    /* In checked mode a block knows the size it was asked with, as its
     * canary and memcheck do: resized in place, it tells them the new one. */
    if (hak_harden.checked && chunk->kind != HAK_CHUNK_LARGE &&
        hak_heap_resize_checked(hak_chunk_slab(chunk, ptr), ptr, size))
        return ptr;
    return keep_or_move(ptr, size, usable_size(chunk, ptr));
}

/* realloc(NULL, n), a growing array's first, jumps to malloc's path
 * before realloc_block saves its registers (8 instructions each way; in
 * bench/phases, which starts 110k of its 197k reallocs from NULL, 1.55M
 * fewer in all), and a slab block that stays where it is returns with no
 * call and no stack frame (bench/realloc_inplace: 4 registers saved and
 * restored, and a call, in each).  Only the fast route's chunks (level 1)
 * lie in the region or have positive entries: the other levels and
 * checked mode take the long way. */
HAK_API void *hak_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return alloc(size);
    size_t old;
    /* size - 1 < PTRDIFF_MAX: 0 frees, and past PTRDIFF_MAX fails, the
     * long way. */
    if (slab_block_usable(ptr, &old) && size - 1 < PTRDIFF_MAX) {
        if (stays_in_place(size, old))
            return ptr;
        return keep_or_move(ptr, size, old);
    }
    return realloc_block(ptr, size);
}

HAK_API void *hak_reallocarray(void *ptr, size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total))
        return fail_nomem();
    return hak_realloc(ptr, total);
}

/* align: a power of two. */
static void *alloc_aligned(size_t align, size_t size)
{
    if (align <= 16 && (align < 16 || size >= 16))
        return alloc(size);
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    size_t need = size < align ? align : size;
    if (align <= HAK_PAGE_SIZE && need <= HAK_L25_MAX)
        return hak_heap_alloc(hak_aligned_class(need, align), size);
    return alloc_large(size, align, false);
}

static bool is_power_of_two(size_t n)
{
    return n && !(n & (n - 1));
}

HAK_API int hak_posix_memalign(void **out, size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment) || alignment % sizeof(void *))
        return EINVAL;
    /* On failure errno is ENOMEM too, as glibc and musl leave it: keeping
     * it took a call to __errno_location and five saved registers in every
     * call (81 instructions a call, 59 with the class above). */
    void *ptr = alloc_aligned(alignment, size);
    if (!ptr)
        return ENOMEM;
    *out = ptr;
    return 0;
}

HAK_API void *hak_aligned_alloc(size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return alloc_aligned(alignment, size);
}

HAK_API void *hak_memalign(size_t alignment, size_t size)
{
    /* As glibc: a smaller alignment is raised, one that is not a power of
     * two is rounded up to the next. */
    if (alignment > (SIZE_MAX >> 1) + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (alignment < sizeof(void *))
        alignment = sizeof(void *);
    if (!is_power_of_two(alignment))
        alignment = (size_t)1 << (64 - __builtin_clzl(alignment));
    return alloc_aligned(alignment, size);
}

HAK_API void *hak_valloc(size_t size)
{
    return alloc_aligned(HAK_PAGE_SIZE, size);
}

HAK_API void *hak_pvalloc(size_t size)
{
    size_t rounded = (size + HAK_PAGE_SIZE - 1) & ~(HAK_PAGE_SIZE - 1);
    if (rounded < size)
        return fail_nomem();
    return alloc_aligned(HAK_PAGE_SIZE, rounded ? rounded : HAK_PAGE_SIZE);
}

/* C23's sized frees, which glibc has had since 2.43: a program built
 * against it calls them, and under hakmem they must be hakmem's, or its
 * blocks would reach glibc's free.  free needs neither the size nor the
 * alignment, as it finds a block's class from its address; checked mode,
 * which knows the size each block was asked with, holds the program to
 * both, as it holds a sized delete to its size. */
bool hak_sized_free_mismatch(void *ptr, size_t size, size_t alignment)
{
    struct hak_chunk_head *chunk = ptr ? owner_of(ptr) : NULL;
    return chunk && (usable_size(chunk, ptr) != size || !is_power_of_two(alignment) ||
                     (uintptr_t)ptr % alignment);
}

static HAK_NOINLINE __attribute__((cold)) void free_checked_size(const char *call, void *ptr,
                                                                 size_t size, size_t alignment)
{
    if (hak_sized_free_mismatch(ptr, size, alignment))
        hak_fatal(call, ptr);
    hak_free(ptr);
}

HAK_API void hak_free_sized(void *ptr, size_t size)
{
    if (HAK_UNLIKELY(hak_harden.checked))
        free_checked_size("free_sized with a size other than the block's:", ptr, size, 1);
    else
        hak_free(ptr);
}

HAK_API void hak_free_aligned_sized(void *ptr, size_t alignment, size_t size)
{
    if (HAK_UNLIKELY(hak_harden.checked))
        free_checked_size("free_aligned_sized with a size or alignment other than the block's:",
                          ptr, size, alignment);
    else
        hak_free(ptr);
}

/* All that malloc_usable_size's fast path leaves. */
static HAK_NOINLINE size_t usable_size_of_any(void *ptr)
{
    if (!ptr)
        return 0;
    struct hak_chunk_head *chunk = owner_of(ptr);
    if (!chunk)
        refuse_foreign("malloc_usable_size of a pointer hakmem never handed out:", ptr);
    return usable_size(chunk, ptr);
}

HAK_API size_t hak_malloc_usable_size(void *ptr)
{
    /* Programs that count their memory ask this at every malloc and free
     * (Redis's zmalloc), so it goes with no call and no stack frame, and
     * for the thread's node's small blocks by the region, one load where
     * the page map took three (262144 live blocks of 16-1039 B asked in
     * random order: 1.5 times the calls a second). */
    size_t usable;
    return HAK_LIKELY(slab_block_usable(ptr, &usable)) ? usable : usable_size_of_any(ptr);
}

/* The dense index hakmem uses for an OS node id, or -1. */
static int node_index(int os_node)
{
    unsigned count = hak_numa_node_count();
    for (unsigned index = 0; index < count; index++)
        if (hak_numa_os_node(index) == (unsigned)os_node)
            return (int)index;
    return -1;
}

HAK_API void *hak_malloc_onnode(size_t size, int node)
{
    hak_init();
    /* A caller that names nodes needs them known now, not at a refill. */
    hak_numa_discover();
    hak_page_map_place_early_chunks();
    int index = node_index(node);
    if (index < 0) {
        errno = EINVAL;
        return NULL;
    }
    /* The thread's own caches only when they are on its current node. */
    if ((unsigned)index == hak_tls.node && (unsigned)index == hak_numa_thread_node())
        return alloc(size);
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    return alloc_in_backend_or_trim(size, HAK_LARGE_MALLOC_ALIGN, (unsigned)index, false, true);
}

HAK_API int hak_node_of(const void *ptr)
{
    struct hak_chunk_head *chunk = owner_of(ptr);
    return chunk ? (int)hak_numa_os_node(chunk->node) : -1;
}

EXPORT_AS(malloc, hak_malloc);
EXPORT_AS(free, hak_free);
EXPORT_AS(free_sized, hak_free_sized);
EXPORT_AS(free_aligned_sized, hak_free_aligned_sized);
EXPORT_AS(calloc, hak_calloc);
EXPORT_AS(realloc, hak_realloc);
EXPORT_AS(reallocarray, hak_reallocarray);
EXPORT_AS(posix_memalign, hak_posix_memalign);
EXPORT_AS(aligned_alloc, hak_aligned_alloc);
EXPORT_AS(memalign, hak_memalign);
EXPORT_AS(valloc, hak_valloc);
EXPORT_AS(pvalloc, hak_pvalloc);
EXPORT_AS(malloc_usable_size, hak_malloc_usable_size);
/* operator delete(void *) (cxx_operators.c has the other forms): free's own
 * code, with no call or jump in between. */
EXPORT_AS(_ZdlPv, hak_free);
/* glibc's own names for its allocator, which some programs call directly:
 * under hakmem they must reach hakmem, or a block would cross allocators. */
EXPORT_AS(__libc_malloc, hak_malloc);
EXPORT_AS(__libc_free, hak_free);
EXPORT_AS(__libc_calloc, hak_calloc);
EXPORT_AS(__libc_realloc, hak_realloc);
EXPORT_AS(__libc_memalign, hak_memalign);
EXPORT_AS(__libc_valloc, hak_valloc);
EXPORT_AS(__libc_pvalloc, hak_pvalloc);
/* cfree, an old name for free that glibc still exports (cfree@GLIBC_2.2.5)
 * for binaries built before 2.26 took it out of <stdlib.h>: their frees
 * must reach hakmem too. */
EXPORT_AS(cfree, hak_free);

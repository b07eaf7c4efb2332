/* The TLS front end: one heap per thread, and in it one cache of free
 * blocks per class.  malloc pops from the cache, free pushes onto it; an
 * empty cache refills and a full one flushes half, in batches, out of line
 * (thread_heap.c).  A small block whose slab another thread's heap owns
 * stays out of the cache and goes home, with others, from there (struct
 * hak_thread, page_tag).  The fast paths never ask which NUMA node they
 * run on: free knows a small block of the thread's node by its address, in
 * the node's part of the SuperSlab region, and otherwise compares the
 * block's node with the thread's, both already at hand; malloc leaves for
 * the refill when the kernel has moved the thread to another CPU (struct
 * hak_thread), so that the refill sends the caches' blocks home if the CPU
 * is on another node.  free needs no such check: the blocks it caches
 * before the next malloc go home with the others. */
#ifndef HAK_THREAD_HEAP_H
#define HAK_THREAD_HEAP_H

#include "../internal.h"
#include "../arena/slab.h"
#include "../block/block_link.h"
#include "../block/size_class.h"

extern __thread struct hak_thread hak_tls __attribute__((tls_model("initial-exec"))) HAK_SHARED;

/* &hak_tls, for the fast paths, which reach the thread's caches through it
 * rather than through the %fs segment at every access (what the compiler
 * makes of hak_tls.head[cls]): a core forwards free's store of a cache's
 * head to malloc's load of it sooner when both address it from a plain
 * register (fixed_size: 102 M pairs/s through the segment, 130 M through
 * this pointer, on a Sapphire Rapids Xeon).  The empty asm keeps the compiler from
 * folding the pointer back into segment accesses. */
static inline struct hak_thread *hak_my_thread(void)
{
    struct hak_thread *self = &hak_tls;
    __asm__("" : "+r"(self));
    return self;
}

/* A block of class cls (or, in checked mode, of a class that also fits
 * size and a canary) when the cache is empty, the thread has moved to
 * another CPU, or the cache's first link is corrupted (an abort). */
void *hak_heap_refill(size_t size, size_t cls);
/* calloc of a block of an L25 class, over 32 KiB (size bytes zeroed).  One
 * the cache and the class's slabs cannot give takes a span of its own
 * (thread_heap.c): one fresh from the PageArena is zero already (the two
 * words carving wrote cleared as the block is handed out), but for the
 * pages idle SuperSlabs lent it (arena/shared_pool.h), and calloc writes
 * none of the rest, so that the program gets those pages untouched, as
 * glibc and jemalloc hand out fresh memory (calloc of 200 blocks of
 * 512 KiB, a byte of each written: 25.9k faults and 104 MB resident when
 * each was cleared whole, glibc's 278 faults and 2.0 MB).
 * Checked mode (level 2, memcheck) clears every block whole. */
void *hak_heap_alloc_zeroed(size_t size, size_t cls);
/* The cache of cls is full; its first block, just freed, is slab's and
 * starts one of its blocks (hak_heap_free tested it).  The block comes
 * first in these calls, as it comes to free: the fast path then need not
 * move it out of the register that passes it.  Here and in the two calls
 * after the next, slab may be NULL, for the block's own. */
void hak_heap_flush(void *block, size_t cls, struct hak_slab *slab);
/* The same for level 0, whose fast path tests nothing. */
void hak_heap_flush_plain(void *block, size_t cls, struct hak_slab *slab);
/* A free the cache cannot take: another node's block, a thread without a
 * heap yet, or a pointer that is not a live block (checked here). */
void hak_heap_free_other(void *block, struct hak_slab *slab);
/* Aborts naming what is wrong with freeing block.  Not declared noreturn:
 * free then jumps here, and its fast path needs no stack frame of its own
 * to align the stack for a call (two instructions in every free). */
void hak_heap_free_invalid(void *block, struct hak_slab *slab) __attribute__((cold));
/* A small block that hak_heap_free_in_region or hak_heap_free did not
 * take (slab: NULL from the former): home with others in a run where
 * another heap owns its slab, else hak_heap_free_invalid's. */
void hak_heap_free_unowned(void *block, struct hak_slab *slab);
/* After the calling thread was re-pinned: when it now runs on another node,
 * its cached blocks go home and its next malloc takes memory here (where
 * glibc did not register rseq, malloc could not tell until a refill). */
void hak_heap_follow_thread_node(void);
/* Every free of a slab's block in checked mode (harden.h). */
void hak_heap_free_checked(struct hak_slab *slab, void *block);
/* Checked mode: the size a block was asked with, its canary intact. */
size_t hak_heap_requested_size(struct hak_slab *slab, void *block);
/* Checked mode: the block takes size bytes in place, its canary after them,
 * when they and the canary's record fill more than half of it (as level 1
 * keeps a block) and the calling thread owns its slab; false if not. */
bool hak_heap_resize_checked(struct hak_slab *slab, void *block, size_t size);
/* malloc_trim, and an allocation that found no memory, before it tries
 * once more: the calling thread's cached blocks go back to their slabs,
 * and its slabs left empty to their backends, with the empty slabs of
 * exited threads; then every node's backends give back the free memory
 * they keep, whatever its age.  True if any memory went back.  An
 * allocation that failed while memory waited to age out (decay) would fail
 * or not by the clock: under an address-space limit, 1 MiB blocks and
 * SuperSlabs were refused while a cached large mapping and stale spans
 * held the room, which a later call, once they had aged, found free. */
bool hak_heap_trim(void);
/* Thread exit: empties the caches, hands back or abandons every slab. */
void hak_heap_thread_exit(void *heap);
/* In a forked child, where only the calling thread lives, with the registry
 * locked (since fork's prepare handler): the registry keeps the calling
 * thread's heap alone and the others' counts among the retired ones, for
 * glibc may unmap the other threads' TLS, which the registry reads (struct
 * hak_thread).  Their cached blocks and slabs stay theirs. */
void hak_heap_forget_other_threads(void);

/* Whether offset, a pointer's distance from the slab's start, starts one
 * of the blocks the slab holds (hak_block_starts), for the slow paths: a
 * pointer inside a block, below the start or past the last block fails.
 * One into a page not carved yet fails where free looks first (the page
 * tables); carving takes every block that starts in a page (arena/slab.c),
 * so that no block of a page carved waits uncarved. */
static inline bool hak_slab_starts_block(const struct hak_slab *slab, uint32_t offset)
{
    return hak_block_starts(&hak_class_divisors.magic[slab->cls], &slab->block_limit, offset);
}

/* A block's offset in its slab: in a SuperSlab, where every slab starts at
 * a multiple of its size, from the address alone (no load of the slab's
 * start for free to wait on). */
static inline uint32_t hak_superslab_block_offset(const void *block)
{
    return (uint32_t)((uintptr_t)block % HAK_SLAB_SIZE);
}

static inline uint32_t hak_slab_block_offset(const struct hak_slab *slab, const void *block)
{
    return (uint32_t)((uintptr_t)block - (uintptr_t)slab->start);
}

/* One block more in the cache; true when it is full.  On x86-64 one
 * subtract from memory, whose zero flag is the answer: from the C, GCC
 * computed the counter's index into a register of its own first (lea),
 * one instruction more in every free. */
static inline bool hak_heap_count_free(struct hak_thread *self, size_t cls)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    bool full;
    __asm__("{subl $1, %1|sub %1, 1}" : "=@ccz"(full), "+m"(self->room[cls]));
    return full;
#else
    return --self->room[cls] == 0;
#endif
}

/* &self->head[cls], in a register of its own, through which malloc and
 * free load and store the cache's head.  In a free followed by a malloc of
 * the class, malloc's load of the head waits on free's store of it; on
 * Intel's recent cores (a Sapphire Rapids Xeon) the store forwards sooner
 * where both address the head as a register plus a displacement, with no
 * index register, which GCC prefers: fixed_size ran 1.24 times the pairs
 * a second, batch_free 1.09 to 1.11 times (5 and 7 alternating runs), at one
 * instruction more in malloc and in free, this lea.  In asm, so that GCC
 * does not fold the address back into base-plus-index operands.  room[]
 * and allocs[] stay at their index: reached from the slot too, as words
 * of 8 bytes, fixed_size ran 1.36 times as fast, but larson, whose frees
 * and mallocs take turns between classes, 0.82 times (one thread or two,
 * 7 alternating runs each, the same instructions under callgrind). */
static inline void **hak_heap_head_slot(struct hak_thread *self, size_t cls)
{
#if defined(__x86_64__)
    void **slot;
    __asm__("{lea (%1,%2,8), %0|lea %0, [%1+%2*8]}" : "=r"(slot) : "r"(self->head), "r"(cls));
    return slot;
#else
    return &self->head[cls];
#endif
}

/* Takes block, the cache's first (at slot, hak_heap_head_slot), whose link
 * decoded to next (a block or HAK_LIST_END).  No prefetch of next, whose
 * link the next malloc reads: that miss, in a cache a refill filled with
 * blocks freed long ago, holds up only the next malloc's block (this
 * one's return waits on no test of next: the branch is predicted), and
 * the program's work in between overlaps it; the prefetch's one
 * instruction more in every pop cost more where the blocks are at hand
 * (alternating runs without it: fixed_size 1.056 times the pairs a
 * second, batch_free 1.055, xmalloc 1.04, larson 1.02; xthread 0.89,
 * still 2.6 times the fastest other allocator's, cxx_churn 0.97, mstress
 * 1.01 times the time). */
static inline void *hak_heap_take(struct hak_thread *self, size_t cls, void **slot, void *block,
                                  uintptr_t next)
{
    *slot = (void *)next;
    hak_block_clear_free_words(block);
    self->room[cls]++;
    self->allocs[cls]++;
    return block;
}

/* The cache's first block, for the slow paths; block is self->head[cls],
 * not HAK_LIST_END. */
static inline void *hak_heap_pop(struct hak_thread *self, size_t cls, void *block)
{
    uintptr_t next = hak_link_decode(block);
    if (HAK_UNLIKELY(hak_link_corrupted(next)))
        return hak_fatal_corrupted_link(block);
    return hak_heap_take(self, cls, &self->head[cls], block, next);
}

/* The cache's first block, at slot (hak_heap_head_slot), for malloc's fast
 * path to return: on x86-64 loaded into the return register, where GCC
 * loaded it into another and moved it over at the end, one instruction
 * more in every malloc. */
static inline void *hak_heap_head(void *const *slot)
{
    void *block = *slot;
#if defined(__x86_64__)
    __asm__("" : "+a"(block));
#endif
    return block;
}

/* Whether malloc's fast path may take block, self->head[cls], whose link
 * it decodes into *next: the thread has not moved to another CPU and the
 * link is sound.  An empty cache's head, HAK_LIST_END, decodes as unsound,
 * so that one test sends both to the refill, which tells them apart. */
static inline bool hak_heap_poppable(const struct hak_thread *self, const void *block,
                                     uintptr_t *next)
{
    if (*self->cpu_word != self->cpu)
        return false;
    *next = hak_link_decode(block);
    return !hak_link_corrupted(*next);
}

/* size: what the caller asked for, which only the checked mode reads. */
static inline void *hak_heap_alloc(size_t cls, size_t size)
{
    struct hak_thread *self = hak_my_thread();
    void **slot = hak_heap_head_slot(self, cls);
    void *block = hak_heap_head(slot);
    uintptr_t next;
    if (HAK_LIKELY(hak_heap_poppable(self, block, &next)))
        return hak_heap_take(self, cls, slot, block, next);
    return hak_heap_refill(size, cls);
}

/* A tested block into the cache of cls; true when it is full. */
static inline bool hak_heap_push(struct hak_thread *self, size_t cls, void *block)
{
    hak_block_tag_free(block);
    void **slot = hak_heap_head_slot(self, cls);
    hak_link_set(block, *slot);
    *slot = block;
    return hak_heap_count_free(self, cls);
}

/* The fast path's end, once free knows that block's slab frees to this
 * thread's node and whether block starts one of its blocks (starts); slab
 * may be NULL for the slow paths to look it up, and refused takes the
 * block where either test fails.  The callers know the node first: the
 * block-start test, computed before a test of it, would be held in a
 * register across the branch (two instructions more). */
static inline void hak_heap_free_mine(struct hak_thread *self, bool starts, size_t cls, void *block,
                                      struct hak_slab *slab,
                                      void (*refused)(void *, struct hak_slab *))
{
    if (HAK_UNLIKELY(!starts || hak_block_tagged_free(block))) {
        refused(block, slab);
        return;
    }
    if (HAK_UNLIKELY(hak_heap_push(self, cls, block)))
        hak_heap_flush(block, cls, slab);
}

/* Whether block lies in a SuperSlab of the thread's node's part of the
 * region, as far as the thread has looked (struct hak_thread); *offset:
 * block's distance from the part's first SuperSlab (region_base). */
static inline bool hak_heap_region_find(const struct hak_thread *self, const void *block,
                                        uintptr_t *offset)
{
    *offset = (uintptr_t)block - self->region_base;
    return *offset < self->region_used;
}

/* The byte of the page at part_offset (hak_heap_region_find's) in the
 * part's page table (arena/superslab.h): its slab's class, and above it the
 * page tag of the heap that owns the slab, which an adopter rewrites while
 * other threads read it (hak_slab_adopt). */
static inline size_t hak_heap_region_page_byte(const struct hak_thread *self, uintptr_t part_offset)
{
    return __atomic_load_n(&self->page_table[part_offset >> HAK_PAGE_SHIFT], __ATOMIC_RELAXED);
}

/* The free of a block hak_heap_region_find found, whose slab is of the
 * thread's node: no test of the node, and no load of the slab.
 * part_offset: hak_heap_region_find's, whose page's byte in the part's
 * page table (arena/superslab.h) XOR the thread's page tag is the
 * class where the thread's heap owns the slab (struct hak_thread); a page
 * of another heap's slab, or where no block of a live slab starts, fails
 * the block-start test, and the slow path sends the block home or names
 * the fault.  An adopter rewrites the tag while other threads free the
 * slab's blocks (hak_slab_adopt): a free that reads the old tag sends its
 * block home, one that reads the new caches it, and either is sound. */
static inline void hak_heap_free_in_region(struct hak_thread *self, void *block,
                                           uintptr_t part_offset)
{
    size_t cls = hak_heap_region_page_byte(self, part_offset) ^ self->page_tag;
    hak_heap_free_mine(self,
                       hak_block_starts(&self->page_divisors[cls],
                                        &self->page_divisors[HAK_PAGE_MAGICS + cls],
                                        hak_superslab_block_offset(block)),
                       cls, block, NULL, hak_heap_free_unowned);
}

/* The same for a block of a SuperSlab outside the thread's part of the
 * region, from the page map.  cls: the slab's, where the caller can know
 * it without a load of the slab (hak_superslab_page_class): the address of
 * the cache's head then waits on no load of slab, whose fields only steer
 * the branches.  offset: the block's from the slab's start
 * (hak_superslab_block_offset). */
static inline void hak_heap_free(struct hak_slab *slab, size_t cls, void *block, uint32_t offset)
{
    struct hak_thread *self = hak_my_thread();
    if (HAK_UNLIKELY(slab->free_node != self->node)) {
        hak_heap_free_other(block, slab);
        return;
    }
    /* A slab that serves no blocks fails the block-start test (its
     * block_limit is 0), and the slow path names the fault; one another
     * heap owns sends the block home.  The magic from the thread's table,
     * whose entry for a class with no tag bits is the class's whoever owns
     * the slab (struct hak_thread): one load of the slab less to wait on.
     * Its entries past the SuperSlab classes are 0, which would pass any
     * offset, but a page whose byte says no class maps to a sentinel slab
     * (arena/slab.c, map_carved), which the node test sent away. */
    bool mine = hak_block_starts(&self->page_divisors[cls], &slab->block_limit, offset) &&
                atomic_load_explicit(&slab->owner, memory_order_relaxed) == self->heap;
    hak_heap_free_mine(self, mine, cls, block, slab, hak_heap_free_unowned);
}

/* The same for a block of an arena chunk, from its page's entry
 * (struct hak_page_info), with no load of its slab: the slow paths look the
 * slab up.  These blocks are bigger than a page, so a page where a carved
 * block starts holds no other block's start, and pages where none does
 * have no entry: a pointer that passes starts a carved block. */
static inline void hak_heap_free_in_page(const struct hak_page_info *info, void *block,
                                         uint32_t offset)
{
    struct hak_thread *self = hak_my_thread();
    if (HAK_UNLIKELY(info->node != self->node)) {
        hak_heap_free_other(block, NULL);
        return;
    }
    size_t cls = info->cls;
    hak_heap_free_mine(self, hak_class_starts_block(cls, offset), cls, block, NULL,
                       hak_heap_free_invalid);
}

/* Level 0: the same without the checks, the tag and the encoding, but
 * for a pointer into an L25 block past its start, whose page maps to the
 * slab as its first does (hak_slab_is_whole_span), where other pages
 * inside a block map to a sentinel that serves none. */
static inline void hak_heap_free_plain(struct hak_slab *slab, size_t cls, void *block)
{
    struct hak_thread *self = hak_my_thread();
    if (HAK_UNLIKELY(slab->free_node != self->node)) {
        hak_heap_free_other(block, slab);
        return;
    }
    if (HAK_UNLIKELY(hak_slab_is_whole_span(slab) && block != slab->start)) {
        hak_heap_free_invalid(block, slab);
        return;
    }
    void **slot = hak_heap_head_slot(self, cls);
    hak_link_set_plain(block, *slot);
    *slot = block;
    if (HAK_UNLIKELY(hak_heap_count_free(self, cls)))
        hak_heap_flush_plain(block, cls, slab);
}

/* A class whose cache served no malloc while its thread grew by a page
 * (a minor fault, or a page of a slab or span taken from its node) per
 * this many milliseconds of HAKMEM_DECAY_MS counts as idle when the thread
 * takes a slab for another (thread_heap.c). */
#define HAK_IDLE_GROWTH_DECAY_MS 20

/* Creates the thread-exit hook; called once by hak_init. */
bool hak_heap_setup(void);
/* Adds the per-class counters of every live heap to totals. */
void hak_heap_sum_stats(struct hak_class_stats totals[HAK_NUM_CLASSES]);

/* What the thread heaps hold, for mallinfo. */
struct hak_heap_usage {
    /* Blocks handed to the program and not freed, by their class's size.
     * A block another thread freed counts until its slab's owner collects
     * it (at a refill of the class). */
    uint64_t in_use_bytes;
    uint64_t cached_blocks; /* free, in the threads' caches */
    uint64_t cached_bytes;
};
void hak_heap_usage(struct hak_heap_usage *usage);

/* fork's prepare handler: holds the heap registry, and sends the other
 * threads' next malloc to wait for the fork to end, HAK_FORK_WAIT_MS at
 * most (thread_heap.c, wait_for_fork); its parent and child handlers let
 * them go. */
#define HAK_FORK_WAIT_MS 200
void hak_heap_hold_for_fork(void);
void hak_heap_release_after_fork(void);

#endif

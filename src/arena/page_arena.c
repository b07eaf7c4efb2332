#include "page_arena.h"

#include <string.h>

#include "../fork_locks.h"
#include "../harden.h"
#include "../numa/binding.h"
#include "../numa/node.h"
#include "../options.h"
#include "../os.h"
#include "../stats.h"
#include "mappings.h"
#include "meta.h"
#include "page_map.h"
#include "shared_pool.h"
#include "span_bins.h"

/* Wholly free chunks an arena keeps mapped; more go back to the OS. */
#define KEEP_FREE_CHUNKS 1
/* Chunks created before huge pages are asked for (HAKMEM_HUGE_PAGES). */
#define HUGE_PAGES_AFTER_CHUNKS 2
/* Of an arena's chunks, one in this many keeps small pages: the probe. */
#define PROBE_EVERY 8
/* The most chunks one mapping makes (chunks_batch). */
#define CHUNK_BATCH_MAX 8
#define SPARE_BOUND 1u

struct page_arena {
    uint32_t free_chunks;
    uint32_t chunks_made;
    uint32_t spare_count;
    void *probe;               /* the last chunk left to small pages (maybe unmapped since) */
    struct hak_span_bins bins; /* free spans */
    /* Chunks mapped with an earlier one, not set up: address space, no
     * page touched.  SPARE_BOUND marks those bound to the node: one mapped
     * before the topology was known is bound when taken. */
    uintptr_t spare[CHUNK_BATCH_MAX - 1];
} __attribute__((aligned(HAK_CACHE_LINE)));

static struct page_arena arenas[HAK_MAX_NODES];

static pthread_mutex_t *lock_of(const struct page_arena *arena)
{
    return &hak_fork_locks.node[arena - arenas].page_arena.mutex;
}

static struct hak_arena_chunk *chunk_of(const struct hak_slab *span)
{
    return (struct hak_arena_chunk *)span->chunk;
}

/* Points every page of span at it; it serves no blocks yet. */
static void map_pages(struct hak_slab *span)
{
    span->free_node = HAK_NO_NODE;
    hak_span_map_pages(span, span->first_page, span->pages);
}

static void bin_insert(struct page_arena *arena, struct hak_slab *span)
{
    span->kind = HAK_SLAB_FREE_SPAN;
    hak_span_bins_insert(&arena->bins, span);
}

static void bin_remove(struct page_arena *arena, struct hak_slab *span)
{
    hak_span_bins_remove(&arena->bins, span);
    /* Under the lock: a thread freeing a neighbour looks at this to decide
     * whether to merge with it, before the span's new owner gets to it. */
    span->kind = HAK_SLAB_INVALID;
}

/* Huge pages only where the program writes most of the memory it gets: a
 * program that uses a few bytes of each block would have every 2 MiB of
 * them faulted in and zeroed whole, and broken up again by each decommit.
 * How much of the probe chunk is resident tells; a new probe now and then
 * (when made, the arena's chunks made before this one, is a multiple of
 * PROBE_EVERY) lets the answer change with the program. */
static bool want_huge_pages(void *probe, uint32_t made)
{
    uint64_t chunks = hak_stat_read(HAK_STAT_ARENA_CHUNKS);
    if (chunks < HUGE_PAGES_AFTER_CHUNKS || !probe || !hak_options_huge_pages() ||
        made % PROBE_EVERY == 0)
        return false;
    return hak_os_mostly_resident(probe, HAK_ARENA_CHUNK_SIZE);
}

/* How many chunks the mapping for an arena's chunk number made (from 0)
 * makes: one each for the first two, then as many as the arena has made,
 * up to CHUNK_BATCH_MAX, so that the chunks mapped and never used stay
 * fewer than those in use.  Each mapping changes the address space under
 * the mmap lock, and a new chunk merges with the one mapped before it
 * (os.c places them side by side), so that the other threads' first
 * faults in that chunk wait for the lock: l25, two threads faulting in
 * 64 MB of blocks, made 16 chunks a run with a mapping each; in batches,
 * 1.19 times as fast in 15 alternating runs (paired 1.11), 1.01 (1.04) in
 * a later 11, the machine's noise as big as the gain. */
static uint32_t chunks_batch(uint32_t made)
{
    /* Under an address-space limit spares would count against it. */
    if (made < 2 || hak_os_address_space_limited())
        return 1;
    return made < CHUNK_BATCH_MAX ? made : CHUNK_BATCH_MAX;
}

/* count chunks mapped side by side and bound to node, where the topology
 * is known (*bound); NULL with no memory. */
static char *map_chunks(unsigned node, uint32_t count, bool *bound)
{
    size_t size = (size_t)count * HAK_ARENA_CHUNK_SIZE;
    char *chunks = hak_os_map_aligned(size, HAK_ARENA_CHUNK_SIZE);
    *bound = hak_numa_node_count() > 1;
    if (chunks)
        hak_numa_bind(chunks, size, node);
    return chunks;
}

/* The mapped chunk at mem set up for node, as one span; NULL (mem unmapped)
 * with no memory for its descriptor or page-map entries. */
static struct hak_slab *set_up_chunk(void *mem, unsigned node, bool huge)
{
    struct hak_arena_chunk *chunk = mem;
    struct hak_slab *span = hak_span_desc_alloc();
    if (!span) {
        hak_os_unmap(chunk, HAK_ARENA_CHUNK_SIZE);
        return NULL;
    }
    /* A process that keeps this much in Mid and L25 blocks, and writes them,
     * faults its chunks in 2 MiB at a time; a small one never pays for
     * zeroing a huge page. */
    if (huge)
        hak_os_advise_huge(chunk, HAK_ARENA_CHUNK_SIZE);
    chunk->huge_pages = huge;
    chunk->head.kind = HAK_CHUNK_ARENA;
    chunk->head.node = node;
    chunk->head.map_size = HAK_ARENA_CHUNK_SIZE;
    chunk->head.route = hak_harden.route;
    for (unsigned p = 0; p < HAK_ARENA_HEADER_PAGES; p++) {
        chunk->page_slab[p] = &hak_invalid_slab;
        chunk->page_info[p] = HAK_PAGE_INFO_NONE;
    }
    span->chunk = &chunk->head;
    span->node = (uint8_t)node;
    span->first_page = HAK_ARENA_HEADER_PAGES;
    span->pages = HAK_ARENA_USABLE_PAGES;
    span->start = (char *)chunk + HAK_ARENA_HEADER_PAGES * HAK_PAGE_SIZE;
    /* Every page's entry says none before the page map lets free find the
     * chunk: a zeroed one would send a stray free to node 0's cache. */
    map_pages(span);
    if (!hak_page_map_set(chunk, HAK_ARENA_CHUNK_SIZE, &chunk->head)) {
        hak_os_unmap(chunk, HAK_ARENA_CHUNK_SIZE);
        hak_span_desc_free(span);
        return NULL;
    }
    hak_stat_pages_out(HAK_PAGES_SSM, HAK_ARENA_HEADER_PAGES, 0);
    hak_stat_add(HAK_STAT_ARENA_CHUNKS, 1);
    hak_stat_node_map(node, HAK_ARENA_CHUNK_SIZE);
    return span;
}

/* Under the arena's lock, which it lets go of while the chunk is mapped
 * and set up: a mapping, faults on the header's pages, the page map's
 * entries and the probe's mincore take tens of microseconds, in which a
 * thread after a span of the arena's would sleep on the lock (mid_large_mt
 * with 2 threads: 44-54 futex calls a run, all in hak_page_arena_alloc).
 * Two threads that find no span at once each make a chunk and cut their
 * spans from their own, the rest of both going to the bins; a span freed
 * meanwhile waits there for the next.  A fork meanwhile leaves the child
 * the chunks being mapped in no bin and no spare: address space, and a
 * header's pages.
 * The chunk is one of the arena's spares, or the first of chunks_batch
 * mapped now, whose others become spares. */
static struct hak_slab *new_chunk(struct page_arena *arena, unsigned node)
{
    uint32_t made = arena->chunks_made++;
    void *probe = arena->probe;
    uintptr_t spare = arena->spare_count ? arena->spare[--arena->spare_count] : 0;
    pthread_mutex_unlock(lock_of(arena));
    bool huge = want_huge_pages(probe, made);
    char *mem = (char *)(spare & ~(uintptr_t)SPARE_BOUND);
    uint32_t batch = 1;
    bool bound = spare & SPARE_BOUND;
    if (spare && !bound)
        hak_numa_bind(mem, HAK_ARENA_CHUNK_SIZE, node);
    if (!spare) {
        /* Stale spare SuperSlabs outside the region count against an
         * address-space limit: they leave before the mapping, not after,
         * when the span would take their pages. */
        if (hak_os_address_space_limited())
            hak_shared_pool_release_stale(node);
        batch = chunks_batch(made);
        mem = map_chunks(node, batch, &bound);
        if (!mem && batch > 1) /* under an address-space limit, say */
            mem = map_chunks(node, batch = 1, &bound);
    }
    struct hak_slab *span = mem ? set_up_chunk(mem, node, huge) : NULL;
    pthread_mutex_lock(lock_of(arena));
    /* The batch's others (another thread may have stashed its own since). */
    for (uint32_t i = 1; i < batch; i++) {
        char *other = mem + (size_t)i * HAK_ARENA_CHUNK_SIZE;
        if (arena->spare_count < CHUNK_BATCH_MAX - 1)
            arena->spare[arena->spare_count++] = (uintptr_t)other | (bound ? SPARE_BOUND : 0);
        else
            hak_os_unmap(other, HAK_ARENA_CHUNK_SIZE);
    }
    if (span && !huge)
        arena->probe = span->chunk;
    return span;
}

/* The first pages pages of span, out of the bins, under a descriptor of
 * their own; span keeps the rest and goes back to the bins.  Only the pages
 * cut off are mapped again: the rest of a fresh chunk is most of its
 * pages, which remapping at every cut from its front cost more than the
 * span's first use (mid_light, 2 500 instructions a cut).  NULL when no
 * descriptor was available (span is left as it was, out of the bins). */
static struct hak_slab *cut_front(struct page_arena *arena, struct hak_slab *span, uint32_t pages)
{
    if (span->pages == pages)
        return span;
    struct hak_slab *front = hak_span_desc_alloc();
    if (!front)
        return NULL;
    front->chunk = span->chunk;
    front->node = span->node;
    front->first_page = span->first_page;
    front->pages = pages;
    front->start = span->start;
    span->first_page += pages;
    span->pages -= pages;
    span->start += (size_t)pages * HAK_PAGE_SIZE;
    map_pages(front);
    bin_insert(arena, span);
    return front;
}

/* span, out of the bins, where it is to take lent pages (pages of its own
 * hold a grain, in a chunk of small pages, below level 2, where nothing
 * lends, and node's shared pool may lend), from its first grain line
 * (mappings.h): the pages before go back to the bins as a free span of
 * their own, so that every range moved into span lands on the grain.
 * span as it was where it holds fewer than pages after the line, or no
 * descriptor could be had (a lend skips those pages then).  Spans that
 * take none start where their free pages do, as before: the pages before
 * a line hold only shorter spans, and a span so kept apart from its
 * neighbours merges with neither in the HotSpanBox (at level 2 the page
 * before a span is another's guard, which catches a write under its
 * first block). */
static struct hak_slab *start_on_grain(struct page_arena *arena, unsigned node,
                                       struct hak_slab *span, uint32_t pages)
{
    if (chunk_of(span)->huge_pages || hak_harden.guard_bytes ||
        (size_t)pages * HAK_PAGE_SIZE < HAK_LEND_GRAIN || !hak_shared_pool_may_lend(node))
        return span;
    uint32_t before =
        (uint32_t)((hak_lend_grain_up((uintptr_t)span->start) - (uintptr_t)span->start) /
                   HAK_PAGE_SIZE);
    if (!before || span->pages < before + pages)
        return span;
    struct hak_slab *front = cut_front(arena, span, before);
    if (!front)
        return span;
    bin_remove(arena, span); /* cut_front put it back */
    bin_insert(arena, front);
    return span;
}

struct hak_slab *hak_span_cut_tail(struct hak_slab *span, uint32_t keep)
{
    struct hak_slab *tail = hak_span_desc_alloc();
    if (!tail)
        return NULL;
    uint32_t touched = span->touched_pages;
    tail->chunk = span->chunk;
    tail->node = span->node;
    tail->free_node = HAK_NO_NODE;
    tail->first_page = span->first_page + keep;
    tail->pages = span->pages - keep;
    tail->start = span->start + (size_t)keep * HAK_PAGE_SIZE;
    tail->end = tail->start;
    tail->state = HAK_STATE_POOL;
    tail->touched_pages = touched > keep ? touched - keep : 0;
    span->pages = keep;
    span->touched_pages = touched < keep ? touched : keep;
    return tail;
}

/* The pages of span past keep, taken by a lend that ran short of them
 * and never touched, go back to the bins; where span was fresh and no
 * span was cut after it, the chunk counts them as never handed out, so
 * that the span cut there next is fresh too, and calloc does not clear
 * (and fault in) pages that read as zeros.  Whole where no descriptor
 * could be had. */
static void give_back_tail(struct hak_slab *span, uint32_t keep)
{
    struct hak_slab *tail = hak_span_cut_tail(span, keep);
    if (!tail)
        return;
    struct hak_arena_chunk *chunk = chunk_of(span);
    span->end = tail->start;
    pthread_mutex_lock(lock_of(&arenas[span->node]));
    if (span->fresh && chunk->handed_out_pages == tail->first_page + tail->pages)
        __atomic_store_n(&chunk->handed_out_pages, tail->first_page, __ATOMIC_RELAXED);
    pthread_mutex_unlock(lock_of(&arenas[span->node]));
    hak_page_arena_free(tail);
}

struct hak_slab *hak_page_arena_alloc(unsigned node, uint32_t pages)
{
    return hak_page_arena_alloc_up_to(node, pages, pages);
}

struct hak_slab *hak_page_arena_alloc_up_to(unsigned node, uint32_t pages, uint32_t most)
{
    const uint32_t asked = pages;
    size_t need = (size_t)pages * HAK_PAGE_SIZE - hak_harden.guard_bytes;
    struct page_arena *arena = &arenas[node];
    pthread_mutex_lock(lock_of(arena));
    /* A free span that holds most before the shorter ones that hold pages,
     * but for one in huge pages, which is never cut longer: the best fit. */
    struct hak_slab *span = most > pages ? hak_span_bins_fit(&arena->bins, most) : NULL;
    if (!span || chunk_of(span)->huge_pages)
        span = hak_span_bins_fit(&arena->bins, pages);
    if (span) {
        bin_remove(arena, span);
        if (span->pages == HAK_ARENA_USABLE_PAGES)
            arena->free_chunks--;
    } else {
        span = new_chunk(arena, node);
    }
    if (span) {
        struct hak_slab *whole = start_on_grain(arena, node, span, pages);
        /* Whole spans of pages pages, and not in huge pages, which a
         * range moved in would break up. */
        if (most > pages && !chunk_of(whole)->huge_pages)
            pages = (whole->pages < most ? whole->pages : most) / pages * pages;
        span = cut_front(arena, whole, pages);
        if (!span)
            bin_insert(arena, whole);
    }
    bool fresh = false;
    if (span) {
        /* Spans are cut from the front of free ones: a fresh chunk is
         * handed out front to back. */
        struct hak_arena_chunk *chunk = chunk_of(span);
        uint32_t end = span->first_page + pages;
        fresh = span->first_page >= chunk->handed_out_pages;
        if (end > chunk->handed_out_pages)
            __atomic_store_n(&chunk->handed_out_pages, end, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(lock_of(arena));
    if (!span)
        return NULL;
    /* The arena's spans are never touched or were decommitted: the span
     * is fresh memory, which idle SuperSlabs' pages take the place of, or
     * for which they give theirs back (all of it, in a chunk of huge
     * pages, which a range moved in would break up). */
    size_t bytes = (size_t)pages * HAK_PAGE_SIZE, lent = 0;
    struct hak_arena_chunk *chunk = chunk_of(span);
    if (chunk->huge_pages) {
        hak_shared_pool_release_stale(node);
    } else {
        /* At level 2 the span's last page becomes its guard. */
        lent = hak_shared_pool_lend(node, span->start, bytes - hak_harden.guard_bytes, need,
                                    &chunk->mappings, (char *)chunk);
    }
    /* Not since a decommit, which madvise may refuse (locked pages): since
     * the chunk was mapped. */
    span->fresh = fresh;
    span->state = HAK_STATE_NONE;
    span->end = span->start + bytes;
    span->touched_pages = (uint32_t)(lent / HAK_PAGE_SIZE);
    /* Longer than asked: as many spans of asked pages as the lend filled,
     * the last one's untouched pages with it (they fault in as a span's
     * would have without the lend ahead); a partial span left over would
     * wait in the HotSpanBox for a request no longer than itself. */
    if (pages > asked) {
        uint32_t filled = span->touched_pages > asked ? span->touched_pages : asked;
        uint32_t keep = (filled + asked - 1) / asked * asked;
        if (keep < pages)
            give_back_tail(span, keep);
    }
    return span;
}

bool hak_page_arena_was_handed_out(const struct hak_slab *span, const void *ptr)
{
    if (hak_slab_kind_is_hot(span->kind))
        return true; /* only spans that served blocks enter the HotSpanBox */
    if (span->kind != HAK_SLAB_FREE_SPAN)
        return false;
    const struct hak_arena_chunk *chunk = chunk_of(span);
    size_t page = ((uintptr_t)ptr - (uintptr_t)chunk) >> HAK_PAGE_SHIFT;
    return page < __atomic_load_n(&chunk->handed_out_pages, __ATOMIC_RELAXED);
}

static struct hak_slab *free_neighbour(struct hak_arena_chunk *chunk, uint32_t page)
{
    if (page < HAK_ARENA_HEADER_PAGES || page >= HAK_ARENA_PAGES)
        return NULL;
    struct hak_slab *span = chunk->page_slab[page];
    return span->kind == HAK_SLAB_FREE_SPAN ? span : NULL;
}

/* span covers the whole of its chunk, out of the bins. */
static void unmap_chunk(struct hak_slab *span)
{
    struct hak_arena_chunk *chunk = chunk_of(span);
    hak_span_desc_free(span);
    hak_stat_node_map(chunk->head.node, -(int64_t)HAK_ARENA_CHUNK_SIZE);
    hak_page_map_clear(chunk, HAK_ARENA_CHUNK_SIZE);
    hak_os_forget_lent(chunk->mappings.lent_ranges);
    hak_os_unmap(chunk, HAK_ARENA_CHUNK_SIZE);
}

void hak_page_arena_free(struct hak_slab *span)
{
    struct page_arena *arena = &arenas[span->node];
    struct hak_arena_chunk *chunk = chunk_of(span);
    struct hak_slab *drop[2] = {NULL, NULL};
    atomic_store_explicit(&span->owner, NULL, memory_order_relaxed);
    span->state = HAK_STATE_POOL;
    pthread_mutex_lock(lock_of(arena));
    struct hak_slab *before = free_neighbour(chunk, span->first_page - 1);
    if (before) {
        bin_remove(arena, before);
        before->pages += span->pages;
        drop[0] = span;
        span = before;
    }
    struct hak_slab *after = free_neighbour(chunk, span->first_page + span->pages);
    if (after) {
        bin_remove(arena, after);
        span->pages += after->pages;
        drop[1] = after;
    }
    map_pages(span);
    span->kind = HAK_SLAB_FREE_SPAN;
    bool chunk_free = span->pages == HAK_ARENA_USABLE_PAGES;
    /* One that ranges were lent to is kernel mappings in pieces: unmapped,
     * it takes them all away (a chunk mapped anew is one). */
    bool unmap = chunk_free && (arena->free_chunks >= KEEP_FREE_CHUNKS ||
                                __atomic_load_n(&chunk->mappings.lent_ranges, __ATOMIC_RELAXED));
    if (!unmap) {
        bin_insert(arena, span);
        arena->free_chunks += chunk_free;
    }
    pthread_mutex_unlock(lock_of(arena));
    for (unsigned i = 0; i < 2; i++)
        if (drop[i])
            hak_span_desc_free(drop[i]);
    if (unmap)
        unmap_chunk(span);
}

/* Moves the arena's spares to spare[], under its lock; returns how many. */
static uint32_t take_spares(struct page_arena *arena, uintptr_t spare[CHUNK_BATCH_MAX - 1])
{
    uint32_t spares = arena->spare_count;
    memcpy(spare, arena->spare, spares * sizeof(spare[0]));
    arena->spare_count = 0;
    return spares;
}

/* No memory of theirs is resident: address space alone. */
static void unmap_spares(const uintptr_t *spare, uint32_t spares)
{
    for (uint32_t i = 0; i < spares; i++)
        hak_os_unmap((void *)(spare[i] & ~(uintptr_t)SPARE_BOUND), HAK_ARENA_CHUNK_SIZE);
}

size_t hak_page_arena_release_free(unsigned node)
{
    struct page_arena *arena = &arenas[node];
    struct hak_slab *whole = NULL;
    size_t bytes = 0;
    pthread_mutex_lock(lock_of(arena));
    struct hak_slab *span;
    while ((span = arena->bins.by_pages[HAK_ARENA_USABLE_PAGES])) {
        bin_remove(arena, span);
        span->next = whole;
        whole = span;
        bytes += HAK_ARENA_CHUNK_SIZE;
    }
    arena->free_chunks = 0;
    uintptr_t spare[CHUNK_BATCH_MAX - 1];
    uint32_t spares = take_spares(arena, spare);
    pthread_mutex_unlock(lock_of(arena));
    unmap_spares(spare, spares);
    bytes += (size_t)spares * HAK_ARENA_CHUNK_SIZE;
    while (whole) {
        span = whole;
        whole = span->next;
        unmap_chunk(span);
    }
    return bytes;
}

void hak_page_arena_release_spares(void)
{
    for (unsigned node = 0; node < HAK_MAX_NODES; node++) {
        struct page_arena *arena = &arenas[node];
        uintptr_t spare[CHUNK_BATCH_MAX - 1];
        pthread_mutex_lock(lock_of(arena));
        uint32_t spares = take_spares(arena, spare);
        pthread_mutex_unlock(lock_of(arena));
        unmap_spares(spare, spares);
    }
}

void hak_page_arena_lock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        pthread_mutex_lock(&hak_fork_locks.node[i].page_arena.mutex);
}

void hak_page_arena_unlock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        pthread_mutex_unlock(&hak_fork_locks.node[i].page_arena.mutex);
}

/* How much a thread's cache takes from its slabs at a refill: a page's
 * worth of blocks at first (one block of a class bigger than a page), so
 * that a short process does not touch pages it never uses, doubling with
 * every refill up to the full batch, so that a busy class refills rarely.
 *
 * A slab's free list that leaves the cache room for half its size moves
 * into it whole, and the refill reads no block but the one it hands out:
 * the others' pages are made unreadable, and the malloc still succeeds.
 * So does a list shorter than the batch, alone, and a longer one, the
 * cache lent room for it: the links of its blocks but the first are made
 * to fail the check meanwhile.  A cache of one block keeps room for a
 * free after a refill too. */
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "block/block_link.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "harden.h"
#include "options.h"
#include "unit.h"

enum { ROUNDS = 3, BLOCKS = 60 };

static uint32_t cached(unsigned cls)
{
    struct hak_heap *heap = hak_tls.heap;
    return heap->limit[cls] - hak_tls.room[cls];
}

static void check_class(size_t size)
{
    unsigned cls = hak_class_of(size);
    char name[4];
    hak_class_name(cls, name);
    uint32_t block = hak_class_size[cls];
    uint32_t page_worth = block >= HAK_PAGE_SIZE ? 1 : (uint32_t)(HAK_PAGE_SIZE / block);

    void *first = malloc(size);
    if (!first)
        hard_error("malloc(%zu) failed", size);
    CHECK(cached(cls) <= page_worth,
          "%s: the first refill cached %u blocks, more than the %u of a page's worth", name,
          cached(cls), page_worth);
    /* Blocks over 32 KiB come one at a time: a refill writes to every
     * block it caches. */
    CHECK(cached(cls) > 0 || block > 32768,
          "%s: the first refill cached nothing: every malloc would refill", name);
    free(first);

    struct hak_class_stats before[HAK_NUM_CLASSES] = {0}, after[HAK_NUM_CLASSES] = {0};
    hak_heap_sum_stats(before);
    static void *blocks[BLOCKS];
    for (int round = 0; round < ROUNDS; round++)
        unit_malloc_free_batch(blocks, BLOCKS, size);
    hak_heap_sum_stats(after);
    uint64_t allocs = after[cls].allocs - before[cls].allocs;
    uint64_t refills = after[cls].refills - before[cls].refills;
    /* With the full batch (half the cache, at most 32 KiB) and the frees
     * refilling the cache, a quarter of the mallocs is a generous bound. */
    uint32_t limit = hak_tls.heap->limit[cls];
    if (limit >= 4 && block <= 8192)
        CHECK(refills * 4 <= allocs, "%s: %llu refills for %llu mallocs of %zu B", name,
              (unsigned long long)refills, (unsigned long long)allocs, size);
    printf("  %-4s %6u B: first refill cached %u, then %llu refills for %llu mallocs\n", name,
           block, page_worth < cached(cls) ? page_worth : cached(cls), (unsigned long long)refills,
           (unsigned long long)allocs);
}

/* The small caches of one thread hold 8 MiB of blocks at most. */
#define THREAD_CACHE_BOUND (8u << 20)

static uint64_t small_cache_bytes(void)
{
    uint64_t bytes = 0;
    for (unsigned cls = 0; cls < HAK_SMALL_CLASSES; cls++)
        bytes += (uint64_t)hak_tls.heap->limit[cls] * hak_class_size[cls];
    return bytes;
}

/* A program that allocates batches and frees them (glibc's malloc
 * benchmark, a C++ program tearing down a map): the class's cache grows
 * until a batch fits, so that the frees stop flushing, and the caches
 * together stay within the thread's bound. */
static void check_batches_fit(size_t size, uint32_t batch)
{
    unsigned cls = hak_class_of(size);
    char name[4];
    hak_class_name(cls, name);
    static void *blocks[4096];
    struct hak_class_stats before[HAK_NUM_CLASSES] = {0}, after[HAK_NUM_CLASSES] = {0};
    for (int round = 0; round < 40; round++) {
        if (round == 20)
            hak_heap_sum_stats(before);
        unit_malloc_free_batch(blocks, batch, size);
        CHECK(small_cache_bytes() <= THREAD_CACHE_BOUND,
              "%s: the small caches may hold %llu bytes, over the thread's bound", name,
              (unsigned long long)small_cache_bytes());
    }
    hak_heap_sum_stats(after);
    uint64_t flushes = after[cls].flushes - before[cls].flushes;
    CHECK(flushes == 0, "%s: batches of %u blocks still flushed %llu times after 20 rounds", name,
          batch, (unsigned long long)flushes);
    printf("  %-4s %6u B: batches of %u fit, %u blocks cached at most\n", name, hak_class_size[cls],
           batch, hak_tls.heap->limit[cls]);
}

static uintptr_t page_of(const void *ptr)
{
    return (uintptr_t)ptr & ~(uintptr_t)(HAK_PAGE_SIZE - 1);
}

/* A Mid class of a few blocks a slab, and a small class whose 64 blocks a
 * slab fill its first cache. */
enum { LIST_SIZE = 2048, LONG_LIST_SIZE = 1024, LIST_MAX_BLOCKS = 128 };

/* The pages of blocks[1..count) but the first block's get prot. */
static void protect_others(void *const *blocks, uint32_t count, int prot)
{
    for (uint32_t i = 1; i < count; i++)
        if (page_of(blocks[i]) != page_of(blocks[0]) &&
            mprotect((void *)page_of(blocks[i]), HAK_PAGE_SIZE, prot) != 0)
            hard_error("mprotect failed");
}

/* The calling thread stays on its CPU, so that no malloc leaves for the
 * refill on a move. */
static void pin_to_cpu(void)
{
    cpu_set_t cpu;
    CPU_ZERO(&cpu);
    CPU_SET(sched_getcpu(), &cpu);
    if (sched_setaffinity(0, sizeof cpu, &cpu) != 0)
        hard_error("sched_setaffinity failed");
    void *volatile first = malloc(64); /* the heap, and topology discovery if any, first */
    free(first);
}

/* Blocks of size into blocks[] until the refills have carved at least
 * least + 1 blocks of the current slab and none is cached; how many. */
static uint32_t carve_at_least(void **blocks, size_t size, uint32_t least)
{
    unsigned cls = hak_class_of(size);
    struct hak_heap *heap = hak_tls.heap;
    uint32_t count = 0;
    uint32_t carved = 0;
    while (count == 0 || cached(cls) != 0 || carved - 1 < least) {
        if (count == LIST_MAX_BLOCKS)
            hard_error("no refill of %zu B left the cache empty", size);
        if (!(blocks[count++] = malloc(size)))
            hard_error("malloc(%zu) failed", size);
        struct hak_slab *slab = heap->cur[cls];
        carved = (uint32_t)(slab->carve - slab->start) / slab->block_size;
    }
    return count;
}

/* In a thread of its own, pinned to its CPU, so that the class starts
 * with a fresh slab and small batches: blocks are allocated until the
 * refills have carved more than the batch (over_half: more than half the
 * cache, of LONG_LIST_SIZE) besides the one block kept, with none cached.
 * All but that one go back to the slab (malloc_trim empties the cache),
 * the first last, so that the slab's free list starts with it; the pages
 * of the others are made unreadable (blocks carved and never handed out
 * lie past them, on the list's end).  A slab that also holds blocks of
 * the thread's start-up (hwloc's, on a machine with several nodes) may not
 * fit the case: then it is skipped, said so. */
static void *refill_reads_one_block(void *over_half)
{
    pin_to_cpu();
    void *blocks[LIST_MAX_BLOCKS];
    size_t size = over_half ? LONG_LIST_SIZE : LIST_SIZE;
    unsigned cls = hak_class_of(size);
    struct hak_heap *heap = hak_tls.heap;
    uint32_t least = over_half ? heap->limit[cls] / 2 + 1 : heap->batch[cls] + 1;
    uint32_t most = over_half ? heap->limit[cls] : heap->limit[cls] / 2;
    uint32_t count = carve_at_least(blocks, size, least);
    /* The one kept shares the first block's page, which stays readable. */
    uint32_t kept = 0;
    while (++kept < count && page_of(blocks[kept]) != page_of(blocks[0]))
        ;
    if (kept == count)
        hard_error("no block shares the first block's page");
    for (uint32_t i = count; i-- > 0;)
        if (i != kept)
            free(blocks[i]);
    hak_heap_trim();
    struct hak_slab *slab = heap->cur[cls];
    uint32_t listed = hak_slab_listed(slab);
    if (cached(cls) != 0 || slab->free != blocks[0] || listed < heap->batch[cls] + 1 ||
        listed < least || listed > most) {
        printf("  skipped: the slab's free list of %u blocks does not fit the case\n", listed);
        free(blocks[kept]);
        return NULL;
    }
    protect_others(blocks, count, PROT_NONE);
    void *again = malloc(size); /* faults here if the refill walks the list */
    protect_others(blocks, count, PROT_READ | PROT_WRITE);
    CHECK(again == blocks[0], "the refill handed out %p, not the list's first block %p", again,
          blocks[0]);
    CHECK(cached(cls) == listed - 1, "the refill cached %u blocks of the %u on the slab's list",
          cached(cls), listed);
    printf("  a refill took a free list of %u blocks whole (cache of %u), reading one\n", listed,
           heap->limit[cls]);
    free(again);
    free(blocks[kept]);
    return NULL;
}

/* count blocks of size into blocks[]. */
static void malloc_blocks(void **blocks, uint32_t count, size_t size)
{
    for (uint32_t i = 0; i < count; i++)
        if (!(blocks[i] = malloc(size)))
            hard_error("malloc(%zu) failed", size);
}

/* Frees up to most of blocks[0..count) that lie in slab, NULL in blocks[]
 * from then on, and sends them back to it (malloc_trim, which also empties
 * the caches); how many. */
static uint32_t return_to_slab(const struct hak_slab *slab, void **blocks, uint32_t count,
                               uint32_t most)
{
    uint32_t returned = 0;
    for (uint32_t i = 0; i < count && returned < most; i++)
        if ((char *)blocks[i] >= slab->start && (char *)blocks[i] < slab->end) {
            free(blocks[i]);
            blocks[i] = NULL;
            returned++;
        }
    hak_heap_trim();
    return returned;
}

enum { MOST_LISTED = 512 };

/* malloc(size), whose refill is to take slab's free list whole, reading
 * the link of its first block only: the links of the others are made to
 * fail the check until it returns, so that a refill that walks the list
 * aborts.  list: the list's blocks, in order, *count of them. */
static void *malloc_reading_one_link(size_t size, const struct hak_slab *slab, void **list,
                                     uint32_t *count)
{
    static uintptr_t links[MOST_LISTED];
    uint32_t n = 0;
    for (void *block = slab->free; block; block = hak_link_get(block)) {
        if (n == MOST_LISTED)
            hard_error("a free list of more than %d blocks", MOST_LISTED);
        list[n++] = block;
    }
    for (uint32_t i = 1; i < n; i++) {
        links[i] = *(uintptr_t *)list[i];
        *(uintptr_t *)list[i] = links[i] ^ 1; /* decodes as corrupted */
    }
    void *block = malloc(size);
    for (uint32_t i = 1; i < n; i++)
        *(uintptr_t *)list[i] = links[i];
    *count = n;
    return block;
}

/* In a thread of its own, pinned: once the batches have grown, two blocks
 * of the current slab go back to it, a list shorter than the batch.  The
 * refill takes it alone, whole, and hands out its first block: the links
 * of the others, made to fail the check, are never read. */
static void *short_list_taken_alone(void *unused)
{
    (void)unused;
    pin_to_cpu();
    void *blocks[LIST_MAX_BLOCKS];
    unsigned cls = hak_class_of(LIST_SIZE);
    struct hak_heap *heap = hak_tls.heap;
    /* Past the first refills, whose batches are smaller than the list. */
    uint32_t count = carve_at_least(blocks, LIST_SIZE, 16);
    struct hak_slab *slab = heap->cur[cls];
    uint32_t returned = return_to_slab(slab, blocks, count, 2);
    uint32_t listed = hak_slab_listed(slab);
    uint32_t batch = heap->batch[cls];
    if (returned != 2 || heap->cur[cls] != slab || cached(cls) != 0 || listed < 2 ||
        listed > batch) {
        printf("  skipped: a free list of %u blocks, batches of %u, does not fit the case\n",
               listed, batch);
    } else {
        static void *list[MOST_LISTED];
        uint32_t n;
        void *block = malloc_reading_one_link(LIST_SIZE, slab, list, &n);
        CHECK(block == list[0] && cached(cls) == n - 1,
              "the refill handed out %p, not the list's first %p, and cached %u blocks of its %u",
              block, list[0], cached(cls), n);
        uint32_t at = 1;
        for (void *next = hak_list_or_null(hak_tls.head[cls]); next && at < n;
             next = hak_link_get(next), at++)
            CHECK(next == list[at], "the cache's block %u is %p, not the list's %p", at, next,
                  list[at]);
        printf("  a refill took a free list of %u blocks whole, batches of %u\n", n, batch);
        free(block);
    }
    for (uint32_t i = 0; i < count; i++)
        free(blocks[i]);
    return NULL;
}

enum { LONG_SIZE = 128, LONG_ALLOCATED = 400, LONG_FREED = 300 };

/* In a thread of its own, pinned: LONG_ALLOCATED blocks of LONG_SIZE, of
 * one slab, then LONG_FREED of them back to it (malloc_trim empties the
 * cache and gives it its first size), a list longer than the cache.  The
 * next refill takes it whole, the links of its blocks but the first made
 * to fail the check meanwhile, the cache lent room for it and for half
 * its own size more, so that the frees after find room.  The lent room
 * goes back at the refill after (flush: false); or (flush: true) the
 * first flush, once those frees have filled the cache, keeps the cache at
 * twice its own size, as a class that refills and flushes in turn grows,
 * and half of that cached. */
static void *long_list_taken_whole(void *flush)
{
    pin_to_cpu();
    static void *blocks[LONG_ALLOCATED];
    unsigned cls = hak_class_of(LONG_SIZE);
    struct hak_heap *heap = hak_tls.heap;
    malloc_blocks(blocks, LONG_ALLOCATED, LONG_SIZE);
    struct hak_slab *slab = heap->cur[cls];
    uint32_t returned = return_to_slab(slab, blocks, LONG_ALLOCATED, LONG_FREED);
    uint32_t listed = hak_slab_listed(slab);
    uint32_t limit = heap->limit[cls];
    uint64_t bytes = heap->small_cache_bytes;
    if (returned != LONG_FREED || heap->cur[cls] != slab || cached(cls) != 0 || listed <= limit)
        hard_error("%u blocks freed to the current slab, a list of %u, a cache of %u holding %u",
                   returned, listed, limit, cached(cls));
    static void *list[MOST_LISTED];
    uint32_t n;
    void *first = malloc_reading_one_link(LONG_SIZE, slab, list, &n);
    CHECK(first == list[0] && cached(cls) == n - 1 && heap->limit[cls] == n - 1 + limit / 2,
          "a refill from a list of %u handed out %p (the list's first: %p), cached %u, the "
          "cache of %u now %u",
          n, first, list[0], cached(cls), limit, heap->limit[cls]);
    if (flush) {
        uint64_t flushes = heap->stats[cls].flushes;
        free(first);
        CHECK(heap->stats[cls].flushes == flushes && cached(cls) == n,
              "a free right after the refill flushed (%llu flushes), the cache holding %u",
              (unsigned long long)(heap->stats[cls].flushes - flushes), cached(cls));
        uint32_t freed = 1;
        for (uint32_t i = 0; i < LONG_ALLOCATED && heap->stats[cls].flushes == flushes; i++)
            if (blocks[i]) {
                free(blocks[i]);
                blocks[i] = NULL;
                freed++;
            }
        CHECK(freed == limit / 2 && heap->limit[cls] == 2 * limit && heap->lent[cls] == 0 &&
                  cached(cls) == limit,
              "%u frees after the refill flushed, leaving a cache of %u (its own %u) holding %u, "
              "%u of it lent",
              freed, heap->limit[cls], limit, cached(cls), heap->lent[cls]);
        printf("  a refill took a list of %u whole; %u frees on, the flush grew the cache to %u\n",
               n, freed, heap->limit[cls]);
    } else {
        for (uint32_t i = 1; i < n; i++)
            list[i] = malloc(LONG_SIZE);
        list[0] = first;
        void *after = malloc(LONG_SIZE);
        CHECK(heap->limit[cls] == limit && heap->lent[cls] == 0 && heap->small_cache_bytes == bytes,
              "the refill after left a cache of %u (its own %u), %u lent, %llu bytes of small "
              "caches (%llu before)",
              heap->limit[cls], limit, heap->lent[cls], (unsigned long long)heap->small_cache_bytes,
              (unsigned long long)bytes);
        printf("  a refill took a list of %u whole; the refill after gave the cache its %u\n", n,
               limit);
        free(after);
        for (uint32_t i = 0; i < n; i++)
            free(list[i]);
    }
    for (uint32_t i = 0; i < LONG_ALLOCATED; i++)
        free(blocks[i]);
    return NULL;
}

/* In a thread of its own, whose small caches hold one block each
 * (HAKMEM_SMALL_CACHE=1): a slab's list of several blocks is taken whole,
 * the cache lent room for it, and a free right after still finds room:
 * room counted down from 0 would never reach it again, and the cache
 * would never flush. */
static void *one_block_cache(void *unused)
{
    (void)unused;
    pin_to_cpu();
    enum { ONE_ALLOCATED = 40, ONE_FREED = 8 };
    void *blocks[ONE_ALLOCATED];
    unsigned cls = hak_class_of(LONG_SIZE);
    struct hak_heap *heap = hak_tls.heap;
    malloc_blocks(blocks, ONE_ALLOCATED, LONG_SIZE);
    struct hak_slab *slab = heap->cur[cls];
    uint32_t returned = return_to_slab(slab, blocks, ONE_ALLOCATED, ONE_FREED);
    uint32_t listed = hak_slab_listed(slab);
    if (heap->limit[cls] != 1 || returned != ONE_FREED || listed < 2)
        hard_error("a cache of %u blocks, %u freed, a list of %u", heap->limit[cls], returned,
                   listed);
    static void *list[MOST_LISTED];
    uint32_t n;
    void *block = malloc_reading_one_link(LONG_SIZE, slab, list, &n);
    CHECK(block == list[0] && cached(cls) == n - 1 && hak_tls.room[cls] == 1,
          "a cache of one block took %u of a list of %u, its room %u", cached(cls) + 1, n,
          hak_tls.room[cls]);
    uint64_t flushes = heap->stats[cls].flushes;
    free(block);
    CHECK(hak_tls.room[cls] >= 1 && heap->stats[cls].flushes == flushes + 1,
          "the free after left room %u, %llu flushes", hak_tls.room[cls],
          (unsigned long long)(heap->stats[cls].flushes - flushes));
    for (uint32_t i = 0; i < ONE_ALLOCATED; i++)
        free(blocks[i]);
    return NULL;
}

/* A cache's head is HAK_LIST_END when it holds no block, never NULL:
 * malloc's fast path loads the head's link with no test of the head, and
 * leaves for the refill on the end's link, which decodes as corrupted.  In
 * a thread of its own, whose TLS starts from the image. */
static void *empty_caches_end_the_list(void *unused)
{
    (void)unused;
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
        CHECK(hak_tls.head[cls] == HAK_LIST_END, "a new thread's cache %u starts at %p", cls,
              hak_tls.head[cls]);
    CHECK(hak_link_corrupted(hak_list_end.words[0] ^ hak_link_keys.link) &&
              hak_link_corrupted(hak_list_end.words[0]),
          "the list end's link decodes as a block under the key or under level 0's");

    unsigned cls = hak_class_of(100);
    void *blocks[LIST_MAX_BLOCKS];
    blocks[0] = unit_malloc(100);
    uint32_t count = 1;
    while (cached(cls) != 0 && count < LIST_MAX_BLOCKS)
        blocks[count++] = unit_malloc(100);
    CHECK(cached(cls) == 0 && hak_tls.head[cls] == HAK_LIST_END,
          "after %u mallocs the cache holds %u blocks, its head %p", count, cached(cls),
          hak_tls.head[cls]);
    struct hak_class_stats before[HAK_NUM_CLASSES] = {0}, after[HAK_NUM_CLASSES] = {0};
    hak_heap_sum_stats(before);
    void *refilled = unit_malloc(100);
    hak_heap_sum_stats(after);
    CHECK(refilled && after[cls].refills == before[cls].refills + 1,
          "the malloc from an empty cache gave %p after %llu refills", refilled,
          (unsigned long long)(after[cls].refills - before[cls].refills));
    free(refilled);
    for (uint32_t i = 0; i < count; i++)
        free(blocks[i]);
    hak_heap_trim();
    for (unsigned c = 0; c < HAK_NUM_CLASSES; c++)
        CHECK(hak_tls.head[c] == HAK_LIST_END, "after malloc_trim the cache %u starts at %p", c,
              hak_tls.head[c]);
    return NULL;
}

int main(void)
{
    unit_watchdog();
    static const size_t sizes[] = {16, 100, 768, 1024, 3000, 8192, 16384, 32768, 100000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        check_class(sizes[i]);
    /* Bigger than the first caches (64 blocks), within 2 MiB a class. */
    check_batches_fit(16, 4000);
    check_batches_fit(64, 3000);
    check_batches_fit(128, 2500);
    check_batches_fit(1024, 400);
    unit_thread_run(empty_caches_end_the_list, NULL);
    if (!hak_harden.checked) { /* checked mode refills one block at a time */
        unit_thread_run(refill_reads_one_block, NULL);
        unit_thread_run(refill_reads_one_block, (void *)1);
        unit_thread_run(short_list_taken_alone, NULL);
        unit_thread_run(long_list_taken_whole, NULL);
        unit_thread_run(long_list_taken_whole, (void *)1);
        uint32_t small_cache = hak_options.small_cache;
        hak_options.small_cache = 1;
        unit_thread_run(one_block_cache, NULL);
        hak_options.small_cache = small_cache;
    }
    return test_result("test_refill");
}

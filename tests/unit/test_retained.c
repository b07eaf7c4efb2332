/* What malloc_trim asks of the large cache and the shared pool: the large
 * cache unmaps every mapping it keeps, and counts them while it keeps them;
 * the shared pool decommits the pages its free slabs used (they read as
 * zeros, and count as fresh again), leaves slabs in use alone, and has
 * nothing more to give a second time; SuperSlabs that empty stay as they
 * were, for the next slabs, until they have been free for the decay time
 * (outside the SuperSlab region, a few of them: the others are unmapped);
 * in the region they then stay mapped with their pages given back, for the
 * slabs after the spares'.  The test runs again under an address-space limit, where there is
 * no region.  The large-block gauges that mallinfo reads follow blocks out
 * and back.  A SuperSlab or large block mapped anew first lets go of the
 * HotSpanBox's stale spans, as a retired SuperSlab taken again does, and
 * a span of the PageArena or a large block of the shared pool's stale
 * spares, whose look passes the pool's lock while none is stale. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "arena/hot_span_box.h"
#include "arena/large.h"
#include "arena/page_arena.h"
#include "arena/page_map.h"
#include "arena/shared_pool.h"
#include "arena/superslab.h"
#include "options.h"
#include "os.h"
#include "stats.h"
#include "unit.h"

#define SLAB_TOUCHED 16

static void *large_alloc(size_t size)
{
    void *block = hak_large_alloc(size, HAK_PAGE_SIZE, 0, false);
    if (!block)
        hard_error("hak_large_alloc(%zu) failed", size);
    memset(block, 1, size);
    return block;
}

static void large_free(void *block)
{
    hak_large_free((struct hak_large *)hak_page_map_lookup(block), block);
}

static void test_large_cache(void)
{
    uint64_t live = hak_stat_read(HAK_STAT_LARGE_LIVE);
    uint64_t usable = hak_stat_read(HAK_STAT_LARGE_LIVE_USABLE);
    void *a = large_alloc(2 * MiB);
    void *b = large_alloc(3 * MiB);
    CHECK(hak_stat_read(HAK_STAT_LARGE_LIVE) == live + 2 &&
              hak_stat_read(HAK_STAT_LARGE_LIVE_USABLE) >= usable + 5 * MiB,
          "two large blocks out: the gauges say %llu blocks, %llu bytes",
          (unsigned long long)(hak_stat_read(HAK_STAT_LARGE_LIVE) - live),
          (unsigned long long)(hak_stat_read(HAK_STAT_LARGE_LIVE_USABLE) - usable));
    large_free(a);
    large_free(b);
    CHECK(hak_stat_read(HAK_STAT_LARGE_LIVE) == live &&
              hak_stat_read(HAK_STAT_LARGE_LIVE_USABLE) == usable,
          "the large-block gauges did not come back after the frees");
    uint64_t count = 0;
    size_t cached = hak_large_cached(0, &count);
    CHECK(count == 2 && cached >= 5 * MiB, "the cache keeps %llu mappings, %zu bytes",
          (unsigned long long)count, cached);
    CHECK(hak_page_map_lookup(a) && hak_page_map_lookup(b), "cached mappings left the page map");
    size_t released = hak_large_release_cached(0);
    CHECK(released == cached, "release_cached gave back %zu bytes of %zu", released, cached);
    CHECK(!hak_page_map_lookup(a) && !hak_page_map_lookup(b),
          "released mappings are still in the page map");
    count = 0;
    CHECK(hak_large_cached(0, &count) == 0 && count == 0, "the cache still keeps mappings");
    CHECK(hak_large_release_cached(0) == 0, "an empty cache released memory");
}

static struct hak_slab *take_slab(void)
{
    struct hak_slab *slab = hak_shared_pool_take(0);
    if (!slab)
        hard_error("hak_shared_pool_take(0) failed");
    return slab;
}

/* As carving would: the first pages written, and counted as touched. */
static void touch(struct hak_slab *slab, uint64_t seed)
{
    fill_pattern(slab->start, SLAB_TOUCHED * HAK_PAGE_SIZE, seed);
    slab->touched_pages = SLAB_TOUCHED;
}

static void test_shared_pool(void)
{
    /* Two slabs of one SuperSlab: the one kept in use keeps it mapped. */
    struct hak_slab *kept = take_slab();
    struct hak_slab *dirty = take_slab();
    struct hak_slab *other = NULL;
    if (dirty->chunk != kept->chunk) {
        other = kept;
        kept = dirty;
        dirty = take_slab();
    }
    if (dirty->chunk != kept->chunk)
        hard_error("two slabs taken in a row are in different SuperSlabs");
    touch(kept, 31);
    touch(dirty, 32);
    char *start = dirty->start;
    hak_shared_pool_give(dirty);
    size_t released = hak_shared_pool_release(0);
    CHECK(released >= SLAB_TOUCHED * HAK_PAGE_SIZE,
          "the pool released %zu bytes, not the %u pages of a free slab", released, SLAB_TOUCHED);
    CHECK(nonzero_offset(start, SLAB_TOUCHED * HAK_PAGE_SIZE) == PATTERN_INTACT,
          "the free slab's pages were not decommitted");
    CHECK(dirty->touched_pages == 0, "a decommitted slab still counts %u touched pages",
          dirty->touched_pages);
    CHECK(pattern_mismatch(kept->start, SLAB_TOUCHED * HAK_PAGE_SIZE, 31) == PATTERN_INTACT,
          "the release touched a slab in use");
    CHECK(hak_shared_pool_release(0) == 0, "the pool released memory a second time");
    hak_shared_pool_give(kept);
    if (other)
        hak_shared_pool_give(other);
}

#define SPARES_KEPT 4
#define SLABS_PER_SS (HAK_SLABS_PER_SUPERSLAB - HAK_SUPERSLAB_HEADER_SLABS)

/* The SuperSlabs the last cycle used, read while they were mapped. */
static const void *chunks[SPARES_KEPT + 2];
static unsigned chunk_count;

/* Takes count SuperSlabs' worth of slabs, writes them, and gives them all
 * back. */
static void cycle_superslabs(unsigned count)
{
    static struct hak_slab *slabs[(SPARES_KEPT + 2) * SLABS_PER_SS];
    chunk_count = 0;
    for (unsigned i = 0; i < count * SLABS_PER_SS; i++) {
        slabs[i] = take_slab();
        touch(slabs[i], i);
        unsigned c = 0;
        while (c < chunk_count && chunks[c] != slabs[i]->chunk)
            c++;
        if (c == chunk_count && chunk_count < count)
            chunks[chunk_count++] = slabs[i]->chunk;
    }
    for (unsigned i = 0; i < count * SLABS_PER_SS; i++)
        hak_shared_pool_give(slabs[i]);
}

static unsigned mapped_chunks(void)
{
    unsigned mapped = 0;
    for (unsigned c = 0; c < chunk_count; c++)
        mapped += hak_page_map_lookup(chunks[c]) != NULL;
    return mapped;
}

/* How many of the last cycle's SuperSlabs lie in the region. */
static unsigned region_chunks(void)
{
    unsigned in_region = 0;
    for (unsigned c = 0; c < chunk_count; c++)
        in_region += hak_superslab_region_holds(chunks[c]);
    return in_region;
}

/* Whether every slab of the last cycle's SuperSlab c reads as zeros. */
static bool chunk_decommitted(unsigned c)
{
    for (unsigned i = HAK_SUPERSLAB_HEADER_SLABS; i < HAK_SLABS_PER_SUPERSLAB; i++)
        if (nonzero_offset((const char *)chunks[c] + i * HAK_SLAB_SIZE,
                           SLAB_TOUCHED * HAK_PAGE_SIZE) != PATTERN_INTACT)
            return false;
    return true;
}

/* The same of all of them. */
static bool chunks_decommitted(void)
{
    for (unsigned c = 0; c < chunk_count; c++)
        if (!chunk_decommitted(c))
            return false;
    return true;
}

/* Spares leave once free for the decay time: those emptied before, as a
 * SuperSlab empties (four at most there), and the rest at the next look
 * for aged ones (hak_shared_pool_release_aged, which the heaps' idle look
 * calls).  A slab comes from the newest spare, its pages as they were left,
 * before any retired SuperSlab.  region: whether there is one, where a
 * spare that leaves keeps its mapping but not its pages. */
static void test_spares_age(bool region)
{
    size_t spare_bytes = region ? SLABS_PER_SS * SLAB_TOUCHED * HAK_PAGE_SIZE : HAK_SUPERSLAB_SIZE;
    uint64_t decay_ms = hak_options.decay_ms;
    hak_options.decay_ms = 0;
    cycle_superslabs(2);
    CHECK(hak_shared_pool_release(0) == spare_bytes,
          "with no decay time, other than the last emptied SuperSlab stayed a spare");
    cycle_superslabs(2);
    hak_shared_pool_release_aged(0);
    if (region)
        CHECK(chunks_decommitted(), "an aged spare kept its pages after the look for aged ones");
    else
        CHECK(mapped_chunks() == 0, "an aged spare stayed mapped after the look for aged ones");
    CHECK(hak_shared_pool_release(0) == 0, "spares left after the look for aged ones");

    hak_options.decay_ms = 60 * 1000;
    cycle_superslabs(2);
    struct hak_slab *slab = take_slab();
    CHECK(slab->chunk == chunks[1], "a slab came from other than the spare emptied last");
    CHECK(nonzero_offset(slab->start, SLAB_TOUCHED * HAK_PAGE_SIZE) != PATTERN_INTACT,
          "a slab taken while spares were kept had lost its pages");
    hak_shared_pool_give(slab);
    hak_shared_pool_release(0);

    if (region) {
        cycle_superslabs(SPARES_KEPT + 2);
        hak_options.decay_ms = 0;
        cycle_superslabs(1); /* the newest spare's slabs, then it empties again */
        CHECK(hak_shared_pool_release(0) == 2 * spare_bytes,
              "a SuperSlab that emptied retired other than four of the five aged spares");
    }
    hak_options.decay_ms = decay_ms;
}

static void test_spare_superslabs(bool region)
{
    hak_shared_pool_release(0);
    cycle_superslabs(3);
    CHECK(chunk_count == 3 && mapped_chunks() == 3, "%u of %u emptied SuperSlabs stay mapped",
          mapped_chunks(), chunk_count);
    CHECK(region_chunks() == (region ? chunk_count : 0), "%u of %u SuperSlabs in the region%s",
          region_chunks(), chunk_count, region ? "" : ", which is not there");
    uint64_t created = hak_stat_read(HAK_STAT_SUPERSLABS);
    cycle_superslabs(3);
    CHECK(hak_stat_read(HAK_STAT_SUPERSLABS) == created,
          "%llu SuperSlabs mapped anew for slabs the spares had",
          (unsigned long long)(hak_stat_read(HAK_STAT_SUPERSLABS) - created));
    cycle_superslabs(SPARES_KEPT + 2);
    size_t spare_bytes =
        SPARES_KEPT * (region ? SLABS_PER_SS * SLAB_TOUCHED * HAK_PAGE_SIZE : HAK_SUPERSLAB_SIZE);
    if (region) {
        /* In the region every SuperSlab that empties stays as it was until
         * it has been free for the decay time, however many there are; the
         * release gives back all their pages, and the next slabs come from
         * them before any SuperSlab is made. */
        size_t all_bytes = (SPARES_KEPT + 2) * SLABS_PER_SS * SLAB_TOUCHED * HAK_PAGE_SIZE;
        CHECK(chunk_count == SPARES_KEPT + 2 && mapped_chunks() == chunk_count,
              "%u of %u emptied SuperSlabs in the region stay mapped", mapped_chunks(),
              chunk_count);
        created = hak_stat_read(HAK_STAT_SUPERSLABS);
        size_t released = hak_shared_pool_release(0);
        CHECK(released == all_bytes, "malloc_trim's release gave back %zu bytes, not %zu", released,
              all_bytes);
        CHECK(chunks_decommitted(), "a retired SuperSlab's slabs still hold their pages");
        cycle_superslabs(SPARES_KEPT + 2);
        CHECK(hak_stat_read(HAK_STAT_SUPERSLABS) == created,
              "%llu SuperSlabs made while retired ones had free slabs",
              (unsigned long long)(hak_stat_read(HAK_STAT_SUPERSLABS) - created));
        CHECK(hak_shared_pool_release(0) == all_bytes,
              "malloc_trim's second release gave back other than the spares' pages");
        CHECK(chunks_decommitted(), "the second cycle's slabs still hold their pages");
        CHECK(mapped_chunks() == chunk_count, "a SuperSlab in the region was unmapped");
    } else {
        CHECK(chunk_count == SPARES_KEPT + 2 && mapped_chunks() == SPARES_KEPT,
              "%u of %u emptied SuperSlabs stay mapped, not %u", mapped_chunks(), chunk_count,
              SPARES_KEPT);
        CHECK(hak_shared_pool_release(0) == spare_bytes,
              "malloc_trim's release did not unmap the spares");
        CHECK(mapped_chunks() == 0, "spares still mapped after the release");
    }
}

/* A SuperSlab or large block mapped anew first lets go of the node's hot
 * spans that sat idle for a sixty-fourth of the decay: freed Mid and L25 memory
 * that nothing took again, which would add to the footprint of the growth.
 * The spans freed since stay. */
static void test_growth_releases_stale_spans(bool region)
{
    enum { STALE_MS = 5000, PAGES = 4 };
    uint64_t decay_ms = hak_options.decay_ms;
    size_t hot_bytes = hak_options.hot_bytes;
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * STALE_MS;
    hak_options.hot_bytes = 64u << 20;
    hak_shared_pool_release(0); /* no spares: the next SuperSlab is mapped */
    struct hak_slab *stale = hak_page_arena_alloc(0, PAGES);
    struct hak_slab *fence = hak_page_arena_alloc(0, 1); /* or the two would merge */
    struct hak_slab *young = hak_page_arena_alloc(0, PAGES);
    if (!stale || !fence || !young)
        hard_error("hak_page_arena_alloc(0, %d) failed", PAGES);
    hak_hot_span_put(stale);
    hak_hot_span_put(young);
    unit_age_hot_span(stale, 2 * STALE_MS);
    uint64_t count = 0;
    CHECK(hak_hot_span_retained(0, &count) == 2 * PAGES * HAK_PAGE_SIZE,
          "the box holds %llu spans, not the two put", (unsigned long long)count);

    /* Free slabs of SuperSlabs the region keeps come first. */
    static struct hak_slab *slabs[(SPARES_KEPT + 3) * SLABS_PER_SS];
    uint64_t created = hak_stat_read(HAK_STAT_SUPERSLABS);
    unsigned taken = 0;
    while (hak_stat_read(HAK_STAT_SUPERSLABS) == created &&
           taken < sizeof(slabs) / sizeof(slabs[0]))
        slabs[taken++] = take_slab();
    CHECK(hak_stat_read(HAK_STAT_SUPERSLABS) > created, "%u slabs taken, no SuperSlab mapped",
          taken);
    count = 0;
    size_t held = hak_hot_span_retained(0, &count);
    CHECK(count == 1 && held == PAGES * HAK_PAGE_SIZE,
          "after the growth the box holds %llu spans, %zu bytes: not the young one alone",
          (unsigned long long)count, held);
    for (unsigned i = 0; i < taken; i++)
        hak_shared_pool_give(slabs[i]);

    /* A large block mapped anew, the same. */
    hak_large_release_cached(0); /* nothing cached: the block is mapped */
    unit_age_hot_span(young, 2 * STALE_MS);
    void *large = large_alloc(2 * MiB);
    count = 0;
    CHECK(hak_hot_span_retained(0, &count) == 0 && count == 0,
          "after a large block was mapped the box still holds %llu spans",
          (unsigned long long)count);
    large_free(large);
    hak_large_release_cached(0);

    /* A retired SuperSlab's slab taken again, the same: its pages went
     * back, and are fresh memory. */
    if (region) {
        cycle_superslabs(1);
        hak_shared_pool_release(0); /* the spare retires */
        struct hak_slab *stale_again = hak_page_arena_alloc(0, PAGES);
        if (!stale_again)
            hard_error("hak_page_arena_alloc(0, %d) failed", PAGES);
        hak_hot_span_put(stale_again);
        unit_age_hot_span(stale_again, 2 * STALE_MS);
        taken = 0;
        do
            slabs[taken++] = take_slab();
        while (slabs[taken - 1]->chunk != chunks[0] && taken < sizeof(slabs) / sizeof(slabs[0]));
        count = 0;
        CHECK(slabs[taken - 1]->chunk == chunks[0] && hak_hot_span_retained(0, &count) == 0,
              "after a retired SuperSlab's slab was taken the box still holds %llu spans",
              (unsigned long long)count);
        for (unsigned i = 0; i < taken; i++)
            hak_shared_pool_give(slabs[i]);
    }
    hak_hot_span_put(fence);
    hak_hot_span_release_all(0);
    hak_options.decay_ms = decay_ms;
    hak_options.hot_bytes = hot_bytes;
}

/* Whether c, a SuperSlab of the last cycle, has left the spares: unmapped
 * (its address maybe mapped again since, for a large block), or in the
 * region with its slabs' pages given back. */
static bool chunk_retired(unsigned c, bool region)
{
    if (region)
        return chunk_decommitted(c);
    const struct hak_chunk_head *head = hak_page_map_lookup(chunks[c]);
    return head == NULL || head->kind != HAK_CHUNK_SUPERSLAB;
}

static atomic_bool pool_locked;

/* Once the main thread holds the pool's lock: a look for stale spares. */
static void *release_stale_spares(void *arg)
{
    (void)arg;
    while (!atomic_load(&pool_locked))
        sched_yield();
    hak_shared_pool_release_stale(0);
    return NULL;
}

/* Whether a look for stale spares, while only young ones are kept, returns
 * as another thread holds the pool's lock: it reads their age first.  The
 * looker starts before the lock is taken (its start allocates). */
static bool stale_look_passes_lock(void)
{
    pthread_t looker;
    atomic_store(&pool_locked, false);
    if (pthread_create(&looker, NULL, release_stale_spares, NULL) != 0)
        hard_error("pthread_create failed");
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    hak_shared_pool_lock_all(1);
    atomic_store(&pool_locked, true);
    bool returned = pthread_timedjoin_np(looker, NULL, &deadline) == 0;
    hak_shared_pool_unlock_all(1);
    if (!returned)
        pthread_join(looker, NULL);
    return returned;
}

/* A span of a chunk made anew (none is free), taken and given back. */
static void make_chunk(void)
{
    hak_page_arena_release_free(0);
    struct hak_slab *span = hak_page_arena_alloc(0, HAK_ARENA_USABLE_PAGES);
    if (!span)
        hard_error("hak_page_arena_alloc(0, a chunk's pages) failed");
    hak_page_arena_free(span);
}

/* The other way: a chunk for Mid and L25 spans, fresh or one of the
 * arena's mapped spares (its pages as new), and a large block mapped anew
 * first let go of the spare SuperSlabs free for a sixty-fourth of the decay:
 * small blocks' memory of a phase the program left, which the spans cannot
 * use.  The spares emptied since stay.  Ages are real: the look reads the
 * oldest spare's age as the pool noted it when the spares changed, and
 * takes the pool's lock only when that has aged. */
static void test_growth_releases_stale_spares(bool region)
{
    enum { STALE_MS = 300, NEVER_STALE_MS = 3600 * 1000 };
    uint64_t decay_ms = hak_options.decay_ms;
    hak_shared_pool_release(0);

    /* Spares that went stale as they were left. */
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * (uint64_t)NEVER_STALE_MS;
    cycle_superslabs(2);
    CHECK(stale_look_passes_lock(), "a look for stale spares waited for the pool's lock");
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * STALE_MS;
    unit_sleep_ms(2 * STALE_MS);
    make_chunk();
    CHECK(chunk_retired(0, region) && chunk_retired(1, region),
          "spares stale since they were left stayed as they were when a chunk was made");

    /* A stale one beside one emptied again just now, which in the region
     * lends its pages to the chunk (test_lend), and otherwise stays as it
     * was. */
    cycle_superslabs(2);
    unit_sleep_ms(2 * STALE_MS);
    struct hak_slab *slab = take_slab(); /* the newer spare empties again, young */
    if (slab->chunk != chunks[1])
        hard_error("a slab came from other than the spare emptied last");
    hak_shared_pool_give(slab);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    make_chunk();
    CHECK(chunk_retired(0, region), "a stale spare stayed as it was when a chunk was made");
    if (region)
        CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent ==
                  2 * SLABS_PER_SS * SLAB_TOUCHED * HAK_PAGE_SIZE,
              "a chunk took %llu bytes of a stale spare's and a young one's, not all they held",
              (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent));
    else
        CHECK(!chunk_retired(1, region), "a spare emptied just now left when a chunk was made");
    CHECK(stale_look_passes_lock(),
          "a look for stale spares waited for the pool's lock once the stale one left");

    cycle_superslabs(1);
    unit_sleep_ms(2 * STALE_MS);
    hak_large_release_cached(0); /* nothing cached: the block is mapped */
    void *large = large_alloc(2 * MiB);
    CHECK(chunk_retired(0, region), "a stale spare stayed as it was when a large block was mapped");
    large_free(large);
    hak_large_release_cached(0);
    hak_shared_pool_release(0);
    hak_options.decay_ms = decay_ms;
}

/* Spans of SPAN_PAGES from the PageArena put in node 0's box, each after
 * a fence kept out of it (spans the box gives back, cut again, may yet
 * lie side by side and merge, which changes no byte count). */
enum { SPAN_PAGES = 4, MAX_PUT = 96 };
static struct hak_slab *fences[MAX_PUT];
static unsigned fence_count;

/* A span of SPAN_PAGES pages with a page of the arena before it: a span
 * put beside another would merge with it. */
static struct hak_slab *fenced_span(void)
{
    struct hak_slab *fence = hak_page_arena_alloc(0, 1);
    struct hak_slab *span = hak_page_arena_alloc(0, SPAN_PAGES);
    if (!fence || !span || fence_count == MAX_PUT)
        hard_error("cannot take span %u from the PageArena", fence_count);
    fences[fence_count++] = fence;
    return span;
}

static void put_span(void)
{
    hak_hot_span_put(fenced_span());
}

static size_t hot_pages(void)
{
    uint64_t count = 0;
    return hak_hot_span_retained(0, &count) / HAK_PAGE_SIZE;
}

/* Puts spans until the box evicts some for want of room, then asks for a
 * span none of them can serve (the box may be empty by then).  Returns the
 * pages the box held before the eviction, all it had room for; *grew: the
 * budget's doublings since. */
static size_t squeeze_then_miss(uint64_t *grew)
{
    uint64_t evictions = hak_stat_read(HAK_STAT_HOT_EVICTIONS);
    uint64_t growths = hak_stat_read(HAK_STAT_HOT_BUDGET_GROWTHS);
    size_t held = 0;
    while (hak_stat_read(HAK_STAT_HOT_EVICTIONS) == evictions) {
        held = hot_pages();
        put_span();
    }
    uint32_t longer = (uint32_t)hot_pages() + 1; /* than the spans put, even merged */
    CHECK(hak_hot_span_take(0, longer) == NULL, "a span of %u pages was found", longer);
    *grew = hak_stat_read(HAK_STAT_HOT_BUDGET_GROWTHS) - growths;
    return held;
}

/* Spans idle for the whole decay leave, and halve the budget. */
static void age_out_all(void)
{
    uint64_t decay_ms = hak_options.decay_ms;
    hak_options.decay_ms = 0;
    hak_hot_span_release_aged(0);
    hak_options.decay_ms = decay_ms;
}

/* The budget doubles when the box misses right after it gave spans back
 * for want of room, up to 8 times HAKMEM_HOT_BYTES, and halves when spans
 * idle out; a budget the program set with mallopt stays. */
static void test_hot_budget_grows(void)
{
    enum { BUDGET_PAGES = 2 * SPAN_PAGES };
    uint64_t decay_ms = hak_options.decay_ms;
    size_t hot_bytes = hak_options.hot_bytes;
    hak_hot_span_release_all(0);
    hak_options.decay_ms = 16 * 10000; /* squeezes count for 10 s */
    hak_options.hot_bytes = BUDGET_PAGES * HAK_PAGE_SIZE;

    static const size_t budgets[] = {1, 2, 4, 8, 8};
    for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++) {
        uint64_t grew;
        size_t held = squeeze_then_miss(&grew);
        CHECK(held == budgets[i] * BUDGET_PAGES,
              "squeeze %zu: the box held %zu pages before it evicted, not %zu", i, held,
              budgets[i] * BUDGET_PAGES);
        uint64_t want = budgets[i] < 8;
        CHECK(grew == want, "squeeze %zu: the budget doubled %llu times, not %llu", i,
              (unsigned long long)grew, (unsigned long long)want);
    }

    /* Spans that idle out take a doubling with them; malloc_trim none. */
    age_out_all();
    uint64_t grew;
    size_t held = squeeze_then_miss(&grew);
    CHECK(held == 4 * BUDGET_PAGES, "after spans idled out the box held %zu pages, not %d", held,
          4 * BUDGET_PAGES);
    hak_hot_span_release_all(0);
    held = squeeze_then_miss(&grew);
    CHECK(held == 8 * BUDGET_PAGES, "after malloc_trim's release the box held %zu pages, not %d",
          held, 8 * BUDGET_PAGES);

    /* mallopt(M_TRIM_THRESHOLD) fixes it, as it does glibc's. */
    hak_hot_span_release_all(0);
    hak_options_set_hot_bytes(BUDGET_PAGES * HAK_PAGE_SIZE);
    held = squeeze_then_miss(&grew);
    CHECK(held == BUDGET_PAGES && grew == 0,
          "a budget set with mallopt held %zu pages, not %d, and doubled %llu times", held,
          BUDGET_PAGES, (unsigned long long)grew);

    hak_options.hot_bytes_fixed = false;
    for (int i = 0; i < 3; i++) { /* back to the budget as set */
        put_span();
        age_out_all();
    }
    for (unsigned i = 0; i < fence_count; i++)
        hak_hot_span_put(fences[i]);
    hak_hot_span_release_all(0);
    fence_count = 0;
    hak_options.decay_ms = decay_ms;
    hak_options.hot_bytes = hot_bytes;
}

/* Fills the box to its budget with spans, which then idle for idle_ms,
 * and squeezes it with one more: whether the budget doubled at the miss
 * after.  A fence lies between every two spans: one put beside another
 * would merge with it, and the merged span be young. */
static bool grows_after_squeezing_spans_idle(unsigned idle_ms)
{
    enum { MOST = 8 };
    unsigned count = (unsigned)(hak_options.hot_bytes / HAK_PAGE_SIZE / SPAN_PAGES) + 1;
    struct hak_slab *spans[MOST];
    if (count > MOST || fence_count + count + 1 > MAX_PUT)
        hard_error("no room for %u spans", count);
    hak_hot_span_release_all(0);
    for (unsigned i = 0; i < count; i++)
        spans[i] = fenced_span();
    fences[fence_count] = hak_page_arena_alloc(0, 1); /* after the last span */
    if (!fences[fence_count++])
        hard_error("cannot take a page from the PageArena");
    for (unsigned i = 0; i + 1 < count; i++)
        hak_hot_span_put(spans[i]);
    unit_sleep_ms(idle_ms);
    uint64_t evictions = hak_stat_read(HAK_STAT_HOT_EVICTIONS);
    uint64_t growths = hak_stat_read(HAK_STAT_HOT_BUDGET_GROWTHS);
    hak_hot_span_put(spans[count - 1]);
    CHECK(hak_stat_read(HAK_STAT_HOT_EVICTIONS) != evictions,
          "a span over the budget evicted none");
    CHECK(hak_hot_span_take(0, 2 * SPAN_PAGES) == NULL, "a span of %d pages was found",
          2 * SPAN_PAGES);
    bool grew = hak_stat_read(HAK_STAT_HOT_BUDGET_GROWTHS) != growths;
    age_out_all(); /* the doubling back */
    return grew;
}

/* A squeeze counts where the spans it evicts were freed within the
 * squeeze window (a sixteenth of the decay), stale or not (a
 * sixty-fourth): a program whose phases come round every 60-80 ms, as
 * bench/phases' with no pauses, took back spans stale by then, and the
 * budget never grew while it faulted in a third of its Mid spans every
 * round (265k faults in 100 rounds; 32k with the budget doubled once).
 * Beyond the window, a squeeze does not count. */
static void test_hot_budget_grows_after_stale_squeeze(void)
{
    enum { STALE_MS = 200, WINDOW_MS = 4 * STALE_MS, BUDGET_PAGES = 2 * SPAN_PAGES };
    uint64_t decay_ms = hak_options.decay_ms;
    size_t hot_bytes = hak_options.hot_bytes;
    hak_options.hot_bytes = BUDGET_PAGES * HAK_PAGE_SIZE;
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * STALE_MS;
    CHECK(hak_options.decay_ms / 16 == WINDOW_MS, "the window is not a sixteenth of the decay");
    /* A squeeze of the test before may wait for the next miss: that miss
     * now, and the doubling it may make undone. */
    hak_hot_span_release_all(0);
    CHECK(hak_hot_span_take(0, SPAN_PAGES) == NULL, "an empty box served a span");
    put_span();
    age_out_all();
    /* Stale by a quarter of the staleness, and well within the window
     * however slow the machine. */
    CHECK(grows_after_squeezing_spans_idle(STALE_MS + STALE_MS / 4),
          "spans evicted %d ms after they were freed, stale within the window, did not grow the "
          "budget",
          STALE_MS + STALE_MS / 4);
    CHECK(!grows_after_squeezing_spans_idle(WINDOW_MS + 2 * STALE_MS),
          "spans evicted %d ms after they were freed, past the window, grew the budget",
          WINDOW_MS + 2 * STALE_MS);
    /* The fences go under the usual budget: under the test's, they would
     * squeeze the box, and the next test's first miss double it. */
    hak_options.decay_ms = decay_ms;
    hak_options.hot_bytes = hot_bytes;
    for (unsigned i = 0; i < fence_count; i++)
        hak_hot_span_put(fences[i]);
    hak_hot_span_release_all(0);
    fence_count = 0;
}

/* The bytes of the region's SuperSlabs, over its parts. */
static size_t region_used(void)
{
    size_t used = 0;
    for (unsigned part = 0; part < hak_superslab_region.parts; part++)
        used += hak_superslab_region.used[part];
    return used;
}

/* A limit the program sets later: one of what the process has plus some
 * keeps the reservation (it was part of what the process had).  One below
 * the address space the process has, the region's reservation included,
 * but above what it has mapped: a large block, mapped by itself, still
 * fits, as the reservation's unused part goes back, and the next SuperSlab
 * is a mapping of its own, not the region's. */
static void test_limit_below_reservation(void)
{
    struct rlimit saved;
    getrlimit(RLIMIT_AS, &saved);
    /* The arena's spare chunks, which a limit takes back (chunks_batch). */
    hak_page_arena_release_free(0);
    size_t unused = hak_superslab_region.parts * hak_superslab_region.part_size - region_used();
    size_t before = unit_address_space();
    struct rlimit limit = saved;
    limit.rlim_cur = before + 64 * MiB;
    if (setrlimit(RLIMIT_AS, &limit) != 0)
        hard_error("setrlimit(RLIMIT_AS): %s", strerror(errno));
    CHECK(!hak_os_release_reservation_over_limit() && unit_address_space() == before,
          "a limit above the address space took the reservation back");
    limit.rlim_cur = before - unused / 2;
    if (setrlimit(RLIMIT_AS, &limit) != 0)
        hard_error("setrlimit(RLIMIT_AS): %s", strerror(errno));
    void *large = hak_large_alloc(8 * MiB, HAK_PAGE_SIZE, 0, false);
    CHECK(large != NULL, "a large block under a limit %zu MiB below the address space",
          unused / 2 / MiB);
    CHECK(unit_address_space() < before - unused / 2, "the region's reservation is still there");
    CHECK(!hak_os_release_reservation_over_limit(), "the reservation went back twice");
    uint64_t created = hak_stat_read(HAK_STAT_SUPERSLABS);
    size_t used = region_used();
    static struct hak_slab *slabs[(SPARES_KEPT + 8) * SLABS_PER_SS];
    unsigned taken = 0;
    while (hak_stat_read(HAK_STAT_SUPERSLABS) == created &&
           taken < sizeof(slabs) / sizeof(slabs[0]))
        slabs[taken++] = take_slab();
    CHECK(hak_stat_read(HAK_STAT_SUPERSLABS) > created &&
              !hak_superslab_region_holds(slabs[taken - 1]),
          "under the limit a new SuperSlab came from the region");
    CHECK(region_used() == used, "the region grew under the limit");
    for (unsigned i = 0; i < taken; i++)
        hak_shared_pool_give(slabs[i]);
    if (large)
        large_free(large);
    hak_large_release_cached(0);
    setrlimit(RLIMIT_AS, &saved);
}

/* Once more under an address-space limit, where hakmem reserves no region
 * (hak_os_reserve); where one was there already, not again. */
static void rerun_without_region(char **argv)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur != RLIM_INFINITY)
        return;
    limit.rlim_cur = (rlim_t)1 << 40;
    if (setrlimit(RLIMIT_AS, &limit) != 0)
        hard_error("setrlimit(RLIMIT_AS): %s", strerror(errno));
    execv("/proc/self/exe", argv);
    hard_error("cannot run %s again", argv[0]);
}

int main(int argc, char **argv)
{
    (void)argc;
    unit_watchdog();
    setvbuf(stdout, NULL, _IONBF, 0);
    struct rlimit limit;
    bool limited = getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur != RLIM_INFINITY;
    test_large_cache();
    test_shared_pool();
    bool region = hak_superslab_region_exists();
    CHECK(!limited || !region, "a SuperSlab region reserved under an address-space limit");
    test_spare_superslabs(region);
    test_spares_age(region);
    test_growth_releases_stale_spans(region);
    test_growth_releases_stale_spares(region);
    test_hot_budget_grows();
    test_hot_budget_grows_after_stale_squeeze();
    if (!region)
        return test_result("test_retained without a region");
    test_limit_below_reservation();
    int result = test_result("test_retained");
    if (result == EXIT_SUCCESS && !limited)
        rerun_without_region(argv);
    return result;
}

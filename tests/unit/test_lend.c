/* A span the PageArena hands out takes the resident pages of the shared
 * pool's spares in place of its untouched ones (hak_shared_pool_lend):
 * moved, not copied or faulted in, the small blocks' free-list words
 * cleared first, so that the span reads what the slabs held and no link.
 * The slabs that lent read as zeros and count no touched pages; a slab that
 * lends part of its pages lends its last ones and keeps the others for the
 * next span; a chunk that took lent pages is unmapped once wholly free.
 * calloc zeroes the lent pages of a span and leaves its fresh ones alone.
 * A spare lends as soon as it is one (in the SuperSlab region), and one
 * given back just now that keeps pages after a lend stays a spare, unless
 * the kernel refused it.
 * A process with locked memory lends none.
 * The other way, a fresh SuperSlab takes a stale hot span's last pages,
 * and once retired, its slabs are one mapping again; spans discarded over
 * the box's budget wait there for it.
 * Where the kernel refuses (this program's mremap plays one before Linux
 * 6.17 and one before 5.7, refusing_mremap.h), the span is fresh memory
 * and the spares go back as before; after the second, no move is tried
 * again.
 * Pages move on as often as they come, both ways, on any kernel: built as
 * test_lend_old_kernel, the whole program runs as on Linux 6.1, whose
 * mremap refuses a move over several mappings, and no lend is refused. */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "arena/hot_span_box.h"
#include "arena/mappings.h"
#include "arena/page_arena.h"
#include "arena/page_map.h"
#include "arena/shared_pool.h"
#include "arena/span_bins.h"
#include "arena/superslab.h"
#include "block/block_link.h"
#include "options.h"
#include "os.h"
#include "refusing_mremap.h"
#include "stats.h"
#include "unit.h"

/* What mremap refuses outside the tests that make it refuse more. */
static bool (*kernel_refuses)(const void *source, size_t size);

enum { STALE_MS = 200, SLAB_PAGES = HAK_SLAB_SIZE / HAK_PAGE_SIZE, BLOCK = 64 };
#define SLABS_PER_SS (HAK_SLABS_PER_SUPERSLAB - HAK_SUPERSLAB_HEADER_SLABS)

/* What a slab's page held: a block of BLOCK bytes at every offset, its two
 * free-list words set as a free block's are, the rest the page's own. */
static uint64_t page_word(size_t page_seed, size_t word)
{
    return (page_seed + 1) * 0x9E3779B97F4A7C15ull ^ word;
}

static void fill_slab(struct hak_slab *slab, size_t seed, uint32_t pages)
{
    slab->block_size = BLOCK;
    for (uint32_t p = 0; p < pages; p++) {
        uint64_t *words = (uint64_t *)(slab->start + (size_t)p * HAK_PAGE_SIZE);
        for (size_t w = 0; w < HAK_PAGE_SIZE / sizeof(uint64_t); w++)
            words[w] = page_word(seed * SLAB_PAGES + p, w);
        for (size_t w = 0; w < HAK_PAGE_SIZE / sizeof(uint64_t); w += BLOCK / sizeof(uint64_t)) {
            words[w] = page_word(seed * SLAB_PAGES + p, w) | 0x10; /* a link */
            words[w + 1] = hak_link_keys.free_tag;
        }
    }
    slab->touched_pages = pages;
}

/* Whether the page at mem holds what page seed of fill_slab did, its
 * free-list words cleared. */
static bool page_lent_clean(const char *mem, size_t page_seed)
{
    const uint64_t *words = (const uint64_t *)mem;
    for (size_t w = 0; w < HAK_PAGE_SIZE / sizeof(uint64_t); w++) {
        bool free_word = w % (BLOCK / sizeof(uint64_t)) < 2;
        if (words[w] != (free_word ? 0 : page_word(page_seed, w)))
            return false;
    }
    return true;
}

static bool pages_resident(const char *mem, size_t pages)
{
    for (size_t p = 0; p < pages; p++)
        if (!unit_page_resident(mem + p * HAK_PAGE_SIZE))
            return false;
    return true;
}

/* All the slabs of one SuperSlab, taken from node 0's pool (the others
 * taken on the way given back), in slab order. */
static struct hak_slab *whole[SLABS_PER_SS];

static void take_whole_superslab(void)
{
    static struct hak_slab *taken[3 * SLABS_PER_SS];
    unsigned count = 0;
    const struct hak_chunk_head *chunk = NULL;
    while (!chunk && count < sizeof(taken) / sizeof(taken[0])) {
        taken[count] = hak_shared_pool_take(0);
        if (!taken[count])
            hard_error("hak_shared_pool_take(0) failed");
        unsigned same = 0;
        for (unsigned i = 0; i <= count; i++)
            same += taken[i]->chunk == taken[count]->chunk;
        if (same == SLABS_PER_SS)
            chunk = taken[count]->chunk;
        count++;
    }
    if (!chunk)
        hard_error("no SuperSlab's slabs all came to the test");
    unsigned kept = 0;
    for (unsigned i = 0; i < count; i++) {
        if (taken[i]->chunk == chunk)
            whole[kept++] = taken[i];
        else
            hak_shared_pool_give(taken[i]);
    }
    for (unsigned i = 1; i < SLABS_PER_SS; i++)
        for (unsigned j = i; j > 0 && whole[j]->start < whole[j - 1]->start; j--) {
            struct hak_slab *swap = whole[j];
            whole[j] = whole[j - 1];
            whole[j - 1] = swap;
        }
}

/* The free slabs of SuperSlabs in use, held by the test: a SuperSlab in
 * use fills its free slabs with no page from the box's spans before it
 * hands one out (hak_shared_pool_take), which would take the pages a test
 * puts in the box for the SuperSlab it takes next.  Called while the box
 * holds nothing of the test's; the slab of a spare, retired or new one,
 * which ends it, goes back. */
static struct hak_slab *held[4 * SLABS_PER_SS];
static unsigned held_count;

static void hold_free_slabs_in_use(void)
{
    while (held_count < sizeof(held) / sizeof(held[0])) {
        struct hak_slab *slab = hak_shared_pool_take(0);
        if (!slab)
            hard_error("hak_shared_pool_take(0) failed");
        if (hak_superslab_of(slab)->used_slabs == 1) {
            hak_shared_pool_give(slab);
            return;
        }
        held[held_count++] = slab;
    }
    hard_error("more than %u free slabs in SuperSlabs in use", held_count);
}

static void give_back_held(void)
{
    while (held_count)
        hak_shared_pool_give(held[--held_count]);
}

/* take_whole_superslab's slabs back, and the SuperSlab, wholly free,
 * retired. */
static void retire_whole_superslab(void)
{
    for (unsigned i = 0; i < SLABS_PER_SS; i++)
        hak_shared_pool_give(whole[i]);
    hak_shared_pool_release(0);
}

/* A slab of take_whole_superslab's SuperSlab, taken from the pool; slabs
 * of other SuperSlabs in use that come first wait for give_back_others. */
static struct hak_slab *others[64];
static unsigned other_count;

static struct hak_slab *take_from_whole_superslab(void)
{
    struct hak_slab *slab = hak_shared_pool_take(0);
    while (slab && slab->chunk != whole[0]->chunk && other_count < 64) {
        others[other_count++] = slab;
        slab = hak_shared_pool_take(0);
    }
    if (!slab || slab->chunk != whole[0]->chunk)
        hard_error("the SuperSlab's free slabs did not come back to the test");
    return slab;
}

static void give_back_others(void)
{
    while (other_count)
        hak_shared_pool_give(others[--other_count]);
}

/* The SuperSlab's slabs back, the first count filled with pages pages
 * each: a spare just now. */
static void leave_young_spare(unsigned count, uint32_t pages)
{
    hak_hot_span_release_all(0); /* no span lends to the SuperSlab taken */
    take_whole_superslab();
    for (unsigned i = 0; i < count; i++)
        fill_slab(whole[i], i, pages);
    for (unsigned i = 0; i < SLABS_PER_SS; i++)
        hak_shared_pool_give(whole[i]);
}

/* The same, then left until it is stale. */
static void leave_stale_spare(unsigned count, uint32_t pages)
{
    leave_young_spare(count, pages);
    unit_sleep_ms(2 * STALE_MS);
}

static struct hak_slab *arena_span(uint32_t pages)
{
    struct hak_slab *span = hak_page_arena_alloc(0, pages);
    if (!span)
        hard_error("hak_page_arena_alloc(0, %u) failed", pages);
    return span;
}

/* span cut into count spans of pages[i] pages each, side by side, in
 * spans[]; the last takes what is left. */
static void cut_side_by_side(struct hak_slab *span, struct hak_slab **spans, const uint32_t *pages,
                             unsigned count)
{
    for (unsigned i = 0; i + 1 < count; i++) {
        spans[i] = span;
        span = hak_span_cut_tail(span, pages[i]);
        if (!span)
            hard_error("no descriptor for a span's tail");
        hak_span_map_pages(span, span->first_page, span->pages);
    }
    spans[count - 1] = span;
}

/* The pages from span's first to its first grain line (HAK_LEND_GRAIN). */
static uint32_t pages_to_grain_line(const struct hak_slab *span)
{
    return (uint32_t)((hak_lend_grain_up((uintptr_t)span->start) - (uintptr_t)span->start) /
                      HAK_PAGE_SIZE);
}

/* The arena's span back to it, its pages given back first: the arena keeps
 * clean spans. */
static void arena_free_clean(struct hak_slab *span)
{
    hak_os_decommit(span->start, (size_t)span->pages * HAK_PAGE_SIZE);
    hak_page_arena_free(span);
}

/* count spans of pages[i] pages each, side by side from a grain line, cut
 * from one of the arena's: where each lands hangs neither on where the
 * arena puts a span (one that is to take lent pages on a grain line,
 * page_arena.c) nor on what moved into the chunk before. */
static void arena_spans_side_by_side(struct hak_slab **spans, const uint32_t *pages, unsigned count)
{
    uint32_t total = 0;
    for (unsigned i = 0; i < count; i++)
        total += pages[i];
    struct hak_slab *span = arena_span(total + SLAB_PAGES - 1);
    uint32_t to_line = pages_to_grain_line(span);
    struct hak_slab *cut[2];
    if (to_line) {
        cut_side_by_side(span, cut, (const uint32_t[]){to_line, 0}, 2);
        arena_free_clean(cut[0]);
        span = cut[1];
    }
    if (span->pages > total) {
        cut_side_by_side(span, cut, (const uint32_t[]){total, 0}, 2);
        arena_free_clean(cut[1]);
        span = cut[0];
    }
    cut_side_by_side(span, spans, pages, count);
}

/* A span of pages pages of a chunk that may lend (hak_mappings_known): a
 * chunk a move failed out of lends nothing while it holds spans
 * (test_failed_move_ends_lends_of_its_chunk), and in some runs the arena
 * carves from it still (the NUMA guest's). */
static struct hak_slab *arena_span_that_lends(uint32_t pages)
{
    struct hak_slab *skipped[64];
    unsigned count = 0;
    struct hak_slab *span = arena_span(pages);
    while (!hak_mappings_known(&((struct hak_arena_chunk *)span->chunk)->mappings)) {
        if (count == sizeof(skipped) / sizeof(skipped[0]))
            hard_error("%u spans of %u pages in chunks that do not lend", count, pages);
        skipped[count++] = span;
        span = arena_span(pages);
    }
    while (count)
        hak_page_arena_free(skipped[--count]);
    return span;
}

/* A span of pages pages the HotSpanBox did not have, lent ahead where it
 * can be (hak_hot_span_take_fresh). */
static struct hak_slab *fresh_span(uint32_t pages)
{
    struct hak_slab *span = hak_hot_span_take_fresh(0, pages);
    if (!span)
        hard_error("hak_hot_span_take_fresh(0, %u) failed", pages);
    return span;
}

/* The bytes node 0's box holds. */
static size_t box_bytes(void)
{
    uint64_t spans = 0;
    return hak_hot_span_retained(0, &spans);
}

static void test_span_takes_spare_pages(void)
{
    enum { LENDERS = 4 };
    leave_stale_spare(LENDERS, SLAB_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    long faults = minor_faults();
    struct hak_slab *span = arena_span(LENDERS * SLAB_PAGES);
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == LENDERS * HAK_SLAB_SIZE,
          "the span took %llu bytes of the stale spare's, not its %d slabs'",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), LENDERS);
    CHECK(span->touched_pages == LENDERS * SLAB_PAGES,
          "a span of lent pages counts %u pages touched (calloc zeroes those)",
          span->touched_pages);
    CHECK(((const struct hak_arena_chunk *)span->chunk)->mappings.lent_ranges == 1,
          "slabs side by side, all their pages touched, took %u moves, not one",
          ((const struct hak_arena_chunk *)span->chunk)->mappings.lent_ranges);
    CHECK(pages_resident(span->start, LENDERS * SLAB_PAGES),
          "the span's pages were not resident before it was read");
    bool clean = true;
    for (unsigned i = 0; i < LENDERS; i++)
        for (unsigned p = 0; p < SLAB_PAGES; p++)
            clean &= page_lent_clean(span->start + ((size_t)i * SLAB_PAGES + p) * HAK_PAGE_SIZE,
                                     (size_t)i * SLAB_PAGES + p);
    CHECK(clean, "the span does not hold the slabs' pages with their free-list words cleared");
    CHECK(minor_faults() - faults < SLAB_PAGES, "%ld page faults for a span of lent pages",
          minor_faults() - faults);
    for (unsigned i = 0; i < LENDERS; i++) {
        CHECK(whole[i]->touched_pages == 0, "a slab that lent its pages counts %u touched",
              whole[i]->touched_pages);
        CHECK(!unit_page_resident(whole[i]->start), "a slab that lent its pages still holds one");
    }
    const void *chunk = span->chunk;
    hak_page_arena_free(span);
    CHECK(hak_page_map_lookup(chunk) == NULL,
          "a chunk that took lent pages stayed mapped once wholly free");
}

/* A fresh Mid span, where a spare may lend, takes a run of its slabs in
 * one move for itself and the spans after it, which wait in the box: one
 * mremap costs some 6 us whatever its length, and bench/phases with no
 * pauses made one of 64 KiB for each fresh span (2180 in 3 rounds). */
static void test_fresh_spans_lend_ahead(void)
{
    enum { SPANS = HAK_LEND_AHEAD_SPANS };
    if (SPANS > SLABS_PER_SS)
        hard_error("a SuperSlab of %d slabs cannot lend %d spans ahead", SLABS_PER_SS, SPANS);
    hak_page_arena_release_free(0);
    leave_stale_spare(SPANS, SLAB_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *spans[SPANS];
    spans[0] = fresh_span(SLAB_PAGES);
    const struct hak_arena_chunk *chunk = (const struct hak_arena_chunk *)spans[0]->chunk;
    size_t hot = box_bytes();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)SPANS * HAK_SLAB_SIZE &&
              chunk->mappings.lent_ranges == 1,
          "a fresh span took %llu bytes of the spare's in %u moves, not its %d slabs' in one",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent),
          chunk->mappings.lent_ranges, SPANS);
    CHECK(spans[0]->pages == SLAB_PAGES && hot == (size_t)(SPANS - 1) * HAK_SLAB_SIZE,
          "the span has %u pages and the box %zu bytes, not %d and the other %d slabs'",
          spans[0]->pages, hot, SLAB_PAGES, SPANS - 1);
    for (unsigned i = 1; i < SPANS; i++) {
        spans[i] = hak_hot_span_take(0, SLAB_PAGES);
        if (!spans[i])
            hard_error("span %u of the run lent ahead was not in the box", i);
    }
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)SPANS * HAK_SLAB_SIZE,
          "the spans after the first took pages of their own");
    bool clean = true;
    for (unsigned i = 0; i < SPANS; i++)
        for (unsigned p = 0; p < SLAB_PAGES; p++)
            clean &= page_lent_clean(spans[i]->start + (size_t)p * HAK_PAGE_SIZE,
                                     (size_t)i * SLAB_PAGES + p);
    CHECK(clean, "the spans do not hold the slabs' pages in order, their free-list words cleared");
    /* calloc clears what a fresh span counts touched, and all of another */
    CHECK(spans[0]->touched_pages == SLAB_PAGES,
          "the span lent its pages counts %u of its %d touched", spans[0]->touched_pages,
          SLAB_PAGES);
    for (unsigned i = 0; i < SPANS; i++)
        hak_hot_span_put(spans[i]);
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0);
}

/* Where the spare has less than the span, the span keeps its own length,
 * and the pages past it go back to the arena untouched. */
static void test_short_lend_ahead_keeps_the_span(void)
{
    enum { SPAN = 2 * SLAB_PAGES };
    hak_page_arena_release_free(0);
    leave_stale_spare(1, SLAB_PAGES);
    struct hak_slab *span = fresh_span(SPAN);
    uint64_t held = 0;
    CHECK(span->pages == SPAN && span->touched_pages == SLAB_PAGES &&
              hak_hot_span_retained(0, &held) == 0,
          "a short lend left a span of %u pages, %u touched, and %llu spans in the box",
          span->pages, span->touched_pages, (unsigned long long)held);
    CHECK(page_lent_clean(span->start, 0), "the span does not start with the slab's pages");
    struct hak_slab *next = arena_span(SPAN);
    CHECK(next->start == span->start + (size_t)SPAN * HAK_PAGE_SIZE &&
              !unit_page_resident(next->start),
          "the pages past the span did not go back to the arena untouched");
    CHECK(next->fresh, "the span cut past a short lend ahead does not count as fresh "
                       "(calloc would clear, and fault in, its pages)");
    hak_page_arena_free(next);
    hak_page_arena_free(span);
    hak_shared_pool_release(0);
    hak_page_arena_release_free(0);
}

/* A free span that is not a whole number of spans long lends ahead as many
 * whole spans as it holds, and its last pages stay in the arena: filled
 * whole, the part past the last span waited in the box for a request no
 * longer than itself (bench/phases: 11 pages of 251 at every lend, some
 * 0.5 MB resident that served nothing, faulted in again elsewhere). */
static void test_lend_ahead_takes_whole_spans(void)
{
    enum { SPANS = 3, EXTRA = 5, FREE_PAGES = SPANS * SLAB_PAGES + EXTRA };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0); /* nothing lends to the chunk's span */
    hak_page_arena_release_free(0);
    /* In a new chunk, FREE_PAGES free from a grain line on, a held span on
     * either side. */
    struct hak_slab *whole_chunk = arena_span(HAK_ARENA_USABLE_PAGES);
    struct hak_slab *three[3];
    cut_side_by_side(
        whole_chunk, three,
        (const uint32_t[]){pages_to_grain_line(whole_chunk) + SLAB_PAGES, FREE_PAGES, 0}, 3);
    struct hak_slab *front = three[0], *free_pages = three[1], *back = three[2];
    char *first = free_pages->start;
    hak_page_arena_free(free_pages);
    leave_stale_spare(SPANS + 1, SLAB_PAGES);
    struct hak_slab *span = fresh_span(SLAB_PAGES);
    CHECK(span->start == first, "the span was not cut from the free pages");
    unsigned taken = 0;
    struct hak_slab *spans[SPANS];
    spans[taken++] = span;
    while (taken < SPANS && (spans[taken] = hak_hot_span_take(0, SLAB_PAGES)) != NULL)
        taken++;
    size_t left = box_bytes();
    CHECK(taken == SPANS && left == 0,
          "%u spans of %d pages from a free span of %d, and %zu bytes left in the box", taken,
          SLAB_PAGES, FREE_PAGES, left);
    hak_shared_pool_release(0); /* the spare's last slab would lend to the tail */
    const char *tail = first + (size_t)SPANS * HAK_SLAB_SIZE;
    const struct hak_slab *holder =
        ((const struct hak_arena_chunk *)front->chunk)
            ->page_slab[(size_t)(tail - (const char *)front->chunk) / HAK_PAGE_SIZE];
    CHECK(holder->kind == HAK_SLAB_FREE_SPAN && holder->start == tail && holder->pages == EXTRA &&
              !pages_resident(tail, 1),
          "the pages past the spans lent ahead did not stay in the arena untouched");
    for (unsigned i = 0; i < taken; i++)
        hak_hot_span_put(spans[i]);
    hak_hot_span_release_all(0);
    hak_page_arena_free(front);
    hak_page_arena_free(back);
    hak_page_arena_release_free(0);
}

/* A lend ahead that ends partway through a span: the span after the
 * caller's takes the last lent pages and counts those touched, its others
 * untouched and not resident, and the arena's next span, past the run,
 * is fresh and reads as zeros, for calloc leaves such a span alone. */
static void test_lend_ahead_ending_in_a_span(void)
{
    enum { LENDERS = 3, SPAN = 2 * SLAB_PAGES };
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0);
    leave_stale_spare(LENDERS, SLAB_PAGES);
    struct hak_slab *span = fresh_span(SPAN);
    struct hak_slab *second = hak_hot_span_take(0, SPAN);
    CHECK(span->touched_pages == SPAN && second &&
              second->start == span->start + (size_t)SPAN * HAK_PAGE_SIZE &&
              second->touched_pages == LENDERS * SLAB_PAGES - SPAN && !second->fresh,
          "a lend of %d pages did not fill the span and half the next", LENDERS * SLAB_PAGES);
    if (second)
        CHECK(!pages_resident(second->start + HAK_SLAB_SIZE, SPAN - SLAB_PAGES),
              "the second span's pages past the lent ones are resident");
    hak_shared_pool_release(0); /* nothing lends to the next span */
    struct hak_slab *next = arena_span(SPAN);
    bool zeros = true;
    for (size_t w = 0; w < (size_t)SPAN * HAK_PAGE_SIZE / sizeof(uint64_t); w++)
        zeros &= ((const uint64_t *)next->start)[w] == 0;
    CHECK(next->start == span->start + 2 * (size_t)SPAN * HAK_PAGE_SIZE && next->fresh && zeros,
          "the arena's span past the run is not fresh memory reading as zeros");
    hak_page_arena_free(next);
    hak_hot_span_put(span);
    if (second)
        hak_hot_span_put(second);
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0);
}

/* What is lent ahead into the box is no more than a quarter of the
 * shard's budget, which a put over the budget evicts down to three
 * quarters: a run the budget could not hold evicted itself, its lent
 * pages decommitted, and the span faulted in fresh ones. */
static void test_lend_ahead_within_budget(void)
{
    enum { BUDGET_SPANS = 8, REST = BUDGET_SPANS / 4 };
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0);
    size_t budget = hak_options.hot_bytes;
    bool fixed = hak_options.hot_bytes_fixed;
    hak_options.hot_bytes = (size_t)BUDGET_SPANS * HAK_SLAB_SIZE;
    hak_options.hot_bytes_fixed = true; /* no doubling from earlier tests */
    leave_stale_spare(BUDGET_SPANS, SLAB_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    uint64_t evictions = hak_stat_read(HAK_STAT_HOT_EVICTIONS);
    struct hak_slab *span = fresh_span(SLAB_PAGES);
    size_t in_box = box_bytes();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (1 + REST) * (uint64_t)HAK_SLAB_SIZE &&
              in_box == (size_t)REST * HAK_SLAB_SIZE &&
              hak_stat_read(HAK_STAT_HOT_EVICTIONS) == evictions,
          "under a budget of %d spans, %llu bytes lent, %zu in the box, %llu evicted", BUDGET_SPANS,
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), in_box,
          (unsigned long long)(hak_stat_read(HAK_STAT_HOT_EVICTIONS) - evictions));
    CHECK(span->touched_pages == SLAB_PAGES && page_lent_clean(span->start, 0),
          "the span does not hold the spare's first slab's pages");
    hak_hot_span_put(span);
    hak_hot_span_release_all(0);
    hak_options.hot_bytes = budget;
    hak_options.hot_bytes_fixed = fixed;
    hak_shared_pool_release(0);
    hak_page_arena_release_free(0);
}

/* Spans a chunk holds fewer than 16 of (64 pages: Mid classes of 16-32
 * KiB, L25 ones from 256 KiB) lend ahead as many as the chunk holds. */
static void test_long_spans_lend_ahead(void)
{
    enum { PAGES = 64 };
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0);
    leave_stale_spare(SLABS_PER_SS, SLAB_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *span = fresh_span(PAGES);
    size_t in_box = box_bytes();
    CHECK(span->pages == PAGES && span->touched_pages == PAGES &&
              in_box >= (size_t)PAGES * HAK_PAGE_SIZE &&
              in_box % ((size_t)PAGES * HAK_PAGE_SIZE) == 0,
          "a span of %d pages lent %llu bytes and left %zu in the box, not whole spans ahead",
          PAGES, (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), in_box);
    hak_hot_span_put(span);
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hak_page_arena_release_free(0);
}

/* No move carries less than a slab (HAK_LEND_GRAIN): a slab carved in
 * part keeps its pages, which go back once its SuperSlab retires, while
 * its wholly touched neighbour lends; a span shorter than a slab takes
 * nothing, and the stale spare goes back, as where none lends. */
static void test_moves_carry_a_slab(void)
{
    enum { PART = SLAB_PAGES / 2 };
    hak_hot_span_release_all(0);
    leave_stale_spare(2, SLAB_PAGES);
    fill_slab(whole[0], 0, PART); /* carved in part: its last pages untouched */
    hak_os_decommit(whole[0]->start + (size_t)PART * HAK_PAGE_SIZE,
                    (size_t)(SLAB_PAGES - PART) * HAK_PAGE_SIZE);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *span = arena_span(2 * SLAB_PAGES);
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == HAK_SLAB_SIZE &&
              span->touched_pages == SLAB_PAGES && page_lent_clean(span->start, SLAB_PAGES),
          "a span took %llu bytes, not the wholly touched slab's %d pages",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), SLAB_PAGES);
    CHECK(whole[0]->touched_pages == 0 && !unit_page_resident(whole[0]->start),
          "the slab carved in part lent, or kept its pages after its SuperSlab retired "
          "(%u pages counted)",
          whole[0]->touched_pages);
    hak_page_arena_free(span);

    leave_stale_spare(1, SLAB_PAGES);
    lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *short_span = arena_span(SLAB_PAGES / 2);
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) == lent && short_span->touched_pages == 0 &&
              !unit_page_resident(whole[0]->start),
          "a span shorter than a slab took %llu bytes, or the stale spare kept its pages",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent));
    hak_page_arena_free(short_span);
    hak_shared_pool_release(0);
}

static bool refuse_all(const void *source, size_t size)
{
    (void)source;
    (void)size;
    return true;
}

/* A spare lends as soon as it is one: a phase of 1-4 KiB blocks right
 * after one of small ones takes the pages the small blocks left.  A young
 * spare with pages left after a lend that filled the span stays a spare,
 * for the next span; one whose move the kernel refused leaves, however
 * young, and no span tries it again. */
static void test_young_spare_lends(void)
{
    uint64_t decay_ms = hak_options.decay_ms;
    hak_options.decay_ms = UINT64_MAX; /* young throughout, however slow the machine */
    leave_young_spare(4, SLAB_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *first = arena_span(SLAB_PAGES);
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == HAK_SLAB_SIZE &&
              page_lent_clean(first->start, 0),
          "a span took %llu bytes of a young spare's, not its first slab's %d pages",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), SLAB_PAGES);
    CHECK(whole[1]->touched_pages == SLAB_PAGES && unit_page_resident(whole[1]->start),
          "a young spare that lent part of its pages gave back the rest (%u pages counted)",
          whole[1]->touched_pages);
    struct hak_slab *second = arena_span(SLAB_PAGES);
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == 2 * HAK_SLAB_SIZE &&
              page_lent_clean(second->start, SLAB_PAGES),
          "the next span did not take the young spare's next slab: it left the spares");

    mremap_refused = refuse_all;
    mremap_refusal = EFAULT;
    unsigned refused = mremap_refusals;
    struct hak_slab *third = arena_span(SLAB_PAGES);
    struct hak_slab *fourth = arena_span(SLAB_PAGES);
    mremap_refused = kernel_refuses;
    CHECK(mremap_refusals == refused + 1,
          "a young spare whose move the kernel refused was tried %u times, not once",
          mremap_refusals - refused);
    hak_page_arena_free(first);
    hak_page_arena_free(second);
    arena_free_clean(third);
    hak_page_arena_free(fourth);
    hak_shared_pool_release(0);
    hak_options.decay_ms = decay_ms;
}

/* A refusal like Linux's before 6.17 (the destination unmapped first) is
 * one move's: the span is fresh memory, mapped again, the spare goes back,
 * and the next span tries again.  One like Linux's before 5.7 (no
 * MREMAP_DONTUNMAP) ends lending. */
static void test_kernel_refuses(void)
{
    mremap_refused = refuse_all;
    static const int refusals[] = {EFAULT, EINVAL};
    for (unsigned r = 0; r < 2; r++) {
        mremap_refusal = refusals[r];
        leave_stale_spare(1, SLAB_PAGES);
        unsigned refused = mremap_refusals;
        uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
        struct hak_slab *span = arena_span(SLAB_PAGES);
        CHECK(mremap_refusals == refused + 1 && hak_stat_read(HAK_STAT_LENT_BYTES) == lent,
              "errno %d: %u moves refused, %llu bytes lent", refusals[r], mremap_refusals - refused,
              (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent));
        /* Counted as lent all the same where the destination was unmapped:
         * from 6.17 a move may stop part way, and calloc zeroes them. */
        CHECK(span->touched_pages == (refusals[r] == EFAULT ? SLAB_PAGES : 0) &&
                  !pages_resident(span->start, 1) &&
                  nonzero_offset(span->start, HAK_SLAB_SIZE) == PATTERN_INTACT,
              "errno %d: a span the kernel refused pages is not fresh memory (%u pages counted)",
              refusals[r], span->touched_pages);
        memset(span->start, 1, HAK_SLAB_SIZE);
        CHECK(!unit_page_resident(whole[0]->start),
              "errno %d: a stale spare kept its pages when the kernel refused to lend them",
              refusals[r]);
        arena_free_clean(span);
    }
    leave_stale_spare(1, SLAB_PAGES);
    unsigned refused = mremap_refusals;
    struct hak_slab *span = arena_span(SLAB_PAGES);
    CHECK(mremap_refusals == refused, "a lend was tried again after the kernel refused the flag");
    hak_page_arena_free(span);
    mremap_refused = kernel_refuses;
}

/* calloc of an L25 block on a span of its own zeroes the pages lent to it,
 * and leaves the others, fresh, untouched.  The spare's pages at least: the
 * free slabs of SuperSlabs in use may lend after them (lend_in_use_slabs),
 * as one did in the NUMA guest. */
static void test_calloc_of_lent_span(void)
{
    enum { SIZE = 512 * 1024, SPARE_PAGES = 2 * SLAB_PAGES };
    leave_stale_spare(2, SLAB_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    unsigned char *block = calloc(1, SIZE);
    if (!block)
        hard_error("calloc(1, %d) failed", SIZE);
    size_t lent_pages = (size_t)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent) / HAK_PAGE_SIZE;
    CHECK(lent_pages >= SPARE_PAGES && lent_pages <= SIZE / HAK_PAGE_SIZE,
          "the calloc'd block's span took %zu pages, not the spare's %d at least", lent_pages,
          SPARE_PAGES);
    unsigned resident = 0;
    for (size_t page = lent_pages; page < SIZE / HAK_PAGE_SIZE; page++)
        resident += unit_page_resident(block + page * HAK_PAGE_SIZE);
    CHECK(resident == 0, "calloc touched %u of the pages past those lent", resident);
    CHECK(nonzero_offset(block, SIZE) == PATTERN_INTACT,
          "calloc of a block on lent pages is not zero at %zu", nonzero_offset(block, SIZE));
    free(block);
}

/* A process with locked memory lends nothing: a move would unlock the
 * mapping it leaves (os.c).  The look at /proc/self/status stands for a
 * second. */
static void test_locked_memory_lends_nothing(void)
{
    static char page[HAK_PAGE_SIZE] __attribute__((aligned(HAK_PAGE_SIZE)));
    unit_sleep_ms(1100);
    CHECK(hak_os_can_lend(), "a process with no locked memory may not lend");
    if (mlock(page, sizeof(page)) != 0) {
        printf("mlock refused (%s): the locked part is skipped\n", strerror(errno));
        return;
    }
    unit_sleep_ms(1100);
    CHECK(!hak_os_can_lend(), "a process with a locked page may lend");
    munlock(page, sizeof(page));
    unit_sleep_ms(1100);
    CHECK(hak_os_can_lend(), "a process whose memory is unlocked again may not lend");
}

/* The kernel mappings [from, to) of which counted(from, to, start, end)
 * holds. */
static unsigned count_mappings(const char *start, const char *end,
                               bool (*counted)(uintptr_t, uintptr_t, const char *, const char *))
{
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        hard_error("cannot read /proc/self/maps");
    unsigned count = 0;
    unsigned long from, to;
    char line[512];
    while (fgets(line, sizeof(line), maps))
        if (sscanf(line, "%lx-%lx", &from, &to) == 2 && counted(from, to, start, end))
            count++;
    fclose(maps);
    return count;
}

static bool holds_a_byte(uintptr_t from, uintptr_t to, const char *start, const char *end)
{
    return from < (uintptr_t)end && to > (uintptr_t)start;
}

static bool starts_inside_off_grain(uintptr_t from, uintptr_t to, const char *start,
                                    const char *end)
{
    (void)to;
    return from > (uintptr_t)start && from < (uintptr_t)end && from % HAK_LEND_GRAIN;
}

/* The kernel mappings that hold a byte of [start, end). */
static unsigned mappings_over(const char *start, const char *end)
{
    return count_mappings(start, end, holds_a_byte);
}

/* The kernel mappings that start inside [start, end) off the grain
 * (HAK_LEND_GRAIN). */
static unsigned mappings_off_grain(const char *start, const char *end)
{
    return count_mappings(start, end, starts_inside_off_grain);
}

/* Every range a lend moves starts and ends on the grain, where it leaves
 * and where it lands, so that every kernel mapping in a chunk or a
 * SuperSlab does, however often pages go back and forth: round after
 * round, a span of an odd length in a chunk of its own, whose first free
 * page (past the chunk's header) is not on a grain line, takes a stale
 * spare's slabs, and then, stale, lends them to the next SuperSlab.
 * Moved at any page, such ranges cut the mappings finer at every round
 * (README: 95 a SuperSlab after 80 rounds of bench/phases, and slower
 * moves). */
static void test_moves_stay_on_the_grain(void)
{
    enum { ROUNDS = 4, SLABS = 3, PAGES = SLABS * SLAB_PAGES + 5 };
    for (unsigned round = 0; round < ROUNDS; round++) {
        hak_hot_span_release_all(0);
        hak_page_arena_release_free(0);
        leave_stale_spare(SLABS, SLAB_PAGES);
        uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
        struct hak_slab *two[2];
        cut_side_by_side(arena_span(HAK_ARENA_USABLE_PAGES - SLAB_PAGES), two,
                         (const uint32_t[]){PAGES, 0}, 2);
        arena_free_clean(two[1]);
        struct hak_slab *span = two[0];
        CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == SLABS * HAK_SLAB_SIZE,
              "round %u: a span took %llu bytes of a stale spare's, not its %d slabs'", round,
              (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), SLABS);
        const char *chunk = (const char *)span->chunk;
        hold_free_slabs_in_use();
        memset(span->start, 7, (size_t)PAGES * HAK_PAGE_SIZE);
        span->kind = HAK_SLAB_MID;
        span->touched_pages = PAGES;
        hak_hot_span_put(span);
        unit_sleep_ms(2 * STALE_MS);
        lent = hak_stat_read(HAK_STAT_LENT_BYTES);
        take_whole_superslab();
        const char *ss = (const char *)whole[0]->chunk;
        CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == SLABS * HAK_SLAB_SIZE,
              "round %u: a fresh SuperSlab took %llu bytes of a stale span's, not %d slabs'", round,
              (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), SLABS);
        unsigned in_chunk = mappings_off_grain(chunk, chunk + HAK_ARENA_CHUNK_SIZE);
        unsigned in_ss = mappings_off_grain(ss, ss + HAK_SUPERSLAB_SIZE);
        CHECK(in_chunk == 0 && in_ss == 0,
              "round %u: %u mappings of the span's chunk and %u of the SuperSlab start off the "
              "grain",
              round, in_chunk, in_ss);
        retire_whole_superslab();
        give_back_held();
    }
    hak_hot_span_release_all(0);
}

/* With nothing else in the box or the pool to lend (hold_free_slabs_in_use),
 * a hot span of pages pages, all touched, page p holding p % 251 + 1 in
 * every byte; returns where it starts. */
static char *put_numbered_span(uint32_t pages)
{
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    struct hak_slab *span = arena_span(pages);
    char *start = span->start;
    for (uint32_t p = 0; p < pages; p++)
        memset(start + (size_t)p * HAK_PAGE_SIZE, (int)(p % 251 + 1), HAK_PAGE_SIZE);
    span->kind = HAK_SLAB_MID;
    span->touched_pages = pages;
    hak_hot_span_put(span);
    return start;
}

/* The other way: a SuperSlab made or retired takes the pages of a stale
 * hot span in place of its fresh ones (hak_hot_span_lend), the span's last
 * pages first, resident before they are read; the span keeps the others,
 * still hot.  Once the SuperSlab is wholly free and retired, its slabs are
 * one kernel mapping again (in the region, where it stays mapped). */
static void test_superslab_takes_span_pages(void)
{
    enum { SS_PAGES = SLABS_PER_SS * SLAB_PAGES, KEPT = SLAB_PAGES, SPAN = SS_PAGES + KEPT };
    char *span_start = put_numbered_span(SPAN);
    unit_sleep_ms(2 * STALE_MS);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)SS_PAGES * HAK_PAGE_SIZE,
          "the fresh SuperSlab took %llu bytes of the stale span's, not its slabs' %d pages",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), SS_PAGES);
    unsigned counted = 0, resident = 0;
    for (unsigned i = 0; i < SLABS_PER_SS; i++) {
        counted += whole[i]->touched_pages == SLAB_PAGES;
        resident += pages_resident(whole[i]->start, SLAB_PAGES);
    }
    CHECK(counted == SLABS_PER_SS && resident == SLABS_PER_SS,
          "of %d slabs that took lent pages, %u count them touched, %u hold them resident",
          SLABS_PER_SS, counted, resident);
    long faults = minor_faults();
    unsigned mismatched = 0;
    for (unsigned i = 0; i < SLABS_PER_SS; i++)
        for (unsigned p = 0; p < SLAB_PAGES; p++) {
            unsigned from = KEPT + i * SLAB_PAGES + p; /* the span's last pages */
            mismatched += whole[i]->start[(size_t)p * HAK_PAGE_SIZE + 7] != (char)(from % 251 + 1);
        }
    CHECK(mismatched == 0 && minor_faults() - faults < 16,
          "the slabs do not hold the span's last pages (%u pages differ) or faulted (%ld)",
          mismatched, minor_faults() - faults);
    uint64_t spans = 0;
    CHECK(hak_hot_span_retained(0, &spans) == (size_t)KEPT * HAK_PAGE_SIZE && spans == 1 &&
              pages_resident(span_start, KEPT) &&
              span_start[(size_t)(KEPT - 1) * HAK_PAGE_SIZE] == (char)KEPT &&
              !unit_page_resident(span_start + (size_t)KEPT * HAK_PAGE_SIZE),
          "the span did not stay hot with its first %d pages, resident, and them alone (the box "
          "holds %llu spans, %zu bytes)",
          KEPT, (unsigned long long)spans, hak_hot_span_retained(0, &spans));
    /* The lent range is a mapping of its own, beside the header's (on
     * Linux 6.18); retired, the SuperSlab is one mapping again. */
    const char *ss = (const char *)whole[0]->chunk, *first = whole[0]->start;
    const char *end = ss + HAK_SUPERSLAB_SIZE;
    unsigned before = mappings_over(ss, end);
    bool in_region = hak_superslab_region_holds(ss);
    retire_whole_superslab();
    if (in_region)
        CHECK(mappings_over(ss, end) == 1 && !unit_page_resident(first),
              "a retired SuperSlab whose slabs took lent pages is %u mappings (%u before it "
              "retired), not one, or kept their pages",
              mappings_over(ss, end), before);
    hak_hot_span_release_all(0);
    give_back_held();
}

/* A young hot span lends to a fresh SuperSlab as a stale one does: a
 * program whose phases follow each other with no pause frees its spans
 * milliseconds before the next phase's SuperSlabs take memory.  A young
 * one with fewer pages than a slab stays, for the request it may serve
 * next. */
static void test_young_span_lends(void)
{
    enum { LONG = 2 * SLAB_PAGES, SHORT = SLAB_PAGES / 2 };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    struct hak_slab *three[3];
    arena_spans_side_by_side(three, (const uint32_t[]){LONG, 1, SHORT}, 3);
    struct hak_slab *longer = three[0], *fence = three[1], *shorter = three[2];
    memset(longer->start, 4, (size_t)LONG * HAK_PAGE_SIZE);
    memset(shorter->start, 5, (size_t)SHORT * HAK_PAGE_SIZE);
    longer->kind = shorter->kind = HAK_SLAB_MID;
    longer->touched_pages = LONG;
    shorter->touched_pages = SHORT;
    hak_hot_span_put(shorter); /* the older of the two */
    hak_hot_span_put(longer);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)LONG * HAK_PAGE_SIZE &&
              whole[0]->touched_pages == SLAB_PAGES && whole[0]->start[0] == 4,
          "a fresh SuperSlab took %llu bytes of a young span's, not its %d pages",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), LONG);
    CHECK(box_bytes() == (size_t)SHORT * HAK_PAGE_SIZE && unit_page_resident(shorter->start),
          "the young span shorter than a slab did not stay hot (the box holds %zu bytes)",
          box_bytes());
    retire_whole_superslab();
    hak_hot_span_release_all(0);
    hak_page_arena_free(fence);
    give_back_held();
}

/* The free slabs of a SuperSlab in use lend their pages to a fresh span
 * where no spare has any: the small classes' caches keep a slab or two in
 * use in many SuperSlabs, whose free slabs would otherwise stay resident
 * through a phase of bigger blocks.  Taken again while the box holds
 * spans, a slab that lent takes their pages back, with the other slabs
 * that lent, rather than fault its own in. */
static void test_in_use_slabs_lend_and_take_back(void)
{
    enum { LENDERS = 4, SPAN = LENDERS * SLAB_PAGES };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    take_whole_superslab(); /* all its slabs the test's, LENDERS of them given back */
    for (unsigned i = 1; i <= LENDERS; i++) {
        fill_slab(whole[i], i, SLAB_PAGES);
        hak_shared_pool_give(whole[i]);
    }
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *span = arena_span(SPAN);
    unsigned clean = 0, emptied = 0;
    for (unsigned i = 1; i <= LENDERS; i++) {
        clean += page_lent_clean(span->start + (size_t)(i - 1) * HAK_SLAB_SIZE, i * SLAB_PAGES);
        emptied += whole[i]->touched_pages == 0 && !unit_page_resident(whole[i]->start);
    }
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)SPAN * HAK_PAGE_SIZE &&
              clean == LENDERS && emptied == LENDERS,
          "a span took %llu bytes of the free slabs of a SuperSlab in use, not their %d pages "
          "(%u hold them, %u slabs gave them up)",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), SPAN, clean, emptied);

    memset(span->start, 6, (size_t)SPAN * HAK_PAGE_SIZE);
    span->kind = HAK_SLAB_MID;
    span->touched_pages = SPAN;
    hak_hot_span_put(span);
    lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    long faults = minor_faults();
    struct hak_slab *slab = take_from_whole_superslab();
    unsigned filled = 0;
    for (unsigned i = 1; i <= LENDERS; i++)
        filled += whole[i]->touched_pages == SLAB_PAGES &&
                  pages_resident(whole[i]->start, SLAB_PAGES) && whole[i]->start[0] == 6;
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)SPAN * HAK_PAGE_SIZE &&
              filled == LENDERS && box_bytes() == 0 && minor_faults() - faults < 16,
          "a slab that lent, taken again, took %llu bytes of the box's span, not %d pages "
          "(%u slabs hold them; %zu bytes hot; %ld faults)",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), SPAN, filled,
          box_bytes(), minor_faults() - faults);
    give_back_others();
    hak_shared_pool_give(slab);
    for (unsigned i = 0; i < SLABS_PER_SS; i++)
        if (i == 0 || i > LENDERS)
            hak_shared_pool_give(whole[i]);
    hak_shared_pool_release(0);
    hak_hot_span_release_all(0);
}

/* A span that is to take lent pages starts on a grain line, the pages
 * before it left free in the arena (page_arena.c), so that every range
 * moved into it lands on the grain (mappings.h). */
static void test_lent_span_starts_on_the_grain(void)
{
    enum { PAGES = HAK_ARENA_USABLE_PAGES - SLAB_PAGES }; /* a chunk of its own */
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0);
    leave_stale_spare(1, SLAB_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *span = arena_span(PAGES);
    const struct hak_arena_chunk *chunk = (const struct hak_arena_chunk *)span->chunk;
    char *usable = (char *)chunk + (size_t)HAK_ARENA_HEADER_PAGES * HAK_PAGE_SIZE;
    char *line = (char *)hak_lend_grain_up((uintptr_t)usable);
    CHECK(span->start == line && hak_stat_read(HAK_STAT_LENT_BYTES) - lent == HAK_SLAB_SIZE,
          "a span that took %llu bytes of a stale spare's starts %td pages from its chunk's "
          "first grain line",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent),
          (span->start - line) / (ptrdiff_t)HAK_PAGE_SIZE);
    const struct hak_slab *before = chunk->page_slab[HAK_ARENA_HEADER_PAGES];
    CHECK(line == usable || (before->kind == HAK_SLAB_FREE_SPAN && before->start == usable &&
                             before->pages == (size_t)(line - usable) / HAK_PAGE_SIZE),
          "the pages before the grain line are not a free span of the arena");
    arena_free_clean(span);
    hak_shared_pool_release(0);
    hak_page_arena_release_free(0);
}

/* A span lends its last resident pages first, in whole grains
 * (HAK_LEND_GRAIN): the SuperSlab's slabs take whole ranges, which lend on
 * whole again.  Where a range moved in starts or ends among them, from
 * grain line to grain line: the pages before its first line stay, hot
 * (young: a stale span with no grain left goes back), those past its last
 * go back to the kernel. */
static void test_span_lends_whole_grains(void)
{
    enum {
        BEFORE = 5,
        GRAINS = 2,
        AFTER = 3,
        LENT = GRAINS + 1,
        TOUCHED = BEFORE + GRAINS * SLAB_PAGES + AFTER
    };
    hak_hot_span_release_all(0);
    leave_stale_spare(LENT, SLAB_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *lent_to = arena_span((LENT + 1) * SLAB_PAGES);
    if (hak_stat_read(HAK_STAT_LENT_BYTES) - lent != LENT * HAK_SLAB_SIZE ||
        (uintptr_t)lent_to->start % HAK_LEND_GRAIN)
        hard_error("a span did not take %d slabs of a stale spare from a grain line", LENT);
    /* From BEFORE pages short of a grain line, lent pages up to the one
     * after the next, where the range moved in ends, then fresh ones. */
    struct hak_slab *two[2];
    cut_side_by_side(lent_to, two, (const uint32_t[]){SLAB_PAGES - BEFORE, 0}, 2);
    arena_free_clean(two[0]);
    struct hak_slab *span = two[1];
    char *start = span->start;
    for (uint32_t p = 0; p < TOUCHED; p++)
        memset(start + (size_t)p * HAK_PAGE_SIZE, (int)(p + 1), HAK_PAGE_SIZE);
    hold_free_slabs_in_use();
    span->kind = HAK_SLAB_MID;
    span->touched_pages = TOUCHED;
    hak_hot_span_put(span);
    lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == GRAINS * HAK_SLAB_SIZE &&
              whole[0]->start[0] == (char)(BEFORE + 1) &&
              whole[1]->start[0] == (char)(BEFORE + SLAB_PAGES + 1),
          "a span of %d touched pages, %d before a grain line, lent %llu bytes, not its %d "
          "grains",
          TOUCHED, BEFORE, (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), GRAINS);
    CHECK(box_bytes() == (size_t)BEFORE * HAK_PAGE_SIZE && pages_resident(start, BEFORE),
          "the span did not keep its %d pages before the grain line hot (%zu bytes in the box)",
          BEFORE, box_bytes());
    bool after_resident = false;
    for (unsigned p = 0; p < AFTER; p++)
        after_resident |=
            unit_page_resident(start + (size_t)(BEFORE + GRAINS * SLAB_PAGES + p) * HAK_PAGE_SIZE);
    CHECK(!after_resident, "the span's touched pages past its last grain line stayed resident");
    retire_whole_superslab();
    hak_hot_span_release_all(0);
    give_back_held();
}

/* A span that faulted its pages in, one mapping of its chunk, lends its
 * last touched pages in whole grains from any page: the move leaves that
 * mapping whole (mappings.h).  It keeps the pages before them, hot, and
 * gives none back. */
static void test_faulted_span_lends_from_any_page(void)
{
    enum { ODD = 3, KEPT = 8, GRAINS = 2, TOUCHED = KEPT + GRAINS * SLAB_PAGES };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0); /* nothing lends to the span */
    hold_free_slabs_in_use();
    /* A chunk of its own (nothing moved into it since it was mapped), from
     * ODD pages past its first span. */
    struct hak_slab *two[2];
    cut_side_by_side(arena_span(HAK_ARENA_USABLE_PAGES), two, (const uint32_t[]){ODD, 0}, 2);
    hak_page_arena_free(two[0]);
    struct hak_slab *span = two[1];
    char *start = span->start;
    for (uint32_t p = 0; p < TOUCHED; p++)
        memset(start + (size_t)p * HAK_PAGE_SIZE, (int)(p + 1), HAK_PAGE_SIZE);
    span->kind = HAK_SLAB_MID;
    span->touched_pages = TOUCHED;
    hak_hot_span_put(span);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == GRAINS * HAK_SLAB_SIZE &&
              whole[0]->start[0] == (char)(KEPT + 1) &&
              whole[1]->start[0] == (char)(KEPT + SLAB_PAGES + 1),
          "a span faulted in at an odd page lent %llu bytes, not its last %d grains' worth",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), GRAINS);
    CHECK(box_bytes() == (size_t)KEPT * HAK_PAGE_SIZE && pages_resident(start, KEPT),
          "the span did not keep its first %d pages hot (%zu bytes in the box)", KEPT, box_bytes());
    CHECK(mappings_over(start, start + (size_t)TOUCHED * HAK_PAGE_SIZE) == 1,
          "the span's chunk is %u mappings over the pages it lent from, not one",
          mappings_over(start, start + (size_t)TOUCHED * HAK_PAGE_SIZE));
    retire_whole_superslab();
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0);
    give_back_held();
}

/* A SuperSlab in use whose move the kernel failed (EFAULT: at a mapping
 * the program made, say) lends no more until it is mapped anew: the spans
 * after take fresh pages, with no move tried again at each. */
static void test_in_use_failed_move_ends_its_lends(void)
{
    enum { LENDERS = 4 };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    take_whole_superslab();
    for (unsigned i = 1; i <= LENDERS; i++) {
        fill_slab(whole[i], i, SLAB_PAGES);
        hak_shared_pool_give(whole[i]);
    }
    mremap_refused = refuse_all;
    mremap_refusal = EFAULT;
    unsigned refused = mremap_refusals;
    struct hak_slab *spans[LENDERS];
    for (unsigned i = 0; i < LENDERS; i++)
        spans[i] = arena_span(SLAB_PAGES);
    mremap_refused = kernel_refuses;
    CHECK(mremap_refusals == refused + 1,
          "a SuperSlab in use whose move failed was tried %u times, not once",
          mremap_refusals - refused);
    for (unsigned i = 0; i < LENDERS; i++)
        arena_free_clean(spans[i]);
    for (unsigned i = 0; i < SLABS_PER_SS; i++)
        if (i == 0 || i > LENDERS)
            hak_shared_pool_give(whole[i]);
    hak_shared_pool_release(0);
}

/* Ranges moved between the two halves of a mapping of the test's, counted
 * live as the allocator's (hak_os_lend), until half the bound on them
 * lives (hak_os_lent_ranges_to_spare); returns how many. */
static unsigned live_ranges_to_half(char *from, char *to, unsigned pages)
{
    unsigned count = 0;
    while (hak_os_lent_ranges_to_spare()) {
        if (count == pages)
            hard_error("%u moved ranges left the allocator ranges to spare", pages);
        if (hak_os_lend(from + (size_t)count * HAK_PAGE_SIZE, HAK_PAGE_SIZE,
                        to + (size_t)count * HAK_PAGE_SIZE) != HAK_LENT)
            hard_error("the kernel did not move page %u of the test's", count);
        count++;
    }
    return count;
}

/* A SuperSlab in use whose slab to take has no page fills its free slabs
 * from the box (hak_shared_pool_take) only while half the moved ranges the
 * process allows are left: those moved into a SuperSlab live until it
 * retires, and one kept in use would otherwise take them all, and every
 * lend after would be refused.  Past half, the slab faults its pages in
 * and the box keeps its span; with the ranges back, the fill takes it. */
static void test_fills_in_use_stop_at_half_the_ranges(void)
{
    enum { LENDERS = 4, SPAN = LENDERS * SLAB_PAGES, MOVES = 4096 };
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0); /* the chunk a move failed out of, if it holds no span */
    hak_shared_pool_release(0);
    hold_free_slabs_in_use(); /* whose slabs with no page would take the box */
    take_whole_superslab();
    for (unsigned i = 1; i <= LENDERS; i++) {
        if (whole[i]->touched_pages != 0)
            hard_error("a fresh SuperSlab's slab %u has pages", i);
        hak_shared_pool_give(whole[i]);
    }
    char *from = mmap(NULL, 2 * (size_t)MOVES * HAK_PAGE_SIZE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (from == MAP_FAILED)
        hard_error("mmap of %d pages failed", 2 * MOVES);
    char *to = from + (size_t)MOVES * HAK_PAGE_SIZE;
    unsigned moves = live_ranges_to_half(from, to, MOVES);
    CHECK(hak_os_can_lend(), "lending stopped with half the moved ranges live (%u of the test's)",
          moves);
    for (int pass = 0; pass < 2; pass++) {
        /* A span of its own for each pass, put right before its take. */
        hak_hot_span_release_all(0);
        struct hak_slab *span = arena_span_that_lends(SPAN);
        memset(span->start, 6, (size_t)SPAN * HAK_PAGE_SIZE);
        span->kind = HAK_SLAB_MID;
        span->touched_pages = SPAN;
        hak_hot_span_put(span);
        uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
        struct hak_slab *slab = take_from_whole_superslab();
        unsigned filled = 0;
        for (unsigned i = 1; i <= LENDERS; i++)
            filled += whole[i]->touched_pages == SLAB_PAGES && whole[i]->start[0] == 6;
        uint64_t moved = hak_stat_read(HAK_STAT_LENT_BYTES) - lent;
        if (pass == 0)
            CHECK(moved == 0 && filled == 0 && box_bytes() == (size_t)SPAN * HAK_PAGE_SIZE,
                  "with half the moved ranges live, a SuperSlab in use took %llu bytes of the "
                  "box (%u slabs filled, %zu bytes still hot)",
                  (unsigned long long)moved, filled, box_bytes());
        else
            CHECK(moved == (uint64_t)SPAN * HAK_PAGE_SIZE && filled == LENDERS && box_bytes() == 0,
                  "with the moved ranges back, a SuperSlab in use took %llu bytes of the box, "
                  "not %d pages (%u slabs filled, %zu bytes still hot)",
                  (unsigned long long)moved, SPAN, filled, box_bytes());
        give_back_others();
        hak_shared_pool_give(slab);
        if (pass == 0) {
            hak_os_forget_lent(moves);
            munmap(from, 2 * (size_t)MOVES * HAK_PAGE_SIZE);
        }
    }
    for (unsigned i = 0; i < SLABS_PER_SS; i++)
        if (i == 0 || i > LENDERS)
            hak_shared_pool_give(whole[i]);
    hak_shared_pool_release(0);
    hak_hot_span_release_all(0);
    hak_page_arena_release_free(0);
    give_back_held();
}

/* A stale hot span with fewer resident pages than a slab lends none to a
 * fresh SuperSlab (HAK_LEND_GRAIN): they go back, as where none lends,
 * and the SuperSlab's slabs fault in their own. */
static void test_span_short_of_a_slab_lends_none(void)
{
    enum { TOUCHED = SLAB_PAGES / 2 };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    struct hak_slab *span = arena_span(SLAB_PAGES);
    char *start = span->start;
    memset(start, 3, (size_t)TOUCHED * HAK_PAGE_SIZE);
    span->kind = HAK_SLAB_MID;
    span->touched_pages = TOUCHED;
    hak_hot_span_put(span);
    unit_sleep_ms(2 * STALE_MS);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) == lent && box_bytes() == 0 &&
              !unit_page_resident(start) && whole[0]->touched_pages == 0,
          "a span of %d touched pages lent %llu bytes to a SuperSlab, or stayed (%zu bytes hot)",
          TOUCHED, (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), box_bytes());
    retire_whole_superslab();
    give_back_held();
}

/* A hot span merged from one whose first page alone was touched and one
 * written whole counts the second's pages as touched: a lend moves them
 * all, and no resident page reaches the PageArena, where no decommit or
 * malloc_trim would find it. */
static void test_merged_span_lends_every_resident_page(void)
{
    enum { FRONT = SLAB_PAGES, BACK = 4 * SLAB_PAGES };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    struct hak_slab *two[2];
    arena_spans_side_by_side(two, (const uint32_t[]){FRONT, BACK}, 2);
    struct hak_slab *front = two[0], *back = two[1];
    char *start = front->start;
    memset(start, 1, HAK_PAGE_SIZE);
    memset(back->start, 2, (size_t)BACK * HAK_PAGE_SIZE);
    front->kind = back->kind = HAK_SLAB_MID;
    front->touched_pages = 1;
    back->touched_pages = BACK;
    hak_hot_span_put(front);
    hak_hot_span_put(back);
    unit_sleep_ms(2 * STALE_MS);
    take_whole_superslab();
    uint64_t spans = 0;
    unsigned resident = 0;
    for (unsigned p = 0; p < FRONT + BACK; p++)
        resident += unit_page_resident(start + (size_t)p * HAK_PAGE_SIZE);
    CHECK(resident == 0 && hak_hot_span_retained(0, &spans) == 0,
          "a merged span lent part of its resident pages: %u stayed, %llu spans hot", resident,
          (unsigned long long)spans);
    retire_whole_superslab();
    give_back_held();
}

/* Spans a thread's idle cache discards as it grows in other sizes go to
 * the box stale, over its budget if need be: they were resident in the
 * cache already, and the fresh SuperSlab the thread takes next takes their
 * pages.  Evicted at once, they were decommitted while the SuperSlab
 * faulted in as many pages (bench/phases: 4.9k and 3.9k faults in its
 * second and third small phases).  The next span put young brings the box
 * within its budget again, the stale ones going first, and a miss right
 * after doubles the budget: they would have served it (bench/phases with
 * no pauses takes its Mid spans back every 60-80 ms, discarded between;
 * with their leaving not counted, the budget never grew and a third of
 * them faulted in again every round). */
static void test_discards_over_budget_wait_for_a_lend(void)
{
    enum { SS_PAGES = SLABS_PER_SS * SLAB_PAGES, YOUNG = 4 };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    size_t budget = hak_options.hot_bytes;
    hak_options.hot_bytes = (size_t)SLAB_PAGES * HAK_PAGE_SIZE;
    struct hak_slab *spans[SLABS_PER_SS];
    for (unsigned i = 0; i < SLABS_PER_SS; i++) {
        spans[i] = arena_span(SLAB_PAGES);
        memset(spans[i]->start, (int)i + 1, (size_t)SLAB_PAGES * HAK_PAGE_SIZE);
        spans[i]->kind = HAK_SLAB_MID;
        spans[i]->touched_pages = SLAB_PAGES;
    }
    for (unsigned i = 1; i < SLABS_PER_SS; i++)
        if (spans[i]->start != spans[i - 1]->start + (size_t)SLAB_PAGES * HAK_PAGE_SIZE)
            hard_error("the arena's spans are not side by side (a lend takes up to %d)",
                       SLABS_PER_SS);
    for (unsigned i = 0; i < SLABS_PER_SS; i++)
        hak_hot_span_discard(spans[i]);
    uint64_t count = 0;
    size_t held = hak_hot_span_retained(0, &count);
    CHECK(held == (size_t)SS_PAGES * HAK_PAGE_SIZE && count == 1,
          "discards over a budget of %d pages left %llu spans, %zu bytes, in the box, not one "
          "of their %d pages",
          SLAB_PAGES, (unsigned long long)count, held, SS_PAGES);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)SS_PAGES * HAK_PAGE_SIZE,
          "the fresh SuperSlab took %llu bytes of the discarded spans', not %d pages",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), SS_PAGES);
    retire_whole_superslab();

    /* Discarded again, then a young span put (apart: no merge): only it
     * stays. */
    struct hak_slab *three[3];
    arena_spans_side_by_side(three, (const uint32_t[]){2 * SLAB_PAGES, 1, YOUNG}, 3);
    struct hak_slab *stale = three[0], *apart = three[1], *young = three[2];
    char *stale_start = stale->start;
    memset(stale_start, 1, (size_t)2 * SLAB_PAGES * HAK_PAGE_SIZE);
    memset(young->start, 2, (size_t)YOUNG * HAK_PAGE_SIZE);
    stale->kind = young->kind = HAK_SLAB_MID;
    stale->touched_pages = 2 * SLAB_PAGES;
    young->touched_pages = YOUNG;
    hak_hot_span_discard(stale);
    hak_hot_span_put(young);
    count = 0;
    held = hak_hot_span_retained(0, &count);
    CHECK(held == (size_t)YOUNG * HAK_PAGE_SIZE && count == 1 && !unit_page_resident(stale_start),
          "a young put over the budget left %llu spans, %zu bytes, in the box (the stale span's "
          "first page %s resident), not the young one's %d pages",
          (unsigned long long)count, held, unit_page_resident(stale_start) ? "still" : "not",
          YOUNG);
    uint64_t growths = hak_stat_read(HAK_STAT_HOT_BUDGET_GROWTHS);
    CHECK(hak_hot_span_take(0, 2 * YOUNG) == NULL &&
              hak_stat_read(HAK_STAT_HOT_BUDGET_GROWTHS) == growths + 1,
          "a miss right after the discarded spans left for want of room did not double the "
          "budget");
    hak_page_arena_free(apart);
    /* The doubling undone: spans idle for the whole decay halve it. */
    uint64_t decay_ms = hak_options.decay_ms;
    hak_options.decay_ms = 0;
    hak_hot_span_release_aged(0);
    hak_options.decay_ms = decay_ms;
    hak_hot_span_release_all(0);
    hak_options.hot_bytes = budget;
    give_back_held();
}

/* A page's first word, which tells it from the others of a test. */
static uint64_t page_tag(unsigned page)
{
    return 0x7A6000000000ull + page;
}

/* Whether the pages pages at start hold those tagged 0 to pages - 1, each
 * once, resident before they were read. */
static bool holds_tagged_pages(const char *start, unsigned pages)
{
    static bool seen[4 * HAK_SUPERSLAB_PAGES];
    memset(seen, 0, pages);
    if (!pages_resident(start, pages))
        return false;
    for (unsigned p = 0; p < pages; p++) {
        uint64_t tag = *(const uint64_t *)(start + (size_t)p * HAK_PAGE_SIZE) - page_tag(0);
        if (tag >= pages || seen[tag])
            return false;
        seen[tag] = true;
    }
    return true;
}

/* span into the HotSpanBox, all its pages touched, tagged from first on. */
static void put_tagged(struct hak_slab *span, unsigned first)
{
    for (uint32_t p = 0; p < span->pages; p++)
        *(uint64_t *)(span->start + (size_t)p * HAK_PAGE_SIZE) = page_tag(first + p);
    span->kind = HAK_SLAB_MID;
    span->touched_pages = span->pages;
    hak_hot_span_put(span);
}

/* Pages go from spans to a SuperSlab, back to a span, and on to a
 * SuperSlab again, every time all of them, with no move refused: two
 * stale spans lend to a fresh SuperSlab, whose first slabs are then two
 * kernel mappings, side by side; stale as a spare, it lends those slabs to
 * one span, which is then two mappings in its chunk; that span, stale,
 * lends to a SuperSlab again.  Before Linux 6.17, the kernel this program
 * may play, each container's mappings move one at a time (mappings.h). */
static void test_pages_move_back_and_forth(void)
{
    enum { FIRST = 2 * SLAB_PAGES, SECOND = 3 * SLAB_PAGES, PAGES = FIRST + SECOND, ROUNDS = 3 };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    unsigned refused = mremap_refusals;
    struct hak_slab *three[3];
    arena_spans_side_by_side(three, (const uint32_t[]){FIRST, SLAB_PAGES, SECOND}, 3);
    struct hak_slab *apart = three[1]; /* no merge of the two */
    put_tagged(three[0], 0);
    put_tagged(three[2], FIRST);
    unit_sleep_ms(2 * STALE_MS);
    for (unsigned round = 0; round < ROUNDS; round++) {
        uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
        take_whole_superslab();
        CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)PAGES * HAK_PAGE_SIZE &&
                  holds_tagged_pages(whole[0]->start, PAGES),
              "round %u: a fresh SuperSlab took %llu bytes of stale spans', not their %d pages, "
              "or not those pages",
              round, (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), PAGES);
        /* Slabs that carved no blocks: a lend clears no free-list words. */
        for (unsigned i = 0; i < SLABS_PER_SS; i++) {
            whole[i]->block_size = 0;
            hak_shared_pool_give(whole[i]);
        }
        unit_sleep_ms(2 * STALE_MS);
        lent = hak_stat_read(HAK_STAT_LENT_BYTES);
        struct hak_slab *span = arena_span(PAGES);
        CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)PAGES * HAK_PAGE_SIZE &&
                  holds_tagged_pages(span->start, PAGES),
              "round %u: a span took %llu bytes of the stale spare's, not its %d pages, or not "
              "those pages",
              round, (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), PAGES);
        span->kind = HAK_SLAB_MID;
        hak_hot_span_put(span);
        unit_sleep_ms(2 * STALE_MS);
    }
    CHECK(mremap_refusals == refused, "%u moves of pages were refused", mremap_refusals - refused);
    hak_page_arena_free(apart);
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    give_back_held();
}

/* A span that took a spare's pages in its front and faulted in the rest
 * lends them all, two mappings, moved one at a time where the kernel
 * moves no more: where the lent range ends, a mapping starts. */
static void test_partly_lent_span_lends_whole(void)
{
    enum { LENT = 2 * SLAB_PAGES, PAGES = 2 * LENT };
    hak_hot_span_release_all(0);
    leave_stale_spare(2, SLAB_PAGES);
    unsigned refused = mremap_refusals;
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *span = arena_span(PAGES);
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)LENT * HAK_PAGE_SIZE,
          "a span took %llu bytes of a stale spare's, not its %d pages",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), LENT);
    for (unsigned i = 0; i < SLABS_PER_SS; i++)
        whole[i]->block_size = 0; /* retired, they carve nothing */
    hold_free_slabs_in_use();
    put_tagged(span, 0);
    unit_sleep_ms(2 * STALE_MS);
    lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == (uint64_t)PAGES * HAK_PAGE_SIZE &&
              holds_tagged_pages(whole[0]->start, PAGES) && mremap_refusals == refused,
          "a span of %d lent pages and %d faulted in lent %llu bytes to a SuperSlab, %u moves "
          "refused",
          LENT, PAGES - LENT, (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent),
          mremap_refusals - refused);
    retire_whole_superslab();
    hak_hot_span_release_all(0);
    give_back_held();
}

/* A range moved over several mappings lands as as many, and the bits of
 * the container it lands in know them all: a span over them lends from
 * grain line to grain line, not from any page as one of a single mapping
 * does, and no mapping of the SuperSlab it lends to starts off the grain.
 * Three stale spans lend to a fresh SuperSlab's first slabs, three
 * mappings; stale as a spare, it lends them to a span in one move; a span
 * cut from that one at an odd page, its last pages short of a grain line,
 * lends to the next SuperSlab. */
static void test_span_over_moved_mappings_lends_on_the_grain(void)
{
    enum { SLABS = 3, ODD = 5, SHORT = 3, TOUCHED = SLABS * SLAB_PAGES - ODD - SHORT };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    struct hak_slab *five[2 * SLABS - 1];
    arena_spans_side_by_side(
        five, (const uint32_t[]){SLAB_PAGES, SLAB_PAGES, SLAB_PAGES, SLAB_PAGES, SLAB_PAGES},
        2 * SLABS - 1);
    for (unsigned i = 0; i < SLABS; i++)
        put_tagged(five[2 * i], i * SLAB_PAGES);
    unit_sleep_ms(2 * STALE_MS);
    take_whole_superslab();
    const char *ss_slabs = whole[0]->start;
    if (mappings_over(ss_slabs, ss_slabs + SLABS * HAK_SLAB_SIZE) != SLABS)
        hard_error("a fresh SuperSlab's first %d slabs, lent by %d spans, are %u mappings", SLABS,
                   SLABS, mappings_over(ss_slabs, ss_slabs + SLABS * HAK_SLAB_SIZE));
    for (unsigned i = 0; i < SLABS_PER_SS; i++) {
        whole[i]->block_size = 0; /* they carved no blocks */
        hak_shared_pool_give(whole[i]);
    }
    give_back_held();
    unit_sleep_ms(2 * STALE_MS);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    struct hak_slab *over = arena_span(SLABS * SLAB_PAGES);
    if (hak_stat_read(HAK_STAT_LENT_BYTES) - lent != SLABS * HAK_SLAB_SIZE ||
        (uintptr_t)over->start % HAK_LEND_GRAIN)
        hard_error("a span did not take the stale spare's %d slabs from a grain line", SLABS);
    const char *chunk = (const char *)over->chunk;
    struct hak_slab *two[2];
    cut_side_by_side(over, two, (const uint32_t[]){ODD, 0}, 2);
    arena_free_clean(two[0]);
    struct hak_slab *span = two[1];
    hak_os_decommit(span->start + (size_t)TOUCHED * HAK_PAGE_SIZE, (size_t)SHORT * HAK_PAGE_SIZE);
    span->kind = HAK_SLAB_MID;
    span->touched_pages = TOUCHED;
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    hak_hot_span_put(span);
    lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    const char *ss = (const char *)whole[0]->chunk;
    unsigned in_ss = mappings_off_grain(ss, ss + HAK_SUPERSLAB_SIZE);
    unsigned in_chunk = mappings_off_grain(chunk, chunk + HAK_ARENA_CHUNK_SIZE);
    CHECK(hak_stat_read(HAK_STAT_LENT_BYTES) - lent == HAK_SLAB_SIZE && in_ss == 0 && in_chunk == 0,
          "a span over %d moved mappings, from %d pages past a grain line to %d short of one, "
          "lent %llu bytes, not the one grain between, and left %u mappings of the SuperSlab "
          "and %u of its chunk off the grain",
          SLABS, ODD, SHORT, (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent), in_ss,
          in_chunk);
    retire_whole_superslab();
    hak_hot_span_release_all(0);
    for (unsigned i = 1; i < 2 * SLABS - 1; i += 2)
        hak_page_arena_free(five[i]);
    give_back_held();
}

/* The chunk of the span. */
static const void *refused_chunk;

static bool refuse_from_chunk(const void *source, size_t size)
{
    (void)size;
    return (uintptr_t)source - (uintptr_t)refused_chunk < HAK_ARENA_CHUNK_SIZE;
}

/* A move out of a chunk that failed (at a mapping the program made, say)
 * is not tried again: the span goes back decommitted, not as the oldest
 * in the box that every lend would stop at, and the chunk's other spans
 * lend nothing until it is unmapped (the next SuperSlab finds none to
 * lend, and they go back as stale spans do then). */
static void test_failed_move_ends_lends_of_its_chunk(void)
{
    enum { PAGES = SLAB_PAGES };
    hak_hot_span_release_all(0);
    hak_shared_pool_release(0);
    hold_free_slabs_in_use();
    struct hak_slab *four[4], *spans[2], *apart[2];
    arena_spans_side_by_side(four, (const uint32_t[]){PAGES, 1, PAGES, 1}, 4);
    for (unsigned i = 0; i < 2; i++) {
        spans[i] = four[2 * i];
        apart[i] = four[2 * i + 1]; /* no merge in the box */
        memset(spans[i]->start, (int)i + 1, (size_t)PAGES * HAK_PAGE_SIZE);
        spans[i]->kind = HAK_SLAB_MID;
        spans[i]->touched_pages = PAGES;
    }
    char *failing = spans[0]->start;
    refused_chunk = spans[0]->chunk;
    hak_hot_span_put(spans[0]);
    hak_hot_span_put(spans[1]);
    unit_sleep_ms(2 * STALE_MS);
    mremap_refused = refuse_from_chunk;
    mremap_refusal = EFAULT;
    unsigned refused = mremap_refusals;
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    take_whole_superslab();
    uint64_t spans_held = 0;
    size_t held = hak_hot_span_retained(0, &spans_held);
    CHECK(mremap_refusals == refused + 1 && !unit_page_resident(failing) &&
              held == (size_t)PAGES * HAK_PAGE_SIZE && spans_held == 1,
          "a span whose move failed: %u moves refused, not one, its first page %s resident, "
          "the box holds %llu spans, %zu bytes, not the other one",
          mremap_refusals - refused, unit_page_resident(failing) ? "still" : "not",
          (unsigned long long)spans_held, held);
    retire_whole_superslab();
    take_whole_superslab();
    mremap_refused = kernel_refuses;
    CHECK(mremap_refusals == refused + 1 && hak_stat_read(HAK_STAT_LENT_BYTES) == lent &&
              hak_hot_span_retained(0, &spans_held) == 0,
          "the chunk a move failed out of lent %llu bytes more (%u moves refused), or kept its "
          "stale span",
          (unsigned long long)(hak_stat_read(HAK_STAT_LENT_BYTES) - lent),
          mremap_refusals - refused);
    retire_whole_superslab();
    hak_page_arena_free(apart[0]);
    hak_page_arena_free(apart[1]);
    hak_hot_span_release_all(0);
    give_back_held();
}

int main(int argc, char **argv)
{
    (void)argc;
#ifdef TEST_LEND_OLD_KERNEL
    play_linux_6_1();
#endif
    kernel_refuses = mremap_refused;
    unit_watchdog();
    /* Residency is checked page by page: no transparent huge page may
     * fault in a span's untouched neighbours (a host or guest whose THP
     * is "always"), nor hakmem advise its chunks huge ones.  Kept across
     * the exec of rerun_with. */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        hard_error("prctl(PR_SET_THP_DISABLE) failed");
    rerun_with("HAKMEM_HUGE_PAGES", "0", argv);
    setvbuf(stdout, NULL, _IONBF, 0);
    free(malloc(1)); /* hak_init: the link keys */
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * (uint64_t)STALE_MS;
    hak_shared_pool_release(0);
    hak_page_arena_release_free(0);
    test_span_takes_spare_pages();
    test_fresh_spans_lend_ahead();
    test_short_lend_ahead_keeps_the_span();
    test_lend_ahead_takes_whole_spans();
    test_lend_ahead_ending_in_a_span();
    test_lend_ahead_within_budget();
    test_long_spans_lend_ahead();
    if (hak_superslab_region_exists()) { /* else a spare that lent leaves, unmapped */
        test_moves_carry_a_slab();
        test_young_spare_lends();
        test_in_use_slabs_lend_and_take_back();
        test_in_use_failed_move_ends_its_lends();
    }
    test_calloc_of_lent_span();
    test_locked_memory_lends_nothing();
    test_superslab_takes_span_pages();
    test_young_span_lends();
    test_lent_span_starts_on_the_grain();
    test_span_lends_whole_grains();
    test_faulted_span_lends_from_any_page();
    test_span_short_of_a_slab_lends_none();
    test_merged_span_lends_every_resident_page();
    test_discards_over_budget_wait_for_a_lend();
    test_pages_move_back_and_forth();
    test_partly_lent_span_lends_whole();
    test_span_over_moved_mappings_lends_on_the_grain();
    test_moves_stay_on_the_grain();
    test_failed_move_ends_lends_of_its_chunk();
    if (hak_superslab_region_exists())
        test_fills_in_use_stop_at_half_the_ranges();
    test_kernel_refuses();
#ifdef TEST_LEND_OLD_KERNEL
    return test_result("test_lend_old_kernel");
#else
    return test_result("test_lend");
#endif
}

/* The PageArena and the HotSpanBox in front of it: spans are disjoint pages
 * of registered chunks, also while threads allocate and free neighbours at
 * once, freed spans coalesce back into whole chunks, and the box hands
 * freed memory back, merged with its hot neighbours and cut to the length
 * asked for, also while threads take and put spans at once, in a shard
 * for each thread, until its byte budget pushes it out to the arena,
 * decommitted; malloc_trim's release of all of it, and the release of the
 * stale spans before fresh memory is mapped for small blocks.
 *
 * The test owns node 0's arena: the program allocates no Mid or L25 blocks
 * (stdout is unbuffered, so stdio does not either). */
#include <string.h>

#include "arena/hot_span_box.h"
#include "arena/meta.h"
#include "arena/page_arena.h"
#include "arena/page_map.h"
#include "options.h"
#include "os.h"
#include "stats.h"
#include "unit.h"

#define MAX_SPANS 64

static char *chunk_base(const struct hak_slab *span)
{
    return (char *)span->chunk;
}

static struct hak_slab *page_owner(const struct hak_slab *span, uint32_t page)
{
    return ((struct hak_chunk *)span->chunk)->page_slab[page];
}

static struct hak_slab *alloc_span(uint32_t pages)
{
    struct hak_slab *span = hak_page_arena_alloc(0, pages);
    if (!span)
        hard_error("hak_page_arena_alloc(0, %u) failed", pages);
    return span;
}

/* The arena takes back clean spans only. */
static void free_span(struct hak_slab *span)
{
    madvise(span->start, (size_t)span->pages * HAK_PAGE_SIZE, MADV_DONTNEED);
    hak_page_arena_free(span);
}

static void check_span(struct hak_slab *span, uint32_t pages)
{
    CHECK(span->pages == pages, "asked %u pages, got %u", pages, span->pages);
    CHECK(span->node == 0 && span->chunk && span->chunk->kind == HAK_CHUNK_ARENA &&
              span->chunk->node == 0,
          "span of %u pages: not in a node 0 arena chunk", pages);
    if (!span->chunk)
        return;
    char *chunk = chunk_base(span);
    CHECK(
        ((uintptr_t)chunk & (HAK_ARENA_CHUNK_SIZE - 1)) == 0,
        "arena chunk %p not as aligned as its 4 MiB (free finds its page entries from the address)",
        (void *)chunk);
    CHECK(span->start == chunk + (size_t)span->first_page * HAK_PAGE_SIZE,
          "span start %p is not page %u of its chunk", (void *)span->start, span->first_page);
    CHECK(span->first_page >= HAK_ARENA_HEADER_PAGES &&
              span->first_page + span->pages <= HAK_ARENA_PAGES,
          "span of pages [%u, %u) overlaps the header or runs past its chunk", span->first_page,
          span->first_page + span->pages);
    CHECK(span->end == span->start + (size_t)pages * HAK_PAGE_SIZE, "span end is wrong");
    CHECK(hak_page_map_lookup(span->start) == span->chunk &&
              hak_page_map_lookup(span->end - 1) == span->chunk,
          "span of %u pages: the page map does not lead to its chunk", pages);
    for (uint32_t p = 0; p < span->pages && span->first_page + p < HAK_ARENA_PAGES; p++)
        if (page_owner(span, span->first_page + p) != span) {
            CHECK(false, "span of %u pages: page %u of it maps to another slab", pages, p);
            break;
        }
    for (uint32_t p = 0; p < HAK_ARENA_HEADER_PAGES; p++)
        CHECK(page_owner(span, p) == &hak_invalid_slab, "header page %u is not invalid", p);
    size_t bytes = (size_t)pages * HAK_PAGE_SIZE;
    size_t dirty = nonzero_offset(span->start, bytes);
    CHECK(dirty == PATTERN_INTACT, "span of %u pages handed out dirty at offset %zu", pages, dirty);
}

static void check_disjoint(struct hak_slab **spans, size_t count)
{
    for (size_t i = 0; i < count; i++)
        for (size_t j = i + 1; j < count; j++)
            CHECK(spans[i]->end <= spans[j]->start || spans[j]->end <= spans[i]->start,
                  "spans %zu [%p, %p) and %zu [%p, %p) overlap", i, (void *)spans[i]->start,
                  (void *)spans[i]->end, j, (void *)spans[j]->start, (void *)spans[j]->end);
}

/* Each span holds its own pattern: one that another span overwrote shows. */
static void fill_spans(struct hak_slab **spans, size_t count)
{
    for (size_t i = 0; i < count; i++)
        fill_pattern(spans[i]->start, (size_t)spans[i]->pages * HAK_PAGE_SIZE, (unsigned)i);
}

static void check_spans_filled(struct hak_slab **spans, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t bytes = (size_t)spans[i]->pages * HAK_PAGE_SIZE;
        size_t bad = pattern_mismatch(spans[i]->start, bytes, (unsigned)i);
        CHECK(bad == PATTERN_INTACT, "span %zu was overwritten at offset %zu", i, bad);
    }
}

/* After everything was freed: one free span covers the chunk's usable pages
 * and allocating that much again takes the same chunk, no new one. */
static void check_chunk_whole(struct hak_chunk_head *chunk, const char *order)
{
    struct hak_chunk *table = (struct hak_chunk *)chunk;
    struct hak_slab *free_span_desc = table->page_slab[HAK_ARENA_HEADER_PAGES];
    CHECK(free_span_desc->kind == HAK_SLAB_FREE_SPAN &&
              free_span_desc->pages == HAK_ARENA_USABLE_PAGES,
          "%s: freed chunk is %u pages of kind %u, not one free span of %u", order,
          free_span_desc->pages, free_span_desc->kind, (unsigned)HAK_ARENA_USABLE_PAGES);
    for (uint32_t p = HAK_ARENA_HEADER_PAGES; p < HAK_ARENA_PAGES; p++)
        if (table->page_slab[p] != free_span_desc) {
            CHECK(false, "%s: page %u of the freed chunk is not in its one free span", order, p);
            break;
        }
    uint64_t chunks_before = hak_stat_read(HAK_STAT_ARENA_CHUNKS);
    struct hak_slab *whole = alloc_span(HAK_ARENA_USABLE_PAGES);
    CHECK(whole->chunk == chunk && whole->first_page == HAK_ARENA_HEADER_PAGES,
          "%s: a whole chunk's worth of pages did not come from the freed chunk", order);
    CHECK(hak_stat_read(HAK_STAT_ARENA_CHUNKS) == chunks_before,
          "%s: the freed pages did not coalesce, a new chunk was mapped", order);
    check_span(whole, HAK_ARENA_USABLE_PAGES);
    free_span(whole);
}

enum free_order { ASCENDING, DESCENDING, ALTERNATE, SHUFFLED, ORDERS };
static const char *const order_names[ORDERS] = {"ascending", "descending", "alternate", "shuffled"};

static void free_in_order(struct hak_slab **spans, size_t count, enum free_order order)
{
    size_t sequence[MAX_SPANS];
    size_t n = 0;
    switch (order) {
    case ASCENDING:
        for (size_t i = 0; i < count; i++)
            sequence[n++] = i;
        break;
    case DESCENDING:
        for (size_t i = count; i-- > 0;)
            sequence[n++] = i;
        break;
    case ALTERNATE:
        /* The odd ones last: each then merges with a free span on both sides. */
        for (size_t i = 0; i < count; i += 2)
            sequence[n++] = i;
        for (size_t i = 1; i < count; i += 2)
            sequence[n++] = i;
        break;
    case SHUFFLED: {
        uint64_t state = 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < count; i++)
            sequence[n++] = i;
        for (size_t i = count - 1; i > 0; i--) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t j = (size_t)(state >> 33) % (i + 1);
            size_t swap = sequence[i];
            sequence[i] = sequence[j];
            sequence[j] = swap;
        }
        break;
    }
    case ORDERS:
        break;
    }
    for (size_t i = 0; i < n; i++)
        free_span(spans[sequence[i]]);
}

/* Spans of one chunk, allocated in address order, freed in each order. */
static void test_coalescing(void)
{
    static const uint32_t sizes[] = {1, 2, 3, 5, 8, 16, 17, 64, 1, 100, 4, 256, 7, 33, 2, 128};
    size_t count = sizeof(sizes) / sizeof(sizes[0]);
    for (enum free_order order = 0; order < ORDERS; order++) {
        struct hak_slab *spans[MAX_SPANS];
        for (size_t i = 0; i < count; i++) {
            spans[i] = alloc_span(sizes[i]);
            check_span(spans[i], sizes[i]);
        }
        for (size_t i = 1; i < count; i++)
            CHECK(spans[i]->chunk == spans[0]->chunk,
                  "%s: spans totalling less than a chunk came from two chunks", order_names[order]);
        check_disjoint(spans, count);
        fill_spans(spans, count);
        check_spans_filled(spans, count);
        struct hak_chunk_head *chunk = spans[0]->chunk;
        free_in_order(spans, count, order);
        check_chunk_whole(chunk, order_names[order]);
    }
}

/* More than a chunk's worth: several chunks, and all but one spare go back
 * to the OS once everything is freed. */
static void test_several_chunks(void)
{
    struct hak_slab *spans[MAX_SPANS];
    size_t count = 0;
    for (uint32_t total = 0; total < 5 * HAK_ARENA_USABLE_PAGES / 2; count++) {
        uint32_t pages = 64 + (uint32_t)(count * 37 % 200);
        spans[count] = alloc_span(pages);
        check_span(spans[count], pages);
        total += pages;
    }
    check_disjoint(spans, count);
    fill_spans(spans, count);
    check_spans_filled(spans, count);

    struct hak_chunk_head *chunks[MAX_SPANS];
    size_t chunk_count = 0;
    for (size_t i = 0; i < count; i++) {
        size_t c = 0;
        while (c < chunk_count && chunks[c] != spans[i]->chunk)
            c++;
        if (c == chunk_count)
            chunks[chunk_count++] = spans[i]->chunk;
    }
    CHECK(chunk_count >= 3, "2.5 chunks' worth of spans came from %zu chunks", chunk_count);

    free_in_order(spans, count, SHUFFLED);
    size_t still_mapped = 0;
    for (size_t c = 0; c < chunk_count; c++)
        still_mapped += hak_page_map_lookup(chunks[c]) == chunks[c];
    CHECK(still_mapped == 1, "%zu of %zu wholly free chunks kept instead of one spare",
          still_mapped, chunk_count);
}

/* Past an arena's first two chunks, one mapping makes several (the spares
 * wait mapped, untouched, for the next chunks), and malloc_trim's release
 * unmaps the spares with the free chunks.  Mapped bytes grow by a chunk or
 * more at each mapping; the metadata's own mappings are smaller. */
static void test_chunk_batches(void)
{
    enum { CHUNKS = 12 };
    hak_page_arena_release_free(0);
    uint64_t before = hak_stat_mapped_now();
    struct hak_slab *spans[CHUNKS];
    unsigned mappings = 0;
    for (int i = 0; i < CHUNKS; i++) {
        uint64_t mapped = hak_stat_mapped_now();
        spans[i] = alloc_span(HAK_ARENA_USABLE_PAGES);
        check_span(spans[i], HAK_ARENA_USABLE_PAGES);
        mappings += hak_stat_mapped_now() >= mapped + HAK_ARENA_CHUNK_SIZE;
        CHECK((uintptr_t)spans[i]->chunk % HAK_ARENA_CHUNK_SIZE == 0, "chunk %d at %p unaligned", i,
              (void *)spans[i]->chunk);
    }
    check_disjoint(spans, CHUNKS);
    fill_spans(spans, CHUNKS);
    check_spans_filled(spans, CHUNKS);
    if (hak_os_address_space_limited()) {
        /* Under ulimit -v, spares would count against the limit. */
        CHECK(mappings == CHUNKS, "under an address-space limit %d chunks took %u mappings", CHUNKS,
              mappings);
        for (int i = 0; i < CHUNKS; i++)
            free_span(spans[i]);
        hak_page_arena_release_free(0);
        return;
    }
    CHECK(mappings > 0 && mappings <= CHUNKS / 3, "%d whole chunks took %u mappings", CHUNKS,
          mappings);
    uint64_t in_use = hak_stat_mapped_now();
    CHECK(in_use > before + CHUNKS * (uint64_t)HAK_ARENA_CHUNK_SIZE,
          "no spare chunk mapped: %llu bytes more for %d chunks",
          (unsigned long long)(in_use - before), CHUNKS);
    /* As when an address-space limit comes into force: the spares go, and
     * the next chunk is mapped anew. */
    hak_page_arena_release_spares();
    uint64_t without_spares = hak_stat_mapped_now();
    CHECK(without_spares < in_use, "the spares stayed mapped after their release");
    struct hak_slab *extra = alloc_span(HAK_ARENA_USABLE_PAGES);
    CHECK(hak_stat_mapped_now() >= without_spares + HAK_ARENA_CHUNK_SIZE,
          "a chunk after the spares' release came from a spare");
    free_span(extra);
    for (int i = 0; i < CHUNKS; i++)
        free_span(spans[i]);
    hak_page_arena_release_free(0);
    uint64_t after = hak_stat_mapped_now();
    CHECK(after < before + HAK_ARENA_CHUNK_SIZE,
          "%llu bytes still mapped after the release (spares kept?)",
          (unsigned long long)(after - before));
    /* No spare is left: the next chunk is mapped anew. */
    struct hak_slab *next = alloc_span(HAK_ARENA_USABLE_PAGES);
    CHECK(hak_stat_mapped_now() >= after + HAK_ARENA_CHUNK_SIZE,
          "a chunk after the release came from a spare it kept");
    free_span(next);
    hak_page_arena_release_free(0);
}

/* ---- the HotSpanBox ---- */

/* A span with an allocated page right after it, so that it merges with
 * nothing put after it; the fence goes to fences. */
static struct hak_slab *alloc_fenced(uint32_t pages, struct hak_slab **fence)
{
    struct hak_slab *span = alloc_span(pages);
    *fence = alloc_span(1);
    if ((*fence)->start != span->end)
        hard_error("the arena did not place a page right after a span of %u pages", pages);
    return span;
}

/* A span of front_pages with one of back_pages right after it, and a fence
 * after that (alloc_fenced); returns the front one. */
static struct hak_slab *alloc_side_by_side(uint32_t front_pages, uint32_t back_pages,
                                           struct hak_slab **back, struct hak_slab **fence)
{
    struct hak_slab *front = alloc_span(front_pages);
    *back = alloc_fenced(back_pages, fence);
    if ((*back)->start != front->end)
        hard_error("the arena did not place two spans side by side");
    return front;
}

static void check_hot(struct hak_slab *span, char *start, uint32_t pages, unsigned seed,
                      const char *what)
{
    if (!span) {
        CHECK(false, "%s: no span", what);
        return;
    }
    size_t bytes = (size_t)pages * HAK_PAGE_SIZE;
    CHECK(span->start == start && span->pages == pages && span->end == start + bytes,
          "%s: got %u pages at %p, want %u at %p", what, span->pages, (void *)span->start, pages,
          (void *)start);
    for (uint32_t p = 0; p < pages && span->first_page + p < HAK_ARENA_PAGES; p++)
        if (page_owner(span, span->first_page + p) != span) {
            CHECK(false, "%s: page %u maps to another descriptor", what, p);
            break;
        }
    CHECK(pattern_mismatch(start, bytes, seed) == PATTERN_INTACT,
          "%s: lost its contents: a hot span stays resident", what);
}

static void test_hot_take_back(void)
{
    struct hak_slab *fences[3];
    struct hak_slab *a = alloc_fenced(8, &fences[0]);
    struct hak_slab *b = alloc_fenced(8, &fences[1]);
    struct hak_slab *c = alloc_fenced(3, &fences[2]);
    char *a_start = a->start;
    fill_pattern(a->start, 8 * HAK_PAGE_SIZE, 1);
    fill_pattern(b->start, 8 * HAK_PAGE_SIZE, 2);
    fill_pattern(c->start, 3 * HAK_PAGE_SIZE, 3);

    hak_hot_span_put(a);
    CHECK(hak_hot_span_take(0, 9) == NULL, "a hot span of 8 pages was taken for 9");
    struct hak_slab *again = hak_hot_span_take(0, 8);
    CHECK(again == a, "put then take of 8 pages gave another span");
    check_hot(again, a_start, 8, 1, "put then take of 8 pages");
    CHECK(hak_hot_span_take(0, 8) == NULL, "the box gave a span it no longer holds");

    /* The most recently freed (hottest) comes back first. */
    hak_hot_span_put(a);
    hak_hot_span_put(b);
    hak_hot_span_put(c);
    CHECK(hak_hot_span_take(0, 8) == b, "the hottest span of 8 pages did not come first");
    CHECK(hak_hot_span_take(0, 8) == a, "the older span of 8 pages did not come second");
    CHECK(hak_hot_span_take(0, 3) == c, "the span of 3 pages did not come back");

    free_span(a);
    free_span(b);
    free_span(c);
    for (unsigned i = 0; i < 3; i++)
        free_span(fences[i]);
}

/* A shorter request takes the front of the shortest span long enough; the
 * rest stays hot, and the pieces merge again when they come back. */
static void test_hot_best_fit(void)
{
    struct hak_slab *fences[2];
    struct hak_slab *a = alloc_fenced(8, &fences[0]);
    struct hak_slab *c = alloc_fenced(3, &fences[1]);
    char *a_start = a->start, *c_start = c->start;
    fill_pattern(a_start, 8 * HAK_PAGE_SIZE, 1);
    fill_pattern(c_start, 3 * HAK_PAGE_SIZE, 3);
    uint64_t evictions = hak_stat_read(HAK_STAT_HOT_EVICTIONS);
    hak_hot_span_put(a);
    hak_hot_span_put(c);

    struct hak_slab *c_front = hak_hot_span_take(0, 2);
    check_hot(c_front, c_start, 2, 3, "2 pages out of hot spans of 8 and 3");
    struct hak_slab *c_rest = hak_hot_span_take(0, 1);
    check_hot(c_rest, c_start + 2 * HAK_PAGE_SIZE, 1, 3 + 2 * HAK_PAGE_SIZE / 8,
              "1 page: the rest of the span of 3");
    struct hak_slab *a_front = hak_hot_span_take(0, 5);
    check_hot(a_front, a_start, 5, 1, "5 pages out of a hot span of 8");
    struct hak_slab *a_rest = hak_hot_span_take(0, 3);
    /* The pattern's words go on from the front's. */
    check_hot(a_rest, a_start + 5 * HAK_PAGE_SIZE, 3, 1 + 5 * HAK_PAGE_SIZE / 8,
              "3 pages: the rest of the span of 8");
    CHECK(hak_hot_span_take(0, 1) == NULL, "the box gave more pages than it was given");
    if (!c_front || !c_rest || !a_front || !a_rest)
        return;

    hak_hot_span_put(a_rest);
    hak_hot_span_put(c_front);
    hak_hot_span_put(a_front);
    hak_hot_span_put(c_rest);
    struct hak_slab *a_whole = hak_hot_span_take(0, 8);
    check_hot(a_whole, a_start, 8, 1, "the pieces of the span of 8, put back");
    struct hak_slab *c_whole = hak_hot_span_take(0, 3);
    check_hot(c_whole, c_start, 3, 3, "the pieces of the span of 3, put back");
    CHECK(hak_stat_read(HAK_STAT_HOT_EVICTIONS) == evictions, "cutting and merging evicted spans");
    if (a_whole)
        free_span(a_whole);
    if (c_whole)
        free_span(c_whole);
    for (unsigned i = 0; i < 2; i++)
        free_span(fences[i]);
}

/* A front shorter than the rest takes a descriptor of its own, all its
 * pages mapped to it; the rest keeps the span's. */
/* Takes the front pages, then the rest, of the one hot span (pages pages
 * at start, filled with pattern seed), each whole and in place; the front
 * must come with descriptor front_desc (NULL: any but the rest's) and the
 * rest with rest_desc.  Both go back to the arena. */
static void take_front_and_rest(char *start, uint32_t pages, uint32_t front_pages, unsigned seed,
                                const struct hak_slab *front_desc, const struct hak_slab *rest_desc,
                                const char *what)
{
    uint32_t rest_pages = pages - front_pages;
    struct hak_slab *front = hak_hot_span_take(0, front_pages);
    struct hak_slab *rest = hak_hot_span_take(0, rest_pages);
    CHECK(front_desc ? front == front_desc : front != rest_desc,
          "%s: the front of %u pages came with descriptor %p, want %p%s", what, front_pages,
          (void *)front, (void *)(front_desc ? front_desc : rest_desc),
          front_desc ? "" : " not to be it");
    CHECK(rest == rest_desc, "%s: the rest of %u pages came with descriptor %p, want %p", what,
          rest_pages, (void *)rest, (void *)rest_desc);
    check_hot(front, start, front_pages, seed, what);
    check_hot(rest, start + (size_t)front_pages * HAK_PAGE_SIZE, rest_pages,
              seed + front_pages * HAK_PAGE_SIZE / 8, what);
    if (front)
        free_span(front);
    if (rest)
        free_span(rest);
}

static void test_hot_short_front(void)
{
    struct hak_slab *fence;
    struct hak_slab *span = alloc_fenced(8, &fence);
    char *start = span->start;
    fill_pattern(start, 8 * HAK_PAGE_SIZE, 7);
    hak_hot_span_put(span);
    take_front_and_rest(start, 8, 3, 7, NULL, span, "3 pages, then 5, out of a hot span of 8");
    free_span(fence);
}

/* Neighbours put in any order become one span; the descriptors left over
 * say so. */
static void test_hot_merge(void)
{
    struct hak_slab *fence;
    struct hak_slab *x = alloc_span(4);
    struct hak_slab *y = alloc_span(4);
    struct hak_slab *z = alloc_fenced(4, &fence);
    if (y->start != x->end || z->start != y->end)
        hard_error("the arena did not place three spans side by side");
    char *start = x->start;
    fill_pattern(start, 12 * HAK_PAGE_SIZE, 5);
    hak_hot_span_put(x);
    hak_hot_span_put(z);
    hak_hot_span_put(y);
    /* z's descriptor, merged into x, is free: a neighbour of another
     * shard that still finds it must not take it for hot in its own.
     * (Left over, a descriptor keeps its kind: the box links its spares
     * through next, the meta allocator its free ones through the first
     * word.) */
    CHECK(z->kind == HAK_SLAB_INVALID, "a span merged into its neighbour kept kind %u", z->kind);
    struct hak_slab *whole = hak_hot_span_take(0, 12);
    check_hot(whole, start, 12, 5, "three neighbours put in the order 1, 3, 2");
    if (whole)
        free_span(whole);
    free_span(fence);

    /* The longer one's descriptor describes the merged span, from the
     * shorter one's first page on. */
    struct hak_slab *back;
    struct hak_slab *front = alloc_side_by_side(2, 6, &back, &fence);
    start = front->start;
    fill_pattern(start, 8 * HAK_PAGE_SIZE, 6);
    hak_hot_span_put(back);
    hak_hot_span_put(front);
    CHECK(front->kind == HAK_SLAB_INVALID,
          "a span of 2 pages merged into its neighbour of 6 kept kind %u", front->kind);
    whole = hak_hot_span_take(0, 8);
    CHECK(whole == back, "2 pages merged with the 6 after them: not the descriptor of the 6");
    check_hot(whole, start, 8, 6, "a span of 2 pages put after its neighbour of 6");
    if (whole)
        free_span(whole);
    free_span(fence);
}

/* The descriptor a merge leaves over is the one the box's next split
 * gives out (it keeps a few, rather than ask the meta allocator, under its
 * one lock, at each merge and split). */
static void test_hot_spare_descriptor(void)
{
    /* Spares of earlier tests' merges used up first, by as many cuts off
     * one span, each of which takes a descriptor; the pieces go back to
     * the arena, not the box. */
    struct hak_slab *fence, *pieces[HAK_HOT_SPAN_SPARE_DESCS + 1];
    struct hak_slab *cut = alloc_fenced(2 * HAK_HOT_SPAN_SPARE_DESCS, &fence);
    hak_hot_span_put(cut);
    for (unsigned i = 0; i <= HAK_HOT_SPAN_SPARE_DESCS; i++)
        pieces[i] =
            hak_hot_span_take(0, i < HAK_HOT_SPAN_SPARE_DESCS ? 1 : HAK_HOT_SPAN_SPARE_DESCS);
    for (unsigned i = 0; i <= HAK_HOT_SPAN_SPARE_DESCS; i++)
        if (pieces[i])
            free_span(pieces[i]);
    free_span(fence);

    struct hak_slab *back;
    struct hak_slab *front = alloc_side_by_side(4, 4, &back, &fence);
    char *start = front->start;
    fill_pattern(start, 8 * HAK_PAGE_SIZE, 9);
    hak_hot_span_put(front);
    hak_hot_span_put(back);
    CHECK(back->kind == HAK_SLAB_INVALID, "a span of 4 merged into its neighbour kept kind %u",
          back->kind);
    /* Kept by the box, not handed back: another asks the meta allocator. */
    struct hak_slab *other = hak_span_desc_alloc();
    CHECK(other != back, "the meta allocator gave out a descriptor the box keeps");
    /* The front is the shorter part, which takes a descriptor of its own:
     * the one left over. */
    take_front_and_rest(start, 8, 2, 9, back, front,
                        "2 pages, then 6, out of two spans of 4 merged");
    if (other)
        hak_span_desc_free(other);
    free_span(fence);
}

static void *put_span(void *span)
{
    hak_hot_span_put(span);
    return NULL;
}

/* Threads put in shards of their own (given in turn: a thread started
 * here, before any other test starts one, gets the shard after the main
 * thread's): a thread takes from its own shard first, even
 * a span hotter in another, and from another when its own has nothing to
 * fit; mallinfo's count and malloc_trim see them all.  A span next to a
 * hot one goes to that one's shard, whoever puts it, and they merge. */
static void test_hot_shards(void)
{
    struct hak_slab *fences[2];
    struct hak_slab *mine = alloc_fenced(4, &fences[0]);
    struct hak_slab *theirs = alloc_fenced(4, &fences[1]);
    char *mine_start = mine->start, *theirs_start = theirs->start;
    fill_pattern(mine_start, 4 * HAK_PAGE_SIZE, 6);
    fill_pattern(theirs_start, 4 * HAK_PAGE_SIZE, 7);
    hak_hot_span_put(mine);
    unit_thread_run(put_span, theirs);

    uint64_t count = 0;
    size_t held = hak_hot_span_retained(0, &count);
    CHECK(held == 8 * HAK_PAGE_SIZE && count == 2,
          "two spans of 4 pages in two shards: %zu bytes in %llu spans retained", held,
          (unsigned long long)count);
    struct hak_slab *first = hak_hot_span_take(0, 4);
    CHECK(first && first->start == mine_start,
          "the thread's own span did not come before the hotter one of another shard");
    check_hot(first, mine_start, 4, 6, "the span the thread put");
    struct hak_slab *second = hak_hot_span_take(0, 4);
    CHECK(second && second->start == theirs_start,
          "a span another thread put was not taken when the own shard had none");
    check_hot(second, theirs_start, 4, 7, "the span the other thread put");

    if (first)
        hak_hot_span_put(first);
    if (second)
        unit_thread_run(put_span, second);
    CHECK(hak_hot_span_release_all(0) == 8 * HAK_PAGE_SIZE,
          "malloc_trim did not release the spans of both shards");
    count = 0;
    CHECK(hak_hot_span_retained(0, &count) == 0 && count == 0,
          "spans were left in a shard after malloc_trim's release");
    for (unsigned i = 0; i < 2; i++)
        free_span(fences[i]);

    struct hak_slab *fence;
    struct hak_slab *right;
    struct hak_slab *left = alloc_side_by_side(4, 4, &right, &fence);
    char *start = left->start;
    fill_pattern(start, 8 * HAK_PAGE_SIZE, 8);
    hak_hot_span_put(left);
    unit_thread_run(put_span, right);
    struct hak_slab *whole = hak_hot_span_take(0, 8);
    check_hot(whole, start, 8, 8, "neighbours put by two threads");
    if (whole)
        free_span(whole);
    free_span(fence);
}

/* A span is fresh (zero, for calloc) only when the arena cuts it from
 * pages it never handed out since their chunk was mapped: the front of a
 * new chunk and the rest after it, not pages freed and cut again (their
 * decommit may have failed), nor a span the HotSpanBox gives back. */
static void test_fresh_spans(void)
{
    uint64_t chunks = hak_stat_read(HAK_STAT_ARENA_CHUNKS);
    /* The wholly free chunk the arena keeps, if any, or a new one. */
    struct hak_slab *spare = alloc_span(HAK_ARENA_USABLE_PAGES);
    struct hak_slab *front = alloc_span(HAK_ARENA_USABLE_PAGES - 8);
    CHECK(hak_stat_read(HAK_STAT_ARENA_CHUNKS) > chunks,
          "two chunks' worth of spans made no chunk");
    CHECK(front->fresh, "the front of a new chunk was not fresh");
    /* The chunk's last 8 pages, the latest span of that length in the
     * bins, which the arena takes first. */
    struct hak_slab *rest = alloc_span(8);
    if (rest->chunk != front->chunk)
        hard_error("the rest of a new chunk was not cut next");
    CHECK(rest->fresh, "the rest of a new chunk, cut after its front, was not fresh");

    char *rest_start = rest->start;
    free_span(rest);
    struct hak_slab *again = alloc_span(8);
    if (again->start != rest_start)
        hard_error("the arena did not cut the pages just freed again");
    CHECK(!again->fresh, "pages handed out before, freed and cut again, were taken for fresh");

    fill_pattern(again->start, 8 * HAK_PAGE_SIZE, 9);
    hak_hot_span_put(again);
    struct hak_slab *hot = hak_hot_span_take(0, 8);
    CHECK(hot && !hot->fresh, "a span from the HotSpanBox was taken for fresh");
    if (hot)
        free_span(hot);
    free_span(front);
    free_span(spare);
}

/* Over budget, the oldest spans leave: decommitted (they read as zeros) and
 * back in the arena. */
static void test_hot_budget(void)
{
    enum { SPANS = 5, KEPT = 3, PAGES = 8 };
    size_t span_bytes = PAGES * HAK_PAGE_SIZE;
    hak_options.hot_bytes = KEPT * span_bytes;

    /* Keeps the chunk from emptying: evicted spans stay readable. */
    struct hak_slab *guard = alloc_span(1);
    struct hak_slab *spans[SPANS], *fences[SPANS];
    char *starts[SPANS];
    for (unsigned i = 0; i < SPANS; i++) {
        spans[i] = alloc_fenced(PAGES, &fences[i]);
        starts[i] = spans[i]->start;
        fill_pattern(starts[i], span_bytes, 10 + i);
    }
    for (unsigned i = 0; i < SPANS; i++)
        if (spans[i]->chunk != guard->chunk) {
            /* Its memory may be unmapped once evicted: reading it would crash. */
            CHECK(false, "span %u is not in the chunk of the span allocated before it", i);
            return;
        }
    uint64_t evictions = hak_stat_read(HAK_STAT_HOT_EVICTIONS);
    for (unsigned i = 0; i < SPANS; i++)
        hak_hot_span_put(spans[i]);
    CHECK(hak_stat_read(HAK_STAT_HOT_EVICTIONS) - evictions == SPANS - KEPT,
          "%llu evictions for %u spans over a budget of %u",
          (unsigned long long)(hak_stat_read(HAK_STAT_HOT_EVICTIONS) - evictions), SPANS, KEPT);
    for (unsigned i = 0; i < SPANS - KEPT; i++)
        CHECK(nonzero_offset(starts[i], span_bytes) == PATTERN_INTACT,
              "evicted span %u was not decommitted", i);
    for (unsigned i = SPANS - KEPT; i < SPANS; i++)
        CHECK(pattern_mismatch(starts[i], span_bytes, 10 + i) == PATTERN_INTACT,
              "span %u within the budget lost its contents", i);

    for (unsigned i = SPANS; i-- > SPANS - KEPT;) {
        struct hak_slab *span = hak_hot_span_take(0, PAGES);
        CHECK(span == spans[i], "take %u gave %p, expected span %u", SPANS - i,
              span ? (void *)span->start : NULL, i);
        if (span)
            free_span(span);
    }
    CHECK(hak_hot_span_take(0, PAGES) == NULL, "an evicted span was still handed out");

    /* A budget of zero keeps nothing. */
    hak_options.hot_bytes = 0;
    struct hak_slab *span = alloc_span(PAGES);
    char *start = span->start;
    fill_pattern(start, span_bytes, 99);
    hak_hot_span_put(span);
    CHECK(hak_hot_span_take(0, PAGES) == NULL, "a zero budget kept a span");
    CHECK(nonzero_offset(start, span_bytes) == PATTERN_INTACT,
          "a span put with a zero budget was not decommitted");

    for (unsigned i = 0; i < SPANS; i++)
        free_span(fences[i]);
    free_span(guard);
}

/* malloc_trim's part: every hot span leaves at once, decommitted, whatever
 * its age and the budget; then the arena unmaps its wholly free chunks,
 * also the one it keeps for the next request. */
static void test_release_all(void)
{
    hak_options.hot_bytes = 64u << 20;
    struct hak_slab *guard = alloc_span(1); /* keeps the chunk mapped meanwhile */
    struct hak_slab *fences[2];
    struct hak_slab *a = alloc_fenced(8, &fences[0]);
    struct hak_slab *b = alloc_fenced(3, &fences[1]);
    char *a_start = a->start, *b_start = b->start;
    void *chunk = a->chunk;
    fill_pattern(a_start, 8 * HAK_PAGE_SIZE, 21);
    fill_pattern(b_start, 3 * HAK_PAGE_SIZE, 22);
    hak_hot_span_put(a);
    hak_hot_span_put(b);
    uint64_t count = 0;
    size_t held = hak_hot_span_retained(0, &count);
    CHECK(held == 11 * HAK_PAGE_SIZE && count == 2, "the box holds %zu bytes in %llu spans", held,
          (unsigned long long)count);
    size_t released = hak_hot_span_release_all(0);
    CHECK(released == 11 * HAK_PAGE_SIZE, "release_all gave back %zu bytes of 11 pages", released);
    count = 0;
    CHECK(hak_hot_span_retained(0, &count) == 0 && count == 0,
          "the box still holds spans after release_all");
    CHECK(nonzero_offset(a_start, 8 * HAK_PAGE_SIZE) == PATTERN_INTACT &&
              nonzero_offset(b_start, 3 * HAK_PAGE_SIZE) == PATTERN_INTACT,
          "released spans were not decommitted");
    CHECK(hak_hot_span_take(0, 3) == NULL, "a released span was still handed out");
    CHECK(hak_hot_span_release_all(0) == 0, "an empty box released memory");

    free_span(fences[0]);
    free_span(fences[1]);
    free_span(guard);
    size_t unmapped = hak_page_arena_release_free(0);
    CHECK(unmapped >= HAK_ARENA_CHUNK_SIZE && unmapped % HAK_ARENA_CHUNK_SIZE == 0,
          "the arena unmapped %zu bytes: not the free chunk it keeps", unmapped);
    CHECK(hak_page_map_lookup(chunk) == NULL, "the wholly free chunk %p is still mapped", chunk);
    CHECK(hak_page_arena_release_free(0) == 0, "the arena released a second time");
}

/* Before fresh memory is mapped for other blocks: spans idle for a sixty-fourth
 * of the decay leave, decommitted; younger ones stay hot. */
static void test_release_stale(void)
{
    enum { PAGES = 4, STALE_MS = 5000 };
    size_t span_bytes = PAGES * HAK_PAGE_SIZE;
    uint64_t decay_ms = hak_options.decay_ms;
    hak_options.hot_bytes = 64u << 20;
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * STALE_MS;
    struct hak_slab *guard = alloc_span(1); /* keeps the chunk mapped meanwhile */
    struct hak_slab *fences[2];
    struct hak_slab *old = alloc_fenced(PAGES, &fences[0]);
    struct hak_slab *young = alloc_fenced(PAGES, &fences[1]);
    char *old_start = old->start, *young_start = young->start;
    fill_pattern(old_start, span_bytes, 31);
    fill_pattern(young_start, span_bytes, 32);
    hak_hot_span_put(old);
    hak_hot_span_put(young);
    unit_age_hot_span(old, 2 * STALE_MS);
    uint64_t evictions = hak_stat_read(HAK_STAT_HOT_EVICTIONS);
    hak_hot_span_release_stale(0);
    CHECK(hak_stat_read(HAK_STAT_HOT_EVICTIONS) - evictions == 1,
          "%llu spans left the box, expected the one idle for %d ms",
          (unsigned long long)(hak_stat_read(HAK_STAT_HOT_EVICTIONS) - evictions), 2 * STALE_MS);
    CHECK(nonzero_offset(old_start, span_bytes) == PATTERN_INTACT,
          "the stale span was not decommitted");
    CHECK(pattern_mismatch(young_start, span_bytes, 32) == PATTERN_INTACT,
          "the span freed just now lost its contents");
    struct hak_slab *taken = hak_hot_span_take(0, PAGES);
    CHECK(taken == young, "the box gave %p, not the young span",
          taken ? (void *)taken->start : NULL);
    CHECK(hak_hot_span_take(0, PAGES) == NULL, "the stale span was still handed out");
    if (taken)
        free_span(taken);
    free_span(fences[0]);
    free_span(fences[1]);
    free_span(guard);
    hak_options.decay_ms = decay_ms;
}

/* ---- threads allocating and freeing neighbours at once ---- */

#define RACE_THREADS 4
#define RACE_LIVE 8
#define RACE_ROUNDS 40000

/* Every page of a span a thread holds carries the thread and the span's
 * serial number; another thread handed the same pages overwrites them. */
static void mark(struct hak_slab *span, uint64_t tag)
{
    for (uint32_t p = 0; p < span->pages; p++)
        *(uint64_t *)(span->start + (size_t)p * HAK_PAGE_SIZE) = tag;
}

static bool marked(const struct hak_slab *span, uint64_t tag)
{
    for (uint32_t p = 0; p < span->pages; p++)
        if (*(const uint64_t *)(span->start + (size_t)p * HAK_PAGE_SIZE) != tag)
            return false;
    return true;
}

/* Where the racing threads take spans from and give them back to, and
 * how many times each takes or gives one. */
struct race_backend {
    struct hak_slab *(*take)(uint32_t pages);
    void (*give)(struct hak_slab *span);
    uint32_t max_pages;
    uint64_t rounds;
};

struct race_thread {
    uint64_t id;
    const struct race_backend *backend;
};

static void *race_spans(void *arg)
{
    const struct race_thread *self = arg;
    const struct race_backend *backend = self->backend;
    uint64_t id = self->id;
    struct hak_slab *live[RACE_LIVE] = {NULL};
    uint64_t tags[RACE_LIVE] = {0};
    uint64_t rng = id * 0x9e3779b97f4a7c15u + 1;
    for (uint64_t round = 0; round < backend->rounds; round++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        unsigned slot = (unsigned)(rng >> 33) % RACE_LIVE;
        if (live[slot]) {
            CHECK(marked(live[slot], tags[slot]),
                  "thread %u: a span of %u pages at %p was handed to someone else too",
                  (unsigned)id, live[slot]->pages, (void *)live[slot]->start);
            backend->give(live[slot]);
            live[slot] = NULL;
        } else {
            uint32_t pages = 1 + (uint32_t)(rng >> 40) % backend->max_pages;
            live[slot] = backend->take(pages);
            CHECK(live[slot]->pages == pages, "asked %u pages, got %u", pages, live[slot]->pages);
            tags[slot] = id << 48 | round;
            mark(live[slot], tags[slot]);
        }
    }
    for (unsigned slot = 0; slot < RACE_LIVE; slot++)
        if (live[slot])
            backend->give(live[slot]);
    return NULL;
}

static void race(const struct race_backend *backend)
{
    pthread_t threads[RACE_THREADS];
    struct race_thread selves[RACE_THREADS];
    for (unsigned i = 0; i < RACE_THREADS; i++) {
        selves[i] = (struct race_thread){i + 1, backend};
        unit_thread_start(&threads[i], race_spans, &selves[i]);
    }
    for (unsigned i = 0; i < RACE_THREADS; i++)
        unit_thread_join(threads[i]);
}

/* A span leaves the bins under the arena's lock, while another thread may
 * be freeing its neighbour and looking whether to merge with it. */
static void test_concurrent_neighbours(void)
{
    static const struct race_backend arena = {alloc_span, free_span, 8, RACE_ROUNDS};
    race(&arena);
}

/* Spans of up to 700 pages, so that most takes find no room and make a
 * chunk, which the arena maps and sets up without its lock while the
 * others take and free theirs (and unmap chunks that empty, beyond the
 * one it keeps).  Once all are back and the wholly free chunks released,
 * node 0 maps no more than before, but for the SuperSlabs the threads'
 * heaps made: a chunk made in the race and lost to the bins would stay. */
static void test_concurrent_chunks(void)
{
    static const struct race_backend arena = {alloc_span, free_span, 700, 400};
    uint64_t mapped = atomic_load(&hak_stat_node_mapped[0]);
    uint64_t made = hak_stat_read(HAK_STAT_ARENA_CHUNKS);
    uint64_t superslabs = hak_stat_read(HAK_STAT_SUPERSLABS);
    race(&arena);
    CHECK(hak_stat_read(HAK_STAT_ARENA_CHUNKS) > made + RACE_THREADS,
          "the race made %llu chunks: too few to have raced",
          (unsigned long long)(hak_stat_read(HAK_STAT_ARENA_CHUNKS) - made));
    hak_page_arena_release_free(0);
    uint64_t left = atomic_load(&hak_stat_node_mapped[0]);
    uint64_t grown = (hak_stat_read(HAK_STAT_SUPERSLABS) - superslabs) * HAK_SUPERSLAB_SIZE;
    CHECK(left <= mapped + grown,
          "node 0 maps %llu bytes after the race and a release, %llu before it (%llu in new "
          "SuperSlabs)",
          (unsigned long long)left, (unsigned long long)mapped, (unsigned long long)grown);
}

static struct hak_slab *take_hot_span(uint32_t pages)
{
    struct hak_slab *span = hak_hot_span_take(0, pages);
    return span ? span : alloc_span(pages);
}

/* The same through the HotSpanBox: spans taken from it, cut from longer
 * ones, and put back, merged with their neighbours, while a small budget
 * pushes spans out to the arena.  A span the box cut was looked at by its
 * neighbours before its pages all named it, and one of them merged over
 * pages the box had handed out. */
static void test_concurrent_hot_spans(void)
{
    static const struct race_backend box = {take_hot_span, hak_hot_span_put, 16, RACE_ROUNDS};
    size_t budget = hak_options.hot_bytes;
    hak_options.hot_bytes = 1u << 20;
    race(&box);
    hak_hot_span_release_all(0);
    hak_options.hot_bytes = budget;
}

int main(void)
{
    unit_watchdog();
    setvbuf(stdout, NULL, _IONBF, 0);
    if (hak_stat_read(HAK_STAT_ARENA_CHUNKS) != 0) {
        /* A runtime loaded before main (a sanitizer, a preload) allocated
         * Mid or L25 blocks: the layout checks below would not hold. */
        fprintf(stderr, "SKIP: node 0's arena was used before the test started\n");
        return EXIT_SKIP;
    }
    /* Only the byte budget evicts, however slowly the test runs; an age
     * this long must not wrap around to evict everything at once. */
    hak_options.decay_ms = UINT64_MAX;
    test_coalescing();
    test_several_chunks();
    test_chunk_batches();
    test_hot_take_back();
    test_hot_best_fit();
    test_hot_short_front();
    test_hot_merge();
    test_hot_spare_descriptor();
    test_hot_shards();
    test_fresh_spans();
    test_hot_budget();
    test_concurrent_neighbours();
    test_concurrent_chunks();
    test_concurrent_hot_spans();
    test_release_all();
    test_release_stale();
    return test_result("test_page_arena");
}

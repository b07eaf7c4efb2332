/* Spans of an arena chunk filed by exact length, with a bitmap of the
 * lengths present, so that the shortest span of at least n pages is found
 * in a few word scans: the PageArena keeps its free spans so, the
 * HotSpanBox its hot ones.  The caller holds the lock that guards them. */
#ifndef HAK_SPAN_BINS_H
#define HAK_SPAN_BINS_H

#include "../internal.h"

#define HAK_SPAN_BIN_WORDS (HAK_ARENA_PAGES / 64)

struct hak_span_bins {
    uint64_t nonempty[HAK_SPAN_BIN_WORDS];      /* bit n: by_pages[n] has a span */
    struct hak_slab *by_pages[HAK_ARENA_PAGES]; /* LIFO: the latest put first */
};

static inline void hak_span_bins_insert(struct hak_span_bins *bins, struct hak_slab *span)
{
    uint32_t n = span->pages;
    span->prev = NULL;
    span->next = bins->by_pages[n];
    if (span->next)
        span->next->prev = span;
    bins->by_pages[n] = span;
    bins->nonempty[n / 64] |= 1ull << (n % 64);
}

static inline void hak_span_bins_remove(struct hak_span_bins *bins, struct hak_slab *span)
{
    uint32_t n = span->pages;
    if (span->prev)
        span->prev->next = span->next;
    else
        bins->by_pages[n] = span->next;
    if (span->next)
        span->next->prev = span->prev;
    if (!bins->by_pages[n])
        bins->nonempty[n / 64] &= ~(1ull << (n % 64));
    span->next = span->prev = NULL;
}

/* The shortest span of at least pages pages, the latest put of its length;
 * NULL when there is none. */
static inline struct hak_slab *hak_span_bins_fit(const struct hak_span_bins *bins, uint32_t pages)
{
    unsigned word = pages / 64;
    if (word >= HAK_SPAN_BIN_WORDS)
        return NULL;
    uint64_t bits = bins->nonempty[word] & (~0ull << (pages % 64));
    while (!bits) {
        if (++word == HAK_SPAN_BIN_WORDS)
            return NULL;
        bits = bins->nonempty[word];
    }
    return bins->by_pages[word * 64 + (unsigned)__builtin_ctzll(bits)];
}

/* The length of the longest span, 0 when there is none. */
static inline uint32_t hak_span_bins_longest(const struct hak_span_bins *bins)
{
    for (unsigned word = HAK_SPAN_BIN_WORDS; word-- > 0;)
        if (bins->nonempty[word])
            return word * 64 + 63 - (unsigned)__builtin_clzll(bins->nonempty[word]);
    return 0;
}

/* Points pages [first, first + count) of span's arena chunk at span, so
 * that a free there, or a neighbour looking for it, finds it; their
 * entries for free say they serve no blocks. */
static inline void hak_span_map_pages(struct hak_slab *span, uint32_t first, uint32_t count)
{
    struct hak_arena_chunk *chunk = (struct hak_arena_chunk *)span->chunk;
    struct hak_slab **slabs = &chunk->page_slab[first];
    struct hak_page_info *infos = &chunk->page_info[first];
    uint32_t p = 0;
    /* Four pages a turn, whose stores the compiler merges into vector
     * stores: spans of up to 256 pages are mapped at every take and merge
     * of the HotSpanBox (l25_steady: a quarter of all instructions, six a
     * page, one at a time). */
    for (; p + 4 <= count; p += 4) {
        slabs[p] = slabs[p + 1] = slabs[p + 2] = slabs[p + 3] = span;
        infos[p] = infos[p + 1] = infos[p + 2] = infos[p + 3] = HAK_PAGE_INFO_NONE;
    }
    for (; p < count; p++) {
        slabs[p] = span;
        infos[p] = HAK_PAGE_INFO_NONE;
    }
}

#endif

#include "mappings.h"

#include "../numa/binding.h"

enum { MAPPING_PAGES = HAK_ARENA_PAGES, WORD_BITS = 64 };
_Static_assert(HAK_ARENA_PAGES % WORD_BITS == 0 && HAK_SUPERSLAB_PAGES <= HAK_ARENA_PAGES,
               "a bit for every page of a chunk or SuperSlab");

void hak_mappings_map_anew(struct hak_mappings *m)
{
    hak_os_forget_lent(m->lent_ranges);
    m->lent_ranges = 0;
    m->move_failed = false;
    for (size_t i = 0; i < sizeof(m->starts) / sizeof(m->starts[0]); i++)
        __atomic_store_n(&m->starts[i], 0, __ATOMIC_RELAXED);
}

bool hak_mappings_known(const struct hak_mappings *m)
{
    return !__atomic_load_n(&m->move_failed, __ATOMIC_RELAXED);
}

static void mark_start(struct hak_mappings *m, size_t page)
{
    if (page < MAPPING_PAGES)
        __atomic_fetch_or(&m->starts[page / WORD_BITS], 1ull << (page % WORD_BITS),
                          __ATOMIC_RELAXED);
}

/* Pages after first and before end start no mapping any more: a range
 * moved over them is one.  Only the caller writes them meanwhile (they are
 * its range's), but neighbours' bits share the words. */
static void clear_starts_between(struct hak_mappings *m, size_t first, size_t end)
{
    for (size_t page = first + 1; page < end;) {
        size_t bit = page % WORD_BITS;
        size_t bits = end - page < WORD_BITS - bit ? end - page : WORD_BITS - bit;
        uint64_t mask = (bits == WORD_BITS ? ~0ull : ((1ull << bits) - 1)) << bit;
        __atomic_fetch_and(&m->starts[page / WORD_BITS], ~mask, __ATOMIC_RELAXED);
        page += bits;
    }
}

/* The last page after first and before end that may start a mapping, or
 * first where none does. */
static size_t last_start_between(const struct hak_mappings *m, size_t first, size_t end)
{
    for (size_t page = end - 1; page > first;) {
        uint64_t word = __atomic_load_n(&m->starts[page / WORD_BITS], __ATOMIC_RELAXED);
        word &= ~0ull >> (WORD_BITS - 1 - page % WORD_BITS); /* bits up to page */
        size_t word_first = page - page % WORD_BITS;
        if (word) {
            size_t found = word_first + (WORD_BITS - 1 - (size_t)__builtin_clzll(word));
            return found > first ? found : first;
        }
        if (word_first <= first)
            break;
        page = word_first - 1;
    }
    return first;
}

/* Marks in to, from at_page on, the pages after first and before end that
 * may start a mapping in from: a range moved over several mappings lands
 * as as many, and the bits of the container it lands in must know them
 * all (hak_mappings_one). */
static void copy_starts_between(struct hak_mappings *to, size_t at_page,
                                const struct hak_mappings *from, size_t first, size_t end)
{
    for (size_t page = last_start_between(from, first, end); page > first;
         page = last_start_between(from, first, page))
        mark_start(to, at_page + (page - first));
}

bool hak_mappings_one(const struct hak_mappings *m, const char *base, const char *start,
                      const char *end)
{
    size_t first = (size_t)(start - base) / HAK_PAGE_SIZE;
    return last_start_between(m, first, (size_t)(end - base) / HAK_PAGE_SIZE) == first;
}

enum hak_lend_result hak_mappings_lend(struct hak_mappings *from, const char *from_base, char *src,
                                       size_t size, struct hak_mappings *to, const char *to_base,
                                       char *dst, unsigned node, size_t *moved, size_t *dst_used)
{
    bool whole = hak_os_moves_over_mappings();
    size_t first = (size_t)(src - from_base) / HAK_PAGE_SIZE;
    size_t end = first + size / HAK_PAGE_SIZE;
    *moved = *dst_used = 0;
    while (end > first) {
        size_t start = whole ? first : last_start_between(from, first, end);
        size_t piece = (end - start) * HAK_PAGE_SIZE;
        char *at = dst + *moved;
        enum hak_lend_result result = hak_os_lend(src + (start - first) * HAK_PAGE_SIZE, piece, at);
        if (result == HAK_LEND_REFUSED)
            return result;
        __atomic_fetch_add(&to->lent_ranges, 1, __ATOMIC_RELAXED);
        size_t at_page = (size_t)(at - to_base) / HAK_PAGE_SIZE;
        mark_start(to, at_page);
        mark_start(to, at_page + piece / HAK_PAGE_SIZE);
        if (whole)
            copy_starts_between(to, at_page, from, start, end);
        *dst_used = *moved + piece;
        if (result == HAK_LEND_FAILED) {
            /* A mapping the bits do not know of (the program's madvise or
             * mbind on part of a block), or no room for another: no more
             * moves out of from until it is one mapping again. */
            __atomic_store_n(&from->move_failed, true, __ATOMIC_RELAXED);
            hak_numa_bind(at, piece, node);
            return result;
        }
        if (!whole) /* one of from's mappings, moved whole: one here */
            clear_starts_between(to, at_page, at_page + piece / HAK_PAGE_SIZE);
        *moved = *dst_used;
        end = start;
    }
    return HAK_LENT;
}

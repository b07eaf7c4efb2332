#include "mappings.h"

#include "../numa/binding.h"

enum { MAPPING_PAGES = HAK_ARENA_PAGES, WORD_BITS = 64 };

void hak_mappings_reset(struct hak_mappings *m)
{
    hak_os_forget_lent(m->lent_ranges);
    m->lent_ranges = 0;
    for (size_t i = 0; i < sizeof(m->starts) / sizeof(m->starts[0]); i++)
        __atomic_store_n(&m->starts[i], 0, __ATOMIC_RELAXED);
}

static void mark_start(struct hak_mappings *m, size_t page)
{
    if (page < MAPPING_PAGES)
        __atomic_fetch_or(&m->starts[page / WORD_BITS], 1ull << (page % WORD_BITS),
                          __ATOMIC_RELAXED);
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

enum hak_lend_result hak_mappings_lend(const struct hak_mappings *from, const char *from_base,
                                       char *src, size_t size, struct hak_mappings *to,
                                       const char *to_base, char *dst, unsigned node, size_t *moved,
                                       size_t *dst_used)
{
    bool whole = hak_os_moves_over_mappings();
    size_t first = (size_t)(src - from_base) / HAK_PAGE_SIZE;
    size_t end = first + size / HAK_PAGE_SIZE;
    *moved = *dst_used = 0;
    while (end > first) {
        size_t start = whole ? first : last_start_between(from, first, end);
        size_t piece = (end - start) * HAK_PAGE_SIZE;
        char *at = dst + *moved;
        enum hak_lend_result result =
            hak_os_lend((char *)from_base + start * HAK_PAGE_SIZE, piece, at);
        if (result == HAK_LEND_REFUSED)
            return result;
        __atomic_fetch_add(&to->lent_ranges, 1, __ATOMIC_RELAXED);
        mark_start(to, (size_t)(at - to_base) / HAK_PAGE_SIZE);
        mark_start(to, (size_t)(at + piece - to_base) / HAK_PAGE_SIZE);
        *dst_used = *moved + piece;
        if (result == HAK_LEND_FAILED) {
            hak_numa_bind(at, piece, node);
            return result;
        }
        *moved = *dst_used;
        end = start;
    }
    return HAK_LENT;
}

/* Large blocks' pages move from cached mappings into the blocks that need
 * them (fill), and a range moved lands as a kernel mapping of its own,
 * which merges with no neighbour while its pages live.  The kernel counts
 * mappings against vm.max_map_count (65530 by default), the program's own
 * with them, and fork copies each: the moves must not add to them without
 * end (bench/large_blocks, 20 live buffers of 5-25 MiB, one replaced a
 * step, held a mapping more every four steps, 6.6k after 40000 steps).
 * Here 48 live blocks of 4-20 MiB, one freed and another allocated in its
 * place each step, 10000 steps: the count of the mappings the large
 * mappings hold past one each (the statistics' large_extra_mappings)
 * reaches HAK_LARGE_EXTRA_MAPPINGS_MAX and stays within it; the process's
 * mappings (lines of /proc/self/maps) grow by no more than it and the
 * large mappings there are; and once every block is freed and the cache
 * unmapped (malloc_trim) the count is 0 again: it follows the mappings,
 * with no drift.  Each block's written pages hold its tag, checked as it
 * is freed: what moved moved whole.  The program runs with small pages
 * (HAKMEM_HUGE_PAGES=0, no transparent huge pages): sizes stay as asked,
 * and pages move one by one; and with a decay of a minute, so that a run
 * the machine slows trims the cache no differently. */
#include <fcntl.h>
#include <malloc.h>
#include <sys/prctl.h>

#include "stats.h"
#include "unit.h"

#define LIVE 48
#define STEPS 10000
#define MIN_SIZE (4 * MiB)
#define SIZE_RANGE (16 * MiB)
/* Mappings besides the moved ranges: the live blocks' and the cached
 * ones' own (at most 32), and a few the program's reads may add. */
#define OWN_MAPPINGS (LIVE + 32 + 8)
/* Pages of a block written and checked: one in this many, and its last
 * (the others, never touched, take no memory but move all the same). */
#define CHECK_EVERY 16

static unsigned count_mappings(void)
{
    static char text[1 << 16];
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        hard_error("cannot open /proc/self/maps");
    unsigned lines = 0;
    ssize_t got;
    while ((got = read(fd, text, sizeof(text))) > 0)
        for (ssize_t i = 0; i < got; i++)
            lines += text[i] == '\n';
    close(fd);
    return lines;
}

static bool tagged_page(size_t page, size_t pages)
{
    return page % CHECK_EVERY == 0 || page == pages - 1;
}

/* The byte offset of a tagged page's word: its first, but for the last
 * page the block's last word, which lies in the mapping's last page
 * wherever in its head's page the block starts (its colour). */
static size_t tag_offset(size_t page, size_t pages, size_t size)
{
    return page == pages - 1 ? (size / sizeof(uint64_t) - 1) * sizeof(uint64_t)
                             : page * HAK_PAGE_SIZE;
}

struct block {
    uint64_t *words;
    size_t size;
    uint64_t tag;
};

static void fill_block(struct block *b, size_t size, uint64_t tag)
{
    b->words = malloc(opaque_size(size));
    if (!b->words)
        hard_error("malloc(%zu) failed", size);
    b->size = size;
    b->tag = tag;
    size_t pages = (size + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE;
    for (size_t page = 0; page < pages; page++)
        if (tagged_page(page, pages)) {
            size_t at = tag_offset(page, pages, size);
            b->words[at / sizeof(uint64_t)] = tag + at;
        }
}

static void free_block(struct block *b)
{
    size_t pages = (b->size + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE;
    for (size_t page = 0; page < pages; page++) {
        if (!tagged_page(page, pages))
            continue;
        size_t at = tag_offset(page, pages, b->size);
        uint64_t word = b->words[at / sizeof(uint64_t)];
        CHECK(word == b->tag + at, "block %p of %zu bytes: page %zu holds %#llx, not %#llx",
              (void *)b->words, b->size, page, (unsigned long long)word,
              (unsigned long long)(b->tag + at));
    }
    free(b->words);
}

int main(int argc, char **argv)
{
    (void)argc;
    unit_watchdog();
    /* Kept across the exec of rerun_with. */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        hard_error("cannot disable transparent huge pages");
    rerun_with("HAKMEM_HUGE_PAGES", "0", argv);
    /* Nothing ages out of the cache while a loaded machine slows the run. */
    rerun_with("HAKMEM_DECAY_MS", "60000", argv);
    unsigned first = count_mappings();
    uint64_t most = 0;
    struct block blocks[LIVE];
    uint64_t rng = 42;
    for (unsigned i = 0; i < LIVE; i++)
        fill_block(&blocks[i], MIN_SIZE + rng_next(&rng) % SIZE_RANGE, mix64(i) << 24);
    for (unsigned step = 0; step < STEPS; step++) {
        struct block *b = &blocks[rng_next(&rng) % LIVE];
        free_block(b);
        fill_block(b, MIN_SIZE + rng_next(&rng) % SIZE_RANGE, mix64(LIVE + step) << 24);
        uint64_t extra = hak_stat_read(HAK_STAT_LARGE_EXTRA_MAPPINGS);
        most = extra > most ? extra : most;
        CHECK(extra <= HAK_LARGE_EXTRA_MAPPINGS_MAX,
              "step %u: the large mappings count %llu mappings past one each, over %d", step,
              (unsigned long long)extra, HAK_LARGE_EXTRA_MAPPINGS_MAX);
        if (step % 100 == 0) {
            unsigned now = count_mappings();
            CHECK(now <= first + extra + OWN_MAPPINGS,
                  "step %u: %u mappings, %u before the first block: more than the %llu counted "
                  "and %d",
                  step, now, first, (unsigned long long)extra, OWN_MAPPINGS);
        }
    }
    /* Else the bound above was never tested. */
    CHECK(most + 8 >= HAK_LARGE_EXTRA_MAPPINGS_MAX,
          "the large mappings counted %llu mappings past one each at most, short of %d",
          (unsigned long long)most, HAK_LARGE_EXTRA_MAPPINGS_MAX);
    for (unsigned i = 0; i < LIVE; i++)
        free_block(&blocks[i]);
    malloc_trim(0);
    uint64_t left = hak_stat_read(HAK_STAT_LARGE_EXTRA_MAPPINGS);
    CHECK(left == 0, "%llu mappings counted with no large mapping left", (unsigned long long)left);
    return test_result("test_large_mappings");
}

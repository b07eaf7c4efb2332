/* Large blocks' pages move from cached mappings into the blocks that need
 * them (fill), and a range moved lands as a kernel mapping of its own,
 * which merges with no neighbour while its pages live.  The kernel counts
 * mappings against vm.max_map_count (65530 by default), the program's own
 * with them, and fork copies each: the moves must not add to them without
 * end.  Ten live blocks of 3-12 MiB, one freed and another allocated in
 * its place each step, every page written, as a pipeline of big buffers
 * does, 40000 steps: the count of the mappings the large mappings hold
 * past one each (the statistics' large_extra_mappings) stays within
 * HAK_LARGE_EXTRA_MAPPINGS_MAX, the process's mappings (lines of
 * /proc/self/maps) grow by no more than it and the large mappings there
 * are, and once every block is freed and the cache unmapped (malloc_trim)
 * the count is 0 again: it follows the mappings, with no drift.  Without
 * a bound the process's mappings grew by one every 15 steps (2648 after
 * 40000).  Each block's pages hold its tag, checked as it is freed: what
 * moved moved whole.  The program asks the kernel for no huge pages
 * (sizes stay as asked, and small pages move one by one). */
#include <fcntl.h>
#include <malloc.h>
#include <sys/prctl.h>

#include "stats.h"
#include "unit.h"

#define LIVE 10
#define STEPS 40000
#define WARM_STEPS 200
/* Mappings besides the moved ranges: the live blocks' and the cached
 * ones' own (at most 32), and a few the program's reads may add. */
#define OWN_MAPPINGS (LIVE + 32 + 8)
/* Pages of a block checked as it is freed: one in this many, and its last. */
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
    for (size_t at = 0; at < size; at += HAK_PAGE_SIZE)
        b->words[at / sizeof(uint64_t)] = tag + at;
}

static void free_block(struct block *b)
{
    size_t pages = (b->size + HAK_PAGE_SIZE - 1) / HAK_PAGE_SIZE;
    for (size_t page = 0; page < pages; page++) {
        if (page % CHECK_EVERY && page != pages - 1)
            continue;
        size_t at = page * HAK_PAGE_SIZE;
        uint64_t word = b->words[at / sizeof(uint64_t)];
        CHECK(word == b->tag + at, "block %p of %zu bytes: page %zu holds %#llx, not %#llx",
              (void *)b->words, b->size, page, (unsigned long long)word,
              (unsigned long long)(b->tag + at));
    }
    free(b->words);
}

int main(void)
{
    unit_watchdog();
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        hard_error("cannot disable transparent huge pages");
    struct block blocks[LIVE];
    uint64_t rng = 42;
    for (unsigned i = 0; i < LIVE; i++)
        fill_block(&blocks[i], 3 * MiB + rng_next(&rng) % (9 * MiB), mix64(i) << 24);
    unsigned first = 0;
    for (unsigned step = 0; step < STEPS; step++) {
        struct block *b = &blocks[rng_next(&rng) % LIVE];
        free_block(b);
        fill_block(b, 3 * MiB + rng_next(&rng) % (9 * MiB), mix64(LIVE + step) << 24);
        if (step == WARM_STEPS)
            first = count_mappings();
        if (step > WARM_STEPS && step % 500 == 0) {
            uint64_t extra = hak_stat_read(HAK_STAT_LARGE_EXTRA_MAPPINGS);
            unsigned now = count_mappings();
            CHECK(extra <= HAK_LARGE_EXTRA_MAPPINGS_MAX,
                  "step %u: the large mappings count %llu mappings past one each, over %d", step,
                  (unsigned long long)extra, HAK_LARGE_EXTRA_MAPPINGS_MAX);
            CHECK(now <= first + extra + OWN_MAPPINGS,
                  "step %u: %u mappings, %u at step %d: more than the %llu counted and %d", step,
                  now, first, WARM_STEPS, (unsigned long long)extra, OWN_MAPPINGS);
        }
    }
    for (unsigned i = 0; i < LIVE; i++)
        free_block(&blocks[i]);
    malloc_trim(0);
    uint64_t left = hak_stat_read(HAK_STAT_LARGE_EXTRA_MAPPINGS);
    CHECK(left == 0, "%llu mappings counted with no large mapping left", (unsigned long long)left);
    return test_result("test_large_mappings");
}

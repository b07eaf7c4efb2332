/* Large blocks' pages move from cached mappings into the blocks that need
 * them (fill), and a range moved lands as a kernel mapping of its own,
 * which merges with no neighbour while its pages live.  The kernel counts
 * mappings against vm.max_map_count (65530 by default), the program's own
 * with them, and fork copies each: the moves must not add to them without
 * end.  Ten live blocks of 3-12 MiB, one freed and another allocated in
 * its place each step, every page written, as a pipeline of big buffers
 * does: over 40000 steps the process's mappings (lines of
 * /proc/self/maps) stay within 1500 of those after the first steps.
 * Without a bound they grew by one every 17 steps (2.8k after 50000).
 * Each block's pages hold its tag, checked as it is freed: what moved
 * moved whole.  The program asks the kernel for no huge pages (sizes stay
 * as asked, and small pages move one by one). */
#include <fcntl.h>
#include <sys/prctl.h>

#include "unit.h"

#define LIVE 10
#define STEPS 40000
#define WARM_STEPS 200
#define MAX_GROWTH 1500
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
    unsigned first = 0, most = 0;
    for (unsigned step = 0; step < STEPS; step++) {
        struct block *b = &blocks[rng_next(&rng) % LIVE];
        free_block(b);
        fill_block(b, 3 * MiB + rng_next(&rng) % (9 * MiB), mix64(LIVE + step) << 24);
        if (step == WARM_STEPS)
            first = count_mappings();
        if (step > WARM_STEPS && step % 500 == 0) {
            unsigned now = count_mappings();
            most = now > most ? now : most;
        }
    }
    CHECK(most <= first + MAX_GROWTH,
          "%u mappings after %d steps, %u after %d: more than %d added by moved pages", first,
          WARM_STEPS, most, STEPS, MAX_GROWTH);
    for (unsigned i = 0; i < LIVE; i++)
        free_block(&blocks[i]);
    return test_result("test_large_mappings");
}

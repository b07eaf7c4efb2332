/* Small blocks and Mid blocks up to a page share the SuperSlabs
 * (HAK_SUPERSLAB_CLASSES): a phase of one size reuses the memory the phase
 * of the other freed where it lies, with no move of pages (no lend) and
 * no page faulted in, both ways, and a Mid block of the SuperSlabs is
 * freed through the thread's part of the region, as a small one is. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "arena/superslab.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "harden.h"
#include "options.h"
#include "stats.h"
#include "unit.h"

/* Each phase's blocks, in bytes: many SuperSlabs' worth. */
#define PHASE_BYTES (16u << 20)
#define MAX_BLOCKS (PHASE_BYTES / 16)

/* Sizes of their classes, so that each phase needs the other's bytes. */
static const size_t mid_sizes[] = {1280, 2048, 3072, 4096};
static const size_t small_sizes[] = {48, 64, 192};

struct block {
    char *start;
    size_t size;
};

struct phase {
    struct block *blocks;
    size_t count;
};

/* Allocates blocks of sizes in turn up to PHASE_BYTES, each written whole. */
static void run_phase(struct phase *phase, const size_t *sizes, size_t kinds)
{
    size_t bytes = 0;
    phase->count = 0;
    while (bytes < PHASE_BYTES) {
        size_t size = sizes[phase->count % kinds];
        char *block = malloc(size);
        if (!block)
            hard_error("malloc(%zu) failed", size);
        memset(block, (int)phase->count, size);
        phase->blocks[phase->count++] = (struct block){block, size};
        bytes += size;
    }
}

static void free_phase(const struct phase *phase)
{
    for (size_t i = 0; i < phase->count; i++)
        free(phase->blocks[i].start);
}

/* Sorts the phase's blocks by address in place (heapsort): qsort takes a
 * buffer of malloc's for as many, which would be a phase's memory too. */
static void sift_down(struct block *blocks, size_t root, size_t count)
{
    for (size_t child; (child = 2 * root + 1) < count; root = child) {
        if (child + 1 < count && blocks[child + 1].start > blocks[child].start)
            child++;
        if (blocks[root].start >= blocks[child].start)
            return;
        struct block swap = blocks[root];
        blocks[root] = blocks[child];
        blocks[child] = swap;
    }
}

static void sort_by_address(struct block *blocks, size_t count)
{
    for (size_t root = count / 2; root-- > 0;)
        sift_down(blocks, root, count);
    for (size_t end = count; end-- > 1;) {
        struct block swap = blocks[0];
        blocks[0] = blocks[end];
        blocks[end] = swap;
        sift_down(blocks, 0, end);
    }
}

/* How many of now's blocks lie in a page that one of before's blocks
 * (sorted by address) covered. */
static size_t in_freed_pages(const struct phase *before, const struct phase *now)
{
    size_t found = 0;
    for (size_t i = 0; i < now->count; i++) {
        uintptr_t page = (uintptr_t)now->blocks[i].start & ~(uintptr_t)(HAK_PAGE_SIZE - 1);
        size_t lo = 0, hi = before->count; /* the first block starting past the page's end */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if ((uintptr_t)before->blocks[mid].start < page + HAK_PAGE_SIZE)
                lo = mid + 1;
            else
                hi = mid;
        }
        /* Blocks are at most a page long: one that covers the page starts
         * less than a page before it. */
        for (size_t j = lo; j > 0; j--) {
            uintptr_t start = (uintptr_t)before->blocks[j - 1].start;
            if (start + HAK_PAGE_SIZE <= page)
                break;
            if (start + before->blocks[j - 1].size > page) {
                found++;
                break;
            }
        }
    }
    return found;
}

/* The phase now, after before was freed: most of its blocks in before's
 * pages, where they lie, no page moved, and few faults.  Not all: the blocks the caches
 * keep of the freed phase keep their slabs in its classes, and the new
 * phase takes others for as many bytes (fresh SuperSlabs, which take
 * resident pages where the HotSpanBox has some).  With Mid blocks in spans
 * (before HAK_SUPERSLAB_CLASSES) none lay in the freed pages, whose pages
 * moved to the SuperSlabs instead (hak_hot_span_lend). */
static void check_reuse(const char *what, struct phase *before, struct phase *now,
                        const size_t *sizes, size_t kinds)
{
    sort_by_address(before->blocks, before->count);
    uint64_t lent = hak_stat_read(HAK_STAT_LENT_BYTES);
    long faults = minor_faults();
    run_phase(now, sizes, kinds);
    faults = minor_faults() - faults;
    lent = hak_stat_read(HAK_STAT_LENT_BYTES) - lent;
    size_t reused = in_freed_pages(before, now);
    long pages = PHASE_BYTES / HAK_PAGE_SIZE;
    printf("  %s: %zu of %zu blocks in the freed pages, %ld faults, %llu bytes moved\n", what,
           reused, now->count, faults, (unsigned long long)lent);
    CHECK(reused * 5 >= now->count * 4, "%s: only %zu of %zu blocks lie in the pages freed", what,
          reused, now->count);
    CHECK(lent == 0, "%s: %llu bytes of pages moved to serve it", what, (unsigned long long)lent);
    CHECK(faults * 4 < pages, "%s: %ld pages faulted in for a phase of %ld", what, faults, pages);
}

/* A Mid block of the SuperSlabs: in the thread's part of the region, its
 * page's byte giving its class, and freed from there into the cache. */
static void check_mid_block_in_region(void)
{
    for (size_t i = 0; i < sizeof(mid_sizes) / sizeof(mid_sizes[0]); i++) {
        unsigned cls = hak_class_of(mid_sizes[i]);
        char *block = unit_malloc(mid_sizes[i]);
        if (!block)
            hard_error("malloc(%zu) failed", mid_sizes[i]);
        uintptr_t offset;
        bool found = hak_heap_region_find(&hak_tls, block, &offset);
        CHECK(found, "malloc(%zu) = %p is not in the thread's part of the region", mid_sizes[i],
              (void *)block);
        if (found)
            CHECK((hak_heap_region_page_byte(&hak_tls, offset) & HAK_PAGE_CLASS_MASK) == cls,
                  "malloc(%zu): its page's byte gives class %u, not %u", mid_sizes[i],
                  (unsigned)(hak_heap_region_page_byte(&hak_tls, offset) & HAK_PAGE_CLASS_MASK),
                  cls);
        CHECK(malloc_usable_size(block) == hak_class_size[cls],
              "malloc(%zu): %zu usable bytes, not its class's %u", mid_sizes[i],
              malloc_usable_size(block), hak_class_size[cls]);
        free(block);
        char *again = unit_malloc(mid_sizes[i]);
        CHECK(again == block, "malloc(%zu) after its free returned %p, not %p", mid_sizes[i],
              (void *)again, (void *)block);
        free(again);
    }
}

int main(void)
{
    unit_watchdog();
    free(malloc(1)); /* hakmem in place, and its region if any */
    if (!hak_superslab_region_exists() || hak_harden.guard_bytes) {
        /* Without a region (an address-space limit) free finds SuperSlabs
         * through the page map; at level 2 the phases fault their guard
         * pages' neighbours in differently.  The reuse still holds, the
         * counts here do not. */
        printf("SKIP: no SuperSlab region, or guard pages\n");
        return 77;
    }
    /* Nothing goes back to the kernel between the phases. */
    hak_options.decay_ms = UINT64_MAX;
    for (size_t i = 0; i < sizeof(mid_sizes) / sizeof(mid_sizes[0]); i++)
        CHECK(hak_class_in_superslab(hak_class_of(mid_sizes[i])),
              "%zu B blocks are not served by the SuperSlabs", mid_sizes[i]);
    CHECK(!hak_class_in_superslab(hak_class_of(HAK_PAGE_SIZE + 1)),
          "blocks over a page are served by the SuperSlabs");
    check_mid_block_in_region();

    struct phase mid = {calloc(MAX_BLOCKS, sizeof(struct block)), 0};
    struct phase small = {calloc(MAX_BLOCKS, sizeof(struct block)), 0};
    struct phase mid_again = {calloc(MAX_BLOCKS, sizeof(struct block)), 0};
    if (!mid.blocks || !small.blocks || !mid_again.blocks)
        hard_error("calloc failed");
    /* The arrays' pages faulted in before any phase counts faults. */
    memset(mid.blocks, 0, MAX_BLOCKS * sizeof(struct block));
    memset(small.blocks, 0, MAX_BLOCKS * sizeof(struct block));
    memset(mid_again.blocks, 0, MAX_BLOCKS * sizeof(struct block));

    run_phase(&mid, mid_sizes, sizeof(mid_sizes) / sizeof(mid_sizes[0]));
    free_phase(&mid);
    check_reuse("small blocks after Mid ones", &mid, &small, small_sizes,
                sizeof(small_sizes) / sizeof(small_sizes[0]));
    free_phase(&small);
    check_reuse("Mid blocks after small ones", &small, &mid_again, mid_sizes,
                sizeof(mid_sizes) / sizeof(mid_sizes[0]));
    free_phase(&mid_again);
    free(mid.blocks);
    free(small.blocks);
    free(mid_again.blocks);
    return test_result("test_phase_reuse");
}

/* malloc_trim gives back what hakmem retains: after a program writes and
 * frees about 200 MiB in mixed sizes (small, Mid, L25 and large blocks),
 * malloc_trim(0) returns 1 and brings RSS back to within a few MiB of where
 * it started; called again with nothing retained, it returns 0.  Blocks of
 * a thread that exited, freed by another, are given back too.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"

#define TIER_BYTES (50 * MiB)
#define MAX_BLOCKS ((size_t)1 << 18)
/* What may stay: hakmem's metadata and page tables, stdio's buffers. */
#define SLACK (6 * MiB)

static const struct size_tier tiers[] = {
    {1000, 16, 1024},
    {1000, 1025, 32 * 1024},
    {1000, 32 * 1024 + 1, 1024 * 1024},
    {1000, 1024 * 1024 + 1, 4 * 1024 * 1024},
};

static void test_mixed_sizes(void)
{
    /* The block table comes from the kernel, so that only the blocks
     * themselves are hakmem's. */
    void **blocks = mmap(NULL, MAX_BLOCKS * sizeof(void *), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (blocks == MAP_FAILED)
        hard_error("mmap of the block table failed");
    size_t rss_start = rss_bytes();
    uint64_t rng = 13;
    size_t count = 0;
    for (size_t t = 0; t < sizeof(tiers) / sizeof(tiers[0]); t++) {
        for (size_t bytes = 0; bytes < TIER_BYTES;) {
            size_t size = rng_range(&rng, tiers[t].min, tiers[t].max);
            if (count == MAX_BLOCKS)
                hard_error("more than %zu blocks", MAX_BLOCKS);
            blocks[count] = malloc(size);
            if (!blocks[count])
                hard_error("malloc(%zu) failed", size);
            memset(blocks[count++], 0x5a, size);
            bytes += size;
        }
    }
    size_t rss_full = rss_bytes();
    /* In random order, as a program's frees come. */
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)(rng_next(&rng) % i);
        void *swap = blocks[i - 1];
        blocks[i - 1] = blocks[j];
        blocks[j] = swap;
    }
    for (size_t i = 0; i < count; i++)
        free(blocks[i]);
    size_t rss_freed = rss_bytes();
    int first = malloc_trim(0);
    int second = malloc_trim(0);
    size_t rss_trimmed = rss_bytes();
    printf("%zu blocks: RSS %.1f MiB at start, %.1f MiB written, %.1f MiB freed, %.1f MiB "
           "trimmed\n",
           count, (double)rss_start / MiB, (double)rss_full / MiB, (double)rss_freed / MiB,
           (double)rss_trimmed / MiB);
    CHECK(rss_full >= rss_start + 4 * TIER_BYTES * 9 / 10,
          "the blocks were not resident (RSS %zu MiB)", rss_full / MiB);
    CHECK(first == 1, "malloc_trim(0) after freeing returned %d, not 1", first);
    CHECK(second == 0, "malloc_trim(0) with nothing retained returned %d, not 0", second);
    CHECK(rss_trimmed <= rss_start + SLACK,
          "after malloc_trim RSS is %.1f MiB, %.1f MiB above the start (want at most %zu)",
          (double)rss_trimmed / MiB, ((double)rss_trimmed - (double)rss_start) / MiB, SLACK / MiB);
    munmap(blocks, MAX_BLOCKS * sizeof(void *));
}

#define EXITED_BLOCKS 4096
#define EXITED_SIZE 8192

static void *allocate_and_exit(void *arg)
{
    void **blocks = arg;
    for (size_t i = 0; i < EXITED_BLOCKS; i++) {
        size_t size = i % 2 ? EXITED_SIZE : EXITED_SIZE / 32;
        blocks[i] = malloc(opaque_size(size));
        if (!blocks[i])
            hard_error("malloc failed in the thread");
        memset(blocks[i], 0x3c, size);
    }
    return NULL;
}

/* The thread's slabs are abandoned when it exits, with its blocks in them;
 * this thread frees the blocks, onto the slabs' remote lists, where no
 * owner collects them. */
static void test_exited_thread(void)
{
    static void *blocks[EXITED_BLOCKS];
    malloc_trim(0);
    size_t rss_start = rss_bytes();
    size_t used_start = mallinfo2().uordblks;
    pthread_t thread;
    if (pthread_create(&thread, NULL, allocate_and_exit, blocks) != 0 ||
        pthread_join(thread, NULL) != 0)
        hard_error("cannot run a thread");
    for (size_t i = 0; i < EXITED_BLOCKS; i++)
        free(blocks[i]);
    size_t rss_freed = rss_bytes();
    int trimmed = malloc_trim(0);
    size_t rss_trimmed = rss_bytes();
    size_t used_trimmed = mallinfo2().uordblks;
    printf("an exited thread's %d blocks freed here: RSS %.1f MiB at start, %.1f MiB freed, "
           "%.1f MiB trimmed\n",
           EXITED_BLOCKS, (double)rss_start / MiB, (double)rss_freed / MiB,
           (double)rss_trimmed / MiB);
    CHECK(trimmed == 1, "malloc_trim(0) returned %d, not 1", trimmed);
    CHECK(rss_trimmed <= rss_start + MiB,
          "after malloc_trim RSS is %.1f MiB, %.1f MiB above the start", (double)rss_trimmed / MiB,
          ((double)rss_trimmed - (double)rss_start) / MiB);
    CHECK(used_trimmed <= used_start + 64 * KiB,
          "after malloc_trim uordblks is %zu, %zu before the thread ran", used_trimmed, used_start);
}

int main(void)
{
    if (under_valgrind()) {
        printf("under valgrind RSS is valgrind's: skipped\n");
        return EXIT_SKIP;
    }
    test_mixed_sizes();
    test_exited_thread();
    return test_result("test_trim");
}

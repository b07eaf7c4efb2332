/* Freed memory goes back to the OS beyond a bounded cache: after 256 MiB of
 * blocks are written and freed, RSS falls by at least three quarters of it.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define TOTAL (256 * MiB)

static void test_release(size_t block_size)
{
    size_t count = TOTAL / block_size;
    unsigned char **blocks = calloc(count, sizeof(*blocks));

    if (blocks == NULL) {
        hard_error("calloc of the block table failed");
    }
    size_t rss_before = rss_bytes();
    for (size_t i = 0; i < count; i++) {
        blocks[i] = malloc(block_size);
        if (blocks[i] == NULL) {
            hard_error("malloc(%zu) failed after %zu blocks", block_size, i);
        }
        memset(blocks[i], (int)(i | 1), block_size);
    }
    size_t rss_full = rss_bytes();
    for (size_t i = 0; i < count; i++) {
        free(blocks[i]);
    }
    size_t rss_freed = rss_bytes();
    free(blocks);

    printf("%zu blocks of %zu KiB: RSS %zu MiB before, %zu MiB written, %zu MiB freed\n", count,
           block_size / KiB, rss_before / MiB, rss_full / MiB, rss_freed / MiB);
    CHECK(rss_freed + TOTAL / 4 * 3 <= rss_full,
          "freeing %zu MiB of %zu KiB blocks lowered RSS only from %zu to %zu MiB (want a fall "
          "of at least %zu MiB)",
          TOTAL / MiB, block_size / KiB, rss_full / MiB, rss_freed / MiB, TOTAL / 4 * 3 / MiB);
}

int main(void)
{
    if (under_valgrind()) {
        printf("under valgrind RSS is valgrind's: skipped\n");
        return EXIT_SKIP;
    }
    test_release(MiB);
    test_release(4 * MiB);
    test_release(256 * KiB);
    return test_result("test_release");
}

/* L25 blocks (32 KiB - 1 MiB) that malloc, calloc and realloc hand out
 * start at their span's colour, a cache line of its first page, where the
 * request fits past it; aligned allocation takes the span's start
 * (block/size_class.h, hak_l25_colour; front/thread_heap.h,
 * hak_heap_at_colour).
 *
 * Starts: COUNT live blocks of 40-900 KiB from malloc, calloc and realloc
 * start at multiples of 64 from 256 to 3840 bytes into a page, at 4 or
 * more different offsets, their usable bytes ending at a page's end (their
 * span's), all of them written and kept.
 * Fit: a request of a whole class (112 KiB, 1 MiB) has no room for a
 * colour and starts a page, with its whole class usable.
 * Alignment: posix_memalign, aligned_alloc and memalign keep their
 * alignment (64 B to a page) over the same sizes.
 * Reuse (levels 0 and 1, which cache spans): a block freed and asked for
 * again comes back where it was (the span's colour is its own); a
 * page-aligned request takes the span at its start, and the calloc after
 * it the colour again, zero over what the first block had written.
 * realloc: shrinking and growing within the usable bytes keep the block
 * where it is; growing past them moves it with its bytes.
 * Threads: a block freed by another thread comes back to its span.
 * Levels: the program runs itself again at HAKMEM_HARDEN=0 (coloured) and
 * 2, whose canaries and guard pages keep every block at its span's start. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { COUNT = 12, PAGE = 4096 };
#define L6_BYTES (112 * KiB) /* the class of 96-112 KiB */

static bool coloured; /* false at level 2 */

static size_t page_offset(const void *block)
{
    return (uintptr_t)block % PAGE;
}

/* What an L25 block that fits past any colour may start at. */
static void check_start(const char *what, size_t size, const char *block)
{
    size_t offset = page_offset(block);
    if (coloured)
        CHECK(offset % 64 == 0 && offset >= 256 && offset <= 3840,
              "%s of %zu bytes starts %zu bytes into its page, not a multiple of 64 from 256 to "
              "3840",
              what, size, offset);
    else
        CHECK(offset == 0, "%s of %zu bytes starts %zu bytes into its page at level 2", what, size,
              offset);
    size_t usable = malloc_usable_size((void *)block);
    CHECK(usable >= size, "%s of %zu bytes has %zu usable", what, size, usable);
    CHECK(!coloured || page_offset(block + usable) == 0,
          "%s: its %zu usable bytes end %zu bytes into a page", what, usable,
          page_offset(block + usable));
}

static void test_starts(void)
{
    char *blocks[COUNT];
    size_t offsets[COUNT];
    for (int i = 0; i < COUNT; i++) {
        /* 4 KiB or more short of their classes' sizes (48 KiB ... 1 MiB),
         * past the last colour. */
        static const size_t kib[COUNT] = {40, 60, 70, 100, 150, 180, 200, 300, 400, 500, 700, 900};
        size_t size = kib[i] * KiB + 8;
        if (i % 3 == 0)
            blocks[i] = malloc(opaque_size(size));
        else if (i % 3 == 1)
            blocks[i] = calloc(1, opaque_size(size));
        else
            blocks[i] = realloc(malloc(opaque_size(64)), opaque_size(size));
        if (!blocks[i])
            hard_error("allocation of %zu bytes failed", size);
        check_start("an L25 block", size, blocks[i]);
        offsets[i] = page_offset(blocks[i]);
        memset(blocks[i], i + 1, malloc_usable_size(blocks[i]));
    }
    int distinct = 0;
    for (int i = 0; i < COUNT; i++) {
        int j = 0;
        while (j < i && offsets[j] != offsets[i])
            j++;
        distinct += j == i;
    }
    CHECK(!coloured || distinct >= 4, "%d live L25 blocks start at %d offsets into their pages",
          COUNT, distinct);
    for (int i = 0; i < COUNT; i++) {
        size_t usable = malloc_usable_size(blocks[i]);
        CHECK(blocks[i][0] == i + 1 && blocks[i][usable - 1] == i + 1,
              "block %d lost what was written over its %zu usable bytes", i, usable);
        free(blocks[i]);
    }
}

static void test_whole_class(void)
{
    static const size_t sizes[] = {L6_BYTES, MiB};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        char *block = malloc(opaque_size(sizes[s]));
        if (!block)
            hard_error("malloc(%zu) failed", sizes[s]);
        CHECK(page_offset(block) == 0, "a block of a whole class (%zu B) starts %zu into a page",
              sizes[s], page_offset(block));
        CHECK(malloc_usable_size(block) == sizes[s], "a block of %zu B has %zu usable", sizes[s],
              malloc_usable_size(block));
        memset(block, 3, sizes[s]);
        free(block);
    }
}

static void test_alignment(void)
{
    static const size_t aligns[] = {64, 256, 1024, PAGE};
    for (size_t a = 0; a < sizeof(aligns) / sizeof(aligns[0]); a++) {
        size_t align = aligns[a];
        for (int i = 0; i < 3; i++) {
            size_t size = 100 * KiB + (size_t)i * 200 * KiB;
            void *blocks[3] = {NULL, NULL, NULL};
            if (posix_memalign(&blocks[0], align, opaque_size(size)) != 0)
                hard_error("posix_memalign(%zu, %zu) failed", align, size);
            blocks[1] = aligned_alloc(align, opaque_size(size));
            blocks[2] = memalign(align, opaque_size(size));
            for (int k = 0; k < 3; k++) {
                if (!blocks[k])
                    hard_error("aligned allocation %d of %zu at %zu failed", k, size, align);
                CHECK((uintptr_t)blocks[k] % align == 0, "aligned allocation %d (%zu) gave %p", k,
                      align, blocks[k]);
                memset(blocks[k], 5, malloc_usable_size(blocks[k]));
            }
            for (int k = 0; k < 3; k++)
                free(blocks[k]);
        }
    }
}

static void test_reuse(void)
{
    const size_t size = 100 * KiB;
    char *first = malloc(opaque_size(size));
    if (!first)
        hard_error("malloc(100 KiB) failed");
    char *span = first - page_offset(first);
    memset(first, 0xab, malloc_usable_size(first));
    free(first);
    char *again = malloc(opaque_size(size));
    if (!again)
        hard_error("malloc(100 KiB) failed");
    if (!coloured) { /* level 2 caches no span */
        free(again);
        return;
    }
    CHECK(again == first, "a 100 KiB block freed and asked for again came back at %p, not %p",
          (void *)again, (void *)first);
    free(again);
    void *aligned = NULL;
    if (posix_memalign(&aligned, PAGE, opaque_size(size)) != 0)
        hard_error("posix_memalign(4096, 100 KiB) failed");
    CHECK(aligned == span, "a page-aligned 100 KiB block came at %p, not the freed span %p",
          aligned, (void *)span);
    free(aligned);
    char *zeroed = calloc(1, opaque_size(size));
    if (!zeroed)
        hard_error("calloc(100 KiB) failed");
    CHECK(zeroed == first, "calloc of 100 KiB over the freed block came at %p, not %p",
          (void *)zeroed, (void *)first);
    size_t nonzero = nonzero_offset(zeroed, size);
    CHECK(nonzero == PATTERN_INTACT, "calloc over a written block: byte %zu of 100 KiB not zero",
          nonzero);
    free(zeroed);
}

static void test_realloc(void)
{
    size_t size = 90 * KiB;
    unsigned char *block = malloc(opaque_size(size));
    if (!block)
        hard_error("malloc(90 KiB) failed");
    for (size_t i = 0; i < size; i++)
        block[i] = (unsigned char)(i * 7 + i / 4096);
    unsigned char *shrunk = realloc(block, opaque_size(size - 10 * KiB));
    CHECK(shrunk == block, "realloc shrinking an L25 block by 10 KiB moved it");
    size_t usable = malloc_usable_size(shrunk);
    unsigned char *grown = realloc(shrunk, opaque_size(usable));
    CHECK(grown == block, "realloc to the block's %zu usable bytes moved it", usable);
    unsigned char *moved = realloc(grown, opaque_size(300 * KiB));
    if (!moved)
        hard_error("realloc to 300 KiB failed");
    check_start("a block realloc moved", 300 * KiB, (const char *)moved);
    size_t wrong = 0;
    for (size_t i = 0; i < size - 10 * KiB; i++)
        wrong += moved[i] != (unsigned char)(i * 7 + i / 4096);
    CHECK(wrong == 0, "realloc to 300 KiB lost %zu of the block's bytes", wrong);
    free(moved);
}

static void *free_block(void *block)
{
    free(block);
    return NULL;
}

static void test_threads(void)
{
    const size_t size = 200 * KiB;
    char *block = malloc(opaque_size(size));
    if (!block)
        hard_error("malloc(200 KiB) failed");
    memset(block, 9, size);
    pthread_t thread;
    if (pthread_create(&thread, NULL, free_block, block) != 0 || pthread_join(thread, NULL) != 0)
        hard_error("the freeing thread failed");
    /* Its span went to the other thread's cache or home: every later
     * block of the class is sound, wherever it comes from. */
    for (int i = 0; i < 4; i++) {
        char *next = malloc(opaque_size(size));
        if (!next)
            hard_error("malloc(200 KiB) after a remote free failed");
        check_start("a block after a remote free", size, next);
        memset(next, i, size);
        free(next);
    }
}

static int run_again(char **argv, const char *level)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        hard_error("fork failed");
    if (pid == 0) {
        setenv("HAKMEM_HARDEN", level, 1);
        execl(argv[0], argv[0], "again", (char *)NULL);
        _exit(EXIT_HARD_ERROR);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        hard_error("the run at level %s did not finish", level);
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    const char *level = getenv("HAKMEM_HARDEN");
    coloured = level == NULL || strcmp(level, "2") != 0;
    test_starts();
    test_whole_class();
    test_alignment();
    test_reuse();
    test_realloc();
    test_threads();
    printf("level %s: L25 blocks %s\n", level ? level : "default",
           coloured ? "coloured" : "at their spans' starts");
    if (argc == 1) {
        int status = run_again(argv, "0");
        if (status == 0)
            status = run_again(argv, "2");
        if (status != 0)
            return status;
    }
    return check_failures ? EXIT_FAILURE : EXIT_SUCCESS;
}

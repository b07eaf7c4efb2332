/* Large blocks start at a colour: a cache line of their head's page, a
 * different one for each block handed out, not all on the first line of a
 * page (arena/large.c, colour_for).
 *
 * Starts: COUNT live blocks of 2-3 MiB from malloc, calloc and realloc
 * start at COUNT different offsets into their pages, each a multiple of 64
 * from 384 to 3840; each block's usable bytes end at the end of a page,
 * where its mapping's own pages do, so that the colour's bytes are the
 * block's, all of them written here.
 * Alignment: memalign's blocks keep theirs (1 KiB: a colour of whole KiB
 * or none; a page: none).
 * Reuse: a block over a freed mapping starts where the freed one did (the
 * mapping keeps its colour), and calloc's is zero there, where the freed
 * block's bytes lay; one aligned to 1 KiB over it takes a colour it may.
 * Growth: a block realloc grows to twenty times its size keeps its bytes,
 * those in its head's page among them.
 * Level 2 guards a freed block's pages whole and colours none: the
 * program runs itself again with HAKMEM_HARDEN=2, where every block of
 * malloc starts a page. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { COUNT = 8, PAGE = 4096 };

static bool coloured; /* false at level 2 */

static size_t page_offset(const void *block)
{
    return (uintptr_t)block % PAGE;
}

/* What a large block's start may be: a colour, or at level 2 a page. */
static void check_start(const char *what, const char *block)
{
    size_t offset = page_offset(block);
    if (coloured)
        CHECK(offset % 64 == 0 && offset >= 384 && offset <= 3840,
              "%s starts %zu bytes into its page, not a multiple of 64 from 384 to 3840", what,
              offset);
    else
        CHECK(offset == 0, "%s starts %zu bytes into its page at level 2", what, offset);
    /* Level 2's usable bytes are those asked for, its canary after them. */
    size_t usable = malloc_usable_size((void *)block);
    CHECK(!coloured || page_offset(block + usable) == 0,
          "%s: its %zu usable bytes end %zu bytes into a page", what, usable,
          page_offset(block + usable));
}

static void test_starts(void)
{
    char *blocks[COUNT];
    for (int i = 0; i < COUNT; i++) {
        size_t size = 2 * MiB + (size_t)i * 100 * KiB + 8;
        if (i % 3 == 0)
            blocks[i] = malloc(opaque_size(size));
        else if (i % 3 == 1)
            blocks[i] = calloc(1, opaque_size(size));
        else
            blocks[i] = realloc(malloc(opaque_size(64)), opaque_size(size));
        if (!blocks[i])
            hard_error("allocation of %zu bytes failed", size);
        check_start("a large block", blocks[i]);
        memset(blocks[i], i, malloc_usable_size(blocks[i]));
    }
    for (int i = 0; i < COUNT && coloured; i++)
        for (int j = 0; j < i; j++)
            CHECK(page_offset(blocks[i]) != page_offset(blocks[j]),
                  "blocks %d and %d both start %zu bytes into their pages", j, i,
                  page_offset(blocks[i]));
    for (int i = 0; i < COUNT; i++) {
        size_t usable = malloc_usable_size(blocks[i]);
        CHECK(blocks[i][0] == i && blocks[i][usable - 1] == i,
              "block %d lost what was written over its %zu usable bytes", i, usable);
        free(blocks[i]);
    }
}

static void test_alignment(void)
{
    static const size_t aligns[] = {64, 1024, PAGE, 64 * KiB};
    for (size_t a = 0; a < sizeof(aligns) / sizeof(aligns[0]); a++) {
        for (int i = 0; i < 3; i++) {
            size_t align = aligns[a];
            char *block = memalign(align, opaque_size(2 * MiB + 512));
            if (!block)
                hard_error("memalign(%zu, 2 MiB) failed", align);
            CHECK((uintptr_t)block % align == 0, "memalign(%zu) gave %p", align, (void *)block);
            memset(block, 1, malloc_usable_size(block));
            free(block);
        }
    }
}

/* The freed block's mapping, cached, serves the calloc after it. */
static void test_reuse(void)
{
    const size_t size = 3 * MiB;
    char *first = malloc(opaque_size(size));
    if (!first)
        hard_error("malloc(3 MiB) failed");
    uintptr_t head = large_block_head(first);
    memset(first, 0xab, malloc_usable_size(first));
    size_t first_offset = page_offset(first);
    free(first);
    char *second = calloc(1, opaque_size(size));
    if (!second)
        hard_error("calloc(3 MiB) failed");
    check_start("a calloc'd block over a freed mapping", second);
    CHECK(large_block_head(second) == head, "calloc did not reuse the freed mapping");
    CHECK(page_offset(second) == first_offset,
          "the reused mapping's block starts %zu bytes into its page, the freed one %zu",
          page_offset(second), first_offset);
    size_t nonzero = 0;
    for (size_t i = 0; i < size; i++)
        nonzero += second[i] != 0;
    CHECK(nonzero == 0, "calloc over a freed mapping left %zu bytes of it not zero", nonzero);
    free(second);
    char *aligned = memalign(KiB, opaque_size(size));
    if (!aligned)
        hard_error("memalign(1 KiB, 3 MiB) failed");
    CHECK((uintptr_t)aligned % KiB == 0, "memalign(1 KiB) over a freed mapping gave %p",
          (void *)aligned);
    CHECK(large_block_head(aligned) == head, "memalign(1 KiB) did not reuse the freed mapping");
    free(aligned);
}

static void test_growth(void)
{
    size_t size = 2 * MiB;
    unsigned char *block = malloc(opaque_size(size));
    if (!block)
        hard_error("malloc(2 MiB) failed");
    for (size_t i = 0; i < size; i++)
        block[i] = (unsigned char)(i * 7 + i / 4096);
    /* Live blocks around it, so that it may have to move. */
    void *fence = malloc(opaque_size(2 * MiB));
    unsigned char *grown = realloc(block, opaque_size(20 * size));
    if (!grown)
        hard_error("realloc to 40 MiB failed");
    check_start("a block realloc grew", (const char *)grown);
    size_t wrong = 0;
    for (size_t i = 0; i < size; i++)
        wrong += grown[i] != (unsigned char)(i * 7 + i / 4096);
    CHECK(wrong == 0, "realloc to 40 MiB (%s) lost %zu of the block's 2 MiB",
          grown == block ? "in place" : "moved", wrong);
    free(grown);
    free(fence);
}

int main(int argc, char **argv)
{
    const char *level = getenv("HAKMEM_HARDEN");
    coloured = level == NULL || strcmp(level, "2") != 0;
    test_starts();
    test_alignment();
    test_reuse();
    test_growth();
    printf("level %s: large blocks %s\n", level ? level : "default",
           coloured ? "coloured" : "on whole pages");
    if (coloured && argc == 1) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            hard_error("fork failed");
        if (pid == 0) {
            setenv("HAKMEM_HARDEN", "2", 1);
            execl(argv[0], argv[0], "again", (char *)NULL);
            _exit(EXIT_HARD_ERROR);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
            hard_error("the run at level 2 did not finish");
        if (WEXITSTATUS(status) != 0)
            return WEXITSTATUS(status);
    }
    return check_failures ? EXIT_FAILURE : EXIT_SUCCESS;
}

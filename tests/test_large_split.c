/* Large blocks cut from, or grown over, freed ones.
 *
 * Split: a 15 MiB block is filled with 32-bit ones and freed; a 9 MiB block
 * then takes the front of its mapping and a 4 MiB one what is left, which
 * gets a head of its own where the program's ones were.  A 1 in the head's
 * route word is what the page map reads as a chunk of small blocks: written
 * to the map before the head was, it sent the 4 MiB block's free into a
 * slab lookup on the program's bytes (a crash at every hardening level,
 * seen in CPython's tests).  Run first, while no other freed mapping is
 * kept that would serve the two blocks instead.
 *
 * Decay: a freed mapping older than HAKMEM_DECAY_MS goes back to the kernel
 * when the next large malloc looks at the cache; that malloc, finding none
 * left to grow, must not take one from the empty cache (it did, and the
 * cache's count wrapped around).
 *
 * Growth: a block realloc made large grows by mremap, not by copies.  One
 * that realloc doubles is made large from 64 KiB, not copied into every
 * class up to 256 KiB.
 *
 * Headroom: a large block realloc grows by an eighth at a time, as CPython
 * grows a list or a bytearray, has its mapping grow by half at least, so
 * that most of those reallocs find the room mapped already.
 *
 * In a cached mapping: a block realloc made large from 256 KiB may be
 * handed a freed mapping of 2 MiB or more; it grows in place up to the
 * mapping's end, where it moved at every realloc up to half of the mapping.
 *
 * Whole units: with huge pages (the default) a fresh 9 MiB block is mapped
 * in whole 2 MiB units, the slack its own, so that its last unit is one huge
 * page; a 6 MiB one, which would gain more than a quarter, and an 8 MiB one,
 * whose head's page is all it would put in a tenth unit, are mapped to the
 * page.  Level 2 keeps its guard page right after the block.
 *
 * The program runs itself again with HAKMEM_DECAY_MS=50, so that the decay
 * takes a short sleep.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static void split_over_program_bytes(void)
{
    const size_t big = 15 * MiB;
    uint32_t *words = malloc(opaque_size(big));
    if (words == NULL) {
        hard_error("malloc(15 MiB) failed");
    }
    for (size_t i = 0; i < big / sizeof(*words); i++) {
        words[i] = 1;
    }
    free(words);

    char *front = malloc(opaque_size(9 * MiB));
    char *rest = malloc(opaque_size(4 * MiB));
    if (front == NULL || rest == NULL) {
        hard_error("malloc(9 MiB, 4 MiB) failed");
    }
    memset(front, 0x11, 9 * MiB);
    memset(rest, 0x22, 4 * MiB);
    CHECK(malloc_usable_size(rest) >= 4 * MiB, "the 4 MiB block has %zu usable bytes",
          malloc_usable_size(rest));
    free(rest);
    for (size_t i = 0; i < 9 * MiB; i += 4096) {
        CHECK(front[i] == 0x11, "the 9 MiB block changed at byte %zu when its neighbour was freed",
              i);
        if (front[i] != 0x11) {
            break;
        }
    }
    free(front);
}

static void grow_after_decay(void)
{
    const struct timespec past_decay = {.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000};
    for (int round = 0; round < 4; round++) {
        char *freed = malloc(opaque_size(3 * MiB));
        if (freed == NULL) {
            hard_error("malloc(3 MiB) failed");
        }
        memset(freed, 0x33, 3 * MiB);
        free(freed);
        nanosleep(&past_decay, NULL);
        /* Bigger than what was freed: only growing it would serve. */
        char *grown = malloc(opaque_size(7 * MiB));
        CHECK(grown != NULL, "malloc(7 MiB) after the decay failed (round %d)", round);
        if (grown != NULL) {
            memset(grown, 0x44, 7 * MiB);
            free(grown);
        }
    }
}

/* A block that realloc made large (from 256 KiB) grows without moving
 * again where the address space allows: it moved at every step. */
static void grow_from_quarter_mib(void)
{
    char *block = malloc(opaque_size(260 * KiB));
    if (block == NULL) {
        hard_error("malloc(260 KiB) failed");
    }
    memset(block, 0x55, 260 * KiB);
    int moves = 0;
    for (size_t size = 276 * KiB; size <= 3 * MiB; size += 16 * KiB) {
        char *grown = realloc(block, opaque_size(size));
        if (grown == NULL) {
            hard_error("realloc(%zu) failed", size);
        }
        moves += grown != block;
        block = grown;
    }
    CHECK(block[260 * KiB - 1] == 0x55, "the grown block lost its contents");
    /* Level 2 keeps a checked block's guard page, so it copies instead. */
    const char *level = getenv("HAKMEM_HARDEN");
    CHECK(moves <= 24 || (level != NULL && !strcmp(level, "2")),
          "growing from 260 KiB to 3 MiB in 16 KiB steps moved the block %d times", moves);
    free(block);
}

/* The live large blocks a realloc of a block from `from` to `to` bytes
 * added in mallinfo2, its contents checked. */
static long large_blocks_added(size_t from, size_t to)
{
    char *block = malloc(opaque_size(from));
    if (block == NULL) {
        hard_error("malloc(%zu) failed", from);
    }
    memset(block, 0x66, from);
    size_t before = mallinfo2().hblks;
    char *grown = realloc(block, opaque_size(to));
    if (grown == NULL) {
        hard_error("realloc(%zu) failed", to);
    }
    size_t after = mallinfo2().hblks;
    CHECK(grown[from - 1] == 0x66, "realloc from %zu B to %zu B lost the contents", from, to);
    free(grown);
    return (long)after - (long)before;
}

/* A doubling from 50 000 B to 100 000 B makes the block large: one more
 * live large block in mallinfo2; so does a growth by less than half, from
 * 70 000 B to 90 000 B, while the program holds few large blocks, as this
 * one does (with many it stays in the classes up to 256 KiB:
 * test_realloc_growth); a block under 32 KiB that jumps past 64 KiB at
 * once (2000 B or 28 000 B to 100 000 B) stays in the classes, being no
 * vector that doubles: from 32 KiB (40 000 B to 100 000 B) it is one. */
static void double_past_64k(void)
{
    long doubled = large_blocks_added(50000, 100000);
    CHECK(doubled == 1, "realloc doubling 50000 B to 100000 B added %ld live large blocks",
          doubled);
    long grown = large_blocks_added(70000, 90000);
    CHECK(grown == 1, "realloc from 70000 B to 90000 B added %ld live large blocks", grown);
    long jumped = large_blocks_added(2000, 100000);
    CHECK(jumped == 0, "realloc from 2000 B to 100000 B made the block large (%ld more)", jumped);
    long below = large_blocks_added(28000, 100000);
    long from = large_blocks_added(40000, 100000);
    CHECK(below == 0 && from == 1,
          "realloc to 100000 B made a block of 28000 B large (%ld more) or one of 40000 B not "
          "(%ld more)",
          below, from);
}

static void grow_by_eighths(void)
{
    malloc_trim(0); /* no freed mapping to grow over */
    size_t size = 1 * MiB;
    char *block = malloc(opaque_size(size));
    if (block == NULL) {
        hard_error("malloc(1 MiB) failed");
    }
    memset(block, 0x77, size);
    int steps = 0, mappings = 0;
    size_t usable = malloc_usable_size(block);
    while (size < 8 * MiB) {
        size_t old = size;
        size += size / 8;
        char *grown = realloc(block, opaque_size(size));
        if (grown == NULL) {
            hard_error("realloc(%zu) failed", size);
        }
        block = grown;
        memset(block + old, 0x77, size - old); /* filled as a growing list is */
        steps++;
        mappings += malloc_usable_size(block) != usable;
        usable = malloc_usable_size(block);
    }
    CHECK(block[0] == 0x77, "the grown block lost its contents");
    /* Level 2 keeps a checked block's size exact. */
    const char *level = getenv("HAKMEM_HARDEN");
    CHECK(mappings <= steps / 2 || (level != NULL && !strcmp(level, "2")),
          "growing from 1 MiB to 8 MiB by eighths grew the mapping at %d of %d reallocs", mappings,
          steps);
    free(block);
}

/* A block realloc made large at 300 KiB, just after an 8 MiB block was
 * freed; NULL when the freed mapping did not serve it (HAKMEM_DECAY_MS is
 * 50 ms here: a thread kept off the CPU that long finds it decayed). */
static char *large_from_cached_mapping(void)
{
    char *freed = malloc(opaque_size(8 * MiB));
    char *block = malloc(opaque_size(200 * KiB));
    if (freed == NULL || block == NULL) {
        hard_error("malloc(8 MiB, 200 KiB) failed");
    }
    memset(freed, 0x66, 8 * MiB);
    memset(block, 0x66, 200 * KiB);
    free(freed);
    char *large = realloc(block, opaque_size(300 * KiB));
    if (large == NULL) {
        hard_error("realloc(300 KiB) failed");
    }
    if (malloc_usable_size(large) >= 2 * MiB - 4 * KiB) {
        return large;
    }
    free(large);
    return NULL;
}

static void grow_in_cached_mapping(void)
{
    const char *level = getenv("HAKMEM_HARDEN");
    if (level != NULL && !strcmp(level, "2")) {
        return; /* checked blocks keep their own mapping and guard page */
    }
    malloc_trim(0);
    char *large = NULL;
    for (int attempt = 0; attempt < 5 && large == NULL; attempt++) {
        large = large_from_cached_mapping();
    }
    CHECK(large != NULL, "5 blocks made large at 300 KiB were not cut from a freed 8 MiB mapping");
    if (large == NULL) {
        return;
    }
    size_t usable = malloc_usable_size(large);
    int moves = 0;
    for (size_t size = 340 * KiB; size <= usable; size += 40 * KiB) {
        char *grown = realloc(large, opaque_size(size));
        if (grown == NULL) {
            hard_error("realloc(%zu) failed", size);
        }
        moves += grown != large;
        large = grown;
    }
    CHECK(moves == 0, "growing within its %zu-byte mapping moved the block %d times", usable,
          moves);
    CHECK(large[200 * KiB - 1] == 0x66, "the grown block lost its contents");
    free(large);
}

/* Where a large block's usable bytes end, from its head's page. */
static size_t mapping_end(char *block)
{
    return (uintptr_t)block + malloc_usable_size(block) - large_block_head(block);
}

static void whole_units(void)
{
    const char *level = getenv("HAKMEM_HARDEN");
    const char *huge = getenv("HAKMEM_HUGE_PAGES");
    bool rounds = (level == NULL || strcmp(level, "2")) && (huge == NULL || strcmp(huge, "0"));
    malloc_trim(0); /* no freed mapping to serve them: fresh ones */
    char *nine = malloc(opaque_size(9 * MiB));
    char *six = malloc(opaque_size(6 * MiB));
    char *eight = malloc(opaque_size(8 * MiB));
    if (nine == NULL || six == NULL || eight == NULL) {
        hard_error("malloc(9 MiB, 6 MiB, 8 MiB) failed");
    }
    /* Each ends where its mapping does; its head's page is the one its
     * first byte lies in, or the one before where it starts a page (a
     * large block starts at a cache line of the head's page, its colour). */
    size_t expected = rounds ? 10 * MiB : 4096 + 9 * MiB;
    CHECK(mapping_end(nine) == expected, "the 9 MiB block ends %zu bytes after its head, not %zu",
          mapping_end(nine), expected);
    CHECK(mapping_end(six) == 4096 + 6 * MiB, "the 6 MiB block ends %zu bytes after its head",
          mapping_end(six));
    CHECK(mapping_end(eight) == 4096 + 8 * MiB, "the 8 MiB block ends %zu bytes after its head",
          mapping_end(eight));
    memset(nine, 0x66, malloc_usable_size(nine));
    free(eight);
    free(six);
    free(nine);
}

int main(int argc, char **argv)
{
    (void)argc;
    rerun_with("HAKMEM_DECAY_MS", "50", argv);
    /* whole_units checks the rounding that comes with huge pages, which
     * auto leaves off in some virtual machines. */
    rerun_with("HAKMEM_HUGE_PAGES", "1", argv);
    split_over_program_bytes();
    grow_after_decay();
    grow_from_quarter_mib();
    double_past_64k();
    grow_by_eighths();
    grow_in_cached_mapping();
    whole_units();
    return test_result("test_large_split");
}

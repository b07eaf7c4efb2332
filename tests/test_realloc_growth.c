/* A block over 1 KiB that realloc grows by less than half moves, when it
 * must, to a block half as big again as it was, but no bigger than the
 * power of two its new size fits (malloc_api.c, moved_request): growing a
 * buffer from 1 KiB to 256 KiB by an eighth at a time, as CPython grows a
 * list, moved it at about two steps in three when each move took the next
 * class (4 to a doubling), and moves it at no more than three in eight
 * now.  Growing by a few bytes at a time moves it at most twice per
 * doubling.  A buffer that stops growing at a power of two (Redis's 8 KiB
 * list nodes) ends in a block of that size, not one half as big again.
 * A buffer grown by eighths becomes a large block before 80 KiB while the
 * program holds few large blocks, and from there grows to 1 MiB without
 * moving (it was copied into every L25 class up to 256 KiB); while it
 * holds many, each would take a mapping of its own, and the buffer stays
 * in the L25 classes up to 128 KiB at least.
 * The contents survive every move.  Run
 * with HAKMEM_HARDEN=2 it holds checked mode to the same counts, but for
 * the large block's, which moves at the end of each mapping there: a block
 * it moves keeps its size exact for the canary, with the room behind it
 * (test_harden_levels runs it at levels 0 and 2, and test_realloc_checked
 * compares the levels).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Grows a block from 1 KiB to limit, adding size/divisor + extra bytes at
 * each step; returns the moves and counts the steps. */
static int grow(size_t divisor, size_t extra, size_t limit, int *steps)
{
    size_t size = 1 * KiB;
    unsigned char *block = malloc(opaque_size(size));
    if (block == NULL) {
        hard_error("malloc(1 KiB) failed");
    }
    memset(block, 0x5a, size);
    int moves = 0;
    *steps = 0;
    while (size < limit) {
        size_t old = size;
        size += (divisor ? size / divisor : 0) + extra;
        unsigned char *grown = realloc(block, opaque_size(size));
        if (grown == NULL) {
            hard_error("realloc(%zu) failed", size);
        }
        moves += grown != block;
        block = grown;
        memset(block + old, 0x5a, size - old);
        (*steps)++;
    }
    for (size_t i = 0; i < size; i += 997) {
        CHECK(block[i] == 0x5a, "growing to %zu bytes lost byte %zu", size, i);
    }
    free(block);
    return moves;
}

/* The usable size of a block grown from 1 KiB by step bytes at a time for
 * as long as it stays within limit. */
static size_t usable_after_growth(size_t step, size_t limit)
{
    size_t size = 1 * KiB;
    unsigned char *block = malloc(opaque_size(size));
    if (block == NULL) {
        hard_error("malloc(1 KiB) failed");
    }
    while (size + step <= limit) {
        size += step;
        unsigned char *grown = realloc(block, opaque_size(size));
        if (grown == NULL) {
            hard_error("realloc(%zu) failed", size);
        }
        block = grown;
        block[size - 1] = 1;
    }
    size_t usable = malloc_usable_size(block);
    free(block);
    return usable;
}

/* Grows a block by eighths from 1 KiB to 1 MiB; returns its moves from
 * 80 KiB on, and in *large_at_128k whether mallinfo2 counted it a large
 * block once it held 128 KiB. */
static int moves_past_80k(bool *large_at_128k)
{
    size_t hblks = mallinfo2().hblks;
    size_t size = 1 * KiB;
    unsigned char *block = malloc(opaque_size(size));
    if (block == NULL) {
        hard_error("malloc(1 KiB) failed");
    }
    block[0] = 0x3c;
    int moves = 0;
    *large_at_128k = false;
    while (size < 1 * MiB) {
        size_t old = size;
        size += size / 8;
        unsigned char *grown = realloc(block, opaque_size(size));
        if (grown == NULL) {
            hard_error("realloc(%zu) failed", size);
        }
        moves += grown != block && old >= 80 * KiB;
        block = grown;
        block[size - 1] = 0x3c;
        if (old < 128 * KiB && size >= 128 * KiB) {
            *large_at_128k = mallinfo2().hblks > hblks;
        }
    }
    CHECK(block[0] == 0x3c, "growing to %zu bytes lost the first byte", size);
    free(block);
    return moves;
}

static void grow_into_large(void)
{
    bool large;
    int moves = moves_past_80k(&large);
    printf("by eighths from 80 KiB to 1 MiB, no large blocks live: %d moves, %s at 128 KiB\n",
           moves, large ? "large" : "not large");
    /* Level 2 keeps a checked block's mapping, which its guard page ends:
     * the block moves to room half as big again, two moves a doubling.
     * memcheck checks every block, at any level (src/harden.c). */
    const char *level = getenv("HAKMEM_HARDEN");
    bool checked = under_valgrind() || (level != NULL && !strcmp(level, "2"));
    CHECK(large, "a buffer grown by eighths was no large block at 128 KiB");
    CHECK(moves == 0 || (checked && moves <= 10),
          "a buffer grown by eighths from 80 KiB to 1 MiB moved %d times", moves);

    enum { MANY = 32 };
    void *held[MANY];
    for (int i = 0; i < MANY; i++) {
        held[i] = malloc(opaque_size(2 * MiB));
        if (held[i] == NULL) {
            hard_error("malloc(2 MiB) failed");
        }
    }
    moves = moves_past_80k(&large);
    printf("the same with %d large blocks live: %d moves, %s at 128 KiB\n", MANY, moves,
           large ? "large" : "not large");
    CHECK(!large, "with %d large blocks live, a buffer grown by eighths was a large one at 128 KiB",
          MANY);
    for (int i = 0; i < MANY; i++) {
        free(held[i]);
    }
}

int main(void)
{
    int steps;
    int moves = grow(8, 0, 256 * KiB, &steps);
    printf("by eighths to 256 KiB: %d moves in %d steps\n", moves, steps);
    CHECK(moves * 8 <= steps * 3,
          "growing from 1 KiB to 256 KiB by eighths moved the block at %d of %d steps", moves,
          steps);
    moves = grow(0, 24, 64 * KiB, &steps);
    printf("by 24 bytes to 64 KiB: %d moves in %d steps\n", moves, steps);
    /* Six doublings from 1 KiB to 64 KiB. */
    CHECK(moves <= 12, "growing from 1 KiB to 64 KiB by 24 bytes moved the block %d times", moves);
    for (size_t step = 200; step <= 320; step += 24) {
        size_t usable = usable_after_growth(step, 8 * KiB);
        CHECK(usable <= 8 * KiB,
              "a block grown by %zu bytes at a time up to 8 KiB ended in %zu usable bytes", step,
              usable);
    }
    grow_into_large();
    return test_result("test_realloc_growth");
}

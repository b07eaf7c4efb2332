/* A block over 1 KiB that realloc grows by less than half moves, when it
 * must, to a block half as big again as it was, but no bigger than the
 * power of two its new size fits (malloc_api.c, moved_request): growing a
 * buffer from 1 KiB to 256 KiB by an eighth at a time, as CPython grows a
 * list, moved it at about two steps in three when each move took the next
 * class (4 to a doubling), and moves it at no more than three in eight
 * now.  Growing by a few bytes at a time moves it at most twice per
 * doubling.  A buffer that stops growing at a power of two (Redis's 8 KiB
 * list nodes) ends in a block of that size, not one half as big again.
 * The contents survive every move.  Run
 * with HAKMEM_HARDEN=2 it holds checked mode to the same counts: a block it
 * moves keeps its size exact for the canary, with the room behind it
 * (test_realloc_checked compares the levels in the suite).
 */
#define _GNU_SOURCE
#include <malloc.h>
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
    return test_result("test_realloc_growth");
}

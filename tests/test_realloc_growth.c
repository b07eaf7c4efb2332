/* A block over 1 KiB that realloc grows by less than half moves, when it
 * must, to a block half as big again as it was (malloc_api.c,
 * growth_class_size): growing a buffer from 1 KiB to 256 KiB by an eighth
 * at a time, as CPython grows a list, moved it at about two steps in three
 * when each move took the next class (4 to a doubling), and moves it at
 * no more than one in three now.  Growing by a few bytes at a time moves it
 * at most once per growth by half.  The contents survive every move.  Run
 * with HAKMEM_HARDEN=2 it holds checked mode to the same counts: a block it
 * moves keeps its size exact for the canary, with the room behind it
 * (test_realloc_checked compares the levels in the suite).
 */
#define _GNU_SOURCE
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

int main(void)
{
    int steps;
    int moves = grow(8, 0, 256 * KiB, &steps);
    printf("by eighths to 256 KiB: %d moves in %d steps\n", moves, steps);
    CHECK(moves * 3 <= steps,
          "growing from 1 KiB to 256 KiB by eighths moved the block at %d of %d steps", moves,
          steps);
    moves = grow(0, 24, 64 * KiB, &steps);
    printf("by 24 bytes to 64 KiB: %d moves in %d steps\n", moves, steps);
    /* 1.5^11 > 64: eleven moves to grow from 1 KiB to 64 KiB. */
    CHECK(moves <= 11, "growing from 1 KiB to 64 KiB by 24 bytes moved the block %d times", moves);
    return test_result("test_realloc_growth");
}

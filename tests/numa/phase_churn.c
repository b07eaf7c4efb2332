/*
 * Phases of small blocks and of 1-4 KiB blocks in turn, each freed whole
 * before the next, with a pause between for the freed memory to go stale:
 * the pages one phase left move to the next phase's fresh slabs and spans
 * (hakmem's lending, both ways), which the guest's kernel (Debian's, older
 * than 6.17) refuses to do over more than one of its mappings at a time.
 * Every block's first and last bytes carry its phase's tag and are read
 * back before it is freed: a page moved wrongly would show. Prints what it
 * did; the script reads the allocator's statistics.
 *
 * It links nothing but the C library, so the malloc it exercises is glibc's
 * or whatever LD_PRELOAD puts first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROUNDS = 3, PHASE_BYTES = 16 << 20, PAUSE_MS = 150, MAX_BLOCKS = PHASE_BYTES / 16 };

static unsigned char *blocks[MAX_BLOCKS];
static size_t sizes[MAX_BLOCKS];

static uint32_t next_random(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static void pause_ms(long ms)
{
    struct timespec wait = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&wait, NULL);
}

/* One phase: blocks of least to least + spread bytes, PHASE_BYTES of them,
 * tagged, checked and freed.  Returns 0, or 1 on a wrong byte. */
static int phase(size_t least, size_t spread, unsigned char tag, uint32_t *state)
{
    size_t count = 0, total = 0;
    while (total < PHASE_BYTES && count < MAX_BLOCKS) {
        size_t size = least + next_random(state) % spread;
        unsigned char *block = malloc(size);
        if (!block) {
            fprintf(stderr, "phase_churn: malloc(%zu) failed\n", size);
            exit(1);
        }
        block[0] = block[size - 1] = tag;
        blocks[count] = block;
        sizes[count++] = size;
        total += size;
    }
    int wrong = 0;
    for (size_t i = 0; i < count; i++) {
        if (blocks[i][0] != tag || blocks[i][sizes[i] - 1] != tag)
            wrong = 1;
        free(blocks[i]);
    }
    return wrong;
}

int main(void)
{
    uint32_t state = 2463534242u;
    int wrong = 0;
    for (unsigned round = 0; round < ROUNDS; round++) {
        wrong |= phase(16, 241, (unsigned char)(2 * round + 1), &state);
        pause_ms(PAUSE_MS);
        wrong |= phase(1024, 3073, (unsigned char)(2 * round + 2), &state);
        pause_ms(PAUSE_MS);
    }
    printf("phase_churn: %d rounds of %d MiB of small blocks, then of 1-4 KiB ones: %s\n", ROUNDS,
           PHASE_BYTES >> 20, wrong ? "a block lost its bytes" : "every block kept its bytes");
    return wrong;
}

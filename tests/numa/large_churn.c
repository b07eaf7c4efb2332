/*
 * Large blocks replaced one at a time, as large_blocks does, with every page
 * of each written and read back: a block that grows over cached ones gets
 * their pages moved in with mremap, which the guest's kernel (Debian's, older
 * than 6.17) refuses for a source over more than one of its mappings, and
 * only after it unmapped the destination.  A hole left so in a block would
 * fault on the write (hakmem before 47f6f2b did); a page moved wrongly would
 * show another block's bytes.  Fails on either, and prints what it did.
 *
 * It links nothing but the C library, so the malloc it exercises is glibc's
 * or whatever LD_PRELOAD puts first.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { LIVE = 10, STEPS = 200, PAGE = 4096 };

static uint32_t next_random(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

struct buffer {
    unsigned char *bytes;
    size_t size;
    unsigned char tag;
};

/* Every page's first and last byte carry the buffer's tag. */
static void fill(struct buffer *buffer, uint32_t *state, unsigned char tag)
{
    buffer->size = ((size_t)5 << 20) + next_random(state) % ((size_t)20 << 20);
    buffer->bytes = malloc(buffer->size);
    buffer->tag = tag;
    if (!buffer->bytes) {
        fprintf(stderr, "large_churn: malloc(%zu) failed\n", buffer->size);
        exit(1);
    }
    for (size_t at = 0; at < buffer->size; at += PAGE) {
        size_t end = at + PAGE < buffer->size ? at + PAGE : buffer->size;
        buffer->bytes[at] = tag;
        buffer->bytes[end - 1] = tag;
    }
}

static int check(const struct buffer *buffer, long step)
{
    for (size_t at = 0; at < buffer->size; at += PAGE) {
        size_t end = at + PAGE < buffer->size ? at + PAGE : buffer->size;
        if (buffer->bytes[at] != buffer->tag || buffer->bytes[end - 1] != buffer->tag) {
            fprintf(stderr,
                    "large_churn: step %ld: page at %zu of a %zu-byte buffer lost its bytes\n",
                    step, at, buffer->size);
            return 1;
        }
    }
    return 0;
}

int main(void)
{
    uint32_t state = 2463534242u;
    struct buffer live[LIVE];
    for (int i = 0; i < LIVE; i++)
        fill(&live[i], &state, (unsigned char)(i + 1));
    int failures = 0;
    for (long step = 0; step < STEPS && !failures; step++) {
        uint32_t victim = next_random(&state) % LIVE;
        free(live[victim].bytes);
        fill(&live[victim], &state, (unsigned char)(step % 250 + 1));
        failures += check(&live[next_random(&state) % LIVE], step);
    }
    for (int i = 0; i < LIVE && !failures; i++)
        failures += check(&live[i], STEPS);
    for (int i = 0; i < LIVE; i++)
        free(live[i].bytes);
    printf("large_churn: %d live buffers of 5-25 MiB replaced %d times: %s\n", LIVE, STEPS,
           failures ? "lost pages" : "every page kept");
    return failures ? 1 : 0;
}

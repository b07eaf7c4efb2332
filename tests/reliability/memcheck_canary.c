/* Valgrind's memcheck must see errors in this process, or a clean memcheck
 * run of hakmem proves nothing.  "stack": a branch on an uninitialised stack
 * value, which memcheck always reports.  The others are a program's own
 * bugs in heap blocks, which memcheck reports only where it knows the
 * allocator's blocks (its own malloc, or an allocator that describes its
 * blocks with client requests, as hakmem does): "heap", a branch on an
 * uninitialised malloc'd byte; "use-after-free", a read of the first byte of
 * a freed block; "overflow", a read one byte past a block; "leak", a block
 * whose last pointer is dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../opaque.h"

/* Out of the compiler's sight (TEST_OPAQUE), so that it neither warns about the
 * deliberate uninitialised reads nor folds them away. */
static TEST_OPAQUE void fill_even(int *values, int count)
{
    for (int i = 0; i < count; i += 2) {
        values[i] = i;
    }
}

static TEST_OPAQUE int is_positive(const unsigned char *bytes, size_t offset)
{
    return bytes[offset] > 0;
}

static TEST_OPAQUE int read_byte(const unsigned char *bytes, size_t offset)
{
    return bytes[offset];
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "stack") == 0) {
        int values[8];
        fill_even(values, 8);
        puts(is_positive((const unsigned char *)values, 3 * sizeof(int)) ? "positive" : "zero");
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "heap") == 0) {
        unsigned char *block = malloc(64);
        if (block == NULL) {
            return 2;
        }
        block[0] = 1;
        puts(is_positive(block, 10) ? "positive" : "zero");
        free(block);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "use-after-free") == 0) {
        unsigned char *block = malloc(64);
        if (block == NULL) {
            return 2;
        }
        memset(block, 1, 64);
        unsigned char *volatile freed = block;
        free(block);
        printf("%d\n", read_byte(freed, 0));
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "overflow") == 0) {
        unsigned char *block = malloc(100);
        if (block == NULL) {
            return 2;
        }
        memset(block, 1, 100);
        printf("%d\n", read_byte(block, 100));
        free(block);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "leak") == 0) {
        /* The first block of a slab is the slab's start, which hakmem's
         * own records point at: leak the second. */
        void *kept = malloc(100);
        void *lost = malloc(100);
        if (kept == NULL || lost == NULL) {
            return 2;
        }
        memset(lost, 1, 100);
        lost = NULL;
        printf("%p\n", kept);
        return 0;
    }
    fprintf(stderr, "usage: memcheck_canary stack|heap|use-after-free|overflow|leak\n");
    return 2;
}

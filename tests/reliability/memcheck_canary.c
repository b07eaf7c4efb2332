/* Valgrind's memcheck must see errors in this process, or a clean memcheck
 * run of hakmem proves nothing.  "stack": a branch on an uninitialised stack
 * value, which memcheck always reports.  "heap": a branch on an
 * uninitialised malloc'd byte, which memcheck reports only where it knows
 * the allocator's blocks (its own malloc, or an allocator that describes
 * its blocks with client requests).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of the compiler's sight (noipa), so that it neither warns about the
 * deliberate uninitialised reads nor folds them away. */
static __attribute__((noipa)) void fill_even(int *values, int count)
{
    for (int i = 0; i < count; i += 2) {
        values[i] = i;
    }
}

static __attribute__((noipa)) int is_positive(const unsigned char *bytes, size_t offset)
{
    return bytes[offset] > 0;
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
    fprintf(stderr, "usage: memcheck_canary stack|heap\n");
    return 2;
}

/* The checked mode's canary (block/canary.c): a block left alone passes,
 * and a run of one byte past its requested size is seen, whatever the byte
 * and the process's key, once the run covers a word: the canary's bytes
 * differ by their place in the word.  With one byte for the whole canary, a
 * run of that byte passed (the heap-fault suite's 'A's, once in 256
 * processes). */
#include <string.h>

#include "block/canary.h"
#include "unit.h"

enum { BLOCK = 128 };

int main(void)
{
    unit_watchdog();
    free(malloc(1)); /* hak_init: the process's keys */
    static uint64_t storage[BLOCK / 8];
    unsigned char *block = (unsigned char *)storage;
    unsigned tried = 0, missed = 0;
    /* Sizes at every place in a word: the canary starts there. */
    for (size_t size = 33; size <= 40; size++) {
        hak_canary_set(block, BLOCK, size);
        CHECK(hak_canary_intact(block, BLOCK), "a block of %zu left alone fails its canary check",
              size);
        CHECK(hak_canary_check(block, BLOCK, "test") == size, "the record lost the size %zu", size);
        for (unsigned value = 0; value < 256; value++) {
            for (size_t run = 8; run <= BLOCK - 40 - HAK_CANARY_BYTES; run *= 2) {
                hak_canary_set(block, BLOCK, size);
                memset(block + size, (int)value, run);
                tried++;
                if (hak_canary_intact(block, BLOCK)) {
                    CHECK(false, "%zu bytes of %#x past a block of %zu passed its canary", run,
                          value, size);
                    missed++;
                }
            }
        }
    }
    printf("runs of one byte over the canary: %u of %u passed\n", missed, tried);
    return test_result("test_canary");
}

/* The checked mode's canary (block/canary.c): a block left alone passes,
 * and a run of one byte past its requested size is seen, whatever the byte
 * and the process's key, once the run covers a word: the canary's bytes
 * differ by their place in the word.  With one byte for the whole canary, a
 * run of that byte passed (the heap-fault suite's 'A's, once in 256
 * processes).  A byte of text over the record's top bytes is seen whatever
 * the key. */
#include <string.h>

#include "block/block_link.h"
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

    /* One byte of text, or a NUL, over any of the record's top four bytes
     * (the block's last, where a write under the next block lands), for
     * every value the key's byte there may take. */
    size_t size = 40;
    uintptr_t key = hak_link_keys.canary;
    unsigned text_missed = 0;
    for (unsigned top = 0; top < 4; top++) {
        for (unsigned key_byte = 0; key_byte < 256; key_byte++) {
            unsigned shift = 8 * (6 - top);
            hak_link_keys.canary = (key & ~((uintptr_t)0xff << shift)) | (uintptr_t)key_byte
                                                                             << shift;
            for (unsigned value = 0; value < 0x80; value++) {
                hak_canary_set(block, BLOCK, size);
                block[BLOCK - 1 - top] = (unsigned char)value;
                if (hak_canary_intact(block, BLOCK))
                    text_missed++;
            }
        }
    }
    hak_link_keys.canary = key;
    CHECK(text_missed == 0, "%u bytes of text over the record's top bytes passed its canary",
          text_missed);
    return test_result("test_canary");
}

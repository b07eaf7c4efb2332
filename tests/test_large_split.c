/* Large blocks cut from a bigger freed one.  A 15 MiB block is filled with
 * 32-bit ones and freed; a 9 MiB block then takes the front of its mapping
 * and a 4 MiB one what is left, which gets a head of its own where the
 * program's ones were.  A 1 in the head's route word is what the page map
 * reads as a chunk of small blocks: written to the map before the head
 * was, it sent the 4 MiB block's free into a slab lookup on the program's
 * bytes (a crash at every hardening level, seen at level 0 in CPython's
 * tests).  Each freed and written block must come back intact.
 *
 * Run first thing in a fresh process, while no other freed mapping is kept
 * that would serve the two blocks instead.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int main(void)
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
    return test_result("test_large_split");
}

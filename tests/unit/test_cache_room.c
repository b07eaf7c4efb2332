/* A cache's room (struct hak_thread): through random runs of mallocs and
 * frees of one class, whose live blocks drift past the cache's capacity so
 * that it fills, flushes (a block straight home, and half the cache in the
 * 20000-byte class), empties, refills, grows and is released by
 * malloc_trim, the blocks in the cache, walked, are always the capacity
 * less the room: two small classes and two Mid ones.  Checked mode (level 2, memcheck) and
 * valgrind's own malloc keep the caches empty, and the test says it is skipped. */
#include <malloc.h>
#include <stdlib.h>

#include "block/block_link.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "harden.h"
#include "unit.h"

/* Phases of PHASE steps lean to mallocs (5 in 8), then to frees: the live
 * blocks drift by some PHASE / 4 each, past a small class's first
 * capacity and a Mid class's grown one. */
enum { STEPS = 200000, PHASE = 4096, TRIM_EVERY = 25000, MAX_LIVE = 4096 };

static uint32_t walked(unsigned cls)
{
    uint32_t count = 0;
    for (void *block = hak_list_or_null(hak_tls.head[cls]); block; block = hak_link_get(block))
        count++;
    return count;
}

static uint32_t xorshift(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static void *checked_malloc(size_t size)
{
    void *block = hak_malloc(size);
    if (!block)
        hard_error("malloc(%zu) failed", size);
    return block;
}

/* Random mallocs and frees, the live blocks drifting up and down past the
 * cache's capacity, so that it fills, flushes, empties, refills and grows;
 * malloc_trim's release brings it back to its first size every TRIM_EVERY
 * steps, so that the grown cache of a small class is outrun again. */
static void check_random_runs(size_t size)
{
    static void *live[MAX_LIVE];
    unsigned cls = hak_class_of(size);
    char name[4];
    hak_class_name(cls, name);
    uint32_t count = 0, state = 0x9e3779b9u ^ (uint32_t)size, mismatches = 0;
    uint32_t refills = 0, flushes = 0, halvings = 0, trims = 0, most = 0;
    uint32_t cached = walked(cls);
    for (int step = 0; step < STEPS; step++) {
        bool lean_malloc = (step / PHASE) % 2 == 0;
        uint32_t r = xorshift(&state) % 8;
        bool do_malloc = count == 0 || (count < MAX_LIVE && (lean_malloc ? r < 5 : r < 3));
        if (do_malloc) {
            live[count++] = checked_malloc(size);
        } else {
            uint32_t victim = xorshift(&state) % count;
            hak_free(live[victim]);
            live[victim] = live[--count];
        }
        uint32_t before = cached;
        cached = walked(cls);
        refills += do_malloc && cached > before;
        /* A free the cache did not keep: the block, or half the cache,
         * left it. */
        flushes += !do_malloc && cached <= before;
        halvings += !do_malloc && cached + 1 < before;
        if (step % TRIM_EVERY == TRIM_EVERY / 2) {
            malloc_trim(0);
            trims++;
            cached = walked(cls);
        }
        uint32_t limit = hak_tls.heap->limit[cls];
        most = limit > most ? limit : most;
        /* Wide, so that a room past the capacity, or wrapped, cannot
         * hide. */
        int64_t room = hak_tls.room[cls];
        if ((int64_t)cached != (int64_t)limit - room && mismatches++ < 3)
            fprintf(stderr, "  %s step %d: %u blocks cached, capacity %u less room %lld\n", name,
                    step, cached, limit, (long long)room);
    }
    printf("  %-4s %5zu B: capacity up to %u, %u refills, %u flushes (%u of half the cache), %u "
           "trims\n",
           name, size, most, refills, flushes, halvings, trims);
    CHECK(mismatches == 0,
          "%s: %u steps where the cache's blocks were not its capacity less its room", name,
          mismatches);
    /* What the run is for: a change of the bounds must not leave it
     * testing the fast paths alone. */
    CHECK(refills > 0 && flushes > 0, "%s: the run took %u refills and %u flushes", name, refills,
          flushes);
    while (count)
        hak_free(live[--count]);
}

int main(void)
{
    unit_watchdog();
    hak_free(checked_malloc(64));
    if (hak_harden.checked || hak_tls.heap == &hak_empty_heap) {
        /* Under valgrind, whose malloc takes hak_malloc's place too, the
         * thread never gets a heap. */
        printf("  skipped: checked mode, or another malloc, keeps the caches empty\n");
        return test_result("test_cache_room");
    }
    static const size_t sizes[] = {64, 700, 3000, 20000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        check_random_runs(sizes[i]);
    return test_result("test_cache_room");
}

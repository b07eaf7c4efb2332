/* A cache's room (struct hak_thread): through random runs of mallocs and
 * frees of one class, whose live blocks drift past the cache's capacity so
 * that it fills, flushes, empties, refills and grows, the blocks in the
 * cache, walked, are always the capacity less the room, and never more
 * than the capacity: two small classes and two Mid ones. */
#include <stdlib.h>

#include "block/block_link.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "unit.h"

enum { STEPS = 200000, MAX_LIVE = 4096 };

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
 * cache's capacity, so that it fills, flushes, empties and refills. */
static void check_random_runs(size_t size)
{
    static void *live[MAX_LIVE];
    unsigned cls = hak_class_of(size);
    char name[4];
    hak_class_name(cls, name);
    uint32_t count = 0, state = 0x9e3779b9u ^ (uint32_t)size, mismatches = 0, over = 0;
    for (int step = 0; step < STEPS; step++) {
        /* Phases of 4096 steps that lean to mallocs, then to frees. */
        bool lean_malloc = (step / 4096) % 2 == 0;
        uint32_t r = xorshift(&state) % 8;
        bool do_malloc = count == 0 || (count < MAX_LIVE && (lean_malloc ? r < 5 : r < 3));
        if (do_malloc) {
            live[count++] = checked_malloc(size);
        } else {
            uint32_t victim = xorshift(&state) % count;
            hak_free(live[victim]);
            live[victim] = live[--count];
        }
        uint32_t limit = hak_tls.heap->limit[cls];
        uint32_t cached = walked(cls);
        int64_t room = hak_tls.room[cls];
        if ((int64_t)cached != (int64_t)limit - room && mismatches++ < 3)
            printf("  %s step %d: %u blocks cached, capacity %u less room %lld\n", name, step,
                   cached, limit, (long long)room);
        if (cached > limit && over++ < 3)
            printf("  %s step %d: %u blocks cached past the capacity %u\n", name, step, cached,
                   limit);
    }
    CHECK(mismatches == 0,
          "%s: %u steps where the cache's blocks were not its capacity less its room", name,
          mismatches);
    CHECK(over == 0, "%s: %u steps with more blocks cached than the capacity", name, over);
    while (count)
        hak_free(live[--count]);
}

int main(void)
{
    unit_watchdog();
    static const size_t sizes[] = {64, 700, 3000, 20000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        check_random_runs(sizes[i]);
    }
    return test_result("test_cache_room");
}

/* A cache's room as free counts it (struct hak_thread): malloc does not
 * count it up, and the slow paths add in the mallocs served since.  Through
 * random runs of mallocs and frees of one class, the blocks in the cache,
 * walked, are always the capacity less hak_heap_room, and never more than
 * the capacity.  A program that mallocs and frees in turn with its cache a
 * block short of full, where free's count runs out at every free, flushes
 * or grows the cache once, down to three quarters of its capacity at most,
 * and flushes no more. */
#include <stdlib.h>

#include "block/block_link.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "unit.h"

enum { STEPS = 200000, MAX_LIVE = 4096 };

static uint64_t class_flushes(unsigned cls)
{
    struct hak_class_stats stats[HAK_NUM_CLASSES] = {0};
    hak_heap_sum_stats(stats);
    return stats[cls].flushes;
}

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
        int64_t room = hak_heap_room(hak_tls.heap, cls);
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

/* The cache a block short of full, then mallocs and frees in turn. */
static void check_churn_near_full(size_t size)
{
    static void *blocks[2 * HAK_CACHE_LIMIT_MAX + 2];
    unsigned cls = hak_class_of(size);
    char name[4];
    hak_class_name(cls, name);
    /* Mallocs past the cache's blocks, then frees until the cache is a
     * block short of full: free alone counts the room exactly, through
     * the flushes and growth on the way. */
    uint32_t count = 0;
    while (count < 2 * hak_tls.heap->limit[cls] + 2)
        blocks[count++] = checked_malloc(size);
    while (count && hak_heap_room(hak_tls.heap, cls) != 1)
        hak_free(blocks[--count]);
    uint32_t limit = hak_tls.heap->limit[cls];
    CHECK(walked(cls) + 1 == limit, "%s: %u blocks cached, not one short of the capacity %u", name,
          walked(cls), limit);
    uint64_t flushes = class_flushes(cls);
    for (int i = 0; i < 10000; i++) {
        void *block = checked_malloc(size);
        hak_free(block);
    }
    uint64_t churn_flushes = class_flushes(cls) - flushes;
    CHECK(churn_flushes <= 1,
          "%s: 10000 mallocs and frees in turn, a block short of full, flushed "
          "%llu times",
          name, (unsigned long long)churn_flushes);
    CHECK(walked(cls) <= hak_tls.heap->limit[cls] - hak_tls.heap->limit[cls] / 4,
          "%s: %u blocks cached after the churn, within a quarter of the capacity %u", name,
          walked(cls), hak_tls.heap->limit[cls]);
    printf("  %s: capacity %u, %llu flushes in 10000 pairs a block short of full\n", name,
           hak_tls.heap->limit[cls], (unsigned long long)churn_flushes);
    while (count)
        hak_free(blocks[--count]);
}

int main(void)
{
    unit_watchdog();
    static const size_t sizes[] = {64, 700, 3000, 20000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        check_random_runs(sizes[i]);
        check_churn_near_full(sizes[i]);
    }
    return test_result("test_cache_room");
}

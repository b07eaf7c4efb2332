/* Remote frees through malloc and free: thread A allocates blocks of small,
 * Mid and L25 classes, thread B frees them all and exits, and A's later
 * allocations get that memory back: the same blocks, or ones that start
 * inside the freed blocks of another case that the same backend serves.
 * SuperSlabs serve the small and the Mid classes up to a page: a slab that
 * B's frees emptied serves the next class that takes a slab (the 3000 B
 * case's, the 48 B one in the second round).  The HotSpanBox merges
 * neighbouring freed spans and cuts them again where the next request
 * needs, from the best fitting span whatever class it held.
 *
 * A free by another thread of the same node waits in the freeing thread's
 * heap first (a SuperSlab's block among those of other heaps' slabs, a
 * span's block in its cache); only when half a cache's worth of the class has
 * come, or the thread exits, does the block travel to the slab A owns (a
 * remote free).  A thread with no heap yet (it never allocated) gets one at
 * that free.  Both paths are run. */
#include <malloc.h>
#include <string.h>

#include "block/size_class.h"
#include "front/thread_heap.h"
#include "options.h"
#include "unit.h"

struct class_case {
    size_t size;
    unsigned count;
    /* At least half the freed blocks must come back within as many
     * allocations; otherwise one, after A's current slab runs out. */
    bool most_back_at_once;
    bool in_spans; /* spans of the HotSpanBox, not SuperSlab slabs */
};

static const struct class_case cases[] = {
    /* C2 (48 B): three slabs, two of them full when B frees */
    {48, 3000, true, false},
    /* C10 (224 B): a few more than go home at once, the rest at B's exit;
     * they wait on A's current slab until its fresh blocks are used up */
    {200, 40, false, false},
    /* Mid up to a page: ten SuperSlab slabs, all emptied by B's frees */
    {3000, 200, true, false},
    /* L25: one block per span, each back through the HotSpanBox */
    {100 * 1024, 40, true, true},
};
#define CASES (sizeof(cases) / sizeof(cases[0]))

enum freer { FREER_WITH_HEAP, FREER_WITHOUT_HEAP };
static const char *const freer_names[] = {"freer with a heap", "freer without a heap"};

struct round {
    enum freer freer;
    void **blocks[CASES];
    /* The blocks in address order, and room for the blocks taken again:
     * allocated before the frees, so that the test's own allocations never
     * take the freed memory. */
    void **sorted[CASES];
    void **again[CASES];
};

static unsigned seed_of(enum freer freer, size_t c, unsigned i)
{
    return (unsigned)(freer * 7919 + c * 131 + i);
}

static void sum_remote_frees(uint64_t out[CASES])
{
    struct hak_class_stats totals[HAK_NUM_CLASSES];
    memset(totals, 0, sizeof(totals));
    hak_heap_sum_stats(totals);
    for (size_t c = 0; c < CASES; c++)
        out[c] = totals[hak_class_of(cases[c].size)].remote_frees;
}

static void *free_all(void *arg)
{
    struct round *round = arg;
    /* A block of a class no case uses, freed last: it gives this thread a
     * heap, so that the frees below go through its caches. */
    void *own = NULL;
    if (round->freer == FREER_WITH_HEAP) {
        own = malloc(24);
        if (!own)
            hard_error("malloc(24) in the freeing thread failed");
    }
    for (size_t c = 0; c < CASES; c++) {
        for (unsigned i = 0; i < cases[c].count; i++) {
            void *block = round->blocks[c][i];
            size_t bad = pattern_mismatch(block, cases[c].size, seed_of(round->freer, c, i));
            CHECK(bad == PATTERN_INTACT, "%s: %zu B block %u changed at offset %zu before its free",
                  freer_names[round->freer], cases[c].size, i, bad);
            free(block);
        }
    }
    free(own);
    return NULL;
}

/* Whether block starts inside one of the count sorted blocks of size. */
static bool inside_freed(void *block, void **sorted, unsigned count, size_t size)
{
    unsigned lo = 0, hi = count; /* the first one starting above block */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if ((uintptr_t)sorted[mid] <= (uintptr_t)block)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && (uintptr_t)block - (uintptr_t)sorted[lo - 1] < size;
}

/* Up to what A may still have had fresh (its cache and the rest of its
 * current slab) beyond the blocks it freed. */
static unsigned reuse_limit(size_t c)
{
    unsigned cls = hak_class_of(cases[c].size);
    return cases[c].count + hak_class_span_bytes[cls] / hak_class_size[cls] + 64;
}

/* A takes blocks of the class again, as many as it freed, and more if none
 * came back yet, up to reuse_limit. */
static void check_reuse(struct round *round, size_t c)
{
    const struct class_case *cs = &cases[c];
    unsigned limit = reuse_limit(c);
    void **again = round->again[c];

    unsigned taken = 0, reused = 0;
    while (taken < limit && (taken < cs->count || reused == 0)) {
        void *block = malloc(cs->size);
        if (!block)
            hard_error("malloc(%zu) failed", cs->size);
        again[taken++] = block;
        bool back = inside_freed(block, round->sorted[c], cs->count, cs->size);
        for (size_t other = 0; other < CASES && !back; other++)
            back = cases[other].in_spans == cs->in_spans &&
                   inside_freed(block, round->sorted[other], cases[other].count, cases[other].size);
        reused += back;
    }
    if (cs->most_back_at_once)
        CHECK(reused >= cs->count / 2,
              "%s: %u of %u freed %zu B blocks came back in %u allocations",
              freer_names[round->freer], reused, cs->count, cs->size, taken);
    else
        CHECK(reused > 0, "%s: none of %u freed %zu B blocks came back in %u allocations",
              freer_names[round->freer], cs->count, cs->size, taken);
    printf("  %s, %zu B: %u of %u freed blocks back in %u allocations\n", freer_names[round->freer],
           cs->size, reused, cs->count, taken);

    /* Every block A now holds is its own: no two overlap. */
    for (unsigned i = 0; i < taken; i++) {
        CHECK(malloc_usable_size(again[i]) >= cs->size, "usable size below %zu B", cs->size);
        fill_pattern(again[i], cs->size, 1000 + i);
    }
    for (unsigned i = 0; i < taken; i++) {
        size_t bad = pattern_mismatch(again[i], cs->size, 1000 + i);
        CHECK(bad == PATTERN_INTACT, "%s: reused %zu B block %u overwritten at offset %zu",
              freer_names[round->freer], cs->size, i, bad);
    }
    for (unsigned i = 0; i < taken; i++)
        free(again[i]);
    free(again);
}

static void run_round(enum freer freer)
{
    struct round round = {.freer = freer};
    for (size_t c = 0; c < CASES; c++) {
        round.blocks[c] = calloc(cases[c].count, sizeof(void *));
        if (!round.blocks[c])
            hard_error("calloc failed");
        for (unsigned i = 0; i < cases[c].count; i++) {
            void *block = malloc(cases[c].size);
            if (!block)
                hard_error("malloc(%zu) failed", cases[c].size);
            fill_pattern(block, cases[c].size, seed_of(freer, c, i));
            round.blocks[c][i] = block;
        }
        round.sorted[c] = calloc(cases[c].count, sizeof(void *));
        round.again[c] = calloc(reuse_limit(c), sizeof(void *));
        if (!round.sorted[c] || !round.again[c])
            hard_error("calloc failed");
        memcpy(round.sorted[c], round.blocks[c], cases[c].count * sizeof(void *));
        qsort(round.sorted[c], cases[c].count, sizeof(void *), unit_compare_pointers);
    }

    uint64_t before[CASES], after[CASES];
    sum_remote_frees(before);
    unit_thread_run(free_all, &round);
    sum_remote_frees(after);
    /* A thread with a heap counts every block it sends to A's slabs, in
     * its flushes or at its exit; one without a heap has no counters. */
    if (freer == FREER_WITH_HEAP)
        for (size_t c = 0; c < CASES; c++)
            CHECK(after[c] - before[c] == cases[c].count,
                  "%zu B: %llu remote frees counted for %u blocks freed by another thread",
                  cases[c].size, (unsigned long long)(after[c] - before[c]), cases[c].count);

    for (size_t c = 0; c < CASES; c++)
        check_reuse(&round, c);
    for (size_t c = 0; c < CASES; c++) {
        free(round.blocks[c]);
        free(round.sorted[c]);
    }
}

int main(void)
{
    unit_watchdog();
    /* No class idles meanwhile: A faults its L25 blocks in after the
     * last malloc of its small and Mid ones, which release_idle_for_growth
     * would count as idle at A's next slab and give back their slabs, and
     * their blocks would come from other memory. */
    hak_options.decay_ms = UINT64_MAX;
    run_round(FREER_WITH_HEAP);
    run_round(FREER_WITHOUT_HEAP);
    return test_result("test_remote");
}

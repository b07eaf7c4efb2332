/* Heaps of exited threads (front/thread_heap.c, parked heaps): a thread
 * that exits parks its heap, caches and slabs as it left them, and the
 * next thread of its node to need a heap takes it over, its first malloc
 * served from the exited thread's cache; at most HAKMEM_PARKED_HEAPS stay
 * parked, none longer than HAKMEM_DECAY_MS, and malloc_trim makes all
 * leave, as an exiting thread's heap left before.  Blocks of other
 * heaps' slabs in the caches go home at parking, and a live heap that
 * needs a slab takes one with free blocks from a parked heap.  A thread
 * whose first call frees a parked heap's block takes over that heap.  A
 * forked child's threads take over the heaps parked in the parent. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "block/size_class.h"
#include "front/thread_heap.h"
#include "harden.h"
#include "options.h"
#include "stats.h"
#include "unit.h"

#define SIZE 64
/* Blocks of a span (Mid over a page), which a freeing thread caches, and
 * of a SuperSlab's slab (Mid up to a page), which it keeps apart to send
 * home (foreign). */
#define SPAN_SIZE 6000
#define MID_SIZE 3000
#define CACHED 20 /* blocks a thread frees into its cache before it exits */
#define TOGETHER 4

struct life {
    void *freed[CACHED];     /* what the thread freed last, into its cache */
    void *first;             /* its first malloc of SIZE */
    struct hak_heap *heap;   /* its heap */
    pthread_barrier_t *meet; /* threads that exit together wait here first */
};

static void *cache_and_exit(void *arg)
{
    struct life *life = arg;
    life->first = unit_malloc(SIZE);
    if (!life->first)
        hard_error("malloc(%d) failed", SIZE);
    life->heap = hak_tls.heap;
    for (unsigned i = 0; i < CACHED; i++)
        if (!(life->freed[i] = unit_malloc(SIZE)))
            hard_error("malloc(%d) failed", SIZE);
    for (unsigned i = 0; i < CACHED; i++)
        free(life->freed[i]);
    free(life->first);
    if (life->meet)
        pthread_barrier_wait(life->meet);
    return NULL;
}

static uint64_t inherited(void)
{
    return hak_stat_read(HAK_STAT_HEAPS_INHERITED);
}

static uint64_t made(void)
{
    return hak_stat_read(HAK_STAT_THREADS);
}

/* A thread's heap after another's exit: the exited one's, the block its
 * first malloc returns the last the exited thread freed, with no refill. */
static void test_takeover(void)
{
    struct life before = {0}, after = {0};
    unit_thread_run(cache_and_exit, &before);
    uint64_t taken = inherited(), new_heaps = made();
    uint64_t refills = before.heap->stats[hak_class_of(SIZE)].refills;
    unit_thread_run(cache_and_exit, &after);
    CHECK(after.heap == before.heap, "the next thread made a heap of its own (%p, not %p)",
          (void *)after.heap, (void *)before.heap);
    CHECK(after.first == before.first, "its first malloc gave %p, not %p, freed last", after.first,
          before.first);
    CHECK(inherited() == taken + 1 && made() == new_heaps,
          "%llu heaps taken over and %llu made for one thread",
          (unsigned long long)(inherited() - taken), (unsigned long long)(made() - new_heaps));
    CHECK(after.heap->stats[hak_class_of(SIZE)].refills == refills,
          "the takeover refilled the class %llu times",
          (unsigned long long)(after.heap->stats[hak_class_of(SIZE)].refills - refills));
}

/* TOGETHER threads exit together: HAKMEM_PARKED_HEAPS of their heaps stay
 * parked, and the next TOGETHER threads take those over and make the
 * rest. */
static void run_together(struct life lives[TOGETHER])
{
    pthread_t threads[TOGETHER];
    pthread_barrier_t meet;
    pthread_barrier_init(&meet, NULL, TOGETHER);
    for (unsigned i = 0; i < TOGETHER; i++) {
        lives[i] = (struct life){.meet = &meet};
        unit_thread_start(&threads[i], cache_and_exit, &lives[i]);
    }
    for (unsigned i = 0; i < TOGETHER; i++)
        unit_thread_join(threads[i]);
    pthread_barrier_destroy(&meet);
}

static void test_bound(void)
{
    uint32_t parked = hak_options.parked_heaps;
    hak_options.parked_heaps = 2;
    struct life lives[TOGETHER];
    run_together(lives);
    uint64_t taken = inherited(), new_heaps = made();
    run_together(lives);
    CHECK(inherited() - taken == 2 && made() - new_heaps == TOGETHER - 2,
          "%d threads after %d exited took over %llu heaps and made %llu (2 kept)", TOGETHER,
          TOGETHER, (unsigned long long)(inherited() - taken),
          (unsigned long long)(made() - new_heaps));
    hak_options.parked_heaps = parked;
    malloc_trim(0);
}

/* None parked: an exited thread's heap leaves, as it did before parking. */
static void test_none_parked(void)
{
    uint32_t parked = hak_options.parked_heaps;
    hak_options.parked_heaps = 0;
    struct life life = {0};
    unit_thread_run(cache_and_exit, &life);
    uint64_t taken = inherited(), new_heaps = made();
    unit_thread_run(cache_and_exit, &life);
    CHECK(inherited() == taken && made() == new_heaps + 1,
          "with HAKMEM_PARKED_HEAPS=0 a thread took over %llu heaps and made %llu",
          (unsigned long long)(inherited() - taken), (unsigned long long)(made() - new_heaps));
    hak_options.parked_heaps = parked;
}

static uint64_t cached_blocks(void)
{
    struct hak_heap_usage usage;
    hak_heap_usage(&usage);
    return usage.cached_blocks;
}

/* malloc_trim: the parked heaps leave, their cached blocks back in their
 * slabs; a parked heap's cached blocks count as free meanwhile. */
static void test_trim(void)
{
    struct life life = {0};
    malloc_trim(0);
    uint64_t cached = cached_blocks();
    unit_thread_run(cache_and_exit, &life);
    CHECK(cached_blocks() >= cached + CACHED, "%llu blocks cached with a heap parked, %llu before",
          (unsigned long long)cached_blocks(), (unsigned long long)cached);
    malloc_trim(0);
    CHECK(cached_blocks() == 0, "%llu blocks cached after malloc_trim",
          (unsigned long long)cached_blocks());
    uint64_t taken = inherited();
    unit_thread_run(cache_and_exit, &life);
    CHECK(inherited() == taken, "a thread took over a heap parked before malloc_trim");
    malloc_trim(0);
}

/* A heap parked longer than HAKMEM_DECAY_MS leaves at the next parking
 * (or the next look for idle caches): the thread after takes the newer
 * one, the one after that makes its own. */
static void test_decay(void)
{
    uint64_t decay_ms = hak_options.decay_ms;
    hak_options.decay_ms = 20;
    struct life old = {0}, young = {0}, after = {0};
    unit_thread_run(cache_and_exit, &old);
    unit_sleep_ms(60);
    /* young starts with old's heap: parked again at its exit, it is young. */
    struct life filler = {0};
    pthread_barrier_t meet;
    pthread_barrier_init(&meet, NULL, 2);
    young.meet = filler.meet = &meet;
    pthread_t threads[2];
    unit_thread_start(&threads[0], cache_and_exit, &young);
    unit_thread_start(&threads[1], cache_and_exit, &filler);
    unit_thread_join(threads[0]);
    unit_thread_join(threads[1]);
    pthread_barrier_destroy(&meet);
    unit_sleep_ms(60);
    unit_thread_run(cache_and_exit, &old); /* parks; the two aged ones leave */
    uint64_t taken = inherited(), new_heaps = made();
    unit_thread_run(cache_and_exit, &after);
    struct life last = {0};
    unit_thread_run(cache_and_exit, &last);
    CHECK(after.heap == old.heap && inherited() - taken == 2 && made() == new_heaps,
          "after the aged heaps left, two threads in turn took over %llu heaps and made %llu",
          (unsigned long long)(inherited() - taken), (unsigned long long)(made() - new_heaps));
    struct life fresh = {0}, second = {0};
    pthread_barrier_init(&meet, NULL, 2);
    fresh.meet = second.meet = &meet;
    taken = inherited();
    new_heaps = made();
    unit_thread_start(&threads[0], cache_and_exit, &fresh);
    unit_thread_start(&threads[1], cache_and_exit, &second);
    unit_thread_join(threads[0]);
    unit_thread_join(threads[1]);
    pthread_barrier_destroy(&meet);
    CHECK(inherited() - taken == 1 && made() - new_heaps == 1,
          "two threads together took over %llu heaps and made %llu, with one parked",
          (unsigned long long)(inherited() - taken), (unsigned long long)(made() - new_heaps));
    hak_options.decay_ms = decay_ms;
    malloc_trim(0);
}

static void *free_block(void *block)
{
    free(block);
    return NULL;
}

struct kept {
    void *block;              /* allocated and kept past the thread's exit */
    void *again;              /* free_first's malloc after its free */
    struct hak_heap *heap;    /* the thread's heap */
    pthread_barrier_t *meet;  /* threads alive together wait here */
    pthread_barrier_t *leave; /* and here, if it is to exit after the main
                                 thread's wait */
};

static void *allocate_and_exit(void *arg)
{
    struct kept *kept = arg;
    if (!(kept->block = unit_malloc(SIZE)))
        hard_error("malloc(%d) failed", SIZE);
    kept->heap = hak_tls.heap;
    if (kept->meet)
        pthread_barrier_wait(kept->meet);
    if (kept->leave)
        pthread_barrier_wait(kept->leave);
    return NULL;
}

static void *free_first(void *arg)
{
    struct kept *kept = arg;
    free(kept->block);
    kept->heap = hak_tls.heap;
    if (!(kept->again = unit_malloc(SIZE)))
        hard_error("malloc(%d) failed", SIZE);
    free(kept->again);
    return NULL;
}

/* Two heaps parked, the older first: a thread whose first call frees the
 * older heap's block takes that one over, not the newest (as a thread
 * whose first call is malloc does, test_takeover), and the block, its own
 * now, goes into its cache: its next malloc returns it. */
static void test_owner_taken_over(void)
{
    malloc_trim(0);
    pthread_barrier_t meet, leave;
    pthread_barrier_init(&meet, NULL, 2);
    pthread_barrier_init(&leave, NULL, 2);
    struct kept older = {.meet = &meet}, newer = {.meet = &meet, .leave = &leave};
    pthread_t threads[2];
    unit_thread_start(&threads[0], allocate_and_exit, &older);
    unit_thread_start(&threads[1], allocate_and_exit, &newer);
    unit_thread_join(threads[0]);
    pthread_barrier_wait(&leave);
    unit_thread_join(threads[1]);
    pthread_barrier_destroy(&meet);
    pthread_barrier_destroy(&leave);
    CHECK(older.heap != newer.heap, "two threads alive together had one heap");
    struct kept freer = {.block = older.block};
    unit_thread_run(free_first, &freer);
    CHECK(freer.heap == older.heap,
          "a thread that freed the older parked heap's block first took over %s",
          freer.heap == newer.heap ? "the newer heap" : "another heap");
    CHECK(freer.again == older.block, "the malloc after that free gave %p, not the block freed, %p",
          freer.again, older.block);
    free(newer.block);
    malloc_trim(0);
}

/* A block of the main thread's that another thread freed (into its cache,
 * or apart) goes home when that thread parks its heap, not with the heap. */
static void test_other_goes_home(size_t size)
{
    unsigned cls = hak_class_of(size);
    void *block = unit_malloc(size);
    if (!block)
        hard_error("malloc(%zu) failed", size);
    uint64_t sent = unit_class_stats(cls).remote_frees;
    unit_thread_run(free_block, block);
    CHECK(unit_class_stats(cls).remote_frees == sent + 1,
          "%zu B: %llu of the main thread's blocks went home at parking", size,
          (unsigned long long)(unit_class_stats(cls).remote_frees - sent));
    malloc_trim(0);
}

static void test_others_go_home(void)
{
    test_other_goes_home(SPAN_SIZE);
    test_other_goes_home(MID_SIZE);
}

#define SLAB_SIZE 256
#define SLAB_BLOCKS (3 * HAK_SLAB_SIZE / SLAB_SIZE)

static void *allocate_slabs(void *blocks)
{
    for (unsigned i = 0; i < SLAB_BLOCKS; i++)
        if (!(((void **)blocks)[i] = unit_malloc(SLAB_SIZE)))
            hard_error("malloc(%d) failed", SLAB_SIZE);
    return NULL;
}

/* A live heap that needs a slab takes one with free blocks from a parked
 * heap before a fresh one: here the main thread, which freed the exited
 * thread's blocks, gets them back. */
static void test_slab_from_parked(void)
{
    static void *blocks[SLAB_BLOCKS], *again[2 * SLAB_BLOCKS];
    free(unit_malloc(SLAB_SIZE)); /* the main thread's own slab of the class */
    unit_thread_run(allocate_slabs, blocks);
    for (unsigned i = 0; i < SLAB_BLOCKS; i++)
        free(blocks[i]);
    qsort(blocks, SLAB_BLOCKS, sizeof(void *), unit_compare_pointers);
    unsigned taken = 0;
    bool back = false;
    while (!back && taken < 2 * SLAB_BLOCKS) {
        if (!(again[taken] = unit_malloc(SLAB_SIZE)))
            hard_error("malloc(%d) failed", SLAB_SIZE);
        back = bsearch(&again[taken++], blocks, SLAB_BLOCKS, sizeof(void *), unit_compare_pointers);
    }
    CHECK(back, "none of the %d blocks freed into a parked heap's slabs came back in %u mallocs",
          SLAB_BLOCKS, taken);
    while (taken)
        free(again[--taken]);
    malloc_trim(0);
}

/* A forked child's first thread takes over a heap parked in the parent. */
static void test_fork(void)
{
    struct life life = {0};
    unit_thread_run(cache_and_exit, &life);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        hard_error("fork failed");
    if (pid == 0) {
        struct life child = {0};
        uint64_t taken = inherited();
        unit_thread_run(cache_and_exit, &child);
        _exit(inherited() == taken + 1 && child.heap == life.heap &&
                      unit_class_stats(hak_class_of(SIZE)).allocs > 0
                  ? EXIT_SUCCESS
                  : EXIT_FAILURE);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid)
        hard_error("waitpid failed");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SUCCESS,
          "the forked child's thread did not take over the heap parked in the parent");
    malloc_trim(0);
}

int main(void)
{
    unit_watchdog();
    free(unit_malloc(SIZE)); /* the main thread's heap, and hak_options read */
    if (hak_harden.checked)
        return test_result("test_parked_heap (checked mode parks no heap)");
    test_takeover();
    test_none_parked();
    test_bound();
    test_trim();
    test_decay();
    test_owner_taken_over();
    test_others_go_home();
    test_slab_from_parked();
    test_fork();
    return test_result("test_parked_heap");
}

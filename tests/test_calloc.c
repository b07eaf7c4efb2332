/* calloc's memory is zero whichever way hakmem finds it for a block over 32
 * KiB: a span fresh from the PageArena, which is zero already and of which
 * calloc writes only the first words, or memory the program wrote before,
 * cleared whole: a block the thread's cache holds, a span the HotSpanBox
 * kept, one cut from a longer span, a block another thread freed; also in a
 * forked child and in a key destructor at thread exit.  And fresh memory
 * stays untouched: blocks of 512 KiB, calloc'd and not written, fault in a
 * page or so each, not their 128 (not where the kernel backs all memory
 * with huge pages, nor at HAKMEM_HARDEN=2, which clears every block whole;
 * test_harden_levels.sh runs this at levels 0 and 2).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define BATCH 8

static const size_t sizes[] = {32 * KiB + 1, 40000,     64 * KiB + 1, 100000,
                               300 * KiB,    700 * KiB, MiB - 16,     MiB};

static void expect_zero(const void *block, size_t nmemb, size_t size, const char *how)
{
    CHECK(block != NULL, "calloc(%zu, %zu) %s: NULL", nmemb, size, how);
    if (block == NULL) {
        return;
    }
    size_t dirty = nonzero_offset(block, nmemb * size);
    CHECK(dirty == PATTERN_INTACT, "calloc(%zu, %zu) %s: byte %zu is not zero", nmemb, size, how,
          dirty);
}

static void dirty(void *block)
{
    memset(block, 0xAA, malloc_usable_size(block));
}

static int clears_whole(void)
{
    const char *level = getenv("HAKMEM_HARDEN");
    return level != NULL && atoi(level) >= 2;
}

/* BATCH blocks of size, written whole. */
static void malloc_written(void **blocks, size_t size)
{
    for (int i = 0; i < BATCH; i++) {
        blocks[i] = malloc(size);
        if (blocks[i] == NULL) {
            hard_error("malloc(%zu) failed", size);
        }
        dirty(blocks[i]);
    }
}

/* First, while the PageArena has only fresh memory to give.  The faults
 * are counted past the first blocks, by which the process has mapped
 * enough to look up its NUMA topology (thread_heap.c, DISCOVERY_BYTES). */
static void test_fresh_untouched(void)
{
    enum { COUNT = 64, UNCOUNTED = 24 };
    const size_t size = 512 * KiB;
    void *blocks[COUNT];
    long before = 0;
    for (int i = 0; i < COUNT; i++) {
        if (i == UNCOUNTED) {
            before = minor_faults();
        }
        blocks[i] = calloc(1, size);
        if (blocks[i] == NULL) {
            hard_error("calloc(1, %zu) failed", size);
        }
    }
    long faults = minor_faults() - before;
    /* Written whole, they would take 128 faults each. */
    if (!thp_always() && !clears_whole()) {
        CHECK(faults < (COUNT - UNCOUNTED) * 4, "%d fresh blocks of %zu bytes calloc'd: %ld faults",
              COUNT - UNCOUNTED, size, faults);
    }
    for (int i = 0; i < COUNT; i++) {
        expect_zero(blocks[i], 1, size, "of fresh memory");
    }
    for (int i = 0; i < COUNT; i++) {
        free(blocks[i]);
    }
}

/* Written whole and freed, then calloc'd at the same size: the cache's
 * blocks, then spans from the HotSpanBox. */
static void test_recycled(void)
{
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        void *blocks[BATCH];
        malloc_written(blocks, sizes[s]);
        for (int i = 0; i < BATCH; i++) {
            free(blocks[i]);
        }
        for (int i = 0; i < BATCH; i++) {
            blocks[i] = calloc(1, sizes[s]);
            expect_zero(blocks[i], 1, sizes[s], "after frees of written blocks");
            if (blocks[i] != NULL) {
                dirty(blocks[i]);
            }
        }
        for (int i = 0; i < BATCH; i++) {
            free(blocks[i]);
        }
    }
}

/* Big blocks written and freed leave long hot spans, which calloc of
 * smaller blocks cuts. */
static void test_cut_from_longer(void)
{
    enum { BIG = 6, SMALL = 60 };
    void *big[BIG], *small[SMALL];
    for (int i = 0; i < BIG; i++) {
        big[i] = malloc(MiB);
        if (big[i] == NULL) {
            hard_error("malloc(%zu) failed", MiB);
        }
        dirty(big[i]);
    }
    for (int i = 0; i < BIG; i++) {
        free(big[i]);
    }
    for (int i = 0; i < SMALL; i++) {
        small[i] = calloc(3, 25000);
        expect_zero(small[i], 3, 25000, "cut from hot spans of 1 MiB");
        if (small[i] != NULL) {
            dirty(small[i]);
        }
    }
    for (int i = 0; i < SMALL; i++) {
        free(small[i]);
    }
}

static void *free_batch(void *arg)
{
    void **blocks = arg;
    for (int i = 0; i < BATCH; i++) {
        free(blocks[i]);
    }
    return NULL;
}

/* Blocks another thread freed go home to this thread's slabs, and from
 * there, empty, to the HotSpanBox; the cache holds none (malloc_trim). */
static void test_freed_elsewhere(void)
{
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        malloc_trim(0);
        void *blocks[BATCH];
        malloc_written(blocks, sizes[s]);
        pthread_t thread;
        if (pthread_create(&thread, NULL, free_batch, blocks) != 0 ||
            pthread_join(thread, NULL) != 0) {
            hard_error("a thread to free the blocks failed");
        }
        for (int i = 0; i < BATCH; i++) {
            blocks[i] = calloc(1, sizes[s]);
            expect_zero(blocks[i], 1, sizes[s], "after another thread freed written blocks");
        }
        for (int i = 0; i < BATCH; i++) {
            free(blocks[i]);
        }
    }
}

/* A forked child, whose parent's other threads are gone, and a thread's
 * key destructor, which may run after hakmem's own exit hook took the
 * thread's heap: calloc there too. */
static void calloc_some(const char *where)
{
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        void *block = calloc(1, sizes[s]);
        expect_zero(block, 1, sizes[s], where);
        if (block != NULL) {
            dirty(block);
        }
        free(block);
    }
}

static pthread_key_t late_key;

static void calloc_late(void *value)
{
    (void)value;
    calloc_some("in a key destructor at thread exit");
}

static void *set_late_key(void *arg)
{
    (void)arg;
    pthread_setspecific(late_key, &late_key);
    calloc_some("in a thread");
    return NULL;
}

static void test_child_and_late_thread(void)
{
    pid_t child = fork();
    if (child < 0) {
        hard_error("fork failed");
    }
    if (child == 0) {
        calloc_some("in a forked child");
        _exit(test_result("test_calloc (child)") == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "calloc in a forked child failed (status %#x)", status);

    if (pthread_key_create(&late_key, calloc_late) != 0) {
        hard_error("pthread_key_create failed");
    }
    pthread_t thread;
    if (pthread_create(&thread, NULL, set_late_key, NULL) != 0 || pthread_join(thread, NULL) != 0) {
        hard_error("a thread whose key destructor callocs failed");
    }
}

int main(void)
{
    if (under_valgrind()) {
        printf("under valgrind faults are valgrind's: skipped\n");
        return EXIT_SKIP;
    }
    test_fresh_untouched();
    test_recycled();
    test_cut_from_longer();
    test_freed_elsewhere();
    test_child_and_late_thread();
    return test_result("test_calloc");
}

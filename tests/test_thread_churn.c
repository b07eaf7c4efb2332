/* Thread churn: 3,000 short-lived threads in a row, each filling its caches
 * with small and mid blocks, freeing them and exiting, and each freeing a few
 * blocks that its (already exited) predecessor left behind.  What exiting
 * threads cache must be handed back: RSS and address space stay bounded.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define THREAD_COUNT 3000
#define WARMUP_THREADS 100
#define SMALL_BLOCKS 200
#define MID_BLOCKS 4
#define LEFT_BEHIND 16

struct left_block {
    unsigned char *ptr;
    size_t size;
    uint64_t key;
};

/* Written by thread i, read by thread i + 1 after pthread_join of thread i,
 * which orders the accesses. */
static struct left_block left_behind[LEFT_BEHIND];

static void *run_short_lived(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg;
    void *small[SMALL_BLOCKS], *mid[MID_BLOCKS];

    for (int i = 0; i < LEFT_BEHIND; i++) {
        struct left_block *block = &left_behind[i];
        if (block->ptr == NULL) {
            continue;
        }
        size_t damaged = pattern_mismatch(block->ptr, block->size, block->key);
        CHECK(damaged == PATTERN_INTACT,
              "thread %llu: a block of %zu bytes left by the exited previous thread is "
              "corrupted at byte %zu",
              (unsigned long long)(uintptr_t)arg, block->size, damaged);
        free(block->ptr);
    }

    for (int i = 0; i < SMALL_BLOCKS; i++) {
        size_t size = rng_range(&rng, 8, 1024);
        small[i] = malloc(size);
        if (small[i] == NULL) {
            hard_error("malloc(%zu) failed", size);
        }
        memset(small[i], 0x77, size);
    }
    for (int i = 0; i < MID_BLOCKS; i++) {
        size_t size = rng_range(&rng, 2 * KiB, 32 * KiB);
        mid[i] = malloc(size);
        if (mid[i] == NULL) {
            hard_error("malloc(%zu) failed", size);
        }
        memset(mid[i], 0x78, size);
    }
    for (int i = 0; i < LEFT_BEHIND; i++) {
        struct left_block *block = &left_behind[i];
        block->size = i % 4 == 0 ? rng_range(&rng, 2 * KiB, 32 * KiB) : rng_range(&rng, 8, 1024);
        block->ptr = malloc(block->size);
        if (block->ptr == NULL) {
            hard_error("malloc(%zu) failed", block->size);
        }
        block->key = pattern_key(block->ptr, block->size, rng);
        fill_pattern(block->ptr, block->size, block->key);
    }
    for (int i = 0; i < SMALL_BLOCKS; i++) {
        free(small[i]);
    }
    for (int i = 0; i < MID_BLOCKS; i++) {
        free(mid[i]);
    }
    return NULL;
}

int main(void)
{
    size_t rss_warm = 0, vsz_warm = 0;

    for (int i = 0; i < THREAD_COUNT; i++) {
        pthread_t thread;
        int error = pthread_create(&thread, NULL, run_short_lived, (void *)(uintptr_t)(i + 1));

        if (error != 0) {
            hard_error("pthread_create of thread %d: %s", i + 1, strerror(error));
        }
        pthread_join(thread, NULL);
        if (i + 1 == WARMUP_THREADS) {
            rss_warm = rss_bytes();
            vsz_warm = vsz_bytes();
        }
    }
    for (int i = 0; i < LEFT_BEHIND; i++) {
        free(left_behind[i].ptr);
    }

    size_t rss_end = rss_bytes(), vsz_end = vsz_bytes();
    printf("after %d threads: RSS %zu MiB, address space %zu MiB\n", WARMUP_THREADS, rss_warm / MiB,
           vsz_warm / MiB);
    printf("after %d threads: RSS %zu MiB, address space %zu MiB\n", THREAD_COUNT, rss_end / MiB,
           vsz_end / MiB);
    if (under_valgrind()) {
        printf("under valgrind: memory bounds not checked\n");
        return test_result("test_thread_churn");
    }
    CHECK(rss_end < rss_warm + 64 * MiB,
          "RSS grew by %zu MiB over %d more short-lived threads: exiting threads do not hand "
          "their cached blocks back",
          (rss_end - rss_warm) / MiB, THREAD_COUNT - WARMUP_THREADS);
    CHECK(vsz_end < vsz_warm + 256 * MiB,
          "address space grew by %zu MiB over %d more short-lived threads: per-thread "
          "memory is not recycled",
          (vsz_end - vsz_warm) / MiB, THREAD_COUNT - WARMUP_THREADS);
    return test_result("test_thread_churn");
}

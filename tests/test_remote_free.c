/* Remote frees: blocks that thread A allocates and thread B frees go back to
 * A and are reused by A's next allocations of the same size, and a long
 * producer/consumer run keeps RSS bounded.  A is the main thread; B stays
 * alive throughout, so nothing reaches A through B's thread exit.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

struct handoff {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    void **blocks;
    size_t count;
    int pending;
    int quit;
};

static struct handoff handoff = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0,
};

static void *run_consumer(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&handoff.lock);
    for (;;) {
        while (!handoff.pending && !handoff.quit) {
            pthread_cond_wait(&handoff.changed, &handoff.lock);
        }
        if (handoff.quit) {
            break;
        }
        for (size_t i = 0; i < handoff.count; i++) {
            free(handoff.blocks[i]);
        }
        handoff.pending = 0;
        pthread_cond_broadcast(&handoff.changed);
    }
    pthread_mutex_unlock(&handoff.lock);
    return NULL;
}

/* Returns once the consumer has freed every block. */
static void free_in_consumer(void **blocks, size_t count)
{
    pthread_mutex_lock(&handoff.lock);
    handoff.blocks = blocks;
    handoff.count = count;
    handoff.pending = 1;
    pthread_cond_broadcast(&handoff.changed);
    while (handoff.pending) {
        pthread_cond_wait(&handoff.changed, &handoff.lock);
    }
    pthread_mutex_unlock(&handoff.lock);
}

static int compare_addresses(const void *a, const void *b)
{
    uintptr_t left = (uintptr_t) * (void *const *)a, right = (uintptr_t) * (void *const *)b;
    return (left > right) - (left < right);
}

static void allocate_filled(void **blocks, size_t count, size_t size)
{
    for (size_t i = 0; i < count; i++) {
        blocks[i] = malloc(size);
        if (blocks[i] == NULL) {
            hard_error("malloc(%zu) failed", size);
        }
        memset(blocks[i], 0x5A, size < 256 ? size : 256);
    }
}

/* For each size: A allocates a batch, B frees it, A allocates a batch again
 * and counts the addresses it gets back. */
static void test_reuse(void)
{
    static const size_t sizes[] = {16, 100, 1024, 4096, 20000, 65536, 262144};
    enum { ROUNDS = 5, MAX_COUNT = 2000 };
    static void *freed[MAX_COUNT], *fresh[MAX_COUNT];

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t size = sizes[s];
        size_t count = 4 * MiB / size;
        size_t reused = 0;

        if (count > MAX_COUNT) {
            count = MAX_COUNT;
        }
        for (int round = 0; round < ROUNDS; round++) {
            allocate_filled(freed, count, size);
            free_in_consumer(freed, count);
            qsort(freed, count, sizeof(freed[0]), compare_addresses);

            allocate_filled(fresh, count, size);
            for (size_t i = 0; i < count; i++) {
                if (bsearch(&fresh[i], freed, count, sizeof(freed[0]), compare_addresses)) {
                    reused++;
                }
                free(fresh[i]);
            }
        }
        printf("size %zu: %zu of %zu blocks freed by the other thread came back\n", size, reused,
               count * ROUNDS);
        CHECK(reused * 4 >= count,
              "size %zu: of %zu blocks freed by another thread only %zu were reused by their "
              "owner over %d rounds (want a quarter of one round's blocks)",
              size, count * ROUNDS, reused, ROUNDS);
    }
}

static const struct size_tier mixed_sizes[] = {
    {850, 8, 1024},
    {130, 1025, 32 * KiB},
    {20, 32 * KiB + 1, 256 * KiB},
};

static void test_rss_bounded(void)
{
    enum { ROUNDS = 200, WARMUP_ROUNDS = 20, BATCH = 1000 };
    static void *batch[BATCH];
    uint64_t rng = 3;
    size_t rss_after_warmup = 0, rss_peak = 0;

    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < BATCH; i++) {
            size_t size = TIERED_SIZE(&rng, mixed_sizes);
            batch[i] = malloc(size);
            if (batch[i] == NULL) {
                hard_error("malloc(%zu) failed", size);
            }
            memset(batch[i], (int)i, size);
        }
        free_in_consumer(batch, BATCH);
        size_t rss = rss_bytes();
        if (round == WARMUP_ROUNDS) {
            rss_after_warmup = rss;
        }
        if (rss > rss_peak) {
            rss_peak = rss;
        }
    }
    size_t rss_end = rss_bytes();
    printf("RSS after %d rounds: %zu MiB, after %d: %zu MiB, peak %zu MiB\n", WARMUP_ROUNDS,
           rss_after_warmup / MiB, ROUNDS, rss_end / MiB, rss_peak / MiB);
    if (under_valgrind()) {
        printf("under valgrind: RSS bound not checked\n");
        return;
    }
    CHECK(rss_peak < rss_after_warmup + 32 * MiB,
          "RSS grew from %zu MiB to %zu MiB between rounds %d and %d of producer/consumer: "
          "remotely freed blocks are not reused",
          rss_after_warmup / MiB, rss_peak / MiB, WARMUP_ROUNDS, ROUNDS);
}

int main(void)
{
    pthread_t consumer;
    int error = pthread_create(&consumer, NULL, run_consumer, NULL);

    if (error != 0) {
        hard_error("pthread_create: %s", strerror(error));
    }
    test_reuse();
    test_rss_bounded();

    pthread_mutex_lock(&handoff.lock);
    handoff.quit = 1;
    pthread_cond_broadcast(&handoff.changed);
    pthread_mutex_unlock(&handoff.lock);
    pthread_join(consumer, NULL);
    return test_result("test_remote_free");
}

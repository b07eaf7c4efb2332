/* Thread teardown under load: short-lived producer threads are created and
 * joined without pause, a few at a time.  Each allocates a batch of blocks,
 * hands most of them to long-lived consumer threads through a queue, frees
 * some of its own and some that an earlier (usually exited) producer left
 * behind, and exits while the consumers are still verifying and freeing its
 * blocks.  So frees race with the teardown of the heap that owns the blocks,
 * and every heap dies with blocks of it still in use elsewhere.  Patterns
 * are verified on every free and the resident set must stay bounded.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stress.h"

#define PRODUCERS_ALIVE 4
#define CONSUMERS 2
#define BATCH 300
#define LEFT_BEHIND 32
#define QUEUE_CAPACITY 8192
#define DEFAULT_SECONDS 6.0

struct block {
    unsigned char *ptr;
    size_t size;
    uint64_t key;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t not_empty;
    struct block blocks[QUEUE_CAPACITY];
    size_t head;
    size_t count;
    int closed;
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER, .not_empty = PTHREAD_COND_INITIALIZER};

/* Blocks a producer leaves for a later producer to free, one shelf per
 * producer position; producers in the same position never overlap. */
static struct block shelves[PRODUCERS_ALIVE][LEFT_BEHIND];

static atomic_ullong blocks_made;
static atomic_ullong blocks_freed;
static atomic_size_t live_bytes;

static const struct size_tier block_sizes[] = {
    {800, 1, 1024},
    {170, 1025, 32 * KiB},
    {28, 32 * KiB + 1, MiB},
    {2, MiB + 1, 3 * MiB},
};

static struct block make_block(uint64_t *rng)
{
    struct block block = {NULL, TIERED_SIZE(rng, block_sizes), 0};

    block.ptr = malloc(block.size);
    if (block.ptr == NULL) {
        hard_error("malloc(%zu) failed", block.size);
    }
    block.key = pattern_key(block.ptr, block.size, rng_next(rng));
    fill_pattern(block.ptr, block.size, block.key);
    atomic_fetch_add_explicit(&blocks_made, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&live_bytes, block.size, memory_order_relaxed);
    return block;
}

static void destroy_block(struct block *block, const char *who)
{
    size_t damaged = pattern_mismatch(block->ptr, block->size, block->key);

    CHECK(damaged == PATTERN_INTACT, "%s: block %p of %zu bytes changed at byte %zu", who,
          (void *)block->ptr, block->size, damaged);
    free(block->ptr);
    block->ptr = NULL;
    atomic_fetch_add_explicit(&blocks_freed, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&live_bytes, block->size, memory_order_relaxed);
}

/* Returns 0 when the queue is full: the producer then frees the block. */
static int enqueue(struct block block)
{
    int accepted = 0;

    pthread_mutex_lock(&queue.lock);
    if (queue.count < QUEUE_CAPACITY) {
        queue.blocks[(queue.head + queue.count) % QUEUE_CAPACITY] = block;
        queue.count++;
        accepted = 1;
        pthread_cond_signal(&queue.not_empty);
    }
    pthread_mutex_unlock(&queue.lock);
    return accepted;
}

/* Waits for a block; returns 0 once the queue is closed and empty. */
static int dequeue(struct block *out)
{
    pthread_mutex_lock(&queue.lock);
    while (queue.count == 0 && !queue.closed) {
        pthread_cond_wait(&queue.not_empty, &queue.lock);
    }
    int got = queue.count > 0;
    if (got) {
        *out = queue.blocks[queue.head];
        queue.head = (queue.head + 1) % QUEUE_CAPACITY;
        queue.count--;
    }
    pthread_mutex_unlock(&queue.lock);
    return got;
}

static void *run_consumer(void *unused)
{
    struct block block;

    (void)unused;
    while (dequeue(&block)) {
        destroy_block(&block, "consumer");
    }
    return NULL;
}

struct producer {
    int position;
    uint64_t seed;
};

static void *run_producer(void *arg)
{
    const struct producer *self = arg;
    struct block *shelf = shelves[self->position];
    struct block own[BATCH / 4];
    uint64_t rng = self->seed;
    int kept = 0;

    for (int i = 0; i < BATCH; i++) {
        struct block block = make_block(&rng);

        if (i % 4 == 0) {
            own[kept++] = block;
        } else if (!enqueue(block)) {
            destroy_block(&block, "producer, queue full");
        }
    }
    /* The predecessor in this position has exited: its leftovers are freed
     * by a thread that never owned them, and this producer leaves its own. */
    for (int i = 0; i < LEFT_BEHIND; i++) {
        if (shelf[i].ptr != NULL) {
            destroy_block(&shelf[i], "successor");
        }
    }
    for (int i = 0; i < kept; i++) {
        if (i < LEFT_BEHIND) {
            shelf[i] = own[i];
        } else {
            destroy_block(&own[i], "producer");
        }
    }
    return NULL;
}

static void start_thread(pthread_t *thread, void *(*body)(void *), void *arg)
{
    int error = pthread_create(thread, NULL, body, arg);

    if (error != 0) {
        hard_error("pthread_create: %s", strerror(error));
    }
}

int main(void)
{
    double seconds = stress_seconds(DEFAULT_SECONDS);
    double start = seconds_now();
    pthread_t consumers[CONSUMERS];
    pthread_t producers[PRODUCERS_ALIVE];
    struct producer arguments[PRODUCERS_ALIVE];
    struct rss_watch rss = {0};
    unsigned long long producers_started = 0;

    for (int i = 0; i < CONSUMERS; i++) {
        start_thread(&consumers[i], run_consumer, NULL);
    }
    for (int i = 0; i < PRODUCERS_ALIVE; i++) {
        arguments[i] = (struct producer){i, mix64(++producers_started)};
        start_thread(&producers[i], run_producer, &arguments[i]);
    }
    /* Joins the oldest producer and starts its replacement, so that
     * PRODUCERS_ALIVE threads are always being born or dying. */
    for (int position = 0; seconds_now() - start < seconds;
         position = (position + 1) % PRODUCERS_ALIVE) {
        pthread_join(producers[position], NULL);
        arguments[position] = (struct producer){position, mix64(++producers_started)};
        start_thread(&producers[position], run_producer, &arguments[position]);
        if (producers_started % 16 == 0) {
            rss_watch_sample(&rss, (seconds_now() - start) / seconds, atomic_load(&live_bytes));
        }
    }
    for (int i = 0; i < PRODUCERS_ALIVE; i++) {
        pthread_join(producers[i], NULL);
    }
    pthread_mutex_lock(&queue.lock);
    queue.closed = 1;
    pthread_cond_broadcast(&queue.not_empty);
    pthread_mutex_unlock(&queue.lock);
    for (int i = 0; i < CONSUMERS; i++) {
        pthread_join(consumers[i], NULL);
    }
    for (int position = 0; position < PRODUCERS_ALIVE; position++) {
        for (int i = 0; i < LEFT_BEHIND; i++) {
            if (shelves[position][i].ptr != NULL) {
                destroy_block(&shelves[position][i], "main thread at the end");
            }
        }
    }

    unsigned long long made = atomic_load(&blocks_made), freed = atomic_load(&blocks_freed);
    printf("teardown_stress: %.1f s, %llu producer threads created and joined, %llu blocks "
           "made, %llu verified and freed\n",
           seconds_now() - start, producers_started, made, freed);
    CHECK(made == freed, "%llu blocks were made but %llu freed", made, freed);
    rss_watch_check(&rss, "teardown_stress");
    return test_result("teardown_stress");
}

/* Multi-thread stress: threads allocate blocks of random sizes (1 B - 4 MiB,
 * mostly small), write a pattern derived from the block's address, size and a
 * seed, and hand them to other threads, which verify the pattern, sometimes
 * realloc, and free.  Every block is freed by a thread that did not allocate
 * it, so remote frees are the common case here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define THREADS 4
#define QUEUE_CAPACITY 512
#define RUN_SECONDS 2.5

struct block {
    unsigned char *ptr;
    size_t size;
    uint64_t key;
    int sender;
};

struct queue {
    pthread_mutex_t lock;
    struct block blocks[QUEUE_CAPACITY];
    size_t head;
    size_t count;
};

struct worker {
    int id;
    pthread_t thread;
    uint64_t rng;
    uint64_t sent;
    uint64_t verified;
    uint64_t verified_bytes;
    uint64_t reallocated;
};

static struct queue queues[THREADS];
static atomic_int stop_requested;

static const struct size_tier random_sizes[] = {
    {850, 1, 1024},
    {120, 1025, 64 * KiB},
    {28, 64 * KiB + 1, MiB},
    {2, MiB + 1, 4 * MiB},
};

static struct block allocate_block(struct worker *self)
{
    struct block block = {NULL, TIERED_SIZE(&self->rng, random_sizes), 0, self->id};
    unsigned kind = (unsigned)(rng_next(&self->rng) % 16);

    if (kind == 0) {
        block.ptr = calloc(1, block.size);
        if (block.ptr != NULL) {
            size_t dirty = nonzero_offset(block.ptr, block.size);
            CHECK(dirty == PATTERN_INTACT, "thread %d: calloc(1, %zu) byte %zu is not zero",
                  self->id, block.size, dirty);
        }
    } else if (kind == 1) {
        size_t alignment = (size_t)16 << (rng_next(&self->rng) % 9);
        void *out = NULL;
        int error = posix_memalign(&out, alignment, block.size);
        CHECK(error == 0 && ((uintptr_t)out & (alignment - 1)) == 0,
              "thread %d: posix_memalign(%zu, %zu) returned %d, %p", self->id, alignment,
              block.size, error, out);
        block.ptr = error == 0 ? out : NULL;
    } else {
        block.ptr = malloc(block.size);
    }
    if (block.ptr == NULL) {
        hard_error("thread %d: allocating %zu bytes failed", self->id, block.size);
    }
    block.key = pattern_key(block.ptr, block.size, self->rng);
    fill_pattern(block.ptr, block.size, block.key);
    return block;
}

static void verify_and_free(struct worker *self, struct block block)
{
    size_t damaged = pattern_mismatch(block.ptr, block.size, block.key);

    CHECK(damaged == PATTERN_INTACT,
          "block %p of %zu bytes from thread %d, verified by thread %d: byte %zu corrupted",
          (void *)block.ptr, block.size, block.sender, self->id, damaged);
    self->verified++;
    self->verified_bytes += block.size;

    if (rng_next(&self->rng) % 8 == 0) {
        size_t new_size = TIERED_SIZE(&self->rng, random_sizes);
        unsigned char *moved = realloc(block.ptr, new_size);
        if (moved == NULL) {
            hard_error("thread %d: realloc(%zu -> %zu) failed", self->id, block.size, new_size);
        }
        size_t kept = new_size < block.size ? new_size : block.size;
        damaged = pattern_mismatch(moved, kept, block.key);
        CHECK(damaged == PATTERN_INTACT,
              "thread %d: realloc of a block from thread %d (%zu -> %zu bytes) lost byte %zu",
              self->id, block.sender, block.size, new_size, damaged);
        self->reallocated++;
        block.ptr = moved;
    }
    free(block.ptr);
}

static int send_block(struct block block, int target)
{
    struct queue *queue = &queues[target];
    int accepted = 0;

    pthread_mutex_lock(&queue->lock);
    if (queue->count < QUEUE_CAPACITY) {
        queue->blocks[(queue->head + queue->count) % QUEUE_CAPACITY] = block;
        queue->count++;
        accepted = 1;
    }
    pthread_mutex_unlock(&queue->lock);
    return accepted;
}

/* Takes everything queued for `id` at once so that the verification and the
 * frees run outside the lock. */
static size_t take_blocks(int id, struct block *out)
{
    struct queue *queue = &queues[id];
    size_t taken;

    pthread_mutex_lock(&queue->lock);
    taken = queue->count;
    for (size_t i = 0; i < taken; i++) {
        out[i] = queue->blocks[(queue->head + i) % QUEUE_CAPACITY];
    }
    queue->head = (queue->head + taken) % QUEUE_CAPACITY;
    queue->count = 0;
    pthread_mutex_unlock(&queue->lock);
    return taken;
}

static void *run_worker(void *arg)
{
    struct worker *self = arg;
    struct block received[QUEUE_CAPACITY];

    while (!atomic_load_explicit(&stop_requested, memory_order_relaxed)) {
        for (int burst = 0; burst < 8; burst++) {
            struct block block = allocate_block(self);
            int target = (self->id + 1 + (int)(rng_next(&self->rng) % (THREADS - 1))) % THREADS;

            if (send_block(block, target)) {
                self->sent++;
            } else {
                verify_and_free(self, block);
            }
        }
        size_t taken = take_blocks(self->id, received);
        for (size_t i = 0; i < taken; i++) {
            verify_and_free(self, received[i]);
        }
    }
    return NULL;
}

int main(void)
{
    static struct worker workers[THREADS];
    static struct block leftovers[QUEUE_CAPACITY];
    struct worker main_thread = {.id = -1, .rng = 1};

    for (int i = 0; i < THREADS; i++) {
        pthread_mutex_init(&queues[i].lock, NULL);
    }
    for (int i = 0; i < THREADS; i++) {
        workers[i].id = i;
        workers[i].rng = 0x5eed0000u + (uint64_t)i;
        int error = pthread_create(&workers[i].thread, NULL, run_worker, &workers[i]);
        if (error != 0) {
            hard_error("pthread_create: %s", strerror(error));
        }
    }

    double deadline = seconds_now() + RUN_SECONDS;
    while (seconds_now() < deadline) {
        usleep(20000);
    }
    atomic_store(&stop_requested, 1);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(workers[i].thread, NULL);
    }
    /* Blocks still queued belong to threads that have exited. */
    for (int i = 0; i < THREADS; i++) {
        size_t taken = take_blocks(i, leftovers);
        for (size_t j = 0; j < taken; j++) {
            verify_and_free(&main_thread, leftovers[j]);
        }
    }

    uint64_t total = main_thread.verified;
    for (int i = 0; i < THREADS; i++) {
        printf("thread %d: sent %llu blocks, verified %llu blocks (%llu MiB), %llu reallocs\n", i,
               (unsigned long long)workers[i].sent, (unsigned long long)workers[i].verified,
               (unsigned long long)(workers[i].verified_bytes / MiB),
               (unsigned long long)workers[i].reallocated);
        total += workers[i].verified;
    }
    printf("main thread verified %llu leftover blocks; %llu blocks verified in all\n",
           (unsigned long long)main_thread.verified, (unsigned long long)total);
    CHECK(total >= 1000, "only %llu blocks were verified in %.1f s: threads made no progress",
          (unsigned long long)total, RUN_SECONDS);
    return test_result("test_threads");
}

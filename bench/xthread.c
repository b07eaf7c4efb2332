/* xthread: cross-thread frees.  A producer thread allocates batches of
 * blocks of min..max bytes (16-1040 B by default) and hands each batch to a
 * consumer thread, which frees every block, so every free is remote.  With
 * pairs > 1, that many producer/consumer pairs run side by side.  min=64
 * max=64 is the all-remote shape of xmalloc-test: one class, so whole slabs
 * fill on one side and drain on the other.  ops = blocks of all pairs.
 *
 * Batches travel through a single-producer/single-consumer ring of depth
 * batches (8 by default) so the handoff costs two atomic operations per
 * batch, not per block, and the allocator dominates the time.  A deep ring
 * lets the blocks in flight swing by many MiB as the producer runs ahead
 * and the consumer catches up (xmalloc-test queues up to 100 batches):
 * whole SuperSlabs empty and fill again, which a shallow one never shows.
 * swing=1 makes the swing whole each time: the producer, finding the ring
 * full, waits until it is empty, and the consumer, finding it empty, until
 * it is full (xmalloc-test's four threads on two CPUs go much this way).
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>

#include "bench_util.h"

struct batch_ring {
    pthread_t producer;
    pthread_t consumer;
    unsigned char ***blocks; /* depth batches */
    long depth;
    bool swing;
    size_t batch_size;
    long rounds;
    uint32_t min;
    uint32_t span; /* max - min + 1 */
    uint32_t seed;
    _Alignas(64) atomic_long produced;
    _Alignas(64) atomic_long consumed;
};

static void *produce(void *arg)
{
    struct batch_ring *ring = arg;
    uint32_t state = ring->seed;

    for (long round = 0; round < ring->rounds; round++) {
        if (round - atomic_load_explicit(&ring->consumed, memory_order_acquire) >= ring->depth) {
            /* Full: with swing, until the consumer has emptied it. */
            long until = ring->swing ? round : round - ring->depth + 1;
            while (atomic_load_explicit(&ring->consumed, memory_order_acquire) < until)
                sched_yield();
        }
        unsigned char **blocks = ring->blocks[round % ring->depth];
        for (size_t i = 0; i < ring->batch_size; i++) {
            uint32_t r = bench_xorshift32(&state);
            blocks[i] = bench_xmalloc(ring->min + r % ring->span);
            blocks[i][0] = (unsigned char)r;
        }
        atomic_store_explicit(&ring->produced, round + 1, memory_order_release);
    }
    return NULL;
}

static void *consume(void *arg)
{
    struct batch_ring *ring = arg;

    for (long round = 0; round < ring->rounds; round++) {
        if (atomic_load_explicit(&ring->produced, memory_order_acquire) <= round) {
            /* Empty: with swing, until the producer has filled it. */
            long until = ring->swing ? round + ring->depth : round + 1;
            if (until > ring->rounds)
                until = ring->rounds;
            while (atomic_load_explicit(&ring->produced, memory_order_acquire) < until)
                sched_yield();
        }
        unsigned char **blocks = ring->blocks[round % ring->depth];
        for (size_t i = 0; i < ring->batch_size; i++)
            free(blocks[i]);
        atomic_store_explicit(&ring->consumed, round + 1, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"rounds", 1500, 1}, {"batch", 1024, 1}, {"seed", 1234567, 1}, {"min", 16, 1},
        {"max", 1040, 1},    {"pairs", 1, 1},    {"depth", 8, 1},      {"swing", 0, 0},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    uint32_t seed = bench_seed(argv[0], params[2].value);
    uint32_t min = (uint32_t)params[3].value;
    uint32_t max = (uint32_t)params[4].value;
    long pairs = params[5].value;
    long depth = params[6].value;
    bench_check_range(argv[0], &params[3], &params[4]);
    /* Aligned as the struct asks: the two counters sit on lines of their own. */
    struct batch_ring *rings =
        aligned_alloc(_Alignof(struct batch_ring), (size_t)pairs * sizeof(*rings));
    if (rings == NULL) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 1;
    }
    memset(rings, 0, (size_t)pairs * sizeof(*rings));
    for (long p = 0; p < pairs; p++) {
        struct batch_ring *ring = &rings[p];
        uint32_t pair_seed = seed + 0x9E3779B9u * (uint32_t)p;
        ring->rounds = params[0].value;
        ring->batch_size = (size_t)params[1].value;
        ring->min = min;
        ring->span = max - min + 1;
        ring->seed = pair_seed != 0 ? pair_seed : 1;
        ring->depth = depth;
        ring->swing = params[7].value != 0;
        ring->blocks = bench_xcalloc((size_t)depth, sizeof(*ring->blocks));
        for (long i = 0; i < depth; i++)
            ring->blocks[i] = bench_xcalloc(ring->batch_size, sizeof(*ring->blocks[i]));
    }

    double start = bench_now();
    for (long p = 0; p < pairs; p++) {
        if (pthread_create(&rings[p].consumer, NULL, consume, &rings[p]) != 0 ||
            pthread_create(&rings[p].producer, NULL, produce, &rings[p]) != 0) {
            fprintf(stderr, "%s: pthread_create failed\n", argv[0]);
            return 1;
        }
    }
    for (long p = 0; p < pairs; p++) {
        pthread_join(rings[p].producer, NULL);
        pthread_join(rings[p].consumer, NULL);
    }
    double seconds = bench_now() - start;

    for (long p = 0; p < pairs; p++) {
        for (long i = 0; i < depth; i++)
            free(rings[p].blocks[i]);
        free(rings[p].blocks);
    }
    free(rings);
    double ops = (double)pairs * (double)params[0].value * (double)params[1].value;
    bench_report("xthread", ops, seconds, params, count);
    return 0;
}

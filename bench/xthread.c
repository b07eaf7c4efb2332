/* xthread: cross-thread frees.  A producer thread allocates batches of
 * 16-1040 B blocks and hands each batch to a consumer thread, which frees
 * every block, so every free is remote.  ops = blocks.
 *
 * Batches travel through a small single-producer/single-consumer ring so the
 * handoff costs two atomic operations per batch, not per block, and the
 * allocator dominates the time.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench_util.h"

enum { RING_BATCHES = 8 };

struct batch_ring {
    unsigned char **blocks[RING_BATCHES];
    size_t batch_size;
    long rounds;
    uint32_t seed;
    _Alignas(64) atomic_long produced;
    _Alignas(64) atomic_long consumed;
};

static void *produce(void *arg)
{
    struct batch_ring *ring = arg;
    uint32_t state = ring->seed;

    for (long round = 0; round < ring->rounds; round++) {
        while (round - atomic_load_explicit(&ring->consumed, memory_order_acquire) >= RING_BATCHES)
            sched_yield();
        unsigned char **blocks = ring->blocks[round % RING_BATCHES];
        for (size_t i = 0; i < ring->batch_size; i++) {
            uint32_t r = bench_xorshift32(&state);
            blocks[i] = bench_xmalloc(16 + r % 1025);
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
        while (atomic_load_explicit(&ring->produced, memory_order_acquire) <= round)
            sched_yield();
        unsigned char **blocks = ring->blocks[round % RING_BATCHES];
        for (size_t i = 0; i < ring->batch_size; i++)
            free(blocks[i]);
        atomic_store_explicit(&ring->consumed, round + 1, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"rounds", 1500, 1},
        {"batch", 1024, 1},
        {"seed", 1234567, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    static struct batch_ring ring;
    ring.rounds = params[0].value;
    ring.batch_size = (size_t)params[1].value;
    ring.seed = (uint32_t)params[2].value;
    if (ring.seed == 0) {
        fprintf(stderr, "%s: seed must not be 0 modulo 2^32\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < RING_BATCHES; i++)
        ring.blocks[i] = bench_xcalloc(ring.batch_size, sizeof(*ring.blocks[i]));

    pthread_t producer, consumer;
    double start = bench_now();
    if (pthread_create(&consumer, NULL, consume, &ring) != 0 ||
        pthread_create(&producer, NULL, produce, &ring) != 0) {
        fprintf(stderr, "%s: pthread_create failed\n", argv[0]);
        return 1;
    }
    pthread_join(producer, NULL);
    pthread_join(consumer, NULL);
    double seconds = bench_now() - start;

    for (int i = 0; i < RING_BATCHES; i++)
        free(ring.blocks[i]);
    bench_report("xthread", (double)ring.rounds * (double)ring.batch_size, seconds, params, count);
    return 0;
}

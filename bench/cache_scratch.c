/* cache_scratch: false sharing between threads through the allocator, in
 * the shape of Hoard's cache-scratch and cache-thrash.  threads threads each
 * take a block of size bytes, write every byte of it writes times, free it,
 * and do so iterations times.  With passive=1 (cache-scratch) the main
 * thread first allocates one block per thread, side by side, and each
 * thread begins by freeing its own: an allocator that hands that block,
 * or one beside it, back to the thread's next malloc makes the threads
 * write one cache line, which each write takes from the other CPU.  With
 * passive=0 (cache-thrash) the threads only allocate their own: an
 * allocator that hands threads neighbouring blocks does the same.
 * ops = bytes written, all threads together.
 *
 * The writes go through a volatile pointer: the compiler can elide a
 * malloc and free around memory nothing reads, as it does in the C++
 * original (new and delete, at -O2), which then measures no allocator. */
#include <pthread.h>

#include "bench_util.h"

#define MAX_THREADS 64

struct worker {
    pthread_t thread;
    unsigned char *handed; /* the main thread's block, or NULL */
    long iterations;
    long writes;
    size_t size;
} __attribute__((aligned(64)));

static pthread_barrier_t start_line;

static void *scratch(void *arg)
{
    struct worker *self = arg;
    pthread_barrier_wait(&start_line);
    free(self->handed);
    for (long i = 0; i < self->iterations; i++) {
        volatile unsigned char *block = bench_xmalloc(self->size);
        for (long w = 0; w < self->writes; w++) {
            for (size_t k = 0; k < self->size; k++) {
                block[k] = (unsigned char)k;
                block[k]++;
            }
        }
        free((void *)block);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"threads", 2, 1},   {"iterations", 1000, 1}, {"size", 8, 1},
        {"writes", 5000, 1}, {"passive", 1, 0},
    };
    size_t count = sizeof(params) / sizeof(params[0]);
    bench_parse_args(argc, argv, params, count);
    long threads = params[0].value;
    if (threads > MAX_THREADS) {
        fprintf(stderr, "%s: at most %d threads\n", argv[0], MAX_THREADS);
        return 2;
    }
    static struct worker workers[MAX_THREADS];
    pthread_barrier_init(&start_line, NULL, (unsigned)threads + 1);
    for (long t = 0; t < threads; t++)
        workers[t] = (struct worker){
            .handed = params[4].value ? bench_xmalloc((size_t)params[2].value) : NULL,
            .iterations = params[1].value,
            .writes = params[3].value,
            .size = (size_t)params[2].value,
        };
    for (long t = 0; t < threads; t++) {
        if (pthread_create(&workers[t].thread, NULL, scratch, &workers[t]) != 0) {
            fprintf(stderr, "%s: pthread_create failed\n", argv[0]);
            return 1;
        }
    }
    double start = bench_now();
    pthread_barrier_wait(&start_line);
    for (long t = 0; t < threads; t++)
        pthread_join(workers[t].thread, NULL);
    double seconds = bench_now() - start;
    pthread_barrier_destroy(&start_line);
    double ops = (double)threads * (double)params[1].value * (double)params[3].value *
                 (double)params[2].value;
    bench_report("cache_scratch", ops, seconds, params, count);
    return 0;
}

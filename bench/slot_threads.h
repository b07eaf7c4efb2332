/* The multi-threaded slot workload shared by mid_large_mt and l25 (the seed's
 * mid/large benchmark shape).
 *
 * Every thread owns ws private slots.  Each cycle draws r, looks at slot
 * r % ws and frees it if occupied; otherwise a second draw picks the size and
 * the new block is written: one byte in every 4 KiB page plus the last byte,
 * as a program filling it would fault in every page without the benchmark
 * turning into a memset test; or, with touch=N, only its first N bytes, as a
 * program using a header of a buffer it sized generously.  Each thread drains its slots at the end,
 * inside the timed region.  ops = threads * cycles.
 */
#ifndef HAKMEM_BENCH_SLOT_THREADS_H
#define HAKMEM_BENCH_SLOT_THREADS_H

#include <pthread.h>

#include "bench_util.h"

typedef size_t (*slot_size_fn)(uint32_t draw);

struct slot_thread {
    pthread_t thread;
    pthread_barrier_t *start_line;
    slot_size_fn pick_size;
    long cycles;
    uint32_t ws;
    uint32_t seed;
    size_t touch; /* 0: every page */
};

static void *slot_thread_run(void *arg)
{
    struct slot_thread *self = arg;
    unsigned char **slots = bench_xcalloc(self->ws, sizeof(*slots));
    uint32_t state = self->seed;

    pthread_barrier_wait(self->start_line);
    for (long i = 0; i < self->cycles; i++) {
        uint32_t k = bench_xorshift32(&state) % self->ws;

        if (slots[k] != NULL) {
            free(slots[k]);
            slots[k] = NULL;
        } else {
            uint32_t draw = bench_xorshift32(&state);
            size_t size = self->pick_size(draw);
            slots[k] = bench_xmalloc(size);
            if (self->touch)
                memset(slots[k], (unsigned char)draw, self->touch < size ? self->touch : size);
            else
                bench_touch_pages(slots[k], size, (unsigned char)draw);
        }
    }
    for (uint32_t k = 0; k < self->ws; k++)
        free(slots[k]);
    free(slots);
    return NULL;
}

static int slot_threads_main(const char *name, int argc, char **argv, slot_size_fn pick_size,
                             struct bench_param *params, size_t count)
{
    bench_parse_args(argc, argv, params, count);
    long threads = params[0].value;
    long cycles = params[1].value;
    uint32_t ws = (uint32_t)params[2].value;
    uint32_t seed = (uint32_t)params[3].value;
    size_t touch = (size_t)params[4].value;

    struct slot_thread *workers = bench_xcalloc((size_t)threads, sizeof(*workers));
    pthread_barrier_t start_line;
    pthread_barrier_init(&start_line, NULL, (unsigned)threads + 1);
    for (long t = 0; t < threads; t++) {
        /* Distinct, never-zero streams per thread. */
        uint32_t thread_seed = seed + 0x9E3779B9u * (uint32_t)t;
        workers[t] = (struct slot_thread){
            .start_line = &start_line,
            .pick_size = pick_size,
            .cycles = cycles,
            .ws = ws,
            .seed = thread_seed != 0 ? thread_seed : 1,
            .touch = touch,
        };
        if (pthread_create(&workers[t].thread, NULL, slot_thread_run, &workers[t]) != 0) {
            fprintf(stderr, "%s: pthread_create failed\n", name);
            return 1;
        }
    }

    pthread_barrier_wait(&start_line);
    double start = bench_now();
    for (long t = 0; t < threads; t++)
        pthread_join(workers[t].thread, NULL);
    double seconds = bench_now() - start;

    pthread_barrier_destroy(&start_line);
    free(workers);
    bench_report(name, (double)threads * (double)cycles, seconds, params, count);
    return 0;
}

#endif

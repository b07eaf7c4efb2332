/* aligned: aligned allocation in a working set, as SIMD and cache-line
 * buffers of any size (FFmpeg's av_malloc) and a program's page-aligned
 * I/O buffers ask for it.  ws slots; each cycle draws r, frees slot r % ws
 * if it is occupied, or else fills it with posix_memalign(align, min + a
 * draw in 0..max-min) and writes its first byte.  Untimed prefill of
 * cycles/10 iterations; the drain at the end is timed.  ops/s = cycles /
 * time (a cycle is a free or a posix_memalign). */
#include "bench_util.h"

struct shape {
    size_t align;
    size_t min;
    size_t span; /* max - min + 1 */
};

static void run_cycles(unsigned char **slots, uint32_t ws, const struct shape *shape, long cycles,
                       uint32_t *state)
{
    for (long i = 0; i < cycles; i++) {
        uint32_t r = bench_xorshift32(state);
        uint32_t k = r % ws;
        if (slots[k] != NULL) {
            free(slots[k]);
            slots[k] = NULL;
            continue;
        }
        void *block;
        size_t size = shape->min + bench_xorshift32(state) % shape->span;
        if (posix_memalign(&block, shape->align, size) != 0 ||
            (uintptr_t)block % shape->align != 0) {
            fprintf(stderr, "aligned: posix_memalign(%zu, %zu) failed or misaligned\n",
                    shape->align, size);
            exit(1);
        }
        slots[k] = block;
        slots[k][0] = (unsigned char)r;
    }
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"cycles", 10000000, 1}, {"ws", 1024, 1}, {"align", 64, 8},
        {"min", 16, 1},          {"max", 271, 0}, {"seed", 1234567, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long cycles = params[0].value;
    uint32_t ws = (uint32_t)params[1].value;
    struct shape shape = {
        .align = (size_t)params[2].value,
        .min = (size_t)params[3].value,
        .span = (size_t)(params[4].value - params[3].value + 1),
    };
    uint32_t state = bench_seed(argv[0], params[5].value);
    if ((shape.align & (shape.align - 1)) != 0 || shape.align % sizeof(void *) != 0) {
        fprintf(stderr, "%s: align must be a power of two and a multiple of %zu\n", argv[0],
                sizeof(void *));
        return 2;
    }
    bench_check_range(argv[0], &params[3], &params[4]);

    unsigned char **slots = bench_xcalloc(ws, sizeof(*slots));
    run_cycles(slots, ws, &shape, cycles / 10, &state);

    double start = bench_now();
    run_cycles(slots, ws, &shape, cycles, &state);
    for (uint32_t k = 0; k < ws; k++)
        free(slots[k]);
    double seconds = bench_now() - start;

    free(slots);
    bench_report("aligned", (double)cycles, seconds, params, count);
    return 0;
}

/* large_blocks: big buffers in turn, as an image or array pipeline keeps
 * them.  live buffers of random size between min_mb and max_mb MiB are held;
 * each step frees a random one and allocates a new one of a new random size
 * in its place, which the program then writes page by page.  A page of every
 * live buffer is read back each step, so they all stay in use.  Sizes come
 * from a fixed seed.  ops = buffers allocated in the timed steps. */
#include "bench_util.h"

static size_t pick_size(uint32_t *state, size_t min_size, size_t max_size)
{
    /* Page-unaligned, as sizes computed from element counts are. */
    uint64_t span = max_size - min_size + 1;
    uint64_t draw = ((uint64_t)bench_xorshift32(state) << 32) | bench_xorshift32(state);
    return min_size + (size_t)(draw % span);
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"steps", 2000, 1}, {"live", 20, 1}, {"min_mb", 5, 1}, {"max_mb", 25, 1}, {"seed", 42, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long steps = params[0].value;
    size_t live = (size_t)params[1].value;
    size_t min_size = (size_t)params[2].value << 20;
    size_t max_size = (size_t)params[3].value << 20;
    uint32_t state = bench_seed(argv[0], params[4].value);
    bench_check_range(argv[0], &params[2], &params[3]);

    unsigned char **buffers = bench_xcalloc(live, sizeof(*buffers));
    size_t *sizes = bench_xcalloc(live, sizeof(*sizes));
    for (size_t i = 0; i < live; i++) {
        sizes[i] = pick_size(&state, min_size, max_size);
        buffers[i] = bench_xmalloc(sizes[i]);
        bench_touch_pages(buffers[i], sizes[i], (unsigned char)i);
    }

    unsigned long checksum = 0;
    double start = bench_now();
    for (long step = 0; step < steps; step++) {
        size_t victim = bench_xorshift32(&state) % live;
        free(buffers[victim]);
        sizes[victim] = pick_size(&state, min_size, max_size);
        buffers[victim] = bench_xmalloc(sizes[victim]);
        bench_touch_pages(buffers[victim], sizes[victim], (unsigned char)step);
        size_t other = bench_xorshift32(&state) % live;
        checksum += buffers[other][sizes[other] - 1];
    }
    double seconds = bench_now() - start;

    for (size_t i = 0; i < live; i++)
        free(buffers[i]);
    free(buffers);
    free(sizes);
    if (checksum == 1) /* never: keeps the reads */
        fputc('\n', stderr);
    bench_report("large_blocks", (double)steps, seconds, params, count);
    return 0;
}

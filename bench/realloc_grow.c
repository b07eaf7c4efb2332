/* realloc_grow: what string builders and vectors do.  Each round a buffer
 * starts at 1 KiB and grows with realloc up to max_kb, its new part written
 * page by page after every step as a program appending to it would, and is
 * then freed.  Each step adds size/step: step=1 doubles (C++ vectors),
 * step=8 adds an eighth (CPython's lists and bytearrays).  ops = realloc
 * calls. */
#include "bench_util.h"

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"rounds", 1000, 1},
        {"max_kb", 8192, 2},
        {"step", 1, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long rounds = params[0].value;
    size_t max_size = (size_t)params[1].value * 1024;
    size_t step = (size_t)params[2].value;
    long reallocs = 0;

    double start = bench_now();
    for (long round = 0; round < rounds; round++) {
        size_t size = 1024;
        unsigned char *buffer = bench_xmalloc(size);
        bench_touch_pages(buffer, size, (unsigned char)round);
        while (size < max_size) {
            size_t grown = size + (size / step > 0 ? size / step : 1);
            unsigned char *moved = realloc(buffer, grown);
            if (moved == NULL) {
                fprintf(stderr, "%s: realloc(%zu) failed\n", argv[0], grown);
                return 1;
            }
            buffer = moved;
            bench_touch_pages(buffer + size, grown - size, (unsigned char)round);
            size = grown;
            reallocs++;
        }
        free(buffer);
    }
    double seconds = bench_now() - start;

    bench_report("realloc_grow", (double)reallocs, seconds, params, count);
    return 0;
}

/* realloc_grow: what string builders and vectors do.  Each round a buffer
 * starts at 1 KiB and doubles with realloc up to max_kb, its new half written
 * page by page after every step as a program appending to it would, and is
 * then freed.  ops = realloc calls. */
#include "bench_util.h"

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"rounds", 1000, 1},
        {"max_kb", 8192, 2},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long rounds = params[0].value;
    size_t max_size = (size_t)params[1].value * 1024;
    long reallocs = 0;

    double start = bench_now();
    for (long round = 0; round < rounds; round++) {
        size_t size = 1024;
        unsigned char *buffer = bench_xmalloc(size);
        bench_touch_pages(buffer, size, (unsigned char)round);
        while (size < max_size) {
            size_t grown = size * 2;
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

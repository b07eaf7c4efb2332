/* mid_large_mt: the seed's Mid workload, 8, 16 or 32 KiB plus 0-2047 B per
 * block; see slot_threads.h for the shape. */
#include "slot_threads.h"

static size_t mid_size(uint32_t draw)
{
    return ((size_t)8192 << (draw % 3)) + ((draw >> 8) & 2047);
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"threads", 4, 1}, {"cycles", 40000, 1}, {"ws", 2048, 1}, {"seed", 42, 1}, {"touch", 0, 0},
    };

    return slot_threads_main("mid_large_mt", argc, argv, mid_size, params,
                             sizeof(params) / sizeof(params[0]));
}

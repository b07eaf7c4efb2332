/* l25: the mid_large_mt shape (see slot_threads.h) over the L25 range, block
 * sizes drawn uniformly from 64 KiB to 1 MiB. */
#include "slot_threads.h"

enum { L25_MIN = 64 * 1024, L25_MAX = 1024 * 1024 };

static size_t l25_size(uint32_t draw)
{
    return L25_MIN + draw % (L25_MAX - L25_MIN + 1);
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"threads", 4, 1}, {"cycles", 2000, 1}, {"ws", 64, 1}, {"seed", 42, 1}, {"touch", 0, 0},
    };

    return slot_threads_main("l25", argc, argv, l25_size, params,
                             sizeof(params) / sizeof(params[0]));
}

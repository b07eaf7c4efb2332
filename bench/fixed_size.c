/* fixed_size: a malloc/free loop of one size, the cheapest possible pattern.
 * tools/hakmem-compare --instructions runs it at two lengths under callgrind
 * so that the difference is the cost of one malloc+free pair.
 */
#include "bench_util.h"

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"size", 64, 1},
        {"n", 50000000, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    size_t size = (size_t)params[0].value;
    long n = params[1].value;

    double start = bench_now();
    for (long i = 0; i < n; i++) {
        unsigned char *block = bench_xmalloc(size);
        block[0] = (unsigned char)i;
        free(block);
    }
    double seconds = bench_now() - start;

    bench_report("fixed_size", (double)n, seconds, params, count);
    return 0;
}

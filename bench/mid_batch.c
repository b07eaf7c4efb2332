/* mid_batch: batches of Mid blocks allocated, then all freed, again and
 * again, as a server that takes a burst of request buffers and lets them
 * go: batch blocks of min..max bytes, one byte of each written, then all
 * freed.  A thread cache smaller than the batch's bytes sends blocks home
 * and takes them back at every round.  ops/s = malloc+free pairs / time.
 */
#include "bench_util.h"

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"rounds", 4000, 1}, {"batch", 512, 1}, {"min", 8192, 1}, {"max", 32768, 1}, {"seed", 7, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long rounds = params[0].value;
    long batch = params[1].value;
    size_t min = (size_t)params[2].value;
    size_t span = (size_t)(params[3].value - params[2].value + 1);
    uint32_t state = bench_seed(argv[0], params[4].value);
    bench_check_range(argv[0], &params[2], &params[3]);

    unsigned char **blocks = bench_xcalloc((size_t)batch, sizeof(*blocks));
    double start = bench_now();
    for (long round = 0; round < rounds; round++) {
        for (long i = 0; i < batch; i++) {
            blocks[i] = bench_xmalloc(min + bench_xorshift32(&state) % span);
            blocks[i][0] = (unsigned char)i;
        }
        for (long i = 0; i < batch; i++)
            free(blocks[i]);
    }
    double seconds = bench_now() - start;

    free(blocks);
    bench_report("mid_batch", (double)rounds * (double)batch, seconds, params, count);
    return 0;
}

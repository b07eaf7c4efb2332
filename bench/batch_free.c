/* batch_free: glibc's malloc benchmark pattern (bench-malloc-simple): a
 * batch of blocks is allocated, then all of it is freed, again and again.
 * The batches sweep 25, 100, 400 and 1600 blocks and the sizes 16, 32, 48
 * and 64 B, each pairing for `rounds` rounds, so that a thread cache smaller
 * than the batch flushes and refills in turn on every round.
 * ops/s = malloc+free pairs / time.
 */
#include "bench_util.h"

static const long batches[] = {25, 100, 400, 1600};
static const size_t sizes[] = {16, 32, 48, 64};

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"rounds", 2000, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long rounds = params[0].value;
    long largest = batches[COUNT(batches) - 1];
    unsigned char **blocks = bench_xcalloc((size_t)largest, sizeof(*blocks));

    double pairs = 0;
    double start = bench_now();
    for (size_t b = 0; b < COUNT(batches); b++) {
        long batch = batches[b];
        /* Every batch size gets the same number of pairs. */
        long batch_rounds = rounds * largest / batch;
        for (size_t s = 0; s < COUNT(sizes); s++) {
            for (long round = 0; round < batch_rounds; round++) {
                for (long i = 0; i < batch; i++) {
                    blocks[i] = bench_xmalloc(sizes[s]);
                    blocks[i][0] = (unsigned char)i;
                }
                for (long i = 0; i < batch; i++)
                    free(blocks[i]);
            }
            pairs += (double)batch_rounds * (double)batch;
        }
    }
    double seconds = bench_now() - start;

    free(blocks);
    bench_report("batch_free", pairs, seconds, params, count);
    return 0;
}

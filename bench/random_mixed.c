/* random_mixed: the seed's small-object workload.
 *
 * A table of ws slots; each cycle draws r from xorshift32 and looks at slot
 * r % ws: an occupied slot is freed, an empty one gets malloc(16 + (r & 0x3FF))
 * and one byte written.  An untimed prefill of cycles/10 iterations brings
 * the table to its steady state; the final drain is part of the timed region.
 * ops/s = cycles / time.
 */
#include "bench_util.h"

static void run_cycles(unsigned char **slots, uint32_t ws, long cycles, uint32_t *state)
{
    for (long i = 0; i < cycles; i++) {
        uint32_t r = bench_xorshift32(state);
        uint32_t k = r % ws;

        if (slots[k] != NULL) {
            free(slots[k]);
            slots[k] = NULL;
        } else {
            slots[k] = bench_xmalloc(16 + (r & 0x3FF));
            slots[k][0] = (unsigned char)r;
        }
    }
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"cycles", 10000000, 1},
        {"ws", 8192, 1},
        {"seed", 1234567, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long cycles = params[0].value;
    uint32_t ws = (uint32_t)params[1].value;
    uint32_t state = bench_seed(argv[0], params[2].value);

    unsigned char **slots = bench_xcalloc(ws, sizeof(*slots));
    run_cycles(slots, ws, cycles / 10, &state);

    double start = bench_now();
    run_cycles(slots, ws, cycles, &state);
    for (uint32_t k = 0; k < ws; k++)
        free(slots[k]);
    double seconds = bench_now() - start;

    free(slots);
    bench_report("random_mixed", (double)cycles, seconds, params, count);
    return 0;
}

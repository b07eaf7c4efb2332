/* calloc_tables: zeroed tables a program fills sparsely, as hash tables
 * and occupancy maps are.  live tables of min_kb to max_kb KiB are calloc'd
 * and one byte is written in every stride_kb KiB of each; then each step
 * frees a random table and callocs one of a new random size in its place.
 * A fresh table's pages cost nothing until written where the allocator
 * knows they are zero; a recycled table must be cleared, or its pages
 * given back to the kernel.  ops = tables calloc'd, the first live ones
 * included: growth, then churn. */
#include "bench_util.h"

static size_t pick_size(uint32_t *state, size_t min_size, size_t max_size)
{
    return min_size + bench_xorshift32(state) % (max_size - min_size + 1);
}

static unsigned char *fill(size_t size, size_t stride, uint32_t draw)
{
    unsigned char *table = bench_xcalloc(1, size);
    for (size_t offset = draw % stride; offset < size; offset += stride)
        table[offset] = (unsigned char)(draw | 1);
    return table;
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"steps", 20000, 0}, {"live", 64, 1},      {"min_kb", 64, 1},
        {"max_kb", 1024, 1}, {"stride_kb", 16, 1}, {"seed", 42, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long steps = params[0].value;
    size_t live = (size_t)params[1].value;
    size_t min_size = (size_t)params[2].value << 10;
    size_t max_size = (size_t)params[3].value << 10;
    size_t stride = (size_t)params[4].value << 10;
    uint32_t state = bench_seed(argv[0], params[5].value);
    bench_check_range(argv[0], &params[2], &params[3]);

    unsigned char **tables = bench_xcalloc(live, sizeof(*tables));
    unsigned long checksum = 0;
    double start = bench_now();
    for (size_t i = 0; i < live; i++)
        tables[i] = fill(pick_size(&state, min_size, max_size), stride, bench_xorshift32(&state));
    for (long step = 0; step < steps; step++) {
        size_t victim = bench_xorshift32(&state) % live;
        free(tables[victim]);
        tables[victim] =
            fill(pick_size(&state, min_size, max_size), stride, bench_xorshift32(&state));
        checksum += tables[bench_xorshift32(&state) % live][0];
    }
    double seconds = bench_now() - start;

    for (size_t i = 0; i < live; i++)
        free(tables[i]);
    free(tables);
    if (checksum == 1) /* never: keeps the reads */
        fputc('\n', stderr);
    bench_report("calloc_tables", (double)((long)live + steps), seconds, params, count);
    return 0;
}

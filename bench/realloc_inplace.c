/* realloc_inplace: live small blocks resized within their size, as a
 * program trims and extends its strings and buffers by a few bytes.
 *
 * ws slots each hold a block of a size of its own, 16-1039 B, allocated
 * and written untimed.  Each cycle draws r and takes slot r % ws: the block
 * is realloc'd to its size less up to an eighth, or back to its size, in
 * turn, and its first byte written.  An allocator that keeps a block whose
 * size still fits it (hakmem, mimalloc, tcmalloc) then pays for finding
 * the block's size, with many slots on cold metadata, as a server's
 * strings are (ws=262144 by default, some 140 MB); glibc and jemalloc move
 * some of the blocks (jemalloc's classes, four to a doubling, often part
 * the trimmed size from the full one; glibc splits the trimmed tail off to
 * its thread cache and copies the block to grow it back).
 * ops/s = cycles / time.
 */
#include "bench_util.h"

struct slot {
    unsigned char *block;
    uint32_t size; /* the block's full size */
    uint32_t trimmed;
};

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"cycles", 20000000, 1},
        {"ws", 262144, 1},
        {"seed", 1234567, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long cycles = params[0].value;
    uint32_t ws = (uint32_t)params[1].value;
    uint32_t state = bench_seed(argv[0], params[2].value);

    struct slot *slots = bench_xcalloc(ws, sizeof(*slots));
    for (uint32_t k = 0; k < ws; k++) {
        slots[k].size = 16 + (bench_xorshift32(&state) & 0x3FF);
        slots[k].block = bench_xmalloc(slots[k].size);
        memset(slots[k].block, (int)k, slots[k].size);
    }

    double start = bench_now();
    for (long i = 0; i < cycles; i++) {
        uint32_t r = bench_xorshift32(&state);
        struct slot *slot = &slots[r % ws];
        size_t size = slot->size;
        if (!slot->trimmed)
            size -= (r >> 20) % (size / 8 + 1);
        unsigned char *block = realloc(slot->block, size);
        if (block == NULL) {
            fprintf(stderr, "%s: realloc(%zu) failed\n", argv[0], size);
            return 1;
        }
        block[0] = (unsigned char)r;
        slot->block = block;
        slot->trimmed = !slot->trimmed;
    }
    double seconds = bench_now() - start;

    for (uint32_t k = 0; k < ws; k++)
        free(slots[k].block);
    free(slots);
    bench_report("realloc_inplace", (double)cycles, seconds, params, count);
    return 0;
}

/* phases: a program whose work moves from one size range to another, as a
 * parser's gives way to a compiler's passes.  Each round is two phases,
 * each freeing all it allocated before the next begins, with a pause of
 * pause_ms after each: in the small phase a list of mib MiB of 16-256 B
 * nodes is built, then freed; in the big phase mib MiB of slots are
 * reallocated to 1-4096 B and written whole, eight times over, half of them
 * freed after each pass.  An allocator that can serve the second phase
 * with what the first freed peaks at one phase's memory, one that cannot
 * at the sum; the figure to read is the peak RSS.  With big_every=N, one
 * realloc in N takes 40-200 KiB instead (the slots fewer, for mib MiB on
 * average): many rounds of those show whether what moves memory between
 * the phases still does after dozens of them.
 * ops/s = mallocs, reallocs and frees (bytes / 136 nodes and 12.5 ops a
 * slot per round) / time, the pauses left out.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

struct node {
    struct node *next;
};

/* 16-256 B, 136 B on average. */
#define SMALL_MEAN 136

static long small_phase(size_t bytes, uint32_t *state)
{
    struct node *head = NULL;
    long nodes = (long)(bytes / SMALL_MEAN);
    for (long i = 0; i < nodes; i++) {
        struct node *node = bench_xmalloc(16 + bench_xorshift32(state) % 241);
        node->next = head;
        head = node;
    }
    while (head) {
        struct node *next = head->next;
        free(head);
        head = next;
    }
    return 2 * nodes;
}

enum { MAX_SIZE = 4096, BIG_MIN = 40 << 10, BIG_SPREAD = 160 << 10 };

/* A realloc's size: 1-4096 B, or 40-200 KiB once in big_every (0: never). */
static size_t big_size(uint32_t *state, uint32_t big_every)
{
    uint32_t r = bench_xorshift32(state);
    if (big_every && r % big_every == 0)
        return BIG_MIN + r / big_every % BIG_SPREAD;
    return 1 + r % MAX_SIZE;
}

/* Slots of big_size's mean size: an even count, so that each pass frees
 * half of them, the odd or the even ones in turn. */
static long big_phase(size_t bytes, uint32_t big_every, uint32_t *state)
{
    enum { PASSES = 8 };
    size_t mean = MAX_SIZE / 2;
    if (big_every)
        mean = (mean * (big_every - 1) + BIG_MIN + BIG_SPREAD / 2) / big_every;
    size_t count = bytes / mean & ~(size_t)1;
    unsigned char **slots = bench_xcalloc(count, sizeof(*slots));
    for (int pass = 0; pass < PASSES; pass++) {
        for (size_t i = 0; i < count; i++) {
            size_t size = big_size(state, big_every);
            unsigned char *block = realloc(slots[i], size);
            if (block == NULL) {
                fprintf(stderr, "phases: realloc(%zu) failed\n", size);
                exit(1);
            }
            memset(block, pass, size);
            slots[i] = block;
        }
        for (size_t i = (size_t)pass % 2; i < count; i += 2) {
            free(slots[i]);
            slots[i] = NULL;
        }
    }
    for (size_t i = 0; i < count; i++)
        free(slots[i]);
    free(slots);
    /* Per pass count reallocs and count / 2 frees; count / 2 at the end. */
    return (long)(PASSES * count + PASSES * count / 2 + count / 2);
}

static void pause_for(long ms)
{
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"rounds", 3, 1},        {"mib", 48, 1},      {"pause_ms", 400, 0},
        {"seed", 2463534242, 1}, {"big_every", 0, 0},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long rounds = params[0].value;
    size_t bytes = (size_t)params[1].value << 20;
    long pause_ms = params[2].value;
    uint32_t state = bench_seed(argv[0], params[3].value);
    uint32_t big_every = (uint32_t)params[4].value;

    double ops = 0;
    double seconds = 0;
    for (long round = 0; round < rounds; round++) {
        double start = bench_now();
        ops += (double)small_phase(bytes, &state);
        seconds += bench_now() - start;
        pause_for(pause_ms);
        start = bench_now();
        ops += (double)big_phase(bytes, big_every, &state);
        seconds += bench_now() - start;
        pause_for(pause_ms);
    }
    bench_report("phases", ops, seconds, params, count);
    return 0;
}

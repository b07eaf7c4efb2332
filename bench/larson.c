/* larson: blocks handed from one thread generation to the next (after the
 * server workload of Larson and Krishnan).
 *
 * The main thread fills threads * slots slots with blocks of min..max
 * bytes (untimed).  Then each of `threads` lanes runs `generations` threads
 * one after the other: a generation replaces rounds * slots random slots of
 * its lane (free the old block, malloc a new one, write its first byte) and
 * exits, and the next generation inherits the slots.  So most frees are of
 * blocks an exited thread allocated, and every generation starts with an
 * empty heap.  The lanes' final blocks are freed inside the timed region.
 * ops = threads * generations * rounds * slots replacements.
 */
#include <pthread.h>

#include "bench_util.h"

struct lane {
    pthread_t driver;
    unsigned char **slots;
    uint32_t count;
    uint32_t min;
    uint32_t span; /* max - min + 1 */
    long replacements;
    long generations;
    uint32_t state;
};

static void *run_generation(void *arg)
{
    struct lane *lane = arg;
    uint32_t state = lane->state;

    for (long i = 0; i < lane->replacements; i++) {
        uint32_t victim = bench_xorshift32(&state) % lane->count;
        uint32_t draw = bench_xorshift32(&state);

        free(lane->slots[victim]);
        lane->slots[victim] = bench_xmalloc(lane->min + draw % lane->span);
        lane->slots[victim][0] = (unsigned char)draw;
    }
    lane->state = state;
    return NULL;
}

/* Starts each generation when the one before has exited. */
static void *drive_lane(void *arg)
{
    struct lane *lane = arg;

    for (long g = 0; g < lane->generations; g++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, run_generation, lane) != 0) {
            fprintf(stderr, "larson: pthread_create failed\n");
            exit(1);
        }
        pthread_join(thread, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"threads", 2, 1}, {"generations", 20, 1}, {"rounds", 20, 1}, {"slots", 5000, 1},
        {"min", 8, 1},     {"max", 1000, 1},       {"seed", 4141, 1},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long threads = params[0].value;
    uint32_t slots = (uint32_t)params[3].value;
    uint32_t min = (uint32_t)params[4].value;
    uint32_t max = (uint32_t)params[5].value;
    uint32_t seed = (uint32_t)params[6].value;
    bench_check_range(argv[0], &params[4], &params[5]);

    struct lane *lanes = bench_xcalloc((size_t)threads, sizeof(*lanes));
    for (long t = 0; t < threads; t++) {
        uint32_t lane_seed = seed + 0x9E3779B9u * (uint32_t)t;
        lanes[t] = (struct lane){
            .slots = bench_xcalloc(slots, sizeof(unsigned char *)),
            .count = slots,
            .min = min,
            .span = max - min + 1,
            .replacements = params[2].value * (long)slots,
            .generations = params[1].value,
            .state = lane_seed != 0 ? lane_seed : 1,
        };
        for (uint32_t k = 0; k < slots; k++) {
            uint32_t draw = bench_xorshift32(&lanes[t].state);
            lanes[t].slots[k] = bench_xmalloc(min + draw % lanes[t].span);
            lanes[t].slots[k][0] = (unsigned char)draw;
        }
    }

    double start = bench_now();
    for (long t = 0; t < threads; t++) {
        if (pthread_create(&lanes[t].driver, NULL, drive_lane, &lanes[t]) != 0) {
            fprintf(stderr, "%s: pthread_create failed\n", argv[0]);
            return 1;
        }
    }
    for (long t = 0; t < threads; t++) {
        pthread_join(lanes[t].driver, NULL);
        for (uint32_t k = 0; k < slots; k++)
            free(lanes[t].slots[k]);
    }
    double seconds = bench_now() - start;

    for (long t = 0; t < threads; t++)
        free(lanes[t].slots);
    free(lanes);
    double ops = (double)threads * (double)params[1].value * (double)params[2].value * slots;
    bench_report("larson", ops, seconds, params, count);
    return 0;
}

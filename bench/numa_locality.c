/*
 * NUMA locality: the share of the pages of newly allocated blocks that are
 * on the node of the thread that allocated them.  One thread per node (of
 * those the process may run on) goes through four scenarios, each ending
 * with a move_pages census of the blocks allocated in it:
 *
 *   alloc    every thread allocates and fills a mix of small, Mid and L25
 *            blocks;
 *   remote   every thread frees the blocks the thread of the next node
 *            allocated (remote frees), then at once allocates the same mix
 *            again;
 *   reuse    every thread frees the next node's blocks again, and once all
 *            have, allocates the same sizes once more: its own blocks,
 *            freed on another node, are there to be reused, and must come
 *            back on its node;
 *   migrate  every thread frees its blocks, moves to the next node and
 *            allocates the mix again; local means on the new node.
 *
 * Plain malloc and free only: the allocator under test is whatever
 * LD_PRELOAD names.  Prints one line per scenario for people (with local and
 * all pages of each kind: small up to 1 KiB, Mid up to 32 KiB, L25) and one
 * line `numa_locality ops_per_s=... local_pct=... minflt=... maxrss_kb=...`
 * for tools/hakmem-compare, whose local_pct is the lowest of the scenarios'
 * and local_pct_overall the share over the pages of all four.
 * ops counts the mallocs and frees of the timed parts (allocating and
 * freeing, not the censuses).
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "../tests/numa/numa_util.h"
#include "bench_util.h"

enum { ALLOC, REMOTE, REUSE, MIGRATE, SCENARIO_COUNT };
static const char *const scenario_names[SCENARIO_COUNT] = {"alloc", "remote", "reuse", "migrate"};

/* Block kinds, by hakmem's size classes, to tell people which kind strays. */
enum { SMALL, MID, L25, KIND_COUNT };
static const char *const kind_names[KIND_COUNT] = {"small", "mid", "l25"};

static int kind_of(size_t size)
{
    return size <= 1024 ? SMALL : size <= (32 << 10) ? MID : L25;
}

struct worker {
    int index;
    const struct numa_node *node;
    void **blocks;
    size_t *sizes;
    /* Scratch for one kind's blocks at a time. */
    void **kind_blocks;
    size_t *kind_sizes;
    double seconds[SCENARIO_COUNT];
    struct numa_census census[SCENARIO_COUNT][KIND_COUNT];
    int census_node[SCENARIO_COUNT];
    bool failed;
};

static struct bench_param params[] = {
    {"blocks", 4096, 1},
    {"seed", 12345, 1},
};
enum { BLOCKS, SEED };

static struct numa_machine machine;
static struct worker workers[NUMA_MAX_NODES];
static int worker_count;
static pthread_barrier_t step;

/* Mostly small blocks, some Mid, a few L25, as a server's heap has. */
static size_t block_size(uint32_t *rng)
{
    uint32_t draw = bench_xorshift32(rng);
    uint32_t percent = draw % 100;
    draw >>= 8;
    if (percent < 83)
        return 16 + draw % 1009;
    if (percent < 98)
        return 1025 + draw % (32 << 10);
    return (64 << 10) + draw % (192 << 10);
}

static void fill_sizes(struct worker *worker)
{
    uint32_t rng = (uint32_t)params[SEED].value + (uint32_t)worker->index * 7919u;
    for (long i = 0; i < params[BLOCKS].value; i++)
        worker->sizes[i] = block_size(&rng);
}

static void allocate_all(struct worker *worker)
{
    for (long i = 0; i < params[BLOCKS].value; i++) {
        worker->blocks[i] = bench_xmalloc(worker->sizes[i]);
        memset(worker->blocks[i], 0x6b, worker->sizes[i]);
    }
}

static void free_all(void **blocks)
{
    for (long i = 0; i < params[BLOCKS].value; i++)
        free(blocks[i]);
}

static void take_census(struct worker *worker, int scenario, int node)
{
    worker->census_node[scenario] = node;
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        size_t count = 0;
        for (long i = 0; i < params[BLOCKS].value; i++) {
            if (kind_of(worker->sizes[i]) == kind) {
                worker->kind_blocks[count] = worker->blocks[i];
                worker->kind_sizes[count++] = worker->sizes[i];
            }
        }
        if (!numa_count_pages(&worker->census[scenario][kind], worker->kind_blocks,
                              worker->kind_sizes, count)) {
            fprintf(stderr, "numa_locality: move_pages: %s\n", strerror(errno));
            worker->failed = true;
        }
    }
}

/* Every thread frees what the next one allocated, then allocates the same
 * sizes again.  In REMOTE it allocates as soon as its own frees are done,
 * while its blocks may still be being freed by the previous thread; in
 * REUSE it waits until every thread has freed, so that its own blocks are
 * all there to be reused. */
static void exchange(struct worker *worker, const struct worker *next, int scenario)
{
    pthread_barrier_wait(&step);
    void **received = next->blocks;
    void **mine = worker->blocks;
    void **replacement = bench_xcalloc((size_t)params[BLOCKS].value, sizeof *replacement);
    pthread_barrier_wait(&step);
    double start = bench_now();
    free_all(received);
    if (scenario == REUSE)
        pthread_barrier_wait(&step);
    worker->blocks = replacement;
    allocate_all(worker);
    worker->seconds[scenario] = bench_now() - start;
    /* The previous thread reads mine until it has freed every block. */
    pthread_barrier_wait(&step);
    free(mine);
    take_census(worker, scenario, worker->node->id);
}

static void *run_worker(void *argument)
{
    struct worker *worker = argument;
    struct worker *next = &workers[(worker->index + 1) % worker_count];
    worker->failed = !numa_pin(worker->node);

    double start = bench_now();
    allocate_all(worker);
    worker->seconds[ALLOC] = bench_now() - start;
    take_census(worker, ALLOC, worker->node->id);

    exchange(worker, next, REMOTE);
    exchange(worker, next, REUSE);

    pthread_barrier_wait(&step);
    start = bench_now();
    free_all(worker->blocks);
    if (!numa_pin(next->node))
        worker->failed = true;
    allocate_all(worker);
    worker->seconds[MIGRATE] = bench_now() - start;
    take_census(worker, MIGRATE, next->node->id);
    free_all(worker->blocks);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_parse_args(argc, argv, params, sizeof params / sizeof params[0]);
    bench_seed(argv[0], params[SEED].value); /* worker 0's state */
    if (!numa_discover(&machine))
        return 1;
    for (int i = 0; i < machine.node_count; i++) {
        if (machine.nodes[i].cpu_count == 0)
            continue;
        struct worker *worker = &workers[worker_count];
        worker->index = worker_count++;
        worker->node = &machine.nodes[i];
        worker->sizes = bench_xcalloc((size_t)params[BLOCKS].value, sizeof *worker->sizes);
        worker->blocks = bench_xcalloc((size_t)params[BLOCKS].value, sizeof *worker->blocks);
        worker->kind_blocks = bench_xcalloc((size_t)params[BLOCKS].value, sizeof(void *));
        worker->kind_sizes = bench_xcalloc((size_t)params[BLOCKS].value, sizeof(size_t));
        fill_sizes(worker);
    }
    if (worker_count == 0) {
        fprintf(stderr, "numa_locality: no node has CPUs this process may run on\n");
        return 1;
    }
    pthread_barrier_init(&step, NULL, (unsigned)worker_count);
    pthread_t threads[NUMA_MAX_NODES];
    for (int w = 0; w < worker_count; w++) {
        if (pthread_create(&threads[w], NULL, run_worker, &workers[w]) != 0) {
            fprintf(stderr, "numa_locality: pthread_create failed\n");
            return 1;
        }
    }
    for (int w = 0; w < worker_count; w++)
        pthread_join(threads[w], NULL);

    double local_pct[SCENARIO_COUNT], slowest[SCENARIO_COUNT] = {0};
    double lowest = 100.0, seconds = 0.0;
    long all_pages = 0, all_local = 0;
    for (int s = 0; s < SCENARIO_COUNT; s++) {
        long pages = 0, local = 0, kind_pages[KIND_COUNT] = {0}, kind_local[KIND_COUNT] = {0};
        for (int w = 0; w < worker_count; w++) {
            if (workers[w].failed) {
                fprintf(stderr, "numa_locality: the thread for node %d failed\n",
                        workers[w].node->id);
                return 1;
            }
            for (int kind = 0; kind < KIND_COUNT; kind++) {
                const struct numa_census *census = &workers[w].census[s][kind];
                kind_pages[kind] += census->pages;
                kind_local[kind] += census->on_node[workers[w].census_node[s]];
            }
            if (workers[w].seconds[s] > slowest[s])
                slowest[s] = workers[w].seconds[s];
        }
        for (int kind = 0; kind < KIND_COUNT; kind++) {
            pages += kind_pages[kind];
            local += kind_local[kind];
        }
        all_pages += pages;
        all_local += local;
        local_pct[s] = pages ? 100.0 * (double)local / (double)pages : 100.0;
        lowest = local_pct[s] < lowest ? local_pct[s] : lowest;
        seconds += slowest[s];
        printf("scenario %-8s threads=%d pages=%ld local_pct=%.2f seconds=%.6f", scenario_names[s],
               worker_count, pages, local_pct[s], slowest[s]);
        for (int kind = 0; kind < KIND_COUNT; kind++)
            printf(" %s=%ld/%ld", kind_names[kind], kind_local[kind], kind_pages[kind]);
        printf("\n");
    }
    /* Each thread: one allocation per block in each scenario, one free per
     * block in remote, reuse and migrate. */
    double ops = (double)worker_count * (double)params[BLOCKS].value * 7.0;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("numa_locality ops_per_s=%.0f ops=%.0f seconds=%.6f minflt=%ld maxrss_kb=%ld"
           " local_pct=%.2f",
           seconds > 0 ? ops / seconds : 0.0, ops, seconds, usage.ru_minflt, usage.ru_maxrss,
           lowest);
    for (int s = 0; s < SCENARIO_COUNT; s++)
        printf(" local_pct_%s=%.2f", scenario_names[s], local_pct[s]);
    printf(" local_pct_overall=%.2f",
           all_pages ? 100.0 * (double)all_local / (double)all_pages : 100.0);
    printf(" nodes=%d blocks=%ld seed=%ld\n", worker_count, params[BLOCKS].value,
           params[SEED].value);
    return 0;
}

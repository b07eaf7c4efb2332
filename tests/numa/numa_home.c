/*
 * Where hakmem's blocks go when threads cross nodes, checked both against
 * hakmem's own bookkeeping (hak_node_of) and against the kernel's truth
 * (move_pages).  Run with hakmem preloaded, in a guest with two nodes or more;
 * the first two nodes the process may run on play "home" and "away".
 *
 *   remote-free  home allocates blocks of several classes and hands them to
 *                away, which frees them and then allocates the same sizes many
 *                times: it must never get one of them, nor any home-node
 *                page.  Home then allocates again and gets some of its blocks
 *                back.
 *   migrate      a thread allocates on home, frees half of it (so that its
 *                caches hold home blocks), moves itself to away with
 *                sched_setaffinity and allocates past a cache refill of
 *                every class: every block it gets after the move is on away.
 *   migrate-syscall, migrate-libnuma, migrate-other
 *                the same, but the thread moves without the C library's
 *                sched_setaffinity, which hakmem wraps: with the system
 *                call itself, with libnuma's numa_run_on_node (which makes
 *                the system call; skipped without libnuma.so.1), or moved
 *                by another process (as by taskset -p); skipped where glibc
 *                did not register rseq, which hakmem needs to see them.
 *   onnode       hak_malloc_onnode(size, node) from threads on home and away
 *                puts the block on node, for every node, and hak_node_of says
 *                so; either thread may free it.
 *   early        the main thread, on away, allocates before any other thread
 *                exists (before hakmem knows the topology); then a thread on
 *                home allocates every size: its blocks are on home.
 *
 * Exit status: 0 when every check passes, 1 when one fails, 77 when hakmem is
 * not the malloc or there are fewer than two nodes to run on, 99 when the
 * test itself cannot run (a thread cannot be pinned, move_pages fails).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/wait.h>

#include "numa_util.h"

enum { EXIT_SKIP = 77, EXIT_HARD_ERROR = 99 };

/* A share of pages below this on the expected node fails a check. */
#define MIN_LOCAL_PERCENT 99.5

/* Small (C0, C3, C11, C19), Mid, L25 and large blocks. */
static const size_t sizes[] = {16, 64, 256, 1024, 4 << 10, 24 << 10, 128 << 10, 512 << 10, 4 << 20};
enum { SIZE_COUNT = sizeof sizes / sizeof sizes[0] };

static int (*node_of)(const void *ptr);
static void *(*malloc_onnode)(size_t size, int node);

static struct numa_machine machine;
static const struct numa_node *home, *away;
static pthread_barrier_t step;
static _Atomic int failures;
static _Atomic int hard_errors;

static void fail(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    printf("FAIL: ");
    vprintf(format, args);
    printf("\n");
    va_end(args);
    failures++;
}

static void hard_error(const char *what)
{
    printf("ERROR: %s\n", what);
    hard_errors++;
}

/* Blocks from 2 MiB of each size, at least 4 and at most 256: more than
 * any per-thread cache holds of the small and Mid classes. */
static size_t count_of(size_t size)
{
    size_t count = (2u << 20) / size;
    return count < 4 ? 4 : count > 256 ? 256 : count;
}

struct block_set {
    size_t size;
    size_t count;
    void **blocks;
    size_t *sizes;
};

static void set_init(struct block_set *set, size_t size, size_t count)
{
    set->size = size;
    set->count = count;
    set->blocks = calloc(count, sizeof *set->blocks);
    set->sizes = calloc(count, sizeof *set->sizes);
    if (set->blocks == NULL || set->sizes == NULL) {
        fprintf(stderr, "numa_home: out of memory for a block list\n");
        exit(EXIT_HARD_ERROR);
    }
    for (size_t i = 0; i < count; i++)
        set->sizes[i] = size;
}

/* Allocates and touches set->count blocks; the toucher's node is where
 * first-touch allocators would put them. */
static void set_allocate(struct block_set *set)
{
    for (size_t i = 0; i < set->count; i++) {
        set->blocks[i] = malloc(set->size);
        if (set->blocks[i] == NULL) {
            fprintf(stderr, "numa_home: malloc(%zu) failed\n", set->size);
            exit(EXIT_HARD_ERROR);
        }
        memset(set->blocks[i], 0x5a, set->size);
    }
}

static void set_free(struct block_set *set)
{
    for (size_t i = 0; i < set->count; i++)
        free(set->blocks[i]);
    free(set->blocks);
    free(set->sizes);
    memset(set, 0, sizeof *set);
}

static struct numa_census census_of(void *const *blocks, const size_t *block_sizes, size_t count)
{
    struct numa_census census = {0};
    if (!numa_count_pages(&census, blocks, block_sizes, count))
        hard_error("move_pages failed");
    if (census.unplaced > 0)
        fail("%ld of %ld pages are on no node (the first: status %d)", census.unplaced,
             census.pages, census.first_unplaced_status);
    return census;
}

/* Blocks among the first count that hak_node_of does not place on node. */
static size_t count_not_on(void *const *blocks, size_t count, int node)
{
    size_t elsewhere = 0;
    for (size_t i = 0; i < count; i++)
        elsewhere += node_of(blocks[i]) != node;
    return elsewhere;
}

static bool pin_or_fail(const struct numa_node *node)
{
    if (numa_pin(node))
        return true;
    hard_error("cannot pin a thread to its node");
    return false;
}

/* ---- remote-free ---- */

static struct block_set handed[SIZE_COUNT];

static bool contains(const struct block_set *sorted, void *block)
{
    return bsearch(&block, sorted->blocks, sorted->count, sizeof block, numa_compare_addresses) !=
           NULL;
}

static void away_warm_up(void)
{
    /* Away has its own slabs and full caches of every class before home's
     * blocks reach it: the blocks it frees must not join them. */
    for (int s = 0; s < SIZE_COUNT; s++) {
        struct block_set own;
        set_init(&own, sizes[s], count_of(sizes[s]));
        set_allocate(&own);
        set_free(&own);
    }
}

static void home_allocates_and_hands_over(void)
{
    for (int s = 0; s < SIZE_COUNT; s++) {
        set_init(&handed[s], sizes[s], count_of(sizes[s]));
        set_allocate(&handed[s]);
        size_t elsewhere = count_not_on(handed[s].blocks, handed[s].count, home->id);
        if (elsewhere > 0)
            fail("home, %zu B: hak_node_of puts %zu of %zu blocks off node %d", sizes[s], elsewhere,
                 handed[s].count, home->id);
    }
}

static void away_frees_then_allocates(struct block_set *kept)
{
    for (int s = 0; s < SIZE_COUNT; s++)
        for (size_t i = 0; i < handed[s].count; i++)
            free(handed[s].blocks[i]);
    printf("%-9s %6s %10s %12s %8s %s\n", "size", "blocks", "home-block", "hak_node_of", "pages",
           "home-pages");
    for (int s = 0; s < SIZE_COUNT; s++) {
        qsort(handed[s].blocks, handed[s].count, sizeof(void *), numa_compare_addresses);
        set_init(&kept[s], sizes[s], 3 * handed[s].count);
        set_allocate(&kept[s]);
        size_t returned = 0;
        for (size_t i = 0; i < kept[s].count; i++)
            returned += contains(&handed[s], kept[s].blocks[i]);
        size_t elsewhere = count_not_on(kept[s].blocks, kept[s].count, away->id);
        struct numa_census census = census_of(kept[s].blocks, kept[s].sizes, kept[s].count);
        printf("%9zu %6zu %10zu %12zu %8ld %ld\n", sizes[s], kept[s].count, returned, elsewhere,
               census.pages, census.on_node[home->id]);
        if (returned > 0)
            fail("away, %zu B: got %zu blocks that home allocated and away freed", sizes[s],
                 returned);
        if (elsewhere > 0)
            fail("away, %zu B: hak_node_of puts %zu of %zu blocks off node %d", sizes[s], elsewhere,
                 kept[s].count, away->id);
        if (census.on_node[home->id] > 0)
            fail("away, %zu B: %ld of %ld pages on home node %d", sizes[s],
                 census.on_node[home->id], census.pages, home->id);
    }
}

/* Remote frees wait in their slab until the owner has used up what the slab
 * has never handed out (up to 64 KiB of small blocks): home allocates past
 * that. */
static size_t reuse_count(size_t size, size_t handed_count)
{
    size_t past_slab = (256u << 10) / size + handed_count;
    return past_slab > 2 * handed_count ? past_slab : 2 * handed_count;
}

static void home_gets_its_blocks_back(void)
{
    printf("%-9s %6s %10s\n", "size", "blocks", "reused");
    for (int s = 0; s < SIZE_COUNT; s++) {
        struct block_set again;
        set_init(&again, sizes[s], reuse_count(sizes[s], handed[s].count));
        set_allocate(&again);
        size_t reused = 0;
        for (size_t i = 0; i < again.count; i++)
            reused += contains(&handed[s], again.blocks[i]);
        size_t elsewhere = count_not_on(again.blocks, again.count, home->id);
        printf("%9zu %6zu %10zu\n", sizes[s], again.count, reused);
        if (reused == 0)
            fail("home, %zu B: none of the %zu blocks away freed came back", sizes[s],
                 handed[s].count);
        if (elsewhere > 0)
            fail("home, %zu B: hak_node_of puts %zu of %zu blocks off node %d", sizes[s], elsewhere,
                 again.count, home->id);
        set_free(&again);
        free(handed[s].blocks);
        free(handed[s].sizes);
    }
}

static void *remote_free_home(void *unused)
{
    (void)unused;
    bool pinned = pin_or_fail(home);
    pthread_barrier_wait(&step); /* both pinned */
    pthread_barrier_wait(&step); /* away warmed up */
    if (pinned)
        home_allocates_and_hands_over();
    pthread_barrier_wait(&step); /* handed over */
    pthread_barrier_wait(&step); /* away freed them and allocated */
    if (pinned) {
        printf("home (node %d) allocates again:\n", home->id);
        home_gets_its_blocks_back();
    }
    pthread_barrier_wait(&step); /* away may free its blocks */
    return NULL;
}

static void *remote_free_away(void *unused)
{
    (void)unused;
    struct block_set kept[SIZE_COUNT];
    bool pinned = pin_or_fail(away);
    pthread_barrier_wait(&step);
    if (pinned)
        away_warm_up();
    pthread_barrier_wait(&step);
    pthread_barrier_wait(&step);
    if (pinned) {
        printf("away (node %d) frees home's (node %d) blocks and allocates:\n", away->id, home->id);
        away_frees_then_allocates(kept);
    }
    pthread_barrier_wait(&step);
    pthread_barrier_wait(&step);
    for (int s = 0; pinned && s < SIZE_COUNT; s++)
        set_free(&kept[s]);
    return NULL;
}

/* ---- migrate ---- */

/* More blocks than a cache holds, so that every class refills after the
 * move; fewer of the L25 and large sizes, whose caches are small or none. */
static size_t migrate_count(size_t size)
{
    return size <= (32u << 10) ? 200 : size <= (1u << 20) ? 24 : 4;
}

static void check_after_migration(const struct block_set *after)
{
    size_t stale = 0;
    while (stale < after->count && node_of(after->blocks[stale]) != away->id)
        stale++;
    size_t moved = after->count - stale;
    size_t elsewhere = count_not_on(after->blocks + stale, moved, away->id);
    struct numa_census census = census_of(after->blocks + stale, after->sizes + stale, moved);
    double local = numa_local_percent(&census, away->id);
    printf("%9zu %6zu %12zu %12zu %8ld %6.1f%%\n", after->size, after->count, stale, elsewhere,
           census.pages, local);
    if (stale > 0)
        fail("migrate, %zu B: the first %zu of %zu blocks after the move are not on node %d",
             after->size, stale, after->count, away->id);
    if (elsewhere > 0)
        fail("migrate, %zu B: hak_node_of puts %zu of the %zu blocks after the move"
             " elsewhere",
             after->size, elsewhere, moved);
    if (local < MIN_LOCAL_PERCENT)
        fail("migrate, %zu B: %.1f%% of the pages after the move are on node %d", after->size,
             local, away->id);
}

/* How the migrate scenarios move the thread; hakmem sees only the first. */
enum mover { MOVE_LIBC, MOVE_SYSCALL, MOVE_LIBNUMA, MOVE_OTHER_PROCESS };

/* Looked up at run time: the test links the C library only. */
static int (*run_on_node)(int node);

static bool move_by_other_process(pid_t tid, const struct numa_node *node)
{
    pid_t child = fork();
    if (child == 0)
        _exit(syscall(SYS_sched_setaffinity, tid, sizeof node->cpus, &node->cpus) == 0 ? 0 : 1);
    int status;
    return child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* Moves the calling thread to node; the kernel has moved it once the call
 * returns (the other process's, once the thread next runs). */
static bool move_thread(const struct numa_node *node, enum mover mover)
{
    bool moved;
    switch (mover) {
    case MOVE_LIBC:
        return pin_or_fail(node);
    case MOVE_SYSCALL:
        moved = syscall(SYS_sched_setaffinity, 0, sizeof node->cpus, &node->cpus) == 0;
        break;
    case MOVE_LIBNUMA:
        moved = run_on_node(node->id) == 0;
        break;
    default:
        moved = move_by_other_process(gettid(), node);
        break;
    }
    if (!moved || numa_current_node() != node->id) {
        hard_error("cannot move the thread to its node");
        return false;
    }
    return true;
}

static void *migrate(void *argument)
{
    enum mover mover = (enum mover)(intptr_t)argument;
    struct block_set before[SIZE_COUNT], after;
    if (!pin_or_fail(home))
        return NULL;
    for (int s = 0; s < SIZE_COUNT; s++) {
        set_init(&before[s], sizes[s], migrate_count(sizes[s]));
        set_allocate(&before[s]);
        size_t elsewhere = count_not_on(before[s].blocks, before[s].count, home->id);
        if (elsewhere > 0)
            fail("before migrating, %zu B: %zu blocks off node %d", sizes[s], elsewhere, home->id);
    }
    for (int s = 0; s < SIZE_COUNT; s++) {
        size_t kept = before[s].count / 2;
        for (size_t i = kept; i < before[s].count; i++)
            free(before[s].blocks[i]);
        before[s].count = kept;
    }
    if (!move_thread(away, mover))
        return NULL;
    printf("moved from node %d to node %d; blocks allocated after the move:\n", home->id, away->id);
    printf("%-9s %6s %12s %12s %8s %7s\n", "size", "blocks", "from-before", "off-node", "pages",
           "local");
    for (int s = 0; s < SIZE_COUNT; s++) {
        set_init(&after, sizes[s], migrate_count(sizes[s]));
        set_allocate(&after);
        check_after_migration(&after);
        set_free(&after);
    }
    /* Remote frees of the blocks left on the old node. */
    for (int s = 0; s < SIZE_COUNT; s++)
        set_free(&before[s]);
    return NULL;
}

/* ---- onnode ---- */

static const size_t onnode_sizes[] = {24, 1000, 8 << 10, 100 << 10, 1 << 20, 6 << 20};
enum { ONNODE_SIZE_COUNT = sizeof onnode_sizes / sizeof onnode_sizes[0] };

/* Blocks each thread allocated, per target node and size; the other thread
 * frees the odd ones. */
static void *onnode_blocks[2][NUMA_MAX_NODES][ONNODE_SIZE_COUNT];

static void onnode_allocate(int side, const struct numa_node *self)
{
    for (int n = 0; n < machine.node_count; n++) {
        int target = machine.nodes[n].id;
        for (int s = 0; s < ONNODE_SIZE_COUNT; s++) {
            size_t size = onnode_sizes[s];
            void *block = malloc_onnode(size, target);
            onnode_blocks[side][n][s] = block;
            if (block == NULL) {
                fail("node %d: hak_malloc_onnode(%zu, %d) failed", self->id, size, target);
                continue;
            }
            memset(block, 0x3c, size);
            struct numa_census census = census_of(&block, &size, 1);
            double local = numa_local_percent(&census, target);
            int reported = node_of(block);
            printf("thread on node %d: hak_malloc_onnode(%8zu, %d): hak_node_of %d, %ld pages,"
                   " %.1f%% on node %d\n",
                   self->id, size, target, reported, census.pages, local, target);
            if (reported != target)
                fail("hak_node_of says %d for a block from hak_malloc_onnode(%zu, %d)", reported,
                     size, target);
            if (local < 100.0)
                fail("hak_malloc_onnode(%zu, %d) from node %d: %.1f%% of its pages there", size,
                     target, self->id, local);
        }
    }
}

/* Frees the blocks of one side that have the given parity. */
static void onnode_free(int side, int parity)
{
    for (int n = 0; n < machine.node_count; n++)
        for (int s = 0; s < ONNODE_SIZE_COUNT; s++)
            if ((n + s) % 2 == parity)
                free(onnode_blocks[side][n][s]);
}

static void onnode_rejects_bad_input(void)
{
    int missing = machine.nodes[machine.node_count - 1].id + 1;
    errno = 0;
    void *block = malloc_onnode(64, missing);
    if (block != NULL || errno != EINVAL)
        fail("hak_malloc_onnode(64, %d), a node that does not exist: %p, errno %d", missing, block,
             errno);
    free(block);
    int on_stack = 0;
    if (node_of(&on_stack) != -1)
        fail("hak_node_of(a stack address) is %d, not -1", node_of(&on_stack));
}

enum { ONNODE_ROUNDS = 3 };

static void *onnode_side(void *argument)
{
    int side = (int)(intptr_t)argument;
    const struct numa_node *self = side == 0 ? home : away;
    bool pinned = pin_or_fail(self);
    /* Rounds after the first reuse what the frees gave back. */
    for (int round = 0; round < ONNODE_ROUNDS; round++) {
        pthread_barrier_wait(&step);
        if (pinned && round == 0)
            onnode_rejects_bad_input();
        if (pinned)
            onnode_allocate(side, self);
        pthread_barrier_wait(&step);
        if (pinned) {
            onnode_free(side, 0);
            onnode_free(1 - side, 1);
        }
    }
    return NULL;
}

/* ---- early ---- */

static void *home_allocates_after_early(void *unused)
{
    (void)unused;
    if (!pin_or_fail(home))
        return NULL;
    printf("%-9s %6s %12s %8s %7s\n", "size", "blocks", "off-node", "pages", "local");
    for (int s = 0; s < SIZE_COUNT; s++) {
        struct block_set set;
        set_init(&set, sizes[s], count_of(sizes[s]));
        set_allocate(&set);
        size_t elsewhere = count_not_on(set.blocks, set.count, home->id);
        struct numa_census census = census_of(set.blocks, set.sizes, set.count);
        double local = numa_local_percent(&census, home->id);
        printf("%9zu %6zu %12zu %8ld %6.1f%%\n", sizes[s], set.count, elsewhere, census.pages,
               local);
        if (elsewhere > 0)
            fail("early, %zu B: hak_node_of puts %zu of %zu blocks off node %d", sizes[s],
                 elsewhere, set.count, home->id);
        if (local < MIN_LOCAL_PERCENT)
            fail("early, %zu B: %.1f%% of the pages on node %d, where the thread runs", sizes[s],
                 local, home->id);
        set_free(&set);
    }
    return NULL;
}

static int early(void)
{
    if (!numa_pin(away))
        return EXIT_HARD_ERROR;
    /* A few blocks of every kind but large, touched here, on away. */
    struct block_set first[SIZE_COUNT - 1];
    for (int s = 0; s < SIZE_COUNT - 1; s++) {
        set_init(&first[s], sizes[s], 2);
        set_allocate(&first[s]);
    }
    printf("main thread allocated on node %d; a thread on node %d allocates:\n", away->id,
           home->id);
    pthread_t thread;
    if (pthread_create(&thread, NULL, home_allocates_after_early, NULL) != 0)
        return EXIT_HARD_ERROR;
    pthread_join(thread, NULL);
    for (int s = 0; s < SIZE_COUNT - 1; s++)
        set_free(&first[s]);
    return 0;
}

/* ---- main ---- */

static int mover_of(const char *scenario)
{
    return strcmp(scenario, "migrate") == 0           ? MOVE_LIBC
           : strcmp(scenario, "migrate-syscall") == 0 ? MOVE_SYSCALL
           : strcmp(scenario, "migrate-libnuma") == 0 ? MOVE_LIBNUMA
           : strcmp(scenario, "migrate-other") == 0   ? MOVE_OTHER_PROCESS
                                                      : -1;
}

static int run_pair(void *(*home_thread)(void *), void *(*away_thread)(void *), void *home_argument,
                    void *away_argument)
{
    pthread_t threads[2];
    pthread_barrier_init(&step, NULL, 2);
    if (pthread_create(&threads[0], NULL, home_thread, home_argument) != 0 ||
        pthread_create(&threads[1], NULL, away_thread, away_argument) != 0) {
        fprintf(stderr, "numa_home: pthread_create failed\n");
        return EXIT_HARD_ERROR;
    }
    pthread_join(threads[0], NULL);
    pthread_join(threads[1], NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: numa_home remote-free|migrate|migrate-syscall|migrate-libnuma|"
                        "migrate-other|onnode|early\n");
        return 2;
    }
    node_of = (int (*)(const void *))dlsym(RTLD_DEFAULT, "hak_node_of");
    malloc_onnode = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "hak_malloc_onnode");
    if (node_of == NULL || malloc_onnode == NULL) {
        printf("SKIP: the malloc is not hakmem's (no hak_node_of)\n");
        return EXIT_SKIP;
    }
    if (!numa_discover(&machine))
        return EXIT_HARD_ERROR;
    for (int i = 0; i < machine.node_count; i++) {
        if (machine.nodes[i].cpu_count == 0)
            continue;
        if (home == NULL)
            home = &machine.nodes[i];
        else if (away == NULL)
            away = &machine.nodes[i];
    }
    if (away == NULL) {
        printf("SKIP: fewer than two nodes to run on (online: %s)\n", machine.online);
        return EXIT_SKIP;
    }
    /* hakmem notices a move it is not told of (every mover but the C
     * library's) through rseq, which glibc registers from 2.35 on unless
     * told not to. */
    extern const unsigned int __rseq_size __attribute__((weak));
    if (mover_of(argv[1]) > MOVE_LIBC && (!&__rseq_size || !__rseq_size)) {
        printf("SKIP: glibc did not register rseq for this thread\n");
        return EXIT_SKIP;
    }
    if (mover_of(argv[1]) == MOVE_LIBNUMA) {
        void *libnuma = dlopen("libnuma.so.1", RTLD_NOW);
        run_on_node = libnuma ? (int (*)(int))dlsym(libnuma, "numa_run_on_node") : NULL;
        if (run_on_node == NULL) {
            printf("SKIP: no libnuma.so.1 with numa_run_on_node\n");
            return EXIT_SKIP;
        }
    }
    int status;
    if (strcmp(argv[1], "remote-free") == 0) {
        status = run_pair(remote_free_home, remote_free_away, NULL, NULL);
    } else if (strcmp(argv[1], "onnode") == 0) {
        status = run_pair(onnode_side, onnode_side, (void *)(intptr_t)0, (void *)(intptr_t)1);
    } else if (strcmp(argv[1], "early") == 0) {
        status = early();
    } else if (mover_of(argv[1]) >= 0) {
        pthread_t thread;
        void *mover = (void *)(intptr_t)mover_of(argv[1]);
        status = pthread_create(&thread, NULL, migrate, mover) == 0 ? 0 : EXIT_HARD_ERROR;
        if (status == 0)
            pthread_join(thread, NULL);
    } else {
        fprintf(stderr, "numa_home: unknown test '%s'\n", argv[1]);
        return 2;
    }
    if (status != 0 || hard_errors > 0)
        return EXIT_HARD_ERROR;
    printf("%s: %d failed checks\n", argv[1], (int)failures);
    return failures > 0 ? 1 : 0;
}

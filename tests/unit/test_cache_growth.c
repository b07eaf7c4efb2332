/* Mid and L25 caches that flush and refill in turn grow: a class of blocks
 * up to 64 KiB doubles its cache at every turn, up to 4 MiB of blocks, and
 * the growth of all of a thread's caches of such classes stays within its
 * share of 64 MiB among the live threads, from 4 MiB to 16 MiB: 16 with
 * two threads, 8 with eight, 4 with 34; a thread grown among two shrinks
 * to its share, class by class as they flush, once sixteen live.  A class
 * of bigger blocks grows the same way while the program writes a little
 * of each block, within 32 MiB for all of them; it keeps its first size
 * while the program writes them whole, and goes back to it once the
 * program starts to.
 *
 * Idle caches give their blocks back: with HAKMEM_DECAY_MS at 20 ms, a
 * thread that churns 64 B blocks (refills and flushes, which look at the
 * clock) empties, within 10 s, the grown cache of a Mid class it no longer
 * mallocs from, brings it back to its first size and gives back its
 * current slab, and keeps the caches of the classes it still mallocs from;
 * then the spans that release emptied leave the node's HotSpanBox, where
 * no span is put or taken.
 *
 * A thread that takes a fresh slab for one class first empties the caches
 * of the classes it has not malloc'd from since their last refill or
 * flush, a sixty-fourth of the decay ago or more, or while it took a
 * fault per 20 ms of the decay, and their emptied spans
 * go to the HotSpanBox as stale ones; a class it malloc'd from since, or
 * idle for less (also after the heap itself sat idle), keeps its cache.
 * An L25 calloc that takes a span of its own empties idle caches first
 * too. */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "arena/hot_span_box.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "options.h"
#include "os.h"
#include "unit.h"

enum { ROUNDS = 6, MAX_BLOCKS = 4 * MiB / 8192 + 64, SPARSE_MIN = 64 * 1024 };

static uint32_t first_limit[HAK_NUM_CLASSES];

/* rounds rounds of more mallocs than the biggest cache holds, then as many
 * frees: each round turns the class from refills to flushes and back.  The
 * program writes the first written bytes of each block. */
static void churn_rounds(size_t size, size_t written, int rounds)
{
    static void *blocks[MAX_BLOCKS];
    uint32_t count = (uint32_t)(4 * MiB / hak_class_size[hak_class_of(size)]) + 64;
    if (count > MAX_BLOCKS)
        hard_error("churn_rounds(%zu): %u blocks, more than %d", size, count, MAX_BLOCKS);
    for (int round = 0; round < rounds; round++) {
        for (uint32_t i = 0; i < count; i++) {
            if (!(blocks[i] = malloc(size)))
                hard_error("malloc(%zu) failed", size);
            memset(blocks[i], 1, written);
        }
        for (uint32_t i = 0; i < count; i++)
            free(blocks[i]);
    }
}

static void churn(size_t size)
{
    churn_rounds(size, 64, ROUNDS);
}

/* What the caches of the Mid and L25 classes of blocks over SPARSE_MIN, or
 * of the others, hold beyond their first sizes. */
static uint64_t growth_bytes(bool sparse_classes)
{
    uint64_t bytes = 0;
    for (unsigned cls = HAK_FIRST_MID; cls < HAK_NUM_CLASSES; cls++)
        if ((hak_class_size[cls] > SPARSE_MIN) == sparse_classes)
            bytes += (uint64_t)(hak_tls.heap->limit[cls] - first_limit[cls]) * hak_class_size[cls];
    return bytes;
}

/* Enough rounds for a class of blocks over SPARSE_MIN to look at them again
 * (a block it reuses may have been written whole by another class). */
enum { SPARSE_ROUNDS = 40 };
/* What the caches of blocks over 64 KiB may grow by in all. */
#define SPARSE_BOUND ((uint64_t)32 * MiB)

static void check_grows(size_t size)
{
    unsigned cls = hak_class_of(size);
    char name[4];
    hak_class_name(cls, name);
    churn_rounds(size, 64, size > SPARSE_MIN ? SPARSE_ROUNDS : ROUNDS);
    uint32_t limit = hak_tls.heap->limit[cls];
    CHECK(limit > first_limit[cls], "%s: the cache stayed at its first %u blocks", name, limit);
    CHECK((uint64_t)limit * hak_class_size[cls] <= 4 * MiB,
          "%s: the cache grew to %u blocks of %u B, past 4 MiB", name, limit, hak_class_size[cls]);
    printf("  %-4s %6u B: %u blocks at first, %u after the churn\n", name, hak_class_size[cls],
           first_limit[cls], limit);
}

/* Mallocs and frees count 64 B blocks, more than the biggest cache holds,
 * with a malloc and free of a 3000 B block every 256 of them. */
static void churn_small(void)
{
    static void *blocks[40000]; /* past the 32768 a class of 64 B caches at most */
    uint32_t count = sizeof(blocks) / sizeof(blocks[0]);
    for (int phase = 0; phase < 2; phase++) {
        for (uint32_t i = 0; i < count; i++) {
            if (phase == 0) {
                blocks[i] = malloc(64);
                if (!blocks[i])
                    hard_error("malloc(64) failed");
            } else {
                free(blocks[i]);
            }
            if (i % 256 == 0) {
                void *volatile busy = malloc(3000);
                free(busy);
            }
        }
    }
}

static void check_idle_released(void)
{
    unsigned idle = hak_class_of(9000), busy = hak_class_of(3000), churned = hak_class_of(64);
    CHECK(hak_tls.head[idle] != HAK_LIST_END, "9000 B: the churn left no block in the cache");
    CHECK(hak_tls.heap->limit[idle] > first_limit[idle], "9000 B: the cache did not grow");
    hak_options.decay_ms = 20;
    uint64_t start = hak_os_now_ms();
    /* Two looks 20 ms apart at least, however slow the machine. */
    while (hak_tls.head[idle] != HAK_LIST_END && hak_os_now_ms() - start < 10000) {
        churn_small();
        unit_sleep_ms(1);
    }
    CHECK(hak_tls.head[idle] == HAK_LIST_END, "9000 B: the idle cache kept its blocks");
    CHECK(hak_tls.heap->limit[idle] == first_limit[idle],
          "9000 B: the idle cache stayed at %u blocks, not its first %u", hak_tls.heap->limit[idle],
          first_limit[idle]);
    CHECK(hak_tls.heap->cur[idle] == &hak_empty_slab,
          "9000 B: the idle class kept its current slab, all of whose blocks were free");
    CHECK(hak_tls.head[busy] != HAK_LIST_END, "3000 B: a class malloc kept using lost its cache");
    CHECK(hak_tls.head[churned] != HAK_LIST_END, "64 B: the churned class lost its cache");

    /* The spans the released blocks emptied age out of the HotSpanBox,
     * where no span is put or taken meanwhile. */
    uint64_t spans = 0;
    start = hak_os_now_ms();
    while (hak_hot_span_retained(hak_tls.heap->node, &spans) && hak_os_now_ms() - start < 10000) {
        churn_small();
        unit_sleep_ms(1);
        spans = 0;
    }
    CHECK(hak_hot_span_retained(hak_tls.heap->node, &spans) == 0,
          "the HotSpanBox kept %llu spans idle for 10 s", (unsigned long long)spans);
}

/* Classes of blocks up to 64 KiB, 4 MiB each at most, 28 MiB in all. */
static const size_t dense_sizes[] = {20000, 30000, 14000, 24000, 50000, 60000, 12000};

static void churn_dense_classes(void)
{
    for (size_t i = 0; i < sizeof(dense_sizes) / sizeof(dense_sizes[0]); i++)
        churn(dense_sizes[i]);
}

/* What the caches of the classes over SPARSE_MIN, or of the others, grew
 * by: within bound, and near it, since a doubling adds 2 MiB at most (4 MiB
 * for a class): the bound stopped them, not the churn. */
static void check_growth_bound(bool sparse_classes, uint64_t bound)
{
    const char *which = sparse_classes ? "over 64 KiB" : "up to 64 KiB";
    uint64_t grown = growth_bytes(sparse_classes);
    CHECK(grown <= bound, "the caches of blocks %s grew by %llu bytes, past %llu", which,
          (unsigned long long)grown, (unsigned long long)bound);
    CHECK(grown > bound - 2 * MiB, "the caches of blocks %s grew by only %llu bytes, short of %llu",
          which, (unsigned long long)grown, (unsigned long long)bound);
    printf("  classes %s: %llu bytes of growth\n", which, (unsigned long long)grown);
}

/* Threads with a heap of their own each, alive until release_parked. */
enum { MAX_PARKED = 32 };
static pthread_t parked_threads[MAX_PARKED];
static int parked_count;
static pthread_barrier_t parked;

static void *park(void *arg)
{
    (void)arg;
    void *volatile block = malloc(64);
    free(block);
    pthread_barrier_wait(&parked);
    pthread_barrier_wait(&parked);
    return NULL;
}

static void park_threads(int count)
{
    if (count > MAX_PARKED)
        hard_error("%d threads to park, past %d", count, MAX_PARKED);
    if (pthread_barrier_init(&parked, NULL, (unsigned)count + 1) != 0)
        hard_error("pthread_barrier_init failed");
    parked_count = count;
    for (int i = 0; i < count; i++)
        unit_thread_start(&parked_threads[i], park, NULL);
    pthread_barrier_wait(&parked); /* every one has its heap */
}

static void release_parked(void)
{
    pthread_barrier_wait(&parked);
    for (int i = 0; i < parked_count; i++)
        unit_thread_join(parked_threads[i]);
    pthread_barrier_destroy(&parked);
}

/* A thread of two, main's the other, grows its caches of blocks up to
 * 64 KiB by 16 MiB; once 14 more live, its share of 64 MiB is 4 MiB, and
 * each class that flushes shrinks by what the thread holds past it. */
static void *shrinking_body(void *arg)
{
    (void)arg;
    hak_options.decay_ms = UINT64_MAX;
    churn_dense_classes();
    check_growth_bound(false, 16 * MiB);
    park_threads(14);
    churn_dense_classes();
    check_growth_bound(false, 4 * MiB);
    release_parked();
    return NULL;
}

/* A thread among others parked, besides main's: its caches of blocks up
 * to 64 KiB grow by *arg bytes, its share. */
static void *crowded_body(void *arg)
{
    uint64_t bound = *(const uint64_t *)arg;
    hak_options.decay_ms = UINT64_MAX;
    churn_dense_classes();
    check_growth_bound(false, bound);
    return NULL;
}

/* With 8 live threads a thread's share is 8 MiB; with 34 it would be
 * under the floor of 4 MiB. */
static void check_crowded_share(int parked_more, uint64_t bound)
{
    park_threads(parked_more);
    unit_thread_run(crowded_body, &bound);
    release_parked();
}

static void *body(void *arg)
{
    (void)arg;
    /* No cache may idle out before check_idle_released, however slow the
     * machine. */
    hak_options.decay_ms = UINT64_MAX;
    /* Huge pages would make blocks the program never wrote resident. */
    hak_options.huge_pages = HAK_HUGE_OFF;
    /* The thread's heap, with every cache at its first size. */
    void *volatile first = malloc(1);
    free(first);
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
        first_limit[cls] = hak_tls.heap->limit[cls];

    /* Blocks over 64 KiB, of which the program writes 64 B: their caches
     * grow, within SPARSE_BOUND for all of them, which these classes would
     * pass unbounded. */
    static const size_t sparse_sizes[] = {100000, 300000, 1000000, 450000, 600000, 800000,
                                          700000, 500000, 380000,  250000, 120000, 160000};
    uint64_t unbounded = 0;
    for (size_t i = 0; i < sizeof(sparse_sizes) / sizeof(sparse_sizes[0]); i++) {
        unsigned cls = hak_class_of(sparse_sizes[i]);
        unbounded +=
            (uint64_t)(4 * MiB / hak_class_size[cls] - first_limit[cls]) * hak_class_size[cls];
        if (i < 3)
            check_grows(sparse_sizes[i]);
        else
            churn_rounds(sparse_sizes[i], 64, SPARSE_ROUNDS);
    }
    if (unbounded <= SPARSE_BOUND)
        hard_error("the classes churned would not pass %llu bytes unbounded",
                   (unsigned long long)SPARSE_BOUND);
    check_growth_bound(true, SPARSE_BOUND);

    /* The classes up to 64 KiB grow within a bound of their own, 16 MiB
     * for a thread of two (this one and main's), which these classes would
     * pass unbounded: the first classes take most of it, the others share
     * the rest. */
    check_grows(40000);
    check_grows(9000);
    churn_dense_classes();
    check_growth_bound(false, 16 * MiB);

    /* Written whole, their caches go back to their first sizes; another
     * class written whole from the start never grows.  Rounds enough for
     * the cache to look at its blocks again. */
    unsigned sparse = hak_class_of(100000), dense = hak_class_of(200000);
    churn_rounds(100000, 100000, SPARSE_ROUNDS);
    CHECK(hak_tls.heap->limit[sparse] == first_limit[sparse],
          "100000 B written whole: the cache stayed at %u blocks, not its first %u",
          hak_tls.heap->limit[sparse], first_limit[sparse]);
    churn_rounds(200000, 200000, ROUNDS);
    CHECK(hak_tls.heap->limit[dense] == first_limit[dense],
          "200000 B written whole: the cache grew from %u to %u blocks", first_limit[dense],
          hak_tls.heap->limit[dense]);

    check_idle_released();
    return NULL;
}

/* 64 B blocks held until the end: fresh slabs, a quarter MiB a round
 * (GROWN_ROUND_PAGES); GROWTH_UNDER_MIN_ROUNDS of them take fewer faults
 * than any decay below makes idle. */
enum { GROWN_ROUNDS = 128, GROWN_BLOCKS = 4096, GROWTH_UNDER_MIN_ROUNDS = 2 };
#define GROWN_ROUND_PAGES (GROWN_BLOCKS * 64 / HAK_PAGE_SIZE)
static void *grown[GROWN_ROUNDS][GROWN_BLOCKS];
static unsigned grown_rounds;

/* The blocks of grow_small's rounds freed, and the rounds counted anew. */
static void free_grown(void)
{
    for (unsigned r = 0; r < grown_rounds; r++)
        for (unsigned i = 0; i < GROWN_BLOCKS; i++)
            free(grown[r][i]);
    grown_rounds = 0;
}

/* What the idle rule counts as the thread's growth: its minor faults and
 * the pages of the slabs and spans its heap took (release_idle_for_growth). */
static uint64_t thread_growth(void)
{
    return hak_os_thread_minor_faults() + hak_tls.heap->taken_pages;
}

/* Rounds of 64 B blocks, up to rounds more, or until the cache of class
 * until (if below HAK_NUM_CLASSES) is empty, each after a malloc and free
 * of busy bytes (if not 0): the heap reads the clock at every
 * IDLE_LOOK_EVENTS refills, and looks for idle classes at the next fresh
 * slab after. */
static void grow_small(unsigned rounds, unsigned until, size_t busy)
{
    for (unsigned r = 0; r < rounds && grown_rounds < GROWN_ROUNDS; r++) {
        if (busy)
            free(unit_malloc(busy));
        for (unsigned i = 0; i < GROWN_BLOCKS; i++)
            if (!(grown[grown_rounds][i] = unit_malloc(64)))
                hard_error("malloc(64) failed");
        grown_rounds++;
        if (until < HAK_NUM_CLASSES && hak_tls.head[until] == HAK_LIST_END)
            return;
    }
}

static void *growth_body(void *arg)
{
    (void)arg;
    enum { STALE_MS = 200, WOKEN_STALE_MS = 1000, NEVER_STALE_MS = 3600 * 1000 };
    /* A decay whose sixty-fourth (640 ms) no step below lasts, where the
     * thread grows by its idle growth (2048 pages) in 16 rounds of
     * grow_small (64 pages taken and 64 faulted a round). */
    enum { GROWTH_DECAY_MS = 2048 * HAK_IDLE_GROWTH_DECAY_MS };
    enum { WOKEN_SIZE = 100000, WOKEN_BLOCKS = 40 };
    uint64_t decay_ms = hak_options.decay_ms;
    hak_options.huge_pages = HAK_HUGE_OFF;

    /* A class used after the heap sat idle is young, though the heap's
     * last reading of the clock before it is old: blocks written whole
     * (their cache keeps its first size) whose frees end in a flush.  Forty
     * of them, not churn_rounds' hundred and three: with those the check
     * passed on the code that stamped a class with that old reading
     * (ccd67ed). */
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * (uint64_t)WOKEN_STALE_MS;
    free(unit_malloc(64));
    unit_sleep_ms(1200);
    static void *woken_blocks[WOKEN_BLOCKS];
    for (unsigned i = 0; i < WOKEN_BLOCKS; i++) {
        if (!(woken_blocks[i] = unit_malloc(WOKEN_SIZE)))
            hard_error("malloc(%d) failed", WOKEN_SIZE);
        memset(woken_blocks[i], 1, WOKEN_SIZE);
    }
    for (unsigned i = 0; i < WOKEN_BLOCKS; i++)
        free(woken_blocks[i]);
    unsigned woken = hak_class_of(WOKEN_SIZE);
    CHECK(hak_tls.head[woken] != HAK_LIST_END, "%d B: the frees left no block in the cache",
          WOKEN_SIZE);
    grow_small(GROWTH_UNDER_MIN_ROUNDS, HAK_NUM_CLASSES, 0);
    CHECK(hak_tls.head[woken] != HAK_LIST_END,
          "%d B: a class used just now lost its cache as if idle since the heap's last reading",
          WOKEN_SIZE);

    hak_options.decay_ms = UINT64_MAX; /* none idle meanwhile */
    unsigned idle = hak_class_of(12000), busy = hak_class_of(9000);
    churn(12000);
    churn(9000);
    CHECK(hak_tls.head[idle] != HAK_LIST_END && hak_tls.heap->limit[busy] > first_limit[busy],
          "the churned classes left no block in their caches, or did not grow them");
    /* However slow the machine, idle for less than a sixty-fourth, and the
     * thread grew by less than the decay's idle growth meanwhile. */
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * (uint64_t)NEVER_STALE_MS;
    grow_small(GROWTH_UNDER_MIN_ROUNDS, HAK_NUM_CLASSES, 0);
    CHECK(hak_tls.head[idle] != HAK_LIST_END,
          "12000 B: a cache idle for less than a sixty-fourth of the decay emptied");

    /* Where no pages can move (a process with locked memory, here, or a
     * kernel before 5.7), growth tells nothing: the spans a release empties
     * could not lend theirs to the SuperSlabs the growth takes.  The look
     * at the locked memory stands for a second; nothing idles by the clock
     * meanwhile. */
    uint64_t idle_growth = GROWTH_DECAY_MS / HAK_IDLE_GROWTH_DECAY_MS;
    static char locked_page[4096] __attribute__((aligned(4096)));
    if (mlock(locked_page, sizeof(locked_page)) == 0) {
        hak_options.decay_ms = NEVER_STALE_MS;
        unit_sleep_ms(1100);
        hak_options.decay_ms = GROWTH_DECAY_MS;
        free(unit_malloc(12000));
        uint64_t growth_before = thread_growth();
        grow_small(idle_growth / GROWN_ROUND_PAGES + 8, HAK_NUM_CLASSES, 9000);
        uint64_t grown_by = thread_growth() - growth_before;
        CHECK(grown_by >= idle_growth && hak_tls.head[idle] != HAK_LIST_END,
              "12000 B: with locked memory, a cache went back as the thread grew by %llu pages",
              (unsigned long long)grown_by);
        munlock(locked_page, sizeof(locked_page));
        hak_options.decay_ms = NEVER_STALE_MS;
        unit_sleep_ms(1100);
    } else {
        printf("mlock refused (%s): the locked-memory step is skipped\n", strerror(errno));
    }

    /* Idle while the thread grows by its idle growth, young by the clock,
     * beside a class malloc keeps using: gone at a look after it (once a
     * millisecond at most), not before. */
    hak_options.decay_ms = GROWTH_DECAY_MS;
    free(unit_malloc(12000)); /* its last malloc, before the heap's next look */
    uint64_t growth_before = thread_growth();
    grow_small(GROWN_ROUNDS, idle, 9000);
    uint64_t grown_by = thread_growth() - growth_before;
    CHECK(hak_tls.head[idle] == HAK_LIST_END,
          "12000 B: a cache idle while the thread grew by %llu pages kept its blocks",
          (unsigned long long)grown_by);
    CHECK(grown_by >= idle_growth && grown_by < 2 * idle_growth,
          "12000 B: a cache went back after the thread grew by %llu pages, not %llu",
          (unsigned long long)grown_by, (unsigned long long)idle_growth);
    CHECK(hak_tls.heap->limit[busy] > first_limit[busy],
          "9000 B: a class malloc kept using lost its grown cache to the thread's growth");

    /* Growth that faults nothing counts as well: the slabs of spare
     * SuperSlabs, resident already, which a program that alternates its
     * phases with no pause takes from its last phase of those sizes while
     * its other caches sit idle. */
    hak_options.decay_ms = UINT64_MAX;
    free_grown(); /* their SuperSlabs spares, resident */
    churn(12000);
    hak_options.decay_ms = GROWTH_DECAY_MS;
    free(unit_malloc(12000));
    uint64_t faults_before = hak_os_thread_minor_faults();
    growth_before = thread_growth();
    /* A round with no fault takes some tens of microseconds: a millisecond
     * between them, for a look at each (GROWTH_LOOK_US). */
    while (grown_rounds < GROWN_ROUNDS && hak_tls.head[idle] != HAK_LIST_END) {
        grow_small(1, idle, 9000);
        unit_sleep_ms(1);
    }
    uint64_t faulted = hak_os_thread_minor_faults() - faults_before;
    grown_by = thread_growth() - growth_before;
    CHECK(hak_tls.head[idle] == HAK_LIST_END && faulted < idle_growth / 4,
          "12000 B: a cache idle while the thread took %llu pages of slabs, faulting %llu, "
          "kept its blocks, or the slabs were not the spares'",
          (unsigned long long)grown_by, (unsigned long long)faulted);

    /* Idle past a sixty-fourth of the decay: gone at the next look, the
     * thread's faults short of the decay's idle faults. */
    hak_options.decay_ms = UINT64_MAX;
    churn(12000);
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * STALE_MS;
    unit_sleep_ms(2 * STALE_MS);
    hak_hot_span_release_all(hak_tls.heap->node); /* the spans of the steps before */
    growth_before = thread_growth();
    grow_small(GROWN_ROUNDS, idle, 9000);
    grown_by = thread_growth() - growth_before;
    CHECK(hak_tls.head[idle] == HAK_LIST_END, "12000 B: the idle cache kept its blocks");
    CHECK(grown_by < STALE_MS * HAK_HOT_SPAN_STALE_FRACTION / HAK_IDLE_GROWTH_DECAY_MS,
          "12000 B: a cache idle past a sixty-fourth of the decay went back only after the "
          "thread grew by %llu pages",
          (unsigned long long)grown_by);
    CHECK(hak_tls.heap->limit[idle] == first_limit[idle],
          "12000 B: the idle cache stayed at %u blocks, not its first %u",
          hak_tls.heap->limit[idle], first_limit[idle]);
    /* A release would have brought it back to its first size. */
    CHECK(hak_tls.heap->limit[busy] > first_limit[busy],
          "9000 B: a class malloc kept using lost its grown cache");
    /* Its spans went to the HotSpanBox as stale ones, the first to go to
     * a SuperSlab or back to the kernel. */
    uint64_t spans = 0;
    size_t hot = hak_hot_span_retained(hak_tls.heap->node, &spans);
    hak_hot_span_release_stale(hak_tls.heap->node);
    uint64_t young_spans = 0;
    size_t young = hak_hot_span_retained(hak_tls.heap->node, &young_spans);
    CHECK(young == 0,
          "the idle class's spans went to the HotSpanBox as young ones: %llu spans, %zu bytes "
          "(of %zu) stayed past the stale ones",
          (unsigned long long)young_spans, young, hot);

    /* An L25 calloc that takes a span of its own looks for idle classes as
     * a refill does: within 1.2 s of the churn, short of the decay (6.4 s),
     * after which the idle look of every slow path would release the class
     * anyway. */
    enum { CALLOC_STALE_MS = 100, CALLOC_SIZE = 40000, MAX_CALLOCS = 256 };
    hak_options.decay_ms = UINT64_MAX;
    churn(9000);
    CHECK(hak_tls.head[busy] != HAK_LIST_END, "9000 B: the churn left no block in the cache");
    hak_options.decay_ms = HAK_HOT_SPAN_STALE_FRACTION * CALLOC_STALE_MS;
    unit_sleep_ms(2 * CALLOC_STALE_MS);
    static void *zeroed[MAX_CALLOCS];
    unsigned callocs = 0;
    uint64_t start = hak_os_now_ms();
    while (hak_tls.head[busy] != HAK_LIST_END && callocs < MAX_CALLOCS &&
           hak_os_now_ms() - start < 10 * CALLOC_STALE_MS) {
        if (!(zeroed[callocs++] = calloc(1, CALLOC_SIZE)))
            hard_error("calloc(1, %d) failed", CALLOC_SIZE);
        unit_sleep_ms(1);
    }
    CHECK(hak_tls.head[busy] == HAK_LIST_END,
          "9000 B: an idle cache kept its blocks through %u L25 callocs", callocs);
    for (unsigned i = 0; i < callocs; i++)
        free(zeroed[i]);

    /* With no decay at all (0 ms: no fault to wait for), a class that
     * malloc'd since the last look keeps its cache at the next: the
     * first malloc of a class this thread never used takes a slab, and
     * with it a look. */
    hak_options.decay_ms = UINT64_MAX;
    churn(12000);
    hak_options.decay_ms = 0;
    unit_sleep_ms(2); /* past the last look's millisecond */
    free(unit_malloc(12000));
    free(unit_malloc(700));
    CHECK(hak_tls.head[idle] != HAK_LIST_END,
          "decay 0: 12000 B, malloc'd since the last look, lost its cache at the next");
    free_grown();
    hak_options.decay_ms = decay_ms;
    return NULL;
}

int main(void)
{
    unit_watchdog();
    /* Huge pages, which a system may give every big mapping, would make
     * blocks the program never wrote resident (hakmem's own advice is off,
     * in body). */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        hard_error("prctl(PR_SET_THP_DISABLE) failed");
    /* main's heap, which the shares below count. */
    void *volatile block = malloc(64);
    free(block);
    /* A thread of its own: a fresh heap, whatever the start-up allocated,
     * and for each thread after it too, none taken over from the one
     * before (test_parked_heap): the tests count each class's first
     * malloc, slab and look for idle classes from a new heap's. */
    hak_options.parked_heaps = 0;
    unit_thread_run(body, NULL);
    unit_thread_run(shrinking_body, NULL);
    unit_thread_run(growth_body, NULL);
    check_crowded_share(6, 8 * MiB);
    check_crowded_share(32, 4 * MiB);
    return test_result("test_cache_growth");
}

/* Frees of small blocks that another thread's heap owns (struct
 * hak_thread, page_tag): the freeing thread does not take them into its
 * cache, where its next malloc of the class would hand it a block whose
 * cache line the owner's live blocks share (Hoard's cache-scratch); they go
 * home, a batch at a time, at the thread's next refill of the class, at
 * the look for idle classes, or when the thread exits.  A slab a thread
 * adopts at a refill is its own: its pages take the adopter's tag, and the
 * adopter's frees of its blocks go into its cache. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arena/superslab.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "options.h"
#include "stats.h"
#include "unit.h"

#define SIZE 16 /* C0: four blocks to a cache line */
#define IN_A_ROW 8
#define IDLE_FREES 3
#define IDLE_ROUNDS 400
#define IDLE_KEPT 1024

/* The owner's blocks: [0] stays live, then what each test frees.  As many
 * go home at once as a flush of the class sends, half the cache's first
 * capacity (HAKMEM_SMALL_CACHE). */
static void **owned;
static unsigned owned_count;
static unsigned batch;

static uint64_t remote_frees(void)
{
    return unit_class_stats(hak_class_of(SIZE)).remote_frees;
}

static bool same_line(const void *a, const void *b)
{
    return (uintptr_t)a / HAK_CACHE_LINE == (uintptr_t)b / HAK_CACHE_LINE;
}

struct freer {
    unsigned first;  /* the owner's blocks to free, from first */
    unsigned frees;  /* how many */
    bool idle;       /* then run past the decay without a malloc of the class */
    void *taken[4];  /* what the freer's mallocs of the class gave after */
    uint64_t before; /* remote frees counted when the freer started */
    uint64_t sent;   /* and after its frees, before it exits */
};

static void *free_then_take(void *arg)
{
    struct freer *freer = arg;
    /* A heap, and no block of the class in its cache: the class's frees
     * and later mallocs are the test's alone. */
    void *own = unit_malloc(128);
    if (!own)
        hard_error("malloc(128) in the freeing thread failed");
    freer->before = remote_frees();
    for (unsigned i = freer->first; i < freer->first + freer->frees; i++)
        free(owned[i]);
    /* Refills of another class, blocks kept (a cache that only refills
     * never grows past them), each 64th of which looks for idle classes:
     * one that has served no malloc over a decay period sends its waiting
     * blocks home. */
    static void *kept[IDLE_ROUNDS][IDLE_KEPT];
    unsigned rounds = 0;
    while (freer->idle && rounds < IDLE_ROUNDS && remote_frees() - freer->before < freer->frees) {
        for (unsigned i = 0; i < IDLE_KEPT; i++)
            if (!(kept[rounds][i] = unit_malloc(64)))
                hard_error("malloc(64) failed");
        rounds++;
        usleep(1000);
    }
    freer->sent = remote_frees();
    for (unsigned r = 0; r < rounds; r++)
        for (unsigned i = 0; i < IDLE_KEPT; i++)
            free(kept[r][i]);
    for (unsigned i = 0; i < 4; i++)
        freer->taken[i] = unit_malloc(SIZE);
    for (unsigned i = 0; i < 4; i++)
        free(freer->taken[i]);
    free(own);
    return NULL;
}

/* Fewer frees than a batch: none leaves before the thread exits, and the
 * freer's mallocs take none of them, nor any block of a line the owner
 * still uses. */
static void test_not_taken_back(void)
{
    struct freer freer = {.first = 1, .frees = 3};
    unit_thread_run(free_then_take, &freer);
    CHECK(freer.sent == freer.before, "%llu remote frees counted before a batch filled",
          (unsigned long long)(freer.sent - freer.before));
    for (unsigned i = 0; i < 4; i++) {
        for (unsigned k = 0; k < owned_count; k++) {
            bool freed = k >= freer.first && k < freer.first + freer.frees;
            CHECK(!freed || freer.taken[i] != owned[k],
                  "the freer's malloc %u took the block it freed, %p", i, owned[k]);
            CHECK(freed || !same_line(freer.taken[i], owned[k]),
                  "the freer's malloc %u gave %p, in the line of the owner's live %p", i,
                  freer.taken[i], owned[k]);
        }
    }
    CHECK(remote_frees() - freer.before == freer.frees, "the exit sent %llu of the %u blocks home",
          (unsigned long long)(remote_frees() - freer.before), freer.frees);
    for (unsigned i = freer.first; i < freer.first + freer.frees; i++)
        owned[i] = NULL;
}

/* A batch goes home as it fills, the rest at the exit. */
static void test_batch_goes_home(void)
{
    struct freer freer = {.first = 4, .frees = batch + 4};
    unit_thread_run(free_then_take, &freer);
    CHECK(freer.sent - freer.before == batch, "%llu of %u blocks went home before the exit, not %u",
          (unsigned long long)(freer.sent - freer.before), freer.frees, batch);
    CHECK(remote_frees() - freer.before == freer.frees, "%llu of %u blocks went home",
          (unsigned long long)(remote_frees() - freer.before), freer.frees);
    for (unsigned i = freer.first; i < freer.first + freer.frees; i++)
        owned[i] = NULL;
}

/* Fewer than a batch, of a class the thread then leaves idle: they go home
 * with the class's cache, at the look for idle classes, while the thread
 * lives. */
static void test_idle_goes_home(void)
{
    uint64_t decay_ms = hak_options.decay_ms;
    hak_options.decay_ms = 1;
    struct freer freer = {.first = batch + 8, .frees = IDLE_FREES, .idle = true};
    unit_thread_run(free_then_take, &freer);
    hak_options.decay_ms = decay_ms;
    CHECK(freer.sent - freer.before == IDLE_FREES,
          "%llu of %d blocks of an idle class went home before the exit",
          (unsigned long long)(freer.sent - freer.before), IDLE_FREES);
    for (unsigned i = freer.first; i < freer.first + freer.frees; i++)
        owned[i] = NULL;
}

/* ---- adoption ---- */

/* The exited thread's blocks: more than a batch, so that frees of them
 * send some home before the freeing thread exits. */
static unsigned exited_count;

static void *allocate_and_exit(void *arg)
{
    void **blocks = arg;
    for (unsigned i = 0; i < exited_count; i++)
        if (!(blocks[i] = unit_malloc(SIZE)))
            hard_error("malloc(%d) failed", SIZE);
    return NULL;
}

static void *adopt_and_free(void *arg)
{
    void **blocks = arg;
    /* The exited thread's slab, still in use, is the one to adopt: the
     * node's pool offers it before fresh memory. */
    void *first = unit_malloc(SIZE);
    free(blocks[3]);
    void *again = unit_malloc(SIZE);
    CHECK(again == blocks[3], "the adopter's free of its slab's block %p went elsewhere (%p again)",
          blocks[3], again);
    blocks[3] = again;
    free(first);
    return NULL;
}

/* The same where the thread, which allocates the class from a slab of its
 * own, frees a block of the exited thread's slab: the block waits to go
 * home until the thread's next refill of the class, which adopts the slab
 * on the way; the thread's frees of the slab's blocks then go into its
 * cache.  A thread that does not allocate the class leaves the slab to
 * another's refill. */
static pthread_barrier_t exited;

static void *free_then_adopt(void *arg)
{
    void **blocks = arg;
    void *own = unit_malloc(SIZE); /* before the other thread exits: a slab not its */
    pthread_barrier_wait(&exited);
    pthread_barrier_wait(&exited);
    uint64_t adopted = hak_stat_read(HAK_STAT_ADOPTED_SLABS);
    free(blocks[5]);
    CHECK(hak_stat_read(HAK_STAT_ADOPTED_SLABS) == adopted, "a free adopted a slab");
    /* The cache's blocks of the thread's own slab, then a refill. */
    static void *taken[HAK_CACHE_LIMIT_MAX + 1];
    unsigned count = 0;
    unsigned cls = hak_class_of(SIZE);
    uint64_t refills = hak_tls.heap->stats[cls].refills;
    while (count <= HAK_CACHE_LIMIT_MAX && hak_stat_read(HAK_STAT_ADOPTED_SLABS) == adopted)
        taken[count++] = unit_malloc(SIZE);
    refills = hak_tls.heap->stats[cls].refills - refills;
    CHECK(hak_stat_read(HAK_STAT_ADOPTED_SLABS) == adopted + 1 && refills == 1,
          "the refill after a free of an exited thread's block adopted %llu slabs, %llu refills "
          "and %u mallocs on",
          (unsigned long long)(hak_stat_read(HAK_STAT_ADOPTED_SLABS) - adopted),
          (unsigned long long)refills, count);
    blocks[5] = NULL; /* back in its slab, now this thread's */
    free(blocks[6]);
    void *again = unit_malloc(SIZE);
    CHECK(again == blocks[6], "the adopter's free of its slab's block %p went elsewhere (%p)",
          blocks[6], again);
    blocks[6] = again;
    while (count)
        free(taken[--count]);
    free(own);
    return NULL;
}

static void *free_without_adopting(void *arg)
{
    void **blocks = arg;
    void *other = unit_malloc(4 * SIZE); /* a heap, and no block of the class */
    pthread_barrier_wait(&exited);
    pthread_barrier_wait(&exited);
    uint64_t adopted = hak_stat_read(HAK_STAT_ADOPTED_SLABS);
    uint64_t sent = remote_frees();
    for (unsigned i = 0; i < exited_count; i++)
        free(blocks[i]);
    CHECK(remote_frees() - sent >= batch, "%llu of %u blocks went home before the exit",
          (unsigned long long)(remote_frees() - sent), exited_count);
    CHECK(hak_stat_read(HAK_STAT_ADOPTED_SLABS) == adopted,
          "a thread that does not allocate the class adopted a slab at its frees");
    for (unsigned i = 0; i < exited_count; i++)
        blocks[i] = NULL;
    free(other);
    return NULL;
}

/* meets: the adopter makes its heap while the first thread lives, and
 * frees once it has exited (the barrier, twice). */
static void test_adopted_slab(void *(*adopter)(void *), bool meets)
{
    exited_count = batch + 8;
    void **blocks = calloc(exited_count, sizeof(void *));
    if (!blocks)
        hard_error("calloc failed");
    pthread_t thread;
    pthread_barrier_init(&exited, NULL, 2);
    if (meets) {
        unit_thread_start(&thread, adopter, blocks);
        pthread_barrier_wait(&exited);
    }
    unit_thread_run(allocate_and_exit, blocks);
    if (meets)
        pthread_barrier_wait(&exited);
    else
        unit_thread_start(&thread, adopter, blocks);
    unit_thread_join(thread);
    pthread_barrier_destroy(&exited);
    for (unsigned i = 0; i < exited_count; i++)
        free(blocks[i]);
    free(blocks);
}

/* The same under an address-space limit, which leaves SuperSlabs out of
 * the region: free finds them through the page map (hak_heap_free). */
#define LIMITED "HAKMEM_TEST_AS_LIMITED"

static int run_limited(char **argv)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        hard_error("fork failed");
    if (pid == 0) {
        struct rlimit limit = {8ul << 30, 8ul << 30};
        if (setrlimit(RLIMIT_AS, &limit) != 0 || setenv(LIMITED, "1", 1) != 0)
            _exit(EXIT_HARD_ERROR);
        execv("/proc/self/exe", argv);
        _exit(EXIT_HARD_ERROR);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        hard_error("the run under an address-space limit did not exit");
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    (void)argc;
    unit_watchdog();
    void *first = unit_malloc(SIZE); /* hak_options read */
    batch = (hak_options.small_cache + 1) / 2;
    owned_count = batch + 8 + IDLE_FREES + 1;
    owned = calloc(owned_count, sizeof(void *));
    if (!first || !owned)
        hard_error("malloc failed");
    owned[0] = first;
    for (unsigned i = 1; i < owned_count; i++)
        if (!(owned[i] = unit_malloc(SIZE)))
            hard_error("malloc(%d) failed", SIZE);
    for (unsigned i = 1; i < IN_A_ROW; i++)
        if ((char *)owned[i] != (char *)owned[i - 1] + SIZE)
            hard_error("the owner's blocks are not in a row: %p after %p", owned[i], owned[i - 1]);
    test_not_taken_back();
    test_batch_goes_home();
    test_idle_goes_home();
    /* An exited thread's slabs are abandoned, for adoption, where its heap
     * is not parked for the next thread (test_parked_heap): the threads of
     * the tests above parked theirs, which malloc_trim makes leave. */
    hak_options.parked_heaps = 0;
    malloc_trim(0);
    test_adopted_slab(adopt_and_free, false);
    test_adopted_slab(free_then_adopt, true);
    test_adopted_slab(free_without_adopting, true);
    for (unsigned i = 0; i < owned_count; i++)
        free(owned[i]);
    free(owned);
    bool limited = getenv(LIMITED) != NULL;
    CHECK(hak_superslab_region_exists() != limited, "the SuperSlab region %s",
          limited ? "exists under the limit" : "does not exist");
    int result =
        test_result(limited ? "test_foreign_free (address-space limit)" : "test_foreign_free");
    if (limited || result != EXIT_SUCCESS)
        return result;
    return run_limited(argv);
}

/* Frees of small blocks that another thread's heap owns (struct
 * hak_thread, page_tag): the freeing thread does not take them into its
 * cache, where its next malloc of the class would hand it a block whose
 * cache line the owner's live blocks share (Hoard's cache-scratch); they go
 * home, a batch at a time or when the thread exits.  A slab a thread
 * adopts is its own: its pages take the adopter's tag, and the adopter's
 * frees of its blocks go into its cache. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "arena/superslab.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "unit.h"

#define SIZE 16  /* C0: four blocks to a cache line */
#define OWNED 72 /* the owner's blocks, in a row: a batch and more */
#define BATCH 64 /* FOREIGN_BATCH */

static uint64_t remote_frees(void)
{
    struct hak_class_stats totals[HAK_NUM_CLASSES];
    memset(totals, 0, sizeof(totals));
    hak_heap_sum_stats(totals);
    return totals[hak_class_of(SIZE)].remote_frees;
}

static bool same_line(const void *a, const void *b)
{
    return (uintptr_t)a / HAK_CACHE_LINE == (uintptr_t)b / HAK_CACHE_LINE;
}

struct freer {
    void **owned;    /* the owner's blocks, to free */
    unsigned frees;  /* how many of them, from the second on */
    void *taken[4];  /* what the freer's mallocs of the class gave after */
    uint64_t before; /* remote frees counted when the freer started */
    uint64_t batch;  /* and after its frees, before it exits */
};

static void *free_then_take(void *arg)
{
    struct freer *freer = arg;
    void *own = unit_malloc(SIZE); /* a heap and a slab of the class */
    if (!own)
        hard_error("malloc(%d) in the freeing thread failed", SIZE);
    freer->before = remote_frees();
    for (unsigned i = 1; i <= freer->frees; i++)
        free(freer->owned[i]);
    freer->batch = remote_frees();
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
static void test_not_taken_back(void **owned)
{
    struct freer freer = {.owned = owned, .frees = 3};
    pthread_t thread;
    unit_thread_start(&thread, free_then_take, &freer);
    unit_thread_join(thread);
    CHECK(freer.batch == freer.before, "%llu remote frees counted before a batch filled",
          (unsigned long long)(freer.batch - freer.before));
    for (unsigned i = 0; i < 4; i++) {
        for (unsigned k = 0; k < OWNED; k++) {
            if (!owned[k])
                continue;
            CHECK(freer.taken[i] != owned[k], "the freer's malloc %u took the block it freed, %p",
                  i, owned[k]);
            if (k > freer.frees)
                CHECK(!same_line(freer.taken[i], owned[k]),
                      "the freer's malloc %u gave %p, in the line of the owner's live %p", i,
                      freer.taken[i], owned[k]);
        }
    }
    CHECK(remote_frees() - freer.before == freer.frees, "the exit sent %llu of the %u blocks home",
          (unsigned long long)(remote_frees() - freer.before), freer.frees);
    for (unsigned i = 1; i <= freer.frees; i++)
        owned[i] = NULL;
}

/* A batch's worth goes home at once, the rest at the exit. */
static void test_batch_goes_home(void **owned)
{
    void **rest = owned + 4; /* past those test_not_taken_back freed */
    struct freer freer = {.owned = rest - 1, .frees = OWNED - 4};
    pthread_t thread;
    unit_thread_start(&thread, free_then_take, &freer);
    unit_thread_join(thread);
    CHECK(freer.batch - freer.before == BATCH, "%llu of %d blocks went home before the exit",
          (unsigned long long)(freer.batch - freer.before), OWNED - 4);
    CHECK(remote_frees() - freer.before == OWNED - 4, "%llu of %d blocks went home",
          (unsigned long long)(remote_frees() - freer.before), OWNED - 4);
    for (unsigned i = 0; i < OWNED - 4; i++)
        rest[i] = NULL;
}

/* ---- adoption ---- */

static void *allocate_and_exit(void *arg)
{
    void **blocks = arg;
    for (unsigned i = 0; i < 8; i++)
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

static void test_adopted_slab(void)
{
    void *blocks[8];
    pthread_t thread;
    unit_thread_start(&thread, allocate_and_exit, blocks);
    unit_thread_join(thread);
    unit_thread_start(&thread, adopt_and_free, blocks);
    unit_thread_join(thread);
    for (unsigned i = 0; i < 8; i++)
        free(blocks[i]);
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
    void *owned[OWNED];
    for (unsigned i = 0; i < OWNED; i++)
        if (!(owned[i] = unit_malloc(SIZE)))
            hard_error("malloc(%d) failed", SIZE);
    for (unsigned i = 1; i < OWNED; i++)
        if ((char *)owned[i] != (char *)owned[i - 1] + SIZE)
            hard_error("the owner's blocks are not in a row: %p after %p", owned[i], owned[i - 1]);
    test_not_taken_back(owned);
    test_batch_goes_home(owned);
    test_adopted_slab();
    for (unsigned i = 0; i < OWNED; i++)
        free(owned[i]);
    bool limited = getenv(LIMITED) != NULL;
    CHECK(hak_superslab_region_exists() != limited, "the SuperSlab region %s",
          limited ? "exists under the limit" : "does not exist");
    int result =
        test_result(limited ? "test_foreign_free (address-space limit)" : "test_foreign_free");
    if (limited || result != EXIT_SUCCESS)
        return result;
    return run_limited(argv);
}

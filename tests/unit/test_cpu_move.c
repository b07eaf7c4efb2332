/* A thread the kernel moved to another CPU leaves malloc's fast path at
 * its next malloc (thread_heap.h): the refill records the CPU and, the node
 * being the same, hands out the block the cache would have, keeping the
 * cache.  The test plays the kernel through a CPU word of its own.
 *
 * fork's prepare handler sends the other threads through the same door:
 * while it holds hakmem's locks, another thread's next malloc waits for the
 * fork to end, but not for good (HAK_FORK_WAIT_MS at most), and the forking
 * thread's own mallocs, a refill among them, go on.  The test plays fork
 * through its handlers' calls. */
#include <pthread.h>
#include <stdatomic.h>

#include "block/size_class.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "os.h"
#include "unit.h"

enum { SIZE = 64 };

/* hak_malloc rather than malloc: the compiler assumes that malloc leaves
 * the test's globals alone, and hak_tls is one. */
static void *checked_malloc(void)
{
    void *block = hak_malloc(SIZE);
    if (!block)
        hard_error("malloc(%d) failed", SIZE);
    return block;
}

static _Atomic int worker_step;
static _Atomic uint64_t worker_asked_us, worker_done_us;

/* A malloc to have a heap, then, once let go, one more, whose start and
 * end it records; twice. */
static void *fork_worker(void *unused)
{
    (void)unused;
    hak_free(checked_malloc());
    for (int round = 1; round <= 2; round++) {
        atomic_store(&worker_step, 2 * round - 1);
        while (atomic_load(&worker_step) != 2 * round)
            sched_yield();
        atomic_store(&worker_asked_us, hak_os_now_us());
        hak_free(checked_malloc());
        atomic_store(&worker_done_us, hak_os_now_us());
    }
    return NULL;
}

static void let_worker_malloc(int round)
{
    while (atomic_load(&worker_step) != 2 * round - 1)
        sched_yield();
    atomic_store(&worker_asked_us, 0);
    atomic_store(&worker_done_us, 0);
    atomic_store(&worker_step, 2 * round);
}

static void fork_holds_other_mallocs(void)
{
    pthread_t worker;
    if (pthread_create(&worker, NULL, fork_worker, NULL) != 0)
        hard_error("pthread_create failed");
    /* A class this thread never asked for: its malloc during the fork
     * refills. */
    enum { OWN_SIZE = 3000 };
    unsigned own_cls = hak_class_of(OWN_SIZE);
    uint64_t own_refills = unit_class_stats(own_cls).refills;

    /* A fork that lasts 20 ms: the worker's malloc returns after its end,
     * or, where this thread was held up, after waiting most of the bound. */
    while (atomic_load(&worker_step) != 1)
        sched_yield();
    hak_heap_hold_for_fork();
    let_worker_malloc(1);
    uint64_t asked_us = hak_os_now_us();
    void *own = hak_malloc(OWN_SIZE);
    uint64_t own_us = hak_os_now_us() - asked_us;
    CHECK(own != NULL && own_us < HAK_FORK_WAIT_MS * 1000 / 2,
          "the forking thread's malloc during the fork failed or waited (%llu us)",
          (unsigned long long)own_us);
    hak_free(own);
    while (atomic_load(&worker_asked_us) == 0)
        sched_yield();
    unit_sleep_ms(20);
    uint64_t released_us = hak_os_now_us();
    hak_heap_release_after_fork();
    while (atomic_load(&worker_step) != 3)
        sched_yield();
    uint64_t waited_us = atomic_load(&worker_done_us) - atomic_load(&worker_asked_us);
    CHECK(atomic_load(&worker_done_us) >= released_us || waited_us >= HAK_FORK_WAIT_MS * 1000 / 2,
          "another thread's malloc returned during the fork, after %llu us",
          (unsigned long long)waited_us);
    CHECK(unit_class_stats(own_cls).refills > own_refills,
          "the forking thread's malloc of %d B took no refill: the test tested nothing", OWN_SIZE);

    /* One that never ends lets it go on. */
    hak_heap_hold_for_fork();
    let_worker_malloc(2);
    for (int waited = 0; waited < 3000 && atomic_load(&worker_done_us) == 0; waited += 10)
        unit_sleep_ms(10);
    uint64_t done_us = atomic_load(&worker_done_us);
    CHECK(done_us != 0, "another thread's malloc still waited 3 s into a fork");
    printf("a fork that never ended held another thread's malloc for %llu ms\n",
           (unsigned long long)(done_us ? (done_us - atomic_load(&worker_asked_us)) / 1000 : 0));
    hak_heap_release_after_fork();
    pthread_join(worker, NULL);
}

int main(void)
{
    unit_watchdog();
    unsigned cls = hak_class_of(SIZE);
    void *cached = checked_malloc();
    hak_free(cached);
    uint64_t refills_before = unit_class_stats(cls).refills;
    uint32_t node = hak_tls.node;

    static int32_t cpu_word;
    cpu_word = hak_tls.cpu;
    hak_tls.cpu_word = &cpu_word;
    void *block = checked_malloc();
    CHECK(block == cached, "on the same CPU, malloc did not take the cached block");
    CHECK(hak_tls.cpu_word == &cpu_word, "on the same CPU, malloc left the fast path");
    hak_free(block);

    cpu_word = hak_tls.cpu + 1; /* the kernel moved the thread */
    block = checked_malloc();
    CHECK(hak_tls.cpu_word != &cpu_word, "after a move, malloc stayed on the fast path");
    CHECK(hak_tls.cpu == *hak_tls.cpu_word, "after a move, the CPU was not recorded");
    CHECK(block == cached, "a move within the node emptied the cache");
    CHECK(hak_tls.node == node, "a move within the node changed the thread's node");
    CHECK(unit_class_stats(cls).refills == refills_before,
          "a move within the node counted as a refill");
    hak_free(block);
    fork_holds_other_mallocs();
    return test_result("test_cpu_move");
}

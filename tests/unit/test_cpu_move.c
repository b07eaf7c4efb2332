/* A thread the kernel moved to another CPU leaves malloc's fast path at
 * its next malloc (thread_heap.h): the refill records the CPU and, the node
 * being the same, hands out the block the cache would have, keeping the
 * cache.  The test plays the kernel through a CPU word of its own. */
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "unit.h"

enum { SIZE = 64 };

static uint64_t refills(unsigned cls)
{
    struct hak_class_stats stats[HAK_NUM_CLASSES] = {0};
    hak_heap_sum_stats(stats);
    return stats[cls].refills;
}

/* hak_malloc rather than malloc: the compiler assumes that malloc leaves
 * the test's globals alone, and hak_tls is one. */
static void *checked_malloc(void)
{
    void *block = hak_malloc(SIZE);
    if (!block)
        hard_error("malloc(%d) failed", SIZE);
    return block;
}

int main(void)
{
    unit_watchdog();
    unsigned cls = hak_class_of(SIZE);
    void *cached = checked_malloc();
    hak_free(cached);
    uint64_t refills_before = refills(cls);
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
    CHECK(refills(cls) == refills_before, "a move within the node counted as a refill");
    hak_free(block);
    return test_result("test_cpu_move");
}

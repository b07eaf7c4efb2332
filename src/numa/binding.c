#include "binding.h"

#include <sched.h>
#include <stdatomic.h>

#include "../arena/page_map.h"
#include "../internal.h"
#include "../options.h"
#include "../os.h"
#include "node.h"

static enum hak_os_mpol policy(void)
{
    return hak_options.numa_policy == HAK_POLICY_BIND ? HAK_OS_MPOL_BIND : HAK_OS_MPOL_PREFERRED;
}

/* False for a node mbind cannot name. */
static bool node_mask(unsigned node, unsigned long mask[HAK_OS_NODEMASK_WORDS])
{
    unsigned os_node = hak_numa_os_node(node);
    if (os_node >= HAK_OS_MAX_NODES)
        return false;
    for (unsigned i = 0; i < HAK_OS_NODEMASK_WORDS; i++)
        mask[i] = 0;
    mask[os_node / (8 * sizeof(long))] = 1UL << (os_node % (8 * sizeof(long)));
    return true;
}

void hak_numa_bind(void *addr, size_t size, unsigned node)
{
    unsigned long mask[HAK_OS_NODEMASK_WORDS];
    if (hak_numa_node_count() > 1 && node_mask(node, mask))
        hak_os_mbind(addr, size, policy(), mask);
}

static void place_on_node_zero(struct hak_chunk_head *chunk)
{
    unsigned long mask[HAK_OS_NODEMASK_WORDS];
    if (chunk->node == 0 && node_mask(0, mask))
        hak_os_mbind_move(chunk, chunk->map_size, policy(), mask);
}

void hak_numa_place_early_memory(void)
{
    enum { NOT_YET, MOVING, PLACED };
    static _Atomic int state = NOT_YET;
    if (hak_numa_node_count() <= 1)
        return;
    int expected = NOT_YET;
    if (atomic_compare_exchange_strong(&state, &expected, MOVING)) {
        hak_page_map_for_each_chunk(place_on_node_zero);
        atomic_store_explicit(&state, PLACED, memory_order_release);
        return;
    }
    /* Others wait: their next blocks may come from memory being moved.  The
     * move takes no lock, so waiting cannot deadlock. */
    while (atomic_load_explicit(&state, memory_order_acquire) == MOVING)
        sched_yield();
}

void hak_numa_interleave(void *addr, size_t size)
{
    unsigned count = hak_numa_node_count();
    if (count <= 1)
        return;
    unsigned long mask[HAK_OS_NODEMASK_WORDS] = {0};
    for (unsigned node = 0; node < count; node++) {
        unsigned os_node = hak_numa_os_node(node);
        if (os_node < HAK_OS_MAX_NODES)
            mask[os_node / (8 * sizeof(long))] |= 1UL << (os_node % (8 * sizeof(long)));
    }
    hak_os_mbind(addr, size, HAK_OS_MPOL_INTERLEAVE, mask);
}

#include "binding.h"

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

void hak_numa_move_to_node(void *addr, size_t size, unsigned node)
{
    unsigned long mask[HAK_OS_NODEMASK_WORDS];
    if (hak_numa_node_count() > 1 && node_mask(node, mask))
        hak_os_mbind_move(addr, size, policy(), mask);
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

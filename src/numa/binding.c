#include "binding.h"

#include "../internal.h"
#include "../options.h"
#include "../os.h"
#include "node.h"

void hak_numa_bind(void *addr, size_t size, unsigned node)
{
    if (hak_numa_node_count() <= 1)
        return;
    unsigned long mask[HAK_OS_NODEMASK_WORDS] = {0};
    unsigned os_node = hak_numa_os_node(node);
    if (os_node >= HAK_OS_MAX_NODES)
        return;
    mask[os_node / (8 * sizeof(long))] = 1UL << (os_node % (8 * sizeof(long)));
    hak_os_mbind(addr, size,
                 hak_options.numa_policy == HAK_POLICY_BIND ? HAK_OS_MPOL_BIND
                                                            : HAK_OS_MPOL_PREFERRED,
                 mask);
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

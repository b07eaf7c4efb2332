/* The machine's NUMA layout as hakmem uses it: a dense index for each memory
 * node the process may allocate from, and for every CPU the index of the
 * node its threads should get memory from.  Built from an hwloc topology,
 * so that tests can feed it synthetic machines. */
#ifndef HAK_TOPOLOGY_H
#define HAK_TOPOLOGY_H

#include <stdint.h>

#include "../internal.h"
#include "hwloc_api.h"

struct hak_numa_map {
    unsigned node_count;             /* 1 ... HAK_MAX_NODES */
    unsigned cpu_count;              /* entries in cpu_node */
    uint16_t os_node[HAK_MAX_NODES]; /* dense index -> OS node id, ascending */
    uint8_t cpu_node[];              /* CPU OS index -> dense index */
};

/* The calling machine's topology, with NUMA nodes, packages and PUs only,
 * disallowed ones included; NULL on failure. */
hwloc_topology_t hak_topology_load(const struct hak_hwloc *hwloc);

/* The nodes the process may allocate from: those of its cpuset, narrowed
 * to the bind set of a process-wide MPOL_BIND policy (numactl --membind),
 * which mbind to another node would override.  NULL on failure; the caller
 * frees it with hwloc_bitmap_free. */
hwloc_bitmap_t hak_topology_usable_memory(const struct hak_hwloc *hwloc, hwloc_topology_t topology);

/* Dense indices go to the nodes of usable_memory that have memory, in OS
 * order.  A CPU's node is the NUMA node closest to it; where that one is
 * unusable or has no memory, the usable node nearest to it (by the latency
 * matrix, else by position in the tree, else index 0).  NULL when no
 * usable node has memory.  The map lives in a mapping of its own. */
struct hak_numa_map *hak_topology_build(const struct hak_hwloc *hwloc, hwloc_topology_t topology,
                                        hwloc_const_nodeset_t usable_memory);
void hak_topology_map_free(struct hak_numa_map *map);

#endif

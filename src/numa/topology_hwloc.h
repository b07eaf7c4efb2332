/* hwloc's answer, in the terms of topology.h. */
#ifndef HAK_TOPOLOGY_HWLOC_H
#define HAK_TOPOLOGY_HWLOC_H

#include "hwloc_api.h"
#include "topology.h"

/* The calling machine's topology, with NUMA nodes, packages, groups and PUs
 * only, disallowed ones included; NULL on failure. */
hwloc_topology_t hak_hwloc_load(const struct hak_hwloc *hwloc);

/* The release that loaded topology ("2.9.0"). */
const char *hak_hwloc_version(const struct hak_hwloc *hwloc, hwloc_topology_t topology);

/* Fills layout from topology; allowed: the nodes the process's cpuset
 * allows.  False when the topology has no NUMA node. */
bool hak_hwloc_read_layout(const struct hak_hwloc *hwloc, hwloc_topology_t topology,
                           hwloc_const_nodeset_t allowed, struct hak_numa_layout *layout);

#endif

/* The machine's NUMA layout as hakmem uses it: a dense index for each memory
 * node the process may allocate from, and for every CPU the index of the
 * node its threads should get memory from.
 *
 * Two sources describe the machine in the same terms, a layout: hwloc
 * (topology_hwloc.c) and the kernel's lists in sysfs (sysfs.c).  One builder
 * turns a layout into the map, and refuses a layout that makes no sense, so
 * that both sources give the same map for the same machine and tests can
 * feed either with machines of any shape. */
#ifndef HAK_TOPOLOGY_H
#define HAK_TOPOLOGY_H

#include <stdbool.h>
#include <stdint.h>

#include "../internal.h"
#include "../print.h"

/* Bounds of a layout, which lives in static storage (discovery runs once,
 * inside malloc, where neither the heap nor a large stack frame will do). */
#define HAK_LAYOUT_NODES HAK_MAX_NODES
#define HAK_LAYOUT_CPUS 8192
#define HAK_NO_NODE 0xffu

enum hak_layout_fault {
    HAK_LAYOUT_SOUND,
    HAK_LAYOUT_CPU_TWICE,      /* a CPU listed by two nodes */
    HAK_LAYOUT_NO_CPUS,        /* no node holds a CPU */
    HAK_LAYOUT_NO_MEMORY,      /* no node the process may use has memory */
    HAK_LAYOUT_TOO_MANY_NODES, /* more than HAK_LAYOUT_NODES */
    HAK_LAYOUT_NO_ROOM,        /* the map could not be mapped */
    HAK_LAYOUT_LIST_TOO_LONG,  /* a sysfs list longer than its buffer */
};

struct hak_layout_node {
    uint16_t os_id;
    bool has_memory;
    bool allowed; /* in the process's memory set (cpuset, numactl --membind) */
};

struct hak_numa_layout {
    unsigned node_count; /* entries of node, in ascending OS id */
    struct hak_layout_node node[HAK_LAYOUT_NODES];
    /* Relative, smaller is nearer; where has_distance is false, an unusable
     * node's CPUs go to the first usable node. */
    bool has_distance;
    uint32_t distance[HAK_LAYOUT_NODES][HAK_LAYOUT_NODES];
    unsigned cpu_count;                /* 1 + the highest CPU claimed */
    uint8_t cpu_home[HAK_LAYOUT_CPUS]; /* entry of node holding the CPU, or HAK_NO_NODE */
    enum hak_layout_fault fault;
    unsigned fault_cpu, fault_nodes[2]; /* OS ids, for HAK_LAYOUT_CPU_TWICE */
};

struct hak_numa_map {
    unsigned node_count;             /* 1 ... HAK_MAX_NODES */
    unsigned cpu_count;              /* entries in cpu_node */
    uint16_t os_node[HAK_MAX_NODES]; /* dense index -> OS node id, ascending */
    uint8_t cpu_node[];              /* CPU OS index -> dense index */
};

/* Empties layout before a source fills it. */
void hak_layout_reset(struct hak_numa_layout *layout);
/* Appends a node; false (and the fault set) past HAK_LAYOUT_NODES. */
bool hak_layout_add_node(struct hak_numa_layout *layout, unsigned os_id, bool has_memory,
                         bool allowed);
/* Records that the node at entry holds cpu; a CPU a second node claims is
 * a fault.  CPUs from HAK_LAYOUT_CPUS on are left out (they keep index 0). */
void hak_layout_claim_cpu(struct hak_numa_layout *layout, unsigned cpu, unsigned entry);
/* Narrows allowed to a process-wide MPOL_BIND policy (numactl --membind),
 * which mbind to another node would override. */
void hak_layout_apply_bind_policy(struct hak_numa_layout *layout);

/* Dense indices go to the allowed nodes that have memory, with OS ids below
 * HAK_MAX_NODES, in OS order.  A CPU's node is the node that holds it;
 * where that one is unusable, the usable node nearest to it by the
 * distance table, else index 0.  NULL, with layout->fault set, for a layout
 * that makes no sense.  The map lives in a mapping of its own. */
struct hak_numa_map *hak_topology_build(struct hak_numa_layout *layout);
void hak_topology_map_free(struct hak_numa_map *map);

/* The first CPU the two maps send to different OS nodes, or -1 when they
 * agree on every CPU either knows. */
bool hak_topology_same_nodes(const struct hak_numa_map *a, const struct hak_numa_map *b);
int hak_topology_first_difference(const struct hak_numa_map *a, const struct hak_numa_map *b);
/* The OS node a map sends cpu to. */
unsigned hak_topology_os_node_of_cpu(const struct hak_numa_map *map, unsigned cpu);

/* "CPU 3 is listed by nodes 0 and 1", and the like. */
void hak_layout_print_fault(struct hak_printer *out, const struct hak_numa_layout *layout);
/* One line per node: its index, OS id and the CPUs sent to it, as ranges. */
void hak_topology_print(struct hak_printer *out, const struct hak_numa_map *map);

#endif

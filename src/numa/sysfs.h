/* The kernel's own view of the NUMA nodes, read without stdio and without
 * malloc: how many the process may allocate from (at every process start),
 * and the whole layout when hwloc cannot be loaded or its answer is
 * refused. */
#ifndef HAK_SYSFS_H
#define HAK_SYSFS_H

#include <stdbool.h>
#include <stddef.h>

struct hak_numa_layout;

/* The number of nodes the process may allocate from: its cpuset's memory
 * nodes, from one get_mempolicy call (1 us here, where reading a sysfs or
 * procfs file took 15); where the kernel refuses the call (a seccomp
 * filter, as container runtimes' default ones have for it), the cpuset's
 * list in /proc/self/status, and without cpusets the nodes online.  1 on a
 * kernel without NUMA support.  One caller at a time: its buffers are
 * those of hak_sysfs_read_layout. */
unsigned hak_numa_allowed_nodes(void);

/* One range of a kernel list such as "0-3,8,10-11\n", from *pos on: true
 * with [*first, *last] and *pos past it, false at the first character that
 * does not belong to the list (or the end of len). */
bool hak_numa_list_next(const char *text, size_t len, size_t *pos, unsigned *first, unsigned *last);

/* The number of members of such a list. */
unsigned hak_numa_list_count(const char *text, size_t len);

/* Fills layout from ROOT/sys/devices/system/{node,cpu} and
 * ROOT/proc/self/status (root "" for this machine; tests pass a fake tree):
 * the online nodes, the CPUs each node lists, which have memory, the
 * distance table and the nodes the process's cpuset allows.  False when
 * the node list cannot be read. */
bool hak_sysfs_read_layout(const char *root, struct hak_numa_layout *layout);

#endif

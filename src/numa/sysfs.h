/* How many NUMA nodes the kernel has online: read at every process start,
 * so without stdio and without malloc. */
#ifndef HAK_SYSFS_H
#define HAK_SYSFS_H

#include <stddef.h>

/* 1 on a kernel without NUMA support. */
unsigned hak_numa_online_nodes(void);

/* The number of members of a kernel list such as "0-3,8,10-11\n"; parsing
 * stops at the first character that does not belong to the list. */
unsigned hak_numa_list_count(const char *text, size_t len);

#endif

/* Where memory goes: binds fresh regions to a node before first touch, with
 * the policy HAKMEM_NUMA_POLICY chooses.  A no-op while hakmem sees one node. */
#ifndef HAK_BINDING_H
#define HAK_BINDING_H

#include <stddef.h>

void hak_numa_bind(void *addr, size_t size, unsigned node);
/* Memory already in use moves to node (and stays bound there). */
void hak_numa_move_to_node(void *addr, size_t size, unsigned node);
/* Spreads a region over every node (HAKMEM_INTERLEAVE_BYTES). */
void hak_numa_interleave(void *addr, size_t size);

#endif

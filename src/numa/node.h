/* NUMA nodes as hakmem sees them: how many, which one a thread should get
 * memory from, and the OS id behind each.
 *
 * Nodes are known in two steps, because most processes never need them
 * (issue 8): hak_numa_init, at start-up, only finds out whether the machine
 * has more than one node; hak_numa_discover, called from a slow path once
 * the process is worth it, loads hwloc and publishes the nodes.  Until
 * then, and for good on one node, with HAKMEM_NUMA=off, in a build without
 * NUMA support, or where the process may use one node only, there is one
 * node: index 0, and hakmem must not bind memory at all. */
#ifndef HAK_NODE_H
#define HAK_NODE_H

#include <stdbool.h>
#include <stdint.h>

/* Start-up: counts the nodes the process may allocate from (its cpuset's
 * memory nodes, hak_numa_allowed_nodes), after the options are loaded.  One
 * is one for good, as discovery would have found: a node with CPUs and no
 * memory takes its memory from another, and a cpuset widened later is not
 * followed.  No malloc. */
void hak_numa_init(void);

/* Loads the topology, at most once per process, when hak_numa_init found
 * several nodes; otherwise returns at once.  Call it without holding
 * hakmem's locks: it allocates, through hwloc and the dynamic loader, and
 * those allocations (on this thread or others) see one node and go on.
 * Other threads do not wait for it. */
void hak_numa_discover(void);

/* True once discovery has finished or is not needed: false while it is
 * pending or running (also for hwloc's own allocations during it). */
bool hak_numa_discovery_settled(void);

/* 1 ... HAK_MAX_NODES; once above 1, it stays at its value. */
unsigned hak_numa_node_count(void);
/* From start-up on, what hak_numa_node_count will most likely be once
 * discovery has run: the nodes the process could allocate from (at most
 * HAK_MAX_NODES) where discovery is pending, else 1.  For what must be
 * laid out per node before discovery (the SuperSlab region's parts); a
 * node found past it is served, only by slower paths. */
unsigned hak_numa_node_bound(void);
/* Held, the node count cannot change: fork holds it while it locks the
 * per-node state of the nodes in use, and only those. */
void hak_numa_count_lock(void);
void hak_numa_count_unlock(void);

/* The index of the node of the CPU the calling thread runs on now; for
 * slow paths (heap creation, refills): it reads the CPU from rseq, or makes
 * a system call where glibc did not register rseq. */
unsigned hak_numa_thread_node(void);

/* Where the kernel keeps the calling thread's CPU up to date (rseq), while
 * the process knows several nodes; NULL on one node and where glibc did not
 * register rseq.  A change of the word is a move the heap must look at. */
const volatile int32_t *hak_numa_cpu_word(void);

/* The OS id (for mbind) of node index; index < hak_numa_node_count(). */
unsigned hak_numa_os_node(unsigned index);

#endif

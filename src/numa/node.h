/* NUMA nodes as hakmem sees them: how many, and the calling thread's. */
#ifndef HAK_NODE_H
#define HAK_NODE_H

unsigned hak_numa_node_count(void);
/* The node whose memory the calling thread should get; read on slow paths
 * only (when a heap is created). */
unsigned hak_numa_thread_node(void);

#endif

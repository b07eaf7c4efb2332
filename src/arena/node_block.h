/* Blocks placed on a node the caller names (hak_malloc_onnode) rather than
 * the thread's: a span of their own from that node's PageArena, owned by no
 * thread, so that whoever frees them sends them straight home. */
#ifndef HAK_NODE_BLOCK_H
#define HAK_NODE_BLOCK_H

#include "../internal.h"

/* size <= HAK_L25_MAX; NULL with errno ENOMEM. */
void *hak_node_block_alloc(size_t size, unsigned node);
void hak_node_block_free(struct hak_slab *span, void *ptr);
/* Checked mode: the size the block was asked with, its canary intact. */
size_t hak_node_block_requested(struct hak_slab *span, void *ptr);

#endif

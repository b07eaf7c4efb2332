/* Memory for hakmem's own records (thread heaps, span descriptors), kept
 * apart from user blocks and never handed to the page map. */
#ifndef HAK_META_H
#define HAK_META_H

#include "../internal.h"

/* The biggest record hak_meta_alloc serves. */
#define HAK_META_MAX_BYTES (HAK_CACHE_LINE << 7)

/* Zeroed, cache-line aligned; NULL when the OS refuses memory or size is
 * over HAK_META_MAX_BYTES. */
void *hak_meta_alloc(size_t size);
/* Returns an object of that size for reuse by a later hak_meta_alloc. */
void hak_meta_free(void *obj, size_t size);

struct hak_slab *hak_span_desc_alloc(void);
void hak_span_desc_free(struct hak_slab *desc);

void hak_meta_lock(void);
void hak_meta_unlock(void);

#endif

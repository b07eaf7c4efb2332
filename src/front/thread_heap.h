/* The TLS front end: one heap per thread, one current slab per class.  The
 * fast paths below pop from and push to the current slab's free list; all
 * else (refills, remote frees, returning slabs) is out of line in
 * thread_heap.c.  The fast paths never ask which NUMA node they are on: a
 * heap's node is fixed when it takes a slab. */
#ifndef HAK_THREAD_HEAP_H
#define HAK_THREAD_HEAP_H

#include "../internal.h"
#include "size_class.h"

extern __thread struct hak_heap *hak_tls_heap __attribute__((tls_model("initial-exec")));

void *hak_heap_alloc_slow(struct hak_heap *heap, unsigned cls);
void hak_heap_free_slow(struct hak_heap *heap, struct hak_slab *slab);
/* A free into a slab this thread does not own: checks it, then pushes the
 * block onto the slab's remote list. */
void hak_heap_free_other(struct hak_slab *slab, void *block);
/* Thread exit: hands back or abandons every slab of the heap. */
void hak_heap_thread_exit(void *heap);

static inline void *hak_heap_alloc(unsigned cls)
{
    struct hak_heap *heap = hak_tls_heap;
    struct hak_slab *slab = heap->cur[cls];
    void *block = slab->free;
    if (HAK_LIKELY(block)) {
        slab->free = *(void **)block;
        slab->used++;
        heap->allocs[cls]++;
        return block;
    }
    return hak_heap_alloc_slow(heap, cls);
}

static inline void hak_heap_free(struct hak_slab *slab, void *block)
{
    struct hak_heap *heap = hak_tls_heap;
    if (HAK_UNLIKELY(atomic_load_explicit(&slab->owner, memory_order_relaxed) != heap)) {
        hak_heap_free_other(slab, block);
        return;
    }
    void *head = slab->free;
    *(void **)block = head;
    slab->free = block;
    uint32_t used = --slab->used;
    if (HAK_UNLIKELY(!head || !used))
        hak_heap_free_slow(heap, slab);
}

/* Creates the thread-exit hook; called once by hak_init. */
bool hak_heap_setup(void);
/* Adds the per-class counters of every live heap to totals. */
void hak_heap_sum_stats(struct hak_class_stats totals[HAK_NUM_CLASSES]);

void hak_heap_registry_lock(void);
void hak_heap_registry_unlock(void);

#endif

#include "thread_heap.h"

#include <errno.h>

#include "../arena/abandoned.h"
#include "../arena/hot_span_box.h"
#include "../arena/meta.h"
#include "../arena/page_arena.h"
#include "../arena/shared_pool.h"
#include "../arena/slab.h"
#include "../numa/node.h"
#include "../options.h"
#include "../stats.h"

__thread struct hak_heap *hak_tls_heap __attribute__((tls_model("initial-exec"))) =
    &hak_empty_heap;

static pthread_key_t exit_key;

static struct {
    pthread_mutex_t lock;
    struct hak_heap *live;
} registry = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- the heap's slab lists ---- */

static void list_push(struct hak_slab_list *list, struct hak_slab *slab)
{
    slab->prev = NULL;
    slab->next = list->head;
    if (list->head)
        list->head->prev = slab;
    list->head = slab;
    list->count++;
}

static void list_remove(struct hak_slab_list *list, struct hak_slab *slab)
{
    if (slab->prev)
        slab->prev->next = slab->next;
    else
        list->head = slab->next;
    if (slab->next)
        slab->next->prev = slab->prev;
    slab->next = slab->prev = NULL;
    list->count--;
}

static struct hak_slab *list_pop(struct hak_slab_list *list)
{
    struct hak_slab *slab = list->head;
    if (slab)
        list_remove(list, slab);
    return slab;
}

static size_t span_bytes(const struct hak_slab *slab)
{
    return (size_t)slab->pages * HAK_PAGE_SIZE;
}

/* ---- getting slabs ---- */

static struct hak_slab *fresh_slab(struct hak_heap *heap, unsigned cls)
{
    if (hak_class_is_small(cls)) {
        struct hak_slab *slab = hak_shared_pool_take(heap->node);
        if (slab)
            hak_slab_assign(slab, heap, cls, slab->start, HAK_SLAB_SIZE);
        return slab;
    }
    uint32_t bytes = hak_class_span_bytes[cls];
    uint32_t pages = bytes / (uint32_t)HAK_PAGE_SIZE;
    struct hak_slab *span = hak_hot_span_take(heap->node, pages);
    if (!span)
        span = hak_page_arena_alloc(heap->node, pages);
    if (!span)
        return NULL;
    span->kind = hak_class_is_l25(cls) ? HAK_SLAB_L25 : HAK_SLAB_MID;
    hak_slab_assign(span, heap, cls, span->start, bytes);
    return span;
}

static struct hak_slab *next_slab(struct hak_heap *heap, unsigned cls)
{
    struct hak_slab *slab = list_pop(&heap->partial[cls]);
    if (slab)
        return slab;
    slab = list_pop(&heap->ring[cls]);
    if (slab) {
        heap->ring_bytes -= span_bytes(slab);
        return slab;
    }
    slab = hak_abandoned_pop(heap->node, cls);
    if (slab) {
        hak_slab_adopt(slab, heap);
        hak_slab_collect_remote(slab);
    } else {
        slab = fresh_slab(heap, cls);
    }
    if (slab)
        heap->stats[cls].slabs_in++;
    return slab;
}

/* ---- giving slabs back ---- */

static void release_to_backend(struct hak_slab *slab)
{
    if (slab->kind == HAK_SLAB_SMALL)
        hak_shared_pool_give(slab);
    else
        hak_hot_span_put(slab);
}

static void retire_empty(struct hak_heap *heap, struct hak_slab *slab)
{
    unsigned cls = slab->cls;
    heap->stats[cls].slabs_out++;
    if (!hak_class_is_small(cls)) {
        uint32_t cap = hak_class_is_l25(cls) ? hak_options.l25_ring : hak_options.mid_ring;
        size_t bytes = span_bytes(slab);
        if (heap->ring[cls].count < cap && heap->ring_bytes + bytes <= hak_options.ring_bytes) {
            slab->state = HAK_STATE_RING;
            heap->ring_bytes += bytes;
            list_push(&heap->ring[cls], slab);
            return;
        }
    }
    release_to_backend(slab);
}

/* A full slab got a block back (locally, or collected from its remote list). */
static void unfull(struct hak_heap *heap, struct hak_slab *slab)
{
    list_remove(&heap->full[slab->cls], slab);
    slab->state = HAK_STATE_PARTIAL;
    list_push(&heap->partial[slab->cls], slab);
}

static void check_partial_empty(struct hak_heap *heap, struct hak_slab *slab)
{
    if (slab->state == HAK_STATE_PARTIAL && slab->used == 0 && !slab->queued) {
        list_remove(&heap->partial[slab->cls], slab);
        retire_empty(heap, slab);
    }
}

static void drain_delayed(struct hak_heap *heap)
{
    struct hak_slab *slab = atomic_exchange_explicit(&heap->delayed, NULL, memory_order_acquire);
    while (slab) {
        struct hak_slab *next = slab->delayed_next;
        slab->queued = false;
        hak_slab_collect_remote(slab);
        if (slab->state == HAK_STATE_FULL)
            unfull(heap, slab);
        check_partial_empty(heap, slab);
        slab = next;
    }
}

/* ---- slow paths ---- */

static struct hak_heap *heap_create(void)
{
    hak_init();
    struct hak_heap *heap = hak_meta_alloc(sizeof(struct hak_heap));
    if (!heap)
        return NULL;
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
        heap->cur[cls] = &hak_empty_slab;
    heap->node = hak_numa_thread_node();
    pthread_mutex_lock(&registry.lock);
    heap->next_live = registry.live;
    if (registry.live)
        registry.live->prev_live = heap;
    registry.live = heap;
    pthread_mutex_unlock(&registry.lock);
    hak_tls_heap = heap;
    pthread_setspecific(exit_key, heap);
    hak_stat_add(HAK_STAT_THREADS, 1);
    return heap;
}

void *hak_heap_alloc_slow(struct hak_heap *heap, unsigned cls)
{
    if (heap == &hak_empty_heap) {
        heap = heap_create();
        if (!heap) {
            errno = ENOMEM;
            return NULL;
        }
    }
    if (atomic_load_explicit(&heap->delayed, memory_order_relaxed))
        drain_delayed(heap);
    heap->stats[cls].refills++;
    struct hak_slab *slab = heap->cur[cls];
    for (;;) {
        if (slab != &hak_empty_slab) {
            if (slab->free || hak_slab_extend(slab) || hak_slab_collect_remote(slab))
                break;
            if (slab->queued) {
                /* Arming it again would queue it twice. */
                drain_delayed(heap);
                continue;
            }
            if (!hak_slab_arm_notify(slab))
                continue; /* a remote free just arrived */
            slab->state = HAK_STATE_FULL;
            list_push(&heap->full[cls], slab);
        }
        slab = next_slab(heap, cls);
        if (!slab) {
            heap->cur[cls] = &hak_empty_slab;
            errno = ENOMEM;
            return NULL;
        }
        slab->state = HAK_STATE_CUR;
        heap->cur[cls] = slab;
    }
    void *block = slab->free;
    slab->free = *(void **)block;
    slab->used++;
    heap->allocs[cls]++;
    return block;
}

void hak_heap_free_slow(struct hak_heap *heap, struct hak_slab *slab)
{
    if (slab->state == HAK_STATE_FULL) {
        if (hak_slab_disarm_notify(slab))
            slab->queued = true;
        unfull(heap, slab);
    }
    check_partial_empty(heap, slab);
}

void hak_heap_free_other(struct hak_slab *slab, void *block)
{
    uint8_t kind = slab->kind;
    if (kind != HAK_SLAB_SMALL && kind != HAK_SLAB_MID && kind != HAK_SLAB_L25)
        hak_fatal("free of a pointer hakmem never handed out", block);
    size_t offset = (size_t)((char *)block - slab->start);
    if ((char *)block >= slab->end || offset % slab->block_size)
        hak_fatal("free of a pointer inside a block", block);
    struct hak_heap *heap = hak_tls_heap;
    if (heap != &hak_empty_heap)
        heap->stats[slab->cls].remote_frees++;
    hak_slab_remote_free(slab, block);
}

/* ---- thread exit ---- */

static void leave_slab(struct hak_slab *slab)
{
    hak_slab_collect_remote(slab);
    if (slab->used == 0)
        release_to_backend(slab);
    else
        hak_abandoned_push(slab);
}

void hak_heap_thread_exit(void *arg)
{
    struct hak_heap *heap = arg;
    hak_tls_heap = &hak_empty_heap;
    /* Disown first: once no slab names this heap, no remote free can queue
     * one on it, and the heap's memory can be reused. */
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        if (heap->cur[cls] != &hak_empty_slab)
            hak_slab_disown(heap->cur[cls]);
        struct hak_slab_list *lists[] = {&heap->partial[cls], &heap->full[cls], &heap->ring[cls]};
        for (unsigned l = 0; l < 3; l++)
            for (struct hak_slab *slab = lists[l]->head; slab; slab = slab->next)
                hak_slab_disown(slab);
    }
    for (struct hak_slab *slab = atomic_exchange(&heap->delayed, NULL); slab;
         slab = slab->delayed_next)
        slab->queued = false;
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        if (heap->cur[cls] != &hak_empty_slab)
            leave_slab(heap->cur[cls]);
        struct hak_slab_list *lists[] = {&heap->partial[cls], &heap->full[cls], &heap->ring[cls]};
        for (unsigned l = 0; l < 3; l++) {
            struct hak_slab *slab;
            while ((slab = list_pop(lists[l])))
                leave_slab(slab);
        }
    }
    pthread_mutex_lock(&registry.lock);
    if (heap->prev_live)
        heap->prev_live->next_live = heap->next_live;
    else
        registry.live = heap->next_live;
    if (heap->next_live)
        heap->next_live->prev_live = heap->prev_live;
    hak_stats_retire_heap(heap);
    pthread_mutex_unlock(&registry.lock);
    hak_meta_free(heap, sizeof(struct hak_heap));
}

bool hak_heap_setup(void)
{
    return pthread_key_create(&exit_key, hak_heap_thread_exit) == 0;
}

void hak_heap_sum_stats(struct hak_class_stats totals[HAK_NUM_CLASSES])
{
    pthread_mutex_lock(&registry.lock);
    for (struct hak_heap *heap = registry.live; heap; heap = heap->next_live) {
        for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
            totals[cls].allocs += heap->allocs[cls];
            totals[cls].refills += heap->stats[cls].refills;
            totals[cls].slabs_in += heap->stats[cls].slabs_in;
            totals[cls].slabs_out += heap->stats[cls].slabs_out;
            totals[cls].remote_frees += heap->stats[cls].remote_frees;
        }
    }
    pthread_mutex_unlock(&registry.lock);
}

void hak_heap_registry_lock(void)
{
    pthread_mutex_lock(&registry.lock);
}

void hak_heap_registry_unlock(void)
{
    pthread_mutex_unlock(&registry.lock);
}

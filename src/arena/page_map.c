#include "page_map.h"

#include "../fork_locks.h"
#include "../numa/binding.h"
#include "../numa/node.h"
#include "../os.h"

_Atomic uintptr_t hak_page_map_top[1 << HAK_MAP_TOP_BITS];

/* What page_map.h's bias takes off a leaf's address. */
static uintptr_t leaf_bias(uintptr_t top)
{
    return (top << HAK_MAP_LEAF_BITS) * sizeof(uintptr_t);
}

/* The leaf of units top << HAK_MAP_LEAF_BITS on, or NULL. */
static hak_map_leaf *leaf_at(uintptr_t top)
{
    uintptr_t biased = atomic_load_explicit(&hak_page_map_top[top], memory_order_acquire);
    return biased ? (hak_map_leaf *)(biased + leaf_bias(top)) : NULL;
}

static hak_map_leaf *leaf_for(uintptr_t unit)
{
    uintptr_t top = unit >> HAK_MAP_LEAF_BITS;
    hak_map_leaf *leaf = leaf_at(top);
    if (leaf)
        return leaf;
    pthread_mutex_lock(&hak_fork_locks.page_map.mutex);
    leaf = leaf_at(top);
    if (!leaf) {
        leaf = hak_os_map_aligned(sizeof(hak_map_leaf), HAK_PAGE_SIZE);
        if (leaf && (uintptr_t)leaf == leaf_bias(top)) {
            /* Its top entry would be 0, no leaf: take another. */
            hak_map_leaf *other = hak_os_map_aligned(sizeof(hak_map_leaf), HAK_PAGE_SIZE);
            hak_os_unmap(leaf, sizeof(hak_map_leaf));
            leaf = other;
        }
        if (leaf)
            atomic_store_explicit(&hak_page_map_top[top], (uintptr_t)leaf - leaf_bias(top),
                                  memory_order_release);
    }
    pthread_mutex_unlock(&hak_fork_locks.page_map.mutex);
    return leaf;
}

/* page_map.h: what free() finds for chunk's units. */
static uintptr_t entry_for(struct hak_chunk_head *chunk)
{
    if (!chunk)
        return 0;
    if (chunk->route != HAK_ROUTE_FAST)
        return (uintptr_t)chunk | HAK_MAP_ROUTED;
    return (uintptr_t)chunk | (chunk->kind == HAK_CHUNK_SUPERSLAB ? HAK_MAP_SUPERSLAB : 0);
}

static bool set_range(void *base, size_t size, struct hak_chunk_head *chunk)
{
    uintptr_t first = (uintptr_t)base >> HAK_CHUNK_SHIFT;
    uintptr_t last = ((uintptr_t)base + size - 1) >> HAK_CHUNK_SHIFT;
    for (uintptr_t unit = first; unit <= last; unit++) {
        hak_map_leaf *leaf = chunk ? leaf_for(unit) : leaf_at(unit >> HAK_MAP_LEAF_BITS);
        if (!leaf)
            return false;
        atomic_store_explicit(&(*leaf)[unit & ((1u << HAK_MAP_LEAF_BITS) - 1)], entry_for(chunk),
                              memory_order_release);
    }
    return true;
}

bool hak_page_map_set(void *base, size_t size, struct hak_chunk_head *chunk)
{
    if (set_range(base, size, chunk))
        return true;
    hak_page_map_clear(base, size);
    return false;
}

void hak_page_map_clear(void *base, size_t size)
{
    set_range(base, size, NULL);
}

static void for_each_chunk(void (*visit)(struct hak_chunk_head *chunk))
{
    for (uintptr_t top = 0; top < (1u << HAK_MAP_TOP_BITS); top++) {
        if (!leaf_at(top))
            continue;
        for (uintptr_t i = 0; i < (1u << HAK_MAP_LEAF_BITS); i++) {
            uintptr_t unit_base = ((top << HAK_MAP_LEAF_BITS) | i) << HAK_CHUNK_SHIFT;
            struct hak_chunk_head *chunk = hak_page_map_lookup((void *)unit_base);
            /* A chunk spanning several units is visited at its first. */
            if (chunk && (uintptr_t)chunk == unit_base)
                visit(chunk);
        }
    }
}

static void place_on_node_zero(struct hak_chunk_head *chunk)
{
    if (chunk->node == 0)
        hak_numa_move_to_node(chunk, chunk->map_size, 0);
}

void hak_page_map_place_early_chunks(void)
{
    enum { NOT_YET, MOVING, PLACED };
    static _Atomic int state = NOT_YET;
    if (hak_numa_node_count() <= 1)
        return;
    int expected = NOT_YET;
    if (atomic_compare_exchange_strong(&state, &expected, MOVING)) {
        for_each_chunk(place_on_node_zero);
        atomic_store_explicit(&state, PLACED, memory_order_release);
        return;
    }
    /* Others wait: their next blocks may come from memory being moved.  The
     * move takes no lock, so waiting cannot deadlock. */
    while (atomic_load_explicit(&state, memory_order_acquire) == MOVING)
        hak_os_yield();
}

void hak_page_map_lock(void)
{
    pthread_mutex_lock(&hak_fork_locks.page_map.mutex);
}

void hak_page_map_unlock(void)
{
    pthread_mutex_unlock(&hak_fork_locks.page_map.mutex);
}

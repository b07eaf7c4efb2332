#include "large.h"

#include <errno.h>
#include <string.h>

#include "../fault.h"
#include "../front/canary.h"
#include "../harden.h"
#include "../memcheck.h"
#include "../numa/binding.h"
#include "../options.h"
#include "../os.h"
#include "../stats.h"
#include "page_map.h"

#define CACHE_SLOTS 8

struct large_cache {
    pthread_mutex_t lock;
    size_t bytes;
    unsigned count;
    struct hak_large *slots[CACHE_SLOTS]; /* oldest first */
} __attribute__((aligned(HAK_CACHE_LINE)));

static struct large_cache caches[HAK_MAX_NODES] = {
    [0 ... HAK_MAX_NODES - 1] = {.lock = HAK_LOCK_INITIALIZER},
};

static size_t round_to_page(size_t size)
{
    return (size + HAK_PAGE_SIZE - 1) & ~(HAK_PAGE_SIZE - 1);
}

/* The block's pages up to size are handed out: those beyond what it ever
 * handed out before are first touched, the others reused (or, when the
 * block grows in place, already the program's). */
static void count_pages(struct hak_large *large, size_t size, bool in_place)
{
    size_t pages = round_to_page(size) / HAK_PAGE_SIZE;
    size_t reused = pages < large->touched_pages ? pages : large->touched_pages;
    if (pages > large->touched_pages)
        large->touched_pages = pages;
    hak_stat_pages_out(HAK_PAGES_LARGE, pages - reused, in_place ? 0 : reused);
}

static void unmap(struct hak_large *large)
{
    size_t total = large->head.map_size;
    hak_stat_node_map(large->head.node, -(int64_t)total);
    hak_page_map_clear(large, total);
    hak_os_unmap(large, total);
}

static void remove_slot(struct large_cache *cache, unsigned i)
{
    cache->bytes -= cache->slots[i]->head.map_size;
    cache->count--;
    for (; i < cache->count; i++)
        cache->slots[i] = cache->slots[i + 1];
}

/* A cached mapping that fits size without wasting more than a quarter. */
static struct hak_large *reuse(unsigned node, size_t size)
{
    struct large_cache *cache = &caches[node];
    if (!__atomic_load_n(&cache->count, __ATOMIC_RELAXED))
        return NULL;
    struct hak_large *found = NULL;
    pthread_mutex_lock(&cache->lock);
    for (unsigned i = cache->count; i-- > 0;) {
        struct hak_large *large = cache->slots[i];
        if (large->usable >= size && large->usable - size <= size / 4) {
            found = large;
            remove_slot(cache, i);
            break;
        }
    }
    pthread_mutex_unlock(&cache->lock);
    if (found)
        found->cached = false;
    return found;
}

/* sign: 1 as the block is handed out, -1 as it is freed. */
static void count_live(const struct hak_large *large, int64_t sign)
{
    hak_stat_gauge(HAK_STAT_LARGE_LIVE, sign);
    hak_stat_gauge(HAK_STAT_LARGE_LIVE_MAPPED, sign * (int64_t)large->head.map_size);
    hak_stat_gauge(HAK_STAT_LARGE_LIVE_USABLE, sign * (int64_t)large->usable);
}

/* Checked mode: the block is the program's, its canary after size. */
static void *hand_out(struct hak_large *large, size_t size, bool zeroed)
{
    void *block = hak_large_block(large);
    count_live(large, 1);
    if (hak_harden.checked) {
        large->requested = size;
        hak_canary_fill(block, size, large->usable);
        hak_memcheck_malloclike(block, size, zeroed);
    }
    return block;
}

void *hak_large_alloc(size_t size, size_t align, unsigned node, bool zeroed)
{
    if (align <= HAK_PAGE_SIZE) {
        struct hak_large *cached = reuse(node, size);
        if (cached) {
            if (hak_harden.guard_bytes)
                hak_os_unguard(hak_large_block(cached), cached->usable);
            hak_stat_add(HAK_STAT_HOT_HITS, 1);
            count_pages(cached, size, false);
            hak_memcheck_undefined(hak_large_block(cached), cached->usable);
            if (zeroed)
                memset(hak_large_block(cached), 0, size);
            return hand_out(cached, size, zeroed);
        }
    }
    size_t offset = align > HAK_PAGE_SIZE ? align : HAK_PAGE_SIZE;
    size_t map_align = align > HAK_CHUNK_SIZE ? align : HAK_CHUNK_SIZE;
    /* At least a page: a zero-byte block must still lie inside its mapping.
     * Level 2: and a guard page after it, for the mapping's life. */
    size_t guard = hak_harden.guard_bytes;
    size_t total = offset + round_to_page(size ? size : 1) + guard;
    if (total < size || total > ((size_t)1 << HAK_MAP_ADDRESS_BITS)) {
        errno = ENOMEM;
        return NULL;
    }
    struct hak_large *large = hak_os_map_aligned(total, map_align);
    if (!large)
        return NULL;
    if (hak_options.interleave_bytes && size >= hak_options.interleave_bytes)
        hak_numa_interleave(large, total);
    else
        hak_numa_bind(large, total, node);
    large->head.kind = HAK_CHUNK_LARGE;
    large->head.node = node;
    large->head.map_size = total;
    large->head.route = HAK_ROUTE_LARGE;
    large->offset = offset;
    large->usable = total - offset - guard;
    if (guard)
        hak_os_guard((char *)large + total - guard, guard);
    if (!hak_page_map_set(large, total, &large->head)) {
        hak_os_unmap(large, total);
        errno = ENOMEM;
        return NULL;
    }
    count_pages(large, size, false);
    hak_stat_pages_out(HAK_PAGES_SSM, 1, 0); /* the head's page */
    hak_stat_add(HAK_STAT_LARGE_ALLOCS, 1);
    hak_stat_node_map(node, (int64_t)total);
    return hand_out(large, size, zeroed);
}

void hak_large_free(struct hak_large *large, void *ptr)
{
    if (!hak_large_contains(large, ptr)) /* past the mapping, in its last 2 MiB unit */
        hak_fatal("free of a pointer hakmem never handed out:", ptr);
    hak_memcheck_freelike(ptr);
    char *block = hak_large_block(large);
    if ((char *)ptr != block) {
        /* The head before the block, a guard page after it. */
        if ((char *)ptr < block || (char *)ptr >= block + large->usable)
            hak_fatal("free of a pointer hakmem never handed out:", ptr);
        hak_fatal_note("free of a pointer inside a block:", ptr, "large block");
    }
    if (large->cached)
        hak_fatal_note("double free of", ptr, "large block");
    if (hak_harden.checked)
        hak_canary_verify(ptr, large->requested, large->usable, "large block");
    count_live(large, -1);
    size_t budget = hak_options_hot_bytes() / 2;
    if (large->offset != HAK_PAGE_SIZE || large->head.map_size > budget) {
        unmap(large);
        return;
    }
    struct large_cache *cache = &caches[large->head.node];
    struct hak_large *evicted[CACHE_SLOTS + 1];
    unsigned evictions = 0;
    uint64_t now = hak_os_now_ms();
    /* Level 2: a write after free faults, as on memory unmapped. */
    if (hak_harden.guard_bytes)
        hak_os_guard(block, large->usable);
    large->cached = true;
    large->freed_ms = now;
    pthread_mutex_lock(&cache->lock);
    if (cache->count == CACHE_SLOTS) {
        evicted[evictions++] = cache->slots[0];
        remove_slot(cache, 0);
    }
    cache->slots[cache->count++] = large;
    cache->bytes += large->head.map_size;
    while (cache->count &&
           (cache->bytes > budget || now >= cache->slots[0]->freed_ms + hak_options.decay_ms)) {
        evicted[evictions++] = cache->slots[0];
        remove_slot(cache, 0);
    }
    pthread_mutex_unlock(&cache->lock);
    for (unsigned i = 0; i < evictions; i++)
        unmap(evicted[i]);
}

bool hak_large_resize(struct hak_large *large, size_t size)
{
    size_t total = large->offset + round_to_page(size);
    size_t old_total = large->head.map_size;
    if (total < size)
        return false;
    /* Checked blocks keep their mapping and guard page; the canary follows
     * the size. */
    if (hak_harden.checked) {
        if (size > large->usable || size <= large->usable / 2)
            return false;
        /* Only the bytes the block gains are checked, only those it gives
         * up filled: a run of small resizes costs what they move. */
        void *block = hak_large_block(large);
        if (size > large->requested)
            hak_canary_verify(block, large->requested, size, "large block");
        else
            hak_canary_fill(block, size, large->requested);
        hak_memcheck_resized(block, large->requested, size);
        large->requested = size;
        return true;
    }
    if (total <= old_total) {
        if (size <= large->usable / 2)
            return false;
        count_pages(large, size, true);
        return true;
    }
    /* mremap succeeds only where the address space after the block is free,
     * so registering afterwards cannot clobber a neighbouring chunk. */
    if (!hak_os_grow_in_place(large, old_total, total))
        return false;
    if (!hak_page_map_set(large, total, &large->head)) {
        hak_os_shrink_in_place(large, total, old_total);
        hak_page_map_set(large, old_total, &large->head);
        return false;
    }
    hak_stat_node_map(large->head.node, (int64_t)(total - old_total));
    count_live(large, -1);
    large->head.map_size = total;
    large->usable = total - large->offset;
    count_live(large, 1);
    count_pages(large, size, true);
    return true;
}

size_t hak_large_cached(unsigned node, uint64_t *count)
{
    struct large_cache *cache = &caches[node];
    *count += __atomic_load_n(&cache->count, __ATOMIC_RELAXED);
    return __atomic_load_n(&cache->bytes, __ATOMIC_RELAXED);
}

size_t hak_large_release_cached(unsigned node)
{
    struct large_cache *cache = &caches[node];
    struct hak_large *evicted[CACHE_SLOTS];
    if (!__atomic_load_n(&cache->count, __ATOMIC_RELAXED))
        return 0;
    pthread_mutex_lock(&cache->lock);
    unsigned count = cache->count;
    size_t bytes = cache->bytes;
    memcpy(evicted, cache->slots, count * sizeof(evicted[0]));
    cache->count = 0;
    cache->bytes = 0;
    pthread_mutex_unlock(&cache->lock);
    for (unsigned i = 0; i < count; i++)
        unmap(evicted[i]);
    return bytes;
}

void hak_large_lock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        pthread_mutex_lock(&caches[i].lock);
}

void hak_large_unlock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        pthread_mutex_unlock(&caches[i].lock);
}

#include "shared_pool.h"

#include "../fork_locks.h"
#include "../options.h"
#include "../os.h"
#include "hot_span_box.h"
#include "superslab.h"

#define MAX_SPARES 4

struct shared_pool {
    struct hak_superslab *with_free; /* SuperSlabs that have a free slab */
    /* Wholly free SuperSlabs kept mapped, oldest first, with when each
     * emptied: threads that come and go (a thread's slabs empty when it
     * exits, the next one's need new ones) would otherwise map and unmap
     * them over and over.  One leaves after HAKMEM_DECAY_MS, or when a
     * newer one needs its place. */
    struct hak_superslab *spare[MAX_SPARES];
    uint64_t spare_ms[MAX_SPARES];
    unsigned spares;
} __attribute__((aligned(HAK_CACHE_LINE)));

static struct shared_pool pools[HAK_MAX_NODES];

static pthread_mutex_t *lock_of(const struct shared_pool *pool)
{
    return &hak_fork_locks.node[pool - pools].shared_pool.mutex;
}

static void link_with_free(struct shared_pool *pool, struct hak_superslab *ss)
{
    ss->head.prev = NULL;
    ss->head.next = pool->with_free ? &pool->with_free->head : NULL;
    if (pool->with_free)
        pool->with_free->head.prev = &ss->head;
    pool->with_free = ss;
}

static void unlink_with_free(struct shared_pool *pool, struct hak_superslab *ss)
{
    if (ss->head.prev)
        ss->head.prev->next = ss->head.next;
    else
        pool->with_free = (struct hak_superslab *)ss->head.next;
    if (ss->head.next)
        ss->head.next->prev = ss->head.prev;
    ss->head.next = ss->head.prev = NULL;
}

struct hak_slab *hak_shared_pool_take(unsigned node)
{
    struct shared_pool *pool = &pools[node];
    pthread_mutex_lock(lock_of(pool));
    struct hak_superslab *ss = pool->with_free;
    if (!ss && pool->spares) {
        ss = pool->spare[--pool->spares];
        link_with_free(pool, ss);
    }
    if (!ss) {
        pthread_mutex_unlock(lock_of(pool));
        hak_hot_span_release_stale(node);
        /* Mapping is slow; do it outside the lock. */
        ss = hak_superslab_create(node);
        if (!ss)
            return NULL;
        pthread_mutex_lock(lock_of(pool));
        link_with_free(pool, ss);
    }
    unsigned index = (unsigned)__builtin_ctz(ss->free_slabs);
    ss->free_slabs &= ~(1u << index);
    ss->used_slabs++;
    if (!ss->free_slabs)
        unlink_with_free(pool, ss);
    pthread_mutex_unlock(lock_of(pool));
    struct hak_slab *slab = &ss->slabs[index];
    slab->state = HAK_STATE_NONE;
    return slab;
}

/* Under the pool's lock: ss, just emptied, joins the spares; returns how
 * many of the oldest left them, too old or out of room, to be retired. */
static unsigned keep_spare(struct shared_pool *pool, struct hak_superslab *ss,
                           struct hak_superslab *leaving[MAX_SPARES])
{
    uint64_t now = hak_os_now_ms();
    unsigned gone = 0;
    while (gone < pool->spares && hak_os_aged(now, pool->spare_ms[gone], hak_options.decay_ms))
        gone++;
    if (gone == 0 && pool->spares == MAX_SPARES)
        gone = 1;
    for (unsigned i = 0; i < gone; i++)
        leaving[i] = pool->spare[i];
    for (unsigned i = gone; i < pool->spares; i++) {
        pool->spare[i - gone] = pool->spare[i];
        pool->spare_ms[i - gone] = pool->spare_ms[i];
    }
    pool->spares -= gone;
    pool->spare[pool->spares] = ss;
    pool->spare_ms[pool->spares] = now;
    pool->spares++;
    return gone;
}

/* Under the pool's lock, or on a SuperSlab nobody else sees: a slab
 * taken after it could be in use already. */
static size_t decommit_free_slabs(struct hak_superslab *ss)
{
    size_t bytes = 0;
    for (uint32_t free = ss->free_slabs; free; free &= free - 1) {
        struct hak_slab *slab = &ss->slabs[__builtin_ctz(free)];
        size_t touched = (size_t)slab->touched_pages * HAK_PAGE_SIZE;
        if (touched) {
            hak_os_decommit(slab->start, touched);
            slab->touched_pages = 0; /* fresh again, for the page telemetry */
            bytes += touched;
        }
    }
    return bytes;
}

/* A wholly free SuperSlab that leaves the spares: unmapped, or in the
 * region (superslab.h), which keeps its SuperSlabs, its slabs' pages given
 * back and itself among those with free slabs, to be taken before a new
 * one is made.  Returns the bytes given back. */
static size_t retire(struct shared_pool *pool, struct hak_superslab *ss)
{
    if (!hak_superslab_region_holds(ss)) {
        hak_superslab_destroy(ss);
        return HAK_SUPERSLAB_SIZE;
    }
    size_t bytes = decommit_free_slabs(ss);
    pthread_mutex_lock(lock_of(pool));
    link_with_free(pool, ss);
    pthread_mutex_unlock(lock_of(pool));
    return bytes;
}

void hak_shared_pool_give(struct hak_slab *slab)
{
    struct hak_superslab *ss = hak_superslab_of(slab);
    struct shared_pool *pool = &pools[ss->head.node];
    struct hak_superslab *leaving[MAX_SPARES];
    unsigned left = 0;
    atomic_store_explicit(&slab->owner, NULL, memory_order_relaxed);
    slab->free_node = HAK_NO_NODE;
    slab->state = HAK_STATE_POOL;
    slab->end = slab->start; /* a stray free into it now fails validation */
    pthread_mutex_lock(lock_of(pool));
    if (!ss->free_slabs)
        link_with_free(pool, ss);
    ss->free_slabs |= 1u << hak_superslab_index(slab);
    ss->used_slabs--;
    if (ss->used_slabs == 0) {
        unlink_with_free(pool, ss);
        left = keep_spare(pool, ss, leaving);
    }
    pthread_mutex_unlock(lock_of(pool));
    for (unsigned i = 0; i < left; i++)
        retire(pool, leaving[i]);
}

size_t hak_shared_pool_release(unsigned node)
{
    struct shared_pool *pool = &pools[node];
    struct hak_superslab *spare[MAX_SPARES];
    pthread_mutex_lock(lock_of(pool));
    unsigned spares = pool->spares;
    for (unsigned i = 0; i < spares; i++)
        spare[i] = pool->spare[i];
    pool->spares = 0;
    size_t bytes = 0;
    for (struct hak_superslab *ss = pool->with_free; ss; ss = (struct hak_superslab *)ss->head.next)
        bytes += decommit_free_slabs(ss);
    pthread_mutex_unlock(lock_of(pool));
    for (unsigned i = 0; i < spares; i++)
        bytes += retire(pool, spare[i]);
    return bytes;
}

void hak_shared_pool_lock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        pthread_mutex_lock(&hak_fork_locks.node[i].shared_pool.mutex);
}

void hak_shared_pool_unlock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        pthread_mutex_unlock(&hak_fork_locks.node[i].shared_pool.mutex);
}

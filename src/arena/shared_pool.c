#include "shared_pool.h"

#include <limits.h>

#include "../fork_locks.h"
#include "../harden.h"
#include "../options.h"
#include "../numa/binding.h"
#include "../os.h"
#include "hot_span_box.h"
#include "mappings.h"
#include "slab.h"
#include "superslab.h"

/* Spares outside the region stay mapped, and count against an
 * address-space limit: at most this many. */
#define MAX_MAPPED_SPARES 4

/* SuperSlabs linked through their heads, newest first. */
struct superslab_list {
    struct hak_superslab *first, *last;
};

struct shared_pool {
    struct superslab_list with_free; /* in use, with a free slab */
    /* Wholly free SuperSlabs kept as they were, each until it has been
     * free for HAKMEM_DECAY_MS, or has lent its pages to the node's spans
     * (hak_shared_pool_lend): a program whose blocks come and go in
     * batches (a producer's thousands of blocks, freed by a consumer)
     * empties and fills SuperSlabs over and over, and threads that come
     * and go do the same.  xmalloc-test's producers and consumers, when
     * only four spares were kept and the others' pages went back at once,
     * took 400k page faults in 3 s, 2.2 s of system time, where mimalloc
     * took 17k.  The memory is what the program held within the decay. */
    struct superslab_list spares;
    unsigned mapped_spares; /* of them, outside the region */
    /* When the oldest spare was emptied (NO_SPARES without one), and
     * whether it may lend its pages while young (take_lender), for the
     * looks of hak_shared_pool_release_stale and hak_shared_pool_lend
     * without the lock: written under it as the spares change. */
    uint64_t oldest_spare_ms;
    bool oldest_lends_young;
    /* Wholly free SuperSlabs of the region whose pages went back: taken
     * after the spares, before a SuperSlab is made. */
    struct superslab_list retired;
    /* Whether a SuperSlab in use may hold a free slab to lend (lend_slabs),
     * as a give last saw one come back and no lend has found none since:
     * read without the lock (hak_shared_pool_may_lend). */
    bool in_use_lends;
} __attribute__((aligned(HAK_CACHE_LINE)));

/* Never aged (hak_os_aged): the end of time. */
#define NO_SPARES UINT64_MAX

static struct shared_pool pools[HAK_MAX_NODES] = {
    [0 ... HAK_MAX_NODES - 1] = {.oldest_spare_ms = NO_SPARES},
};

static pthread_mutex_t *lock_of(const struct shared_pool *pool)
{
    return &hak_fork_locks.node[pool - pools].shared_pool.mutex;
}

static struct hak_superslab *next_of(const struct hak_superslab *ss)
{
    return (struct hak_superslab *)ss->head.next;
}

static void list_push(struct superslab_list *list, struct hak_superslab *ss)
{
    ss->head.prev = NULL;
    ss->head.next = list->first ? &list->first->head : NULL;
    if (list->first)
        list->first->head.prev = &ss->head;
    else
        list->last = ss;
    list->first = ss;
}

static void list_remove(struct superslab_list *list, struct hak_superslab *ss)
{
    if (ss->head.prev)
        ss->head.prev->next = ss->head.next;
    else
        list->first = next_of(ss);
    if (ss->head.next)
        ss->head.next->prev = ss->head.prev;
    else
        list->last = (struct hak_superslab *)ss->head.prev;
    ss->head.next = ss->head.prev = NULL;
}

/* Whether ss may lend its pages before it is stale: in the region (spares
 * outside are few, the region being full, and one that came back would
 * count among the mapped ones). */
static bool lends_young(const struct hak_superslab *ss)
{
    return hak_superslab_region_holds(ss);
}

/* Under the pool's lock, after every change of the spares. */
static void note_oldest_spare(struct shared_pool *pool)
{
    const struct hak_superslab *last = pool->spares.last;
    __atomic_store_n(&pool->oldest_spare_ms, last ? last->emptied_ms : NO_SPARES, __ATOMIC_RELAXED);
    __atomic_store_n(&pool->oldest_lends_young, last && lends_young(last), __ATOMIC_RELAXED);
}

/* Under the pool's lock: ss, which left the spares to lend, back among
 * them in age order (another thread may have put a newer one back as the
 * oldest meanwhile). */
static void put_back_spare(struct shared_pool *pool, struct hak_superslab *ss)
{
    struct hak_superslab *after = pool->spares.last;
    while (after && after->emptied_ms < ss->emptied_ms)
        after = (struct hak_superslab *)after->head.prev;
    if (!after) {
        list_push(&pool->spares, ss);
    } else {
        ss->head.prev = &after->head;
        ss->head.next = after->head.next;
        if (after->head.next)
            after->head.next->prev = &ss->head;
        else
            pool->spares.last = ss;
        after->head.next = &ss->head;
    }
    note_oldest_spare(pool);
}

/* Under the pool's lock: ss leaves the spares for *leaving, a chain
 * through the heads that the caller retires unlocked. */
static void leave_spares(struct shared_pool *pool, struct hak_superslab *ss,
                         struct hak_superslab **leaving)
{
    list_remove(&pool->spares, ss);
    note_oldest_spare(pool);
    if (!hak_superslab_region_holds(ss))
        pool->mapped_spares--;
    ss->head.next = *leaving ? &(*leaving)->head : NULL;
    *leaving = ss;
}

/* Spares a free that empties a SuperSlab, or a malloc that takes fresh
 * memory (hak_shared_pool_release_stale), retires at most, oldest first:
 * each takes up to a madvise per slab, and a burst of them aged together
 * would stall that one call (the old cap of four spares bounded it too).
 * The others leave at the next such call or at the heaps' idle look. */
#define MAX_RETIRED_BY_CALL 4

/* Under the pool's lock: up to max of the spares free for age_ms leave. */
static void leave_older(struct shared_pool *pool, uint64_t now, uint64_t age_ms, unsigned max,
                        struct hak_superslab **leaving)
{
    for (unsigned left = 0;
         left < max && pool->spares.last && hak_os_aged(now, pool->spares.last->emptied_ms, age_ms);
         left++)
        leave_spares(pool, pool->spares.last, leaving);
}

/* Under the pool's lock: ss, just emptied, joins the spares, where one
 * outside the region may crowd out the oldest other such. */
static void keep_spare(struct shared_pool *pool, struct hak_superslab *ss, uint64_t now,
                       struct hak_superslab **leaving)
{
    if (!hak_superslab_region_holds(ss) && pool->mapped_spares++ == MAX_MAPPED_SPARES) {
        struct hak_superslab *oldest = pool->spares.last;
        while (hak_superslab_region_holds(oldest))
            oldest = (struct hak_superslab *)oldest->head.prev;
        leave_spares(pool, oldest, leaving);
    }
    ss->emptied_ms = now;
    list_push(&pool->spares, ss);
    note_oldest_spare(pool);
}

/* Under the pool's lock, or on a SuperSlab nobody else sees: a slab
 * taken after it could be in use already. */
static size_t decommit_free_slabs(struct hak_superslab *ss)
{
    size_t bytes = 0;
    for (uint32_t free = ss->free_slabs; free; free &= free - 1) {
        struct hak_slab *slab = &ss->slabs[__builtin_ctz(free)];
        size_t touched = (size_t)slab->touched_pages * HAK_PAGE_SIZE;
        /* Fresh again, for the page telemetry, and zero (hak_slab_assign),
         * unless the kernel kept the pages (locked). */
        if (touched && hak_os_decommit(slab->start, touched)) {
            slab->touched_pages = 0;
            bytes += touched;
        }
    }
    return bytes;
}

/* Wholly free ss, whose slabs took lent ranges: its slabs mapped anew, one
 * mapping with the region's again, their pages given back, as decommitted
 * ones (decommit_free_slabs otherwise).  Returns the bytes given back. */
static size_t map_slabs_anew(struct hak_superslab *ss)
{
    char *start = ss->slabs[HAK_SUPERSLAB_HEADER_SLABS].start;
    size_t bytes = (size_t)((char *)ss + HAK_SUPERSLAB_SIZE - start);
    bool anew = hak_os_map_anew(start, bytes);
    /* The new mapping, or where it failed, what was mapped again. */
    hak_numa_bind(start, bytes, ss->head.node);
    if (!anew)
        return decommit_free_slabs(ss);
    for (unsigned i = HAK_SUPERSLAB_HEADER_SLABS; i < HAK_SLABS_PER_SUPERSLAB; i++)
        ss->slabs[i].touched_pages = 0;
    hak_mappings_map_anew(&ss->mappings);
    return bytes;
}

/* The SuperSlabs of a chain that left the spares: unmapped, or in the
 * region (superslab.h), which keeps its SuperSlabs, their slabs' pages
 * given back, among the retired.  Returns the bytes given back. */
static size_t retire(struct shared_pool *pool, struct hak_superslab *leaving)
{
    size_t bytes = 0;
    while (leaving) {
        struct hak_superslab *ss = leaving;
        leaving = next_of(ss);
        if (!hak_superslab_region_holds(ss)) {
            hak_superslab_destroy(ss);
            bytes += HAK_SUPERSLAB_SIZE;
            continue;
        }
        /* Mapped anew too where a move out of it failed, at a mapping
         * the bits do not know of: known again, it may lend again. */
        bool anew = ss->mappings.lent_ranges || !hak_mappings_known(&ss->mappings);
        bytes += anew ? map_slabs_anew(ss) : decommit_free_slabs(ss);
        pthread_mutex_lock(lock_of(pool));
        list_push(&pool->retired, ss);
        pthread_mutex_unlock(lock_of(pool));
    }
    return bytes;
}

/* Under the pool's lock: the SuperSlab to take a slab from, one in use
 * first, then the newest spare, whose pages are likeliest still cached,
 * then a retired one (*retired set: its pages were given back); NULL if
 * none. */
static struct hak_superslab *with_free_slab(struct shared_pool *pool, bool *retired)
{
    struct hak_superslab *ss = pool->with_free.first;
    if (ss)
        return ss;
    if (pool->spares.first) {
        ss = pool->spares.first;
        list_remove(&pool->spares, ss);
        note_oldest_spare(pool);
        if (!hak_superslab_region_holds(ss))
            pool->mapped_spares--;
    } else if (pool->retired.first) {
        ss = pool->retired.first;
        list_remove(&pool->retired, ss);
        *retired = true;
        return ss; /* the caller fills its slabs first (fill_fresh_slabs) */
    } else
        return NULL;
    list_push(&pool->with_free, ss);
    return ss;
}

/* The count slabs of ss from first take the pages of the node's hot spans
 * (hak_hot_span_lend), as many as they have, from their front; returns the
 * bytes taken.  The larger touched count where a decommit was refused
 * (locked memory): the words of the slab's last class lie there still. */
static size_t fill_from_box(struct hak_superslab *ss, unsigned first, unsigned count, unsigned node)
{
    size_t lent = hak_hot_span_lend(node, ss->slabs[first].start, count * HAK_SLAB_SIZE,
                                    &ss->mappings, (char *)ss);
    size_t left = lent;
    for (unsigned i = first; i < first + count && left; i++) {
        size_t here = left < HAK_SLAB_SIZE ? left : HAK_SLAB_SIZE;
        uint32_t pages = (uint32_t)(here / HAK_PAGE_SIZE);
        if (ss->slabs[i].touched_pages < pages)
            ss->slabs[i].touched_pages = pages;
        left -= here;
    }
    return lent;
}

/* ss, made or retired, out of the lists: its free slabs, whose pages are
 * fresh, take those of the node's hot spans (fill_from_box), and fault none
 * in where they do (a phase of small blocks after one of bigger ones:
 * bench/phases); where none could lend, the stale spans give theirs back,
 * as they did before lending.  Not at level 2, whose slabs end in guard
 * pages. */
static void fill_fresh_slabs(struct hak_superslab *ss, unsigned node)
{
    if (hak_harden.guard_bytes) {
        hak_hot_span_release_stale(node);
        return;
    }
    unsigned first = (unsigned)__builtin_ctz(ss->free_slabs);
    /* Where none could lend; stale spans left after a lend stay for the
     * next SuperSlab (the call's bound on its work, or the slabs full). */
    if (!fill_from_box(ss, first, HAK_SLABS_PER_SUPERSLAB - first, node))
        hak_hot_span_release_stale(node);
}

/* Whether node's box holds enough for a move (HAK_LEND_GRAIN), read
 * without its locks. */
static bool box_may_fill(unsigned node)
{
    uint64_t spans = 0;
    return hak_hot_span_retained(node, &spans) >= HAK_LEND_GRAIN;
}

/* Under the pool's lock: ss's free slabs in mask leave its free ones,
 * counted in use, while their pages move (unlocked): no other thread takes
 * them, and no give makes ss a spare meanwhile. */
static void reserve_slabs(struct shared_pool *pool, struct hak_superslab *ss, uint32_t mask)
{
    ss->free_slabs &= ~mask;
    ss->used_slabs += (unsigned)__builtin_popcount(mask);
    if (!ss->free_slabs)
        list_remove(&pool->with_free, ss);
}

/* Under the pool's lock: the slabs of ss in mask, which were in use or
 * reserved, are free; ss, where none of its slabs is in use any more, a
 * spare, and spares old enough leave for *leaving (retire them unlocked). */
static void slabs_back(struct shared_pool *pool, struct hak_superslab *ss, uint32_t mask,
                       struct hak_superslab **leaving)
{
    if (!mask)
        return;
    if (!ss->free_slabs)
        list_push(&pool->with_free, ss);
    ss->free_slabs |= mask;
    ss->used_slabs -= (unsigned)__builtin_popcount(mask);
    if (ss->used_slabs == 0) {
        uint64_t now = hak_os_now_ms();
        list_remove(&pool->with_free, ss);
        leave_older(pool, now, hak_options.decay_ms, MAX_RETIRED_BY_CALL, leaving);
        keep_spare(pool, ss, now, leaving);
    }
}

/* The slabs of ss in mask that count pages touched pages: 0, those with no
 * page, which would fault theirs in; HAK_SLAB_PAGES, those with pages to
 * lend (lend_slabs). */
static uint32_t slabs_touched(const struct hak_superslab *ss, uint32_t mask, uint32_t pages)
{
    uint32_t found = 0;
    for (; mask; mask &= mask - 1)
        if (ss->slabs[__builtin_ctz(mask)].touched_pages == pages)
            found |= mask & -mask;
    return found;
}

/* The runs of mask's slabs of ss, reserved, take the node's hot spans'
 * pages (fill_from_box), until the spans run short. */
static void fill_slabs_from_box(struct hak_superslab *ss, uint32_t mask, unsigned node)
{
    while (mask) {
        unsigned first = (unsigned)__builtin_ctz(mask), count = 0;
        while (first + count < HAK_SLABS_PER_SUPERSLAB && (mask >> (first + count) & 1))
            count++;
        mask &= ~((((uint32_t)1 << count) - 1) << first);
        if (fill_from_box(ss, first, count, node) < count * HAK_SLAB_SIZE)
            return;
    }
}

struct hak_slab *hak_shared_pool_take(unsigned node)
{
    struct shared_pool *pool = &pools[node];
    bool retired = false;
    pthread_mutex_lock(lock_of(pool));
    struct hak_superslab *ss = with_free_slab(pool, &retired);
    bool fresh = !ss || retired;
    if (fresh) {
        /* A retired SuperSlab's slabs are fresh memory, as a new one's
         * are.  Mapping is slow; do it outside the lock. */
        pthread_mutex_unlock(lock_of(pool));
        if (!ss)
            ss = hak_superslab_create(node);
        if (!ss)
            return NULL;
        fill_fresh_slabs(ss, node);
        pthread_mutex_lock(lock_of(pool));
        list_push(&pool->with_free, ss);
    }
    unsigned index = (unsigned)__builtin_ctz(ss->free_slabs);
    uint32_t no_pages = 0;
    /* A free slab with no page, where the box holds spans: it and the
     * SuperSlab's other free slabs with none take the spans' pages, as a
     * fresh SuperSlab's do, where they would fault in their own while the
     * spans stay resident.  Such slabs are the ones that lent their pages
     * to spans (lend_in_use_slabs), and those of a SuperSlab made or taken
     * back when the box had less than its slabs: a program whose phases of
     * small and bigger blocks follow each other with no pause has them in
     * every phase.  The one taken stays reserved: counted in use, ss cannot
     * become a spare meanwhile.  Not at level 2, whose slabs end in guard
     * pages, nor once half the moved ranges the process allows live: those
     * moved into a SuperSlab live until it retires, which one that a few
     * long-lived blocks keep in use never does, and with no such bound a
     * program that keeps one small block in every 128 KiB took them all
     * within ten phases, and every lend after was refused
     * (hak_os_lent_ranges_to_spare). */
    if (!fresh && !hak_harden.guard_bytes && !ss->slabs[index].touched_pages &&
        hak_os_lent_ranges_to_spare() && box_may_fill(node))
        no_pages = slabs_touched(ss, ss->free_slabs, 0);
    struct hak_superslab *leaving = NULL;
    if (no_pages) {
        reserve_slabs(pool, ss, no_pages);
        pthread_mutex_unlock(lock_of(pool));
        fill_slabs_from_box(ss, no_pages, node);
        pthread_mutex_lock(lock_of(pool));
        slabs_back(pool, ss, no_pages & ~(1u << index), &leaving);
    } else {
        reserve_slabs(pool, ss, 1u << index);
    }
    pthread_mutex_unlock(lock_of(pool));
    retire(pool, leaving);
    struct hak_slab *slab = &ss->slabs[index];
    slab->state = HAK_STATE_NONE;
    return slab;
}

void hak_shared_pool_give(struct hak_slab *slab)
{
    struct hak_superslab *ss = hak_superslab_of(slab);
    struct shared_pool *pool = &pools[ss->head.node];
    struct hak_superslab *leaving = NULL;
    atomic_store_explicit(&slab->owner, NULL, memory_order_relaxed);
    slab->free_node = HAK_NO_NODE;
    /* A stray free into it now fails validation: the page-map free's node
     * test, the region's block-start test (its pages' bytes say no class,
     * superslab.h), and the slow paths' test, which a bound of 0 fails. */
    slab->block_limit = 0;
    hak_superslab_clear_page_classes(slab);
    slab->state = HAK_STATE_POOL;
    slab->end = slab->start;
    bool lends = slab->touched_pages == HAK_SLAB_PAGES;
    pthread_mutex_lock(lock_of(pool));
    slabs_back(pool, ss, 1u << hak_superslab_index(slab), &leaving);
    if (lends && ss->used_slabs && !__atomic_load_n(&pool->in_use_lends, __ATOMIC_RELAXED))
        __atomic_store_n(&pool->in_use_lends, true, __ATOMIC_RELAXED);
    pthread_mutex_unlock(lock_of(pool));
    retire(pool, leaving);
}

static void release_older(unsigned node, uint64_t now, uint64_t age_ms, unsigned max)
{
    struct shared_pool *pool = &pools[node];
    struct hak_superslab *leaving = NULL;
    pthread_mutex_lock(lock_of(pool));
    leave_older(pool, now, age_ms, max, &leaving);
    pthread_mutex_unlock(lock_of(pool));
    retire(pool, leaving);
}

void hak_shared_pool_release_aged(unsigned node)
{
    release_older(node, hak_os_now_ms(), hak_options.decay_ms, UINT_MAX);
}

/* A few at a time, for this is a malloc (48 MiB of spares retired at
 * once took 5 ms).  It comes with every large block mapped, and
 * hak_shared_pool_lend's look with every span the PageArena hands out, so
 * both look at the oldest spare's age (and the latter at whether it lends
 * young) before they take the lock, which every thread of the node takes
 * for its slabs. */
void hak_shared_pool_release_stale(unsigned node)
{
    uint64_t oldest = __atomic_load_n(&pools[node].oldest_spare_ms, __ATOMIC_RELAXED);
    if (oldest == NO_SPARES)
        return;
    uint64_t now = hak_os_now_ms(), age_ms = hak_options.decay_ms / HAK_HOT_SPAN_STALE_FRACTION;
    if (hak_os_aged(now, oldest, age_ms))
        release_older(node, now, age_ms, MAX_RETIRED_BY_CALL);
}

/* Moves the pages of the wholly touched ones of ss's free slabs in slabs
 * (ss's own, or reserved: reserve_slabs) to dst, as many as
 * fill it to less than a slab (HAK_LEND_GRAIN) from its room, each
 * slab's blocks' free-list words cleared first (their links are not to
 * reach the span's blocks); returns the bytes of dst taken, to being its
 * container's mappings (at to_base).  Such slabs side by side move in one
 * call where they are one kernel mapping: one mapping where they land,
 * and one flush of the TLBs.  A slab carved in part keeps its pages: they
 * go back with the SuperSlab's once it retires (at level 2 every slab,
 * whose last page is its guard: none lends there).  A move the kernel
 * refused sets *refused, a failed one's bytes counted as taken, and the
 * slabs keep what did not move. */
static size_t lend_slabs(struct hak_superslab *ss, uint32_t slabs, unsigned node, char *dst,
                         size_t room, struct hak_mappings *to, const char *to_base, bool *refused)
{
    enum { SLAB_PAGES = HAK_SLAB_SIZE / HAK_PAGE_SIZE };
    size_t lent = 0;
    uint64_t free = slabs;
    while (free && room - lent >= HAK_LEND_GRAIN) {
        unsigned first = (unsigned)__builtin_ctzll(free);
        struct hak_slab *slab = &ss->slabs[first];
        free &= ~((uint64_t)1 << first);
        if (slab->touched_pages != SLAB_PAGES)
            continue;
        unsigned count = 1;
        while (first + count < HAK_SLABS_PER_SUPERSLAB && (free >> (first + count) & 1) &&
               slab[count].touched_pages == SLAB_PAGES &&
               (count + 1) * HAK_SLAB_SIZE <= room - lent)
            free &= ~((uint64_t)1 << (first + count++));
        size_t run = count * HAK_SLAB_SIZE;
        for (unsigned i = 0; i < count; i++)
            hak_slab_clear_touched_free_words(&slab[i]);
        size_t moved, taken;
        enum hak_lend_result result =
            hak_mappings_lend(&ss->mappings, (char *)ss, slab->start, run, to, to_base, dst + lent,
                              node, &moved, &taken);
        /* The run's last bytes moved: each slab keeps what lies below. */
        size_t kept = run - moved;
        for (unsigned i = 0; i < count; i++) {
            size_t below = kept > i * HAK_SLAB_SIZE ? kept - i * HAK_SLAB_SIZE : 0;
            slab[i].touched_pages =
                (uint32_t)((below < HAK_SLAB_SIZE ? below : HAK_SLAB_SIZE) / HAK_PAGE_SIZE);
        }
        /* A failed move's bytes count as lent, for calloc to zero what they
         * may hold. */
        lent += taken;
        if (result != HAK_LENT) {
            *refused = true;
            break;
        }
    }
    return lent;
}

/* SuperSlabs in use a lend looks over, under the pool's lock, for free
 * slabs to lend: this is a malloc. */
#define MAX_IN_USE_LOOKED 32

/* Under the pool's lock: a SuperSlab in use with free slabs to lend, and
 * *mask those slabs; NULL where the first MAX_IN_USE_LOOKED have none,
 * which notes that none may until a give sees one come back. */
static struct hak_superslab *in_use_lender(struct shared_pool *pool, uint32_t *mask)
{
    unsigned looked = 0;
    for (struct hak_superslab *ss = pool->with_free.first; ss && looked < MAX_IN_USE_LOOKED;
         ss = next_of(ss), looked++)
        if (hak_mappings_known(&ss->mappings) &&
            (*mask = slabs_touched(ss, ss->free_slabs, HAK_SLAB_PAGES)) != 0)
            return ss;
    __atomic_store_n(&pool->in_use_lends, false, __ATOMIC_RELAXED);
    return NULL;
}

/* Where the spares could not fill dst: the free slabs of SuperSlabs in use
 * lend their pages, reserved meanwhile (reserve_slabs), from as many
 * SuperSlabs as *lenders leaves to MAX_RETIRED_BY_CALL.  The small classes'
 * caches keep a slab or two in use in many SuperSlabs, whose free slabs
 * would otherwise stay resident through a phase of bigger blocks, as the
 * spans that phase faults in (a program whose phases follow each other
 * with no pause: up to 27 SuperSlabs holding 50 MB of free slabs).  Returns
 * the bytes of dst taken; *stopped where the kernel refused a move. */
static size_t lend_in_use_slabs(struct shared_pool *pool, unsigned node, char *dst, size_t size,
                                struct hak_mappings *to, const char *to_base, unsigned *lenders,
                                bool *stopped)
{
    size_t lent = 0;
    while (size - lent >= HAK_LEND_GRAIN && *lenders < MAX_RETIRED_BY_CALL && !*stopped) {
        uint32_t mask = 0;
        pthread_mutex_lock(lock_of(pool));
        struct hak_superslab *ss = in_use_lender(pool, &mask);
        /* No more reserved than dst has room for: the others stay free for
         * the threads that take slabs meanwhile. */
        for (size_t room = (size_t)__builtin_popcount(mask) * HAK_SLAB_SIZE; room > size - lent;
             room -= HAK_SLAB_SIZE)
            mask &= ~(1u << (31 - __builtin_clz(mask)));
        if (ss)
            reserve_slabs(pool, ss, mask);
        pthread_mutex_unlock(lock_of(pool));
        if (!ss)
            break;
        lent += lend_slabs(ss, mask, node, dst + lent, size - lent, to, to_base, stopped);
        (*lenders)++;
        struct hak_superslab *leaving = NULL;
        pthread_mutex_lock(lock_of(pool));
        slabs_back(pool, ss, mask, &leaving);
        pthread_mutex_unlock(lock_of(pool));
        retire(pool, leaving);
    }
    return lent;
}

/* Without the lock: whether the oldest spare may lend, stale or young
 * (take_lender), as the pool last noted it; false without spares. */
static bool oldest_may_lend(const struct shared_pool *pool, uint64_t now, uint64_t age_ms)
{
    return hak_os_aged(now, __atomic_load_n(&pool->oldest_spare_ms, __ATOMIC_RELAXED), age_ms) ||
           __atomic_load_n(&pool->oldest_lends_young, __ATOMIC_RELAXED);
}

/* Under the pool's lock: the oldest spare leaves the spares to lend its
 * pages where it is stale, or young and lends_young; NULL where it cannot.
 * Young: where the small classes take its slabs again after it lent, the
 * SuperSlab faults in what the span would have, no more (a phase of 1-4
 * KiB blocks right after one of small ones: bench/phases with no pauses,
 * 114 MB resident at its peak and 29k faults when only stale spares lent,
 * 71 MB and 18k since). */
static struct hak_superslab *take_lender(struct shared_pool *pool, uint64_t now, uint64_t age_ms)
{
    struct hak_superslab *ss = pool->spares.last;
    if (!ss || (!hak_os_aged(now, ss->emptied_ms, age_ms) && !lends_young(ss)))
        return NULL;
    struct hak_superslab *leaving = NULL;
    leave_spares(pool, ss, &leaving);
    return ss;
}

bool hak_shared_pool_may_lend(unsigned node)
{
    const struct shared_pool *pool = &pools[node];
    if (__atomic_load_n(&pool->in_use_lends, __ATOMIC_RELAXED))
        return true;
    if (__atomic_load_n(&pool->oldest_spare_ms, __ATOMIC_RELAXED) == NO_SPARES)
        return false;
    uint64_t age_ms = hak_options.decay_ms / HAK_HOT_SPAN_STALE_FRACTION;
    return oldest_may_lend(pool, hak_os_now_ms(), age_ms);
}

size_t hak_shared_pool_lend(unsigned node, char *dst, size_t size, size_t need,
                            struct hak_mappings *to, const char *to_base)
{
    struct shared_pool *pool = &pools[node];
    uint64_t oldest = __atomic_load_n(&pool->oldest_spare_ms, __ATOMIC_RELAXED);
    bool in_use_lends = __atomic_load_n(&pool->in_use_lends, __ATOMIC_RELAXED);
    if (oldest == NO_SPARES && !in_use_lends)
        return 0;
    uint64_t now = hak_os_now_ms(), age_ms = hak_options.decay_ms / HAK_HOT_SPAN_STALE_FRACTION;
    bool spares_lend = oldest != NO_SPARES && oldest_may_lend(pool, now, age_ms);
    if (!spares_lend && !in_use_lends)
        return 0;
    /* Moves land on the grain (mappings.h): the pages before dst's first
     * grain line fault in, counted with the lent ones that follow them
     * (calloc zeroes them), for what a lend fills is a prefix of dst.  The
     * PageArena starts a span that may take lent pages on the grain where
     * it can (page_arena.c). */
    size_t head = hak_lend_grain_up((uintptr_t)dst) - (uintptr_t)dst;
    if (head > size)
        head = size;
    dst += head;
    size -= head;
    size_t lent = 0;
    /* A move the kernel refused, or the bound on lent ranges reached: no
     * more this call. */
    bool stopped = !hak_os_can_lend();
    if (stopped && in_use_lends) /* a give sets it again */
        __atomic_store_n(&pool->in_use_lends, false, __ATOMIC_RELAXED);
    /* Pages of at most as many spares as a release retires, for this is a
     * malloc; spares with none leave on the way. */
    unsigned lent_from = 0;
    while (spares_lend && !stopped && size - lent >= HAK_LEND_GRAIN &&
           lent_from < MAX_RETIRED_BY_CALL && oldest != NO_SPARES) {
        pthread_mutex_lock(lock_of(pool));
        struct hak_superslab *ss = take_lender(pool, now, age_ms);
        pthread_mutex_unlock(lock_of(pool));
        if (!ss)
            break;
        size_t moved =
            lend_slabs(ss, ss->free_slabs, node, dst + lent, size - lent, to, to_base, &stopped);
        lent += moved;
        lent_from += moved != 0;
        /* Pages left to lend where dst has room for them: the kernel
         * refused, or the bound on lent ranges was reached. */
        bool still_holds_pages = slabs_touched(ss, ss->free_slabs, HAK_SLAB_PAGES) != 0;
        bool dst_full = size - lent < HAK_LEND_GRAIN;
        if (still_holds_pages && dst_full && !stopped && hak_superslab_region_holds(ss)) {
            /* Back among the spares in age order, for the next span (one
             * outside the region leaves: a spare kept meanwhile may have
             * taken its place among the mapped ones).  One the kernel
             * refused leaves, however young, rather than be tried again
             * at every span. */
            pthread_mutex_lock(lock_of(pool));
            put_back_spare(pool, ss);
            pthread_mutex_unlock(lock_of(pool));
            break;
        }
        retire(pool, ss);
        oldest = __atomic_load_n(&pool->oldest_spare_ms, __ATOMIC_RELAXED);
        stopped |= still_holds_pages && !dst_full;
        if (!oldest_may_lend(pool, now, age_ms))
            break;
    }
    if (in_use_lends)
        lent += lend_in_use_slabs(pool, node, dst + lent, size - lent, to, to_base, &lent_from,
                                  &stopped);
    /* The rest of dst faults in fresh: stale spares that could not lend
     * leave as they would have without lending (those left by the bound
     * on this call's work stay for the next span). */
    size_t filled = lent ? head + lent : 0;
    if (filled < need && lent_from < MAX_RETIRED_BY_CALL && oldest != NO_SPARES &&
        hak_os_aged(now, oldest, age_ms))
        release_older(node, now, age_ms, MAX_RETIRED_BY_CALL);
    return filled;
}

size_t hak_shared_pool_release(unsigned node)
{
    struct shared_pool *pool = &pools[node];
    struct hak_superslab *leaving = NULL;
    pthread_mutex_lock(lock_of(pool));
    while (pool->spares.last)
        leave_spares(pool, pool->spares.last, &leaving);
    size_t bytes = 0;
    for (struct hak_superslab *ss = pool->with_free.first; ss; ss = next_of(ss))
        bytes += decommit_free_slabs(ss);
    pthread_mutex_unlock(lock_of(pool));
    return bytes + retire(pool, leaving);
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

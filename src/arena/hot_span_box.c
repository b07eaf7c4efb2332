#include "hot_span_box.h"

#include <string.h>

#include "../fork_locks.h"
#include "../harden.h"
#include "../numa/binding.h"
#include "../options.h"
#include "../os.h"
#include "../stats.h"
#include "../thread_ordinal.h"
#include "mappings.h"
#include "meta.h"
#include "page_arena.h"
#include "shared_pool.h"
#include "slab.h"
#include "span_bins.h"

/* Neighbouring hot spans merge, up to a whole chunk. */
#define MAX_HOT_PAGES HAK_ARENA_USABLE_PAGES

/* The budget grows by doublings, up to 8 times HAKMEM_HOT_BYTES. */
#define MAX_BUDGET_DOUBLINGS 3

struct hot_span_box {
    size_t bytes;
    size_t spans;
    struct hak_slab *oldest; /* age order, through age_next/age_prev */
    struct hak_slab *newest;
    struct hak_span_bins bins; /* the hottest of a length first */
    uint64_t squeezed_ms;      /* when spans last left for want of room */
    unsigned doublings;        /* of the budget (hot_budget) */
    uint32_t longest;          /* pages of the longest span, read without the lock */
    /* Descriptors left over by merges (through next), for the next split:
     * each merge gives one up and each cut takes one, and two threads
     * cycling L25 blocks took the metadata allocator's one lock at both
     * (l25_steady: a third of the operations each). */
    struct hak_slab *spare_descs;
    uint32_t spare_count;
} __attribute__((aligned(HAK_CACHE_LINE)));

/* Each node's box comes in shards, each a box of its own, with its own
 * lock and budget: a thread puts in one shard, unless the span has a hot
 * neighbour in another (shard_for_put), and takes from it first, then
 * from the others.  Two threads cycling L25 blocks through one box took
 * its lock twice an operation each, and in a third of the runs slept on
 * it some 700 times (l25_steady, 2 CPUs: 1.2M ops/s and 600 ms of CPU
 * time, against 1.9M and 390 ms in the runs that did not).  A span merges
 * only with neighbours of its own shard. */
static struct hot_span_box boxes[HAK_MAX_NODES][HAK_HOT_SPAN_SHARDS];

static unsigned shard_of(const struct hot_span_box *box)
{
    return (unsigned)(box - &boxes[0][0]) % HAK_HOT_SPAN_SHARDS;
}

static pthread_mutex_t *lock_of(const struct hot_span_box *box)
{
    size_t index = (size_t)(box - &boxes[0][0]);
    return &hak_fork_locks.node[index / HAK_HOT_SPAN_SHARDS]
                .hot_span[index % HAK_HOT_SPAN_SHARDS]
                .mutex;
}

/* The calling thread's shard, by its ordinal: threads take one each in the
 * order they first allocated. */
_Static_assert(HAK_THREAD_ORDINALS % HAK_HOT_SPAN_SHARDS == 0, "shards in turn");
static unsigned my_shard(void)
{
    return hak_thread_ordinal() % HAK_HOT_SPAN_SHARDS;
}

static size_t span_bytes(const struct hak_slab *span)
{
    return (size_t)span->pages * HAK_PAGE_SIZE;
}

static void age_append(struct hot_span_box *box, struct hak_slab *span)
{
    span->age_next = NULL;
    span->age_prev = box->newest;
    if (box->newest)
        box->newest->age_next = span;
    else
        box->oldest = span;
    box->newest = span;
    box->spans++;
}

/* span as the oldest of box, as old as the oldest there at least, so that
 * the ages stay in order for collect_evictions. */
static void age_prepend(struct hot_span_box *box, struct hak_slab *span)
{
    if (box->oldest && box->oldest->freed_ms < span->freed_ms)
        span->freed_ms = box->oldest->freed_ms;
    span->age_prev = NULL;
    span->age_next = box->oldest;
    if (box->oldest)
        box->oldest->age_prev = span;
    else
        box->newest = span;
    box->oldest = span;
    box->spans++;
}

static void unlink_span(struct hot_span_box *box, struct hak_slab *span)
{
    hak_span_bins_remove(&box->bins, span);
    if (span->age_prev)
        span->age_prev->age_next = span->age_next;
    else
        box->oldest = span->age_next;
    if (span->age_next)
        span->age_next->age_prev = span->age_prev;
    else
        box->newest = span->age_prev;
    span->age_next = span->age_prev = NULL;
    box->bytes -= span_bytes(span);
    box->spans--;
}

/* Under the lock, once the box's spans changed. */
static void note_longest(struct hot_span_box *box)
{
    __atomic_store_n(&box->longest, hak_span_bins_longest(&box->bins), __ATOMIC_RELAXED);
}

/* The bytes the box keeps: HAKMEM_HOT_BYTES, doubled for a program that
 * keeps asking for spans the budget made it give back.  Such a program
 * (l25 ten times longer, two threads cycling 64 KiB-1 MiB blocks through
 * some 40 MiB) had every span it freed faulted in again a moment later:
 * 40.6k faults and 1.25M ops/s under 32 MiB, 17.5k and 1.6-1.8M under 48
 * or 64 MiB, as under no bound at all.  A budget the program set with
 * mallopt stays as set. */
static size_t hot_budget(const struct hot_span_box *box)
{
    size_t bytes = hak_options_hot_bytes();
    if (hak_options_hot_bytes_fixed())
        return bytes;
    return bytes > SIZE_MAX >> box->doublings ? SIZE_MAX : bytes << box->doublings;
}

/* Whether the budget may double yet. */
static bool may_grow(const struct hot_span_box *box)
{
    return box->doublings < MAX_BUDGET_DOUBLINGS && !hak_options_hot_bytes_fixed();
}

/* Why spans leave the box (collect_evictions). */
enum eviction_cause {
    BY_USE,     /* a young put or a take: over budget, or idle for HAKMEM_DECAY_MS */
    BY_DISCARD, /* a stale put (a discard): idle for HAKMEM_DECAY_MS only */
    BY_DECAY,   /* hak_hot_span_release_aged */
    BY_RELEASE, /* malloc_trim, or fresh memory mapped (release_stale) */
};

static void evict_oldest(struct hot_span_box *box, struct hak_slab **evicted)
{
    struct hak_slab *span = box->oldest;
    unlink_span(box, span);
    __atomic_store_n(&span->kind, HAK_SLAB_INVALID, __ATOMIC_RELAXED);
    span->next = *evicted;
    *evicted = span;
}

/* How recently the spans a squeeze evicts were freed, and how recent the
 * squeeze, for a miss to grow the budget: a sixteenth of HAKMEM_DECAY_MS,
 * its own fraction (the window staleness had before it went to a
 * sixty-fourth, which left the budget's growth alone).  Spans stale (a
 * sixty-fourth) but freed within it count: bench/phases with no pauses
 * takes its Mid spans back every 60-80 ms, which the box, squeezed of
 * stale spans only, never grew for, while it faulted in a third of them
 * every round (265k faults in 100 rounds; 32k with the budget doubled
 * once, the same peak RSS). */
#define SQUEEZE_WINDOW_FRACTION 16

/* Unlinks what is older than max_age_ms, then, but at a discard, what is
 * over budget; the caller decommits it unlocked.  Times are read before
 * the lock, so an entry may be newer than now.  Spans idle for the whole
 * decay take a doubling of the budget with them: the program no longer
 * needs that much.  Spans freed within the squeeze window that a put or
 * a take sends away for want of room mark the box squeezed
 * (grow_after_miss), unless the halving just now made the room short;
 * older ones do not: nothing was about to take them.  A discard's spans
 * count too, though put stale (a sixty-fourth of the decay ago, or as old
 * as the box's oldest: age_prepend), where they leave within the window:
 * what a discard leaves over the budget, evicted at the next put or take,
 * is what the program took back next in bench/phases.  Such a squeeze
 * grows the budget at the next miss of any length, as one of young spans
 * does. */
static struct hak_slab *collect_evictions(struct hot_span_box *box, uint64_t now,
                                          uint64_t max_age_ms, enum eviction_cause cause)
{
    struct hak_slab *evicted = NULL;
    bool aged_out = false;
    while (box->oldest && hak_os_aged(now, box->oldest->freed_ms, max_age_ms)) {
        evict_oldest(box, &evicted);
        aged_out = true;
    }
    bool halved = aged_out && cause != BY_RELEASE && box->doublings;
    if (halved)
        box->doublings--;
    /* Over budget, go down to three quarters of it: one batch of evictions
     * then, whose neighbouring spans share a madvise call, instead of one
     * call per put (each call flushes every CPU's TLB for the process).
     * Not at a discard: the span was resident in a cache already, and the
     * SuperSlab its thread takes next takes its pages.  Put as the oldest,
     * the discarded spans evicted themselves at once, and the SuperSlab
     * faulted in as many pages (bench/phases: 4.9k and 3.9k in its second
     * and third small phases, 0.5k and none since).  What a discard leaves
     * over goes at the shard's next young put or take, the stale spans
     * first, or with them all: lent, at the node's next fresh memory
     * (release_stale), or within the decay (release_aged). */
    size_t budget = hot_budget(box);
    if (box->bytes > budget && cause != BY_DISCARD) {
        uint64_t window_ms = hak_options.decay_ms / SQUEEZE_WINDOW_FRACTION;
        bool squeezed = false;
        while (box->oldest && box->bytes > budget / 4 * 3) {
            squeezed |= !hak_os_aged(now, box->oldest->freed_ms, window_ms);
            evict_oldest(box, &evicted);
        }
        if (squeezed && cause == BY_USE && !halved && may_grow(box))
            box->squeezed_ms = now;
    }
    return evicted;
}

/* A take found no span: when spans left for want of room in the last
 * SQUEEZE_WINDOW_FRACTION of HAKMEM_DECAY_MS, they would likely have
 * served it, and the budget doubles. */
static void grow_after_miss(struct hot_span_box *box, uint64_t now)
{
    if (!box->squeezed_ms)
        return;
    bool recent =
        !hak_os_aged(now, box->squeezed_ms, hak_options.decay_ms / SQUEEZE_WINDOW_FRACTION);
    box->squeezed_ms = 0; /* once either way: empty, the box then misses with no lock */
    if (recent && may_grow(box)) {
        box->doublings++;
        hak_stat_add(HAK_STAT_HOT_BUDGET_GROWTHS, 1);
    }
}

/* Sorts a list of spans by address (merge sort through next). */
static struct hak_slab *sort_by_address(struct hak_slab *list)
{
    if (!list || !list->next)
        return list;
    struct hak_slab *half = list, *fast = list->next;
    while (fast && fast->next) {
        half = half->next;
        fast = fast->next->next;
    }
    struct hak_slab *second = half->next;
    half->next = NULL;
    struct hak_slab *a = sort_by_address(list), *b = sort_by_address(second);
    struct hak_slab *head = NULL, **tail = &head;
    while (a && b) {
        struct hak_slab **smaller = a->start < b->start ? &a : &b;
        *tail = *smaller;
        tail = &(*smaller)->next;
        *smaller = (*smaller)->next;
    }
    *tail = a ? a : b;
    return head;
}

/* Ranges decommitted in one call. */
#define DECOMMIT_BATCH 64

/* Decommits evicted spans, one range per run of adjacent ones, many runs
 * in one call, and returns them to the PageArena. */
static void release(struct hak_slab *evicted)
{
    evicted = sort_by_address(evicted);
    while (evicted) {
        struct iovec runs[DECOMMIT_BATCH];
        size_t count = 0;
        struct hak_slab *span = evicted;
        while (span && count < DECOMMIT_BATCH) {
            char *run_start = span->start;
            char *run_end = run_start;
            while (span && span->start == run_end) {
                run_end += span_bytes(span);
                span = span->next;
            }
            runs[count++] = (struct iovec){run_start, (size_t)(run_end - run_start)};
        }
        hak_os_decommit_ranges(runs, count);
        while (evicted != span) {
            struct hak_slab *next = evicted->next;
            hak_page_arena_free(evicted);
            hak_stat_add(HAK_STAT_HOT_EVICTIONS, 1);
            evicted = next;
        }
    }
}

/* Puts desc in old's place in the age order. */
static void age_replace(struct hot_span_box *box, struct hak_slab *old, struct hak_slab *desc)
{
    desc->age_prev = old->age_prev;
    desc->age_next = old->age_next;
    if (desc->age_prev)
        desc->age_prev->age_next = desc;
    else
        box->oldest = desc;
    if (desc->age_next)
        desc->age_next->age_prev = desc;
    else
        box->newest = desc;
    old->age_next = old->age_prev = NULL;
}

/* A descriptor for a split, zeroed as hak_span_desc_alloc gives it. */
static struct hak_slab *take_desc(struct hot_span_box *box)
{
    struct hak_slab *desc = box->spare_descs;
    if (!desc)
        return hak_span_desc_alloc();
    box->spare_descs = desc->next;
    box->spare_count--;
    memset(desc, 0, sizeof *desc);
    return desc;
}

/* Keeps *desc, a merge's leftover, for a split, when the box has room;
 * *desc is then NULL, and otherwise for the caller to free after the
 * lock. */
static void keep_desc(struct hot_span_box *box, struct hak_slab **desc)
{
    if (!*desc || box->spare_count == HAK_HOT_SPAN_SPARE_DESCS)
        return;
    (*desc)->next = box->spare_descs;
    box->spare_descs = *desc;
    box->spare_count++;
    *desc = NULL;
}

/* Cuts the first pages pages off span, which become the span returned; the
 * rest stays in the box with span's age.  A larger span serves a smaller
 * request, so that freed memory of any length is reused before a fresh
 * page is touched; from the front, so that spans freed side by side and
 * merged come back in the order they were carved.  The shorter part takes
 * the new descriptor desc, whose pages must be mapped to it (the longer
 * keeps span's, to which its pages map already): the front's only at its
 * ends here, where the rest stays span's (*mapped false: the caller maps
 * the pages between after the lock); the rest's all, under the lock, as
 * the box keeps them (*mapped true). */
static struct hak_slab *split_head(struct hot_span_box *box, struct hak_slab *span,
                                   struct hak_slab *desc, uint32_t pages, bool *mapped)
{
    uint32_t rest = span->pages - pages;
    uint32_t touched = span->touched_pages;
    hak_span_bins_remove(&box->bins, span);
    desc->chunk = span->chunk;
    desc->node = span->node;
    desc->free_node = HAK_NO_NODE;
    box->bytes -= (size_t)pages * HAK_PAGE_SIZE;
    *mapped = rest < pages;
    if (*mapped) {
        desc->first_page = span->first_page + pages;
        desc->pages = rest;
        desc->start = span->start + (size_t)pages * HAK_PAGE_SIZE;
        desc->end = desc->start;
        desc->touched_pages = touched > pages ? touched - pages : 0;
        desc->state = HAK_STATE_POOL;
        desc->freed_ms = span->freed_ms;
        span->pages = pages;
        span->touched_pages = touched < pages ? touched : pages;
        age_replace(box, span, desc);
        hak_span_map_pages(desc, desc->first_page, rest);
        hak_span_bins_insert(&box->bins, desc);
        __atomic_store_n(&desc->kind, HAK_SLAB_HOT_SPAN + shard_of(box), __ATOMIC_RELAXED);
        return span;
    }
    desc->first_page = span->first_page;
    desc->pages = pages;
    desc->start = span->start;
    desc->touched_pages = touched < pages ? touched : pages;
    span->touched_pages = touched > pages ? touched - pages : 0;
    span->first_page += pages;
    span->pages = rest;
    span->start += (size_t)pages * HAK_PAGE_SIZE;
    span->end = span->start;
    hak_span_bins_insert(&box->bins, span);
    /* Neighbours look at the pages around them: a span freed before desc
     * must not find the rest at desc's first page, nor the rest, freed or
     * split again, itself at desc's last page, while it starts further on
     * (a merge over pages it does not have). */
    hak_span_map_pages(desc, desc->first_page, 1);
    hak_span_map_pages(desc, desc->first_page + pages - 1, 1);
    return desc;
}

/* pages pages from box, or NULL; split: whether they were cut from a
 * longer span, and mapped: whether its pages are all mapped to it then
 * (split_head).  *now: read at the first box that has a span to fit. */
static struct hak_slab *take_from(struct hot_span_box *box, uint32_t pages, uint64_t *now,
                                  bool *split, bool *mapped)
{
    /* A box with no span long enough misses with no lock. */
    if (__atomic_load_n(&box->longest, __ATOMIC_RELAXED) < pages)
        return NULL;
    if (!*now)
        *now = hak_os_now_ms();
    pthread_mutex_lock(lock_of(box));
    struct hak_slab *span = hak_span_bins_fit(&box->bins, pages);
    *split = span && span->pages > pages;
    if (*split) {
        /* Under the lock (meta's comes after it): a span taken meanwhile
         * would leave us nothing to split. */
        struct hak_slab *desc = take_desc(box);
        span = desc ? split_head(box, span, desc, pages, mapped) : NULL;
    } else if (span) {
        unlink_span(box, span);
    }
    if (span)
        __atomic_store_n(&span->kind, HAK_SLAB_INVALID, __ATOMIC_RELAXED);
    struct hak_slab *evicted = collect_evictions(box, *now, hak_options.decay_ms, BY_USE);
    note_longest(box);
    pthread_mutex_unlock(lock_of(box));
    release(evicted);
    return span;
}

struct hak_slab *hak_hot_span_take(unsigned node, uint32_t pages)
{
    if (pages > MAX_HOT_PAGES)
        return NULL;
    unsigned mine = my_shard();
    uint64_t now = 0;
    bool split = false, mapped = false;
    struct hak_slab *span = NULL;
    for (unsigned i = 0; i < HAK_HOT_SPAN_SHARDS && !span; i++)
        span =
            take_from(&boxes[node][(mine + i) % HAK_HOT_SPAN_SHARDS], pages, &now, &split, &mapped);
    if (!span) {
        /* No shard had one: the thread's own may grow. */
        struct hot_span_box *own = &boxes[node][mine];
        if (__atomic_load_n(&own->squeezed_ms, __ATOMIC_RELAXED)) {
            pthread_mutex_lock(lock_of(own));
            grow_after_miss(own, now ? now : hak_os_now_ms());
            pthread_mutex_unlock(lock_of(own));
        }
        return NULL;
    }
    if (split && !mapped && pages > 2)
        hak_span_map_pages(span, span->first_page + 1, pages - 2);
    span->state = HAK_STATE_NONE;
    span->end = span->start + span_bytes(span);
    span->fresh = false;
    hak_stat_add(HAK_STAT_HOT_HITS, 1);
    return span;
}

/* The descriptor of page of span's chunk, or NULL past its usable pages. */
static struct hak_slab *span_at(const struct hak_slab *span, uint32_t page)
{
    if (page < HAK_ARENA_HEADER_PAGES || page >= HAK_ARENA_PAGES)
        return NULL;
    return ((struct hak_chunk *)span->chunk)->page_slab[page];
}

/* A hot span of shard next to span in its chunk, at page, or NULL.  The
 * page's span may be another shard's, which that shard's lock guards, or
 * a descriptor freed and used again since: its kind, one read, tells
 * whether it is hot and in which shard, and only under this shard's lock
 * does a descriptor become hot here or stop being so (a span merged into
 * its neighbour leaves as one taken does). */
static struct hak_slab *hot_neighbour(struct hak_slab *span, uint32_t page, unsigned shard)
{
    struct hak_slab *other = span_at(span, page);
    return other && __atomic_load_n(&other->kind, __ATOMIC_RELAXED) == HAK_SLAB_HOT_SPAN + shard
               ? other
               : NULL;
}

/* front and back, side by side and out of the box, become one span: the
 * longer one's descriptor takes the other's pages, which are mapped to it
 * (the fewer pages to write: a take splits again what a put merged), and
 * the other is set aside in *drop.  Returns the one kept. */
static struct hak_slab *join(struct hak_slab *front, struct hak_slab *back, struct hak_slab **drop)
{
    /* A bound on the pages that may be resident, a prefix: an untouched
     * gap before the back's pages counts as touched.  A lend moves the
     * last of them (a gap's page moves nothing) and gives the pages past
     * them to the PageArena as clean (hak_hot_span_lend), where a count
     * that stopped at the gap left the back's pages resident there, out
     * of malloc_trim's reach. */
    uint32_t touched =
        back->touched_pages ? front->pages + back->touched_pages : front->touched_pages;
    uint32_t pages = front->pages + back->pages;
    uint32_t first_page = front->first_page;
    char *start = front->start;
    struct hak_slab *keep = front->pages >= back->pages ? front : back;
    struct hak_slab *gone = keep == front ? back : front;
    __atomic_store_n(&gone->kind, HAK_SLAB_INVALID, __ATOMIC_RELAXED);
    hak_span_map_pages(keep, gone->first_page, gone->pages);
    keep->first_page = first_page;
    keep->pages = pages;
    keep->start = start;
    keep->end = start;
    keep->touched_pages = touched;
    *drop = gone;
    return keep;
}

/* Merges the hot neighbours of span into one span, out of the box;
 * descriptors left over go to drop.  The merged span is as young as span:
 * an old neighbour's pages stay resident while spans next to them keep
 * being freed, which the byte budget still bounds. */
static struct hak_slab *coalesce(struct hot_span_box *box, struct hak_slab *span,
                                 struct hak_slab *drop[2])
{
    unsigned shard = shard_of(box);
    struct hak_slab *before = hot_neighbour(span, span->first_page - 1, shard);
    if (before) {
        unlink_span(box, before);
        span = join(before, span, &drop[0]);
    }
    struct hak_slab *after = hot_neighbour(span, span->first_page + span->pages, shard);
    if (after) {
        unlink_span(box, after);
        span = join(span, after, &drop[1]);
    }
    return span;
}

/* The shard a span goes to: that of a hot neighbour, so that they merge
 * (threads carve their spans side by side, from the same chunks: kept
 * apart by shard, l25_steady's spans took 3 chunks more, and 9% more
 * memory resident), or else the calling thread's.  Read without the
 * neighbour's lock: coalesce looks again under it. */
static unsigned shard_for_put(struct hak_slab *span)
{
    uint32_t neighbours[2] = {span->first_page - 1, span->first_page + span->pages};
    for (unsigned i = 0; i < 2; i++) {
        struct hak_slab *other = span_at(span, neighbours[i]);
        unsigned kind = other ? __atomic_load_n(&other->kind, __ATOMIC_RELAXED) : HAK_SLAB_INVALID;
        if (hak_slab_kind_is_hot(kind))
            return kind - HAK_SLAB_HOT_SPAN;
    }
    return my_shard();
}

/* span leaves service: no block of it can be freed, and its pages' entries
 * say so. */
static void leave_service(struct hak_slab *span)
{
    bool whole_span = hak_slab_is_whole_span(span);
    atomic_store_explicit(&span->owner, NULL, memory_order_relaxed);
    span->free_node = HAK_NO_NODE;
    __atomic_store_n(&span->kind, HAK_SLAB_INVALID, __ATOMIC_RELAXED);
    span->state = HAK_STATE_POOL;
    span->end = span->start; /* a stray free into it now fails validation */
    /* While it served blocks its pages mapped to the slab, to sentinels
     * (not carved yet, inside a block) or both; neighbours find a hot span
     * by any of its pages, and free no longer takes them for a slab's.  An
     * L25 slab's pages map to it already, and only its first page's entry
     * told free of its block.  Before the lock, so that other threads wait
     * less (up to 256 pages): a neighbour that reads a page meanwhile finds
     * a span that is not hot yet, as before. */
    if (whole_span)
        ((struct hak_arena_chunk *)span->chunk)->page_info[span->first_page] = HAK_PAGE_INFO_NONE;
    else
        hak_span_map_pages(span, span->first_page, span->pages);
}

/* span, freed, into the box: as the newest, or where stale, as the oldest,
 * freed a sixty-fourth of the decay ago; without a box (HAKMEM_HOT_BYTES=0)
 * decommitted and returned to the PageArena now. */
static void put(struct hak_slab *span, bool stale)
{
    leave_service(span);
    if (hak_options_hot_bytes() == 0) {
        span->next = NULL;
        release(span);
        return;
    }
    unsigned shard = shard_for_put(span);
    struct hot_span_box *box = &boxes[span->node][shard];
    struct hak_slab *drop[2] = {NULL, NULL};
    uint64_t now = hak_os_now_ms();
    uint64_t stale_ms = hak_options.decay_ms / HAK_HOT_SPAN_STALE_FRACTION;
    pthread_mutex_lock(lock_of(box));
    /* Merged, a stale one makes its young neighbours stale with it: fewer
     * spans and longer ones for the SuperSlabs to take (bench/phases, kept
     * apart: a peak of 79.2 MB and 32.8k faults, against 73.0 and 30.9k). */
    span = coalesce(box, span, drop);
    __atomic_store_n(&span->kind, HAK_SLAB_HOT_SPAN + shard, __ATOMIC_RELAXED);
    hak_span_bins_insert(&box->bins, span);
    if (stale) {
        span->freed_ms = now > stale_ms ? now - stale_ms : 0;
        age_prepend(box, span);
    } else {
        span->freed_ms = now;
        age_append(box, span);
    }
    box->bytes += span_bytes(span);
    struct hak_slab *evicted =
        collect_evictions(box, now, hak_options.decay_ms, stale ? BY_DISCARD : BY_USE);
    note_longest(box);
    keep_desc(box, &drop[0]);
    keep_desc(box, &drop[1]);
    pthread_mutex_unlock(lock_of(box));
    for (unsigned i = 0; i < 2; i++)
        if (drop[i])
            hak_span_desc_free(drop[i]);
    release(evicted);
}

void hak_hot_span_discard(struct hak_slab *span)
{
    put(span, true);
}

void hak_hot_span_put(struct hak_slab *span)
{
    put(span, false);
}

size_t hak_hot_span_retained(unsigned node, uint64_t *count)
{
    size_t bytes = 0;
    for (unsigned shard = 0; shard < HAK_HOT_SPAN_SHARDS; shard++) {
        struct hot_span_box *box = &boxes[node][shard];
        *count += __atomic_load_n(&box->spans, __ATOMIC_RELAXED);
        bytes += __atomic_load_n(&box->bytes, __ATOMIC_RELAXED);
    }
    return bytes;
}

/* Evicts the spans of node older than max_age_ms (and any over budget);
 * returns the bytes decommitted. */
static size_t release_older(unsigned node, uint64_t now, uint64_t max_age_ms,
                            enum eviction_cause cause)
{
    size_t bytes = 0;
    for (unsigned shard = 0; shard < HAK_HOT_SPAN_SHARDS; shard++) {
        struct hot_span_box *box = &boxes[node][shard];
        if (!__atomic_load_n(&box->bytes, __ATOMIC_RELAXED))
            continue;
        pthread_mutex_lock(lock_of(box));
        size_t before = box->bytes;
        struct hak_slab *evicted = collect_evictions(box, now, max_age_ms, cause);
        bytes += before - box->bytes;
        note_longest(box);
        pthread_mutex_unlock(lock_of(box));
        release(evicted);
    }
    return bytes;
}

size_t hak_hot_span_release_all(unsigned node)
{
    /* No span is younger than the end of time. */
    return release_older(node, UINT64_MAX, 0, BY_RELEASE);
}

void hak_hot_span_release_aged(unsigned node)
{
    release_older(node, hak_os_now_ms(), hak_options.decay_ms, BY_DECAY);
}

void hak_hot_span_release_stale(unsigned node)
{
    release_older(node, hak_os_now_ms(), hak_options.decay_ms / HAK_HOT_SPAN_STALE_FRACTION,
                  BY_RELEASE);
}

/* ---- lending to SuperSlabs ---- */

/* Spans a lend takes pages from, at most, per shard: this is a malloc. */
#define MAX_LENT_SPANS_BY_CALL 8

/* Whether span's pages may move: not out of a chunk advised huge pages,
 * whose huge pages a move would break up, nor out of one a move failed
 * out of (mappings.h). */
static bool lendable(const struct hak_slab *span)
{
    const struct hak_arena_chunk *chunk = (const struct hak_arena_chunk *)span->chunk;
    return !chunk->huge_pages && hak_mappings_known(&chunk->mappings);
}

/* The end of span's touched pages. */
static uintptr_t touched_end(const struct hak_slab *span)
{
    return (uintptr_t)span->start + (size_t)span->touched_pages * HAK_PAGE_SIZE;
}

/* How many of the last of span's touched pages may move, up to room bytes,
 * in whole grains (HAK_LEND_GRAIN); *end: where they end.  Those of one
 * mapping of the chunk (a span that faulted its pages in) move from any
 * page, and end where the touched ones do; where a range moved in lies
 * among them, they lie between grain lines (mappings.h), and the touched
 * pages past the last line cannot move. */
static size_t lendable_tail(const struct hak_slab *span, size_t room, uintptr_t *end)
{
    const struct hak_arena_chunk *chunk = (const struct hak_arena_chunk *)span->chunk;
    uintptr_t start = (uintptr_t)span->start;
    *end = touched_end(span);
    size_t piece = *end - start < room ? *end - start : room;
    piece -= piece % HAK_LEND_GRAIN;
    if (!piece || hak_mappings_one(&chunk->mappings, (const char *)chunk,
                                   (const char *)(*end - piece), (const char *)*end))
        return piece;
    uintptr_t first = hak_lend_grain_up(start);
    *end = hak_lend_grain_down(*end);
    if (*end <= first)
        return 0;
    piece = *end - first < room ? *end - first : room;
    return piece - piece % HAK_LEND_GRAIN;
}

/* Whether none of span's touched pages may move (lendable_tail). */
static bool too_short_to_lend(const struct hak_slab *span)
{
    uintptr_t end;
    return lendable_tail(span, SIZE_MAX, &end) == 0;
}

/* Under the lock: the oldest span of box that lends or, where it has too
 * few pages to move, goes back stale; NULL if none.  A young span with too
 * few stays, for the Mid or L25 request it may serve next (a few looked
 * past at most: this is a malloc). */
static struct hak_slab *next_to_lend(const struct hot_span_box *box, uint64_t now,
                                     uint64_t stale_ms)
{
    struct hak_slab *span = box->oldest;
    for (unsigned skipped = 0;
         span && too_short_to_lend(span) && !hak_os_aged(now, span->freed_ms, stale_ms);
         skipped++) {
        if (skipped == MAX_LENT_SPANS_BY_CALL)
            return NULL;
        span = span->age_next;
    }
    return span;
}

/* span, which a lend took out of box, back as the oldest: the oldest it
 * was, or, taken past young ones too short to lend (next_to_lend), aged
 * with the oldest, to lend first next time. */
static void put_back_oldest(struct hot_span_box *box, struct hak_slab *span)
{
    pthread_mutex_lock(lock_of(box));
    age_prepend(box, span);
    box->bytes += span_bytes(span);
    hak_span_bins_insert(&box->bins, span);
    __atomic_store_n(&span->kind, HAK_SLAB_HOT_SPAN + shard_of(box), __ATOMIC_RELAXED);
    note_longest(box);
    pthread_mutex_unlock(lock_of(box));
}

/* The last of span's touched pages that may move (lendable_tail), up to
 * room bytes, moved to dst in the container whose mappings to are (at
 * to_base), the others staying a prefix: a SuperSlab's slabs take whole
 * ranges, and lend whole ranges on, where a range that straddled two slabs
 * would be cut into pieces by the first's move.  Touched pages past a
 * grain line that cannot move go back to the kernel first (half a grain
 * on average, against the piece that moves); HAK_LEND_REFUSED where it
 * keeps them (locked since the lend began).  *taken: the bytes of dst
 * taken, a failed move's counted and still the span's (some may be left:
 * mappings.h). */
static enum hak_lend_result lend_tail(struct hak_slab *span, char *dst, size_t room,
                                      struct hak_mappings *to, const char *to_base, size_t *taken)
{
    *taken = 0;
    uintptr_t end, touched = touched_end(span);
    size_t piece = lendable_tail(span, room, &end);
    if (!piece)
        return HAK_LENT;
    if (end < touched) {
        if (!hak_os_decommit((void *)end, touched - end))
            return HAK_LEND_REFUSED;
        span->touched_pages = (uint32_t)((end - (uintptr_t)span->start) / HAK_PAGE_SIZE);
    }
    struct hak_arena_chunk *chunk = (struct hak_arena_chunk *)span->chunk;
    size_t moved;
    enum hak_lend_result result =
        hak_mappings_lend(&chunk->mappings, (const char *)chunk, (char *)end - piece, piece, to,
                          to_base, dst, span->node, &moved, taken);
    span->touched_pages -= (uint32_t)(moved / HAK_PAGE_SIZE);
    return result;
}

/* span, out of the box, less its pages past the touched ones, which go
 * back to the PageArena as a span of their own: the box counts only
 * resident spans (its budget, mallinfo's keepcost).  Whole where no
 * descriptor could be had. */
static void give_back_untouched(struct hak_slab *span)
{
    if (span->touched_pages == span->pages)
        return;
    struct hak_slab *tail = hak_span_cut_tail(span, span->touched_pages);
    if (tail)
        hak_page_arena_free(tail); /* maps the tail's pages to it */
}

/* The spans past span's first pages pages, put in the box for the next
 * requests; span keeps its first pages pages and the fresh and touched
 * pages the arena gave it.  False where no descriptor could be had. */
static bool put_rest(struct hak_slab *span, uint32_t pages)
{
    /* The touched pages split as hak_span_cut_tail has them: the arena
     * trims the run to what the lend filled, but for want of a descriptor,
     * when the lend may have filled less than span's own. */
    struct hak_slab *rest = hak_span_cut_tail(span, pages);
    if (!rest)
        return false;
    span->end = rest->start;
    put(rest, false); /* maps the rest's pages to it */
    return true;
}

/* Each lend from the spares is one mremap, some 6 us whatever its length
 * (64 KiB or 4 MiB alike, Linux 6.18): bench/phases with no pauses made
 * 2180 of 64 KiB in 3 rounds, one for each fresh Mid span, some 13 ms of
 * a 190 ms run.  The spans after this one take the rest of the run of
 * slabs moved, put young, as spans about to be taken again: put stale,
 * the first a SuperSlab took pages from, they went back and forth
 * (phases with no pauses, 30 rounds: 653 MB lent and 283 MB decommitted,
 * against 620 and 258, and 0.5k faults more).  No more than a quarter of
 * HAKMEM_HOT_BYTES goes in (none without a box), which a put over a
 * shard's budget evicts down to three quarters: a run as long as the
 * budget evicted itself, its pages decommitted (phases with the budget
 * fixed at 256 KiB: 55k faults against 23k). */
struct hak_slab *hak_hot_span_take_fresh(unsigned node, uint32_t pages)
{
    /* The budget before any doubling: the rest goes to the shard of a hot
     * neighbour where it has one, whose budget may not have grown. */
    size_t room = pages < MAX_HOT_PAGES ? MAX_HOT_PAGES - pages : 0;
    size_t share = hak_options_hot_bytes() / 4 / HAK_PAGE_SIZE;
    if (share < room)
        room = share;
    uint32_t rest = pages * (HAK_LEND_AHEAD_SPANS - 1);
    if (room < rest)
        rest = (uint32_t)(room / pages * pages);
    if (!rest || hak_harden.guard_bytes || !hak_shared_pool_may_lend(node))
        return hak_page_arena_alloc(node, pages);
    struct hak_slab *span = hak_page_arena_alloc_up_to(node, pages, pages + rest);
    if (span && span->pages > pages && !put_rest(span, pages)) {
        put(span, false);
        span = hak_hot_span_take(node, pages);
        return span ? span : hak_page_arena_alloc(node, pages);
    }
    return span;
}

size_t hak_hot_span_lend(unsigned node, char *dst, size_t size, struct hak_mappings *to,
                         const char *to_base)
{
    /* Spans first: hak_os_can_lend reads /proc/self/status (once a second
     * at most), which a process's first SuperSlab, made before it freed
     * any span, would otherwise pay for (bench/startup_threads: four
     * syscalls of its 30-odd). */
    uint64_t spans_held = 0;
    if (!hak_hot_span_retained(node, &spans_held) || !hak_os_can_lend())
        return 0;
    uint64_t now = hak_os_now_ms(), stale_ms = hak_options.decay_ms / HAK_HOT_SPAN_STALE_FRACTION;
    size_t lent = 0;
    bool refused = false;
    unsigned mine = my_shard();
    for (unsigned i = 0; i < HAK_HOT_SPAN_SHARDS && size - lent >= HAK_LEND_GRAIN && !refused;
         i++) {
        struct hot_span_box *box = &boxes[node][(mine + i) % HAK_HOT_SPAN_SHARDS];
        for (unsigned spans = 0;
             spans < MAX_LENT_SPANS_BY_CALL && size - lent >= HAK_LEND_GRAIN && !refused; spans++) {
            if (!__atomic_load_n(&box->bytes, __ATOMIC_RELAXED))
                break;
            pthread_mutex_lock(lock_of(box));
            struct hak_slab *span = next_to_lend(box, now, stale_ms);
            if (!span || !lendable(span)) {
                pthread_mutex_unlock(lock_of(box));
                break;
            }
            unlink_span(box, span);
            __atomic_store_n(&span->kind, HAK_SLAB_INVALID, __ATOMIC_RELAXED);
            note_longest(box);
            pthread_mutex_unlock(lock_of(box));
            if (too_short_to_lend(span)) {
                /* A stale one's pages go back, as where none lends. */
                span->next = NULL;
                release(span);
                continue;
            }
            size_t taken;
            enum hak_lend_result result =
                lend_tail(span, dst + lent, size - lent, to, to_base, &taken);
            lent += taken;
            refused = result != HAK_LENT;
            if (result == HAK_LEND_FAILED) {
                /* Its chunk lends no more (lendable): decommitted, rather
                 * than be the oldest that every lend stops at. */
                span->next = NULL;
                release(span);
            } else if (span->touched_pages) {
                give_back_untouched(span);
                put_back_oldest(box, span);
            } else {
                /* Its pages all moved out: as a decommitted one. */
                hak_page_arena_free(span);
                hak_stat_add(HAK_STAT_HOT_EVICTIONS, 1);
            }
        }
    }
    return lent;
}

void hak_hot_span_lock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        for (unsigned shard = 0; shard < HAK_HOT_SPAN_SHARDS; shard++)
            pthread_mutex_lock(&hak_fork_locks.node[i].hot_span[shard].mutex);
}

void hak_hot_span_unlock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        for (unsigned shard = 0; shard < HAK_HOT_SPAN_SHARDS; shard++)
            pthread_mutex_unlock(&hak_fork_locks.node[i].hot_span[shard].mutex);
}

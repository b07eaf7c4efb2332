#include "large.h"

#include <errno.h>
#include <string.h>

#include "../fault.h"
#include "../fork_locks.h"
#include "../block/canary.h"
#include "../harden.h"
#include "../memcheck.h"
#include "../numa/binding.h"
#include "../options.h"
#include "../os.h"
#include "../stats.h"
#include "hot_span_box.h"
#include "page_map.h"
#include "shared_pool.h"

#define CACHE_SLOTS 32
/* Live blocks a node has few of (hak_large_few_live): a quarter of what
 * its cache keeps, so that their mappings, freed and asked for again in
 * turn, find room there. */
#define FEW_LIVE (CACHE_SLOTS / 4)
/* However big the program's large blocks, a node keeps at most this much of
 * them mapped for reuse. */
#define CACHE_CAP ((size_t)1 << 30)
/* The most of a block's last 2 MiB unit left to small pages (mapped_size). */
#define SMALL_TAIL (16 * HAK_PAGE_SIZE)

/* A node's freed large mappings, still mapped and mostly resident.  Its
 * budget follows the program.  While the program holds large blocks, the
 * cache keeps what it freed below the recent peak of the node's live large
 * bytes, at most as much as it still holds: live and cached bytes together
 * stay within the peak, so that a program cycling through big buffers
 * finds their pages again instead of faulting them in (as glibc's raised
 * mmap threshold and tcmalloc's span cache let it) at no cost to its peak
 * RSS, and one that has freed most of its blocks keeps little of them.
 * Beyond that, a quarter of the peak (at least half of HAKMEM_HOT_BYTES),
 * and never more than CACHE_CAP; the peak halves every decay period the
 * program does not reach it again, and a mapping unused for that long is
 * unmapped.  A program that asks for more than the cache holds after the
 * budget made it unmap mappings grows the quarter by what it asked for
 * (missed_growth), up to the peak, unless it set the budget itself; the
 * growth too halves every decay period.  large_blocks (20 live buffers of
 * 5-25 MiB, one replaced a step) kept 75 MB and ran 2000 steps at 3.7k a
 * second with 282k faults and 417 MB at its peak; with the growth 8-10k,
 * 139-143k and 445-450 MB; kept up to its peak, and with gaps filled page
 * by page (fill), 11-13k, 97k and 387 MB (tcmalloc 9.8-10k, 151k,
 * 492-494 MB; glibc 1.7k, 562k, 445 MB). */
struct large_cache {
    size_t bytes;
    unsigned count;
    size_t evicted;       /* atomic: unmapped over the budget since the last decay */
    size_t missed_growth; /* atomic: the budget's growth from misses */
    uint64_t peak_ms;     /* when peak last decayed */
    size_t live;          /* atomic: bytes mapped by the node's live blocks */
    unsigned live_blocks; /* atomic: the node's live blocks */
    size_t peak;          /* atomic: their recent peak */
    unsigned coloured;    /* atomic: mappings coloured, whose count picks the next colour */
    bool written;         /* atomic: the block last looked at was mostly resident */
    unsigned frees;       /* atomic: one in WRITTEN_LOOK_EVERY looks */
    struct hak_large *slots[CACHE_SLOTS]; /* oldest first */
} __attribute__((aligned(HAK_CACHE_LINE)));

static struct large_cache caches[HAK_MAX_NODES] = {
    [0 ... HAK_MAX_NODES - 1] = {.written = true},
};

static pthread_mutex_t *lock_of(const struct large_cache *cache)
{
    return &hak_fork_locks.node[cache - caches].large.mutex;
}

static size_t round_to_page(size_t size)
{
    return (size + HAK_PAGE_SIZE - 1) & ~(HAK_PAGE_SIZE - 1);
}

static size_t round_to_chunk(size_t size)
{
    return (size + HAK_CHUNK_SIZE - 1) & ~(HAK_CHUNK_SIZE - 1);
}

/* Of the first size bytes of a block, those in its own pages, past the
 * colour's bytes in the head's page. */
static size_t past_colour(size_t size, size_t colour)
{
    return size > colour ? size - colour : 0;
}

/* The block's bytes from held up to size are handed out (held: what the
 * program has of them already, 0 for a block handed out anew): its pages
 * beyond those it ever handed out before are first touched, the others
 * reused; the head's page, which the colour's bytes share, is always
 * resident. */
static void count_pages(struct hak_large *large, size_t held, size_t size)
{
    size_t from = past_colour(held, large->colour), to = past_colour(size, large->colour);
    large->touched_pages =
        hak_stat_pages_handed_out(HAK_PAGES_LARGE, round_to_page(from) / HAK_PAGE_SIZE,
                                  round_to_page(to) / HAK_PAGE_SIZE, large->touched_pages);
}

/* The block's bytes in its own pages, past the head's: not level 2's
 * guard page, which usable leaves out. */
static size_t own_bytes(const struct hak_large *large)
{
    return large->usable - large->colour;
}

static bool fully_touched(const struct hak_large *large)
{
    return large->touched_pages * HAK_PAGE_SIZE >= own_bytes(large);
}

static void set_size(struct hak_large *large, size_t map_size)
{
    large->head.map_size = map_size;
    large->usable = map_size - large->offset + large->colour;
    if (large->touched_pages > own_bytes(large) / HAK_PAGE_SIZE)
        large->touched_pages = own_bytes(large) / HAK_PAGE_SIZE;
}

/* Where in the head's page a block starts (struct hak_large's colour): a
 * cache line of its own for each mapping, cycling through COLOURS of them,
 * rather than the first line of a page for all.  A program that writes its
 * block a page apart (realloc_grow's byte per page) then writes the first
 * bytes of each page, which a Sapphire Rapids Xeon does slowly: a byte per
 * page over 8 MiB took the same 38 ms from any offset from 192 to 3840 B
 * into the page, 50-60 ms from below or above; realloc_grow at 3000 rounds
 * wrote its buffers in 52-57 ms from the first byte of their pages, and in
 * 36-38 ms coloured, as under glibc.  Blocks that a loop walks in step
 * stop sharing cache sets too (jemalloc starts its large blocks at a
 * random line of their first page for that), though a loop over three
 * arrays of 1-2 MiB ran as fast from the first line of their pages there.
 * A block starts 256 B or more before its page's end, and on a cache line
 * past the head's fields.  One aligned to more than a cache line takes a
 * colour that is a multiple of its alignment (a page's: none); none at
 * level 2, which guards the pages of a freed block whole. */
#define COLOUR_LOW 256
#define COLOUR_HIGH (HAK_PAGE_SIZE - 384)
#define COLOURS ((COLOUR_HIGH - COLOUR_LOW) / HAK_CACHE_LINE + 1)
_Static_assert(sizeof(struct hak_large) <= HAK_PAGE_SIZE - COLOUR_HIGH,
               "a coloured block starts past the head's fields");

static size_t colour_for(unsigned node, size_t align)
{
    if (hak_harden.guard_bytes)
        return 0;
    unsigned count = __atomic_fetch_add(&caches[node].coloured, 1, __ATOMIC_RELAXED);
    size_t colour = COLOUR_LOW + (size_t)(count % COLOURS) * HAK_CACHE_LINE;
    return align > HAK_CACHE_LINE ? colour & ~(align - 1) : colour;
}

/* A cached mapping handed out for a block of size bytes keeps its colour,
 * so that a program that frees and takes again a buffer finds it where it
 * was (realloc_eighths, a byte written per page: 0.93 times the speed with
 * a colour of its own for each block, 11 alternating runs).  It takes
 * colour, the one its mapping's size was reckoned with, where it has none
 * (cut from another mapping, split_tail), where the block's alignment
 * forbids its own, where its own leaves it short of size, or where its own
 * would leave a page more of the mapping past the block's end: a mapping
 * the program's block fills to its last page is fully touched, from which
 * fill takes pages (large_blocks_steady faulted 0.8% more with such
 * pages).  Level 2's guard page stays out of the usable bytes. */
static void colour_reused(struct hak_large *large, size_t colour, size_t size, size_t align)
{
    size_t own = own_bytes(large), old = large->colour;
    if (old && !(old & (align - 1)) && own + old >= size &&
        round_to_page(past_colour(size, old)) >= round_to_page(past_colour(size, colour)))
        colour = old;
    large->usable = own + colour;
    large->colour = colour;
}

/* ---- where a mapping's kernel mappings start (struct hak_large) ---- */

static bool starts_known(const struct hak_large *large)
{
    return large->mapping_count != HAK_LARGE_STARTS_UNKNOWN;
}

/* What large adds to large_extra_mappings: none at level 2, whose guard
 * page splits every mapping, which is reused whole and never moves. */
static size_t extra_of(const struct hak_large *large)
{
    if (hak_harden.guard_bytes)
        return 0;
    return starts_known(large) ? large->mapping_count : HAK_LARGE_MAPPING_STARTS;
}

static void set_mapping_count(struct hak_large *large, uint8_t count)
{
    size_t before = extra_of(large);
    large->mapping_count = count;
    hak_stat_gauge(HAK_STAT_LARGE_EXTRA_MAPPINGS, (int64_t)extra_of(large) - (int64_t)before);
}

/* A head that added extra (extra_of) is gone: unmapped, or part of
 * another mapping now. */
static void forget_extra(size_t extra)
{
    hak_stat_gauge(HAK_STAT_LARGE_EXTRA_MAPPINGS, -(int64_t)extra);
}

static void forget_starts(struct hak_large *large)
{
    set_mapping_count(large, HAK_LARGE_STARTS_UNKNOWN);
}

/* Whether mappings more kernel mappings fit in large's count. */
static bool room_for(const struct hak_large *large, unsigned mappings)
{
    return starts_known(large) && large->mapping_count + mappings <= HAK_LARGE_MAPPING_STARTS;
}

/* The kernel mappings past one a mapping that every node's large mappings
 * hold together (their starts, HAK_LARGE_MAPPING_STARTS for one whose
 * starts are unknown) are the statistics' large_extra_mappings: pages
 * moved in land as a mapping of their own, which merges with no neighbour
 * while they live, and the kernel counts mappings against
 * vm.max_map_count (65530 by default) with the program's own; fork copies
 * each.  With no bound, large_blocks held a mapping more every four
 * steps, 6.6k after 40000.  Whether they have room for what one step adds
 * (a piece fill moves: two; a merge or a growth: one), so that fill, the
 * merges of cached neighbours and a cached mapping's growth keep them
 * within HAK_LARGE_EXTRA_MAPPINGS_MAX.  Only a live block that realloc
 * grows, and a refused move (unknown starts), may add past it. */
static bool room_for_extra(void)
{
    return hak_stat_read(HAK_STAT_LARGE_EXTRA_MAPPINGS) + 2 <= HAK_LARGE_EXTRA_MAPPINGS_MAX;
}

/* Whether large may take next, the cached mapping after it, and later
 * more starts of its own, its starts known still. */
static bool mergeable(const struct hak_large *large, const struct hak_large *next, unsigned later)
{
    return starts_known(next) && room_for(large, next->mapping_count + 1u + later) &&
           room_for_extra();
}

/* A kernel mapping of large may start at page (none does at its head). */
static void add_start(struct hak_large *large, size_t page)
{
    unsigned count = large->mapping_count, i = 0;
    if (!starts_known(large) || page == 0)
        return;
    if (page > UINT32_MAX) {
        forget_starts(large);
        return;
    }
    while (i < count && large->mapping_starts[i] < page)
        i++;
    if (i < count && large->mapping_starts[i] == page)
        return;
    if (count == HAK_LARGE_MAPPING_STARTS) {
        forget_starts(large);
        return;
    }
    memmove(&large->mapping_starts[i + 1], &large->mapping_starts[i],
            (count - i) * sizeof(large->mapping_starts[0]));
    large->mapping_starts[i] = (uint32_t)page;
    set_mapping_count(large, (uint8_t)(count + 1));
}

/* No mapping starts after page first and before end any more (a range
 * moved over them is one, the pages past end left the mapping). */
static void drop_starts_between(struct hak_large *large, size_t first, size_t end)
{
    if (!starts_known(large))
        return;
    unsigned kept = 0;
    for (unsigned i = 0; i < large->mapping_count; i++) {
        uint32_t start = large->mapping_starts[i];
        if (start <= first || start >= end)
            large->mapping_starts[kept++] = start;
    }
    set_mapping_count(large, (uint8_t)kept);
}

/* A mapping's starts, apart from it (move_pages reads them after its head
 * moved). */
struct starts {
    uint8_t count;
    uint32_t pages[HAK_LARGE_MAPPING_STARTS];
};

static struct starts starts_of(const struct hak_large *large)
{
    struct starts starts = {.count = large->mapping_count};
    if (starts_known(large))
        memcpy(starts.pages, large->mapping_starts, large->mapping_count * sizeof(starts.pages[0]));
    return starts;
}

/* Pages [first, end) of a mapping whose starts are from now lie in to from
 * its page at on: where they start, and where they end unless to does. */
static void add_starts_of(struct hak_large *to, size_t at, const struct starts *from, size_t first,
                          size_t end)
{
    if (from->count == HAK_LARGE_STARTS_UNKNOWN) {
        forget_starts(to);
        return;
    }
    add_start(to, at);
    for (unsigned i = 0; i < from->count; i++)
        if (from->pages[i] > first && from->pages[i] < end)
            add_start(to, at + from->pages[i] - first);
    if (at + end - first < to->head.map_size / HAK_PAGE_SIZE)
        add_start(to, at + end - first);
}

/* The last page of large after first and before end that may start a
 * mapping, or first. */
static size_t last_start_between(const struct hak_large *large, size_t first, size_t end)
{
    size_t found = first;
    for (unsigned i = 0; i < large->mapping_count; i++)
        if (large->mapping_starts[i] > first && large->mapping_starts[i] < end)
            found = large->mapping_starts[i];
    return found;
}

static void unmap(struct hak_large *large)
{
    size_t total = large->head.map_size;
    hak_stat_node_map(large->head.node, -(int64_t)total);
    hak_page_map_clear(large, total);
    forget_extra(extra_of(large));
    hak_os_unmap(large, total);
}

/* Huge pages for the node's new large mappings while the program writes
 * most of each block it frees (HAKMEM_HUGE_PAGES): it then takes one fault
 * per 2 MiB instead of 512, and no more memory than it would have written.
 * Large blocks are mostly written in full, so that is the guess until a
 * freed one says otherwise: a program that uses a few pages of its big
 * blocks gets small pages from its first free on. */
static bool huge(unsigned node)
{
    return hak_options_huge_pages() && __atomic_load_n(&caches[node].written, __ATOMIC_RELAXED);
}

static void advise(void *addr, size_t size, unsigned node)
{
    if (huge(node))
        hak_os_advise_huge(addr, size);
}

/* The bytes to map for a block whose head, block and guard take total:
 * whole 2 MiB units while the node's blocks get huge pages, so that the
 * last unit too is one huge page, not up to 512 small ones faulted in one
 * by one, which later splits, merges and moves would carry into other
 * blocks as small pages that fault again after every move (costly in a VM
 * whose hypervisor shadows the page tables).  The slack is the block's
 * usable size.  Not where it is more than a quarter of the block (a block
 * a little over a unit would double its memory), nor where the block only
 * spills a few pages into its last unit (a power of two and its head's
 * page), which a huge page there would leave almost all unused. */
static size_t mapped_size(size_t total, unsigned node)
{
    size_t whole = round_to_chunk(total);
    size_t slack = whole - total;
    bool worth = slack <= total / 4 && HAK_CHUNK_SIZE - slack > SMALL_TAIL;
    return huge(node) && worth ? whole : total;
}

/* A look walks the page table of the whole block (a tenth of realloc_grow's
 * time when every free of its 8 MiB buffers looked), and a program writes
 * its large blocks the same way free after free. */
#define WRITTEN_LOOK_EVERY 8

static void note_written(struct hak_large *large)
{
    struct large_cache *cache = &caches[large->head.node];
    if (!hak_options_huge_pages() ||
        __atomic_fetch_add(&cache->frees, 1, __ATOMIC_RELAXED) % WRITTEN_LOOK_EVERY)
        return;
    bool written = hak_os_mostly_resident((char *)large + large->offset, own_bytes(large));
    __atomic_store_n(&cache->written, written, __ATOMIC_RELAXED);
}

/* sign: 1 as the block is handed out, -1 as it is freed. */
static void count_live(const struct hak_large *large, int64_t sign)
{
    hak_stat_gauge(HAK_STAT_LARGE_LIVE, sign);
    hak_stat_gauge(HAK_STAT_LARGE_LIVE_MAPPED, sign * (int64_t)large->head.map_size);
    hak_stat_gauge(HAK_STAT_LARGE_LIVE_USABLE, sign * (int64_t)large->usable);
    struct large_cache *cache = &caches[large->head.node];
    __atomic_add_fetch(&cache->live_blocks, (unsigned)sign, __ATOMIC_RELAXED);
    size_t live = __atomic_add_fetch(&cache->live, (size_t)(sign * (int64_t)large->head.map_size),
                                     __ATOMIC_RELAXED);
    if (sign > 0 && live > __atomic_load_n(&cache->peak, __ATOMIC_RELAXED))
        __atomic_store_n(&cache->peak, live, __ATOMIC_RELAXED);
}

static size_t budget(const struct large_cache *cache)
{
    size_t floor = hak_options_hot_bytes() / 2;
    if (!floor)
        return 0;
    size_t peak = __atomic_load_n(&cache->peak, __ATOMIC_RELAXED);
    size_t adaptive = peak / 4 + __atomic_load_n(&cache->missed_growth, __ATOMIC_RELAXED);
    if (adaptive > peak)
        adaptive = peak;
    size_t live = __atomic_load_n(&cache->live, __ATOMIC_RELAXED);
    size_t below_peak = live < peak ? peak - live : 0;
    size_t within_peak = below_peak < live ? below_peak : live;
    if (adaptive < within_peak)
        adaptive = within_peak;
    if (adaptive > CACHE_CAP)
        adaptive = CACHE_CAP;
    return adaptive > floor ? adaptive : floor;
}

static void remove_slot(struct large_cache *cache, unsigned i)
{
    cache->bytes -= cache->slots[i]->head.map_size;
    cache->count--;
    for (; i < cache->count; i++)
        cache->slots[i] = cache->slots[i + 1];
}

/* In age order; the caller has made room. */
static void insert(struct large_cache *cache, struct hak_large *large)
{
    unsigned i = cache->count;
    for (; i > 0 && cache->slots[i - 1]->freed_ms > large->freed_ms; i--)
        cache->slots[i] = cache->slots[i - 1];
    cache->slots[i] = large;
    cache->count++;
    cache->bytes += large->head.map_size;
}

/* The cached mapping that starts at addr, or -1. */
static int find_at(const struct large_cache *cache, const void *addr)
{
    for (unsigned i = 0; i < cache->count; i++)
        if (cache->slots[i] == addr)
            return (int)i;
    return -1;
}

/* Cuts large at cut bytes from its start, a multiple of 2 MiB: the rest
 * becomes a mapping of its own, its head on its first page, which the
 * caller keeps.  NULL where that cannot be. */
static struct hak_large *split_tail(struct hak_large *large, size_t cut)
{
    struct hak_large *tail = (struct hak_large *)((char *)large + cut);
    size_t touched_end = large->offset + large->touched_pages * HAK_PAGE_SIZE;
    /* The head first: the page map encodes the route it reads there, and
     * until now these bytes were a block's, whatever the program wrote
     * (under memcheck, a freed block's, which the program may not touch). */
    hak_memcheck_undefined(tail, sizeof(*tail));
    *tail = (struct hak_large){
        .head = large->head,
        .offset = HAK_PAGE_SIZE,
        .freed_ms = large->freed_ms,
        .touched_pages =
            touched_end > cut + HAK_PAGE_SIZE ? (touched_end - cut) / HAK_PAGE_SIZE - 1 : 0,
        .cached = large->cached,
        .reusable = true,
    };
    if (!hak_page_map_set(tail, large->head.map_size - cut, &tail->head))
        return NULL; /* cannot happen: the units' tables exist */
    size_t cut_page = cut / HAK_PAGE_SIZE, pages = large->head.map_size / HAK_PAGE_SIZE;
    set_size(tail, large->head.map_size - cut);
    struct starts starts = starts_of(large);
    add_starts_of(tail, 0, &starts, cut_page, pages);
    drop_starts_between(large, cut_page - 1, SIZE_MAX);
    set_size(large, cut);
    return tail;
}

/* large takes over next, which starts where it ends; its pages count as
 * handed out before only where large's all were. */
static void merge(struct hak_large *large, struct hak_large *next)
{
    size_t next_size = next->head.map_size;
    size_t next_touched = next->touched_pages + 1;
    bool prefix = fully_touched(large);
    hak_page_map_set(next, next_size, &large->head); /* the units' tables exist */
    struct starts starts = starts_of(next);
    forget_extra(extra_of(next));
    size_t at = large->head.map_size / HAK_PAGE_SIZE;
    set_size(large, large->head.map_size + next_size);
    add_starts_of(large, at, &starts, 0, next_size / HAK_PAGE_SIZE);
    if (prefix)
        large->touched_pages += next_touched;
}

/* Unlinks the oldest mappings while the cache is over its budget, full, or
 * they are older than the decay time; the caller unmaps them unlocked. */
static unsigned trim(struct large_cache *cache, uint64_t now, unsigned room,
                     struct hak_large **evicted)
{
    if (hak_os_aged(now, cache->peak_ms, hak_options.decay_ms)) {
        size_t live = __atomic_load_n(&cache->live, __ATOMIC_RELAXED);
        size_t half = __atomic_load_n(&cache->peak, __ATOMIC_RELAXED) / 2;
        __atomic_store_n(&cache->peak, live > half ? live : half, __ATOMIC_RELAXED);
        __atomic_store_n(&cache->missed_growth,
                         __atomic_load_n(&cache->missed_growth, __ATOMIC_RELAXED) / 2,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&cache->evicted, 0, __ATOMIC_RELAXED);
        cache->peak_ms = now;
    }
    size_t limit = budget(cache);
    unsigned evictions = 0;
    while (cache->count) {
        bool aged = hak_os_aged(now, cache->slots[0]->freed_ms, hak_options.decay_ms);
        if (!aged && cache->bytes <= limit && cache->count <= CACHE_SLOTS - room)
            break;
        if (!aged && cache->bytes > limit)
            __atomic_store_n(&cache->evicted, cache->evicted + cache->slots[0]->head.map_size,
                             __ATOMIC_RELAXED);
        evicted[evictions++] = cache->slots[0];
        remove_slot(cache, 0);
    }
    return evictions;
}

static void unmap_all(struct hak_large **evicted, unsigned count)
{
    for (unsigned i = 0; i < count; i++)
        unmap(evicted[i]);
}

/* Takes the cached mappings right after large into it while it is short of
 * total bytes, leaving whole 2 MiB units it does not need behind. */
static void absorb_neighbours(struct hak_large *large, size_t total)
{
    struct large_cache *cache = &caches[large->head.node];
    if (!__atomic_load_n(&cache->count, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(lock_of(cache));
    while (large->head.map_size < total) {
        int i = find_at(cache, (char *)large + large->head.map_size);
        /* extend starts a mapping after what large took. */
        if (i < 0 || !mergeable(large, cache->slots[i], 1))
            break;
        struct hak_large *next = cache->slots[i];
        remove_slot(cache, (unsigned)i);
        size_t need = round_to_chunk(total) - large->head.map_size;
        if (next->head.map_size >= need + HAK_CHUNK_SIZE) {
            struct hak_large *rest = split_tail(next, need);
            if (rest)
                insert(cache, rest);
        }
        merge(large, next);
    }
    pthread_mutex_unlock(lock_of(cache));
}

/* The cache had no pages for bytes of a block, which fault in fresh: where
 * the budget made it unmap some since the last decay, it grows by as much
 * (at most what was unmapped), for the next time, until it reaches the
 * peak.  Not once a program set the budget (mallopt), as the HotSpanBox's. */
static void note_miss(unsigned node, size_t bytes)
{
    struct large_cache *cache = &caches[node];
    if (!__atomic_load_n(&cache->evicted, __ATOMIC_RELAXED) || hak_options_hot_bytes_fixed())
        return;
    pthread_mutex_lock(lock_of(cache));
    size_t grow = bytes < cache->evicted ? bytes : cache->evicted;
    __atomic_store_n(&cache->evicted, cache->evicted - grow, __ATOMIC_RELAXED);
    size_t peak = __atomic_load_n(&cache->peak, __ATOMIC_RELAXED);
    size_t growth = __atomic_load_n(&cache->missed_growth, __ATOMIC_RELAXED) + grow;
    if (growth > peak - peak / 4)
        growth = peak - peak / 4;
    __atomic_store_n(&cache->missed_growth, growth, __ATOMIC_RELAXED);
    pthread_mutex_unlock(lock_of(cache));
}

/* Whether fill may move pages of piece, a cached mapping, into large:
 * where both know where their mappings start, and large has room for
 * piece's and the two that the pages' ends may start.  A kernel before
 * 6.17 refuses a move of more than one of its mappings only after it
 * unmapped the destination, a hole in the block being filled until
 * hak_os_move maps it again, so there they move one mapping at a time
 * (move_pages).  A refusal for any reason makes a mapping's starts
 * unknown (the program may have split it, with madvise or mbind on part
 * of it). */
static bool movable_into(const struct hak_large *piece, const struct hak_large *large)
{
    return starts_known(piece) && room_for(large, piece->mapping_count + 2u);
}

/* Whether large may grow and fill may move pages into what it gains: the
 * mapping after it starts one (extend), the pages moved two. */
static bool takes_pieces(const struct hak_large *large)
{
    return room_for(large, 3);
}

/* Whether extend may move a live block whole: one of its mappings at a
 * time, a refusal part way would leave its pages in two places. */
static bool movable_whole(const struct hak_large *large)
{
    return large->mapping_count == 0 || hak_os_moves_over_mappings();
}

/* hak_os_move of cached pages into large at dst; where it fails and dst
 * was mapped again fresh (os.h), dst is bound and advised again as the
 * rest of large. */
static bool move_into(struct hak_large *large, void *src, size_t size, void *dst)
{
    bool dst_fresh;
    if (hak_os_move(src, size, dst, &dst_fresh))
        return true;
    if (dst_fresh) {
        hak_numa_bind(dst, size, large->head.node);
        advise(dst, size, large->head.node);
    }
    return false;
}

/* Moves pages [first, end) of piece, a cached mapping the caller has
 * taken out of the cache (and the page map), to the same places in the
 * range at dst of large, one of piece's mappings at a time where the
 * kernel moves no more, the last first.  Returns the page of piece from
 * which on all moved, first where all did.  On a refusal piece keeps the
 * pages below, and where its mappings start, like large's, is not known
 * any more (the range at dst is part moved in, part mapped again where
 * the move failed: move_into, part as it was).  record: large learns
 * where the pages moved in start; not where dst is large's head, which
 * the last move replaces with piece's own (extend). */
static size_t move_pages(struct hak_large *piece, size_t first, size_t end, struct hak_large *large,
                         char *dst, bool record)
{
    bool whole = hak_os_moves_over_mappings();
    struct starts starts = starts_of(piece);
    for (size_t left = end; left > first;) {
        size_t start = whole ? first : last_start_between(piece, first, left);
        if (!move_into(large, (char *)piece + start * HAK_PAGE_SIZE, (left - start) * HAK_PAGE_SIZE,
                       dst + (start - first) * HAK_PAGE_SIZE)) {
            forget_starts(piece); /* the kernel says otherwise */
            if (record)
                forget_starts(large);
            return left;
        }
        left = start;
    }
    if (record) {
        size_t at = (size_t)(dst - (char *)large) / HAK_PAGE_SIZE;
        drop_starts_between(large, at, at + (end - first));
        add_starts_of(large, at, &starts, first, end);
    }
    return first;
}

/* piece, its pages from left on moved out, keeps its head and those
 * below, back in the page map where moves were refused: the caller took
 * its 2 MiB units from kept on out of it before the moves, for the
 * address space is free once the pages move, and another mapping may
 * take it. */
static void keep_below(struct hak_large *piece, size_t left, size_t kept)
{
    if (left > kept)
        hak_page_map_set(piece, left, &piece->head); /* the units' tables exist */
    drop_starts_between(piece, left / HAK_PAGE_SIZE - 1, SIZE_MAX);
    set_size(piece, left);
}

/* Moves the last size bytes of piece, a cached mapping the caller has
 * taken out of the cache, into large at dst; piece keeps its head and the
 * rest.  Returns the bytes moved: fewer where the kernel refused a move
 * (piece keeps those below). */
static size_t take_tail(struct hak_large *piece, size_t size, struct hak_large *large, void *dst)
{
    size_t old = piece->head.map_size;
    size_t kept = old - size;
    size_t kept_units = round_to_chunk(kept);
    if (kept_units < old)
        hak_page_map_clear((char *)piece + kept_units, old - kept_units);
    size_t left = move_pages(piece, kept / HAK_PAGE_SIZE, old / HAK_PAGE_SIZE, large, dst, true) *
                  HAK_PAGE_SIZE;
    keep_below(piece, left, kept_units < old ? kept_units : old);
    return old - left;
}

/* piece, taken out of the cache, back in it; unmapped where nothing but its
 * head is left of it. */
static void put_back(struct large_cache *cache, struct hak_large *piece)
{
    struct hak_large *evicted[CACHE_SLOTS + 1];
    unsigned evictions = 0;
    if (piece->head.map_size <= HAK_PAGE_SIZE) {
        evicted[evictions++] = piece;
    } else {
        /* Other frees may have filled the cache meanwhile. */
        pthread_mutex_lock(lock_of(cache));
        evictions = trim(cache, hak_os_now_ms(), 1, evicted);
        insert(cache, piece);
        pthread_mutex_unlock(lock_of(cache));
    }
    unmap_all(evicted, evictions);
}

/* Moves the pages of cached mappings into [from, to) of large, biggest
 * first, so that the program finds them resident instead of faulting in
 * fresh ones. */
static void fill(struct hak_large *large, size_t from, size_t to)
{
    unsigned node = large->head.node;
    struct large_cache *cache = &caches[node];
    size_t filled = from;
    while (filled < to && __atomic_load_n(&cache->count, __ATOMIC_RELAXED) && room_for_extra()) {
        struct hak_large *piece = NULL, *bigger = NULL;
        int found = -1, bigger_at = -1;
        size_t gap = to - filled;
        pthread_mutex_lock(lock_of(cache));
        for (unsigned i = 0; i < cache->count; i++) {
            size_t size = cache->slots[i]->head.map_size;
            if (!movable_into(cache->slots[i], large))
                continue;
            if (size <= gap && (!piece || size > piece->head.map_size)) {
                piece = cache->slots[i];
                found = (int)i;
            } else if (size > gap && fully_touched(cache->slots[i]) &&
                       (!bigger || size < bigger->head.map_size)) {
                bigger = cache->slots[i];
                bigger_at = (int)i;
            }
        }
        if (piece || hak_harden.guard_bytes) /* level 2: a guard page ends bigger */
            bigger = NULL;
        if (piece)
            remove_slot(cache, (unsigned)found);
        else if (bigger)
            remove_slot(cache, (unsigned)bigger_at);
        pthread_mutex_unlock(lock_of(cache));
        if (!piece && !bigger)
            break;
        if (bigger) {
            /* None fits whole: the gap from the end of the smallest bigger
             * one, page by page, where cuts at its 2 MiB units left up to
             * 511 pages of it to fault in fresh (large_blocks at 1000
             * steps: 126k faults with such cuts, 101k).  Only from one
             * written to its end: the pages a block never handed out (a
             * realloc's headroom) lie there, and would fault all the same. */
            size_t moved = take_tail(bigger, gap, large, (char *)large + filled);
            put_back(cache, bigger);
            hak_stat_node_map(node, -(int64_t)moved);
            if (moved == gap)
                filled = to;
            break;
        }
        size_t size = piece->head.map_size;
        size_t piece_extra = extra_of(piece);
        hak_page_map_clear(piece, size);
        size_t left =
            move_pages(piece, 0, size / HAK_PAGE_SIZE, large, (char *)large + filled, true) *
            HAK_PAGE_SIZE;
        hak_stat_node_map(node, -(int64_t)(size - left));
        if (left) {
            keep_below(piece, left, 0);
            put_back(cache, piece);
            break;
        }
        forget_extra(piece_extra); /* large took its starts (move_pages) */
        filled += size;
    }
    if (filled < to)
        note_miss(node, to - filled);
    size_t touched = (filled - large->offset) / HAK_PAGE_SIZE;
    if (filled > from && fully_touched(large) && touched > large->touched_pages)
        large->touched_pages = touched;
}

/* Maps size bytes right after large's mapping; false where the address
 * space there is taken. */
static bool map_after(struct hak_large *large, size_t size)
{
    char *end = (char *)large + large->head.map_size;
    if (!hak_os_map_at(end, size))
        return false;
    hak_numa_bind(end, size, large->head.node);
    advise(end, size, large->head.node);
    return true;
}

/* large, a mapping of the caller's (cached or live), grown to total bytes
 * at least: with the cached mappings after it, else to ahead (at least
 * total) in place where the address space after it is free, else moved
 * whole to a new mapping of ahead (its pages, not copies of them), else to
 * total the same two ways where ahead does not fit.  What is new up to
 * total is filled with cached pages where the kernel can move them; what
 * lies beyond is mapped only, and takes no memory until written.  NULL,
 * with large as big as it could be made in place, when it cannot be
 * moved.  cached: large is a cached mapping, which holds nothing of the
 * program's, so that it may move one mapping at a time (move_pages): a
 * refusal part way leaves it what was not moved. */
static struct hak_large *extend(struct hak_large *large, size_t total, size_t ahead, bool cached)
{
    unsigned node = large->head.node;
    absorb_neighbours(large, total);
    size_t old = large->head.map_size;
    if (old >= total)
        return large;
    size_t grown = ahead;
    bool in_place = map_after(large, grown - old);
    /* Not where an old kernel would refuse the move: a live block moves
     * only where one move takes it whole. */
    bool may_move = movable_whole(large) || (cached && starts_known(large));
    struct hak_large *moved = NULL;
    if (!in_place) {
        moved = may_move ? hak_os_map_aligned(grown, HAK_CHUNK_SIZE) : NULL;
        /* Short of address space for the headroom: what was asked. */
        if (!moved && ahead > total) {
            grown = total;
            in_place = map_after(large, grown - old);
            if (!in_place && may_move)
                moved = hak_os_map_aligned(grown, HAK_CHUNK_SIZE);
        }
        if (!in_place && !moved)
            return NULL;
    }
    if (in_place) {
        if (!hak_page_map_set(large, grown, &large->head)) {
            /* The failed set cleared the block's own units too. */
            hak_page_map_set(large, old, &large->head); /* the units' tables exist */
            hak_os_unmap((char *)large + old, grown - old);
            return NULL;
        }
    } else {
        hak_numa_bind(moved, grown, node);
        advise(moved, grown, node);
        if (!hak_page_map_set(moved, grown, &moved->head)) {
            hak_os_unmap(moved, grown);
            return NULL;
        }
        hak_page_map_clear(large, old);
        size_t left =
            move_pages(large, 0, old / HAK_PAGE_SIZE, moved, (char *)moved, false) * HAK_PAGE_SIZE;
        if (left) {
            /* What moved goes with moved. */
            hak_page_map_clear(moved, grown);
            hak_os_unmap(moved, grown);
            keep_below(large, left, 0);
            hak_stat_node_map(node, -(int64_t)(old - left));
            return NULL;
        }
        large = moved;
    }
    hak_stat_node_map(node, (int64_t)(grown - old));
    set_size(large, grown);
    /* Its pages and those mapped after them, or moved over a new mapping,
     * and those fill moves in. */
    add_start(large, old / HAK_PAGE_SIZE);
    fill(large, old, total);
    return large;
}

/* Whether reuse may cut large, which fits a request, to the request's 2
 * MiB units: not at level 2, whose guard page ends every mapping, nor one
 * whose starts are unknown (both parts would count as many mappings as it
 * does, extra_of).  Such a mapping is handed out whole. */
static bool splittable(const struct hak_large *large)
{
    return !hak_harden.guard_bytes && starts_known(large);
}

/* A mapping of at least total bytes made of what node keeps: the smallest
 * that fits, less the whole 2 MiB units it does not need (kept for later);
 * else the biggest that may grow, grown (zeroed blocks excepted, whose
 * every page would then be written). */
static struct hak_large *reuse(unsigned node, size_t total, bool may_grow)
{
    struct large_cache *cache = &caches[node];
    if (!__atomic_load_n(&cache->count, __ATOMIC_RELAXED))
        return NULL;
    struct hak_large *best = NULL, *biggest = NULL;
    unsigned best_at = 0, biggest_at = 0, biggest_rank = 0;
    struct hak_large *evicted[CACHE_SLOTS + 1];
    pthread_mutex_lock(lock_of(cache));
    unsigned evictions = trim(cache, hak_os_now_ms(), 0, evicted);
    /* Level 2's guard page ends every mapping: they are reused whole. */
    if (hak_harden.guard_bytes)
        may_grow = false;
    bool grow_room = room_for_extra();
    for (unsigned i = 0; i < cache->count; i++) {
        struct hak_large *large = cache->slots[i];
        size_t size = large->head.map_size;
        /* One handed out whole only where it fits within a quarter. */
        if (size >= total && (splittable(large) || size - total <= total / 4) &&
            (!best || size < best->head.map_size)) {
            best = large;
            best_at = i;
        }
        /* To grow, the biggest that fill can still move pages into; one
         * that it cannot only where all are such (each would fault in
         * what it lacks, while the pages cached stay); none that growing
         * would take past HAK_LARGE_MAPPING_STARTS, and none at all where
         * the count has no room (grow_room). */
        unsigned rank = !grow_room ? 0 : takes_pieces(large) ? 2 : room_for(large, 1) ? 1 : 0;
        if (rank > biggest_rank ||
            (rank && rank == biggest_rank && size > biggest->head.map_size)) {
            biggest = large;
            biggest_at = i;
            biggest_rank = rank;
        }
    }
    if (best) {
        remove_slot(cache, best_at);
        size_t cut = round_to_chunk(total);
        if (splittable(best) && best->head.map_size >= cut + HAK_CHUNK_SIZE) {
            struct hak_large *rest = split_tail(best, cut);
            if (rest)
                insert(cache, rest);
        }
    } else if (may_grow && biggest) { /* none, when trim took them all or none may grow */
        remove_slot(cache, biggest_at);
    }
    pthread_mutex_unlock(lock_of(cache));
    unmap_all(evicted, evictions);
    struct hak_large *found = best ? best : may_grow ? biggest : NULL;
    if (found)
        found->cached = false;
    if (found && !best) {
        struct hak_large *grown = extend(found, total, total, true);
        if (!grown) {
            /* Back, and a fresh mapping instead. */
            found->cached = true;
            pthread_mutex_lock(lock_of(cache));
            evictions = trim(cache, hak_os_now_ms(), 1, evicted);
            insert(cache, found);
            pthread_mutex_unlock(lock_of(cache));
            unmap_all(evicted, evictions);
            return NULL;
        }
        found = grown;
    }
    return found;
}

/* The block is the program's, which asked for size; in checked mode its
 * canary follows. */
static void *hand_out(struct hak_large *large, size_t size, bool zeroed)
{
    void *block = hak_large_block(large);
    count_live(large, 1);
    large->requested = size;
    if (hak_harden.checked) {
        hak_canary_fill(block, size, large->usable);
        hak_memcheck_malloclike(block, size, zeroed);
    }
    return block;
}

void *hak_large_alloc(size_t size, size_t align, unsigned node, bool zeroed)
{
    size_t offset = align > HAK_PAGE_SIZE ? align : HAK_PAGE_SIZE;
    size_t map_align = align > HAK_CHUNK_SIZE ? align : HAK_CHUNK_SIZE;
    size_t colour = colour_for(node, align);
    /* At least a page past the head's: a zero-byte block must still lie
     * inside its mapping.  Level 2: and a guard page after it, for the
     * mapping's life. */
    size_t guard = hak_harden.guard_bytes;
    size_t own = past_colour(size, colour);
    size_t total = offset + round_to_page(own ? own : 1) + guard;
    if (total < size || total > ((size_t)1 << HAK_MAP_ADDRESS_BITS)) {
        errno = ENOMEM;
        return NULL;
    }
    bool interleaved = hak_options.interleave_bytes && size >= hak_options.interleave_bytes;
    bool reusable = offset == HAK_PAGE_SIZE && !interleaved;
    /* Level 2's guard page stays right after the block. */
    if (reusable && !guard)
        total = mapped_size(total, node);
    if (reusable) {
        struct hak_large *cached = reuse(node, total, !zeroed);
        if (cached) {
            if (hak_harden.guard_bytes)
                hak_os_unguard(hak_large_block(cached), cached->usable);
            colour_reused(cached, colour, size, align);
            hak_stat_add(HAK_STAT_HOT_HITS, 1);
            count_pages(cached, 0, size);
            hak_memcheck_undefined(hak_large_block(cached), cached->usable);
            if (zeroed)
                memset(hak_large_block(cached), 0, size);
            return hand_out(cached, size, zeroed);
        }
        note_miss(node, total);
    }
    hak_hot_span_release_stale(node);
    hak_shared_pool_release_stale(node);
    struct hak_large *large = hak_os_map_aligned(total, map_align);
    if (!large)
        return NULL;
    if (interleaved)
        hak_numa_interleave(large, total);
    else
        hak_numa_bind(large, total, node);
    advise(large, total, node);
    large->head.kind = HAK_CHUNK_LARGE;
    large->head.node = node;
    large->head.map_size = total;
    large->head.route = HAK_ROUTE_LARGE;
    large->offset = offset;
    large->colour = colour;
    large->usable = total - offset - guard + colour;
    large->reusable = reusable;
    /* A guard page splits the mapping, and such blocks are reused whole.
     * Either count adds nothing to large_extra_mappings (extra_of). */
    large->mapping_count = guard ? HAK_LARGE_STARTS_UNKNOWN : 0;
    if (guard)
        hak_os_guard((char *)large + total - guard, guard);
    if (!hak_page_map_set(large, total, &large->head)) {
        hak_os_unmap(large, total);
        errno = ENOMEM;
        return NULL;
    }
    count_pages(large, 0, size);
    hak_stat_pages_out(HAK_PAGES_SSM, 1, 0); /* the head's page */
    hak_stat_add(HAK_STAT_LARGE_ALLOCS, 1);
    hak_stat_node_map(node, (int64_t)total);
    return hand_out(large, size, zeroed);
}

void hak_large_free(struct hak_large *large, void *ptr)
{
    if (!hak_large_contains(large, ptr)) /* past the mapping, in its last 2 MiB unit */
        hak_fatal("free of a pointer hakmem never handed out:", ptr);
    /* First: a freed block may have been merged into a cached neighbour,
     * whose head its pointer now finds. */
    if (large->cached)
        hak_fatal_note("double free of", ptr, "large block");
    hak_memcheck_freelike(ptr);
    char *block = hak_large_block(large);
    if ((char *)ptr != block) {
        /* The head before the block, a guard page after it. */
        if ((char *)ptr < block || (char *)ptr >= block + large->usable)
            hak_fatal("free of a pointer hakmem never handed out:", ptr);
        hak_fatal_note("free of a pointer inside a block:", ptr, "large block");
    }
    if (hak_harden.checked)
        hak_canary_verify(ptr, large->requested, large->usable, "large block");
    count_live(large, -1);
    struct large_cache *cache = &caches[large->head.node];
    if (!large->reusable || !budget(cache)) {
        unmap(large);
        return;
    }
    note_written(large);
    struct hak_large *evicted[CACHE_SLOTS + 1];
    uint64_t now = hak_os_now_ms();
    /* Level 2: a write after free faults, as on memory unmapped. */
    if (hak_harden.guard_bytes)
        hak_os_guard(block, large->usable);
    large->cached = true;
    large->freed_ms = now;
    pthread_mutex_lock(lock_of(cache));
    /* Coalesced with its cached neighbours, as one mapping to split again. */
    int next = hak_harden.guard_bytes ? -1 : find_at(cache, (char *)large + large->head.map_size);
    if (next >= 0 && mergeable(large, cache->slots[next], 0)) {
        struct hak_large *after = cache->slots[next];
        remove_slot(cache, (unsigned)next);
        merge(large, after);
    }
    for (unsigned i = 0; i < cache->count && !hak_harden.guard_bytes; i++) {
        struct hak_large *before = cache->slots[i];
        if ((char *)before + before->head.map_size == (char *)large) {
            if (!mergeable(before, large, 0))
                break;
            remove_slot(cache, i);
            merge(before, large);
            before->freed_ms = now;
            large = before;
            break;
        }
    }
    unsigned evictions = trim(cache, now, 1, evicted);
    insert(cache, large);
    evictions += trim(cache, now, 0, evicted + evictions);
    pthread_mutex_unlock(lock_of(cache));
    unmap_all(evicted, evictions);
}

/* A block that grows by realloc mostly keeps growing, by a little each time
 * (CPython grows a list or a bytearray by an eighth): its mapping grows by
 * half at least, so that the next few reallocs find the room mapped already
 * instead of each mapping and advising a few pages more (a list grown to
 * 4 MiB took 24 such steps).  Pages mapped ahead take no memory until
 * written (extend fills them with no cached pages), and a block the program
 * fills keeps over half of its pages resident, as note_written wants of a
 * written one (two thirds at least, a little over half where whole 2 MiB
 * units round the mapping up).  Where the address space has no room for
 * the headroom, extend grows the block by what was asked. */
static size_t with_headroom(const struct hak_large *large, size_t total)
{
    size_t ahead = large->head.map_size + large->head.map_size / 2;
    return total < ahead ? round_to_page(ahead) : total;
}

void *hak_large_resize(struct hak_large *large, size_t size)
{
    /* A freed one lies in the cache, which may split, merge or move it. */
    if (large->cached)
        hak_fatal_note("realloc of a freed block:", hak_large_block(large), "large block");
    size_t total = large->offset + round_to_page(past_colour(size, large->colour));
    if (total < size)
        return NULL;
    /* Checked blocks keep their mapping and guard page; the canary follows
     * the size. */
    if (hak_harden.checked) {
        if (size > large->usable || size <= large->usable / 2)
            return NULL;
        /* Only the bytes the block gains are checked, only those it gives
         * up filled: a run of small resizes costs what they move. */
        void *block = hak_large_block(large);
        if (size > large->requested)
            hak_canary_verify(block, large->requested, size, "large block");
        else
            hak_canary_fill(block, size, large->requested);
        hak_memcheck_resized(block, large->requested, size);
        large->requested = size;
        return block;
    }
    if (total <= large->head.map_size) {
        /* Only a block that shrinks to half its size and half its mapping
         * or less moves, so that the rest goes back to the cache.  One that
         * grows stays however small it still is: realloc made it large from
         * 64 or 256 KiB, in a cached mapping of 2 MiB or more, and moved it at
         * every step up to half of that when this looked at the size
         * alone. */
        if (size <= large->requested / 2 && size <= large->usable / 2)
            return NULL;
    } else {
        if (!large->reusable || hak_harden.guard_bytes)
            return NULL;
        count_live(large, -1);
        unsigned node = large->head.node;
        struct hak_large *grown = extend(large, mapped_size(total, node),
                                         mapped_size(with_headroom(large, total), node), false);
        if (!grown) {
            count_live(large, 1);
            return NULL;
        }
        count_live(grown, 1);
        large = grown;
    }
    count_pages(large, large->requested, size);
    large->requested = size;
    return hak_large_block(large);
}

bool hak_large_few_live(unsigned node)
{
    return __atomic_load_n(&caches[node].live_blocks, __ATOMIC_RELAXED) < FEW_LIVE;
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
    pthread_mutex_lock(lock_of(cache));
    unsigned count = cache->count;
    size_t bytes = cache->bytes;
    memcpy(evicted, cache->slots, count * sizeof(evicted[0]));
    cache->count = 0;
    cache->bytes = 0;
    pthread_mutex_unlock(lock_of(cache));
    unmap_all(evicted, count);
    return bytes;
}

void hak_large_lock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        pthread_mutex_lock(&hak_fork_locks.node[i].large.mutex);
}

void hak_large_unlock_all(unsigned nodes)
{
    for (unsigned i = 0; i < nodes; i++)
        pthread_mutex_unlock(&hak_fork_locks.node[i].large.mutex);
}

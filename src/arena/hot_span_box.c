#include "hot_span_box.h"

#include "../options.h"
#include "../os.h"
#include "../stats.h"
#include "page_arena.h"

/* Spans longer than this are not kept by length; L25's largest is 256 pages. */
#define MAX_HOT_PAGES (HAK_L25_MAX / HAK_PAGE_SIZE)

struct hot_span_box {
    pthread_mutex_t lock;
    size_t bytes;
    struct hak_slab *oldest; /* age order, through age_next/age_prev */
    struct hak_slab *newest;
    struct hak_slab *by_pages[MAX_HOT_PAGES + 1]; /* LIFO: the hottest first */
} __attribute__((aligned(HAK_CACHE_LINE)));

static struct hot_span_box boxes[HAK_MAX_NODES] = {
    [0 ... HAK_MAX_NODES - 1] = {.lock = HAK_LOCK_INITIALIZER},
};

static size_t span_bytes(const struct hak_slab *span)
{
    return (size_t)span->pages * HAK_PAGE_SIZE;
}

static void unlink_span(struct hot_span_box *box, struct hak_slab *span)
{
    if (span->prev)
        span->prev->next = span->next;
    else
        box->by_pages[span->pages] = span->next;
    if (span->next)
        span->next->prev = span->prev;
    if (span->age_prev)
        span->age_prev->age_next = span->age_next;
    else
        box->oldest = span->age_next;
    if (span->age_next)
        span->age_next->age_prev = span->age_prev;
    else
        box->newest = span->age_prev;
    span->next = span->prev = span->age_next = span->age_prev = NULL;
    box->bytes -= span_bytes(span);
}

/* Unlinks what is over budget or too old; the caller decommits it unlocked.
 * Times are read before the lock, so an entry may be newer than now. */
static struct hak_slab *collect_evictions(struct hot_span_box *box, uint64_t now)
{
    struct hak_slab *evicted = NULL;
    /* Over budget, go down to three quarters of it: one batch of evictions
     * then, whose neighbouring spans share a madvise call, instead of one
     * call per put (each call flushes every CPU's TLB for the process). */
    size_t target = box->bytes > hak_options.hot_bytes ? hak_options.hot_bytes / 4 * 3
                                                       : hak_options.hot_bytes;
    while (box->oldest && (box->bytes > target ||
                           now >= box->oldest->freed_ms + hak_options.decay_ms)) {
        struct hak_slab *span = box->oldest;
        unlink_span(box, span);
        span->next = evicted;
        evicted = span;
    }
    return evicted;
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

/* Decommits evicted spans, one call per run of adjacent ones, and returns
 * them to the PageArena. */
static void release(struct hak_slab *evicted)
{
    evicted = sort_by_address(evicted);
    while (evicted) {
        char *run_start = evicted->start;
        char *run_end = run_start;
        struct hak_slab *span = evicted;
        while (span && span->start == run_end) {
            run_end += span_bytes(span);
            span = span->next;
        }
        hak_os_decommit(run_start, (size_t)(run_end - run_start));
        while (evicted != span) {
            struct hak_slab *next = evicted->next;
            hak_page_arena_free(evicted);
            hak_stat_add(HAK_STAT_HOT_EVICTIONS, 1);
            evicted = next;
        }
    }
}

struct hak_slab *hak_hot_span_take(unsigned node, uint32_t pages)
{
    struct hot_span_box *box = &boxes[node];
    if (pages > MAX_HOT_PAGES || !box->by_pages[pages])
        return NULL;
    pthread_mutex_lock(&box->lock);
    struct hak_slab *span = box->by_pages[pages];
    if (span)
        unlink_span(box, span);
    struct hak_slab *evicted = collect_evictions(box, hak_os_now_ms());
    pthread_mutex_unlock(&box->lock);
    release(evicted);
    if (span) {
        span->state = HAK_STATE_NONE;
        hak_stat_add(HAK_STAT_HOT_HITS, 1);
    }
    return span;
}

void hak_hot_span_put(struct hak_slab *span)
{
    struct hot_span_box *box = &boxes[span->node];
    atomic_store_explicit(&span->owner, NULL, memory_order_relaxed);
    span->free_node = HAK_NO_NODE;
    span->kind = HAK_SLAB_INVALID;
    span->state = HAK_STATE_POOL;
    span->end = span->start; /* a stray free into it now fails validation */
    if (span->pages > MAX_HOT_PAGES || hak_options.hot_bytes == 0) {
        span->next = NULL;
        release(span);
        return;
    }
    uint64_t now = hak_os_now_ms();
    span->freed_ms = now;
    pthread_mutex_lock(&box->lock);
    span->prev = NULL;
    span->next = box->by_pages[span->pages];
    if (span->next)
        span->next->prev = span;
    box->by_pages[span->pages] = span;
    span->age_next = NULL;
    span->age_prev = box->newest;
    if (box->newest)
        box->newest->age_next = span;
    else
        box->oldest = span;
    box->newest = span;
    box->bytes += span_bytes(span);
    struct hak_slab *evicted = collect_evictions(box, now);
    pthread_mutex_unlock(&box->lock);
    release(evicted);
}

void hak_hot_span_lock_all(void)
{
    for (unsigned i = 0; i < HAK_MAX_NODES; i++)
        pthread_mutex_lock(&boxes[i].lock);
}

void hak_hot_span_unlock_all(void)
{
    for (unsigned i = 0; i < HAK_MAX_NODES; i++)
        pthread_mutex_unlock(&boxes[i].lock);
}

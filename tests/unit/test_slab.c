/* Slabs: carving hands out every block once, touching pages only as they
 * are needed, and shows the page table which pages hold block starts;
 * remote frees from many threads, one by one or in chains, all come back;
 * the NOTIFY protocol queues a full slab on its owner exactly once. */
#include <string.h>

#include "arena/slab.h"
#include "block/block_link.h"
#include "block/size_class.h"
#include "unit.h"

#define REMOTE_THREADS 4
#define REMOTE_ROUNDS 20
#define NOTIFY_ROUNDS 300

static struct hak_heap owner_heap;
static struct hak_heap other_heap;

/* A slab over fresh memory of its own, as a backend would hand it out:
 * after a chunk head and page table, which carving keeps up to date. */
struct test_slab {
    struct hak_slab slab __attribute__((aligned(HAK_CACHE_LINE)));
    struct hak_chunk *chunk;
    size_t head_bytes;
    char *mem;
    size_t bytes;
    unsigned char *seen; /* per block index: how many times it came out */
};

static void test_slab_init(struct test_slab *t, struct hak_heap *owner, unsigned cls)
{
    t->bytes = hak_class_span_bytes[cls];
    size_t table = sizeof(struct hak_chunk) + (t->bytes / HAK_PAGE_SIZE + 1) * sizeof(void *);
    t->head_bytes = (table + HAK_PAGE_SIZE - 1) & ~(HAK_PAGE_SIZE - 1);
    t->chunk = unit_map(t->head_bytes + t->bytes);
    t->mem = (char *)t->chunk + t->head_bytes;
    memset(&t->slab, 0, sizeof(t->slab));
    t->slab.chunk = &t->chunk->head;
    hak_slab_assign(&t->slab, owner, 0, cls, t->mem, t->bytes);
    t->seen = calloc(t->slab.capacity, 1);
    if (!t->seen)
        hard_error("calloc failed");
}

static void test_slab_destroy(struct test_slab *t)
{
    munmap(t->chunk, t->head_bytes + t->bytes);
    free(t->seen);
}

/* What free() finds for each page of the slab: the slab where a carved block
 * starts, hak_interior_slab inside a carved block, hak_invalid_slab where
 * nothing is carved yet. */
static void check_page_table(const struct test_slab *t)
{
    const struct hak_slab *slab = &t->slab;
    for (char *page = t->mem; page < t->mem + t->bytes; page += HAK_PAGE_SIZE) {
        size_t offset = (size_t)(page - slab->start);
        char *first_start =
            slab->start + (offset + slab->block_size - 1) / slab->block_size * slab->block_size;
        char *page_end = page + HAK_PAGE_SIZE < slab->carve ? page + HAK_PAGE_SIZE : slab->carve;
        const struct hak_slab *expected = page >= slab->carve      ? &hak_invalid_slab
                                          : first_start < page_end ? slab
                                                                   : &hak_interior_slab;
        const struct hak_slab *found =
            t->chunk->page_slab[(size_t)(page - (char *)t->chunk) / HAK_PAGE_SIZE];
        if (found != expected) {
            CHECK(false, "class %u: page at offset %zu maps to %s, carve at %zu", slab->cls, offset,
                  found == slab                 ? "the slab"
                  : found == &hak_interior_slab ? "hak_interior_slab"
                  : found == &hak_invalid_slab  ? "hak_invalid_slab"
                                                : "something else",
                  (size_t)(slab->carve - slab->start));
            return;
        }
    }
}

/* Index of block in the slab; fails the check (and returns capacity) when
 * it is not the start of one of the slab's blocks. */
static uint32_t block_index(const struct hak_slab *slab, const void *block)
{
    const char *p = block;
    if (p < slab->start || p >= slab->end || (size_t)(p - slab->start) % slab->block_size) {
        CHECK(false, "class %u: %p is not a block of the slab [%p, %p)", slab->cls, block,
              (void *)slab->start, (void *)slab->end);
        return slab->capacity;
    }
    return (uint32_t)((size_t)(p - slab->start) / slab->block_size);
}

/* Pops one block off the free list as the owner's refill does. */
static void *pop_block(struct hak_slab *slab)
{
    void *block = slab->free;
    slab->free = hak_link_get(block);
    slab->used++;
    return block;
}

static void record_block(struct test_slab *t, void *block)
{
    uint32_t index = block_index(&t->slab, block);
    if (index == t->slab.capacity)
        return;
    CHECK(t->seen[index] == 0, "class %u: block %u handed out twice", t->slab.cls, index);
    t->seen[index]++;
}

/* The owner takes every block: from the free list, extending as it runs dry. */
static void take_all_blocks(struct test_slab *t)
{
    struct hak_slab *slab = &t->slab;
    while (slab->free || hak_slab_extend(slab))
        record_block(t, pop_block(slab));
}

static void check_each_block_seen_once(struct test_slab *t, const char *what)
{
    uint32_t missing = 0;
    for (uint32_t i = 0; i < t->slab.capacity; i++)
        missing += t->seen[i] != 1;
    CHECK(missing == 0, "class %u, %s: %u of %u blocks not seen exactly once", t->slab.cls, what,
          missing, t->slab.capacity);
}

/* ---- carving ---- */

static void check_untouched_beyond(const struct test_slab *t, const char *carve)
{
    uintptr_t first_clean = ((uintptr_t)carve + HAK_PAGE_SIZE - 1) & ~(HAK_PAGE_SIZE - 1);
    for (uintptr_t page = first_clean; page < (uintptr_t)t->mem + t->bytes; page += HAK_PAGE_SIZE)
        if (unit_page_resident((void *)page)) {
            CHECK(false, "class %u: page at offset %zu touched, carving is only at %zu",
                  t->slab.cls, (size_t)(page - (uintptr_t)t->mem), (size_t)(carve - t->slab.start));
            return;
        }
}

static void test_carve_class(unsigned cls)
{
    struct test_slab t;
    test_slab_init(&t, &owner_heap, cls);
    struct hak_slab *slab = &t.slab;
    uint32_t size = hak_class_size[cls];

    CHECK(slab->start == t.mem && slab->carve == t.mem && slab->free == NULL && slab->used == 0,
          "class %u: assign did not reset the slab", cls);
    CHECK(slab->block_size == size, "class %u: block size %u, expected %u", cls, slab->block_size,
          size);
    CHECK(slab->capacity == t.bytes / size, "class %u: capacity %u, expected %zu", cls,
          slab->capacity, t.bytes / size);
    CHECK(slab->end == slab->start + (size_t)slab->capacity * size,
          "class %u: end is not capacity blocks from the start", cls);
    CHECK(atomic_load(&slab->owner) == &owner_heap, "class %u: owner not set", cls);
    CHECK(slab->free_node == slab->node, "class %u: a serving slab must take frees", cls);
    CHECK(hak_slab_has_free(slab), "class %u: a fresh slab has no free block", cls);
    check_untouched_beyond(&t, slab->start);
    check_page_table(&t);

    /* Every other extend finds blocks still on the free list: the fresh
     * ones must go in front of them without losing any. */
    unsigned extends = 0;
    for (;;) {
        char *before = slab->carve;
        if (!hak_slab_extend(slab))
            break;
        extends++;
        size_t advance = (size_t)(slab->carve - before);
        /* Every block that starts in the carve's page, the last one running
         * on into the next (free's fast path takes a block start in a page
         * carved for one of its blocks), so that refills do not come back
         * for every small block; no more, so that pages are touched as
         * they are needed.  One block bigger than a page. */
        char *want = before + size;
        if (size <= HAK_PAGE_SIZE) {
            size_t to_page_end = HAK_PAGE_SIZE - (uintptr_t)before % HAK_PAGE_SIZE;
            want = before + (to_page_end + size - 1) / size * size;
            if (want > slab->end)
                want = slab->end;
        }
        CHECK(slab->carve == want, "class %u: extend carved %zu bytes from page offset %zu", cls,
              advance, (size_t)((uintptr_t)before % HAK_PAGE_SIZE));
        check_untouched_beyond(&t, slab->carve);
        check_page_table(&t);
        /* The fresh blocks are exactly [before, carve), in front of the list. */
        uint32_t fresh = (uint32_t)(advance / size);
        for (uint32_t i = 0; i < fresh && slab->free; i++) {
            char *block = pop_block(slab);
            CHECK(block >= before && block < slab->carve,
                  "class %u: block %p after an extend is not one of the fresh ones", cls,
                  (void *)block);
            record_block(&t, block);
            if (extends % 2 == 0 && i == fresh / 2)
                break;
        }
    }
    while (slab->free)
        record_block(&t, pop_block(slab));
    CHECK(slab->carve + size > slab->end, "class %u: extend gave up with room left", cls);
    CHECK(!hak_slab_has_free(slab), "class %u: exhausted slab claims a free block", cls);
    CHECK(slab->used == slab->capacity, "class %u: used %u after taking %u blocks", cls, slab->used,
          slab->capacity);
    check_each_block_seen_once(&t, "carving");
    test_slab_destroy(&t);
}

static void test_carving(void)
{
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
        test_carve_class(cls);
}

/* ---- remote frees from several threads at once ---- */

/* The owner collects until every thread is done. */
static atomic_uint remote_threads_done;

struct remote_job {
    struct test_slab *t;
    unsigned thread;
    unsigned chain; /* blocks per push: 1 frees them one by one */
    pthread_barrier_t *start;
};

/* Thread i frees blocks i, i + N, ...: neighbours race on the same list.
 * With chain > 1 it links its blocks into chains of that many and pushes
 * each chain at once, as a flushing cache does. */
static void *remote_free_share(void *arg)
{
    struct remote_job *job = arg;
    struct hak_slab *slab = &job->t->slab;
    void *head = NULL, *tail = NULL;
    unsigned linked = 0;
    pthread_barrier_wait(job->start);
    for (uint32_t i = job->thread; i < slab->capacity; i += REMOTE_THREADS) {
        void *block = slab->start + (size_t)i * slab->block_size;
        if (job->chain == 1) {
            hak_slab_remote_free(slab, block);
            continue;
        }
        hak_link_set_or_end(block, head);
        head = block;
        if (!tail)
            tail = block;
        if (++linked == job->chain) {
            hak_slab_remote_free_chain(slab, head, tail, linked);
            head = tail = NULL;
            linked = 0;
        }
    }
    if (head)
        hak_slab_remote_free_chain(slab, head, tail, linked);
    atomic_fetch_add(&remote_threads_done, 1);
    return NULL;
}

/* Starts the threads on the slab's blocks; the caller collects while they run. */
static void start_remote_frees(struct test_slab *t, unsigned chain,
                               pthread_t threads[REMOTE_THREADS],
                               struct remote_job jobs[REMOTE_THREADS], pthread_barrier_t *start)
{
    atomic_store(&remote_threads_done, 0);
    for (unsigned i = 0; i < REMOTE_THREADS; i++) {
        jobs[i] = (struct remote_job){.t = t, .thread = i, .chain = chain, .start = start};
        unit_thread_start(&threads[i], remote_free_share, &jobs[i]);
    }
}

/* Single frees, then chains of growing and uneven lengths. */
static unsigned chain_for_round(unsigned round)
{
    static const unsigned lengths[] = {1, 2, 3, 7, 16, 61};
    return lengths[round % (sizeof(lengths) / sizeof(lengths[0]))];
}

static void test_remote_free_class(unsigned cls)
{
    struct test_slab t;
    test_slab_init(&t, &owner_heap, cls);
    struct hak_slab *slab = &t.slab;
    take_all_blocks(&t);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, REMOTE_THREADS + 1);

    for (unsigned round = 0; round < REMOTE_ROUNDS; round++) {
        memset(t.seen, 0, slab->capacity);
        pthread_t threads[REMOTE_THREADS];
        struct remote_job jobs[REMOTE_THREADS];
        start_remote_frees(&t, chain_for_round(round), threads, jobs, &start);
        pthread_barrier_wait(&start);
        /* The owner collects while the frees arrive, as a refill would. */
        uint64_t collected = 0;
        uint32_t reused = 0;
        while (atomic_load(&remote_threads_done) < REMOTE_THREADS) {
            uint32_t got = hak_slab_collect_remote(slab);
            collected += got;
            for (; got; got--, reused++)
                record_block(&t, pop_block(slab));
        }
        for (unsigned i = 0; i < REMOTE_THREADS; i++)
            unit_thread_join(threads[i]);
        collected += hak_slab_collect_remote(slab);
        CHECK(collected == slab->capacity, "class %u round %u: collected %llu of %u blocks", cls,
              round, (unsigned long long)collected, slab->capacity);
        CHECK(slab->used == reused, "class %u round %u: used %u, but %u blocks are out", cls, round,
              slab->used, reused);
        CHECK(hak_slab_collect_remote(slab) == 0, "class %u: a second collect found blocks", cls);
        CHECK((atomic_load(&slab->remote) & HAK_REMOTE_FLAGS) == HAK_REMOTE_NORMAL,
              "class %u: remote frees changed the flag", cls);
        /* What is left on the free list is the rest, each block once. */
        while (slab->free)
            record_block(&t, pop_block(slab));
        check_each_block_seen_once(&t, "remote frees");
        if (atomic_load(&check_failures))
            break;
    }
    pthread_barrier_destroy(&start);
    test_slab_destroy(&t);
}

static void test_remote_frees(void)
{
    test_remote_free_class(0);                     /* 4096 blocks of 16 B */
    test_remote_free_class(3);                     /* 64 B */
    test_remote_free_class(HAK_FIRST_MID + 1);     /* Mid up to a page: a SuperSlab's slab */
    test_remote_free_class(HAK_SUPERSLAB_CLASSES); /* Mid over a page: a span */
}

/* ---- the NOTIFY protocol ---- */

static unsigned delayed_count(struct hak_heap *heap, const struct hak_slab *which)
{
    unsigned count = 0;
    for (struct hak_slab *s = atomic_load(&heap->delayed); s && count < 1000; s = s->delayed_next)
        count += s == which;
    return count;
}

static unsigned delayed_length(struct hak_heap *heap)
{
    unsigned count = 0;
    for (struct hak_slab *s = atomic_load(&heap->delayed); s && count < 1000; s = s->delayed_next)
        count++;
    return count;
}

/* A slab whose blocks are all handed out, as when the owner arms it. */
static void full_slab(struct test_slab *t, struct hak_heap *owner, unsigned cls)
{
    test_slab_init(t, owner, cls);
    take_all_blocks(t);
    atomic_store(&owner->delayed, NULL);
}

static void *block_at(struct test_slab *t, uint32_t index)
{
    return t->slab.start + (size_t)index * t->slab.block_size;
}

static void test_notify_single_thread(void)
{
    struct test_slab a, b;
    full_slab(&a, &owner_heap, 2);
    full_slab(&b, &owner_heap, 2);

    /* Armed, then disarmed with no remote free: nothing was queued. */
    CHECK(hak_slab_arm_notify(&a.slab), "arming a full slab with no remote blocks failed");
    CHECK(!hak_slab_disarm_notify(&a.slab), "disarm claims a queueing that never happened");
    hak_slab_remote_free(&a.slab, block_at(&a, 0));
    CHECK(atomic_load(&owner_heap.delayed) == NULL, "a remote free on a disarmed slab queued it");

    /* Remote blocks waiting: arming must refuse, the owner collects first. */
    CHECK(!hak_slab_arm_notify(&a.slab), "armed a slab that has remote blocks waiting");
    CHECK(hak_slab_collect_remote(&a.slab) == 1, "the waiting remote block was not collected");
    pop_block(&a.slab);

    /* Armed: the first remote free queues it, later ones do not again. */
    CHECK(hak_slab_arm_notify(&a.slab), "arming failed after collecting");
    CHECK(hak_slab_arm_notify(&b.slab), "arming the second slab failed");
    hak_slab_remote_free(&a.slab, block_at(&a, 1));
    CHECK(delayed_count(&owner_heap, &a.slab) == 1 && delayed_length(&owner_heap) == 1,
          "first remote free on an armed slab: %u queueings of it, %u in all",
          delayed_count(&owner_heap, &a.slab), delayed_length(&owner_heap));
    hak_slab_remote_free(&a.slab, block_at(&a, 2));
    hak_slab_remote_free(&a.slab, block_at(&a, 3));
    CHECK(delayed_count(&owner_heap, &a.slab) == 1, "slab queued %u times",
          delayed_count(&owner_heap, &a.slab));
    hak_slab_remote_free(&b.slab, block_at(&b, 7));
    CHECK(delayed_count(&owner_heap, &a.slab) == 1 && delayed_count(&owner_heap, &b.slab) == 1 &&
              delayed_length(&owner_heap) == 2,
          "two armed slabs freed into: the delayed list is not exactly both");
    CHECK(hak_slab_disarm_notify(&a.slab), "disarm after a queueing remote free returned false");
    CHECK(hak_slab_collect_remote(&a.slab) == 3, "collect after notify lost blocks");
    CHECK(a.slab.used == a.slab.capacity - 3, "used %u after collecting 3 of %u", a.slab.used,
          a.slab.capacity);
    CHECK(hak_slab_collect_remote(&b.slab) == 1, "second slab's block not collected");

    test_slab_destroy(&a);
    test_slab_destroy(&b);
}

/* Remote blocks collected onto a slab whose own free list is not empty
 * join it, every block once; the count comes from the remote word. */
static void test_collect_onto_free_list(void)
{
    struct test_slab t;
    full_slab(&t, &owner_heap, 2);
    struct hak_slab *slab = &t.slab;
    hak_link_set_or_end(block_at(&t, 0), NULL);
    hak_link_set(block_at(&t, 1), block_at(&t, 0));
    slab->free = block_at(&t, 1);
    slab->used -= 2;
    hak_link_set(block_at(&t, 2), block_at(&t, 3));
    hak_link_set(block_at(&t, 3), block_at(&t, 4));
    hak_slab_remote_free_chain(slab, block_at(&t, 2), block_at(&t, 4), 3);
    hak_slab_remote_free(slab, block_at(&t, 5));
    CHECK(hak_slab_collect_remote(slab) == 4, "collected other than the 4 remote blocks");
    CHECK(slab->used == slab->capacity - 6, "used %u with 6 of %u blocks free", slab->used,
          slab->capacity);
    memset(t.seen, 0, slab->capacity);
    unsigned popped = 0;
    while (slab->free && popped <= 6) {
        record_block(&t, pop_block(slab));
        popped++;
    }
    unsigned once = 0;
    for (uint32_t i = 0; i < 6; i++)
        once += t.seen[i] == 1;
    CHECK(popped == 6 && once == 6, "the free list held %u blocks, %u of the 6 freed once", popped,
          once);
    test_slab_destroy(&t);
}

/* The remote word counts a slab's blocks in its top bits: every class's
 * slab or span has fewer than it can hold. */
static void test_remote_count_fits(void)
{
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
        CHECK(hak_class_span_bytes[cls] / hak_class_size[cls] <= HAK_REMOTE_COUNT_MAX,
              "class %u: %u blocks of a span, more than the remote count holds", cls,
              hak_class_span_bytes[cls] / hak_class_size[cls]);
}

static void test_notify_disown_adopt(void)
{
    struct test_slab t;
    full_slab(&t, &owner_heap, 4);
    atomic_store(&other_heap.delayed, NULL);

    /* Disowned while armed: nobody to tell. */
    CHECK(hak_slab_arm_notify(&t.slab), "arming failed");
    hak_slab_disown(&t.slab);
    CHECK(atomic_load(&t.slab.owner) == NULL, "disown left the owner set");
    hak_slab_remote_free(&t.slab, block_at(&t, 0));
    hak_slab_remote_free(&t.slab, block_at(&t, 1));
    CHECK(atomic_load(&owner_heap.delayed) == NULL, "remote free on a disowned slab queued it");
    CHECK(!hak_slab_arm_notify(&t.slab), "armed a disowned slab");
    CHECK(hak_slab_collect_remote(&t.slab) == 2, "remote frees on a disowned slab were lost");
    CHECK((atomic_load(&t.slab.remote) & HAK_REMOTE_FLAGS) == HAK_REMOTE_NEVER,
          "collecting dropped the disowned flag");
    pop_block(&t.slab);
    pop_block(&t.slab);

    /* Adopted: the new owner is the one told. */
    hak_slab_adopt(&t.slab, &other_heap, 0);
    CHECK(atomic_load(&t.slab.owner) == &other_heap && !t.slab.queued, "adopt did not take over");
    CHECK(hak_slab_arm_notify(&t.slab), "arming an adopted slab failed");
    hak_slab_remote_free(&t.slab, block_at(&t, 5));
    CHECK(atomic_load(&owner_heap.delayed) == NULL, "the old owner was told");
    CHECK(delayed_count(&other_heap, &t.slab) == 1 && delayed_length(&other_heap) == 1,
          "the new owner was not told exactly once");
    CHECK(hak_slab_collect_remote(&t.slab) == 1, "block lost after adoption");

    /* Disowned without arming: still nobody told. */
    atomic_store(&other_heap.delayed, NULL);
    hak_slab_disown(&t.slab);
    hak_slab_remote_free(&t.slab, block_at(&t, 9));
    CHECK(atomic_load(&other_heap.delayed) == NULL && atomic_load(&owner_heap.delayed) == NULL,
          "remote free on an unarmed disowned slab queued it");
    CHECK(hak_slab_collect_remote(&t.slab) == 1, "block lost on a disowned slab");
    pop_block(&t.slab);

    /* Blocks still waiting when the slab is adopted: the flag changes under
     * them, and they and their count stay for the new owner. */
    uint32_t used = t.slab.used;
    hak_slab_remote_free(&t.slab, block_at(&t, 10));
    hak_slab_remote_free(&t.slab, block_at(&t, 11));
    hak_slab_adopt(&t.slab, &owner_heap, 0);
    CHECK(hak_slab_collect_remote(&t.slab) == 2, "blocks waiting at the adoption were lost");
    CHECK(t.slab.used == used - 2, "used %u after 2 of %u blocks came back", t.slab.used, used);
    test_slab_destroy(&t);
}

/* Armed, then several threads free at once: exactly one of them queues it. */
static void test_notify_concurrent(void)
{
    struct test_slab t;
    full_slab(&t, &owner_heap, 5); /* 256 B: 256 blocks, 64 per thread */
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, REMOTE_THREADS + 1);
    for (unsigned round = 0; round < NOTIFY_ROUNDS; round++) {
        atomic_store(&owner_heap.delayed, NULL);
        CHECK(hak_slab_arm_notify(&t.slab), "round %u: arming failed", round);
        pthread_t threads[REMOTE_THREADS];
        struct remote_job jobs[REMOTE_THREADS];
        start_remote_frees(&t, chain_for_round(round), threads, jobs, &start);
        pthread_barrier_wait(&start);
        for (unsigned i = 0; i < REMOTE_THREADS; i++)
            unit_thread_join(threads[i]);
        unsigned queued = delayed_length(&owner_heap);
        CHECK(queued == 1 && atomic_load(&owner_heap.delayed) == &t.slab,
              "round %u: slab queued %u times", round, queued);
        CHECK(hak_slab_disarm_notify(&t.slab), "round %u: disarm missed the queueing", round);
        uint32_t collected = hak_slab_collect_remote(&t.slab);
        CHECK(collected == t.slab.capacity && t.slab.used == 0,
              "round %u: collected %u of %u blocks, used %u", round, collected, t.slab.capacity,
              t.slab.used);
        while (t.slab.free)
            pop_block(&t.slab);
        if (atomic_load(&check_failures))
            break;
    }
    pthread_barrier_destroy(&start);
    test_slab_destroy(&t);
}

int main(void)
{
    unit_watchdog();
    test_carving();
    test_remote_frees();
    test_collect_onto_free_list();
    test_remote_count_fits();
    test_notify_single_thread();
    test_notify_disown_adopt();
    test_notify_concurrent();
    return test_result("test_slab");
}

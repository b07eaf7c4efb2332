/* The page map: which chunk owns an address, per 2 MiB unit.  The addresses
 * come from reservations this test makes with PROT_NONE: real address space
 * that nobody else maps, and that no lookup may touch. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "arena/page_map.h"
#include "arena/superslab.h"
#include "front/thread_heap.h"
#include "numa/node.h"
#include "harden.h"
#include "unit.h"

#define UNIT HAK_CHUNK_SIZE
#define LEAF_SPAN ((size_t)UNIT << HAK_MAP_LEAF_BITS) /* what one leaf table covers */

static struct hak_chunk_head heads[4];

/* [base, base + units * 2 MiB) reserved, 2 MiB aligned, with one free
 * unit on either side also reserved. */
static char *reserve_units(size_t units)
{
    size_t size = (units + 3) * UNIT;
    char *raw = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        hard_error("cannot reserve %zu bytes of address space", size);
    return (char *)(((uintptr_t)raw + 2 * UNIT - 1) & ~(uintptr_t)(UNIT - 1));
}

static void check_range(char *base, size_t units, struct hak_chunk_head *want, const char *what)
{
    for (size_t u = 0; u < units; u++) {
        char *unit = base + u * UNIT;
        const char *probes[] = {unit, unit + 1, unit + HAK_PAGE_SIZE, unit + UNIT / 2,
                                unit + UNIT - 1};
        for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
            struct hak_chunk_head *got = hak_page_map_lookup(probes[i]);
            CHECK(got == want, "%s: unit %zu offset %zu maps to %p, expected %p", what, u,
                  (size_t)(probes[i] - unit), (void *)got, (void *)want);
        }
    }
}

/* The units on either side of [base, base + units) stay unmapped. */
static void check_neighbours_unmapped(char *base, size_t units, const char *what)
{
    CHECK(hak_page_map_lookup(base - 1) == NULL, "%s: the unit before the range is mapped", what);
    CHECK(hak_page_map_lookup(base + units * UNIT) == NULL, "%s: the unit after is mapped", what);
}

static void test_ranges(void)
{
    static const size_t unit_counts[] = {1, 2, 3, 5, 8};
    for (size_t i = 0; i < sizeof(unit_counts) / sizeof(unit_counts[0]); i++) {
        size_t units = unit_counts[i];
        char *base = reserve_units(units);
        char what[64];
        snprintf(what, sizeof(what), "%zu units", units);
        check_range(base, units, NULL, what);
        CHECK(hak_page_map_set(base, units * UNIT, &heads[i % 4]), "%s: set failed", what);
        check_range(base, units, &heads[i % 4], what);
        check_neighbours_unmapped(base, units, what);
        hak_page_map_clear(base, units * UNIT);
        check_range(base, units, NULL, what);
    }
}

/* A 4 MiB chunk (an arena chunk) maps both of its units to its head; a
 * size that is not a whole number of units covers the partial one too. */
static void test_chunk_sizes(void)
{
    char *base = reserve_units(3);
    CHECK(hak_page_map_set(base, 2 * UNIT, &heads[0]), "set of a 4 MiB chunk failed");
    CHECK(hak_page_map_lookup(base) == &heads[0] &&
              hak_page_map_lookup(base + UNIT + UNIT / 2) == &heads[0],
          "the two units of a 4 MiB chunk do not map to the same head");
    CHECK(hak_page_map_lookup(base + 2 * UNIT) == NULL, "a 4 MiB chunk maps a third unit");
    hak_page_map_clear(base, 2 * UNIT);

    CHECK(hak_page_map_set(base, UNIT + HAK_PAGE_SIZE, &heads[1]), "set of 2 MiB + 4 KiB failed");
    check_range(base, 2, &heads[1], "2 MiB + 4 KiB");
    CHECK(hak_page_map_lookup(base + 2 * UNIT) == NULL, "2 MiB + 4 KiB maps a third unit");
    hak_page_map_clear(base, UNIT + HAK_PAGE_SIZE);
    check_range(base, 3, NULL, "cleared 2 MiB + 4 KiB");
}

/* Neighbouring chunks each keep their own head, and clearing one leaves the
 * other. */
static void test_neighbours(void)
{
    char *base = reserve_units(4);
    CHECK(hak_page_map_set(base, UNIT, &heads[0]) &&
              hak_page_map_set(base + UNIT, 2 * UNIT, &heads[1]) &&
              hak_page_map_set(base + 3 * UNIT, UNIT, &heads[2]),
          "set of three neighbours failed");
    check_range(base, 1, &heads[0], "first neighbour");
    check_range(base + UNIT, 2, &heads[1], "middle neighbour");
    check_range(base + 3 * UNIT, 1, &heads[2], "last neighbour");
    hak_page_map_clear(base + UNIT, 2 * UNIT);
    check_range(base, 1, &heads[0], "first neighbour after clearing the middle");
    check_range(base + UNIT, 2, NULL, "cleared middle");
    check_range(base + 3 * UNIT, 1, &heads[2], "last neighbour after clearing the middle");
    hak_page_map_clear(base, UNIT);
    hak_page_map_clear(base + 3 * UNIT, UNIT);
}

/* A range across the boundary between two leaf tables (every 16 GiB). */
static void test_leaf_boundary(void)
{
    size_t size = LEAF_SPAN + 4 * UNIT;
    char *raw = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        fprintf(stderr, "cannot reserve %zu bytes; leaf boundary not tested\n", size);
        return;
    }
    char *boundary = (char *)(((uintptr_t)raw + 2 * UNIT + LEAF_SPAN - 1) & ~(LEAF_SPAN - 1));
    char *base = boundary - UNIT;
    CHECK(hak_page_map_set(base, 2 * UNIT, &heads[3]), "set across a leaf boundary failed");
    check_range(base, 2, &heads[3], "across a leaf boundary");
    check_neighbours_unmapped(base, 2, "across a leaf boundary");
    hak_page_map_clear(base, 2 * UNIT);
    check_range(base, 2, NULL, "cleared across a leaf boundary");
    munmap(raw, size);
}

static void test_addresses_never_mapped(void)
{
    CHECK(hak_page_map_lookup(NULL) == NULL, "NULL maps to a chunk");
    CHECK(hak_page_map_lookup((void *)1) == NULL, "address 1 maps to a chunk");
    const uintptr_t beyond[] = {(uintptr_t)1 << 47, ((uintptr_t)1 << 47) + UNIT, (uintptr_t)1 << 56,
                                UINTPTR_MAX - 4095, UINTPTR_MAX};
    for (size_t i = 0; i < sizeof(beyond) / sizeof(beyond[0]); i++)
        CHECK(hak_page_map_lookup((void *)beyond[i]) == NULL, "address %#lx maps to a chunk",
              (unsigned long)beyond[i]);
    /* Memory that is not hakmem's: the stack, this program's data, a
     * mapping of the test's own. */
    int local;
    static int global;
    char *own = unit_map(HAK_CHUNK_SIZE);
    CHECK(hak_page_map_lookup(&local) == NULL, "the stack maps to a chunk");
    CHECK(hak_page_map_lookup(&global) == NULL, "static data maps to a chunk");
    CHECK(hak_page_map_lookup(own) == NULL, "a foreign mapping maps to a chunk");
    /* Nor does free's first test, the thread's part of the SuperSlab
     * region's, take them, nor the region. */
    const void *foreign[] = {NULL, (void *)1, &local, &global, own, (void *)UINTPTR_MAX};
    uintptr_t offset;
    for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
        CHECK(!hak_superslab_region_holds(foreign[i]), "the region holds foreign address %p",
              foreign[i]);
        CHECK(!hak_heap_region_find(&hak_tls, foreign[i], &offset),
              "the thread's part of the region holds foreign address %p", foreign[i]);
    }
    munmap(own, HAK_CHUNK_SIZE);
}

/* Every 2 MiB below the used end of each part of the region, after the
 * part's page table, starts a SuperSlab of the fast route and of the
 * part's node, as the page map has it, retired ones included, whose page
 * bytes the table holds at the SuperSlab's place (arena/superslab.h); the
 * address past it is not held, nor is the table. */
static void check_region_parts(void)
{
    const struct hak_superslab_region *region = &hak_superslab_region;
    size_t capacity = region->part_size - region->table_size;
    CHECK(region->parts >= 1 && region->parts <= HAK_MAX_NODES &&
              region->parts <= hak_numa_node_bound() &&
              region->part_size % HAK_SUPERSLAB_SIZE == 0 &&
              region->table_size % HAK_SUPERSLAB_SIZE == 0 && region->table_size > 0 &&
              region->table_size >= capacity / HAK_PAGE_SIZE &&
              region->table_size - capacity / HAK_PAGE_SIZE < HAK_SUPERSLAB_SIZE,
          "the region has %u parts of %zu bytes, tables of %zu", region->parts, region->part_size,
          region->table_size);
    for (unsigned part = 0; part < region->parts; part++) {
        const uint8_t *table = (const uint8_t *)region->base + part * region->part_size;
        const char *base = (const char *)table + region->table_size;
        size_t used = region->used[part];
        CHECK(used <= capacity, "part %u uses %zu bytes of %zu", part, used, capacity);
        for (size_t offset = 0; offset < used; offset += HAK_SUPERSLAB_SIZE) {
            struct hak_chunk_head *chunk = hak_page_map_lookup(base + offset);
            if (!chunk || (const char *)chunk != base + offset ||
                chunk->kind != HAK_CHUNK_SUPERSLAB || chunk->route != HAK_ROUTE_FAST ||
                chunk->node != part) {
                CHECK(false,
                      "part %u of the region holds %p, which the page map does not give to "
                      "a SuperSlab of the fast route and of node %u",
                      part, (const void *)(base + offset), part);
                break;
            }
            const struct hak_superslab *ss = (const struct hak_superslab *)chunk;
            const uint8_t *bytes = table + offset / HAK_SUPERSLAB_SIZE * HAK_SUPERSLAB_PAGES;
            if (ss->region_page_cls != bytes ||
                memcmp(bytes, ss->page_cls, HAK_SUPERSLAB_PAGES) != 0) {
                CHECK(false, "part %u's page table does not hold SuperSlab %p's page bytes", part,
                      (const void *)ss);
                break;
            }
        }
        CHECK(!hak_superslab_region_holds(base + used),
              "the region holds the address past part %u's last SuperSlab", part);
        CHECK(!hak_superslab_region_holds(table) && !hak_superslab_region_holds(base - 1),
              "the region holds part %u's page table", part);
    }
}

/* free takes a block at an address the thread's part of the region holds
 * for a SuperSlab's of the thread's node: where there is a region (the
 * fast route, no address-space limit), every small block is there, and
 * every Mid one up to a page (HAK_SUPERSLAB_CLASSES), no bigger one.  A
 * copy of the part's used that lags (a SuperSlab another thread of the
 * node made since) sends the block through the page map, which frees it
 * as well. */
static void test_superslab_region(void)
{
    static const size_t sizes[] = {8,    100,  1024,   1025,    2048,   4096,
                                   4097, 5000, 200000, 1048576, 4 << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *block = malloc(sizes[i]);
        if (!block)
            hard_error("malloc(%zu) failed", sizes[i]);
        bool region = hak_superslab_region_exists();
        bool small = sizes[i] <= HAK_PAGE_SIZE;
        CHECK(sizes[i] > HAK_L25_MAX || small == hak_class_in_superslab(hak_class_of(sizes[i])),
              "malloc(%zu)'s class is %s SuperSlab class", sizes[i], small ? "no" : "a");
        uintptr_t offset;
        CHECK(hak_superslab_region_holds(block) == (small && region),
              "malloc(%zu) = %p %s in the SuperSlab region", sizes[i], (void *)block,
              hak_superslab_region_holds(block) ? "lies" : "does not lie");
        CHECK(hak_heap_region_find(&hak_tls, block, &offset) == (small && region),
              "malloc(%zu) = %p %s in the thread's part of the region", sizes[i], (void *)block,
              hak_heap_region_find(&hak_tls, block, &offset) ? "lies" : "does not lie");
        free(block);
    }
    CHECK(hak_superslab_region_exists() == (hak_harden.route == HAK_ROUTE_FAST),
          "a SuperSlab region %s on route %u",
          hak_superslab_region_exists() ? "exists" : "is missing", hak_harden.route);
    if (!hak_superslab_region_exists()) {
        CHECK(hak_tls.region_base == HAK_REGION_UNSET && hak_tls.region_used == 0,
              "without a region the thread has a part of one");
        return;
    }
    check_region_parts();
    uintptr_t part_base;
    const uint8_t *page_table;
    size_t used = hak_superslab_region_part(hak_tls.node, &part_base, &page_table);
    CHECK(hak_tls.region_base == part_base && hak_tls.page_table == page_table &&
              page_table == (const uint8_t *)part_base - hak_superslab_region.table_size &&
              hak_tls.region_used > 0 && hak_tls.region_used <= used,
          "the thread's part of the region, %#lx + %zu, is not node %u's, %#lx + %zu",
          (unsigned long)hak_tls.region_base, hak_tls.region_used, hak_tls.node,
          (unsigned long)part_base, used);

    /* A lagging copy: the block goes through the page map, back to the
     * thread's cache, and the next malloc of its size has it again. */
    size_t seen = hak_tls.region_used;
    hak_tls.region_used = 0;
    char *block = malloc(100);
    uintptr_t freed = (uintptr_t)block;
    free(block);
    CHECK(hak_tls.region_used == 0, "a free looked at the region part again");
    block = malloc(100);
    CHECK((uintptr_t)block == freed, "a block freed through the page map did not reach the cache");
    free(block);
    hak_tls.region_used = seen;

    /* What a slow path reads when it reads the base before another thread
     * set it: no pointer is held, NULL and the first SuperSlab's blocks
     * included. */
    uintptr_t base = hak_superslab_region.base;
    hak_superslab_region.base = HAK_REGION_UNSET;
    static const uintptr_t probes[] = {0, 16, 4096, (uintptr_t)1 << 47, UINTPTR_MAX};
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
        CHECK(!hak_superslab_region_holds((const void *)probes[i]),
              "with the base unset, the region holds %#lx", (unsigned long)probes[i]);
    CHECK(!hak_superslab_region_holds((const char *)base),
          "with the base unset, the region holds its first SuperSlab");
    hak_superslab_region.base = base;

    /* Slabs carved, emptied and given back write their bytes in both. */
    enum { BATCH = 20000 };
    static void *batch[BATCH];
    for (size_t i = 0; i < BATCH; i++)
        batch[i] = malloc(16 + i % 7 * 48);
    check_region_parts();
    for (size_t i = 0; i < BATCH; i++)
        free(batch[i]);
    malloc_trim(0);
    check_region_parts();
}

/* The slab of ptr's page in a fast-route chunk, whose entry is positive,
 * from the address alone. */
static struct hak_slab *fast_slab(uintptr_t entry, const void *ptr)
{
    if (HAK_LIKELY(entry & HAK_MAP_SUPERSLAB))
        return hak_superslab_page_slab(ptr, hak_superslab_page(ptr));
    return hak_arena_page_slab(ptr, hak_arena_page(ptr));
}

/* free() takes a Mid or L25 block's class, node and offset in its slab
 * from its page's entry (struct hak_page_info), found from the address
 * alone: a page whose slab (page_slab) serves blocks has the slab's, but for
 * an L25 block's pages after its first (hak_slab_is_whole_span); every
 * other page (headers, spans, pages not carved yet or inside a block)
 * none.  fast: the page's slab.  False when the entry is wrong. */
static bool check_page_info(struct hak_chunk_head *chunk, char *page, const struct hak_slab *fast)
{
    size_t number = (size_t)(page - (char *)chunk) / HAK_PAGE_SIZE;
    if (hak_arena_chunk_at(page) != (const struct hak_arena_chunk *)chunk) {
        CHECK(false, "page %zu of an arena chunk at %p finds its chunk at %p", number,
              (void *)chunk, (const void *)hak_arena_chunk_at(page));
        return false;
    }
    const struct hak_page_info *info = hak_arena_page_info(page, hak_arena_page(page));
    if (fast->free_node != HAK_NO_NODE &&
        (fast->kind == HAK_SLAB_MID || (fast->kind == HAK_SLAB_L25 && fast->start == page))) {
        /* The offset of a block in the slab's last page, as free takes it. */
        const char *last_page = (const char *)fast->end - HAK_PAGE_SIZE;
        bool right = info->node == fast->free_node && info->cls == fast->cls &&
                     hak_page_info_offset(info, fast->start) == 0 &&
                     hak_page_info_offset(info, last_page) ==
                         (size_t)(last_page - (const char *)fast->start);
        CHECK(right,
              "page %zu of an arena chunk: free would take node %u, class %u and the slab at "
              "%#x; its slab's are %u, %u and %p",
              number, info->node, info->cls, info->slab_start, fast->free_node, fast->cls,
              (void *)fast->start);
        return right;
    }
    bool none = info->node == HAK_NO_NODE;
    CHECK(none,
          "page %zu of an arena chunk, in no slab that serves blocks (kind %u%s), sends free to "
          "the cache of node %u",
          number, fast->kind, fast->kind == HAK_SLAB_L25 ? ", inside an L25 block" : "",
          info->node);
    return none;
}

/* free() finds a page's slab from the address alone (fast_slab, given
 * the unit's entry): on every page of a fast-route chunk, the slab the
 * chunk's page table gives; in a SuperSlab the class of every slab that
 * serves blocks, in an arena chunk the page's word (check_page_info).
 * Only a SuperSlab's entry says HAK_MAP_SUPERSLAB.  False for a chunk on
 * another route. */
static bool check_fast_slabs(struct hak_chunk_head *chunk)
{
    uintptr_t first = hak_page_map_entry(chunk);
    if ((intptr_t)first <= 0)
        return false;
    CHECK(((first & HAK_MAP_SUPERSLAB) != 0) == (chunk->kind == HAK_CHUNK_SUPERSLAB),
          "a chunk of kind %u has an entry %s HAK_MAP_SUPERSLAB", chunk->kind,
          first & HAK_MAP_SUPERSLAB ? "with" : "without");
    for (char *page = (char *)chunk; page < (char *)chunk + chunk->map_size;
         page += HAK_PAGE_SIZE) {
        const struct hak_slab *fast = fast_slab(hak_page_map_entry(page), page);
        if (fast != hak_chunk_slab(chunk, page)) {
            CHECK(false, "page %zu of a chunk of kind %u: free would find slab %p, not %p",
                  (size_t)(page - (char *)chunk) / HAK_PAGE_SIZE, chunk->kind, (const void *)fast,
                  (const void *)hak_chunk_slab(chunk, page));
            return true;
        }
        if (chunk->kind == HAK_CHUNK_SUPERSLAB && fast->kind == HAK_SLAB_SMALL &&
            fast->free_node != HAK_NO_NODE &&
            hak_superslab_page_class(page, hak_superslab_page(page)) != fast->cls) {
            CHECK(false, "page %zu of a SuperSlab: free would take class %u, its slab's is %u",
                  (size_t)(page - (char *)chunk) / HAK_PAGE_SIZE,
                  hak_superslab_page_class(page, hak_superslab_page(page)), fast->cls);
            return true;
        }
        if (chunk->kind == HAK_CHUNK_ARENA && !check_page_info(chunk, page, fast))
            return true;
    }
    return true;
}

/* What hakmem itself hands out maps to the chunk that holds it. */
static void test_own_blocks(void)
{
    unsigned fast_chunks[HAK_CHUNK_LARGE + 1] = {0};
    static const size_t sizes[] = {8, 100, 1024, 5000, 32768, 200000, 1048576};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *block = malloc(sizes[i]);
        if (!block)
            hard_error("malloc(%zu) failed", sizes[i]);
        struct hak_chunk_head *chunk = hak_page_map_lookup(block);
        CHECK(chunk != NULL, "malloc(%zu) = %p is not in the page map", sizes[i], (void *)block);
        if (chunk) {
            CHECK((char *)chunk <= block && block + sizes[i] <= (char *)chunk + chunk->map_size,
                  "malloc(%zu) = %p lies outside its chunk [%p, +%zu)", sizes[i], (void *)block,
                  (void *)chunk, chunk->map_size);
            CHECK(hak_page_map_lookup(block + sizes[i] - 1) == chunk,
                  "the last byte of malloc(%zu) maps elsewhere", sizes[i]);
            fast_chunks[chunk->kind] += check_fast_slabs(chunk);
        }
        free(block);
    }
    if (hak_harden.route == HAK_ROUTE_FAST)
        CHECK(fast_chunks[HAK_CHUNK_SUPERSLAB] && fast_chunks[HAK_CHUNK_ARENA],
              "the fast route's slabs were checked in %u SuperSlabs and %u arena chunks",
              fast_chunks[HAK_CHUNK_SUPERSLAB], fast_chunks[HAK_CHUNK_ARENA]);
}

/* Once Mid and L25 slabs have gone back to the HotSpanBox or the
 * PageArena, their pages' words send free off the fast path again.  A
 * block of each size stays, so that its chunk is not unmapped. */
static void test_page_info_after_release(void)
{
    enum { BLOCKS = 48 };
    static const size_t sizes[] = {3000, 20000, 100000, 700000};
    char *blocks[BLOCKS];
    for (size_t i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(sizes[i % 4]);
        if (!blocks[i])
            hard_error("malloc(%zu) failed", sizes[i % 4]);
        memset(blocks[i], 1, 64);
    }
    struct hak_chunk_head *chunks[BLOCKS];
    for (size_t i = 0; i < BLOCKS; i++) {
        chunks[i] = hak_page_map_lookup(blocks[i]);
        check_fast_slabs(chunks[i]);
    }
    for (size_t i = 4; i < BLOCKS; i++)
        free(blocks[i]);
    unsigned released = 0;
    for (size_t i = 4; i < BLOCKS; i++) {
        check_fast_slabs(chunks[i]);
        released += hak_chunk_slab(chunks[i], blocks[i])->free_node == HAK_NO_NODE;
    }
    if (hak_harden.route == HAK_ROUTE_FAST)
        CHECK(released > 0, "no slab of the %d blocks freed went back to a span", BLOCKS - 4);
    for (size_t i = 0; i < 4; i++)
        free(blocks[i]);
}

int main(void)
{
    unit_watchdog();
    test_ranges();
    test_chunk_sizes();
    test_neighbours();
    test_leaf_boundary();
    test_addresses_never_mapped();
    test_own_blocks();
    test_superslab_region();
    test_page_info_after_release();
    return test_result("test_page_map");
}

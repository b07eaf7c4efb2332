/* Size classes: every request up to 1 MiB gets the smallest class that holds
 * it, and the class table has the shape the allocator relies on. */
#include <string.h>

#include "block/size_class.h"
#include "unit.h"

/* Whether a class's blocks hold HAK_CLASS_COLOUR bytes beyond the requests
 * it serves (size_class.c): the Mid classes above 8 KiB that are not
 * powers of two. */
static bool coloured(unsigned cls)
{
    uint32_t size = hak_class_size[cls];
    return !hak_class_is_small(cls) && !hak_class_is_l25(cls) && size > 8192 &&
           (size & (size - 1)) != 0;
}

/* The largest request a class serves. */
static uint32_t served(unsigned cls)
{
    return hak_class_size[cls] - (coloured(cls) ? HAK_CLASS_COLOUR : 0);
}

/* The smallest class that serves size, by walking the table. */
static unsigned smallest_fitting_class(size_t size)
{
    unsigned cls = 0;
    while (cls < HAK_NUM_CLASSES && served(cls) < size)
        cls++;
    return cls;
}

static void test_every_size_maps_to_smallest_fitting_class(void)
{
    unsigned mismatches = 0;
    for (size_t size = 0; size <= HAK_L25_MAX; size++) {
        unsigned cls = hak_class_of(size);
        unsigned want = smallest_fitting_class(size);
        if (cls == want)
            continue;
        /* One line per wrong size would drown the first ones. */
        if (mismatches++ < 5)
            CHECK(false, "size %zu: class %u (%u B), expected class %u (%u B)", size, cls,
                  cls < HAK_NUM_CLASSES ? hak_class_size[cls] : 0, want,
                  want < HAK_NUM_CLASSES ? hak_class_size[want] : 0);
    }
    CHECK(mismatches == 0, "%u sizes in 0..1 MiB map to a wrong class", mismatches);
}

/* posix_memalign's class for need bytes aligned to align (need >= align,
 * as alloc_aligned asks): the smallest that serves need and whose blocks
 * are aligned to align, where a class's blocks keep the alignment of its
 * size (hak_class_align).  Every need, by a walk up the table that moves
 * as need grows. */
static void test_aligned_class_is_smallest_aligned_fit(void)
{
    unsigned mismatches = 0;
    for (size_t align = 32; align <= HAK_PAGE_SIZE; align *= 2) {
        unsigned want = 0;
        for (size_t need = align; need <= HAK_L25_MAX; need++) {
            while (served(want) < need || hak_class_align(want) < align)
                want++;
            unsigned cls = hak_aligned_class(need, align);
            if (cls == want)
                continue;
            if (mismatches++ < 5)
                CHECK(false, "aligned class of %zu B at %zu: %u (%u B), want %u (%u B)", need,
                      align, cls, hak_class_size[cls], want, hak_class_size[want]);
        }
    }
    CHECK(mismatches == 0, "%u requests got another aligned class than the smallest", mismatches);
}

static void test_table_shape(void)
{
    for (unsigned cls = 1; cls < HAK_NUM_CLASSES; cls++)
        CHECK(hak_class_size[cls] > hak_class_size[cls - 1],
              "class %u (%u B) is not bigger than class %u (%u B)", cls, hak_class_size[cls],
              cls - 1, hak_class_size[cls - 1]);

    static const uint32_t small[HAK_SMALL_CLASSES] = {16,  32,  48,  64,  80,  96,  112,
                                                      128, 160, 192, 224, 256, 320, 384,
                                                      448, 512, 640, 768, 896, 1024};
    for (unsigned cls = 0; cls < HAK_SMALL_CLASSES; cls++)
        CHECK(hak_class_size[cls] == small[cls], "C%u is %u B, expected %u", cls,
              hak_class_size[cls], small[cls]);
    CHECK(hak_class_size[HAK_FIRST_MID - 1] == HAK_SMALL_MAX, "last small class is %u B",
          hak_class_size[HAK_FIRST_MID - 1]);

    CHECK(hak_class_size[HAK_FIRST_MID] == 1280, "M0 is %u B, expected 1280",
          hak_class_size[HAK_FIRST_MID]);
    CHECK(hak_class_size[HAK_SUPERSLAB_CLASSES - 1] == HAK_PAGE_SIZE &&
              hak_class_size[HAK_SUPERSLAB_CLASSES] > HAK_PAGE_SIZE,
          "the SuperSlab classes end at %u B, not at the last class of a page",
          hak_class_size[HAK_SUPERSLAB_CLASSES - 1]);
    CHECK(hak_class_size[HAK_FIRST_L25 - 1] == HAK_MID_MAX, "last Mid class is %u B, expected %u",
          hak_class_size[HAK_FIRST_L25 - 1], HAK_MID_MAX);
    CHECK(hak_class_size[HAK_FIRST_L25] == 40 * 1024, "L0 is %u B, expected 40960",
          hak_class_size[HAK_FIRST_L25]);
    CHECK(hak_class_size[HAK_NUM_CLASSES - 1] == HAK_L25_MAX, "last L25 class is %u B, expected %u",
          hak_class_size[HAK_NUM_CLASSES - 1], HAK_L25_MAX);

    /* Four classes per doubling above 128 B: every fourth is a power of two
     * and the three between are its quarter steps. */
    for (unsigned cls = 8; cls < HAK_NUM_CLASSES; cls++) {
        unsigned step = (cls - HAK_FIRST_MID) % 4;
        uint32_t doubling_base = served(cls - step - 1);
        CHECK(served(cls) == doubling_base + (step + 1) * (doubling_base / 4),
              "class %u (%u B) is not step %u of the doubling from %u B", cls, served(cls),
              step + 1, doubling_base);
    }
    /* The colour is where a Mid step above 8 KiB is not a power of two,
     * and nowhere else. */
    for (unsigned cls = HAK_FIRST_MID; cls < HAK_FIRST_L25; cls++) {
        uint32_t size = served(cls);
        bool spread = size > 8192 && (size & (size - 1)) != 0;
        uint32_t want = size + (spread ? HAK_CLASS_COLOUR : 0);
        CHECK(hak_class_size[cls] == want, "Mid class %u is %u B, expected %u", cls,
              hak_class_size[cls], want);
    }

    /* free's block-start test passes exactly the starts of the blocks a
     * slab or span of the class holds: not inside a block, not past the
     * last block (where the span's bytes are no multiple of the size), not
     * below the start (a 32-bit offset that wrapped).  The limit for a
     * slab's own count of blocks bounds the same way, and 0 passes none. */
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        uint32_t size = hak_class_size[cls];
        uint32_t count = hak_class_span_bytes[cls] / size;
        CHECK(hak_class_divisors.limit[cls] == hak_block_limit(cls, count),
              "class %u (%u B): the table's limit is not that of %u blocks", cls, size, count);
        unsigned wrong = 0;
        for (uint32_t offset = 0; offset < hak_class_span_bytes[cls] + 2 * size; offset += 16) {
            bool want = offset % size == 0 && offset / size < count;
            wrong += hak_class_starts_block(cls, offset) != want;
        }
        for (uint64_t below = 16; below < (uint64_t)1 << 31; below *= 2) {
            wrong += hak_class_starts_block(cls, (uint32_t)(0 - below));
            if (below * size < (uint64_t)1 << 32)
                wrong += hak_class_starts_block(cls, (uint32_t)(0 - below * size));
        }
        uint32_t fewer = count > 1 ? count / 2 : 1;
        uint64_t limit = hak_block_limit(cls, fewer);
        for (uint32_t k = 0; k <= count; k++)
            wrong +=
                hak_block_starts(&hak_class_divisors.magic[cls], &limit, k * size) != (k < fewer);
        uint64_t none = hak_block_limit(cls, 0);
        wrong += hak_block_starts(&hak_class_divisors.magic[cls], &none, 0);
        CHECK(wrong == 0, "class %u (%u B): the block-start test is wrong at %u offsets", cls, size,
              wrong);
    }

    /* Blocks carved from page-aligned memory keep 16-byte alignment. */
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++)
        if (hak_class_size[cls] >= 16)
            CHECK(hak_class_size[cls] % 16 == 0, "class %u (%u B) breaks 16-byte alignment", cls,
                  hak_class_size[cls]);

    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        CHECK(hak_class_is_small(cls) == (hak_class_size[cls] <= HAK_SMALL_MAX),
              "hak_class_is_small(%u) wrong", cls);
        CHECK(hak_class_is_l25(cls) == (hak_class_size[cls] > HAK_MID_MAX),
              "hak_class_is_l25(%u) wrong", cls);
    }
}

static void test_range_edges(void)
{
    CHECK(hak_class_of(HAK_SMALL_MAX) == HAK_FIRST_MID - 1,
          "1024 B is not in the last small class");
    CHECK(hak_class_of(HAK_SMALL_MAX + 1) == HAK_FIRST_MID, "1025 B is not in M0");
    CHECK(hak_class_of(HAK_MID_MAX) == HAK_FIRST_L25 - 1, "32 KiB is not in the last Mid class");
    CHECK(hak_class_of(HAK_MID_MAX + 1) == HAK_FIRST_L25, "32 KiB + 1 is not in L0");
    CHECK(hak_class_of(HAK_L25_MAX) == HAK_NUM_CLASSES - 1, "1 MiB is not in the last class");
    CHECK(hak_small_class(0) == 0, "a request of 0 bytes is not in C0");
}

static void test_class_names(void)
{
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        char want[8];
        if (cls < HAK_FIRST_MID)
            snprintf(want, sizeof(want), "C%u", cls);
        else if (cls < HAK_FIRST_L25)
            snprintf(want, sizeof(want), "M%u", cls - HAK_FIRST_MID);
        else
            snprintf(want, sizeof(want), "L%u", cls - HAK_FIRST_L25);
        char name[4];
        memset(name, '?', sizeof(name));
        hak_class_name(cls, name);
        CHECK(memchr(name, 0, sizeof(name)) != NULL, "name of class %u is not terminated", cls);
        CHECK(memchr(name, 0, sizeof(name)) == NULL || strcmp(name, want) == 0,
              "class %u is named \"%.4s\", expected \"%s\"", cls, name, want);
    }
}

static void test_span_bytes(void)
{
    for (unsigned cls = 0; cls < HAK_NUM_CLASSES; cls++) {
        uint32_t size = hak_class_size[cls];
        uint32_t span = hak_class_span_bytes[cls];
        CHECK(span >= size, "class %u: span of %u B cannot hold one %u B block", cls, span, size);
        CHECK(span % HAK_PAGE_SIZE == 0, "class %u: span of %u B is not whole pages", cls, span);
        CHECK(span / HAK_PAGE_SIZE <= HAK_ARENA_USABLE_PAGES,
              "class %u: span of %u B does not fit in an arena chunk", cls, span);
        /* The SuperSlab classes: the small ones and the Mid ones up to a
         * page, whose blocks a slab serves. */
        if (hak_class_in_superslab(cls))
            CHECK(span == HAK_SLAB_SIZE && size <= HAK_PAGE_SIZE,
                  "SuperSlab class %u: span %u B is not a slab, or its %u B blocks are over a page",
                  cls, span, size);
        else if (hak_class_is_l25(cls))
            CHECK(span == size, "L25 class %u: span %u B is not exactly one %u B block", cls, span,
                  size);
        else
            CHECK(span / size >= 8, "Mid class %u: span %u B holds %u blocks of %u B, not 8", cls,
                  span, span / size, size);
    }
}

/* The blocks of a slab of a coloured class start at as many offsets within
 * a page as there are blocks, up to the page's 16 steps of the colour: a
 * program touching only their first bytes spreads over the cache sets.
 * Without the colour they would start at one or two. */
static void test_block_starts_spread(void)
{
    for (unsigned cls = HAK_FIRST_MID; cls < HAK_FIRST_L25; cls++) {
        if (!coloured(cls))
            continue;
        uint32_t size = hak_class_size[cls];
        uint32_t blocks = hak_class_span_bytes[cls] / size;
        uint32_t steps = HAK_PAGE_SIZE / HAK_CLASS_COLOUR;
        uint32_t offsets_used = 0;
        for (uint32_t i = 0; i < blocks; i++)
            offsets_used |= 1u << ((uint64_t)i * size % HAK_PAGE_SIZE / HAK_CLASS_COLOUR);
        unsigned offsets = (unsigned)__builtin_popcount(offsets_used);
        unsigned want = blocks < steps ? blocks : steps;
        CHECK(offsets == want,
              "class %u (%u B): %u blocks start at %u offsets of a page, expected %u", cls, size,
              blocks, offsets, want);
    }
}

int main(void)
{
    unit_watchdog();
    test_every_size_maps_to_smallest_fitting_class();
    test_aligned_class_is_smallest_aligned_fit();
    test_table_shape();
    test_range_edges();
    test_class_names();
    test_span_bytes();
    test_block_starts_spread();
    return test_result("test_size_class");
}

/* The allocation API and its glibc edge cases, exercised once through the
 * hak_ twins and once through the standard names (this program links
 * libhakmem, so the standard names resolve to hakmem).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hakmem.h"
#include "harness.h"

/* C23's sized frees, which glibc declares from 2.43 on; hakmem has them
 * whatever the C library. */
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t alignment, size_t size);

struct api {
    const char *prefix;
    void *(*malloc)(size_t size);
    void (*free)(void *ptr);
    void (*free_sized)(void *ptr, size_t size);
    void (*free_aligned_sized)(void *ptr, size_t alignment, size_t size);
    void *(*calloc)(size_t nmemb, size_t size);
    void *(*realloc)(void *ptr, size_t size);
    void *(*reallocarray)(void *ptr, size_t nmemb, size_t size);
    int (*posix_memalign)(void **out, size_t alignment, size_t size);
    void *(*aligned_alloc)(size_t alignment, size_t size);
    void *(*memalign)(size_t alignment, size_t size);
    void *(*valloc)(size_t size);
    void *(*pvalloc)(size_t size);
    size_t (*usable_size)(void *ptr);
};

static const struct api hak_twins = {
    "hak_",       hak_malloc,  hak_free,         hak_free_sized,         hak_free_aligned_sized,
    hak_calloc,   hak_realloc, hak_reallocarray, hak_posix_memalign,     hak_aligned_alloc,
    hak_memalign, hak_valloc,  hak_pvalloc,      hak_malloc_usable_size,
};

static const struct api standard_names = {
    "",       malloc,  free,         free_sized,         free_aligned_sized,
    calloc,   realloc, reallocarray, posix_memalign,     aligned_alloc,
    memalign, valloc,  pvalloc,      malloc_usable_size,
};

/* One size in each tier and at each tier boundary: small classes (8 B ..
 * 1 KiB), Mid (1-32 KiB), L25 (32 KiB - 1 MiB), direct mappings above. */
static const size_t tier_sizes[] = {
    1,           8,
    13,          16,
    24,          100,
    512,         1000,
    1024,        1025,
    2048,        4096,
    10000,       32768,
    32769,       65536,
    100000,      524288,
    1048576,     1048577,
    3 * 1048576, 4 * 1048576 + 5,
};
#define TIER_COUNT (sizeof(tier_sizes) / sizeof(tier_sizes[0]))

static size_t page_size;

static int is_aligned(const void *ptr, size_t alignment)
{
    return ((uintptr_t)ptr & (alignment - 1)) == 0;
}

static size_t round_up(size_t size, size_t alignment)
{
    return (size + alignment - 1) & ~(alignment - 1);
}

/* Writes a pattern over a block, or over its first and last 64 KiB when it
 * is large, so that huge alignments stay cheap. */
#define SAMPLE_SPAN (64 * KiB)

static void fill_sample(void *ptr, size_t size, uint64_t key)
{
    if (size <= 2 * SAMPLE_SPAN) {
        fill_pattern(ptr, size, key);
        return;
    }
    fill_pattern(ptr, SAMPLE_SPAN, key);
    fill_pattern((char *)ptr + size - SAMPLE_SPAN, SAMPLE_SPAN, key + 1);
}

static int sample_intact(const void *ptr, size_t size, uint64_t key)
{
    if (size <= 2 * SAMPLE_SPAN) {
        return pattern_mismatch(ptr, size, key) == PATTERN_INTACT;
    }
    return pattern_mismatch(ptr, SAMPLE_SPAN, key) == PATTERN_INTACT &&
           pattern_mismatch((const char *)ptr + size - SAMPLE_SPAN, SAMPLE_SPAN, key + 1) ==
               PATTERN_INTACT;
}

static void test_malloc_zero(const struct api *api)
{
    enum { COUNT = 64 };
    void *blocks[COUNT];

    for (int i = 0; i < COUNT; i++) {
        blocks[i] = api->malloc(opaque_size(0));
        CHECK(blocks[i] != NULL, "%smalloc(0) returned NULL", api->prefix);
        for (int j = 0; j < i; j++) {
            CHECK(blocks[i] == NULL || blocks[i] != blocks[j],
                  "%smalloc(0) returned %p twice while both are live", api->prefix, blocks[i]);
        }
    }
    for (int i = 0; i < COUNT; i++) {
        api->free(blocks[i]);
    }
    api->free(NULL);
}

static void test_calloc(const struct api *api)
{
    static const size_t shapes[][2] = {
        {1, 1},    {3, 7},    {1, 16},    {10, 100},   {1, 1024}, {7, 1000},
        {1, 4096}, {5, 5000}, {1, 40000}, {3, 100000}, {1, MiB},  {1, 3 * MiB + 5},
    };
    enum { BATCH = 8 };

    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        size_t nmemb = shapes[s][0], size = shapes[s][1], total = nmemb * size;
        void *blocks[BATCH];

        /* Dirty blocks of the same size first, so that calloc has recycled
         * memory to hand out and must clear it. */
        for (int i = 0; i < BATCH; i++) {
            blocks[i] = api->malloc(total);
            if (blocks[i] == NULL) {
                hard_error("%smalloc(%zu) failed", api->prefix, total);
            }
            memset(blocks[i], 0xAA, api->usable_size(blocks[i]));
        }
        for (int i = 0; i < BATCH; i++) {
            api->free(blocks[i]);
        }
        for (int i = 0; i < BATCH; i++) {
            blocks[i] = api->calloc(opaque_size(nmemb), opaque_size(size));
            CHECK(blocks[i] != NULL, "%scalloc(%zu, %zu) returned NULL", api->prefix, nmemb, size);
            if (blocks[i] == NULL) {
                continue;
            }
            size_t dirty = nonzero_offset(blocks[i], total);
            CHECK(dirty == PATTERN_INTACT,
                  "%scalloc(%zu, %zu) after free of dirty blocks: byte %zu is not zero",
                  api->prefix, nmemb, size, dirty);
            CHECK(api->usable_size(blocks[i]) >= total,
                  "%scalloc(%zu, %zu): usable size %zu too small", api->prefix, nmemb, size,
                  api->usable_size(blocks[i]));
            memset(blocks[i], 0x55, total);
        }
        for (int i = 0; i < BATCH; i++) {
            api->free(blocks[i]);
        }
    }

    void *none = api->calloc(opaque_size(0), opaque_size(5));
    CHECK(none != NULL, "%scalloc(0, 5) returned NULL", api->prefix);
    api->free(none);
    none = api->calloc(opaque_size(5), opaque_size(0));
    CHECK(none != NULL, "%scalloc(5, 0) returned NULL", api->prefix);
    api->free(none);
}

/* call_format describes the call, e.g. "calloc(%zu, %zu)". */
static void expect_enomem(const struct api *api, void *result, int error, const char *call_format,
                          ...)
{
    char call[128];
    va_list args;

    va_start(args, call_format);
    vsnprintf(call, sizeof(call), call_format, args);
    va_end(args);
    CHECK(result == NULL, "%s%s returned %p, expected NULL", api->prefix, call, result);
    CHECK(error == ENOMEM, "%s%s set errno %d (%s), expected ENOMEM", api->prefix, call, error,
          strerror(error));
    if (result != NULL) {
        api->free(result);
    }
}

static void test_overflow(const struct api *api)
{
    static const size_t overflowing[][2] = {
        {SIZE_MAX / 2 + 1, 2}, {((size_t)1 << 32) + 1, (size_t)1 << 32},
        {SIZE_MAX, SIZE_MAX},  {3, SIZE_MAX / 3 + 1},
        {SIZE_MAX, 2},
    };
    void *result;

    for (size_t i = 0; i < sizeof(overflowing) / sizeof(overflowing[0]); i++) {
        size_t nmemb = opaque_size(overflowing[i][0]), size = opaque_size(overflowing[i][1]);

        errno = 0;
        result = api->calloc(nmemb, size);
        expect_enomem(api, result, errno, "calloc(%#zx, %#zx)", nmemb, size);
        errno = 0;
        result = api->reallocarray(NULL, nmemb, size);
        expect_enomem(api, result, errno, "reallocarray(NULL, %#zx, %#zx)", nmemb, size);

        char *block = api->malloc(300);
        if (block == NULL) {
            hard_error("%smalloc(300) failed", api->prefix);
        }
        fill_pattern(block, 300, 77);
        errno = 0;
        result = api->reallocarray(block, nmemb, size);
        expect_enomem(api, result, errno, "reallocarray(block, %#zx, %#zx)", nmemb, size);
        CHECK(pattern_mismatch(block, 300, 77) == PATTERN_INTACT,
              "%sreallocarray that overflowed damaged the original block", api->prefix);
        result = api->reallocarray(block, opaque_size(30), opaque_size(40));
        CHECK(result != NULL && pattern_mismatch(result, 300, 77) == PATTERN_INTACT,
              "%sreallocarray(block, 30, 40) lost the first 300 bytes", api->prefix);
        api->free(result != NULL ? result : block);
    }

    /* No product overflows here, but the total exceeds PTRDIFF_MAX. */
    size_t beyond = opaque_size((size_t)PTRDIFF_MAX + 1);
    errno = 0;
    result = api->calloc(1, beyond);
    expect_enomem(api, result, errno, "calloc(1, %#zx)", beyond);
    errno = 0;
    result = api->calloc(2, beyond / 2);
    expect_enomem(api, result, errno, "calloc(2, %#zx)", beyond / 2);
}

static void test_beyond_ptrdiff_max(const struct api *api)
{
    static const size_t huge_sizes[] = {
        (size_t)PTRDIFF_MAX + 1, SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX - 15, SIZE_MAX / 4 * 3,
    };
    static const size_t alignments[] = {16, 64, 4096, 2 * MiB};
    void *result;

    for (size_t i = 0; i < sizeof(huge_sizes) / sizeof(huge_sizes[0]); i++) {
        size_t size = opaque_size(huge_sizes[i]);

        errno = 0;
        result = api->malloc(size);
        expect_enomem(api, result, errno, "malloc(%#zx)", size);
        errno = 0;
        result = api->realloc(NULL, size);
        expect_enomem(api, result, errno, "realloc(NULL, %#zx)", size);
        errno = 0;
        result = api->valloc(size);
        expect_enomem(api, result, errno, "valloc(%#zx)", size);
        errno = 0;
        result = api->pvalloc(size);
        expect_enomem(api, result, errno, "pvalloc(%#zx)", size);

        char *block = api->malloc(5000);
        if (block == NULL) {
            hard_error("%smalloc(5000) failed", api->prefix);
        }
        fill_pattern(block, 5000, 5);
        errno = 0;
        result = api->realloc(block, size);
        expect_enomem(api, result, errno, "realloc(block of 5000, %#zx)", size);
        CHECK(pattern_mismatch(block, 5000, 5) == PATTERN_INTACT,
              "%srealloc(block, %#zx) failed and damaged the block", api->prefix, size);
        api->free(block);

        for (size_t a = 0; a < sizeof(alignments) / sizeof(alignments[0]); a++) {
            size_t alignment = alignments[a];
            void *out = &out;

            int error = api->posix_memalign(&out, alignment, size);
            CHECK(error == ENOMEM,
                  "%sposix_memalign(align %zu, size %#zx) returned %d, expected "
                  "ENOMEM",
                  api->prefix, alignment, size, error);
            CHECK(out == &out || out == NULL,
                  "%sposix_memalign(align %zu, size %#zx) failed but wrote %p to *out", api->prefix,
                  alignment, size, out);
            if (error == 0) {
                api->free(out);
            }
            errno = 0;
            result = api->aligned_alloc(alignment, size);
            expect_enomem(api, result, errno, "aligned_alloc(%zu, %#zx)", alignment, size);
            errno = 0;
            result = api->memalign(alignment, size);
            expect_enomem(api, result, errno, "memalign(%zu, %#zx)", alignment, size);
        }
    }
}

static void test_posix_memalign_einval(const struct api *api)
{
    static const size_t bad_alignments[] = {
        0, 1, 2, 3, sizeof(void *) / 2, 12, 24, 48, 3 * 4096, MiB + 8, SIZE_MAX,
    };

    for (size_t i = 0; i < sizeof(bad_alignments) / sizeof(bad_alignments[0]); i++) {
        size_t alignment = opaque_size(bad_alignments[i]);
        void *out = &out;
        int error = api->posix_memalign(&out, alignment, 64);

        CHECK(error == EINVAL, "%sposix_memalign(align %zu, 64) returned %d, expected EINVAL",
              api->prefix, alignment, error);
        CHECK(out == &out || out == NULL,
              "%sposix_memalign(align %zu, 64) failed but wrote %p to *out", api->prefix, alignment,
              out);
        if (error == 0) {
            api->free(out);
        }
    }
}

static void test_posix_memalign_success(const struct api *api)
{
    for (size_t alignment = sizeof(void *); alignment <= 64 * MiB; alignment *= 2) {
        const size_t sizes[] = {
            0, 1, alignment - 1, alignment, alignment + 1, 3 * alignment,
        };
        enum { SIZES = sizeof(sizes) / sizeof(sizes[0]) };
        void *blocks[SIZES];

        for (int i = 0; i < SIZES; i++) {
            void *out = NULL;
            int error = api->posix_memalign(&out, opaque_size(alignment), opaque_size(sizes[i]));

            blocks[i] = error == 0 ? out : NULL;
            CHECK(error == 0, "%sposix_memalign(align %zu, size %zu) returned %d", api->prefix,
                  alignment, sizes[i], error);
            CHECK(error != 0 || out != NULL,
                  "%sposix_memalign(align %zu, size %zu) returned 0 and a NULL pointer",
                  api->prefix, alignment, sizes[i]);
            CHECK(is_aligned(out, alignment),
                  "%sposix_memalign(align %zu, size %zu) returned misaligned %p", api->prefix,
                  alignment, sizes[i], out);
            if (blocks[i] != NULL) {
                CHECK(api->usable_size(blocks[i]) >= sizes[i],
                      "%sposix_memalign(align %zu, size %zu): usable size %zu", api->prefix,
                      alignment, sizes[i], api->usable_size(blocks[i]));
                fill_sample(blocks[i], sizes[i], alignment + (size_t)i);
            }
        }
        /* All six are live together: an overlap would break a pattern. */
        for (int i = 0; i < SIZES; i++) {
            if (blocks[i] != NULL) {
                CHECK(sample_intact(blocks[i], sizes[i], alignment + (size_t)i),
                      "%sposix_memalign(align %zu, size %zu): block overwritten by a neighbour",
                      api->prefix, alignment, sizes[i]);
            }
            api->free(blocks[i]);
        }
    }
}

static size_t next_power_of_two(size_t value)
{
    size_t power = 1;

    while (power < value) {
        power *= 2;
    }
    return power;
}

/* A 2-32 KiB request aligned to 256 bytes or less takes the class malloc
 * would give it, not the next power of two (C++'s aligned new of padded
 * types asks 64 or 128); tried with many blocks live, so that blocks after
 * a slab's first, which starts a page, are checked too. */
static void test_memalign_mid_classes(const struct api *api)
{
    static const size_t sizes[] = {2500, 5000, 10000, 13000, 20000, 27000};
    enum { LIVE = 24 };
    for (size_t alignment = 32; alignment <= 256; alignment *= 2) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t size = sizes[s];
            void *blocks[LIVE];
            for (int i = 0; i < LIVE; i++) {
                void *out = NULL;
                int error = api->posix_memalign(&out, opaque_size(alignment), opaque_size(size));
                blocks[i] = error == 0 ? out : NULL;
                CHECK(error == 0, "%sposix_memalign(align %zu, size %zu) returned %d", api->prefix,
                      alignment, size, error);
                if (!blocks[i])
                    continue;
                CHECK(is_aligned(out, alignment),
                      "%sposix_memalign(align %zu, size %zu) returned misaligned %p", api->prefix,
                      alignment, size, out);
                size_t usable = api->usable_size(out);
                CHECK(usable >= size && usable < next_power_of_two(size),
                      "%sposix_memalign(align %zu, size %zu): usable size %zu, expected at least "
                      "the size and below %zu",
                      api->prefix, alignment, size, usable, next_power_of_two(size));
            }
            for (int i = 0; i < LIVE; i++)
                api->free(blocks[i]);
        }
    }
}

static void test_memalign_and_aligned_alloc(const struct api *api)
{
    for (size_t alignment = 1; alignment <= 64 * MiB; alignment *= 2) {
        const size_t sizes[] = {1, alignment, alignment + 1, 3 * alignment + 5};

        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            size_t size = sizes[i];
            char *block = api->memalign(opaque_size(alignment), opaque_size(size));

            CHECK(block != NULL && is_aligned(block, alignment), "%smemalign(%zu, %zu) returned %p",
                  api->prefix, alignment, size, block);
            if (block != NULL) {
                CHECK(api->usable_size(block) >= size, "%smemalign(%zu, %zu): usable size %zu",
                      api->prefix, alignment, size, api->usable_size(block));
                block[0] = 1;
                block[size - 1] = 2;
            }
            api->free(block);

            block = api->aligned_alloc(opaque_size(alignment), opaque_size(size));
            CHECK(block != NULL && is_aligned(block, alignment),
                  "%saligned_alloc(%zu, %zu) returned %p", api->prefix, alignment, size, block);
            if (block != NULL) {
                CHECK(api->usable_size(block) >= size, "%saligned_alloc(%zu, %zu): usable size %zu",
                      api->prefix, alignment, size, api->usable_size(block));
                block[0] = 1;
                block[size - 1] = 2;
            }
            api->free(block);
        }
    }

    /* glibc rounds an alignment that is not a power of two up to one. */
    static const size_t odd_alignments[] = {0, 3, 24, 48, 100, 3 * 4096};
    for (size_t i = 0; i < sizeof(odd_alignments) / sizeof(odd_alignments[0]); i++) {
        size_t alignment = opaque_size(odd_alignments[i]);
        void *block = api->memalign(alignment, 100);

        CHECK(block != NULL && is_aligned(block, next_power_of_two(alignment)),
              "%smemalign(%zu, 100) returned %p, expected a multiple of %zu", api->prefix,
              alignment, block, next_power_of_two(alignment));
        api->free(block);
    }
}

static void test_valloc_and_pvalloc(const struct api *api)
{
    static const size_t sizes[] = {
        0, 1, 100, 4095, 4096, 4097, 65537, MiB + 3, 5 * MiB,
    };

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t size = opaque_size(sizes[i]);
        char *block = api->valloc(size);

        CHECK(block != NULL && is_aligned(block, page_size), "%svalloc(%zu) returned %p",
              api->prefix, size, block);
        if (block != NULL) {
            size_t usable = api->usable_size(block);
            CHECK(usable >= size, "%svalloc(%zu): usable size %zu", api->prefix, size, usable);
            memset(block, 0x11, usable);
        }
        api->free(block);

        /* pvalloc promises the whole rounded-up page range; callers use
         * malloc_usable_size on it and write all of it. */
        block = api->pvalloc(size);
        CHECK(block != NULL && is_aligned(block, page_size), "%spvalloc(%zu) returned %p",
              api->prefix, size, block);
        if (block == NULL) {
            continue;
        }
        size_t usable = api->usable_size(block);
        CHECK(usable >= round_up(size, page_size),
              "%spvalloc(%zu): usable size %zu, expected at least %zu", api->prefix, size, usable,
              round_up(size, page_size));
        fill_pattern(block, usable, size);
        char *grown = api->realloc(block, usable + 3 * page_size);
        CHECK(grown != NULL && pattern_mismatch(grown, usable, size) == PATTERN_INTACT,
              "%srealloc of a pvalloc(%zu) block lost its %zu usable bytes", api->prefix, size,
              usable);
        api->free(grown != NULL ? grown : block);
    }
}

static void test_fundamental_alignment(const struct api *api)
{
    enum { LIVE = 256 };
    void *live[LIVE] = {NULL};
    int next = 0;
    size_t size;

    for (size = 1; size <= 20 * MiB;) {
        void *block = api->malloc(opaque_size(size));
        size_t alignment = size >= 16 ? 16 : 8;

        CHECK(block != NULL && is_aligned(block, alignment),
              "%smalloc(%zu) returned %p, expected %zu-byte alignment", api->prefix, size, block,
              alignment);
        /* Keep a window of blocks alive so that results are not just the
         * same recycled slot. */
        api->free(live[next]);
        live[next] = block;
        next = (next + 1) % LIVE;

        if (size < 4096) {
            size += 1;
        } else if (size < MiB) {
            size += size / 16 + 1;
        } else {
            size = size * 2 + 4097;
        }
    }
    for (int i = 0; i < LIVE; i++) {
        api->free(live[i]);
    }

    for (size = 16; size <= 2 * MiB; size = size * 3 / 2 + 1) {
        void *block = api->calloc(1, opaque_size(size));
        CHECK(block != NULL && is_aligned(block, 16), "%scalloc(1, %zu) returned %p", api->prefix,
              size, block);
        api->free(block);
    }
}

static void test_realloc_edges(const struct api *api)
{
    static const size_t sizes[] = {0, 1, 100, 5000, 100000, 2 * MiB};

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t size = opaque_size(sizes[i]);
        char *block = api->realloc(NULL, size);

        CHECK(block != NULL, "%srealloc(NULL, %zu) returned NULL", api->prefix, size);
        if (block == NULL) {
            continue;
        }
        CHECK(api->usable_size(block) >= size, "%srealloc(NULL, %zu): usable size %zu", api->prefix,
              size, api->usable_size(block));
        memset(block, 0x22, size);
        /* glibc: realloc(p, 0) frees p and returns NULL. */
        void *result = api->realloc(block, opaque_size(0));
        CHECK(result == NULL, "%srealloc(block of %zu, 0) returned %p, expected NULL (glibc)",
              api->prefix, size, result);
        api->free(result);
    }

    /* A realloc(p, 0) that does not free p leaks 64 MiB of address space per
     * round; the bound leaves room for a cache of freed mappings. */
    size_t vsz_before = vsz_bytes();
    for (int round = 0; round < 64; round++) {
        char *block = api->malloc(64 * MiB);
        if (block == NULL) {
            hard_error("%smalloc(64 MiB) failed", api->prefix);
        }
        block[0] = 1;
        api->free(api->realloc(block, opaque_size(0)));
    }
    size_t vsz_after = vsz_bytes();
    size_t vsz_growth = vsz_after > vsz_before ? vsz_after - vsz_before : 0;
    CHECK(vsz_growth < 1024 * MiB,
          "%srealloc(p, 0) does not free p: address space grew by %zu MiB over 64 rounds of "
          "64 MiB",
          api->prefix, vsz_growth / MiB);
}

/* One step of a realloc chain over a block holding the pattern of key:
 * returns the moved block (NULL after a failed check) and updates *size. */
static char *realloc_in_chain(const struct api *api, char *block, size_t *size, size_t new_size,
                              uint64_t key)
{
    char *moved = api->realloc(block, opaque_size(new_size));
    if (moved == NULL) {
        CHECK(0, "%srealloc(%zu -> %zu) in a chain returned NULL", api->prefix, *size, new_size);
        api->free(block);
        return NULL;
    }
    size_t kept = *size < new_size ? *size : new_size;
    size_t damaged = pattern_mismatch(moved, kept, key);
    CHECK(damaged == PATTERN_INTACT, "%srealloc(%zu -> %zu) in a chain lost byte %zu", api->prefix,
          *size, new_size, damaged);
    *size = new_size;
    return moved;
}

static void test_realloc_tiers(const struct api *api)
{
    for (size_t from = 0; from < TIER_COUNT; from++) {
        for (size_t to = 0; to < TIER_COUNT; to++) {
            size_t old_size = tier_sizes[from], new_size = tier_sizes[to];
            uint64_t key = from * 100 + to;
            char *block = api->malloc(opaque_size(old_size));

            if (block == NULL) {
                hard_error("%smalloc(%zu) failed", api->prefix, old_size);
            }
            fill_pattern(block, old_size, key);
            char *moved = api->realloc(block, opaque_size(new_size));
            CHECK(moved != NULL, "%srealloc(%zu -> %zu) returned NULL", api->prefix, old_size,
                  new_size);
            if (moved == NULL) {
                api->free(block);
                continue;
            }
            size_t kept = old_size < new_size ? old_size : new_size;
            size_t damaged = pattern_mismatch(moved, kept, key);
            CHECK(damaged == PATTERN_INTACT, "%srealloc(%zu -> %zu) lost the contents at byte %zu",
                  api->prefix, old_size, new_size, damaged);
            CHECK(api->usable_size(moved) >= new_size, "%srealloc(%zu -> %zu): usable size %zu",
                  api->prefix, old_size, new_size, api->usable_size(moved));
            CHECK(new_size < 16 || is_aligned(moved, 16),
                  "%srealloc(%zu -> %zu) returned misaligned %p", api->prefix, old_size, new_size,
                  moved);
            memset(moved + kept, 0x33, new_size - kept);
            api->free(moved);
        }
    }

    /* A chain of growth through every tier and back keeps the whole prefix. */
    const uint64_t key = 0xC4A1;
    size_t size = 1;
    char *block = api->malloc(size);
    if (block == NULL) {
        hard_error("%smalloc(1) failed", api->prefix);
    }
    fill_pattern(block, size, key);
    while (block != NULL && size < 6 * MiB) {
        block = realloc_in_chain(api, block, &size, size * 3 / 2 + 1, key);
        if (block != NULL) {
            fill_pattern(block, size, key);
        }
    }
    while (block != NULL && size > 1) {
        block = realloc_in_chain(api, block, &size, size / 3, key);
    }
    api->free(block);
}

static void test_aligned_realloc(const struct api *api)
{
    for (size_t alignment = 64; alignment <= 2 * MiB; alignment *= 4) {
        size_t size = alignment + alignment / 2;
        void *block = NULL;

        if (api->posix_memalign(&block, alignment, size) != 0) {
            CHECK(0, "%sposix_memalign(align %zu, size %zu) failed", api->prefix, alignment, size);
            continue;
        }
        fill_pattern(block, size, alignment);
        char *grown = api->realloc(block, opaque_size(size * 2));
        CHECK(grown != NULL && pattern_mismatch(grown, size, alignment) == PATTERN_INTACT,
              "%srealloc of a %zu-aligned block of %zu to %zu lost its contents", api->prefix,
              alignment, size, size * 2);
        if (grown == NULL) {
            api->free(block);
            continue;
        }
        char *shrunk = api->realloc(grown, opaque_size(size / 3));
        CHECK(shrunk != NULL && pattern_mismatch(shrunk, size / 3, alignment) == PATTERN_INTACT,
              "%srealloc of a %zu-aligned block down to %zu lost its contents", api->prefix,
              alignment, size / 3);
        api->free(shrunk != NULL ? shrunk : grown);
    }
}

static void test_usable_size(const struct api *api)
{
    CHECK(api->usable_size(NULL) == 0, "%smalloc_usable_size(NULL) = %zu, expected 0", api->prefix,
          api->usable_size(NULL));

    for (size_t size = 0; size <= 5000; size++) {
        void *block = api->malloc(opaque_size(size));
        CHECK(block != NULL && api->usable_size(block) >= size,
              "%smalloc(%zu): block %p, usable size %zu", api->prefix, size, block,
              block != NULL ? api->usable_size(block) : 0);
        api->free(block);
    }
    for (size_t i = 0; i < TIER_COUNT; i++) {
        for (size_t delta = 0; delta < 3; delta++) {
            size_t size = tier_sizes[i] + delta * 4093;
            void *block = api->malloc(opaque_size(size));
            CHECK(block != NULL && api->usable_size(block) >= size,
                  "%smalloc(%zu): block %p, usable size %zu", api->prefix, size, block,
                  block != NULL ? api->usable_size(block) : 0);
            api->free(block);
        }
    }
}

/* Whether HAKMEM_HARDEN=2 or memcheck put hakmem in checked mode, where a
 * freed block waits out a quarantine before it is handed out again. */
static int checked_mode(void)
{
    const char *level = getenv("HAKMEM_HARDEN");
    return under_valgrind() || (level != NULL && strcmp(level, "2") == 0);
}

/* free_sized and free_aligned_sized free every kind of block, given the
 * size it was asked with (a calloc's product, a realloc's last size) and,
 * for aligned_alloc's, its alignment: checked mode, which holds the program
 * to both, finds nothing to refuse in any tier.  A freed small block is the
 * next of its size outside checked mode, as after free. */
static void test_sized_frees(const struct api *api)
{
    api->free_sized(NULL, 0);
    api->free_sized(NULL, 100);
    api->free_aligned_sized(NULL, 0, 0);
    api->free_aligned_sized(NULL, 64, 100);
    for (size_t i = 0; i < TIER_COUNT; i++) {
        size_t size = tier_sizes[i];
        char *block = api->malloc(opaque_size(size));
        if (block == NULL) {
            hard_error("%smalloc(%zu) failed", api->prefix, size);
        }
        fill_sample(block, size, i);
        api->free_sized(block, size);

        block = api->calloc(opaque_size(size), 3);
        if (block == NULL) {
            hard_error("%scalloc(%zu, 3) failed", api->prefix, size);
        }
        api->free_sized(block, 3 * size);

        block = api->malloc(opaque_size(size));
        char *resized = block != NULL ? api->realloc(block, opaque_size(size / 2 + 1)) : NULL;
        if (resized == NULL) {
            hard_error("%smalloc(%zu) or its realloc to %zu failed", api->prefix, size,
                       size / 2 + 1);
        }
        api->free_sized(resized, size / 2 + 1);
    }
    for (size_t alignment = 16; alignment <= 4 * MiB; alignment *= 4) {
        for (size_t i = 0; i < TIER_COUNT; i++) {
            size_t size = round_up(tier_sizes[i], alignment);
            char *block = api->aligned_alloc(opaque_size(alignment), opaque_size(size));
            if (block == NULL || !is_aligned(block, alignment)) {
                hard_error("%saligned_alloc(%zu, %zu) returned %p", api->prefix, alignment, size,
                           block);
            }
            block[size - 1] = 1;
            api->free_aligned_sized(block, alignment, size);
        }
    }
    if (!checked_mode()) {
        static const size_t small_sizes[] = {16, 100, 1000};
        for (size_t i = 0; i < sizeof(small_sizes) / sizeof(small_sizes[0]); i++) {
            size_t size = small_sizes[i];
            void *block = api->malloc(opaque_size(size));
            api->free_sized(block, size);
            void *again = api->aligned_alloc(16, opaque_size(size));
            CHECK(again == block,
                  "%sfree_sized(%p, %zu) did not free it: aligned_alloc(16, %zu) gave %p",
                  api->prefix, block, size, size, again);
            api->free_aligned_sized(again, 16, size);
            void *third = api->malloc(opaque_size(size));
            CHECK(third == block,
                  "%sfree_aligned_sized(%p, 16, %zu) did not free it: malloc gave %p", api->prefix,
                  block, size, third);
            api->free(third);
        }
    }
}

/* Skewed towards small blocks like real programs, with every tier present. */
static const struct size_tier mixed_sizes[] = {
    {750, 1, 1024},
    {200, 1025, 32 * KiB},
    {40, 32 * KiB + 1, 256 * KiB},
    {10, MiB + 1, 2 * MiB},
};

/* A block of a size drawn from the mix, written over its whole usable
 * size with the pattern of key. */
static char *fill_whole_block(const struct api *api, uint64_t *rng, size_t *usable, uint64_t key)
{
    size_t size = TIERED_SIZE(rng, mixed_sizes);
    char *block = api->malloc(size);
    if (block == NULL) {
        hard_error("%smalloc(%zu) failed", api->prefix, size);
    }
    *usable = api->usable_size(block);
    fill_pattern(block, *usable, key);
    return block;
}

static void test_neighbours(const struct api *api)
{
    enum { COUNT = 2000 };
    static char *blocks[COUNT];
    static size_t usable[COUNT];
    uint64_t rng = 42;

    for (int i = 0; i < COUNT; i++) {
        blocks[i] = fill_whole_block(api, &rng, &usable[i], (uint64_t)i);
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < COUNT; i++) {
            size_t damaged = pattern_mismatch(blocks[i], usable[i], (uint64_t)i);
            CHECK(damaged == PATTERN_INTACT,
                  "%sblock %d (%p, usable %zu) was overwritten at byte %zu after its neighbours "
                  "were written over their whole usable size (round %d)",
                  api->prefix, i, (void *)blocks[i], usable[i], damaged, round);
        }
        /* Replace a random half, so new blocks land between old ones. */
        for (int i = 0; i < COUNT; i++) {
            if (rng_next(&rng) % 2) {
                continue;
            }
            api->free(blocks[i]);
            blocks[i] = fill_whole_block(api, &rng, &usable[i], (uint64_t)i);
        }
    }
    for (int i = 0; i < COUNT; i++) {
        api->free(blocks[i]);
    }
}

/* The standard names and the twins are one allocator: blocks cross over. */
static void test_interposition(void)
{
    char *block = malloc(100);

    CHECK(block != NULL && hak_malloc_usable_size(block) >= 100,
          "malloc is not hakmem's: hak_malloc_usable_size(malloc(100)) = %zu",
          block != NULL ? hak_malloc_usable_size(block) : 0);
    fill_pattern(block, 100, 1);
    block = hak_realloc(block, 20000);
    CHECK(block != NULL && pattern_mismatch(block, 100, 1) == PATTERN_INTACT,
          "hak_realloc of a malloc'd block lost its contents");
    hak_free(block);

    block = hak_malloc(200);
    CHECK(block != NULL && malloc_usable_size(block) >= 200,
          "malloc_usable_size(hak_malloc(200)) = %zu",
          block != NULL ? malloc_usable_size(block) : 0);
    fill_pattern(block, 200, 2);
    block = realloc(block, 70000);
    CHECK(block != NULL && pattern_mismatch(block, 200, 2) == PATTERN_INTACT,
          "realloc of a hak_malloc'd block lost its contents");
    free(block);

    void *zeroed = calloc(10, 10);
    hak_free(zeroed);

    /* The same code under two names, which the compiler may take for two
     * functions and so for two addresses (clang folds the comparison to
     * false): compared as the loader resolved them. */
    void (*volatile sized)(void *, size_t) = free_sized;
    void (*volatile aligned_sized)(void *, size_t, size_t) = free_aligned_sized;
    CHECK(sized == hak_free_sized && aligned_sized == hak_free_aligned_sized,
          "free_sized or free_aligned_sized is not hakmem's");
}

static void test_stats_print(void)
{
    int fd = memfd_create("hakmem-stats", 0);
    struct stat written;

    if (fd < 0) {
        hard_error("memfd_create failed: %s", strerror(errno));
    }
    hak_stats_print(fd);
    CHECK(fstat(fd, &written) == 0 && written.st_size > 0,
          "hak_stats_print wrote nothing to its file descriptor");
    close(fd);
}

int main(void)
{
    const struct api *apis[] = {&hak_twins, &standard_names};

    page_size = (size_t)sysconf(_SC_PAGESIZE);
    test_interposition();
    test_stats_print();
    for (size_t i = 0; i < sizeof(apis) / sizeof(apis[0]); i++) {
        const struct api *api = apis[i];

        printf("testing the %s names\n", api == &hak_twins ? "hak_" : "standard");
        test_malloc_zero(api);
        test_calloc(api);
        test_overflow(api);
        test_beyond_ptrdiff_max(api);
        test_posix_memalign_einval(api);
        test_posix_memalign_success(api);
        test_memalign_and_aligned_alloc(api);
        test_memalign_mid_classes(api);
        test_valloc_and_pvalloc(api);
        test_fundamental_alignment(api);
        test_realloc_edges(api);
        test_realloc_tiers(api);
        test_aligned_realloc(api);
        test_usable_size(api);
        test_sized_frees(api);
        test_neighbours(api);
    }
    return test_result("test_api");
}

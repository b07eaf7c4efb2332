#include "size_class.h"

/* Tables laid out by hand, a row per doubling. */
/* clang-format off */
#define SMALL_OF(sz) ((sz) <= 16 ? 0 : (sz) <= 128 ? ((sz) + 15) / 16 - 1 \
                      : (sz) <= 256 ? 8 + ((sz) - 129) / 32 : (sz) <= 512 ? 12 + ((sz) - 257) / 64 \
                      : 16 + ((sz) - 513) / 128)
#define B4(sz) SMALL_OF(sz), SMALL_OF((sz) + 1), SMALL_OF((sz) + 2), SMALL_OF((sz) + 3)
#define B16(sz) B4(sz), B4((sz) + 4), B4((sz) + 8), B4((sz) + 12)
#define B64(sz) B16(sz), B16((sz) + 16), B16((sz) + 32), B16((sz) + 48)
#define B256(sz) B64(sz), B64((sz) + 64), B64((sz) + 128), B64((sz) + 192)

const uint8_t hak_small_class_of[HAK_SMALL_MAX + 1] = {
    B256(0), B256(256), B256(512), B256(768), SMALL_OF(1024),
};

/* The Mid and L25 classes by (size - 1) / 256: every bound between them is
 * a multiple of 256, a quarter of a doubling from 1 KiB on, so a 256-byte
 * step of sizes lies in one class.  A load where the arithmetic took seven
 * instructions (a count of leading zeros, a shift by it, a mask).  m: a
 * size less one, from 1024; the entries for 1 KiB and less, which
 * hak_mid_class never reads, hold what the formula makes of smaller m. */
#define LOG2_FROM_1K(m) ((m) >> 19 ? 19u : (m) >> 18 ? 18u : (m) >> 17 ? 17u : (m) >> 16 ? 16u \
                         : (m) >> 15 ? 15u : (m) >> 14 ? 14u : (m) >> 13 ? 13u : (m) >> 12 ? 12u \
                         : (m) >> 11 ? 11u : 10u)
#define MID_OF(m) (HAK_FIRST_MID + (LOG2_FROM_1K(m) - 10) * 4 + \
                   (((m) >> (LOG2_FROM_1K(m) - 2)) & 3))
#define M4(i) MID_OF((i) * 256u), MID_OF((i) * 256u + 256), MID_OF((i) * 256u + 512), \
              MID_OF((i) * 256u + 768)
#define M16(i) M4(i), M4((i) + 4), M4((i) + 8), M4((i) + 12)
#define M64(i) M16(i), M16((i) + 16), M16((i) + 32), M16((i) + 48)
#define M256(i) M64(i), M64((i) + 64), M64((i) + 128), M64((i) + 192)
#define M1024(i) M256(i), M256((i) + 256), M256((i) + 512), M256((i) + 768)

const uint8_t hak_mid_class_of[HAK_L25_MAX / 256] = {
    M1024(0), M1024(1024), M1024(2048), M1024(3072),
};

/* The classes of page-aligned blocks by (need - 1) / 4 KiB, need >= 4 KiB:
 * the class of need rounded up to a page, or, where that is a colour class
 * (whose blocks are 256-aligned only), its doubling's power of two, the
 * last class of its four.  A load where hak_aligned_class otherwise tests
 * for the colour classes, a branch that a mix of sizes takes in two
 * requests of five (page-aligned buffers of 4-64 KiB). */
#define UNCOLOURED(c) ((c) - HAK_FIRST_COLOUR_CLASS < HAK_COLOUR_CLASSES ? (c) | 3u : (c))
#define PAGE_OF(i) UNCOLOURED(MID_OF(((i) + 1u) * HAK_PAGE_SIZE - 1))
#define P4(i) PAGE_OF(i), PAGE_OF((i) + 1), PAGE_OF((i) + 2), PAGE_OF((i) + 3)
#define P16(i) P4(i), P4((i) + 4), P4((i) + 8), P4((i) + 12)
#define P64(i) P16(i), P16((i) + 16), P16((i) + 32), P16((i) + 48)

const uint8_t hak_page_aligned_class_of[HAK_L25_MAX / HAK_PAGE_SIZE] = {
    P64(0), P64(64), P64(128), P64(192),
};

/* Quarter steps: class k of a doubling from 2^e serves up to (5+k) << (e-2),
 * its blocks colour bytes longer but for the power of two; F of each. */
#define STEPS(F, e, colour) F((5u << ((e) - 2)) + (colour)), F((6u << ((e) - 2)) + (colour)), \
                            F((7u << ((e) - 2)) + (colour)), F(8u << ((e) - 2))

/* Every class's F(size), in class order: the one list the per-class tables
 * below are made from.  The doublings from 8 KiB up add HAK_CLASS_COLOUR
 * bytes to each block of the three steps that are not powers of two.  At a
 * stride of 10, 12 or 14 KiB, or 20, 24 or 28, the blocks of a span start
 * at 2 KiB or 4 KiB multiples, and the spans at page multiples: the first
 * bytes of every block, all a program touches of a buffer sized
 * generously, fall into 32 or 64 of the 2048 sets of a 1 MiB 8-way cache
 * and evict each other.  256 bytes more step every block's start to
 * another 256-byte offset, through 512 of the sets, and keep the blocks
 * 256-aligned as before (alloc_aligned).  mid_light ten times longer, 2
 * threads writing 64 B of each block: 62.2M ops/s instead of 54.7M
 * (tcmalloc 73.2M); with one thread, such a cache simulated by cachegrind
 * misses 199k times instead of 379k.  The blocks of the smaller classes
 * start at 64 or more of those sets already; the powers of two keep their
 * size, which aligned allocation relies on, and so do the L25 classes,
 * whose spans are one block each. */
#define CLASSES(F)                                                                             \
    F(16), F(32), F(48), F(64), F(80), F(96), F(112), F(128),                                  \
    STEPS(F, 7, 0), STEPS(F, 8, 0), STEPS(F, 9, 0),                   /* 160 B ... 1 KiB */     \
    STEPS(F, 10, 0), STEPS(F, 11, 0), STEPS(F, 12, 0),                /* Mid: 1280 B ... */     \
    STEPS(F, 13, HAK_CLASS_COLOUR), STEPS(F, 14, HAK_CLASS_COLOUR),   /* ... 32 KiB */          \
    STEPS(F, 15, 0), STEPS(F, 16, 0), STEPS(F, 17, 0), STEPS(F, 18, 0), STEPS(F, 19, 0) /* L25 */

/* The smallest block is 16 bytes: a free block holds its link and its
 * double-free tag (block/block_link.h); every block is a multiple of 16, as
 * malloc's alignment is. */
#define SIZE(size) (size)
const uint32_t hak_class_size[HAK_NUM_CLASSES] = {CLASSES(SIZE)};

/* A SuperSlab's slab up to a page (HAK_SUPERSLAB_CLASSES); a Mid span holds
 * at least eight blocks; an L25 span is exactly one block. */
#define SPAN(size) ((size) <= 8192 ? 65536u : (size) <= 16384 ? 131072u \
                    : (size) <= 32768 ? 262144u : (uint32_t)(size))
_Static_assert(SPAN(4096) == HAK_SLAB_SIZE, "the SuperSlab classes' spans are a slab");

const uint32_t hak_class_span_bytes[HAK_NUM_CLASSES] = {CLASSES(SPAN)};

/* The block-start test (hak_block_starts).  magic = floor(2^64 / size) + 1,
 * and excess = size * magic modulo 2^64, which lies in 1..size.  For an
 * offset n = q * size + r below 2^32, n * magic modulo 2^64 is
 * q * excess + r * magic with no wrap: q * excess where n is a multiple of
 * the size, and at least magic (above 2^43, for blocks of at most 1 MiB)
 * where it is not (Lemire, Kaser and Kurz, "Faster remainder by direct
 * computation", 2019, with magic one more for a power of two, whose excess
 * would be 0).  So one compare with count * excess, where count blocks
 * fit, passes exactly the starts of those blocks: not a pointer inside a
 * block, nor one past the last block, where a slab's bytes are no multiple
 * of the size (free of slab + 1365 * 48, past a 48 B class's last block in
 * 64 KiB, cached the block, and the next malloc handed it out across the
 * next slab's first), nor one below the start, whose 32-bit offset
 * wraps.  The limit is for a span of the class's span bytes. */
#define MAGIC(size) (UINT64_MAX / (size) + 1 + (UINT64_MAX % (size) == (size) - 1))
#define EXCESS(size) ((uint64_t)(size) * MAGIC(size))
#define LIMIT(size) (SPAN(size) / (size) * EXCESS(size))

const struct hak_class_divisors hak_class_divisors = {
    .magic = {CLASSES(MAGIC)},
    .limit = {CLASSES(LIMIT)},
};
/* clang-format on */

_Static_assert(sizeof(hak_class_size) / sizeof(hak_class_size[0]) == HAK_NUM_CLASSES, "classes");
/* hak_aligned_class finds a doubling's power of two at the index that ends
 * in binary 11. */
_Static_assert(HAK_FIRST_MID % 4 == 0, "the Mid doublings start at multiples of four");

void hak_class_name(unsigned cls, char name[4])
{
    unsigned index = cls;
    char letter = 'C';
    if (cls >= HAK_FIRST_L25) {
        letter = 'L';
        index = cls - HAK_FIRST_L25;
    } else if (cls >= HAK_FIRST_MID) {
        letter = 'M';
        index = cls - HAK_FIRST_MID;
    }
    name[0] = letter;
    if (index >= 10) {
        name[1] = (char)('0' + index / 10);
        name[2] = (char)('0' + index % 10);
        name[3] = 0;
    } else {
        name[1] = (char)('0' + index);
        name[2] = 0;
    }
}

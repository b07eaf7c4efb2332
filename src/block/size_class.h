/* Size classes: which class serves a request and how big its blocks are. */
#ifndef HAK_SIZE_CLASS_H
#define HAK_SIZE_CLASS_H

#include "../internal.h"

/* Small classes by size, up to 1 KiB: a byte per size, where one per 8
 * bytes took two instructions more in every malloc (the rounding add and
 * the shift). */
extern const uint8_t hak_small_class_of[HAK_SMALL_MAX + 1] HAK_SHARED;
extern const uint8_t hak_mid_class_of[HAK_L25_MAX / 256] HAK_SHARED;
extern const uint32_t hak_class_size[HAK_NUM_CLASSES] HAK_SHARED;
/* For hak_aligned_class at a page (size_class.c). */
extern const uint8_t hak_page_aligned_class_of[HAK_L25_MAX / HAK_PAGE_SIZE] HAK_SHARED;
/* For the block-start test (hak_block_starts): each class's magic number,
 * and the bound on the products of its blocks' offsets in a slab or span of
 * hak_class_span_bytes (size_class.c).  One object, so that the test reads
 * both off one address in a register. */
struct hak_class_divisors {
    uint64_t magic[HAK_NUM_CLASSES];
    uint64_t limit[HAK_NUM_CLASSES];
};
extern const struct hak_class_divisors hak_class_divisors HAK_SHARED;
/* What the Mid blocks of 10-28 KiB that are not a power of two hold beyond
 * the requests their class serves, so that their starts spread over the
 * cache sets (size_class.c). */
#define HAK_CLASS_COLOUR 256
/* Bytes of the span a Mid or L25 slab of the class occupies: for the Mid
 * classes up to a page, which take SuperSlab slabs (HAK_SUPERSLAB_CLASSES),
 * a slab's. */
extern const uint32_t hak_class_span_bytes[HAK_NUM_CLASSES] HAK_SHARED;

static inline unsigned hak_small_class(size_t size)
{
    return hak_small_class_of[size];
}

/* For 1 KiB < size <= 1 MiB: four classes per doubling (size_class.c). */
static inline unsigned hak_mid_class(size_t size)
{
    return hak_mid_class_of[(size - 1) >> 8];
}

static inline unsigned hak_class_of(size_t size)
{
    return size <= HAK_SMALL_MAX ? hak_small_class(size) : hak_mid_class(size);
}

static inline bool hak_class_is_small(unsigned cls)
{
    return cls < HAK_FIRST_MID;
}

/* Whether SuperSlabs serve the class's blocks (HAK_SUPERSLAB_CLASSES). */
static inline bool hak_class_in_superslab(unsigned cls)
{
    return cls < HAK_SUPERSLAB_CLASSES;
}

static inline bool hak_class_is_l25(unsigned cls)
{
    return cls >= HAK_FIRST_L25;
}

/* What every block of the class is aligned to: the largest power of two
 * dividing its size, up to a page (slabs and spans start page-aligned). */
static inline uint32_t hak_class_align(unsigned cls)
{
    uint32_t size = hak_class_size[cls];
    uint32_t align = size & -size;
    return align < HAK_PAGE_SIZE ? align : (uint32_t)HAK_PAGE_SIZE;
}

/* The classes of the doublings from 8 KiB to 32 KiB, whose blocks but the
 * powers of two are HAK_CLASS_COLOUR bytes longer than a step (size_class.c). */
#define HAK_FIRST_COLOUR_CLASS (HAK_FIRST_MID + 12)
#define HAK_COLOUR_CLASSES 8

/* The smallest class whose blocks hold need bytes, need <= HAK_L25_MAX,
 * and are aligned to align, a power of two up to a page.  A class's blocks
 * are aligned to the largest power of two dividing its size, up to a page,
 * since slabs and spans start page-aligned (hak_class_align).  need
 * rounded up to a multiple of align is a class's size, or lies in a class
 * whose size is a multiple of a larger power of two: every multiple of 16
 * up to 128 B is a class, and above, the classes of a doubling step by a
 * quarter of it.  The exceptions are the colour classes, 256-aligned,
 * whose doubling's power of two is the next class aligned to more: the
 * last of its four, which lie at indices from a multiple of four.  No test
 * of the class found: where the class of need was not aligned enough,
 * aligned allocation took the power of two above, a branch that a mix of
 * sizes mispredicts (a free and a posix_memalign of a 64-aligned block of
 * 16-271 B: 52M a second, tcmalloc's 86M; 80M so), and a third more
 * memory for some sizes (129-160 B at 64: 256 B, not 192).  The colour
 * classes' fix stays a branch (the empty asm): as a conditional move, the
 * cache's head waited on it (page-aligned blocks of a page: 69M a second,
 * 78M so, 83M before).  At a page, the commonest alignment above 256, a
 * table gives the class (hak_page_aligned_class_of) with no branch: a
 * mix of sizes mispredicted the colour test in many requests (page-aligned
 * 4-64 KiB buffers: 75M a second, tcmalloc's 96M; 94M so). */
static inline unsigned hak_aligned_class(size_t need, size_t align)
{
    if (align == HAK_PAGE_SIZE)
        return hak_page_aligned_class_of[(need - 1) >> HAK_PAGE_SHIFT];
    unsigned cls = hak_class_of((need + align - 1) & ~(align - 1));
    if (HAK_UNLIKELY(align > HAK_CLASS_COLOUR &&
                     cls - HAK_FIRST_COLOUR_CLASS < HAK_COLOUR_CLASSES)) {
        cls |= 3;
        __asm__("" : "+r"(cls));
    }
    return cls;
}

/* Whether offset, a pointer's distance from the start of a slab or span,
 * starts one of its blocks: *magic is the block size's magic number and
 * *limit the bound for the slab's count of blocks (hak_block_limit).  A
 * multiply and a compare, where a division and a bounds test took more
 * (size_class.c tells why they suffice).  On x86-64 both read their
 * operands from memory: GCC loaded the magic into a register first, one
 * instruction more in every free. */
static inline bool hak_block_starts(const uint64_t *magic, const uint64_t *limit, uint32_t offset)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    bool starts;
    uint64_t product = offset;
    __asm__("{imulq %2, %1\n\tcmpq %3, %1|imul %1, %2\n\tcmp %1, %3}"
            : "=@ccb"(starts), "+&r"(product)
            : "m"(*magic), "m"(*limit));
    return starts;
#else
    return offset * *magic < *limit;
#endif
}

/* The limit for count blocks of class cls: 0 for none, which no offset
 * passes. */
static inline uint64_t hak_block_limit(unsigned cls, uint32_t count)
{
    return count * (hak_class_size[cls] * hak_class_divisors.magic[cls]);
}

/* Whether offset starts one of the blocks of a slab or span of the class
 * that hak_class_span_bytes holds. */
static inline bool hak_class_starts_block(size_t cls, uint32_t offset)
{
    return hak_block_starts(&hak_class_divisors.magic[cls], &hak_class_divisors.limit[cls], offset);
}

/* Printable name: C0..C19, M0..M19, L0..L19. */
void hak_class_name(unsigned cls, char name[4]);

#endif

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
/* For hak_class_divides (size_class.c). */
extern const uint64_t hak_class_divide_magic[HAK_NUM_CLASSES] HAK_SHARED;
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

/* Whether the divisor whose magic number *magic is (ceil(2^64 / divisor),
 * size_class.c) divides offset.  On x86-64 the multiply and the compare
 * both read the magic from memory: GCC loaded it into a register first,
 * one instruction more in every free. */
static inline bool hak_magic_divides(const uint64_t *magic, uint32_t offset)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    bool divides;
    uint64_t product = offset;
    __asm__("{imulq %2, %1\n\tcmpq %2, %1|imul %1, %2\n\tcmp %1, %2}"
            : "=@ccb"(divides), "+&r"(product)
            : "m"(*magic));
    return divides;
#else
    return offset * *magic < *magic;
#endif
}

/* Whether offset is a multiple of the class's block size, without a
 * division. */
static inline bool hak_class_divides(size_t cls, uint32_t offset)
{
    return hak_magic_divides(&hak_class_divide_magic[cls], offset);
}

/* Printable name: C0..C19, M0..M19, L0..L19. */
void hak_class_name(unsigned cls, char name[4]);

#endif

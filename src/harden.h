/* The hardening level (HAKMEM_HARDEN), fixed at start-up, and what it turns
 * on.  Level 1, the default, costs the fast paths nothing beyond the checks
 * themselves: the other modes are reached through a test the fast paths make
 * anyway.  A free finds its chunk's route in the page map's entry
 * (arena/page_map.h), which it reads anyway, where the thread's part of
 * the SuperSlab region (arena/superslab.h, fast route only) has not taken
 * it; a malloc that finds its thread cache empty goes out of line, and in
 * checked mode the caches stay empty.
 *
 *   0  links stored plain, frees not checked on the fast path (the slow
 *      paths still refuse pointers that are not blocks of a live slab)
 *   1  links XOR a per-process key, double-free tag, alignment of freed
 *      pointers (block/block_link.h, front/thread_heap.h), exact checks
 *      whenever a block passes through a slow path
 *   2  checked mode (below), a PROT_NONE guard page after every slab,
 *      span and large block, and free blocks of L25 classes (but for their
 *      first page) and cached large blocks PROT_NONE until handed out
 *
 * Checked mode (level 2, or any level under valgrind's memcheck): every
 * malloc and free goes through the out-of-line paths, every free is checked
 * exactly, and each block records its requested size with a canary after it
 * (block/canary.h), checked on free and, but under memcheck, when the block
 * above it is handed out or freed.  Under memcheck these paths describe
 * the blocks with client requests (memcheck.h). */
#ifndef HAK_HARDEN_H
#define HAK_HARDEN_H

#include "internal.h"

struct hak_harden {
    uint32_t level;
    uint32_t route;       /* enum hak_free_route of SuperSlabs and arena chunks */
    bool checked;         /* checked mode */
    bool memcheck;        /* running under valgrind's memcheck */
    uint32_t guard_bytes; /* a page at level 2, else 0 */
};

extern struct hak_harden hak_harden HAK_SHARED;

/* From the options; called once by hak_init before any chunk exists. */
void hak_harden_init(void);

#endif

/* Valgrind client requests, so that memcheck users see their own bugs in
 * hakmem's blocks: where a block is handed out and freed, and which bytes
 * around it a program may touch.  Only the checked paths (harden.h) make
 * them, and only when hakmem runs under memcheck; without valgrind's
 * headers at configure time they compile to nothing. */
#ifndef HAK_MEMCHECK_H
#define HAK_MEMCHECK_H

#include "config.h"
#include "harden.h"

#if HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/memcheck.h>
#else
#define RUNNING_ON_VALGRIND 0
#define VALGRIND_MALLOCLIKE_BLOCK(addr, size, redzone, zeroed)                                     \
    ((void)(addr), (void)(size), (void)(redzone), (void)(zeroed))
#define VALGRIND_FREELIKE_BLOCK(addr, redzone) ((void)(addr), (void)(redzone))
#define VALGRIND_MAKE_MEM_DEFINED(addr, size) ((void)(addr), (void)(size))
#define VALGRIND_MAKE_MEM_UNDEFINED(addr, size) ((void)(addr), (void)(size))
#define VALGRIND_MAKE_MEM_NOACCESS(addr, size) ((void)(addr), (void)(size))
#define VALGRIND_RESIZEINPLACE_BLOCK(addr, old_size, new_size, redzone)                            \
    ((void)(addr), (void)(old_size), (void)(new_size), (void)(redzone))
#endif

#define HAK_MEMCHECK_REQUEST(request)                                                              \
    do {                                                                                           \
        if (HAVE_VALGRIND_MEMCHECK_H && hak_harden.memcheck) {                                     \
            request;                                                                               \
        }                                                                                          \
    } while (0)

static inline bool hak_memcheck_available(void)
{
    return HAVE_VALGRIND_MEMCHECK_H;
}

/* size bytes at block are the program's now (zeroed: and read as zeros). */
static inline void hak_memcheck_malloclike(const void *block, size_t size, bool zeroed)
{
    HAK_MEMCHECK_REQUEST(VALGRIND_MALLOCLIKE_BLOCK(block, size, 0, zeroed));
}

/* The live block at block now has size bytes, the same start. */
static inline void hak_memcheck_resized(const void *block, size_t old_size, size_t size)
{
    HAK_MEMCHECK_REQUEST(VALGRIND_RESIZEINPLACE_BLOCK(block, old_size, size, 0));
}

/* Memcheck reports a free of anything but a live block, and from here on
 * any access to it. */
static inline void hak_memcheck_freelike(const void *block)
{
    HAK_MEMCHECK_REQUEST(VALGRIND_FREELIKE_BLOCK(block, 0));
}

/* Bytes hakmem reads or writes itself: canaries, links, tags. */
static inline void hak_memcheck_defined(const void *addr, size_t size)
{
    HAK_MEMCHECK_REQUEST(VALGRIND_MAKE_MEM_DEFINED(addr, size));
}

/* Memory hakmem is about to write afresh. */
static inline void hak_memcheck_undefined(const void *addr, size_t size)
{
    HAK_MEMCHECK_REQUEST(VALGRIND_MAKE_MEM_UNDEFINED(addr, size));
}

/* Bytes no program may touch: past a block's requested size, free blocks. */
static inline void hak_memcheck_noaccess(const void *addr, size_t size)
{
    HAK_MEMCHECK_REQUEST(VALGRIND_MAKE_MEM_NOACCESS(addr, size));
}

#endif

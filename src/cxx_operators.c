/* C++'s operator new and delete, every form, under their Itanium names.
 * Written in C, so that a C program that preloads hakmem never loads
 * libstdc++: the two runtime functions the operators need are weak
 * references, which stay NULL in a C program, where no code calls the
 * operators anyway.  A C++ program has libstdc++ loaded, and they bind to
 * it.
 *
 * A new that finds no memory calls the installed new-handler and tries
 * again; with none installed it throws std::bad_alloc, or the nothrow forms
 * return NULL.  A handler's exception passes through this C code (it has
 * unwind tables) to the caller; out of a nothrow form too, which C cannot
 * catch to return NULL as libstdc++'s nothrow new does. */
#include <stdbool.h>
#include <stddef.h>

#include "hakmem.h"
#include "harden.h"
#include "internal.h"

typedef void (*hak_new_handler)(void);

/* std::get_new_handler() and std::__throw_bad_alloc(), from libstdc++. */
hak_new_handler _ZSt15get_new_handlerv(void) __attribute__((weak));
void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* The forms, declared here because no C header does: align_val_t is a
 * size_t, nothrow_t an empty struct passed by reference. */
HAK_API void *_Znwm(size_t size);
HAK_API void *_Znam(size_t size);
HAK_API void *_ZnwmRKSt9nothrow_t(size_t size, const void *nothrow);
HAK_API void *_ZnamRKSt9nothrow_t(size_t size, const void *nothrow);
HAK_API void *_ZnwmSt11align_val_t(size_t size, size_t align);
HAK_API void *_ZnamSt11align_val_t(size_t size, size_t align);
HAK_API void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow);
HAK_API void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow);
HAK_API void _ZdlPv(void *ptr);
HAK_API void _ZdaPv(void *ptr);
HAK_API void _ZdlPvm(void *ptr, size_t size);
HAK_API void _ZdaPvm(void *ptr, size_t size);
HAK_API void _ZdlPvSt11align_val_t(void *ptr, size_t align);
HAK_API void _ZdaPvSt11align_val_t(void *ptr, size_t align);
HAK_API void _ZdlPvmSt11align_val_t(void *ptr, size_t size, size_t align);
HAK_API void _ZdaPvmSt11align_val_t(void *ptr, size_t size, size_t align);
HAK_API void _ZdlPvRKSt9nothrow_t(void *ptr, const void *nothrow);
HAK_API void _ZdaPvRKSt9nothrow_t(void *ptr, const void *nothrow);
HAK_API void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *nothrow);
HAK_API void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *nothrow);

/* align 0: the default alignment, which malloc gives. */
static void *attempt(size_t size, size_t align)
{
    return align ? hak_aligned_alloc(align, size) : hak_malloc(size);
}

/* The allocation failed: true when the new-handler ran and a retry may
 * succeed; false for a nothrow form with no handler.  Throws otherwise. */
static bool handle_failure(bool nothrow)
{
    hak_new_handler handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (handler) {
        handler();
        return true;
    }
    if (nothrow)
        return false;
    /* A C++ runtime opened with RTLD_LOCAL leaves the weak references
     * unbound: nothing to throw with. */
    if (!_ZSt17__throw_bad_allocv)
        hak_fatal("operator new: out of memory, and no C++ runtime to throw std::bad_alloc", NULL);
    _ZSt17__throw_bad_allocv();
}

static HAK_NOINLINE void *new_slow(size_t size, size_t align, bool nothrow)
{
    void *ptr;
    do {
        if (!handle_failure(nothrow))
            return NULL;
        ptr = attempt(size, align);
    } while (!ptr);
    return ptr;
}

static inline void *new_block(size_t size, size_t align, bool nothrow)
{
    void *ptr = attempt(size, align);
    return HAK_LIKELY(ptr) ? ptr : new_slow(size, align, nothrow);
}

/* Checked mode knows the size each block was asked with: a sized delete
 * must name it (issue 15).  Blocks hakmem does not own are left to free. */
static inline void sized_delete(void *ptr, size_t size)
{
    if (HAK_UNLIKELY(hak_harden.checked) && ptr && hak_node_of(ptr) >= 0 &&
        hak_malloc_usable_size(ptr) != size)
        hak_fatal("sized delete with the wrong size:", ptr);
    hak_free(ptr);
}

void *_Znwm(size_t size)
{
    return new_block(size, 0, false);
}

void *_Znam(size_t size)
{
    return new_block(size, 0, false);
}

void *_ZnwmRKSt9nothrow_t(size_t size, const void *nothrow)
{
    (void)nothrow;
    return new_block(size, 0, true);
}

void *_ZnamRKSt9nothrow_t(size_t size, const void *nothrow)
{
    (void)nothrow;
    return new_block(size, 0, true);
}

void *_ZnwmSt11align_val_t(size_t size, size_t align)
{
    return new_block(size, align, false);
}

void *_ZnamSt11align_val_t(size_t size, size_t align)
{
    return new_block(size, align, false);
}

void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow)
{
    (void)nothrow;
    return new_block(size, align, true);
}

void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow)
{
    (void)nothrow;
    return new_block(size, align, true);
}

void _ZdlPv(void *ptr)
{
    hak_free(ptr);
}

void _ZdaPv(void *ptr)
{
    hak_free(ptr);
}

void _ZdlPvm(void *ptr, size_t size)
{
    sized_delete(ptr, size);
}

void _ZdaPvm(void *ptr, size_t size)
{
    sized_delete(ptr, size);
}

void _ZdlPvSt11align_val_t(void *ptr, size_t align)
{
    (void)align;
    hak_free(ptr);
}

void _ZdaPvSt11align_val_t(void *ptr, size_t align)
{
    (void)align;
    hak_free(ptr);
}

void _ZdlPvmSt11align_val_t(void *ptr, size_t size, size_t align)
{
    (void)align;
    sized_delete(ptr, size);
}

void _ZdaPvmSt11align_val_t(void *ptr, size_t size, size_t align)
{
    (void)align;
    sized_delete(ptr, size);
}

void _ZdlPvRKSt9nothrow_t(void *ptr, const void *nothrow)
{
    (void)nothrow;
    hak_free(ptr);
}

void _ZdaPvRKSt9nothrow_t(void *ptr, const void *nothrow)
{
    (void)nothrow;
    hak_free(ptr);
}

void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *nothrow)
{
    (void)nothrow;
    (void)align;
    hak_free(ptr);
}

void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *nothrow)
{
    (void)nothrow;
    (void)align;
    hak_free(ptr);
}

/* C++'s operator new and delete, every form, under their Itanium names.
 * Written in C, so that a C program that preloads hakmem never loads
 * libstdc++: the two runtime functions the operators need are weak
 * references, which stay NULL in a C program, where no code calls the
 * operators anyway.  A C++ program has libstdc++ loaded, and they bind to
 * it.  A weak reference binds only when hakmem is loaded: a C program that
 * dlopens a C++ plugin later leaves them NULL, so a failing new looks the two
 * up then (runtime_function).
 *
 * A new that finds no memory calls the installed new-handler and tries
 * again; with none installed it throws std::bad_alloc, or the nothrow forms
 * return NULL.  A handler's exception passes through this C code (it has
 * unwind tables) to the caller; out of a nothrow form too, which C cannot
 * catch to return NULL as libstdc++'s nothrow new does.
 *
 * A program may replace only some forms, most often just operator
 * new(size_t) and operator delete(void *).  The other forms then forward to
 * those, as the standard has it: new[] calls new, a sized delete the
 * unsized one, an array form the scalar one, the aligned forms aligned new
 * and delete.  The calls go by the exported names, through the GOT
 * (-fno-plt) or the PLT, so that the program's replacement wins; the bases
 * are noinline, so that no compiler copies hakmem's own bodies into the
 * forms that call them.  The nothrow new forms must catch the replacement's
 * std::bad_alloc, which C cannot: where the program replaced what they
 * call, they pass to libstdc++'s own, which does. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

#include "fault.h"
#include "block/size_class.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "harden.h"
#include "internal.h"
#include "next_symbol.h"

typedef void (*hak_new_handler)(void);
typedef hak_new_handler get_new_handler_fn(void);
typedef void throw_bad_alloc_fn(void);

/* std::get_new_handler() and std::__throw_bad_alloc(), from libstdc++. */
hak_new_handler _ZSt15get_new_handlerv(void) __attribute__((weak));
void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* The forms, declared here because no C header does: align_val_t is a
 * size_t, nothrow_t an empty struct passed by reference. */
HAK_API HAK_NOINLINE void *_Znwm(size_t size);
HAK_API void *_Znam(size_t size);
HAK_API void *_ZnwmRKSt9nothrow_t(size_t size, const void *nothrow);
HAK_API void *_ZnamRKSt9nothrow_t(size_t size, const void *nothrow);
HAK_API HAK_NOINLINE void *_ZnwmSt11align_val_t(size_t size, size_t align);
HAK_API void *_ZnamSt11align_val_t(size_t size, size_t align);
HAK_API void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow);
HAK_API void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow);
/* free itself, under this name too (malloc_api.c): a delete costs what a
 * free does. */
HAK_API void _ZdlPv(void *ptr);
HAK_API void _ZdaPv(void *ptr);
HAK_API void _ZdlPvm(void *ptr, size_t size);
HAK_API void _ZdaPvm(void *ptr, size_t size);
HAK_API HAK_NOINLINE void _ZdlPvSt11align_val_t(void *ptr, size_t align);
HAK_API void _ZdaPvSt11align_val_t(void *ptr, size_t align);
HAK_API void _ZdlPvmSt11align_val_t(void *ptr, size_t size, size_t align);
HAK_API void _ZdaPvmSt11align_val_t(void *ptr, size_t size, size_t align);
HAK_API void _ZdlPvRKSt9nothrow_t(void *ptr, const void *nothrow);
HAK_API void _ZdaPvRKSt9nothrow_t(void *ptr, const void *nothrow);
HAK_API void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *nothrow);
HAK_API void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *nothrow);

/* The dynamic loader's view.  RTLD_DEFAULT: what the program calls by that
 * name.  Else libstdc++ loaded anywhere, also in a plugin's local scope
 * (dlopen's default), without loading it.  The next definition after
 * hakmem's, libstdc++'s, comes from hak_next_symbol. */
enum lookup_scope { SCOPE_DEFAULT, SCOPE_LIBSTDCXX };

static void *lookup(enum lookup_scope scope, const char *name)
{
    if (scope == SCOPE_DEFAULT)
        return dlsym(RTLD_DEFAULT, name);
    void *library = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (!library)
        return NULL;
    void *function = dlsym(library, name);
    dlclose(library); /* whoever loaded it keeps it loaded */
    return function;
}

/* hakmem's own base forms, under names that the program cannot replace. */
static void *own_new(size_t size) __attribute__((alias("_Znwm")));
static void *own_new_array(size_t size) __attribute__((alias("_Znam")));
static void *own_new_aligned(size_t size, size_t align)
    __attribute__((alias("_ZnwmSt11align_val_t")));
static void *own_new_array_aligned(size_t size, size_t align)
    __attribute__((alias("_ZnamSt11align_val_t")));
static void own_delete_array(void *ptr) __attribute__((alias("_ZdaPv")));
static void own_delete_aligned(void *ptr, size_t align)
    __attribute__((alias("_ZdlPvSt11align_val_t")));
static void own_delete_array_aligned(void *ptr, size_t align)
    __attribute__((alias("_ZdaPvSt11align_val_t")));

enum {
    NEW = 1u << 0,
    NEW_ARRAY = 1u << 1,
    NEW_ALIGNED = 1u << 2,
    NEW_ARRAY_ALIGNED = 1u << 3,
    DELETE = 1u << 4,
    DELETE_ARRAY = 1u << 5,
    DELETE_ALIGNED = 1u << 6,
    DELETE_ARRAY_ALIGNED = 1u << 7,
    RESOLVED = 1u << 8,
};

/* Which of forms the program replaced, found on first use (at an operator's
 * entry, never inside hakmem's locks); any thread may be first, and they
 * all find the same. */
static unsigned replaced(unsigned forms)
{
    static unsigned found;
    unsigned now = __atomic_load_n(&found, __ATOMIC_RELAXED);
    if (HAK_UNLIKELY(!now)) {
        static const struct {
            const char *name;
            void (*own)(void);
            unsigned form;
        } bases[] = {
            {"_Znwm", (void (*)(void))own_new, NEW},
            {"_Znam", (void (*)(void))own_new_array, NEW_ARRAY},
            {"_ZnwmSt11align_val_t", (void (*)(void))own_new_aligned, NEW_ALIGNED},
            {"_ZnamSt11align_val_t", (void (*)(void))own_new_array_aligned, NEW_ARRAY_ALIGNED},
            {"_ZdlPv", (void (*)(void))hak_free, DELETE},
            {"_ZdaPv", (void (*)(void))own_delete_array, DELETE_ARRAY},
            {"_ZdlPvSt11align_val_t", (void (*)(void))own_delete_aligned, DELETE_ALIGNED},
            {"_ZdaPvSt11align_val_t", (void (*)(void))own_delete_array_aligned,
             DELETE_ARRAY_ALIGNED},
        };
        now = RESOLVED;
        for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
            void *symbol = lookup(SCOPE_DEFAULT, bases[i].name);
            if (symbol && symbol != (void *)bases[i].own)
                now |= bases[i].form;
        }
        __atomic_store_n(&found, now, __ATOMIC_RELAXED);
    }
    return now & forms;
}

/* One of the two runtime functions: the weak reference, else the one a
 * libstdc++ loaded since has.  Looked up each time: this is the failure
 * path, and a plugin's libstdc++ may come and go. */
static void *runtime_function(void *weak, const char *name)
{
    if (weak)
        return weak;
    void *function = lookup(SCOPE_DEFAULT, name);
    return function ? function : lookup(SCOPE_LIBSTDCXX, name);
}

static __attribute__((noreturn)) void throw_bad_alloc(void)
{
    throw_bad_alloc_fn *thrower = (throw_bad_alloc_fn *)runtime_function(
        (void *)_ZSt17__throw_bad_allocv, "_ZSt17__throw_bad_allocv");
    /* A C program with no C++ runtime loaded: nothing to throw with. */
    if (!thrower)
        hak_fatal("operator new: out of memory, and no C++ runtime to throw std::bad_alloc", NULL);
    thrower();
    __builtin_unreachable();
}

/* align 0: the default alignment, which malloc gives. */
static void *attempt(size_t size, size_t align)
{
    return align ? hak_aligned_alloc(align, size) : hak_malloc(size);
}

/* The allocation failed: true when the new-handler ran and a retry may
 * succeed; false for a nothrow form with no handler.  Throws otherwise. */
static bool handle_failure(bool nothrow)
{
    get_new_handler_fn *get_handler = (get_new_handler_fn *)runtime_function(
        (void *)_ZSt15get_new_handlerv, "_ZSt15get_new_handlerv");
    hak_new_handler handler = get_handler ? get_handler() : NULL;
    if (handler) {
        handler();
        return true;
    }
    if (nothrow)
        return false;
    throw_bad_alloc();
}

static HAK_NOINLINE void *new_slow(size_t size, size_t align, bool nothrow)
{
    /* An alignment that is not a power of two (undefined behaviour) fails
     * for good: no handler can help, and retrying would loop. */
    if (align & (align - 1)) {
        if (nothrow)
            return NULL;
        throw_bad_alloc();
    }
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
 * must name it (issue 15), and an aligned one an alignment the block has.
 * Blocks hakmem does not own are left to free, which refuses them, and so
 * are all where the program replaced the new or delete forms involved: its
 * blocks are its own business.  Out of line, so that the sized forms
 * outside checked mode are a test and a jump. */
static HAK_NOINLINE __attribute__((cold)) void check_size_checked(void *ptr, size_t size,
                                                                  size_t align, unsigned forms)
{
    if (!replaced(forms) && hak_sized_free_mismatch(ptr, size, align))
        hak_fatal("sized delete with the wrong size or alignment:", ptr);
}

static inline void check_size(void *ptr, size_t size, size_t align, unsigned forms)
{
    if (HAK_UNLIKELY(hak_harden.checked))
        check_size_checked(ptr, size, align, forms);
}

typedef void *nothrow_new_fn(size_t size, const void *nothrow);
typedef void *nothrow_new_aligned_fn(size_t size, size_t align, const void *nothrow);

/* All but new's fast path: malloc's whole path, then the new-handler. */
static HAK_NOINLINE void *new_uncached(size_t size)
{
    return new_block(size, 0, false);
}

/* malloc's fast path inline (hak_heap_alloc's, for small sizes): a new
 * costs what a malloc does, with no call in between. */
void *_Znwm(size_t size)
{
    if (HAK_LIKELY(size <= HAK_SMALL_MAX)) {
        size_t cls = hak_small_class(size);
        struct hak_thread *self = hak_my_thread();
        void **slot = hak_heap_head_slot(self, cls);
        void *block = hak_heap_head(slot);
        uintptr_t next;
        if (HAK_LIKELY(hak_heap_poppable(self, block, &next)))
            return hak_heap_take(self, cls, slot, block, next);
    }
    return new_uncached(size);
}

void *_Znam(size_t size)
{
    return _Znwm(size);
}

void *_ZnwmRKSt9nothrow_t(size_t size, const void *nothrow)
{
    if (HAK_UNLIKELY(replaced(NEW))) {
        static void *next;
        nothrow_new_fn *libstdcxx = hak_next_symbol(&next, "_ZnwmRKSt9nothrow_t");
        return libstdcxx ? libstdcxx(size, nothrow) : _Znwm(size);
    }
    return new_block(size, 0, true);
}

void *_ZnamRKSt9nothrow_t(size_t size, const void *nothrow)
{
    if (HAK_UNLIKELY(replaced(NEW | NEW_ARRAY))) {
        static void *next;
        nothrow_new_fn *libstdcxx = hak_next_symbol(&next, "_ZnamRKSt9nothrow_t");
        return libstdcxx ? libstdcxx(size, nothrow) : _Znam(size);
    }
    return new_block(size, 0, true);
}

void *_ZnwmSt11align_val_t(size_t size, size_t align)
{
    return new_block(size, align, false);
}

void *_ZnamSt11align_val_t(size_t size, size_t align)
{
    return _ZnwmSt11align_val_t(size, align);
}

void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow)
{
    if (HAK_UNLIKELY(replaced(NEW_ALIGNED))) {
        static void *next;
        nothrow_new_aligned_fn *libstdcxx =
            hak_next_symbol(&next, "_ZnwmSt11align_val_tRKSt9nothrow_t");
        return libstdcxx ? libstdcxx(size, align, nothrow) : _ZnwmSt11align_val_t(size, align);
    }
    return new_block(size, align, true);
}

void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow)
{
    if (HAK_UNLIKELY(replaced(NEW_ALIGNED | NEW_ARRAY_ALIGNED))) {
        static void *next;
        nothrow_new_aligned_fn *libstdcxx =
            hak_next_symbol(&next, "_ZnamSt11align_val_tRKSt9nothrow_t");
        return libstdcxx ? libstdcxx(size, align, nothrow) : _ZnamSt11align_val_t(size, align);
    }
    return new_block(size, align, true);
}

void _ZdaPv(void *ptr)
{
    _ZdlPv(ptr);
}

void _ZdlPvm(void *ptr, size_t size)
{
    check_size(ptr, size, 1, NEW | DELETE);
    _ZdlPv(ptr);
}

void _ZdaPvm(void *ptr, size_t size)
{
    check_size(ptr, size, 1, NEW | NEW_ARRAY | DELETE | DELETE_ARRAY);
    _ZdaPv(ptr);
}

void _ZdlPvSt11align_val_t(void *ptr, size_t align)
{
    (void)align;
    hak_free(ptr);
}

void _ZdaPvSt11align_val_t(void *ptr, size_t align)
{
    _ZdlPvSt11align_val_t(ptr, align);
}

void _ZdlPvmSt11align_val_t(void *ptr, size_t size, size_t align)
{
    check_size(ptr, size, align, NEW_ALIGNED | DELETE_ALIGNED);
    _ZdlPvSt11align_val_t(ptr, align);
}

void _ZdaPvmSt11align_val_t(void *ptr, size_t size, size_t align)
{
    check_size(ptr, size, align,
               NEW_ALIGNED | NEW_ARRAY_ALIGNED | DELETE_ALIGNED | DELETE_ARRAY_ALIGNED);
    _ZdaPvSt11align_val_t(ptr, align);
}

void _ZdlPvRKSt9nothrow_t(void *ptr, const void *nothrow)
{
    (void)nothrow;
    _ZdlPv(ptr);
}

void _ZdaPvRKSt9nothrow_t(void *ptr, const void *nothrow)
{
    (void)nothrow;
    _ZdaPv(ptr);
}

void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *nothrow)
{
    (void)nothrow;
    _ZdlPvSt11align_val_t(ptr, align);
}

void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *nothrow)
{
    (void)nothrow;
    _ZdaPvSt11align_val_t(ptr, align);
}

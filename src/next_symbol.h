/* The definition of a symbol that comes after hakmem's (RTLD_NEXT), for the
 * entry points that pass a call on: the C library's affinity calls,
 * libstdc++'s nothrow operators. */
#ifndef HAK_NEXT_SYMBOL_H
#define HAK_NEXT_SYMBOL_H

#include <dlfcn.h>

/* Looked up on first use (never from inside malloc) and kept in *cache; any
 * thread may be first, and they all find the same.  NULL where none comes
 * after hakmem. */
static inline void *hak_next_symbol(void **cache, const char *name)
{
    void *function = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (!function) {
        function = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, function, __ATOMIC_RELAXED);
    }
    return function;
}

#endif

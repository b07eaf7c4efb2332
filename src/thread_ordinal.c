#include "thread_ordinal.h"

#include <stdatomic.h>

__thread uint32_t hak_thread_ordinal_plus_one;

/* Written once per thread; 64 bits, so that it never wraps and tells how
 * many were given. */
static _Atomic uint64_t ordinals_given HAK_START_UP;

uint32_t hak_thread_ordinal_assign(void)
{
    uint32_t ordinal =
        (uint32_t)(atomic_fetch_add_explicit(&ordinals_given, 1, memory_order_relaxed) %
                   HAK_THREAD_ORDINALS);
    hak_thread_ordinal_plus_one = ordinal + 1;
    return ordinal;
}

uint32_t hak_thread_ordinals_given(void)
{
    uint64_t given = atomic_load_explicit(&ordinals_given, memory_order_relaxed);
    return given < HAK_THREAD_ORDINALS ? (uint32_t)given : HAK_THREAD_ORDINALS;
}

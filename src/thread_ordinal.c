#include "thread_ordinal.h"

#include <stdatomic.h>

__thread uint32_t hak_thread_ordinal_plus_one;

static atomic_uint ordinals_given;

uint32_t hak_thread_ordinal_assign(void)
{
    uint32_t ordinal =
        atomic_fetch_add_explicit(&ordinals_given, 1, memory_order_relaxed) % HAK_THREAD_ORDINALS;
    hak_thread_ordinal_plus_one = ordinal + 1;
    return ordinal;
}

/* The calling thread's ordinal, given in turn to threads as they first
 * ask (every thread that allocates asks as its heap is made, since the
 * statistics count it), so that a table of N shards indexed by it modulo
 * N gives N threads one each: the statistics' stripes, the HotSpanBox's
 * shards.  Ordinals count modulo HAK_THREAD_ORDINALS, which each such N
 * divides. */
#ifndef HAK_THREAD_ORDINAL_H
#define HAK_THREAD_ORDINAL_H

#include <stdint.h>

#include "internal.h"

#define HAK_THREAD_ORDINALS 65536u

/* The ordinal + 1; 0 until the thread first asks. */
extern __thread uint32_t hak_thread_ordinal_plus_one __attribute__((tls_model("initial-exec")))
HAK_SHARED;

uint32_t hak_thread_ordinal_assign(void);

static inline uint32_t hak_thread_ordinal(void)
{
    uint32_t plus_one = hak_thread_ordinal_plus_one;
    if (HAK_UNLIKELY(!plus_one))
        return hak_thread_ordinal_assign();
    return plus_one - 1;
}

/* How many ordinals were given (at most HAK_THREAD_ORDINALS, after which
 * they all were). */
uint32_t hak_thread_ordinals_given(void);

#endif

/* glibc's extensions to the malloc API (<malloc.h>), answered with hakmem's
 * own figures and actions: a program that tunes or inspects glibc's malloc
 * gets a true answer instead of one about glibc's untouched heap. */
#include <malloc.h>

#include "arena/hot_span_box.h"
#include "arena/large.h"
#include "arena/page_arena.h"
#include "arena/shared_pool.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "internal.h"
#include "numa/node.h"
#include "options.h"

/* pad: glibc leaves that much at the top of its heap; hakmem has no top.
 * Other threads' caches stay: only their owners may touch them. */
HAK_API int malloc_trim(size_t pad)
{
    (void)pad;
    hak_heap_trim();
    size_t released = 0;
    for (unsigned node = 0; node < hak_numa_node_count(); node++) {
        /* Hot spans first: they return to the PageArena, whose chunks
         * they may leave wholly free. */
        released += hak_hot_span_release_all(node);
        released += hak_page_arena_release_free(node);
        released += hak_large_release_cached(node);
        released += hak_shared_pool_release(node);
    }
    return released != 0;
}

HAK_API void malloc_stats(void)
{
    hak_stats_print(2);
}

/* glibc returns 1 for parameters it does not know; hakmem 0, so that a
 * program can tell a setting that was taken from one that was not. */
HAK_API int mallopt(int param, int value)
{
    switch (param) {
    case M_TRIM_THRESHOLD:
        /* glibc's bound on the free memory it keeps before trimming:
         * hakmem's is the HotSpanBox budget (large mappings kept get half). */
        return value >= 0 && hak_options_set_bytes("HAKMEM_HOT_BYTES", (size_t)value);
    case M_MXFAST:
        /* glibc's range, though hakmem has no fastbins to size. */
        return value >= 0 && (size_t)value <= 80 * sizeof(size_t) / 4;
    case M_NLBLKS:
    case M_GRAIN:
    case M_KEEP:
    case M_TOP_PAD:
    case M_MMAP_THRESHOLD:
    case M_MMAP_MAX:
    case M_CHECK_ACTION:
    case M_PERTURB:
    case M_ARENA_TEST:
    case M_ARENA_MAX:
        /* Accepted, as glibc does, but nothing in hakmem answers to them:
         * its size thresholds are fixed and it has one arena per node. */
        return 1;
    default:
        return 0;
    }
}

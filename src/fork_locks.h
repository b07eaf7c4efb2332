/* The locks fork holds (init.c), side by side: after every fork the parent
 * and the child each write every page that holds one of them as they
 * unlock it, a copy-on-write fault per page and process.  Spread over the
 * modules' own state they took six pages with one node in use; here the
 * global ones and the first eight nodes' share one. */
#ifndef HAK_FORK_LOCKS_H
#define HAK_FORK_LOCKS_H

#include <pthread.h>

#include "internal.h"

/* A line each, so that threads taking different locks do not share one. */
struct hak_lock {
    pthread_mutex_t mutex;
} __attribute__((aligned(HAK_CACHE_LINE)));

struct hak_node_locks {
    struct hak_lock shared_pool, page_arena, large;
    struct hak_lock hot_span[HAK_HOT_SPAN_SHARDS];
};

struct hak_fork_locks {
    /* The nodes whose locks fork holds, written as it takes them: here, on
     * the page fork writes anyway. */
    unsigned nodes;
    /* Written by every fork's prepare handler, the same answer in all,
     * which a C library may run for two forks at once. */
    _Atomic bool held;
    /* From the prepare handler's hold of the heap registry to the parent's
     * or the child's handler: the other threads' mallocs wait for the fork
     * meanwhile (front/thread_heap.c, wait_for_fork).  Here, where fork
     * writes anyway: on a page of its own it cost a copy-on-write fault per
     * fork in the parent and in the child. */
    _Atomic bool forking;
    struct hak_lock numa_count, heap_registry, abandoned, meta, superslab_region, page_map,
        os_reservation;
    struct hak_node_locks node[HAK_MAX_NODES];
};

extern struct hak_fork_locks hak_fork_locks HAK_SHARED;

#endif

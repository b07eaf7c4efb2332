#include "fork_locks.h"

#define LOCK                                                                                       \
    {                                                                                              \
        .mutex = HAK_LOCK_INITIALIZER                                                              \
    }
#define NODE_LOCKS                                                                                 \
    {                                                                                              \
        .shared_pool = LOCK, .page_arena = LOCK, .large = LOCK,                                    \
        .hot_span = {[0 ... HAK_HOT_SPAN_SHARDS - 1] = LOCK},                                      \
    }

struct hak_fork_locks hak_fork_locks __attribute__((aligned(HAK_PAGE_SIZE))) = {
    .numa_count = LOCK,
    .heap_registry = LOCK,
    .abandoned = LOCK,
    .meta = LOCK,
    .superslab_region = LOCK,
    .page_map = LOCK,
    .os_reservation = LOCK,
    .node = {[0 ... HAK_MAX_NODES - 1] = NODE_LOCKS},
};

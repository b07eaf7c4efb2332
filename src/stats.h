/* Telemetry: process-wide counters, and the report HAKMEM_STATS=1 prints. */
#ifndef HAK_STATS_H
#define HAK_STATS_H

#include <stdatomic.h>
#include <stdint.h>

enum hak_stat {
    HAK_STAT_MAPPED_BYTES,
    HAK_STAT_UNMAPPED_BYTES,
    HAK_STAT_DECOMMITTED_BYTES,
    HAK_STAT_SUPERSLABS,
    HAK_STAT_ARENA_CHUNKS,
    HAK_STAT_LARGE_ALLOCS,
    HAK_STAT_HOT_HITS,
    HAK_STAT_HOT_EVICTIONS,
    HAK_STAT_ABANDONED_SLABS,
    HAK_STAT_ADOPTED_SLABS,
    HAK_STAT_THREADS,
    HAK_STAT_COUNT,
};

extern _Atomic uint64_t hak_stat_counters[HAK_STAT_COUNT];
/* Bytes mapped per node, and frees of another node's blocks by pair. */
extern _Atomic uint64_t hak_stat_node_mapped[64];
extern _Atomic uint64_t hak_stat_remote_by_pair[64][64];

static inline void hak_stat_node_map(unsigned node, int64_t bytes)
{
    atomic_fetch_add_explicit(&hak_stat_node_mapped[node], (uint64_t)bytes, memory_order_relaxed);
}

static inline void hak_stat_remote_free(unsigned from, unsigned to)
{
    atomic_fetch_add_explicit(&hak_stat_remote_by_pair[from][to], 1, memory_order_relaxed);
}

static inline void hak_stat_add(enum hak_stat which, uint64_t n)
{
    atomic_fetch_add_explicit(&hak_stat_counters[which], n, memory_order_relaxed);
}

#endif

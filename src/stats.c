/* The counters' storage (stats.h says what each counts), and the
 * topology's note for the report. */
#include "stats.h"

#include "internal.h"

struct hak_stat_stripe hak_stat_stripes[HAK_STAT_STRIPES];
_Atomic uint64_t hak_stat_node_mapped[64];
_Atomic uint64_t hak_stat_remote_by_pair[64][64];
_Atomic uint64_t hak_stat_node_peak[64];
_Atomic uint64_t hak_stat_nodes_mapped;
_Atomic uint64_t hak_stat_nodes_peak;

_Static_assert(HAK_MAX_NODES == 64, "per-node counters");
_Static_assert(HAK_PAGES_MID == HAK_SMALL_CLASSES, "one page bucket per small class");

static _Atomic(const struct hak_printer *) topology_note HAK_START_UP;

/* The stripes threads have written: a process of one thread reads one. */
static unsigned stripes_used(void)
{
    uint32_t given = hak_thread_ordinals_given();
    return given < HAK_STAT_STRIPES ? given : HAK_STAT_STRIPES;
}

/* A gauge's stripes wrap below 0 when a thread takes off what another put
 * on, and a sum read while threads add can catch the taking off without
 * the putting on: read as signed, that is less than nothing, and reads as
 * 0 rather than as 2^64 less a little.  A count never reaches 2^63. */
uint64_t hak_stat_read(enum hak_stat which)
{
    uint64_t sum = 0;
    for (unsigned i = 0, used = stripes_used(); i < used; i++)
        sum += atomic_load_explicit(&hak_stat_stripes[i].counter[which], memory_order_relaxed);
    return (int64_t)sum < 0 ? 0 : sum;
}

struct hak_page_counts_now hak_stat_read_pages(enum hak_page_bucket bucket)
{
    struct hak_page_counts_now sum = {0, 0};
    for (unsigned i = 0, used = stripes_used(); i < used; i++) {
        const struct hak_page_counts *counts = &hak_stat_stripes[i].pages[bucket];
        sum.first += atomic_load_explicit(&counts->first, memory_order_relaxed);
        sum.reused += atomic_load_explicit(&counts->reused, memory_order_relaxed);
    }
    return sum;
}

/* The unmapped bytes are summed first: both counts only grow, so a map and
 * unmap by other threads between the two sums add to the mapped bytes
 * only.  An unmap seen without its map (the adds are relaxed, and in
 * different stripes when threads hand memory on) reads as nothing mapped
 * rather than a wrapped difference. */
uint64_t hak_stat_mapped_now(void)
{
    uint64_t unmapped = hak_stat_read(HAK_STAT_UNMAPPED_BYTES);
    uint64_t mapped = hak_stat_read(HAK_STAT_MAPPED_BYTES);
    return mapped > unmapped ? mapped - unmapped : 0;
}

void hak_stats_note_topology(const struct hak_printer *note)
{
    atomic_store_explicit(&topology_note, note, memory_order_release);
}

const struct hak_printer *hak_stats_topology_note(void)
{
    return atomic_load_explicit(&topology_note, memory_order_acquire);
}

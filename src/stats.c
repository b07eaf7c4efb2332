/* The counters' storage (stats.h says what each counts), and the
 * topology's note for the report. */
#include "stats.h"

#include "internal.h"

_Atomic uint64_t hak_stat_counters[HAK_STAT_COUNT];
struct hak_page_counts hak_stat_pages[HAK_PAGE_BUCKETS];
_Atomic uint64_t hak_stat_node_mapped[64];
_Atomic uint64_t hak_stat_remote_by_pair[64][64];
_Atomic uint64_t hak_stat_node_peak[64];
_Atomic uint64_t hak_stat_nodes_mapped;
_Atomic uint64_t hak_stat_nodes_peak;

_Static_assert(HAK_MAX_NODES == 64, "per-node counters");
_Static_assert(HAK_PAGES_MID == HAK_SMALL_CLASSES, "one page bucket per small class");

static _Atomic(const struct hak_printer *) topology_note HAK_START_UP;

void hak_stats_note_topology(const struct hak_printer *note)
{
    atomic_store_explicit(&topology_note, note, memory_order_release);
}

const struct hak_printer *hak_stats_topology_note(void)
{
    return atomic_load_explicit(&topology_note, memory_order_acquire);
}

#include "node.h"

#include <stddef.h>

#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "../fork_locks.h"
#include "../internal.h"
#include "../options.h"
#include "../os.h"
#include "../print.h"
#include "../stats.h"
#include "cpu.h"
#include "sysfs.h"
#include "topology.h"

#if HAKMEM_HAVE_NUMA
#include "hwloc_api.h"
#include "topology_hwloc.h"
#endif

/* Taken where the node count changes, and by fork. */

void hak_numa_count_lock(void)
{
    pthread_mutex_lock(&hak_fork_locks.numa_count.mutex);
}

void hak_numa_count_unlock(void)
{
    pthread_mutex_unlock(&hak_fork_locks.numa_count.mutex);
}

enum discovery_state {
    DISCOVERY_UNNEEDED, /* one node, HAKMEM_NUMA=off, or hak_numa_init not run */
    DISCOVERY_PENDING,
    DISCOVERY_RUNNING,
    DISCOVERY_DONE,
};

static _Atomic int discovery HAK_START_UP = DISCOVERY_UNNEEDED;
static unsigned node_bound HAK_START_UP = 1;

/* What HAKMEM_STATS=1 says of the topology: where it came from and why,
 * and the node of each CPU.  Written at start-up, and once by discovery
 * (found_note). */
static struct hak_printer start_note HAK_START_UP = {.fd = -1};

void hak_numa_init(void)
{
    const char *why = NULL;
    unsigned nodes = 1;
    if (!HAKMEM_HAVE_NUMA)
        why = "one node (built without NUMA support)";
    else if (hak_options.numa == HAK_NUMA_OFF)
        why = "one node (HAKMEM_NUMA=off)";
    else if ((nodes = hak_numa_allowed_nodes()) <= 1)
        why = "one node (the process may allocate from one)";
    else {
        node_bound = nodes < HAK_MAX_NODES ? nodes : HAK_MAX_NODES;
        atomic_store_explicit(&discovery, DISCOVERY_PENDING, memory_order_relaxed);
    }
    start_note.len = 0;
    hak_print_str(&start_note, "topology: ");
    hak_print_str(&start_note, why ? why : "not loaded (the process never needed it)");
    hak_print_str(&start_note, "\n");
    hak_stats_note_topology(&start_note);
}

unsigned hak_numa_node_bound(void)
{
    return node_bound;
}

#if HAKMEM_HAVE_NUMA

/* Published once and never freed, so readers need no reference to it. */
static _Atomic(const struct hak_numa_map *) published HAK_START_UP;
static struct hak_printer found_note = {.fd = -1};

/* Discovery runs once per process, inside malloc: its scratch is static. */
static struct hak_numa_layout layout;
static struct hak_hwloc hwloc;
/* Kept for the life of the process: destroying the last topology unloads
 * hwloc's plugins, which costs as much as loading it. */
static hwloc_topology_t topology;

/* hwloc's map, or NULL with why_not saying why. */
static struct hak_numa_map *map_from_hwloc(struct hak_printer *why_not, const char **version)
{
    const char *why;
    if (!hak_hwloc_open(&hwloc, &why)) {
        hak_print_str(why_not, why);
        return NULL;
    }
    topology = hak_hwloc_load(&hwloc);
    if (!topology) {
        hak_print_str(why_not, "hwloc could not load the topology");
        return NULL;
    }
    *version = hak_hwloc_version(&hwloc, topology);
    if (!hak_hwloc_read_layout(&hwloc, topology, hwloc.hwloc_topology_get_allowed_nodeset(topology),
                               &layout)) {
        hak_print_str(why_not, "hwloc found no NUMA node");
        return NULL;
    }
    hak_layout_apply_bind_policy(&layout);
    struct hak_numa_map *map = hak_topology_build(&layout);
    if (!map) {
        hak_print_str(why_not, "hwloc's topology refused: ");
        hak_layout_print_fault(why_not, &layout);
    }
    return map;
}

static struct hak_numa_map *map_from_sysfs(struct hak_printer *why_not)
{
    if (!hak_sysfs_read_layout("", &layout)) {
        hak_print_str(why_not, "/sys/devices/system/node unreadable");
        return NULL;
    }
    hak_layout_apply_bind_policy(&layout);
    struct hak_numa_map *map = hak_topology_build(&layout);
    if (!map) {
        hak_print_str(why_not, "the kernel's lists refused: ");
        hak_layout_print_fault(why_not, &layout);
    }
    return map;
}

/* cpu: the first CPU they place apart, or -1 when they differ in the nodes
 * the process may use (a memory-only node, a cpuset). */
static void note_disagreement(struct hak_printer *note, const char *version,
                              const struct hak_numa_map *hwloc_map,
                              const struct hak_numa_map *sysfs_map, int cpu)
{
    hak_print_str(note, "sysfs (hwloc ");
    hak_print_str(note, version);
    if (cpu < 0) {
        hak_print_str(note, " and the kernel's lists name other usable nodes)");
        return;
    }
    hak_print_str(note, " put CPU ");
    hak_print_u64(note, (unsigned)cpu, 0);
    hak_print_str(note, " on node ");
    hak_print_u64(note, hak_topology_os_node_of_cpu(hwloc_map, (unsigned)cpu), 0);
    hak_print_str(note, ", the kernel on node ");
    hak_print_u64(note, hak_topology_os_node_of_cpu(sysfs_map, (unsigned)cpu), 0);
    hak_print_str(note, ")");
}

/* hwloc first; the kernel's own lists check its answer, and stand in for it
 * where it cannot be loaded or is refused.  Where both answer and disagree
 * the kernel's lists win: they say where first touch puts a CPU's pages. */
static struct hak_numa_map *build_map(struct hak_printer *note)
{
    static struct hak_printer hwloc_why = {.fd = -1}, sysfs_why = {.fd = -1};
    const char *version = "";
    struct hak_numa_map *from_hwloc = map_from_hwloc(&hwloc_why, &version);
    struct hak_numa_map *from_sysfs = map_from_sysfs(&sysfs_why);
    if (from_hwloc && from_sysfs) {
        int cpu = hak_topology_first_difference(from_hwloc, from_sysfs);
        if (cpu >= 0 || !hak_topology_same_nodes(from_hwloc, from_sysfs)) {
            note_disagreement(note, version, from_hwloc, from_sysfs, cpu);
            hak_topology_map_free(from_hwloc);
            return from_sysfs;
        }
        hak_print_str(note, "hwloc ");
        hak_print_str(note, version);
        hak_print_str(note, " (the kernel's lists agree)");
        hak_topology_map_free(from_sysfs);
        return from_hwloc;
    }
    if (from_hwloc) {
        hak_print_str(note, "hwloc ");
        hak_print_str(note, version);
        hak_print_str(note, " (");
        hak_print_text(note, &sysfs_why);
        hak_print_str(note, ")");
        return from_hwloc;
    }
    hak_print_str(note, from_sysfs ? "sysfs (" : "one node, no binding (");
    hak_print_text(note, &hwloc_why);
    if (!from_sysfs) {
        hak_print_str(note, "; ");
        hak_print_text(note, &sysfs_why);
    }
    hak_print_str(note, ")");
    return from_sysfs;
}

static __thread bool discovering_here __attribute__((tls_model("initial-exec")));

/* A thread that would otherwise take memory as node 0 while another thread
 * loads the topology waits for it, but not forever: it may hold a lock the
 * discovering thread needs (the dynamic loader's, if it allocates from
 * inside dlopen), and then it goes on as node 0 after the wait. */
static void wait_for_other_thread(void)
{
    enum { WAIT_US = 10000000, STEP_US = 200 };
    if (discovering_here)
        return;
    for (unsigned waited = 0; waited < WAIT_US; waited += STEP_US) {
        if (atomic_load_explicit(&discovery, memory_order_acquire) != DISCOVERY_RUNNING)
            return;
        struct timespec step = {0, STEP_US * 1000};
        nanosleep(&step, NULL);
    }
}

void hak_numa_discover(void)
{
    /* The state alone makes this safe to re-enter: hwloc's allocations on
     * this thread find it RUNNING and return, and until the map is
     * published every query answers as on one node. */
    int expected = DISCOVERY_PENDING;
    if (atomic_load_explicit(&discovery, memory_order_relaxed) != DISCOVERY_PENDING ||
        !atomic_compare_exchange_strong(&discovery, &expected, DISCOVERY_RUNNING)) {
        wait_for_other_thread();
        return;
    }
    discovering_here = true;
    static struct hak_printer source = {.fd = -1};
    uint64_t started = hak_os_now_us();
    struct hak_numa_map *map = build_map(&source);
    uint64_t took = hak_os_now_us() - started;
    discovering_here = false;
    hak_print_str(&found_note, "topology: ");
    hak_print_text(&found_note, &source);
    hak_print_str(&found_note, ", ");
    hak_print_u64(&found_note, took, 0);
    hak_print_str(&found_note, " us\n");
    if (map && map->node_count > 1) {
        hak_topology_print(&found_note, map);
        hak_numa_count_lock();
        atomic_store_explicit(&published, map, memory_order_release);
        hak_numa_count_unlock();
    } else if (map) {
        hak_print_str(&found_note, "  one node the process may use: no binding\n");
        hak_topology_map_free(map);
    }
    hak_stats_note_topology(&found_note);
    atomic_store_explicit(&discovery, DISCOVERY_DONE, memory_order_release);
}

bool hak_numa_discovery_settled(void)
{
    int state = atomic_load_explicit(&discovery, memory_order_acquire);
    return state == DISCOVERY_UNNEEDED || state == DISCOVERY_DONE;
}

unsigned hak_numa_node_count(void)
{
    const struct hak_numa_map *map = atomic_load_explicit(&published, memory_order_acquire);
    return map ? map->node_count : 1;
}

unsigned hak_numa_thread_node(void)
{
    const struct hak_numa_map *map = atomic_load_explicit(&published, memory_order_acquire);
    if (!map)
        return 0;
    unsigned cpu = hak_numa_current_cpu();
    return cpu < map->cpu_count ? map->cpu_node[cpu] : 0;
}

const volatile int32_t *hak_numa_cpu_word(void)
{
    if (!atomic_load_explicit(&published, memory_order_acquire))
        return NULL;
    return hak_numa_rseq_cpu_word();
}

unsigned hak_numa_os_node(unsigned index)
{
    const struct hak_numa_map *map = atomic_load_explicit(&published, memory_order_acquire);
    return map && index < map->node_count ? map->os_node[index] : 0;
}

#else

void hak_numa_discover(void) {}

bool hak_numa_discovery_settled(void)
{
    return true;
}

unsigned hak_numa_node_count(void)
{
    return 1;
}

unsigned hak_numa_thread_node(void)
{
    return 0;
}

const volatile int32_t *hak_numa_cpu_word(void)
{
    return NULL;
}

unsigned hak_numa_os_node(unsigned index)
{
    (void)index;
    return 0;
}

#endif

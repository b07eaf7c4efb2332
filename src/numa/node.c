#include "node.h"

#include <stddef.h>

#include "config.h"

#if HAKMEM_HAVE_NUMA

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "../options.h"
#include "cpu.h"
#include "hwloc_api.h"
#include "sysfs.h"
#include "topology.h"

enum discovery_state {
    DISCOVERY_UNNEEDED, /* one node, HAKMEM_NUMA=off, or hak_numa_init not run */
    DISCOVERY_PENDING,
    DISCOVERY_RUNNING,
    DISCOVERY_DONE,
};

static _Atomic int discovery = DISCOVERY_UNNEEDED;
/* Published once and never freed, so readers need no reference to it. */
static _Atomic(const struct hak_numa_map *) published;

static struct hak_hwloc hwloc;
/* Kept for the life of the process: destroying the last topology unloads
 * hwloc's plugins, which costs as much as loading it. */
static hwloc_topology_t topology;

void hak_numa_init(void)
{
    if (hak_options.numa != HAK_NUMA_OFF && hak_numa_online_nodes() > 1)
        atomic_store_explicit(&discovery, DISCOVERY_PENDING, memory_order_relaxed);
}

static struct hak_numa_map *build_map(void)
{
    if (!hak_hwloc_open(&hwloc))
        return NULL;
    topology = hak_topology_load(&hwloc);
    if (!topology)
        return NULL;
    hwloc_bitmap_t usable = hak_topology_usable_memory(&hwloc, topology);
    if (!usable)
        return NULL;
    struct hak_numa_map *map = hak_topology_build(&hwloc, topology, usable);
    hwloc.hwloc_bitmap_free(usable);
    return map;
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
    struct hak_numa_map *map = build_map();
    discovering_here = false;
    if (map && map->node_count > 1)
        atomic_store_explicit(&published, map, memory_order_release);
    else if (map)
        hak_topology_map_free(map);
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

void hak_numa_init(void) {}

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

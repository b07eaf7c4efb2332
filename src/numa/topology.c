#include "config.h"

#if HAKMEM_HAVE_NUMA

#include "topology.h"

#include <linux/mempolicy.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Bounds the scratch arrays of hak_topology_build, which runs inside
 * malloc and so keeps them on the stack. */
#define MAX_NUMA_OBJECTS 256
#define NOT_USABLE 0xffu

#define LONG_BITS (8 * sizeof(unsigned long))
/* get_mempolicy wants room for every node the kernel could have. */
#define POLICY_MASK_BITS 4096

hwloc_topology_t hak_topology_load(const struct hak_hwloc *hwloc)
{
    hwloc_topology_t topology;
    if (hwloc->hwloc_topology_init(&topology))
        return NULL;
    /* Disallowed CPUs as well: cpusets change, and a thread moved to a CPU
     * outside the process's cpuset at start-up must still find its node.
     * Packages stay for the nearest-node fallback. */
    if (hwloc->hwloc_topology_set_flags(topology, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) ||
        hwloc->hwloc_topology_set_all_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_NONE) ||
        hwloc->hwloc_topology_set_type_filter(topology, HWLOC_OBJ_PACKAGE,
                                              HWLOC_TYPE_FILTER_KEEP_ALL)) {
        hwloc->hwloc_topology_destroy(topology);
        return NULL;
    }
    /* The x86 backend binds the thread to every CPU in turn to run cpuid:
     * slow, and this thread is in the middle of an allocation.  Builds for
     * other architectures have no such backend and refuse the name, which
     * is fine. */
    hwloc->hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    if (hwloc->hwloc_topology_load(topology)) {
        hwloc->hwloc_topology_destroy(topology);
        return NULL;
    }
    return topology;
}

hwloc_bitmap_t hak_topology_usable_memory(const struct hak_hwloc *hwloc, hwloc_topology_t topology)
{
    hwloc_bitmap_t usable =
        hwloc->hwloc_bitmap_dup(hwloc->hwloc_topology_get_allowed_nodeset(topology));
    if (!usable)
        return NULL;
    /* The calling thread's policy: numactl sets it before exec, so every
     * thread has inherited it. */
    int mode;
    unsigned long bind[POLICY_MASK_BITS / LONG_BITS];
    if (syscall(SYS_get_mempolicy, &mode, bind, POLICY_MASK_BITS, NULL, 0) != 0 ||
        (mode & ~MPOL_MODE_FLAGS) != MPOL_BIND)
        return usable;
    for (int node = hwloc->hwloc_bitmap_next(usable, -1); node >= 0;
         node = hwloc->hwloc_bitmap_next(usable, node)) {
        unsigned bit = (unsigned)node;
        if (bit >= POLICY_MASK_BITS || !(bind[bit / LONG_BITS] >> (bit % LONG_BITS) & 1))
            hwloc->hwloc_bitmap_clr(usable, bit);
    }
    return usable;
}

struct numa_objects {
    unsigned count;
    hwloc_obj_t node[MAX_NUMA_OBJECTS];
    int cpus[MAX_NUMA_OBJECTS];       /* weight of the node's cpuset */
    uint8_t dense[MAX_NUMA_OBJECTS];  /* index, or NOT_USABLE */
    uint8_t target[MAX_NUMA_OBJECTS]; /* index its CPUs get */
    unsigned of_dense[HAK_MAX_NODES];
};

static bool is_below(hwloc_obj_t obj, hwloc_obj_t ancestor)
{
    for (; obj; obj = obj->parent)
        if (obj == ancestor)
            return true;
    return false;
}

/* Where node i's CPUs get memory when node i cannot give it. */
static uint8_t nearest_usable(const struct numa_objects *objs, unsigned count,
                              const struct hwloc_distances_s *latency, unsigned i)
{
    if (latency) {
        unsigned row = latency->nbobjs;
        for (unsigned r = 0; r < latency->nbobjs; r++)
            if (latency->objs[r] == objs->node[i])
                row = r;
        uint8_t best = NOT_USABLE;
        hwloc_uint64_t best_value = 0;
        for (unsigned d = 0; d < count && row < latency->nbobjs; d++) {
            for (unsigned c = 0; c < latency->nbobjs; c++) {
                if (latency->objs[c] != objs->node[objs->of_dense[d]])
                    continue;
                hwloc_uint64_t value = latency->values[row * latency->nbobjs + c];
                if (best == NOT_USABLE || value < best_value) {
                    best = (uint8_t)d;
                    best_value = value;
                }
            }
        }
        if (best != NOT_USABLE)
            return best;
    }
    for (hwloc_obj_t ancestor = objs->node[i]->parent; ancestor; ancestor = ancestor->parent)
        for (unsigned d = 0; d < count; d++)
            if (is_below(objs->node[objs->of_dense[d]], ancestor))
                return (uint8_t)d;
    return 0;
}

/* Memory nodes in special tiers (HBM, NVM, CXL) share their locality with
 * the ordinary node of the same CPUs; that one is the CPUs' home. */
static bool ranks_before(hwloc_obj_t a, int a_cpus, hwloc_obj_t b, int b_cpus)
{
    if (a_cpus != b_cpus)
        return a_cpus < b_cpus;
    bool a_plain = !a->subtype || !strcmp(a->subtype, "DRAM");
    bool b_plain = !b->subtype || !strcmp(b->subtype, "DRAM");
    if (a_plain != b_plain)
        return a_plain;
    return a->os_index < b->os_index;
}

/* The node with the smallest cpuset that holds cpu: the one the kernel
 * lists the CPU under (NUMA nodes carry the cpuset of the object they are
 * attached to). */
static int home_of_cpu(const struct hak_hwloc *hwloc, const struct numa_objects *objs, unsigned cpu)
{
    int home = -1;
    for (unsigned i = 0; i < objs->count; i++) {
        hwloc_obj_t node = objs->node[i];
        if (!node->cpuset || !hwloc->hwloc_bitmap_isset(node->cpuset, cpu))
            continue;
        if (home < 0 || ranks_before(node, objs->cpus[i], objs->node[home], objs->cpus[home]))
            home = (int)i;
    }
    return home;
}

static size_t map_bytes(unsigned cpu_count)
{
    size_t bytes = sizeof(struct hak_numa_map) + cpu_count;
    return (bytes + HAK_PAGE_SIZE - 1) & ~(HAK_PAGE_SIZE - 1);
}

static unsigned number_usable_nodes(const struct hak_hwloc *hwloc, struct numa_objects *objs,
                                    hwloc_const_nodeset_t usable_memory, uint16_t *os_node)
{
    /* A topology that could not read node sizes reports 0 everywhere. */
    bool sizes_known = false;
    for (unsigned i = 0; i < objs->count; i++)
        if (objs->node[i]->attr->numanode.local_memory)
            sizes_known = true;
    unsigned count = 0;
    for (unsigned os = 0; os < HAK_MAX_NODES; os++) {
        for (unsigned i = 0; i < objs->count; i++) {
            hwloc_obj_t node = objs->node[i];
            if (node->os_index != os || !hwloc->hwloc_bitmap_isset(usable_memory, os) ||
                (sizes_known && !node->attr->numanode.local_memory))
                continue;
            objs->dense[i] = (uint8_t)count;
            objs->of_dense[count] = i;
            os_node[count++] = (uint16_t)os;
        }
    }
    return count;
}

struct hak_numa_map *hak_topology_build(const struct hak_hwloc *hwloc, hwloc_topology_t topology,
                                        hwloc_const_nodeset_t usable_memory)
{
    struct numa_objects objs;
    int nodes = hwloc->hwloc_get_nbobjs_by_depth(topology, HWLOC_TYPE_DEPTH_NUMANODE);
    if (nodes <= 0 || nodes > MAX_NUMA_OBJECTS)
        return NULL;
    objs.count = (unsigned)nodes;
    for (unsigned i = 0; i < objs.count; i++) {
        objs.node[i] = hwloc->hwloc_get_obj_by_depth(topology, HWLOC_TYPE_DEPTH_NUMANODE, i);
        objs.cpus[i] = objs.node[i]->cpuset ? hwloc->hwloc_bitmap_weight(objs.node[i]->cpuset) : 0;
        objs.dense[i] = NOT_USABLE;
    }
    uint16_t os_node[HAK_MAX_NODES];
    unsigned count = number_usable_nodes(hwloc, &objs, usable_memory, os_node);
    if (!count)
        return NULL;

    struct hwloc_distances_s *latency = NULL;
    unsigned matrices = 1;
    if (hwloc->hwloc_distances_get_by_type(topology, HWLOC_OBJ_NUMANODE, &matrices, &latency,
                                           HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) ||
        !matrices)
        latency = NULL;
    for (unsigned i = 0; i < objs.count; i++)
        objs.target[i] =
            objs.dense[i] != NOT_USABLE ? objs.dense[i] : nearest_usable(&objs, count, latency, i);
    if (latency)
        hwloc->hwloc_distances_release(topology, latency);

    hwloc_const_cpuset_t cpus = hwloc->hwloc_topology_get_complete_cpuset(topology);
    int last_cpu = hwloc->hwloc_bitmap_last(cpus);
    if (last_cpu < 0)
        return NULL;
    unsigned cpu_count = (unsigned)last_cpu + 1;
    struct hak_numa_map *map = mmap(NULL, map_bytes(cpu_count), PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    map->node_count = count;
    map->cpu_count = cpu_count;
    for (unsigned d = 0; d < count; d++)
        map->os_node[d] = os_node[d];
    /* CPUs that no node holds keep index 0, as the fresh mapping reads. */
    for (int cpu = hwloc->hwloc_bitmap_next(cpus, -1); cpu >= 0;
         cpu = hwloc->hwloc_bitmap_next(cpus, cpu)) {
        int home = home_of_cpu(hwloc, &objs, (unsigned)cpu);
        if (home >= 0)
            map->cpu_node[cpu] = objs.target[home];
    }
    return map;
}

void hak_topology_map_free(struct hak_numa_map *map)
{
    munmap(map, map_bytes(map->cpu_count));
}

#endif

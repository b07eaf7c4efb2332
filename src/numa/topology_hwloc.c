/* hwloc's description of the machine, as a layout (topology.h). */
#include "config.h"

#if HAKMEM_HAVE_NUMA

#include "topology_hwloc.h"

#include <string.h>

hwloc_topology_t hak_hwloc_load(const struct hak_hwloc *hwloc)
{
    hwloc_topology_t topology;
    if (hwloc->hwloc_topology_init(&topology))
        return NULL;
    /* Only NUMA nodes, PUs (never filtered), packages and groups.  hwloc
     * attaches a node to the smallest object that has the node's CPUs; where
     * no kept object matches them (several nodes in one package, several
     * packages in one node), it creates a group for the node, and a filter
     * that drops groups leaves the node on the package or the machine with
     * their CPUs (issue 12).  KEEP_STRUCTURE still merges groups that add
     * nothing.  Disallowed CPUs as well: cpusets change, and a thread moved
     * to a CPU outside the process's cpuset at start-up must still find its
     * node. */
    if (hwloc->hwloc_topology_set_flags(topology, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) ||
        hwloc->hwloc_topology_set_all_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_NONE) ||
        hwloc->hwloc_topology_set_type_filter(topology, HWLOC_OBJ_PACKAGE,
                                              HWLOC_TYPE_FILTER_KEEP_ALL) ||
        hwloc->hwloc_topology_set_type_filter(topology, HWLOC_OBJ_GROUP,
                                              HWLOC_TYPE_FILTER_KEEP_STRUCTURE)) {
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

const char *hak_hwloc_version(const struct hak_hwloc *hwloc, hwloc_topology_t topology)
{
    /* hwloc_get_root_obj is inline and calls the library by name. */
    hwloc_obj_t root = hwloc->hwloc_get_obj_by_depth(topology, 0, 0);
    for (unsigned i = 0; i < root->infos_count; i++)
        if (!strcmp(root->infos[i].name, "hwlocVersion"))
            return root->infos[i].value;
    return "2";
}

static bool is_below(hwloc_obj_t obj, hwloc_obj_t ancestor)
{
    for (; obj; obj = obj->parent)
        if (obj == ancestor)
            return true;
    return false;
}

/* Where no latency matrix came with the topology: nodes that share a
 * deeper ancestor are nearer. */
static uint32_t tree_distance(hwloc_obj_t a, hwloc_obj_t b)
{
    if (a == b)
        return 0;
    for (hwloc_obj_t ancestor = a->parent; ancestor; ancestor = ancestor->parent)
        if (is_below(b, ancestor))
            return UINT32_MAX / 2 - (uint32_t)ancestor->depth;
    return UINT32_MAX / 2;
}

static void read_distances(const struct hak_hwloc *hwloc, hwloc_topology_t topology,
                           struct hak_numa_layout *layout, hwloc_obj_t *objs)
{
    struct hwloc_distances_s *latency = NULL;
    unsigned matrices = 1;
    if (hwloc->hwloc_distances_get_by_type(topology, HWLOC_OBJ_NUMANODE, &matrices, &latency,
                                           HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) ||
        !matrices)
        latency = NULL;
    /* Entry of each matrix row in the layout; a node the matrix lacks keeps
     * the tree's distances. */
    unsigned row[HAK_LAYOUT_NODES];
    for (unsigned i = 0; i < layout->node_count; i++) {
        row[i] = UINT32_MAX;
        for (unsigned r = 0; latency && r < latency->nbobjs; r++)
            if (latency->objs[r] == objs[i])
                row[i] = r;
    }
    for (unsigned i = 0; i < layout->node_count; i++) {
        for (unsigned j = 0; j < layout->node_count; j++) {
            if (row[i] != UINT32_MAX && row[j] != UINT32_MAX) {
                hwloc_uint64_t value = latency->values[row[i] * latency->nbobjs + row[j]];
                layout->distance[i][j] = value < UINT32_MAX / 4 ? (uint32_t)value : UINT32_MAX / 4;
            } else {
                layout->distance[i][j] = tree_distance(objs[i], objs[j]);
            }
        }
    }
    layout->has_distance = true;
    if (latency)
        hwloc->hwloc_distances_release(topology, latency);
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

/* A node's cpuset is its locality: the CPUs of the object it is attached
 * to.  A CPU's home is the node with the smallest such set that holds it,
 * which is the node the kernel lists the CPU under. */
static void claim_cpus(const struct hak_hwloc *hwloc, hwloc_topology_t topology,
                       struct hak_numa_layout *layout, hwloc_obj_t *objs)
{
    int weight[HAK_LAYOUT_NODES];
    for (unsigned i = 0; i < layout->node_count; i++)
        weight[i] = objs[i]->cpuset ? hwloc->hwloc_bitmap_weight(objs[i]->cpuset) : 0;
    hwloc_const_cpuset_t cpus = hwloc->hwloc_topology_get_complete_cpuset(topology);
    for (int cpu = hwloc->hwloc_bitmap_next(cpus, -1); cpu >= 0 && cpu < HAK_LAYOUT_CPUS;
         cpu = hwloc->hwloc_bitmap_next(cpus, cpu)) {
        int home = -1;
        for (unsigned i = 0; i < layout->node_count; i++) {
            if (!objs[i]->cpuset || !hwloc->hwloc_bitmap_isset(objs[i]->cpuset, (unsigned)cpu))
                continue;
            if (home < 0 || ranks_before(objs[i], weight[i], objs[home], weight[home]))
                home = (int)i;
        }
        if (home >= 0)
            hak_layout_claim_cpu(layout, (unsigned)cpu, (unsigned)home);
    }
}

bool hak_hwloc_read_layout(const struct hak_hwloc *hwloc, hwloc_topology_t topology,
                           hwloc_const_nodeset_t allowed, struct hak_numa_layout *layout)
{
    hak_layout_reset(layout);
    int count = hwloc->hwloc_get_nbobjs_by_depth(topology, HWLOC_TYPE_DEPTH_NUMANODE);
    if (count <= 0)
        return false;
    /* In OS order, as the layout wants them. */
    hwloc_obj_t objs[HAK_LAYOUT_NODES];
    for (int i = 0; i < count; i++) {
        hwloc_obj_t node =
            hwloc->hwloc_get_obj_by_depth(topology, HWLOC_TYPE_DEPTH_NUMANODE, (unsigned)i);
        if (i >= HAK_LAYOUT_NODES) {
            layout->fault = HAK_LAYOUT_TOO_MANY_NODES;
            return true;
        }
        int at = i;
        for (; at > 0 && objs[at - 1]->os_index > node->os_index; at--)
            objs[at] = objs[at - 1];
        objs[at] = node;
    }
    /* A topology that could not read node sizes reports 0 everywhere. */
    bool sizes_known = false;
    for (int i = 0; i < count; i++)
        if (objs[i]->attr->numanode.local_memory)
            sizes_known = true;
    for (int i = 0; i < count; i++)
        hak_layout_add_node(layout, objs[i]->os_index,
                            !sizes_known || objs[i]->attr->numanode.local_memory,
                            hwloc->hwloc_bitmap_isset(allowed, objs[i]->os_index));
    read_distances(hwloc, topology, layout, objs);
    claim_cpus(hwloc, topology, layout, objs);
    return true;
}

#endif

#include "topology.h"

#include <string.h>

#include "../os.h"

void hak_layout_reset(struct hak_numa_layout *layout)
{
    layout->node_count = 0;
    layout->has_distance = false;
    layout->cpu_count = 0;
    memset(layout->cpu_home, HAK_NO_NODE, sizeof(layout->cpu_home));
    layout->fault = HAK_LAYOUT_SOUND;
}

bool hak_layout_add_node(struct hak_numa_layout *layout, unsigned os_id, bool has_memory,
                         bool allowed)
{
    if (layout->node_count == HAK_LAYOUT_NODES) {
        layout->fault = HAK_LAYOUT_TOO_MANY_NODES;
        return false;
    }
    layout->node[layout->node_count++] = (struct hak_layout_node){
        .os_id = (uint16_t)os_id, .has_memory = has_memory, .allowed = allowed};
    return true;
}

void hak_layout_claim_cpu(struct hak_numa_layout *layout, unsigned cpu, unsigned entry)
{
    if (cpu >= HAK_LAYOUT_CPUS)
        return;
    uint8_t held = layout->cpu_home[cpu];
    if (held != HAK_NO_NODE && held != entry) {
        if (layout->fault == HAK_LAYOUT_SOUND) {
            layout->fault = HAK_LAYOUT_CPU_TWICE;
            layout->fault_cpu = cpu;
            layout->fault_nodes[0] = layout->node[held].os_id;
            layout->fault_nodes[1] = layout->node[entry].os_id;
        }
        return;
    }
    layout->cpu_home[cpu] = (uint8_t)entry;
    if (cpu >= layout->cpu_count)
        layout->cpu_count = cpu + 1;
}

void hak_layout_apply_bind_policy(struct hak_numa_layout *layout)
{
    unsigned long bind[HAK_OS_NODEMASK_WORDS];
    if (!hak_os_bind_policy_nodes(bind))
        return;
    enum { LONG_BITS = 8 * sizeof(unsigned long) };
    for (unsigned i = 0; i < layout->node_count; i++) {
        unsigned os = layout->node[i].os_id;
        if (os >= HAK_OS_MAX_NODES || !(bind[os / LONG_BITS] >> (os % LONG_BITS) & 1))
            layout->node[i].allowed = false;
    }
}

static bool usable(const struct hak_layout_node *node)
{
    return node->allowed && node->has_memory && node->os_id < HAK_MAX_NODES;
}

/* Where the CPUs of entry i get memory when its node cannot give it. */
static uint8_t nearest_usable(const struct hak_numa_layout *layout, const uint8_t *dense,
                              unsigned i)
{
    uint8_t best = 0;
    uint32_t best_distance = UINT32_MAX;
    if (!layout->has_distance)
        return 0;
    for (unsigned j = 0; j < layout->node_count; j++) {
        if (dense[j] == HAK_NO_NODE || layout->distance[i][j] >= best_distance)
            continue;
        best = dense[j];
        best_distance = layout->distance[i][j];
    }
    return best;
}

static size_t map_bytes(unsigned cpu_count)
{
    size_t bytes = sizeof(struct hak_numa_map) + cpu_count;
    return (bytes + HAK_PAGE_SIZE - 1) & ~(HAK_PAGE_SIZE - 1);
}

struct hak_numa_map *hak_topology_build(struct hak_numa_layout *layout)
{
    if (layout->fault != HAK_LAYOUT_SOUND)
        return NULL;
    if (layout->cpu_count == 0) {
        layout->fault = HAK_LAYOUT_NO_CPUS;
        return NULL;
    }
    uint8_t dense[HAK_LAYOUT_NODES];
    uint16_t os_node[HAK_MAX_NODES];
    unsigned count = 0;
    for (unsigned i = 0; i < layout->node_count; i++) {
        dense[i] = HAK_NO_NODE;
        if (usable(&layout->node[i])) {
            os_node[count] = layout->node[i].os_id;
            dense[i] = (uint8_t)count++;
        }
    }
    if (count == 0) {
        layout->fault = HAK_LAYOUT_NO_MEMORY;
        return NULL;
    }
    uint8_t target[HAK_LAYOUT_NODES];
    for (unsigned i = 0; i < layout->node_count; i++)
        target[i] = dense[i] != HAK_NO_NODE ? dense[i] : nearest_usable(layout, dense, i);

    struct hak_numa_map *map = hak_os_map_aligned(map_bytes(layout->cpu_count), HAK_PAGE_SIZE);
    if (!map) {
        layout->fault = HAK_LAYOUT_NO_ROOM;
        return NULL;
    }
    map->node_count = count;
    map->cpu_count = layout->cpu_count;
    memcpy(map->os_node, os_node, count * sizeof(os_node[0]));
    /* CPUs that no node holds (offline ones the kernel lists nowhere) keep
     * index 0, as the fresh mapping reads. */
    for (unsigned cpu = 0; cpu < layout->cpu_count; cpu++)
        if (layout->cpu_home[cpu] != HAK_NO_NODE)
            map->cpu_node[cpu] = target[layout->cpu_home[cpu]];
    return map;
}

void hak_topology_map_free(struct hak_numa_map *map)
{
    hak_os_unmap(map, map_bytes(map->cpu_count));
}

unsigned hak_topology_os_node_of_cpu(const struct hak_numa_map *map, unsigned cpu)
{
    return map->os_node[cpu < map->cpu_count ? map->cpu_node[cpu] : 0];
}

bool hak_topology_same_nodes(const struct hak_numa_map *a, const struct hak_numa_map *b)
{
    return a->node_count == b->node_count &&
           !memcmp(a->os_node, b->os_node, a->node_count * sizeof(a->os_node[0]));
}

int hak_topology_first_difference(const struct hak_numa_map *a, const struct hak_numa_map *b)
{
    unsigned cpus = a->cpu_count > b->cpu_count ? a->cpu_count : b->cpu_count;
    for (unsigned cpu = 0; cpu < cpus; cpu++)
        if (hak_topology_os_node_of_cpu(a, cpu) != hak_topology_os_node_of_cpu(b, cpu))
            return (int)cpu;
    return -1;
}

void hak_layout_print_fault(struct hak_printer *out, const struct hak_numa_layout *layout)
{
    switch (layout->fault) {
    case HAK_LAYOUT_SOUND:
        break;
    case HAK_LAYOUT_CPU_TWICE:
        hak_print_str(out, "CPU ");
        hak_print_u64(out, layout->fault_cpu, 0);
        hak_print_str(out, " is listed by nodes ");
        hak_print_u64(out, layout->fault_nodes[0], 0);
        hak_print_str(out, " and ");
        hak_print_u64(out, layout->fault_nodes[1], 0);
        break;
    case HAK_LAYOUT_NO_CPUS:
        hak_print_str(out, "no node holds a CPU");
        break;
    case HAK_LAYOUT_NO_MEMORY:
        hak_print_str(out, "no node the process may use has memory");
        break;
    case HAK_LAYOUT_TOO_MANY_NODES:
        hak_print_str(out, "more than ");
        hak_print_u64(out, HAK_LAYOUT_NODES, 0);
        hak_print_str(out, " nodes");
        break;
    case HAK_LAYOUT_LIST_TOO_LONG:
        hak_print_str(out, "a sysfs list too long to read whole");
        break;
    case HAK_LAYOUT_NO_ROOM:
        hak_print_str(out, "no memory for the map");
        break;
    }
}

static void print_range(struct hak_printer *out, unsigned first, unsigned last, bool *any)
{
    hak_print_str(out, *any ? "," : " cpus ");
    hak_print_u64(out, first, 0);
    if (last > first) {
        hak_print_str(out, "-");
        hak_print_u64(out, last, 0);
    }
    *any = true;
}

void hak_topology_print(struct hak_printer *out, const struct hak_numa_map *map)
{
    for (unsigned node = 0; node < map->node_count; node++) {
        hak_print_str(out, "  node ");
        hak_print_u64(out, node, 0);
        hak_print_str(out, " (os ");
        hak_print_u64(out, map->os_node[node], 0);
        hak_print_str(out, "):");
        bool any = false;
        unsigned first = 0;
        bool open = false;
        for (unsigned cpu = 0; cpu <= map->cpu_count; cpu++) {
            bool here = cpu < map->cpu_count && map->cpu_node[cpu] == node;
            if (here && !open)
                first = cpu;
            else if (!here && open)
                print_range(out, first, cpu - 1, &any);
            open = here;
        }
        hak_print_str(out, any ? "\n" : " no CPUs\n");
    }
}

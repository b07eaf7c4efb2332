/* The node map on machines of every shape, from both sources: each shape is
 * written as a fake sysfs tree, which hak_sysfs_read_layout reads under its
 * root and hwloc's Linux backend reads through HWLOC_FSROOT, and both maps
 * must send every CPU to the node the shape puts it on.  The shapes are
 * those of real servers: one package per node, several nodes per package
 * (Sub-NUMA Clustering, AMD NPS2/NPS4), several packages per node, SMT
 * siblings numbered apart, memory-only nodes (CXL), nodes without memory,
 * sparse node numbers, uneven nodes, 8 nodes, and cpusets.  Layouts that
 * make no sense are refused.  The numa sources are compiled in, as their
 * symbols are hidden in the library. */
#include "config.h"

#include <errno.h>
#include <sys/stat.h>

#include "harness.h"
#include "numa/sysfs.h"
#include "numa/topology.h"
#include "stats.h"

/* os.c reports faults through this (init.c is not compiled in). */
void hak_fatal(const char *what, const void *addr)
{
    hard_error("hak_fatal: %s %p", what, addr);
    abort();
}

#define MAX_SHAPE_NODES 16
#define MAX_SHAPE_CPUS 64

struct shape_node {
    int os_id; /* -1 ends the list */
    const char *cpus;
    bool no_memory;
};

struct shape {
    const char *name;
    unsigned cpu_count;
    unsigned cpus_per_package; /* consecutive CPUs, before SMT siblings */
    unsigned threads_per_core; /* siblings are cpu, cpu + cpu_count / threads, ... */
    struct shape_node nodes[MAX_SHAPE_NODES];
    const char *mems_allowed; /* the cpuset's node list; NULL: no cpuset line */
    /* What the map must say: the OS node of every usable index, and of
     * every CPU ("0 0 1 1"). */
    const char *usable;
    const char *cpu_nodes;
};

static char root_dir[] = "/tmp/hakmem-shapes.XXXXXX";

static void write_file(const char *path, const char *text)
{
    char full[512];
    snprintf(full, sizeof(full), "%s%s", root_dir, path);
    for (char *slash = strchr(full + strlen(root_dir) + 1, '/'); slash;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(full, 0755) && errno != EEXIST)
            hard_error("mkdir %s: %s", full, strerror(errno));
        *slash = '/';
    }
    FILE *out = fopen(full, "w");
    if (!out || fputs(text, out) < 0 || fclose(out))
        hard_error("cannot write %s", full);
}

/* A kernel CPU list ("0-1,4-5") as a set. */
static uint64_t parse_cpus(const char *list)
{
    uint64_t set = 0;
    unsigned first, last;
    size_t pos = 0;
    while (hak_numa_list_next(list, strlen(list), &pos, &first, &last))
        for (unsigned cpu = first; cpu <= last && cpu < MAX_SHAPE_CPUS; cpu++)
            set |= 1ULL << cpu;
    return set;
}

/* The kernel's mask format: 32-bit hex words, most significant first. */
static void format_mask(char *text, size_t size, uint64_t set, unsigned cpu_count)
{
    if (cpu_count > 32)
        snprintf(text, size, "%08x,%08x\n", (unsigned)(set >> 32), (unsigned)set);
    else
        snprintf(text, size, "%08x\n", (unsigned)set);
}

static void format_list(char *text, size_t size, uint64_t set)
{
    size_t len = 0;
    text[0] = '\0';
    for (unsigned cpu = 0; cpu < MAX_SHAPE_CPUS; cpu++) {
        if (!(set >> cpu & 1) || (cpu > 0 && set >> (cpu - 1) & 1))
            continue;
        unsigned last = cpu;
        while (last + 1 < MAX_SHAPE_CPUS && set >> (last + 1) & 1)
            last++;
        len += (size_t)snprintf(text + len, size - len, len ? ",%u" : "%u", cpu);
        if (last > cpu)
            len += (size_t)snprintf(text + len, size - len, "-%u", last);
    }
    snprintf(text + len, size - len, "\n");
}

static void write_cpu_files(const struct shape *shape)
{
    char path[128], text[128];
    snprintf(text, sizeof(text), "0-%u\n", shape->cpu_count - 1);
    write_file("/sys/devices/system/cpu/online", text);
    write_file("/sys/devices/system/cpu/possible", text);
    write_file("/sys/devices/system/cpu/present", text);
    unsigned cores = shape->cpu_count / shape->threads_per_core;
    for (unsigned cpu = 0; cpu < shape->cpu_count; cpu++) {
        unsigned core = cpu % cores;
        unsigned package = core / (shape->cpus_per_package / shape->threads_per_core);
        uint64_t siblings = 0, package_cpus = 0;
        for (unsigned other = 0; other < shape->cpu_count; other++) {
            if (other % cores == core)
                siblings |= 1ULL << other;
            if ((other % cores) / (shape->cpus_per_package / shape->threads_per_core) == package)
                package_cpus |= 1ULL << other;
        }
        static const struct {
            const char *file;
            bool package, list;
        } files[] = {{"thread_siblings", false, false},     {"core_cpus", false, false},
                     {"thread_siblings_list", false, true}, {"core_cpus_list", false, true},
                     {"core_siblings", true, false},        {"package_cpus", true, false},
                     {"core_siblings_list", true, true},    {"package_cpus_list", true, true}};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
            uint64_t set = files[i].package ? package_cpus : siblings;
            if (files[i].list)
                format_list(text, sizeof(text), set);
            else
                format_mask(text, sizeof(text), set, shape->cpu_count);
            snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/topology/%s", cpu,
                     files[i].file);
            write_file(path, text);
        }
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/topology/physical_package_id",
                 cpu);
        snprintf(text, sizeof(text), "%u\n", package);
        write_file(path, text);
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/topology/core_id", cpu);
        snprintf(text, sizeof(text), "%u\n", core);
        write_file(path, text);
    }
}

/* Distances as firmware gives them: 10 to itself, 12 within a package (or
 * to a memory-only node), 21 across. */
static unsigned distance(const struct shape *shape, const struct shape_node *a,
                         const struct shape_node *b)
{
    if (a == b)
        return 10;
    uint64_t a_cpus = parse_cpus(a->cpus), b_cpus = parse_cpus(b->cpus);
    if (!a_cpus || !b_cpus)
        return 12;
    unsigned a_package = (unsigned)__builtin_ctzll(a_cpus) %
                         (shape->cpu_count / shape->threads_per_core) /
                         (shape->cpus_per_package / shape->threads_per_core);
    unsigned b_package = (unsigned)__builtin_ctzll(b_cpus) %
                         (shape->cpu_count / shape->threads_per_core) /
                         (shape->cpus_per_package / shape->threads_per_core);
    return a_package == b_package ? 12 : 21;
}

static void write_node_files(const struct shape *shape)
{
    char path[128], text[256], online[128] = "", memory[128] = "";
    for (const struct shape_node *node = shape->nodes; node->os_id >= 0; node++) {
        uint64_t cpus = parse_cpus(node->cpus);
        snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node->os_id);
        format_list(text, sizeof(text), cpus);
        write_file(path, text);
        snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpumap", node->os_id);
        format_mask(text, sizeof(text), cpus, shape->cpu_count);
        write_file(path, text);
        snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", node->os_id);
        snprintf(text, sizeof(text), "Node %d MemTotal:       %u kB\n", node->os_id,
                 node->no_memory ? 0 : 1048576);
        write_file(path, text);
        size_t len = 0;
        for (const struct shape_node *other = shape->nodes; other->os_id >= 0; other++)
            len += (size_t)snprintf(text + len, sizeof(text) - len, len ? " %u" : "%u",
                                    distance(shape, node, other));
        snprintf(text + len, sizeof(text) - len, "\n");
        snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/distance", node->os_id);
        write_file(path, text);
        snprintf(online + strlen(online), sizeof(online) - strlen(online), "%s%d",
                 node == shape->nodes ? "" : ",", node->os_id);
        if (!node->no_memory)
            snprintf(memory + strlen(memory), sizeof(memory) - strlen(memory), "%s%d",
                     memory[0] ? "," : "", node->os_id);
    }
    strcat(online, "\n");
    strcat(memory, "\n");
    write_file("/sys/devices/system/node/online", online);
    write_file("/sys/devices/system/node/possible", online);
    write_file("/sys/devices/system/node/has_memory", memory);
    write_file("/sys/devices/system/node/has_normal_memory", memory);
}

static void write_shape(const struct shape *shape)
{
    char command[128];
    snprintf(command, sizeof(command), "rm -rf %s/sys %s/proc", root_dir, root_dir);
    if (system(command))
        hard_error("cannot clear %s", root_dir);
    write_cpu_files(shape);
    write_node_files(shape);
    write_file("/proc/meminfo", "MemTotal:       8388608 kB\n");
    char status[256] = "Name:\ttest\nCpus_allowed_list:\t0-63\n";
    if (shape->mems_allowed)
        snprintf(status + strlen(status), sizeof(status) - strlen(status),
                 "Mems_allowed_list:\t%s\n", shape->mems_allowed);
    write_file("/proc/self/status", status);
}

/* "0 2" against the map's OS nodes; "0 0 1 1" against its CPUs. */
static void check_map(const char *shape, const char *source, const struct hak_numa_map *map,
                      const char *usable, const char *cpu_nodes)
{
    if (!map) {
        CHECK(false, "%s, %s: no map", shape, source);
        return;
    }
    char *end;
    unsigned index = 0;
    for (const char *p = usable; *p; p = end, index++) {
        unsigned long os = strtoul(p, &end, 10);
        if (end == p)
            break;
        CHECK(index < map->node_count && map->os_node[index] == os,
              "%s, %s: index %u should be OS node %lu", shape, source, index, os);
    }
    CHECK(map->node_count == index, "%s, %s: %u nodes, expected %u", shape, source, map->node_count,
          index);
    unsigned cpu = 0;
    for (const char *p = cpu_nodes; *p; p = end, cpu++) {
        unsigned long os = strtoul(p, &end, 10);
        if (end == p)
            break;
        CHECK(hak_topology_os_node_of_cpu(map, cpu) == os, "%s, %s: CPU %u on OS node %u, not %lu",
              shape, source, cpu, hak_topology_os_node_of_cpu(map, cpu), os);
    }
    CHECK(map->cpu_count == cpu, "%s, %s: %u CPUs, expected %u", shape, source, map->cpu_count,
          cpu);
}

static struct hak_numa_layout layout;

static double sysfs_ms, hwloc_ms;

static struct hak_numa_map *sysfs_map(void)
{
    double start = seconds_now();
    if (!hak_sysfs_read_layout(root_dir, &layout))
        return NULL;
    struct hak_numa_map *map = hak_topology_build(&layout);
    sysfs_ms += (seconds_now() - start) * 1e3;
    return map;
}

#if HAKMEM_HAVE_NUMA
#include <dlfcn.h>

#include "numa/topology_hwloc.h"

static struct hak_hwloc hw;
static bool have_hwloc;

/* hwloc's Linux backend, reading the fake tree. */
static struct hak_numa_map *hwloc_map(void)
{
    double start = seconds_now();
    setenv("HWLOC_FSROOT", root_dir, 1);
    hwloc_topology_t topology = hak_hwloc_load(&hw);
    unsetenv("HWLOC_FSROOT");
    if (!topology)
        return NULL;
    struct hak_numa_map *map = NULL;
    /* Outside this machine's cpuset, which hwloc cannot read from the fake
     * tree: the shapes' cpusets are checked through sysfs. */
    if (hak_hwloc_read_layout(&hw, topology, hw.hwloc_topology_get_allowed_nodeset(topology),
                              &layout))
        map = hak_topology_build(&layout);
    hw.hwloc_topology_destroy(topology);
    hwloc_ms += (seconds_now() - start) * 1e3;
    return map;
}
#endif

static void check_shape(const struct shape *shape)
{
    write_shape(shape);
    struct hak_numa_map *map = sysfs_map();
    check_map(shape->name, "sysfs", map, shape->usable, shape->cpu_nodes);
    if (map)
        hak_topology_map_free(map);
#if HAKMEM_HAVE_NUMA
    if (!have_hwloc || shape->mems_allowed)
        return;
    map = hwloc_map();
    check_map(shape->name, "hwloc", map, shape->usable, shape->cpu_nodes);
    if (map)
        hak_topology_map_free(map);
#endif
}

#define NODE(id, list)                                                                             \
    {                                                                                              \
        .os_id = (id), .cpus = (list)                                                              \
    }
#define MEMORY_ONLY(id)                                                                            \
    {                                                                                              \
        .os_id = (id), .cpus = ""                                                                  \
    }
#define NO_MEMORY(id, list)                                                                        \
    {                                                                                              \
        .os_id = (id), .cpus = (list), .no_memory = true                                           \
    }
#define END                                                                                        \
    {                                                                                              \
        .os_id = -1                                                                                \
    }

static const struct shape shapes[] = {
    {"one package per node",
     4,
     2,
     1,
     {NODE(0, "0-1"), NODE(1, "2-3"), END},
     NULL,
     "0 1",
     "0 0 1 1"},
    {"two nodes in one package (SNC, NPS2)",
     4,
     4,
     1,
     {NODE(0, "0-1"), NODE(1, "2-3"), END},
     NULL,
     "0 1",
     "0 0 1 1"},
    {"four nodes in one package (NPS4)",
     8,
     8,
     1,
     {NODE(0, "0-1"), NODE(1, "2-3"), NODE(2, "4-5"), NODE(3, "6-7"), END},
     NULL,
     "0 1 2 3",
     "0 0 1 1 2 2 3 3"},
    {"two packages per node",
     8,
     2,
     1,
     {NODE(0, "0-3"), NODE(1, "4-7"), END},
     NULL,
     "0 1",
     "0 0 0 0 1 1 1 1"},
    {"SMT siblings numbered apart",
     8,
     4,
     2,
     {NODE(0, "0-1,4-5"), NODE(1, "2-3,6-7"), END},
     NULL,
     "0 1",
     "0 0 1 1 0 0 1 1"},
    {"SNC with SMT",
     8,
     8,
     2,
     {NODE(0, "0-1,4-5"), NODE(1, "2-3,6-7"), END},
     NULL,
     "0 1",
     "0 0 1 1 0 0 1 1"},
    {"a memory-only node (CXL)",
     4,
     2,
     1,
     {NODE(0, "0-1"), NODE(1, "2-3"), MEMORY_ONLY(2), END},
     NULL,
     "0 1 2",
     "0 0 1 1"},
    {"sparse node numbers", 4, 2, 1, {NODE(0, "0-1"), NODE(2, "2-3"), END}, NULL, "0 2", "0 0 2 2"},
    {"nodes of different sizes",
     4,
     4,
     1,
     {NODE(0, "0-2"), NODE(1, "3"), END},
     NULL,
     "0 1",
     "0 0 0 1"},
    {"eight nodes, four per package",
     16,
     8,
     1,
     {NODE(0, "0-1"), NODE(1, "2-3"), NODE(2, "4-5"), NODE(3, "6-7"), NODE(4, "8-9"),
      NODE(5, "10-11"), NODE(6, "12-13"), NODE(7, "14-15"), END},
     NULL,
     "0 1 2 3 4 5 6 7",
     "0 0 1 1 2 2 3 3 4 4 5 5 6 6 7 7"},
    /* A node with CPUs and no memory: its CPUs get the nearest node, the
     * one in their package. */
    {"a node without memory",
     6,
     4,
     1,
     {NODE(0, "0-1"), NO_MEMORY(1, "2-3"), NODE(2, "4-5"), END},
     NULL,
     "0 2",
     "0 0 0 0 2 2"},
    /* A cpuset with nodes 1 and 2: node 0's CPUs get node 1, in their
     * package. */
    {"a cpuset of two nodes",
     8,
     4,
     1,
     {NODE(0, "0-1"), NODE(1, "2-3"), NODE(2, "4-5"), NODE(3, "6-7"), END},
     "1-2",
     "1 2",
     "1 1 1 1 2 2 2 2"},
    {"a cpuset of one node", 4, 2, 1, {NODE(0, "0-1"), NODE(1, "2-3"), END}, "1", "1", "1 1 1 1"},
};

static void test_refused(void)
{
    static const struct shape twice = {
        "a CPU in two nodes", 4, 4, 1, {NODE(0, "0-2"), NODE(1, "2-3"), END}, NULL, "", ""};
    write_shape(&twice);
    CHECK(hak_sysfs_read_layout(root_dir, &layout), "a CPU in two nodes: unreadable");
    CHECK(hak_topology_build(&layout) == NULL, "a CPU in two nodes: a map");
    CHECK(layout.fault == HAK_LAYOUT_CPU_TWICE && layout.fault_cpu == 2 &&
              layout.fault_nodes[0] == 0 && layout.fault_nodes[1] == 1,
          "a CPU in two nodes: fault %d for CPU %u", (int)layout.fault, layout.fault_cpu);
    struct hak_printer text = {.fd = -1};
    hak_layout_print_fault(&text, &layout);
    CHECK(text.len == strlen("CPU 2 is listed by nodes 0 and 1") &&
              !memcmp(text.buf, "CPU 2 is listed by nodes 0 and 1", text.len),
          "the fault reads \"%.*s\"", (int)text.len, text.buf);

    static const struct shape no_cpus = {
        "no CPU anywhere", 4, 4, 1, {MEMORY_ONLY(0), MEMORY_ONLY(1), END}, NULL, "", ""};
    write_shape(&no_cpus);
    CHECK(hak_sysfs_read_layout(root_dir, &layout), "no CPU anywhere: unreadable");
    CHECK(hak_topology_build(&layout) == NULL && layout.fault == HAK_LAYOUT_NO_CPUS,
          "no CPU anywhere: fault %d", (int)layout.fault);

    static const struct shape no_memory = {
        "no usable memory", 4, 4, 1, {NODE(0, "0-1"), NODE(1, "2-3"), END}, "5", "", ""};
    write_shape(&no_memory);
    CHECK(hak_sysfs_read_layout(root_dir, &layout), "no usable memory: unreadable");
    CHECK(hak_topology_build(&layout) == NULL && layout.fault == HAK_LAYOUT_NO_MEMORY,
          "no usable memory: fault %d", (int)layout.fault);

    /* A CPU list longer than the reader's buffer is refused, not cut. */
    static const struct shape one = {"long list", 4,  4, 1, {NODE(0, "0-1"), NODE(1, "2-3"), END},
                                     NULL,        "", ""};
    write_shape(&one);
    char long_list[12000];
    size_t len = 0;
    for (unsigned cpu = 0; cpu < 4000; cpu += 2)
        len +=
            (size_t)snprintf(long_list + len, sizeof(long_list) - len, "%s%u", cpu ? "," : "", cpu);
    snprintf(long_list + len, sizeof(long_list) - len, "\n");
    write_file("/sys/devices/system/node/node0/cpulist", long_list);
    CHECK(hak_sysfs_read_layout(root_dir, &layout), "long list: unreadable");
    CHECK(hak_topology_build(&layout) == NULL && layout.fault == HAK_LAYOUT_LIST_TOO_LONG,
          "a cut CPU list: fault %d", (int)layout.fault);

    /* CPUs past HAK_LAYOUT_CPUS keep index 0; the others are placed. */
    write_shape(&one);
    write_file("/sys/devices/system/node/node1/cpulist", "2-3,9000-9001\n");
    struct hak_numa_map *map = sysfs_map();
    check_map("CPUs past 8192", "sysfs", map, "0 1", "0 0 1 1");
    if (map)
        hak_topology_map_free(map);

    /* More nodes than a layout holds. */
    write_shape(&one);
    char online[32];
    snprintf(online, sizeof(online), "0-%d\n", HAK_LAYOUT_NODES);
    write_file("/sys/devices/system/node/online", online);
    CHECK(hak_sysfs_read_layout(root_dir, &layout), "too many nodes: unreadable");
    CHECK(hak_topology_build(&layout) == NULL && layout.fault == HAK_LAYOUT_TOO_MANY_NODES,
          "%d nodes: fault %d", HAK_LAYOUT_NODES + 1, (int)layout.fault);

    char missing[600];
    snprintf(missing, sizeof(missing), "%s/nothing", root_dir);
    CHECK(!hak_sysfs_read_layout(missing, &layout), "a tree without sysfs was read");
}

int main(void)
{
    if (!mkdtemp(root_dir))
        hard_error("mkdtemp failed");
#if HAKMEM_HAVE_NUMA
    const char *why;
    have_hwloc = hak_hwloc_open(&hw, &why);
    if (!have_hwloc)
        printf("hwloc: %s; the shapes are checked through sysfs only\n", why);
#endif
    size_t count = sizeof(shapes) / sizeof(shapes[0]);
    for (size_t i = 0; i < count; i++)
        check_shape(&shapes[i]);
    printf("%zu shapes: sysfs %.3f ms, hwloc %.3f ms per shape\n", count, sysfs_ms / count,
           hwloc_ms / count);
    test_refused();
    char command[128];
    snprintf(command, sizeof(command), "rm -rf %s", root_dir);
    if (system(command))
        hard_error("cannot remove %s", root_dir);
    return test_result("test_topology_shapes");
}

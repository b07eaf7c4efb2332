/* The topology layer (src/numa): the kernel-list parser, the CPU the thread
 * runs on, the node map built from hwloc synthetic topologies, and the real
 * machine, checked against sysfs.  The numa sources are compiled into this
 * program, as their symbols are hidden in the library.
 *
 * The program's own malloc re-enters the topology layer the way hakmem's
 * slow path does, so discovery on a multi-node machine runs with hwloc's
 * allocations calling back into it. */
#include "config.h"

#include <dlfcn.h>
#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/syscall.h>

#include "harness.h"
#include "numa/cpu.h"
#include "numa/node.h"
#include "numa/sysfs.h"
#include "options.h"
#include "print.h"
#include "stats.h"

struct hak_options hak_options = {.numa = HAK_NUMA_AUTO};

/* What the library gets from init.c, which is not compiled in. */
void hak_fatal(const char *what, const void *addr)
{
    hard_error("hak_fatal: %s %p", what, addr);
    abort();
}
static bool note_starts(const char *text)
{
    const struct hak_printer *note = hak_stats_topology_note();
    return note && note->len >= strlen(text) && !memcmp(note->buf, text, strlen(text));
}

extern void *__libc_malloc(size_t size);

/* Set while this thread is inside hak_numa_discover: allocations then come
 * from hwloc or the dynamic loader, nested in discovery. */
static __thread bool inside_discovery;
static atomic_int nested_allocations;
static atomic_int nested_saw_one_node;
static _Atomic uint64_t longest_discovery_ns;

static void discover(void)
{
    bool outer = !inside_discovery;
    inside_discovery = true;
    double start = seconds_now();
    hak_numa_discover();
    uint64_t took = (uint64_t)((seconds_now() - start) * 1e9);
    inside_discovery = !outer;
    uint64_t longest = atomic_load(&longest_discovery_ns);
    while (outer && took > longest &&
           !atomic_compare_exchange_weak(&longest_discovery_ns, &longest, took))
        ;
}

void *malloc(size_t size)
{
    if (inside_discovery) {
        atomic_fetch_add(&nested_allocations, 1);
        if (hak_numa_node_count() == 1 && hak_numa_thread_node() == 0)
            atomic_fetch_add(&nested_saw_one_node, 1);
    }
    discover();
    return __libc_malloc(size);
}

static void test_list_count(void)
{
    static const struct {
        const char *text;
        unsigned count;
    } cases[] = {
        {"0\n", 1}, {"0-1\n", 2}, {"0,2\n", 2}, {"0-3,8,10-11\n", 7}, {"", 0},        {"\n", 0},
        {"5", 1},   {"0-1,", 2},  {"0-", 0},    {"12-15\n", 4},       {"0,1,2,3", 4}, {"3-1", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned got = hak_numa_list_count(cases[i].text, strlen(cases[i].text));
        CHECK(got == cases[i].count, "list \"%s\": %u members, expected %u", cases[i].text, got,
              cases[i].count);
    }
    /* The length bounds the parse: the text need not be terminated. */
    CHECK(hak_numa_list_count("0-3", 1) == 1, "list cut after its first character");
}

static void pin(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one))
        hard_error("cannot pin to CPU %d", cpu);
}

/* Every CPU the process may run on, read back after pinning the thread. */
static void test_current_cpu(void)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed))
        hard_error("sched_getaffinity failed");
    printf("rseq %s\n", &__rseq_size && __rseq_size ? "registered: cpu_id read from it"
                                                    : "not registered: getcpu");
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        pin(cpu);
        unsigned got = hak_numa_current_cpu();
        CHECK(got == (unsigned)cpu, "pinned to CPU %d, current_cpu says %u", cpu, got);
    }
    if (sched_setaffinity(0, sizeof(allowed), &allowed))
        hard_error("cannot restore the affinity");
}

#if HAKMEM_HAVE_NUMA

#include "numa/hwloc_api.h"
#include "numa/topology.h"
#include "numa/topology_hwloc.h"

/* The topology note, printed by the checks below. */
static int note_length(void)
{
    const struct hak_printer *note = hak_stats_topology_note();
    return note ? (int)note->len : 0;
}

static const char *note_text(void)
{
    const struct hak_printer *note = hak_stats_topology_note();
    return note ? note->buf : "";
}

/* Only the tests need these; they come from the same library. */
#define TEST_HWLOC_FUNCTIONS(X)                                                                    \
    X(hwloc_topology_set_synthetic)                                                                \
    X(hwloc_get_type_depth)                                                                        \
    X(hwloc_bitmap_alloc)                                                                          \
    X(hwloc_bitmap_set)                                                                            \
    X(hwloc_distances_add_create)                                                                  \
    X(hwloc_distances_add_values)                                                                  \
    X(hwloc_distances_add_commit)

static struct hak_hwloc hw;
static struct {
#define TEST_HWLOC_POINTER(name) __typeof__(&name) name;
    TEST_HWLOC_FUNCTIONS(TEST_HWLOC_POINTER)
#undef TEST_HWLOC_POINTER
} extra;

static bool hwloc_mapped(void)
{
    void *handle = dlopen(HAK_HWLOC_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (handle)
        dlclose(handle);
    return handle != NULL;
}

static void open_hwloc(void)
{
    double start = seconds_now();
    const char *why;
    if (!hak_hwloc_open(&hw, &why))
        hard_error("cannot load %s: %s", HAK_HWLOC_SONAME, why);
    printf("dlopen of hwloc: %.3f ms\n", (seconds_now() - start) * 1e3);
    void *library = dlopen(HAK_HWLOC_SONAME, RTLD_NOW | RTLD_NOLOAD);
#define TEST_HWLOC_LOOKUP(name)                                                                    \
    extra.name = (__typeof__(&name))dlsym(library, #name);                                         \
    if (!extra.name)                                                                               \
        hard_error("%s is missing from %s", #name, HAK_HWLOC_SONAME);
    TEST_HWLOC_FUNCTIONS(TEST_HWLOC_LOOKUP)
#undef TEST_HWLOC_LOOKUP
}

static hwloc_topology_t synthetic(const char *description)
{
    hwloc_topology_t topology;
    if (hw.hwloc_topology_init(&topology) ||
        extra.hwloc_topology_set_synthetic(topology, description) ||
        hw.hwloc_topology_load(topology))
        hard_error("cannot load synthetic topology \"%s\"", description);
    return topology;
}

static struct hak_numa_layout layout;

/* usable: OS node ids, ending with -1; NULL for the topology's allowed set. */
static struct hak_numa_map *build(hwloc_topology_t topology, const int *usable)
{
    hwloc_bitmap_t set;
    if (usable) {
        set = extra.hwloc_bitmap_alloc();
        for (; *usable >= 0; usable++)
            extra.hwloc_bitmap_set(set, (unsigned)*usable);
    } else {
        set = hw.hwloc_bitmap_dup(hw.hwloc_topology_get_allowed_nodeset(topology));
    }
    struct hak_numa_map *map =
        hak_hwloc_read_layout(&hw, topology, set, &layout) ? hak_topology_build(&layout) : NULL;
    hw.hwloc_bitmap_free(set);
    return map;
}

/* os_nodes: the OS id of each index, ending with -1.  cpu_nodes: one digit
 * per CPU, its index. */
static void check_map(const char *name, const struct hak_numa_map *map, const int *os_nodes,
                      const char *cpu_nodes)
{
    if (!map) {
        CHECK(false, "%s: no map", name);
        return;
    }
    unsigned count = 0;
    for (; os_nodes[count] >= 0; count++)
        if (count < map->node_count)
            CHECK(map->os_node[count] == os_nodes[count], "%s: index %u is OS node %u, expected %d",
                  name, count, map->os_node[count], os_nodes[count]);
    CHECK(map->node_count == count, "%s: %u nodes, expected %u", name, map->node_count, count);
    CHECK(map->cpu_count == strlen(cpu_nodes), "%s: %u CPUs, expected %zu", name, map->cpu_count,
          strlen(cpu_nodes));
    for (unsigned cpu = 0; cpu < map->cpu_count && cpu_nodes[cpu]; cpu++)
        CHECK(map->cpu_node[cpu] == (unsigned)(cpu_nodes[cpu] - '0'),
              "%s: CPU %u on index %u, expected %c", name, cpu, map->cpu_node[cpu], cpu_nodes[cpu]);
}

static void check_synthetic(const char *description, const int *usable, const int *os_nodes,
                            const char *cpu_nodes)
{
    hwloc_topology_t topology = synthetic(description);
    struct hak_numa_map *map = build(topology, usable);
    check_map(description, map, os_nodes, cpu_nodes);
    if (map)
        hak_topology_map_free(map);
    hw.hwloc_topology_destroy(topology);
}

#define NODES(...) ((const int[]){__VA_ARGS__, -1})
#define ALL NULL

static void test_synthetic(void)
{
    check_synthetic("pack:2 numa:1 core:2 pu:2", ALL, NODES(0, 1), "00001111");
    check_synthetic("pack:4 numa:1 pu:4", ALL, NODES(0, 1, 2, 3), "0000111122223333");
    /* Sparse node ids, and CPUs numbered across the packages. */
    check_synthetic("pack:2 numa:1(indexes=0,2) pu:2", ALL, NODES(0, 2), "0011");
    check_synthetic("pack:2 numa:1 core:2 pu:2(indexes=0,4,1,5,2,6,3,7)", ALL, NODES(0, 1),
                    "00110011");
    /* A memory node without CPUs (attached to the machine, cpuset of all):
     * it gets an index, no CPU maps to it. */
    check_synthetic("[numa(memory=1GB)] pack:2 [numa(memory=1GB)] pu:2", ALL, NODES(0, 1, 2),
                    "0011");
    /* Nodes with CPUs but no memory: their CPUs go to the memory node. */
    check_synthetic("[numa(memory=1GB)] pack:2 [numa(memory=0)] pu:2", ALL, NODES(2), "0000");
    /* No size known anywhere: every node counts as having memory. */
    check_synthetic("pack:2 [numa] pu:2", ALL, NODES(0, 1), "0011");
    /* Two memory nodes per package share its CPUs: the lower id is home. */
    check_synthetic("pack:2 [numa(memory=1GB)] [numa(memory=1GB)] pu:2", ALL, NODES(0, 1, 2, 3),
                    "0022");
    /* numactl --membind=0,3 (without distances): CPUs of node 2, unusable,
     * go to the usable node in their package, 3, rather than to index 0. */
    check_synthetic("pack:2 [numa(memory=1GB)] [numa(memory=1GB)] pu:2", NODES(0, 3), NODES(0, 3),
                    "0011");
    /* Node ids beyond HAK_MAX_NODES cannot be bound with hakmem's masks. */
    check_synthetic("numa:2(indexes=0,70) pu:2", ALL, NODES(0), "0000");
    check_synthetic("pack:2 numa:1 pu:2", NODES(0), NODES(0), "0000");

    hwloc_topology_t topology = synthetic("pack:2 numa:1 pu:2");
    CHECK(build(topology, NODES(5)) == NULL, "a map without any usable node");
    hw.hwloc_topology_destroy(topology);
}

/* Unusable nodes 1 and 3 send their CPUs to the usable node the latency
 * matrix puts nearest: 1 to 2, 3 to 0, against the order of the tree. */
static void test_latency(void)
{
    hwloc_topology_t topology = synthetic("pack:4 numa:1 pu:2");
    hwloc_obj_t nodes[4];
    for (unsigned i = 0; i < 4; i++)
        nodes[i] = hw.hwloc_get_obj_by_depth(topology, HWLOC_TYPE_DEPTH_NUMANODE, i);
    hwloc_uint64_t latency[16] = {
        10, 20, 30, 12, /* */
        20, 10, 12, 30, /* */
        30, 12, 10, 20, /* */
        12, 30, 20, 10,
    };
    hwloc_distances_add_handle_t handle = extra.hwloc_distances_add_create(
        topology, "test", HWLOC_DISTANCES_KIND_FROM_USER | HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0);
    if (!handle || extra.hwloc_distances_add_values(topology, handle, 4, nodes, latency, 0) ||
        extra.hwloc_distances_add_commit(topology, handle, 0))
        hard_error("cannot add a latency matrix");
    struct hak_numa_map *map = build(topology, NODES(0, 2));
    check_map("latency matrix, nodes 0 and 2 usable", map, NODES(0, 2), "00111100");
    if (map)
        hak_topology_map_free(map);
    hw.hwloc_topology_destroy(topology);
}

/* The nodes the kernel lists in file under /sys/devices/system/node. */
static unsigned long long sysfs_nodes(const char *file)
{
    char path[128], text[256];
    snprintf(path, sizeof(path), "/sys/devices/system/node/%s", file);
    FILE *in = fopen(path, "r");
    if (!in)
        return 1;
    unsigned long long set = 0;
    if (fgets(text, sizeof(text), in)) {
        char *p = text;
        while (*p >= '0' && *p <= '9') {
            unsigned long first = strtoul(p, &p, 10), last = first;
            if (*p == '-')
                last = strtoul(p + 1, &p, 10);
            for (unsigned long n = first; n <= last && n < 64; n++)
                set |= 1ULL << n;
            if (*p == ',')
                p++;
        }
    }
    fclose(in);
    return set;
}

/* How many memory nodes the cpuset has, straight from the kernel; where
 * it will not say, from the status file, and without cpusets the nodes
 * online. */
static int cpuset_node_count(void)
{
    unsigned long mask[4096 / (8 * sizeof(long))];
    int mode;
    if (syscall(SYS_get_mempolicy, &mode, mask, 4096, NULL, MPOL_F_MEMS_ALLOWED) == 0) {
        int count = 0;
        for (size_t w = 0; w < sizeof(mask) / sizeof(mask[0]); w++)
            count += __builtin_popcountl(mask[w]);
        return count;
    }
    FILE *status = fopen("/proc/self/status", "r");
    char line[4096];
    int count = -1;
    while (status && count < 0 && fgets(line, sizeof(line), status)) {
        if (strncmp(line, "Mems_allowed_list:", 18) != 0)
            continue;
        count = 0;
        for (char *p = line + 18; *p; p++) {
            if (*p < '0' || *p > '9')
                continue;
            unsigned long first = strtoul(p, &p, 10), last = first;
            if (*p == '-')
                last = strtoul(p + 1, &p, 10);
            count += (int)(last - first + 1);
            if (!*p)
                break;
        }
    }
    if (status)
        fclose(status);
    return count > 0 ? count : __builtin_popcountll(sysfs_nodes("online"));
}

/* What the process may allocate from, straight from the kernel: nodes with
 * memory, within the cpuset, within a numactl --membind set. */
static unsigned long long usable_nodes(void)
{
    unsigned long long usable = sysfs_nodes("has_memory") & sysfs_nodes("online");
    unsigned long mask[4096 / (8 * sizeof(long))];
    int mode;
    if (syscall(SYS_get_mempolicy, &mode, mask, 4096, NULL, MPOL_F_MEMS_ALLOWED) == 0)
        usable &= mask[0];
    if (syscall(SYS_get_mempolicy, &mode, mask, 4096, NULL, 0) == 0 &&
        (mode & ~MPOL_MODE_FLAGS) == MPOL_BIND)
        usable &= mask[0];
    return usable;
}

static atomic_bool racers_go;

static void *race_to_discover(void *unused)
{
    (void)unused;
    while (!atomic_load(&racers_go))
        sched_yield();
    discover();
    return (void *)(uintptr_t)hak_numa_node_count();
}

/* The real machine, checked against the kernel's own lists. */
static void test_machine(void)
{
    hak_options.numa = HAK_NUMA_OFF;
    hak_numa_init();
    discover();
    CHECK(hak_numa_node_count() == 1, "HAKMEM_NUMA=off: %u nodes", hak_numa_node_count());
    CHECK(note_starts("topology: one node (HAKMEM_NUMA=off)\n"), "HAKMEM_NUMA=off: note \"%.*s\"",
          note_length(), note_text());
    CHECK(!hwloc_mapped(), "HAKMEM_NUMA=off loaded hwloc");

    int online = __builtin_popcountll(sysfs_nodes("online"));
    int in_cpuset = cpuset_node_count();
    unsigned long long expected = usable_nodes();
    int expected_count = __builtin_popcountll(expected);
    printf("machine: %d nodes online, %d in the cpuset, %d usable with memory\n", online, in_cpuset,
           expected_count);
    /* Threads created before discovery is armed, so that they race it. */
    pthread_t racers[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&racers[i], NULL, race_to_discover, NULL))
            hard_error("pthread_create failed");
    hak_options.numa = HAK_NUMA_AUTO;
    hak_numa_init();
    /* The SuperSlab region's parts, laid out before discovery. */
    unsigned bound = hak_numa_node_bound();
    unsigned expected_bound = in_cpuset <= 1              ? 1
                              : in_cpuset < HAK_MAX_NODES ? (unsigned)in_cpuset
                                                          : HAK_MAX_NODES;
    CHECK(bound == expected_bound, "node bound %u with %d nodes in the cpuset", bound, in_cpuset);
    atomic_store(&racers_go, true);
    discover();
    for (int i = 0; i < 4; i++) {
        void *count;
        pthread_join(racers[i], &count);
        CHECK((uintptr_t)count == 1 || (uintptr_t)count == (uintptr_t)expected_count,
              "a racing thread saw %zu nodes", (size_t)(uintptr_t)count);
    }
    printf("discovery: %.3f ms; %d allocations nested in it, %d of them saw one node\n",
           atomic_load(&longest_discovery_ns) / 1e6, atomic_load(&nested_allocations),
           atomic_load(&nested_saw_one_node));
    CHECK(atomic_load(&nested_allocations) == atomic_load(&nested_saw_one_node),
          "an allocation nested in discovery saw more than one node");

    unsigned count = hak_numa_node_count();
    CHECK(count <= bound, "discovery found %u nodes, past the bound of %u", count, bound);
    printf("%.*s", note_length(), note_text());
    if (in_cpuset <= 1) {
        CHECK(note_starts("topology: one node (the process may allocate from one)\n"),
              "one node in the cpuset: the note says otherwise");
        CHECK(count == 1, "one node in the cpuset, %u reported", count);
        CHECK(!hwloc_mapped(), "one node in the cpuset, yet hwloc was loaded");
        CHECK(hak_numa_thread_node() == 0, "thread on node %u", hak_numa_thread_node());
        return;
    }
    CHECK(hwloc_mapped(), "several nodes in the cpuset, hwloc was not loaded");
    CHECK(note_starts("topology: hwloc 2."),
          "several nodes in the cpuset: the note says otherwise");
    CHECK((int)count == (expected_count > 1 ? expected_count : 1), "%u nodes, the kernel says %d",
          count, expected_count);
    if (count <= 1)
        return;
    for (unsigned i = 0; i < count; i++)
        CHECK(expected >> hak_numa_os_node(i) & 1, "index %u is OS node %u, not a usable node", i,
              hak_numa_os_node(i));
    /* Each CPU the process may run on, pinned in turn: a CPU of a usable
     * node gets that node, any other CPU some usable node. */
    unsigned long long online_nodes = sysfs_nodes("online");
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed))
        hard_error("sched_getaffinity failed");
    for (unsigned os = 0; os < 64; os++) {
        if (!(online_nodes >> os & 1))
            continue;
        char file[64];
        snprintf(file, sizeof(file), "node%u/cpulist", os);
        /* sysfs_nodes parses any list; here it is a list of CPUs. */
        unsigned long long cpus = sysfs_nodes(file);
        for (int cpu = 0; cpu < 64 && cpu < CPU_SETSIZE; cpu++) {
            if (!(cpus >> cpu & 1) || !CPU_ISSET(cpu, &allowed))
                continue;
            pin(cpu);
            unsigned node = hak_numa_os_node(hak_numa_thread_node());
            if (expected >> os & 1)
                CHECK(node == os, "CPU %d is on node %u, thread_node says %u", cpu, os, node);
            else
                CHECK(expected >> node & 1, "CPU %d of unusable node %u gets node %u", cpu, os,
                      node);
        }
    }
    if (sched_setaffinity(0, sizeof(allowed), &allowed))
        hard_error("cannot restore the affinity");
}

/* hak_hwloc_load on this machine: only the object types the map needs,
 * and a map that agrees with the kernel's lists. */
static void test_load_here(void)
{
    double start = seconds_now();
    hwloc_topology_t topology = hak_hwloc_load(&hw);
    double loaded = seconds_now();
    if (!topology) {
        CHECK(false, "cannot load this machine's topology");
        return;
    }
    static const hwloc_obj_type_t dropped[] = {HWLOC_OBJ_CORE, HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L3CACHE,
                                               HWLOC_OBJ_PCI_DEVICE};
    for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++) {
        int depth = extra.hwloc_get_type_depth(topology, dropped[i]);
        CHECK(hw.hwloc_get_nbobjs_by_depth(topology, depth) == 0,
              "the topology has objects of type %d", (int)dropped[i]);
    }
    CHECK(extra.hwloc_get_type_depth(topology, HWLOC_OBJ_PACKAGE) >= 0, "packages were dropped");
    struct hak_numa_map *map = NULL;
    if (hak_hwloc_read_layout(&hw, topology, hw.hwloc_topology_get_allowed_nodeset(topology),
                              &layout)) {
        hak_layout_apply_bind_policy(&layout);
        map = hak_topology_build(&layout);
    }
    printf("this machine: load %.3f ms, map %.3f ms\n", (loaded - start) * 1e3,
           (seconds_now() - loaded) * 1e3);
    if (!map) {
        CHECK(false, "no map for this machine");
    } else {
        unsigned long long memory = usable_nodes();
        CHECK(map->node_count == (unsigned)__builtin_popcountll(memory),
              "%u nodes here, the kernel says %d usable", map->node_count,
              __builtin_popcountll(memory));
        long cpus = sysconf(_SC_NPROCESSORS_CONF);
        CHECK(map->cpu_count >= (unsigned)cpus, "%u CPUs in the map, %ld configured",
              map->cpu_count, cpus);
        for (unsigned index = 0; index < map->node_count; index++) {
            char file[64];
            snprintf(file, sizeof(file), "node%u/cpulist", map->os_node[index]);
            unsigned long long node_cpus = sysfs_nodes(file);
            for (unsigned cpu = 0; cpu < 64 && cpu < map->cpu_count; cpu++)
                CHECK(!(node_cpus >> cpu & 1) || map->cpu_node[cpu] == index,
                      "CPU %u of node %u has index %u, expected %u", cpu, map->os_node[index],
                      map->cpu_node[cpu], index);
        }
        hak_topology_map_free(map);
    }
    hw.hwloc_topology_destroy(topology);
}

static void time_synthetic_build(void)
{
    const char *description = "pack:4 numa:2 core:16 pu:2";
    double start = seconds_now();
    hwloc_topology_t topology = synthetic(description);
    double loaded = seconds_now();
    struct hak_numa_map *map = build(topology, ALL);
    double built = seconds_now();
    CHECK(map && map->node_count == 8 && map->cpu_count == 256, "\"%s\": wrong map", description);
    printf("\"%s\": load %.3f ms, map %.3f ms\n", description, (loaded - start) * 1e3,
           (built - loaded) * 1e3);
    if (map)
        hak_topology_map_free(map);
    hw.hwloc_topology_destroy(topology);
}

#endif

int main(void)
{
    test_list_count();
    test_current_cpu();
#if HAKMEM_HAVE_NUMA
    test_machine();
    open_hwloc();
    test_synthetic();
    test_latency();
    test_load_here();
    time_synthetic_build();
#else
    hak_numa_init();
    hak_numa_discover();
    CHECK(note_starts("topology: one node (built without NUMA support)\n"),
          "a build without NUMA: the note says otherwise");
    CHECK(hak_numa_node_count() == 1, "a build without NUMA reports %u nodes",
          hak_numa_node_count());
    CHECK(hak_numa_thread_node() == 0, "a build without NUMA puts the thread on node %u",
          hak_numa_thread_node());
#endif
    return test_result("test_topology");
}

/*
 * What the NUMA tests and bench/numa_locality need to know about the machine
 * without linking libnuma (the guest of tools/numa-vm carries only what a
 * program links): the online nodes, the CPUs of each that the process may
 * run on, pinning a thread to a node, and the node of pages (move_pages).
 */
#ifndef HAKMEM_NUMA_UTIL_H
#define HAKMEM_NUMA_UTIL_H

#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { NUMA_MAX_NODES = 64 };

struct numa_node {
    int id;
    /* The node's CPUs that the process may run on; empty under a cpuset or
     * numactl --cpunodebind that excludes the node. */
    cpu_set_t cpus;
    int cpu_count;
    char cpulist[64];
};

struct numa_machine {
    int node_count;
    struct numa_node nodes[NUMA_MAX_NODES];
    char online[256];
};

/* Pages of a set of blocks, by the node move_pages reports. */
struct numa_census {
    long pages;
    long on_node[NUMA_MAX_NODES];
    long unplaced;
    int first_unplaced_status;
};

static inline bool numa_read_line(const char *path, char *line, size_t size)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return false;
    bool ok = fgets(line, (int)size, file) != NULL;
    fclose(file);
    if (ok)
        line[strcspn(line, "\n")] = '\0';
    return ok;
}

/* Parses a kernel list such as "0-3,8,10-11"; calls mark(n, context) for every member. */
static inline bool numa_parse_list(const char *list, int limit, void (*mark)(int, void *),
                                   void *context)
{
    const char *cursor = list;
    while (*cursor != '\0') {
        char *end;
        long first = strtol(cursor, &end, 10);
        if (end == cursor)
            return false;
        long last = first;
        if (*end == '-') {
            cursor = end + 1;
            last = strtol(cursor, &end, 10);
            if (end == cursor)
                return false;
        }
        if (first < 0 || last < first || last >= limit)
            return false;
        for (long member = first; member <= last; member++)
            mark((int)member, context);
        cursor = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return false;
    }
    return true;
}

static inline void numa_mark_node(int node, void *context)
{
    struct numa_machine *machine = context;
    machine->nodes[machine->node_count++].id = node;
}

static inline void numa_mark_cpu(int cpu, void *context)
{
    CPU_SET(cpu, (cpu_set_t *)context);
}

/* Fills machine from sysfs; prints why and returns false when it cannot. */
static inline bool numa_discover(struct numa_machine *machine)
{
    memset(machine, 0, sizeof *machine);
    if (!numa_read_line("/sys/devices/system/node/online", machine->online,
                        sizeof machine->online) ||
        !numa_parse_list(machine->online, NUMA_MAX_NODES, numa_mark_node, machine)) {
        fprintf(stderr, "cannot read the online nodes\n");
        return false;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, "sched_getaffinity: %s\n", strerror(errno));
        return false;
    }
    for (int i = 0; i < machine->node_count; i++) {
        struct numa_node *node = &machine->nodes[i];
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node->id);
        CPU_ZERO(&node->cpus);
        if (!numa_read_line(path, node->cpulist, sizeof node->cpulist) ||
            !numa_parse_list(node->cpulist, CPU_SETSIZE, numa_mark_cpu, &node->cpus)) {
            fprintf(stderr, "cannot read or parse %s\n", path);
            return false;
        }
        CPU_AND(&node->cpus, &node->cpus, &allowed);
        node->cpu_count = CPU_COUNT(&node->cpus);
    }
    return true;
}

static inline const struct numa_node *numa_find_node(const struct numa_machine *machine, int id)
{
    for (int i = 0; i < machine->node_count; i++)
        if (machine->nodes[i].id == id)
            return &machine->nodes[i];
    return NULL;
}

/* The node the calling thread runs on now, or -1. */
static inline int numa_current_node(void)
{
    unsigned cpu, node;
    return getcpu(&cpu, &node) == 0 ? (int)node : -1;
}

/* Moves the calling thread onto the node's CPUs and checks that it got there. */
static inline bool numa_pin(const struct numa_node *node)
{
    if (node->cpu_count == 0) {
        fprintf(stderr, "node %d has no CPU this process may use\n", node->id);
        return false;
    }
    if (sched_setaffinity(0, sizeof node->cpus, &node->cpus) != 0) {
        fprintf(stderr, "sched_setaffinity to node %d: %s\n", node->id, strerror(errno));
        return false;
    }
    int running_on = numa_current_node();
    if (running_on != node->id) {
        fprintf(stderr, "pinned to node %d, running on node %d\n", node->id, running_on);
        return false;
    }
    return true;
}

static inline int numa_compare_addresses(const void *left, const void *right)
{
    uintptr_t a = (uintptr_t) * (void *const *)left, b = (uintptr_t) * (void *const *)right;
    return a < b ? -1 : a > b;
}

/* Adds to census the pages that the blocks span, each page once; NULL blocks
 * are skipped.  Returns false (errno set) when move_pages or memory fails.
 * Its scratch memory is mapped, not allocated, to leave the malloc under
 * test alone. */
static inline bool numa_count_pages(struct numa_census *census, void *const *blocks,
                                    const size_t *sizes, size_t count)
{
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    size_t capacity = 0;
    for (size_t i = 0; i < count; i++)
        if (blocks[i] != NULL)
            capacity += sizes[i] / page_size + 2;
    size_t scratch_bytes = (capacity + 1) * (sizeof(void *) + sizeof(int));
    void *scratch =
        mmap(NULL, scratch_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (scratch == MAP_FAILED)
        return false;
    void **pages = scratch;
    int *status = (int *)(pages + capacity + 1);
    size_t page_count = 0;
    for (size_t i = 0; i < count; i++) {
        if (blocks[i] == NULL)
            continue;
        uintptr_t start = (uintptr_t)blocks[i], end = start + sizes[i];
        for (uintptr_t page = start & ~(page_size - 1); page < end; page += page_size)
            pages[page_count++] = (void *)page;
    }
    qsort(pages, page_count, sizeof pages[0], numa_compare_addresses);
    size_t unique = 0;
    for (size_t i = 0; i < page_count; i++)
        if (unique == 0 || pages[unique - 1] != pages[i])
            pages[unique++] = pages[i];
    bool ok = unique == 0 || syscall(SYS_move_pages, 0, unique, pages, NULL, status, 0) == 0;
    for (size_t i = 0; ok && i < unique; i++) {
        if (status[i] >= 0 && status[i] < NUMA_MAX_NODES) {
            census->on_node[status[i]]++;
        } else if (census->unplaced++ == 0) {
            census->first_unplaced_status = status[i];
        }
    }
    if (ok)
        census->pages += (long)unique;
    int saved_errno = errno;
    munmap(scratch, scratch_bytes);
    errno = saved_errno;
    return ok;
}

static inline double numa_local_percent(const struct numa_census *census, int node)
{
    return census->pages == 0 ? 100.0
                              : 100.0 * (double)census->on_node[node] / (double)census->pages;
}

#endif

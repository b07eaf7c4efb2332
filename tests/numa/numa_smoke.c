/*
 * Runs one thread pinned to the CPUs of each NUMA node the process may run
 * on; each allocates and touches blocks of every kind with malloc, then asks
 * the kernel (move_pages) which node holds their pages.  Prints a table of where the
 * pages landed and fails when a thread could not run on its node, a page is
 * not placed on an online node, or the placement misses what the options
 * ask for: a share of pages on the allocating thread's node (--min-local),
 * or every page on one node (--expect-node, as under numactl --membind).
 *
 * It links nothing but the C library, so the malloc it measures is glibc's or
 * whatever LD_PRELOAD puts first, and a minimal guest (tools/numa-vm) can run
 * it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "numa_util.h"

enum { MAX_NODES = NUMA_MAX_NODES, MAX_BLOCKS_PER_KIND = 256 };

/* One size of every kind of block hakmem has: the eight small classes, Mid
 * (up to 32 KiB), L25 (up to 1 MiB) and large.  Small blocks come by the
 * hundred so that they fill whole pages. */
static const struct {
    size_t size;
    int count;
} block_kinds[] = {
    {8, 256},      {16, 256},     {32, 256},      {64, 256},     {128, 128},
    {256, 64},     {512, 32},     {1024, 16},     {2 << 10, 16}, {16 << 10, 16},
    {32 << 10, 8}, {64 << 10, 8}, {256 << 10, 8}, {1 << 20, 4},  {4 << 20, 4},
};

enum { KIND_COUNT = sizeof block_kinds / sizeof block_kinds[0] };

struct kind_placement {
    long pages;
    long pages_on_node[MAX_NODES];
    long pages_unplaced;
    int first_unplaced_status;
};

struct worker {
    int node;
    cpu_set_t cpus;
    char cpulist[64];
    unsigned ran_on_node;
    char error[160];
    struct kind_placement kinds[KIND_COUNT];
};

static bool node_online[MAX_NODES];
static int online_nodes[MAX_NODES];
static int online_node_count;
static long page_size;
static pthread_barrier_t all_allocated;

static void mark_node(int node, void *context)
{
    (void)context;
    node_online[node] = true;
    online_nodes[online_node_count++] = node;
}

static void mark_cpu(int cpu, void *context)
{
    CPU_SET(cpu, (cpu_set_t *)context);
}

static int compare_addresses(const void *left, const void *right)
{
    uintptr_t a = (uintptr_t) * (void *const *)left, b = (uintptr_t) * (void *const *)right;
    return a < b ? -1 : a > b;
}

/* Lists, once each, the pages spanned by the blocks; returns how many. */
static size_t collect_pages(char **blocks, int count, size_t size, void **pages)
{
    size_t page_count = 0;
    for (int i = 0; i < count; i++) {
        uintptr_t first = (uintptr_t)blocks[i] & ~(uintptr_t)(page_size - 1);
        for (uintptr_t page = first; page < (uintptr_t)blocks[i] + size; page += page_size)
            pages[page_count++] = (void *)page;
    }
    qsort(pages, page_count, sizeof pages[0], compare_addresses);
    size_t unique = 0;
    for (size_t i = 0; i < page_count; i++)
        if (unique == 0 || pages[unique - 1] != pages[i])
            pages[unique++] = pages[i];
    return unique;
}

static bool locate_pages(struct worker *worker, int kind, char **blocks)
{
    size_t size = block_kinds[kind].size;
    int count = block_kinds[kind].count;
    size_t max_pages = (size_t)count * (size / page_size + 2);
    void **pages = calloc(max_pages, sizeof *pages);
    int *status = calloc(max_pages, sizeof *status);
    if (pages == NULL || status == NULL) {
        snprintf(worker->error, sizeof worker->error, "out of memory for the page list");
        free(pages);
        free(status);
        return false;
    }
    size_t page_count = collect_pages(blocks, count, size, pages);
    bool ok = syscall(SYS_move_pages, 0, page_count, pages, NULL, status, 0) == 0;
    if (!ok) {
        snprintf(worker->error, sizeof worker->error, "move_pages: %s", strerror(errno));
    } else {
        struct kind_placement *placement = &worker->kinds[kind];
        placement->pages = (long)page_count;
        for (size_t i = 0; i < page_count; i++) {
            if (status[i] >= 0 && status[i] < MAX_NODES && node_online[status[i]]) {
                placement->pages_on_node[status[i]]++;
            } else {
                if (placement->pages_unplaced++ == 0)
                    placement->first_unplaced_status = status[i];
            }
        }
    }
    free(pages);
    free(status);
    return ok;
}

static bool allocate_and_locate(struct worker *worker, int kind, char **blocks)
{
    size_t size = block_kinds[kind].size;
    int count = block_kinds[kind].count;
    int allocated = 0;
    bool ok = true;
    for (; allocated < count; allocated++) {
        blocks[allocated] = malloc(size);
        if (blocks[allocated] == NULL) {
            snprintf(worker->error, sizeof worker->error, "malloc(%zu) failed", size);
            ok = false;
            break;
        }
        /* First touch happens here, on this thread's node. */
        memset(blocks[allocated], 0xa5, size);
    }
    /* All threads hold their blocks at once, so that no allocator can hand
     * one thread's freed memory to another. */
    pthread_barrier_wait(&all_allocated);
    if (ok)
        ok = locate_pages(worker, kind, blocks);
    for (int i = 0; i < allocated; i++)
        free(blocks[i]);
    return ok;
}

static void *run_worker(void *argument)
{
    struct worker *worker = argument;
    char *blocks[MAX_BLOCKS_PER_KIND];
    bool pinned = sched_setaffinity(0, sizeof worker->cpus, &worker->cpus) == 0;
    unsigned cpu;
    if (!pinned)
        snprintf(worker->error, sizeof worker->error, "sched_setaffinity: %s", strerror(errno));
    else if (getcpu(&cpu, &worker->ran_on_node) != 0)
        snprintf(worker->error, sizeof worker->error, "getcpu: %s", strerror(errno));
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        if (worker->error[0] != '\0')
            pthread_barrier_wait(&all_allocated);
        else
            allocate_and_locate(worker, kind, blocks);
    }
    return NULL;
}

static int find_workers(struct worker *workers)
{
    /* Under a cpuset or numactl --cpunodebind, threads run only on the
     * nodes the process may use. */
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, "numa_smoke: sched_getaffinity: %s\n", strerror(errno));
        return -1;
    }
    int count = 0;
    for (int i = 0; i < online_node_count; i++) {
        int node = online_nodes[i];
        char path[96];
        struct worker *worker = &workers[count];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
        if (!numa_read_line(path, worker->cpulist, sizeof worker->cpulist)) {
            fprintf(stderr, "numa_smoke: cannot read %s\n", path);
            return -1;
        }
        if (worker->cpulist[0] == '\0') {
            printf("node %d has no CPUs; no thread allocates there\n", node);
            continue;
        }
        CPU_ZERO(&worker->cpus);
        if (!numa_parse_list(worker->cpulist, CPU_SETSIZE, mark_cpu, &worker->cpus)) {
            fprintf(stderr, "numa_smoke: cannot parse %s: '%s'\n", path, worker->cpulist);
            return -1;
        }
        CPU_AND(&worker->cpus, &worker->cpus, &allowed);
        if (CPU_COUNT(&worker->cpus) == 0) {
            printf("node %d: this process may not run on its CPUs\n", node);
            continue;
        }
        worker->node = node;
        count++;
    }
    return count;
}

static void print_size(size_t size)
{
    if (size >= (1 << 20))
        printf("%5zu MiB", size >> 20);
    else if (size >= (1 << 10))
        printf("%5zu KiB", size >> 10);
    else
        printf("%5zu B  ", size);
}

/* Prints the table and returns how many rows fall short of min_local_percent. */
static int report(const struct worker *workers, int worker_count, double min_local_percent)
{
    int short_rows = 0;
    printf("%-6s %-8s %-6s %-9s %6s %6s", "thread", "cpus", "ran-on", "block", "blocks", "pages");
    for (int i = 0; i < online_node_count; i++)
        printf("  node%-2d", online_nodes[i]);
    printf("  %6s\n", "local");
    for (int w = 0; w < worker_count; w++) {
        const struct worker *worker = &workers[w];
        for (int kind = 0; kind < KIND_COUNT; kind++) {
            const struct kind_placement *placement = &worker->kinds[kind];
            printf("node%-2d %-8s node%-2u ", worker->node, worker->cpulist, worker->ran_on_node);
            print_size(block_kinds[kind].size);
            printf(" %6d %6ld", block_kinds[kind].count, placement->pages);
            for (int i = 0; i < online_node_count; i++)
                printf("  %6ld", placement->pages_on_node[online_nodes[i]]);
            double local = placement->pages == 0
                               ? 0.0
                               : 100.0 * (double)placement->pages_on_node[worker->node] /
                                     (double)placement->pages;
            bool short_of_target = local < min_local_percent;
            short_rows += short_of_target;
            printf("  %5.1f%%%s\n", local, short_of_target ? "  below target" : "");
        }
    }
    return short_rows;
}

/* move_pages gives a node number or a negated errno for each page. */
static const char *describe_status(int status)
{
    static char description[64];
    if (status < 0)
        return strerror(-status);
    snprintf(description, sizeof description, "node %d, which is not online", status);
    return description;
}

static int check(const struct worker *workers, int worker_count, int expected_node)
{
    int failures = 0;
    for (int w = 0; w < worker_count; w++) {
        const struct worker *worker = &workers[w];
        if (worker->error[0] != '\0') {
            fprintf(stderr, "numa_smoke: thread for node %d: %s\n", worker->node, worker->error);
            failures++;
            continue;
        }
        if ((int)worker->ran_on_node != worker->node) {
            fprintf(stderr, "numa_smoke: thread pinned to node %d ran on node %u\n", worker->node,
                    worker->ran_on_node);
            failures++;
        }
        for (int kind = 0; kind < KIND_COUNT; kind++) {
            const struct kind_placement *placement = &worker->kinds[kind];
            if (placement->pages_unplaced > 0) {
                fprintf(stderr,
                        "numa_smoke: node %d, %zu-byte blocks: %ld of %ld pages on no online"
                        " node (the first: %s)\n",
                        worker->node, block_kinds[kind].size, placement->pages_unplaced,
                        placement->pages, describe_status(placement->first_unplaced_status));
                failures++;
            }
            if (expected_node < 0)
                continue;
            long elsewhere = placement->pages - placement->pages_on_node[expected_node];
            if (elsewhere > 0) {
                fprintf(stderr,
                        "numa_smoke: node %d, %zu-byte blocks: %ld of %ld pages not on"
                        " node %d\n",
                        worker->node, block_kinds[kind].size, elsewhere, placement->pages,
                        expected_node);
                failures++;
            }
        }
    }
    return failures;
}

static void usage(FILE *stream)
{
    fprintf(stream, "Usage: numa_smoke [--min-local PERCENT] [--expect-node NODE]\n"
                    "  --min-local PERCENT  fail unless at least PERCENT of the pages of each\n"
                    "                       block size are on the allocating thread's node\n"
                    "  --expect-node NODE   fail unless every page is on node NODE\n");
}

int main(int argc, char **argv)
{
    double min_local_percent = 0.0;
    long expected_node = -1;
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--min-local") == 0 && i + 1 < argc) {
            min_local_percent = strtod(argv[++i], &end);
            if (*end != '\0' || min_local_percent < 0.0 || min_local_percent > 100.0) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--expect-node") == 0 && i + 1 < argc) {
            expected_node = strtol(argv[++i], &end, 10);
            if (*end != '\0' || expected_node < 0 || expected_node >= MAX_NODES) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }

    page_size = sysconf(_SC_PAGESIZE);
    char online[256];
    if (!numa_read_line("/sys/devices/system/node/online", online, sizeof online) ||
        !numa_parse_list(online, MAX_NODES, mark_node, NULL)) {
        fprintf(stderr, "numa_smoke: cannot read the online nodes\n");
        return 1;
    }
    if (expected_node >= 0 && !node_online[expected_node]) {
        fprintf(stderr, "numa_smoke: node %ld is not online\n", expected_node);
        return 1;
    }
    /* hakmem exports its own API beside the standard names. */
    printf("malloc: %s\n", dlsym(RTLD_DEFAULT, "hak_malloc") != NULL ? "hakmem" : "not hakmem");
    printf("nodes online: %s\n", online);

    static struct worker workers[MAX_NODES];
    int worker_count = find_workers(workers);
    if (worker_count <= 0) {
        fprintf(stderr, "numa_smoke: no node has CPUs this process may run on\n");
        return 1;
    }
    pthread_barrier_init(&all_allocated, NULL, (unsigned)worker_count);
    pthread_t threads[MAX_NODES];
    for (int w = 0; w < worker_count; w++) {
        int error = pthread_create(&threads[w], NULL, run_worker, &workers[w]);
        if (error != 0) {
            fprintf(stderr, "numa_smoke: pthread_create: %s\n", strerror(error));
            return 1;
        }
    }
    for (int w = 0; w < worker_count; w++)
        pthread_join(threads[w], NULL);

    int short_rows = report(workers, worker_count, min_local_percent);
    /* The table before the messages on stderr, when both go to one pipe. */
    fflush(stdout);
    int failures = check(workers, worker_count, (int)expected_node);
    if (short_rows > 0)
        fprintf(stderr, "numa_smoke: %d rows below %.1f%% local\n", short_rows, min_local_percent);
    return failures > 0 || short_rows > 0 ? 1 : 0;
}

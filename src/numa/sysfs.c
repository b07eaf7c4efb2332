#include "sysfs.h"

#include <string.h>

#include "../os.h"
#include "../print.h"
#include "topology.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static unsigned parse_number(const char *text, size_t len, size_t *pos)
{
    unsigned value = 0;
    for (; *pos < len && is_digit(text[*pos]); (*pos)++)
        value = value * 10 + (unsigned)(text[*pos] - '0');
    return value;
}

bool hak_numa_list_next(const char *text, size_t len, size_t *pos, unsigned *first, unsigned *last)
{
    if (*pos < len && text[*pos] == ',')
        (*pos)++;
    if (*pos >= len || !is_digit(text[*pos]))
        return false;
    *first = parse_number(text, len, pos);
    *last = *first;
    if (*pos < len && text[*pos] == '-') {
        (*pos)++;
        if (*pos == len || !is_digit(text[*pos]))
            return false;
        *last = parse_number(text, len, pos);
    }
    return true;
}

unsigned hak_numa_list_count(const char *text, size_t len)
{
    unsigned count = 0, first, last;
    size_t pos = 0;
    while (hak_numa_list_next(text, len, &pos, &first, &last))
        if (last >= first)
            count += last - first + 1;
    return count;
}

/* ROOT + the parts, with "node" and a number where asked; no snprintf, which
 * may allocate. */
/* The texts read while filling a layout: static rather than on the stack,
 * since discovery runs inside malloc on whichever thread gets there first,
 * which may have a small stack; it runs once per process.  A CPU list of
 * thousands of CPUs in ranges fits in text. */
static struct {
    char online[1024], memory[1024], allowed[1024], text[4096];
    struct hak_printer path;
} scratch = {.path = {.fd = -1}};

/* ROOT + file, or, for node >= 0, ROOT + that node's sysfs directory +
 * file; in scratch, until the next call. */
static const char *path_of(const char *root, int node, const char *file)
{
    struct hak_printer *path = &scratch.path;
    path->len = 0;
    hak_print_str(path, root);
    if (node >= 0) {
        hak_print_str(path, "/sys/devices/system/node/node");
        hak_print_u64(path, (unsigned)node, 0);
    }
    hak_print_str(path, file);
    return hak_print_terminated(path);
}

static bool in_list(const char *text, size_t len, unsigned value)
{
    unsigned first, last;
    size_t pos = 0;
    while (hak_numa_list_next(text, len, &pos, &first, &last))
        if (value >= first && value <= last)
            return true;
    return false;
}

/* Reads a file whole: a list cut at the buffer's end would name wrong
 * CPUs or nodes (a cut "1234" reads as 12), so a full buffer is a fault. */
static size_t read_whole(const char *path, char *text, size_t size, struct hak_numa_layout *layout)
{
    size_t len = hak_os_read_file(path, text, size);
    if (len == size) {
        layout->fault = HAK_LAYOUT_LIST_TOO_LONG;
        return 0;
    }
    return len;
}

/* The node list of the cpuset the process runs in, from the status file's
 * "Mems_allowed_list:" line: for a fake tree, and on this machine where the
 * kernel refuses get_mempolicy, which says it directly.  0 when there is no
 * such line (no cpuset support) or the buffer ends inside it (a long
 * Groups: line before it), where a cut list would count too few nodes. */
static size_t allowed_memory(const char *root, char *text, size_t size)
{
    const char *line =
        hak_os_status_field(path_of(root, -1, "/proc/self/status"),
                            "Mems_allowed_list:", scratch.text, sizeof(scratch.text));
    if (!line)
        return 0;
    size_t n = strlen(line);
    if (n > size)
        n = size;
    memcpy(text, line, n);
    return n;
}

unsigned hak_numa_allowed_nodes(void)
{
    unsigned long mask[HAK_OS_NODEMASK_WORDS];
    if (hak_os_allowed_memory_nodes(mask)) {
        unsigned count = 0;
        for (size_t w = 0; w < HAK_OS_NODEMASK_WORDS; w++)
            count += (unsigned)__builtin_popcountl(mask[w]);
        return count ? count : 1;
    }
    /* The lists are long enough for HAK_MAX_NODES nodes of any numbers up
     * to four digits; a longer one is cut, which still counts more than
     * one (the SuperSlab region then has fewer parts than nodes, and the
     * nodes past them free through the page map). */
    char *list = scratch.allowed;
    size_t len = allowed_memory("", list, sizeof(scratch.allowed));
    if (!len) /* no cpuset support, or no whole list: every node online */
        len = hak_os_read_file("/sys/devices/system/node/online", list, sizeof(scratch.allowed));
    unsigned count = hak_numa_list_count(list, len);
    return count ? count : 1;
}

static bool allowed_here(const unsigned long *mask, unsigned node)
{
    enum { LONG_BITS = 8 * sizeof(unsigned long) };
    return node < HAK_OS_MAX_NODES && mask[node / LONG_BITS] >> (node % LONG_BITS) & 1;
}

/* Each node's row of the distance table, in the order of the online list. */
static bool read_distances(const char *root, struct hak_numa_layout *layout)
{
    for (unsigned i = 0; i < layout->node_count; i++) {
        const char *text = scratch.text;
        size_t len = read_whole(path_of(root, layout->node[i].os_id, "/distance"), scratch.text,
                                sizeof(scratch.text), layout);
        size_t pos = 0;
        for (unsigned j = 0; j < layout->node_count; j++) {
            while (pos < len && text[pos] == ' ')
                pos++;
            if (pos == len || !is_digit(text[pos]))
                return false;
            layout->distance[i][j] = parse_number(text, len, &pos);
        }
    }
    return true;
}

bool hak_sysfs_read_layout(const char *root, struct hak_numa_layout *layout)
{
    hak_layout_reset(layout);
    char *online = scratch.online, *memory = scratch.memory, *allowed = scratch.allowed;
    size_t online_len = read_whole(path_of(root, -1, "/sys/devices/system/node/online"), online,
                                   sizeof(scratch.online), layout);
    if (!online_len)
        return layout->fault != HAK_LAYOUT_SOUND; /* a fault says why */
    /* Without has_memory (kernels before 2.6.36), every node counts. */
    size_t memory_len = read_whole(path_of(root, -1, "/sys/devices/system/node/has_memory"), memory,
                                   sizeof(scratch.memory), layout);
    unsigned long here[HAK_OS_NODEMASK_WORDS];
    bool from_kernel = !root[0] && hak_os_allowed_memory_nodes(here);
    size_t allowed_len = from_kernel ? 0 : allowed_memory(root, allowed, sizeof(scratch.allowed));
    unsigned first, last;
    size_t pos = 0;
    while (hak_numa_list_next(online, online_len, &pos, &first, &last)) {
        for (unsigned node = first; node <= last; node++) {
            bool may_use = from_kernel ? allowed_here(here, node)
                                       : !allowed_len || in_list(allowed, allowed_len, node);
            if (!hak_layout_add_node(layout, node, !memory_len || in_list(memory, memory_len, node),
                                     may_use))
                return true; /* the fault says why */
        }
    }
    for (unsigned i = 0; i < layout->node_count; i++) {
        const char *cpus = scratch.text;
        size_t len = read_whole(path_of(root, layout->node[i].os_id, "/cpulist"), scratch.text,
                                sizeof(scratch.text), layout);
        size_t at = 0;
        while (hak_numa_list_next(cpus, len, &at, &first, &last))
            for (unsigned cpu = first; cpu <= last && cpu < HAK_LAYOUT_CPUS; cpu++)
                hak_layout_claim_cpu(layout, cpu, i);
    }
    layout->has_distance = read_distances(root, layout);
    return true;
}

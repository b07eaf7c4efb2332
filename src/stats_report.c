/* The report HAKMEM_STATS asks for, and hak_stats_print: the counters of
 * stats.c with the thread heaps' per-class sums and the page telemetry, as
 * text or JSON.  An entry point, like malloc_api.c: it reads the front end,
 * which the counters, beneath every layer, must not. */
#include "stats_report.h"

#include <string.h>
#include <sys/resource.h>

#include "block/size_class.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "internal.h"
#include "options.h"
#include "os.h"
#include "print.h"
#include "stats.h"

static const char *const counter_names[HAK_STAT_COUNT] = {
    [HAK_STAT_MAPPED_BYTES] = "mapped_bytes",
    [HAK_STAT_UNMAPPED_BYTES] = "unmapped_bytes",
    [HAK_STAT_DECOMMITTED_BYTES] = "decommitted_bytes",
    [HAK_STAT_LENT_BYTES] = "lent_bytes",
    [HAK_STAT_LEND_FAILURES] = "lend_failures",
    [HAK_STAT_SUPERSLABS] = "superslabs_created",
    [HAK_STAT_ARENA_CHUNKS] = "arena_chunks_created",
    [HAK_STAT_LARGE_ALLOCS] = "large_allocs",
    [HAK_STAT_HOT_HITS] = "hot_span_hits",
    [HAK_STAT_HOT_EVICTIONS] = "hot_span_evictions",
    [HAK_STAT_HOT_BUDGET_GROWTHS] = "hot_budget_growths",
    [HAK_STAT_ABANDONED_SLABS] = "slabs_abandoned",
    [HAK_STAT_ADOPTED_SLABS] = "slabs_adopted",
    [HAK_STAT_THREADS] = "thread_heaps",
    [HAK_STAT_HEAPS_INHERITED] = "heaps_inherited",
    [HAK_STAT_LARGE_LIVE] = "large_in_use",
    [HAK_STAT_LARGE_LIVE_MAPPED] = "large_in_use_mapped",
    [HAK_STAT_LARGE_LIVE_USABLE] = "large_in_use_usable",
    [HAK_STAT_NODE_BLOCK_BYTES] = "node_block_bytes",
    [HAK_STAT_LARGE_EXTRA_MAPPINGS] = "large_extra_mappings",
};

/* The first class from cls on that served or sent home a block, with its
 * name; HAK_NUM_CLASSES when none did.  The report leaves the others out. */
static unsigned next_used_class(const struct hak_class_stats totals[HAK_NUM_CLASSES], unsigned cls,
                                char name[4])
{
    while (cls < HAK_NUM_CLASSES && !totals[cls].allocs && !totals[cls].remote_frees)
        cls++;
    if (cls < HAK_NUM_CLASSES)
        hak_class_name(cls, name);
    return cls;
}

static void print_classes(struct hak_printer *out)
{
    struct hak_class_stats totals[HAK_NUM_CLASSES] = {0};
    hak_heap_sum_stats(totals);

    hak_print_str(out,
                  "class      size      allocs  cache_hits     refills     flushes   slabs_in  "
                  "slabs_out remote_frees\n");
    char name[4];
    for (unsigned cls = 0; (cls = next_used_class(totals, cls, name)) < HAK_NUM_CLASSES; cls++) {
        const struct hak_class_stats *s = &totals[cls];
        hak_print_padded(out, name, 5);
        hak_print_u64(out, hak_class_size[cls], 9);
        hak_print_u64(out, s->allocs, 12);
        hak_print_u64(out, s->allocs - s->refills, 12);
        hak_print_u64(out, s->refills, 12);
        hak_print_u64(out, s->flushes, 12);
        hak_print_u64(out, s->slabs_in, 11);
        hak_print_u64(out, s->slabs_out, 11);
        hak_print_u64(out, s->remote_frees, 13);
        hak_print_str(out, "\n");
    }
}

/* Next to the process's minor faults: with 4 KiB pages every first-touched
 * page the program writes costs one fault, a reused one none. */
static void print_pages(struct hak_printer *out)
{
    static const char *const names[HAK_PAGE_BUCKETS - HAK_PAGES_MID] = {"MID", "L25", "SSM",
                                                                        "LARGE"};
    uint64_t first_total = 0, reused_total = 0;
    hak_print_str(out, "pages     first_touched          reused\n");
    for (unsigned bucket = 0; bucket <= HAK_PAGE_BUCKETS; bucket++) {
        uint64_t first, reused;
        char name[4];
        const char *label = name;
        if (bucket == HAK_PAGE_BUCKETS) {
            label = "total";
            first = first_total;
            reused = reused_total;
        } else {
            struct hak_page_counts_now counts = hak_stat_read_pages(bucket);
            first = counts.first;
            reused = counts.reused;
            first_total += first;
            reused_total += reused;
            if (bucket < HAK_PAGES_MID)
                hak_class_name(bucket, name);
            else
                label = names[bucket - HAK_PAGES_MID];
        }
        hak_print_padded(out, label, 6);
        hak_print_u64(out, first, 16);
        hak_print_u64(out, reused, 16);
        hak_print_str(out, "\n");
    }
}

static void print_text(struct hak_printer *out)
{
    hak_print_str(out, "hakmem statistics\n");
    print_classes(out);
    for (unsigned i = 0; i < HAK_STAT_COUNT; i++) {
        hak_print_padded(out, counter_names[i], 22);
        hak_print_u64(out, hak_stat_read(i), 16);
        hak_print_str(out, "\n");
    }
    for (unsigned node = 0; node < HAK_MAX_NODES; node++) {
        uint64_t bytes = atomic_load_explicit(&hak_stat_node_mapped[node], memory_order_relaxed);
        if (bytes) {
            hak_print_str(out, "node ");
            hak_print_u64(out, node, 2);
            hak_print_padded(out, " mapped_bytes", 15);
            hak_print_u64(out, bytes, 16);
            hak_print_str(out, "\n");
        }
    }
    for (unsigned from = 0; from < HAK_MAX_NODES; from++) {
        for (unsigned to = 0; to < HAK_MAX_NODES; to++) {
            uint64_t n =
                atomic_load_explicit(&hak_stat_remote_by_pair[from][to], memory_order_relaxed);
            if (n) {
                hak_print_str(out, "remote frees node ");
                hak_print_u64(out, from, 0);
                hak_print_str(out, " -> node ");
                hak_print_u64(out, to, 0);
                hak_print_u64(out, n, 12);
                hak_print_str(out, "\n");
            }
        }
    }
    print_pages(out);
    const struct hak_printer *topology = hak_stats_topology_note();
    if (topology)
        hak_print_text(out, topology);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    hak_print_padded(out, "process_minor_faults", 22);
    hak_print_u64(out, (uint64_t)usage.ru_minflt, 16);
    hak_print_str(out, "\n");
    hak_print_padded(out, "process_max_rss_kb", 22);
    hak_print_u64(out, (uint64_t)usage.ru_maxrss, 16);
    hak_print_str(out, "\n");
    hak_options_print(out);
}

static void json_key(struct hak_printer *out, const char *key, bool first)
{
    hak_print_str(out, first ? "\"" : ", \"");
    hak_print_str(out, key);
    hak_print_str(out, "\": ");
}

static void json_number(struct hak_printer *out, const char *key, uint64_t value, bool first)
{
    json_key(out, key, first);
    hak_print_u64(out, value, 0);
}

static void json_classes(struct hak_printer *out)
{
    struct hak_class_stats totals[HAK_NUM_CLASSES] = {0};
    hak_heap_sum_stats(totals);
    json_key(out, "classes", false);
    hak_print_str(out, "[");
    bool first = true;
    char name[4];
    for (unsigned cls = 0; (cls = next_used_class(totals, cls, name)) < HAK_NUM_CLASSES; cls++) {
        const struct hak_class_stats *s = &totals[cls];
        hak_print_str(out, first ? "{" : ", {");
        first = false;
        json_key(out, "class", true);
        hak_print_json_string(out, name, strlen(name));
        json_number(out, "size", hak_class_size[cls], false);
        json_number(out, "allocs", s->allocs, false);
        json_number(out, "cache_hits", s->allocs - s->refills, false);
        json_number(out, "refills", s->refills, false);
        json_number(out, "flushes", s->flushes, false);
        json_number(out, "slabs_in", s->slabs_in, false);
        json_number(out, "slabs_out", s->slabs_out, false);
        json_number(out, "remote_frees", s->remote_frees, false);
        hak_print_str(out, "}");
    }
    hak_print_str(out, "]");
}

static void json_nodes(struct hak_printer *out)
{
    json_key(out, "nodes", false);
    hak_print_str(out, "[");
    bool first = true;
    for (unsigned node = 0; node < HAK_MAX_NODES; node++) {
        uint64_t bytes = atomic_load_explicit(&hak_stat_node_mapped[node], memory_order_relaxed);
        if (!bytes)
            continue;
        hak_print_str(out, first ? "{" : ", {");
        first = false;
        json_number(out, "node", node, true);
        json_number(out, "mapped_bytes", bytes, false);
        hak_print_str(out, "}");
    }
    hak_print_str(out, "]");
    json_key(out, "remote_frees", false);
    hak_print_str(out, "[");
    first = true;
    for (unsigned from = 0; from < HAK_MAX_NODES; from++) {
        for (unsigned to = 0; to < HAK_MAX_NODES; to++) {
            uint64_t n =
                atomic_load_explicit(&hak_stat_remote_by_pair[from][to], memory_order_relaxed);
            if (!n)
                continue;
            hak_print_str(out, first ? "{" : ", {");
            first = false;
            json_number(out, "from", from, true);
            json_number(out, "to", to, false);
            json_number(out, "count", n, false);
            hak_print_str(out, "}");
        }
    }
    hak_print_str(out, "]");
}

static void json_pages(struct hak_printer *out)
{
    static const char *const names[HAK_PAGE_BUCKETS - HAK_PAGES_MID] = {"MID", "L25", "SSM",
                                                                        "LARGE"};
    json_key(out, "pages", false);
    hak_print_str(out, "{");
    for (unsigned bucket = 0; bucket < HAK_PAGE_BUCKETS; bucket++) {
        char name[4];
        const char *label = name;
        if (bucket < HAK_PAGES_MID)
            hak_class_name(bucket, name);
        else
            label = names[bucket - HAK_PAGES_MID];
        struct hak_page_counts_now counts = hak_stat_read_pages(bucket);
        json_key(out, label, bucket == 0);
        hak_print_str(out, "{");
        json_number(out, "first_touched", counts.first, true);
        json_number(out, "reused", counts.reused, false);
        hak_print_str(out, "}");
    }
    hak_print_str(out, "}");
}

/* One object per report, on one line, so that a file of several (forked
 * processes writing to one HAKMEM_STATS_FILE) reads as JSON lines. */
static void print_json(struct hak_printer *out)
{
    hak_print_str(out, "{");
    json_number(out, "pid", hak_os_pid(), true);
    json_classes(out);
    json_key(out, "counters", false);
    hak_print_str(out, "{");
    for (unsigned i = 0; i < HAK_STAT_COUNT; i++)
        json_number(out, counter_names[i], hak_stat_read(i), i == 0);
    hak_print_str(out, "}");
    json_nodes(out);
    json_pages(out);
    const struct hak_printer *topology = hak_stats_topology_note();
    json_key(out, "topology", false);
    hak_print_json_string(out, topology ? topology->buf : "", topology ? topology->len : 0);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    json_number(out, "process_minor_faults", (uint64_t)usage.ru_minflt, false);
    json_number(out, "process_max_rss_kb", (uint64_t)usage.ru_maxrss, false);
    json_key(out, "options", false);
    hak_options_print_json(out);
    hak_print_str(out, "}\n");
}

static void print_report(int fd, bool json)
{
    struct hak_printer out = {.fd = fd};
    if (json)
        print_json(&out);
    else
        print_text(&out);
    hak_print_flush(&out);
}

HAK_API void hak_stats_print(int fd)
{
    print_report(fd, false);
}

HAK_API void hak_stats_print_json(int fd)
{
    print_report(fd, true);
}

/* Where the report at exit goes when no file is named.  Programs may close
 * stderr before they exit (GNU coreutils do), so a copy of it is kept from
 * start-up, with the identity of the file behind it: at exit, descriptor 2
 * if it still leads there, else the copy if nothing replaced it. */
static int kept_stderr = -1;
static struct hak_os_file_id stderr_id;

void hak_stats_setup(void)
{
    /* Also with a file named: an error opening it goes to stderr. */
    if (hak_options.stats == HAK_STATS_OFF || !hak_os_file_id(2, &stderr_id))
        return;
    kept_stderr = hak_os_keep_fd(2);
}

static int report_fd(void)
{
    if (hak_os_is_file(2, &stderr_id))
        return 2;
    if (kept_stderr >= 0 && hak_os_is_file(kept_stderr, &stderr_id))
        return kept_stderr;
    return -1;
}

/* HAKMEM_STATS_FILE with each %p replaced by the process id; false when it
 * does not fit. */
static bool report_path(char *path, size_t size)
{
    char pid[24];
    struct hak_printer digits = {.fd = -1};
    hak_print_u64(&digits, hak_os_pid(), 0);
    size_t len = 0;
    for (const char *p = hak_options.stats_file; *p; p++) {
        const char *piece = p;
        size_t n = 1;
        if (p[0] == '%' && p[1] == 'p') {
            memcpy(pid, digits.buf, digits.len);
            piece = pid;
            n = digits.len;
            p++;
        }
        if (len + n >= size)
            return false;
        memcpy(path + len, piece, n);
        len += n;
    }
    path[len] = '\0';
    return true;
}

void hak_stats_report_at_exit(void)
{
    if (hak_options.stats == HAK_STATS_OFF)
        return;
    bool json = hak_options.stats == HAK_STATS_JSON;
    if (!hak_options.stats_file[0]) {
        int fd = report_fd();
        if (fd >= 0)
            print_report(fd, json);
        return;
    }
    static char path[HAK_OPTION_PATH_MAX + 24];
    int fd = report_path(path, sizeof(path)) ? hak_os_open_append(path) : -1;
    if (fd < 0) {
        struct hak_printer out = {.fd = report_fd()};
        if (out.fd < 0)
            return;
        hak_print_str(&out, "hakmem: cannot write the statistics to ");
        hak_print_str(&out, hak_options.stats_file);
        hak_print_str(&out, "\n");
        hak_print_flush(&out);
        return;
    }
    print_report(fd, json);
    hak_os_close(fd);
}

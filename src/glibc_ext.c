/* glibc's extensions to the malloc API (<malloc.h>), answered with hakmem's
 * own figures and actions: a program that tunes or inspects glibc's malloc
 * gets a true answer instead of one about glibc's untouched heap. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

#include "arena/hot_span_box.h"
#include "arena/large.h"
#include "front/thread_heap.h"
#include "hakmem.h"
#include "internal.h"
#include "numa/node.h"
#include "options.h"
#include "print.h"
#include "stats.h"

/* Freed memory a node's backends keep resident for reuse: spans in the
 * HotSpanBox and large mappings; adds their number to count. */
static uint64_t node_retained(unsigned node, uint64_t *count)
{
    return hak_hot_span_retained(node, count) + hak_large_cached(node, count);
}

/* In glibc's terms, with hakmem's figures (README.md, "glibc's malloc
 * extensions"). */
HAK_API struct mallinfo2 mallinfo2(void)
{
    struct hak_heap_usage heaps;
    hak_heap_usage(&heaps);
    uint64_t retained = 0, retained_count = 0;
    for (unsigned node = 0; node < hak_numa_node_count(); node++)
        retained += node_retained(node, &retained_count);
    return (struct mallinfo2){
        .arena = hak_stat_mapped_now(),
        .ordblks = retained_count,
        .smblks = heaps.cached_blocks,
        .hblks = hak_stat_read(HAK_STAT_LARGE_LIVE),
        .hblkhd = hak_stat_read(HAK_STAT_LARGE_LIVE_MAPPED),
        .usmblks = 0,
        .fsmblks = heaps.cached_bytes,
        .uordblks = heaps.in_use_bytes + hak_stat_read(HAK_STAT_LARGE_LIVE_USABLE) +
                    hak_stat_read(HAK_STAT_NODE_BLOCK_BYTES),
        .fordblks = heaps.cached_bytes + retained,
        .keepcost = retained,
    };
}

static int saturate(size_t value)
{
    return value > INT_MAX ? INT_MAX : (int)value;
}

static struct mallinfo narrow_info(void)
{
    struct mallinfo2 info = mallinfo2();
    return (struct mallinfo){
        .arena = saturate(info.arena),
        .ordblks = saturate(info.ordblks),
        .smblks = saturate(info.smblks),
        .hblks = saturate(info.hblks),
        .hblkhd = saturate(info.hblkhd),
        .usmblks = saturate(info.usmblks),
        .fsmblks = saturate(info.fsmblks),
        .uordblks = saturate(info.uordblks),
        .fordblks = saturate(info.fordblks),
        .keepcost = saturate(info.keepcost),
    };
}

HAK_API struct mallinfo mallinfo(void)
{
    return narrow_info();
}

/* pad: glibc leaves that much at the top of its heap; hakmem has no top.
 * Other threads' caches stay: only their owners may touch them. */
HAK_API int malloc_trim(size_t pad)
{
    (void)pad;
    return hak_heap_trim();
}

HAK_API void malloc_stats(void)
{
    hak_stats_print(2);
}

/* glibc returns 1 for parameters it does not know; hakmem 0, so that a
 * program can tell a setting that was taken from one that was not. */
HAK_API int mallopt(int param, int value)
{
    switch (param) {
    case M_TRIM_THRESHOLD:
        /* glibc's bound on the free memory it keeps before trimming:
         * hakmem's is the HotSpanBox budget, per node and shard (a node's
         * large mappings kept get half of it).
         * glibc reads the value as unsigned: -1 is "never trim", a budget
         * without bound. */
        hak_options_set_hot_bytes((size_t)(unsigned long)(long)value);
        return 1;
    case M_MXFAST:
        /* glibc's range, though hakmem has no fastbins to size. */
        return value >= 0 && (size_t)value <= 80 * sizeof(size_t) / 4;
    case M_NLBLKS:
    case M_GRAIN:
    case M_KEEP:
    case M_TOP_PAD:
    case M_MMAP_THRESHOLD:
    case M_MMAP_MAX:
    case M_CHECK_ACTION:
    case M_PERTURB:
    case M_ARENA_TEST:
    case M_ARENA_MAX:
        /* Accepted, as glibc does, but nothing in hakmem answers to them:
         * its size thresholds are fixed and it has one arena per node. */
        return 1;
    default:
        return 0;
    }
}

static void print_attr(struct hak_printer *out, const char *name, uint64_t value)
{
    hak_print_str(out, " ");
    hak_print_str(out, name);
    hak_print_str(out, "=\"");
    hak_print_u64(out, value, 0);
    hak_print_str(out, "\"");
}

/* <TAG type="TYPE" [count="COUNT"] size="SIZE"/>; count only for totals. */
static void print_element(struct hak_printer *out, const char *tag, const char *type,
                          const uint64_t *count, uint64_t size)
{
    hak_print_str(out, "<");
    hak_print_str(out, tag);
    hak_print_str(out, " type=\"");
    hak_print_str(out, type);
    hak_print_str(out, "\"");
    if (count)
        print_attr(out, "count", *count);
    print_attr(out, "size", size);
    hak_print_str(out, "/>\n");
}

/* What a heap and the whole process say of their address space. */
static void print_system(struct hak_printer *out, uint64_t current, uint64_t max, uint64_t aspace)
{
    print_element(out, "system", "current", NULL, current);
    print_element(out, "system", "max", NULL, max);
    print_element(out, "aspace", "total", NULL, aspace);
    print_element(out, "aspace", "mprotect", NULL, aspace);
}

/* The text goes out with fwrite, which may allocate the stream's buffer:
 * that is a malloc from outside hakmem, with no lock of hakmem's held. */
static void emit(struct hak_printer *text, FILE *fp)
{
    fwrite(text->buf, 1, text->len, fp);
    text->len = 0;
}

/* glibc's shape, one <heap> per NUMA node: a node's free memory is what
 * its backends keep resident (<total type="rest">); the threads' caches
 * belong to no node and appear in the process's totals, as fast bins. */
HAK_API int malloc_info(int options, FILE *fp)
{
    if (options != 0) {
        errno = EINVAL;
        return -1;
    }
    struct hak_printer out = {.fd = -1};
    hak_print_str(&out, "<malloc version=\"1\">\n");
    emit(&out, fp);
    uint64_t zero = 0, retained = 0, retained_count = 0;
    for (unsigned node = 0; node < hak_numa_node_count(); node++) {
        uint64_t count = 0;
        uint64_t bytes = node_retained(node, &count);
        uint64_t mapped = atomic_load_explicit(&hak_stat_node_mapped[node], memory_order_relaxed);
        retained += bytes;
        retained_count += count;
        hak_print_str(&out, "<heap nr=\"");
        hak_print_u64(&out, node, 0);
        hak_print_str(&out, "\">\n<sizes>\n</sizes>\n");
        print_element(&out, "total", "fast", &zero, 0);
        print_element(&out, "total", "rest", &count, bytes);
        print_system(&out, mapped,
                     atomic_load_explicit(&hak_stat_node_peak[node], memory_order_relaxed), mapped);
        hak_print_str(&out, "</heap>\n");
        emit(&out, fp);
    }
    struct hak_heap_usage heaps;
    hak_heap_usage(&heaps);
    uint64_t large = hak_stat_read(HAK_STAT_LARGE_LIVE);
    print_element(&out, "total", "fast", &heaps.cached_blocks, heaps.cached_bytes);
    print_element(&out, "total", "rest", &retained_count, retained);
    print_element(&out, "total", "mmap", &large, hak_stat_read(HAK_STAT_LARGE_LIVE_MAPPED));
    print_system(&out, atomic_load_explicit(&hak_stat_nodes_mapped, memory_order_relaxed),
                 atomic_load_explicit(&hak_stat_nodes_peak, memory_order_relaxed),
                 hak_stat_mapped_now());
    hak_print_str(&out, "</malloc>\n");
    emit(&out, fp);
    return 0;
}

/* glibc exports these two under its internal names as well.  Calls, not
 * aliases: <malloc.h> gives mallopt attributes an alias would have to
 * repeat, and mallinfo is deprecated there (a use warns, a definition
 * does not). */
HAK_API struct mallinfo __libc_mallinfo(void)
{
    return narrow_info();
}

HAK_API int __libc_mallopt(int param, int value)
{
    return mallopt(param, value);
}

/* Aligned mappings (os.c): each aligned and writable, and, where the
 * address space below the last one is free, made right below it, in one
 * mmap with no trimming; where that range is taken, elsewhere, still
 * aligned, over nothing mapped before.  Moves of pages, which leave their
 * destination mapped whatever the kernel does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "os.h"
#include "refusing_mremap.h"
#include "unit.h"

#define MIB ((size_t)1 << 20)
#define MAPS 8

static bool aligned_to(const void *ptr, size_t align)
{
    return (uintptr_t)ptr % align == 0;
}

static void check_usable(char *map, size_t size, size_t align, const char *what)
{
    CHECK(map != NULL, "%s: no mapping of %zu bytes", what, size);
    if (!map)
        return;
    CHECK(aligned_to(map, align), "%s: %p not aligned to %zu", what, (void *)map, align);
    map[0] = 1;
    map[size - 1] = 1;
}

/* Chunk-shaped mappings, one after another, come out adjacent, each below
 * the one before (as the kernel's own placement, cut to the alignment,
 * also puts them: test_fills_hole_below tells the two apart). */
static void test_adjacent_below(size_t size, size_t align)
{
    char *maps[MAPS];
    for (int i = 0; i < MAPS; i++)
        maps[i] = hak_os_map_aligned(size, align);
    for (int i = 0; i < MAPS; i++)
        check_usable(maps[i], size, align, "adjacent");
    for (int i = 1; i < MAPS; i++)
        CHECK(maps[i] + size == maps[i - 1],
              "map %d of %zu bytes at %p, not right below map %d at %p", i, size, (void *)maps[i],
              i - 1, (void *)maps[i - 1]);
    for (int i = 0; i < MAPS; i++)
        if (maps[i])
            hak_os_unmap(maps[i], size);
}

/* A hole just one mapping big right below the last: the next mapping fills
 * it, which only a map of its own size there can do (one as much bigger,
 * to be cut to the alignment, does not fit). */
static void test_fills_hole_below(void)
{
    const size_t size = 4 * MIB, align = 4 * MIB, guard_size = 16 * MIB;
    char *first = hak_os_map_aligned(size, align);
    check_usable(first, size, align, "above the hole");
    if (!first)
        return;
    char *hole = first - size;
    char *guard = mmap(hole - guard_size, guard_size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (guard == hole - guard_size) {
        char *second = hak_os_map_aligned(size, align);
        check_usable(second, size, align, "in the hole");
        CHECK(second == hole, "a mapping of %zu bytes at %p, not in the hole at %p", size,
              (void *)second, (void *)hole);
        if (second)
            hak_os_unmap(second, size);
    } else {
        printf("note: the range below %p is taken; no hole to fill\n", (void *)hole);
    }
    if (guard != MAP_FAILED)
        munmap(guard, guard_size);
    hak_os_unmap(first, size);
}

/* A mapping of 2 MiB or more unmapped above the last one made: the next
 * mapping fills its hole rather than going lower still. */
static void test_refills_unmapped_hole(void)
{
    const size_t size = 4 * MIB, align = 4 * MIB;
    char *upper = hak_os_map_aligned(size, align);
    char *lower = hak_os_map_aligned(size, align);
    check_usable(upper, size, align, "upper");
    check_usable(lower, size, align, "lower");
    if (!upper || !lower)
        return;
    hak_os_unmap(upper, size);
    char *again = hak_os_map_aligned(size, align);
    check_usable(again, size, align, "again");
    CHECK(again == upper, "a mapping at %p, not in the hole at %p left above %p", (void *)again,
          (void *)upper, (void *)lower);
    if (again)
        hak_os_unmap(again, size);
    hak_os_unmap(lower, size);
}

/* The range the next mapping would ask for is someone else's: the mapping
 * lands elsewhere, aligned, and that memory keeps what was written in it. */
static void test_hinted_range_taken(void)
{
    const size_t size = 4 * MIB, align = 4 * MIB;
    char *first = hak_os_map_aligned(size, align);
    check_usable(first, size, align, "first");
    if (!first)
        return;
    char *below = first - size;
    char *taken = mmap(below, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (taken == MAP_FAILED || taken != below) {
        /* Something else lies there already: that is the case too. */
        if (taken != MAP_FAILED)
            munmap(taken, size);
        taken = NULL;
    } else {
        memset(taken, 0x5a, size);
    }
    char *second = hak_os_map_aligned(size, align);
    check_usable(second, size, align, "second");
    if (taken && second) {
        CHECK(second + size <= taken || second >= taken + size,
              "the mapping at %p overlaps the program's at %p", (void *)second, (void *)taken);
        CHECK(taken[0] == 0x5a && taken[size - 1] == 0x5a,
              "the program's mapping below lost what it held");
    }
    if (second)
        hak_os_unmap(second, size);
    if (taken)
        munmap(taken, size);
    hak_os_unmap(first, size);
}

/* Page alignment needs no hint; sizes that are not a multiple of the
 * alignment still come out aligned, over distinct ranges. */
static void test_other_shapes(void)
{
    char *page = hak_os_map_aligned(3 * HAK_PAGE_SIZE, HAK_PAGE_SIZE);
    check_usable(page, 3 * HAK_PAGE_SIZE, HAK_PAGE_SIZE, "pages");
    char *odd = hak_os_map_aligned(5 * MIB + HAK_PAGE_SIZE, 2 * MIB);
    check_usable(odd, 5 * MIB + HAK_PAGE_SIZE, 2 * MIB, "odd size");
    char *next = hak_os_map_aligned(2 * MIB, 2 * MIB);
    check_usable(next, 2 * MIB, 2 * MIB, "after the odd size");
    if (odd && next)
        CHECK(next + 2 * MIB <= odd || next >= odd + 5 * MIB + HAK_PAGE_SIZE,
              "mappings at %p and %p overlap", (void *)odd, (void *)next);
    if (page)
        hak_os_unmap(page, 3 * HAK_PAGE_SIZE);
    if (odd)
        hak_os_unmap(odd, 5 * MIB + HAK_PAGE_SIZE);
    if (next)
        hak_os_unmap(next, 2 * MIB);
}

/* The refusal of a kernel before 6.17 (refusing_mremap.h), for every move. */
static bool refuse_every_move(const void *source, size_t size)
{
    (void)source;
    (void)size;
    return true;
}

enum move_source {
    SOURCE_UNMAPPED,
    SOURCE_TWO_MAPPINGS,
};

/* Made after the destination, so that it cannot lie where that does. */
static char *make_source(enum move_source kind, size_t size)
{
    char *src = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED)
        hard_error("cannot map a source");
    if (kind == SOURCE_UNMAPPED) {
        if (munmap(src, size) != 0)
            hard_error("cannot make an unmapped range");
        return src;
    }
    /* Another flag on its second half: two kernel mappings. */
    if (madvise(src + size / 2, size / 2, MADV_DONTFORK) != 0)
        hard_error("cannot make a range of two kernel mappings");
    memset(src, 5, size);
    return src;
}

/* A move leaves its destination mapped and writable, never a hole in the
 * block it belongs to: moved, refused with the destination untouched (a
 * source not mapped at all), or refused after the kernel unmapped it,
 * which the move says, so that the caller binds the fresh pages again. */
static void check_move(enum move_source kind, bool may_move, const char *what)
{
    size_t size = 4 * HAK_PAGE_SIZE;
    char *dst = hak_os_map_aligned(size, HAK_PAGE_SIZE);
    if (!dst)
        hard_error("%s: cannot map a destination", what);
    memset(dst, 7, size);
    char *src = make_source(kind, size);
    bool fresh;
    bool moved = hak_os_move(src, size, dst, &fresh);
    CHECK(may_move || !moved, "%s: the move succeeded", what);
    unsigned char resident[8];
    CHECK(mincore(dst, size, resident) == 0, "%s: the move left its destination unmapped", what);
    printf("%s: %s\n", what,
           moved   ? "moved"
           : fresh ? "refused, the destination mapped again"
                   : "refused, the destination as it was");
    if (moved)
        CHECK(dst[0] == 5, "%s: moved, but not the source's pages", what);
    else
        CHECK(fresh == (dst[0] != 7), "%s: refused, the destination %s, but the move said %s", what,
              dst[0] != 7 ? "lost its pages" : "kept its pages",
              fresh ? "it was mapped again" : "it was as it was");
    CHECK(!mremap_refused || fresh, "%s: the destination was not mapped again", what);
    dst[0] = 1;
    dst[size - 1] = 1;
    hak_os_unmap(dst, size);
    munmap(src, size); /* moved or not */
}

static void test_moves_keep_destination(void)
{
    check_move(SOURCE_UNMAPPED, false, "a move from an unmapped range");
    check_move(SOURCE_TWO_MAPPINGS, true, "a move from two kernel mappings");
    mremap_refused = refuse_every_move;
    check_move(SOURCE_TWO_MAPPINGS, false, "a move an older kernel refuses");
    mremap_refused = NULL;
}

/* Whether every page of [start, start + size) is mapped. */
static bool all_mapped(const char *start, size_t size)
{
    static unsigned char resident[4 * MIB / 4096];
    return mincore((void *)start, size, resident) == 0;
}

/* Whether no page of [start, start + size) is mapped. */
static bool none_mapped(const char *start, size_t size)
{
    unsigned char resident;
    for (size_t offset = 0; offset < size; offset += 4096)
        if (mincore((void *)(start + offset), 4096, &resident) == 0 || errno != ENOMEM)
            return false;
    return true;
}

/* The reservation in parts (the SuperSlab region's, a part per node), in a
 * process that has none (HAKMEM_HARDEN=0: no region): memory is made in
 * each part's head (its page table) from the head's start, and in the rest
 * from the head's end, never across the two nor across two parts; under a
 * limit set below the address space the process has, what of each head
 * and each rest was never made memory goes back, memory taken back by
 * hak_os_unmap_reserved at the end of what was made too, the memory made
 * stays, and nothing is made there again, even once the limit is lifted.
 * hakmem's setrlimit gives them back as the limit comes into force
 * (rlimit.c). */
static void test_reservation_parts(void)
{
    const size_t head = 2 * MIB, part = 12 * MIB, rest = part - head;
    char *base = hak_os_reserve(head, part, 3, 2 * MIB);
    CHECK(base != NULL && aligned_to(base, 2 * MIB), "no reservation of 3 parts: %p", (void *)base);
    if (!base)
        return;
    CHECK(hak_os_reserve(0, part, 1, 2 * MIB) == NULL, "a second reservation");
    char *rest0 = base + head, *rest2 = base + 2 * part + head;
    CHECK(hak_os_map_reserved(base, 4096) && hak_os_map_reserved(rest0, 2 * MIB) &&
              hak_os_map_reserved(rest2, 2 * MIB),
          "memory at the start of part 0's head and of parts 0 and 2 after theirs");
    CHECK(!hak_os_map_reserved(base + head - 4096, 8192), "memory across a head and its rest");
    CHECK(!hak_os_map_reserved(rest0 + rest - MIB, 2 * MIB), "memory across parts 0 and 1");
    CHECK(!hak_os_map_reserved(base + 3 * part, 2 * MIB), "memory past the last part");
    /* Made and taken back, as a SuperSlab whose setup failed: in part 2
     * the last memory made, in part 0 with memory made after it. */
    CHECK(hak_os_map_reserved(rest2 + 2 * MIB, 2 * MIB) &&
              hak_os_map_reserved(rest0 + 2 * MIB, 2 * MIB) &&
              hak_os_map_reserved(rest0 + 4 * MIB, 2 * MIB),
          "memory after part 0's and part 2's first 2 MiB");
    hak_os_unmap_reserved(rest2 + 2 * MIB, 2 * MIB);
    hak_os_unmap_reserved(rest0 + 2 * MIB, 2 * MIB);
    base[0] = 1;
    rest0[0] = 2;
    rest0[4 * MIB] = 3;
    rest2[2 * MIB - 1] = 4;

    struct rlimit saved, limit;
    getrlimit(RLIMIT_AS, &saved);
    limit = saved;
    limit.rlim_cur = unit_address_space() - 4 * MIB;
    if (setrlimit(RLIMIT_AS, &limit) != 0)
        hard_error("setrlimit(RLIMIT_AS): %s", strerror(errno));
    CHECK(none_mapped(base + 4096, head - 4096) && none_mapped(rest0 + 6 * MIB, rest - 6 * MIB) &&
              none_mapped(base + part, part) && none_mapped(base + 2 * part, head) &&
              none_mapped(rest2 + 2 * MIB, rest - 2 * MIB),
          "a head's or a rest's unused end is still reserved under the limit");
    CHECK(all_mapped(base, 4096) && all_mapped(rest0, 2 * MIB) &&
              all_mapped(rest0 + 4 * MIB, 2 * MIB) && all_mapped(rest2, 2 * MIB) && base[0] == 1 &&
              rest0[0] == 2 && rest0[4 * MIB] == 3 && rest2[2 * MIB - 1] == 4,
          "memory made in the parts went back with their unused ends");
    CHECK(!hak_os_release_reservation_over_limit(), "the reservation went back twice");
    setrlimit(RLIMIT_AS, &saved);
    CHECK(!hak_os_map_reserved(base + part, 2 * MIB) && !hak_os_map_reserved(base + 4096, 4096) &&
              !hak_os_map_reserved(rest2 + 2 * MIB, 2 * MIB),
          "memory made where the reservation went back, once the limit was lifted");
}

/* Under the kernel's default overcommit policy (vm.overcommit_memory 0), a
 * mapping is refused only when what it keeps is more than memory and swap:
 * one cut to its alignment from a span bigger than that (its size plus the
 * alignment) is made all the same, the next hinted range being taken so
 * that the cut is what makes it.  Memory and swap themselves are refused
 * twice over.  Nothing here is written, so nothing is committed. */
static void test_cut_accounts_what_it_keeps(void)
{
    struct sysinfo info;
    struct rlimit limit;
    if (overcommit_policy() != 0 || sysinfo(&info) != 0 || getrlimit(RLIMIT_AS, &limit) != 0 ||
        limit.rlim_cur != RLIM_INFINITY) {
        printf("test_os_map: vm.overcommit_memory is not 0, or an address-space limit counts "
               "the span: no mapping cut past memory\n");
        return;
    }
    size_t backed = ((size_t)info.totalram + info.totalswap) * info.mem_unit;
    /* Spans of twice that must fit in the address space, beside the rest. */
    if (backed > ((size_t)1 << 44)) {
        printf("test_os_map: memory and swap over 16 TiB: no mapping cut past them\n");
        return;
    }
    size_t align = (size_t)1 << (63 - __builtin_clzl(backed - MIB));
    size_t size = (backed - align + 64 * MIB) & ~(2 * MIB - 1);
    CHECK(hak_os_map_aligned(2 * backed, 2 * MIB) == NULL,
          "a mapping of twice memory and swap (%zu MiB) was made", 2 * backed / MIB);
    char *first = hak_os_map_aligned(size, align);
    CHECK(first != NULL && aligned_to(first, align), "no mapping of %zu MiB aligned to %zu MiB",
          size / MIB, align / MIB);
    if (!first)
        return;
    char *hinted = (char *)(((uintptr_t)first - size) & ~(uintptr_t)(align - 1));
    char *taken = mmap(hinted, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (taken != MAP_FAILED && taken != hinted) {
        munmap(taken, size);
        taken = MAP_FAILED;
    }
    char *second = hak_os_map_aligned(size, align);
    CHECK(second != NULL && aligned_to(second, align),
          "no mapping of %zu MiB aligned to %zu MiB cut from %zu MiB, more than memory and "
          "swap (%zu MiB)",
          size / MIB, align / MIB, (size + align) / MIB, backed / MIB);
    if (second)
        hak_os_unmap(second, size);
    if (taken != MAP_FAILED)
        munmap(taken, size);
    hak_os_unmap(first, size);
}

/* The mappings a process may have (vm.max_map_count), or 0 when unknown or
 * so many that filling them would take long. */
static long map_count_limit(void)
{
    char text[32] = "";
    FILE *file = fopen("/proc/sys/vm/max_map_count", "r");
    if (file) {
        if (!fgets(text, sizeof(text), file))
            text[0] = 0;
        fclose(file);
    }
    long limit = atol(text);
    return limit > 0 && limit <= 262144 ? limit : 0;
}

/* An unmap of a page inside a mapping, which would split it, where the
 * process has all the mappings it may: the kernel refuses it, and
 * hak_os_unmap leaves errno as it was (free() must) and gives the page back
 * all the same, so that it reads as zeros.  The mappings are used up by
 * pages of a region made PROT_READ one in two, each a mapping of its own,
 * and the region's last page at the end; nothing in between may allocate,
 * since a new mapping would fail too. */
static void test_unmap_refused(void)
{
    long limit = map_count_limit();
    if (!limit) {
        printf("test_os_map: vm.max_map_count unknown or over 262144: no refused unmap\n");
        return;
    }
    const size_t page = 4096, pages = 2 * (size_t)limit + 16;
    char *target = unit_map(3 * page);
    memset(target, 0x5a, 3 * page);
    char *filler = mmap(NULL, pages * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (filler == MAP_FAILED)
        hard_error("mmap of %zu pages: %s", pages, strerror(errno));
    size_t read_only_pages = 0;
    while (2 * read_only_pages < pages - 2 &&
           mprotect(filler + 2 * read_only_pages * page, page, PROT_READ) == 0)
        read_only_pages++;
    int fill_errno = errno;
    /* Each page above split the region's rest in three; its last page
     * splits it in two, one mapping more. */
    mprotect(filler + (pages - 1) * page, page, PROT_READ);

    errno = 1789;
    hak_os_unmap(target + page, page);
    int unmap_errno = errno;
    unsigned char resident;
    bool still_mapped = mincore(target + page, page, &resident) == 0;
    bool zeroed = still_mapped && target[page] == 0 && target[2 * page - 1] == 0;
    bool neighbours_kept = target[0] == 0x5a && target[3 * page - 1] == 0x5a;

    munmap(filler, pages * page);
    CHECK(fill_errno == ENOMEM, "the filler mappings stopped before the limit: %s",
          strerror(fill_errno));
    CHECK(unmap_errno == 1789, "hak_os_unmap changed errno to %d (%s)", unmap_errno,
          strerror(unmap_errno));
    CHECK(still_mapped, "the kernel unmapped a page that splits a mapping at the limit: "
                        "the test did not reach it");
    CHECK(zeroed, "a page the kernel would not unmap kept its contents");
    CHECK(neighbours_kept, "the pages around the refused unmap lost their contents");
    munmap(target, 3 * page);
}

int main(int argc, char **argv)
{
    unit_watchdog();
    if (argc > 1 && !strcmp(argv[1], "parts")) {
        test_reservation_parts();
        return test_result("test_os_map parts");
    }
    test_adjacent_below(4 * MIB, 4 * MIB);
    test_adjacent_below(2 * MIB, 2 * MIB);
    test_fills_hole_below();
    test_refills_unmapped_hole();
    test_hinted_range_taken();
    test_other_shapes();
    test_moves_keep_destination();
    test_unmap_refused();
    test_cut_accounts_what_it_keeps();
    int result = test_result("test_os_map");
    /* Where hakmem reserves nothing itself, and where nothing is reserved
     * at all: under an address-space limit. */
    struct rlimit limit;
    if (result == EXIT_SUCCESS && getrlimit(RLIMIT_AS, &limit) == 0 &&
        limit.rlim_cur == RLIM_INFINITY) {
        fflush(stdout);
        setenv("HAKMEM_HARDEN", "0", 1);
        execl("/proc/self/exe", argv[0], "parts", (char *)NULL);
        hard_error("cannot run %s again", argv[0]);
    }
    return result;
}

/* Large blocks on a kernel before Linux 6.17, which refuses to move the
 * pages of more than one of its mappings at once, and only after it
 * unmapped the destination: a hole in the block being filled until
 * hak_os_move maps it again, which another thread's mmap may take first.
 * So there fill moves only cached mappings known to be one kernel mapping.
 *
 * This program plays such a kernel: its uname says 6.1, and its mremap
 * refuses, as that kernel would, a move whose source is not within one
 * mapping of /proc/self/maps, counting the refusals (refusing_mremap.h).  A cached block of one
 * mapping that fits a gap of another block that grows is moved into it; one
 * whose pages were moved over a new mapping is two mappings and must not
 * be, and the grown block is whole.  The release parser is checked against a few releases.
 * The program asks the kernel for no huge pages (sizes stay as asked). */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "os.h"
#include "refusing_mremap.h"
#include "unit.h"

static void test_release_parser(void)
{
    static const struct {
        const char *release;
        bool moves;
    } releases[] = {
        {"6.17.0", true},
        {"6.18.0-1-amd64", true},
        {"7.0", true},
        {"6.17", true},
        {"6.16.12", false},
        {"6.1.0-test", false},
        {"5.15.0-91-generic", false},
        {"4.19.0", false},
        {"", false},
        {"linux", false},
    };
    for (size_t i = 0; i < sizeof(releases) / sizeof(releases[0]); i++)
        CHECK(hak_os_release_moves_over_mappings(releases[i].release) == releases[i].moves,
              "release %s: moves over mappings should be %s", releases[i].release,
              releases[i].moves ? "yes" : "no");
    CHECK(!hak_os_moves_over_mappings(), "uname says 6.1, and moves over mappings are taken");
}

static void write_pages(char *block, size_t size)
{
    for (size_t at = 0; at < size; at += HAK_PAGE_SIZE)
        block[at] = 1;
}

static char *alloc_written(size_t size)
{
    char *block = malloc(opaque_size(size));
    if (!block)
        hard_error("malloc(%zu) failed", size);
    write_pages(block, size);
    return block;
}

/* A block grown over a cached 8 MiB mapping to 13 MiB lacks 5 MiB, which
 * the cached 4 MiB block, its mapping at four_mib_head, fills. */
static void grow_over(uintptr_t four_mib_head, unsigned *refused, bool *four_mib_moved)
{
    unsigned first_refusal = mremap_refusals, first_move = mremap_moves;
    char *grown = malloc(opaque_size(13 * MiB));
    if (!grown)
        hard_error("malloc(13 MiB) failed");
    write_pages(grown, 13 * MiB);
    grown[13 * MiB - 1] = 1;
    *refused = mremap_refusals - first_refusal;
    *four_mib_moved = mremap_moved_since(first_move, (void *)four_mib_head);
    free(grown);
}

/* A cached block of one mapping is moved into a block that grows. */
static void test_move_of_one_mapping(void)
{
    malloc_trim(0);
    char *fence_above = alloc_written(2 * MiB);
    char *one_mapping = alloc_written(4 * MiB);
    char *fence_between = alloc_written(2 * MiB);
    char *biggest = alloc_written(8 * MiB);
    uintptr_t head = (uintptr_t)(one_mapping - HAK_PAGE_SIZE);
    free(one_mapping);
    free(biggest);
    unsigned refused;
    bool moved;
    grow_over(head, &refused, &moved);
    printf("13 MiB over cached 8 MiB and 4 MiB of one mapping: %s, %u moves refused\n",
           moved ? "moved" : "not moved", refused);
    CHECK(moved && refused == 0, "a cached block of one kernel mapping was %s (%u refusals)",
          moved ? "moved" : "not moved", refused);
    free(fence_between);
    free(fence_above);
}

/* One whose pages were moved over a new mapping is two mappings: not
 * moved, where the kernel would refuse. */
static void test_no_move_of_two_mappings(void)
{
    malloc_trim(0);
    /* fence_above, then small right below it: small grown to 4 MiB cannot
     * grow in place and moves over a new mapping. */
    char *fence_above = alloc_written(2 * MiB);
    char *small = alloc_written(2 * MiB);
    free(small);
    char *two_mappings = alloc_written(4 * MiB);
    char *fence_between = alloc_written(2 * MiB);
    char *biggest = alloc_written(8 * MiB);
    uintptr_t head = (uintptr_t)(two_mappings - HAK_PAGE_SIZE);
    if (within_one_mapping(head, HAK_PAGE_SIZE + 4 * MiB))
        hard_error("the 4 MiB block is one kernel mapping: the test no longer makes two");
    free(two_mappings);
    free(biggest);
    unsigned refused;
    bool moved;
    grow_over(head, &refused, &moved);
    printf("13 MiB over cached 8 MiB and 4 MiB of two mappings: %u moves refused\n", refused);
    CHECK(refused == 0 && !moved, "fill moved cached pages of two kernel mappings (%u refusals)",
          refused);
    free(fence_between);
    free(fence_above);
}

int main(int argc, char **argv)
{
    (void)argc;
    play_linux_6_1();
    unit_watchdog();
    /* Kept across the exec of rerun_with. */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        hard_error("prctl(PR_SET_THP_DISABLE) failed");
    rerun_with("HAKMEM_HUGE_PAGES", "0", argv);
    test_release_parser();
    test_move_of_one_mapping();
    test_no_move_of_two_mappings();
    return test_result("test_old_kernel_moves");
}

/* Large blocks on a kernel before Linux 6.17, which refuses to move the
 * pages of more than one of its mappings at once, and only after it
 * unmapped the destination: a hole in the block being filled until
 * hak_os_move maps it again, which another thread's mmap may take first.
 * So there fill moves cached mappings one kernel mapping at a time, where
 * each knows where its mappings start (struct hak_large).
 *
 * This program plays such a kernel: its uname says 6.1, and its mremap
 * refuses, as that kernel would, a move whose source is not within one
 * mapping of /proc/self/maps, counting the refusals (refusing_mremap.h).
 * A cached block of one mapping that fits a gap of another block that
 * grows is moved into it; so is one whose pages were moved over a new
 * mapping, two mappings, one at a time, and the grown block is whole.  One
 * the program split itself (madvise on part of it) is refused once, and
 * its mappings are then not known.  The release parser is checked against
 * a few releases.  The program asks the kernel for no huge pages (sizes
 * stay as asked). */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "arena/page_map.h"
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

/* four_mib, freed, fills the 5 MiB that a block grown over a cached 8 MiB
 * mapping to 13 MiB lacks: the 8 MiB one is mapped after it, a live block
 * between them, and freed too.  Returns the block between, which the
 * caller frees once it has looked (freed, it could merge with what is
 * left of four_mib in the cache). */
static char *grow_over(char *four_mib, unsigned *refused, bool *four_mib_moved)
{
    char *fence_between = alloc_written(2 * MiB);
    char *biggest = alloc_written(8 * MiB);
    uintptr_t four_mib_head = large_block_head(four_mib);
    free(four_mib);
    free(biggest);
    unsigned first_refusal = mremap_refusals, first_move = mremap_moves;
    char *grown = malloc(opaque_size(13 * MiB));
    if (!grown)
        hard_error("malloc(13 MiB) failed");
    write_pages(grown, 13 * MiB);
    grown[13 * MiB - 1] = 1;
    *refused = mremap_refusals - first_refusal;
    *four_mib_moved = mremap_moved_since(first_move, (void *)four_mib_head);
    free(grown);
    return fence_between;
}

/* four_mib, of what mappings says, fills the gap of a block that grows
 * (grow_over), none of its moves refused. */
static void check_moved_into_gap(char *four_mib, const char *mappings)
{
    unsigned refused;
    bool moved;
    char *fence_between = grow_over(four_mib, &refused, &moved);
    printf("13 MiB over cached 8 MiB and 4 MiB of %s: %s, %u moves refused\n", mappings,
           moved ? "moved" : "not moved", refused);
    CHECK(moved && refused == 0, "a cached block of %s was %s (%u refusals)", mappings,
          moved ? "moved" : "not moved", refused);
    free(fence_between);
}

/* A cached block of one mapping is moved into a block that grows. */
static void test_move_of_one_mapping(void)
{
    malloc_trim(0);
    char *fence_above = alloc_written(2 * MiB);
    check_moved_into_gap(alloc_written(4 * MiB), "one mapping");
    free(fence_above);
}

/* A block of two kernel mappings: small, grown to 4 MiB, cannot grow in
 * place (*fence_above right after it) and moves over a new mapping. */
static char *two_mapping_block(char **fence_above)
{
    malloc_trim(0);
    *fence_above = alloc_written(2 * MiB);
    char *small = alloc_written(2 * MiB);
    free(small);
    char *block = alloc_written(4 * MiB);
    if (within_one_mapping(large_block_head(block), HAK_PAGE_SIZE + 4 * MiB))
        hard_error("the 4 MiB block is one kernel mapping: the test no longer makes two");
    return block;
}

/* One whose pages were moved over a new mapping is two mappings, moved
 * one at a time. */
static void test_move_of_two_mappings(void)
{
    char *fence_above;
    check_moved_into_gap(two_mapping_block(&fence_above), "two mappings");
    free(fence_above);
}

/* A cached block of two mappings that must move to grow, the address
 * space after it taken, moves one mapping at a time: it holds nothing of
 * the program's, and what a refusal part way would leave is free memory. */
static void test_grow_of_two_mappings(void)
{
    char *fence_above;
    char *two_mappings = two_mapping_block(&fence_above);
    uintptr_t head = large_block_head(two_mappings);
    const struct hak_large *large = (const struct hak_large *)hak_page_map_lookup((void *)head);
    if (!large || (uintptr_t)large != head)
        hard_error("the 4 MiB block has no head of its own");
    size_t size = large->head.map_size;
    void *after = (void *)(head + size);
    void *blocker =
        mmap(after, 2 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (blocker != MAP_FAILED && blocker != after)
        hard_error("the kernel mapped the blocker elsewhere");
    free(two_mappings);
    unsigned first_refusal = mremap_refusals, first_move = mremap_moves;
    char *grown = alloc_written(size + 2 * MiB);
    bool moved = mremap_moved_since(first_move, (void *)head);
    unsigned refused = mremap_refusals - first_refusal;
    printf("%zu MiB over a cached block of two mappings that must move: %s, %u moves refused\n",
           (size + 2 * MiB) / MiB, moved ? "moved" : "not moved", refused);
    CHECK(moved && refused == 0,
          "a cached block of two mappings that had to move to grow was %s (%u refusals)",
          moved ? "moved" : "not moved", refused);
    free(grown);
    if (blocker != MAP_FAILED)
        munmap(blocker, 2 * MiB);
    free(fence_above);
}

/* The source the kernel refuses besides those over several mappings. */
static uintptr_t refused_source;

static bool refuse_one_source(const void *source, size_t size)
{
    return (uintptr_t)source == refused_source || over_several_mappings(source, size);
}

/* A cached block of two mappings whose lower one the kernel refuses to
 * move (for whatever reason: no memory, say) keeps it, with its head, in
 * the page map and no further, its upper one moved into the block that
 * grew, which is whole; where its mappings start is then not known. */
static void test_move_refused_part_way(void)
{
    char *fence_above;
    char *two_mappings = two_mapping_block(&fence_above);
    uintptr_t head = large_block_head(two_mappings);
    const struct hak_large *large = (const struct hak_large *)hak_page_map_lookup((void *)head);
    if (!large || (uintptr_t)large != head || large->mapping_count != 1)
        hard_error("the 4 MiB block does not know its two kernel mappings");
    size_t lower = (size_t)large->mapping_starts[0] * HAK_PAGE_SIZE, size = large->head.map_size;
    refused_source = head;
    mremap_refused = refuse_one_source;
    unsigned first_move = mremap_moves, refused;
    bool head_moved;
    char *fence_between = grow_over(two_mappings, &refused, &head_moved);
    mremap_refused = over_several_mappings;
    bool upper_moved = mremap_moved_since(first_move, (void *)(head + lower));
    const struct hak_large *kept = (const struct hak_large *)hak_page_map_lookup((void *)head);
    const void *past = hak_page_map_lookup(
        (void *)(head + ((lower + HAK_CHUNK_SIZE - 1) & ~(HAK_CHUNK_SIZE - 1))));
    printf("13 MiB over a block of two mappings, the lower refused: %u refused, upper %s\n",
           refused, upper_moved ? "moved" : "not moved");
    CHECK(refused == 1 && upper_moved && !head_moved && kept == large &&
              kept->head.map_size == lower && kept->mapping_count == HAK_LARGE_STARTS_UNKNOWN &&
              (past == NULL || lower + HAK_CHUNK_SIZE > size),
          "a block whose lower mapping's move was refused: %u refused, upper %s, it kept %zu "
          "bytes (not its lower %zu), the page map past them %s",
          refused, upper_moved ? "moved" : "not moved", kept ? kept->head.map_size : 0, lower,
          past ? "still set" : "clear");
    free(fence_between);
    free(fence_above);
}

/* One the program split (madvise on part of it, which hakmem cannot know
 * of) is refused once, as it is taken for one mapping, and then is not
 * known to be: fill leaves it alone from then on. */
static void test_split_by_the_program(void)
{
    malloc_trim(0);
    char *fence_above = alloc_written(2 * MiB);
    char *split = alloc_written(4 * MiB);
    uintptr_t head = large_block_head(split);
    if (madvise((char *)head + HAK_PAGE_SIZE + MiB, HAK_PAGE_SIZE, MADV_DONTFORK) != 0 ||
        within_one_mapping(head, HAK_PAGE_SIZE + 4 * MiB))
        hard_error("madvise did not split the 4 MiB block's mapping");
    unsigned refused;
    bool moved;
    char *fence_between = grow_over(split, &refused, &moved);
    const struct hak_large *cached = (const struct hak_large *)hak_page_map_lookup((void *)head);
    printf("13 MiB over cached 8 MiB and 4 MiB split by the program: %u moves refused\n", refused);
    CHECK(refused == 1 && !moved && cached && (uintptr_t)cached == head &&
              cached->mapping_count == HAK_LARGE_STARTS_UNKNOWN,
          "a cached block the program split: %u moves refused, not one, or its mappings are "
          "still taken as known",
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
    test_move_of_two_mappings();
    test_grow_of_two_mappings();
    test_move_refused_part_way();
    test_split_by_the_program();
    return test_result("test_old_kernel_moves");
}

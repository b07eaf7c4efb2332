/* Large blocks find the pages of those freed before them.  First, a block
 * grown over one cached mapping takes what it lacks from the end of
 * another.  Then LIVE buffers of 5-25 MiB (large_blocks' shape), replaced
 * one at a time, a byte written in every page of each new one: the cache
 * keeps what the program freed below its peak, and the steady state
 * faults in few new pages, with the budget the program set (mallopt) as
 * with the one misses grow; once all are freed, it keeps no more than a
 * quarter of the peak.  The first STEPS replacements warm up, the next
 * STEPS are measured: with the cache held to a quarter of the live peak,
 * they faulted once for every 48-50 pages written; with its growth, once
 * for every 110-210; with gaps filled page by page too, once for every
 * 1000; kept up to the peak, 8 times for 1.49 million pages.  Huge pages
 * would fault a 2 MiB page at a time and hide what is measured: the
 * process asks the kernel for none (THP "always" included); and the growth
 * decays only after a minute, however slowly the test runs. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { LIVE = 20, STEPS = 400 };

static uint32_t next_random(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static char *new_buffer(uint32_t *state, size_t *pages)
{
    size_t size = 5 * MiB + next_random(state) % (20 * MiB);
    char *buffer = malloc(opaque_size(size));
    if (!buffer)
        hard_error("malloc(%zu) failed", size);
    for (size_t at = 0; at < size; at += 4096)
        buffer[at] = (char)at;
    buffer[size - 1] = 1; /* the last page, wherever the block starts in its first */
    *pages += (size + 4095) / 4096;
    return buffer;
}

static void write_pages(char *block, size_t size)
{
    for (size_t at = 0; at < size; at += 4096)
        block[at] = 1;
    block[size - 1] = 1;
}

/* A block grown over the biggest cached mapping finds the pages it lacks
 * in another one bigger than the gap, taken from its end page by page,
 * rather than faulting them in fresh: a gap of whole 2 MiB units and one
 * short of a unit (where cuts at units left it all to fault in).  A live
 * block between the two keeps them from merging when freed. */
static void test_gap_from_bigger_mapping(size_t grown_size)
{
    malloc_trim(0);
    char *biggest = malloc(opaque_size(8 * MiB));
    char *between = malloc(opaque_size(2 * MiB));
    char *bigger = malloc(opaque_size(6 * MiB));
    if (!biggest || !between || !bigger)
        hard_error("malloc of large blocks failed");
    write_pages(biggest, 8 * MiB);
    write_pages(bigger, 6 * MiB);
    free(biggest);
    free(bigger);
    long before = minor_faults();
    char *grown = malloc(opaque_size(grown_size));
    if (!grown)
        hard_error("malloc(%zu) failed", grown_size);
    write_pages(grown, grown_size);
    long faults = minor_faults() - before;
    printf("%zu KiB over cached 8 and 6 MiB mappings: %ld faults\n", grown_size / 1024, faults);
    CHECK(faults < 64, "a %zu KiB block over cached 8 and 6 MiB mappings faulted %ld times",
          grown_size / 1024, faults);
    free(grown);
    free(between);
    malloc_trim(0);
}

/* LIVE buffers replaced one at a time: STEPS to warm up, STEPS measured;
 * then all freed.  peak_mapped: the most the live buffers mapped. */
static void replace_buffers(const char *mode, size_t *peak_mapped)
{
    uint32_t state = 12345;
    size_t pages = 0;
    char *live[LIVE];
    for (int i = 0; i < LIVE; i++)
        live[i] = new_buffer(&state, &pages);
    long measured_from = 0;
    size_t written_from = 0;
    *peak_mapped = 0;
    for (int step = 0; step < 2 * STEPS; step++) {
        if (step == STEPS) {
            measured_from = minor_faults();
            written_from = pages;
        }
        int victim = (int)(next_random(&state) % LIVE);
        free(live[victim]);
        live[victim] = new_buffer(&state, &pages);
        size_t mapped = mallinfo2().hblkhd;
        if (mapped > *peak_mapped)
            *peak_mapped = mapped;
    }
    long faults = minor_faults() - measured_from;
    size_t written = pages - written_from;
    printf("steady state, %s: %ld faults for %zu pages written\n", mode, faults, written);
    CHECK((size_t)faults * 1000 < written,
          "replacing buffers in steady state (%s) faulted %ld times for %zu pages written", mode,
          faults, written);
    for (int i = 0; i < LIVE; i++)
        free(live[i]);
}

/* The same with the budget the program set (mallopt), which no miss grows:
 * the cache still keeps what the program freed below its peak, and once
 * the program has freed all, no more than a quarter of that peak. */
static void replace_buffers_with_fixed_budget(void)
{
    pid_t child = fork();
    if (child < 0)
        hard_error("fork failed");
    if (child == 0) {
        mallopt(M_TRIM_THRESHOLD, 32 * MiB);
        size_t peak;
        replace_buffers("budget set by mallopt", &peak);
        size_t kept = mallinfo2().keepcost;
        printf("all freed: %zu MiB kept of a %zu MiB peak\n", kept / MiB, peak / MiB);
        CHECK(kept <= peak / 4 + 16 * MiB, "all freed, the cache kept %zu MiB of a %zu MiB peak",
              kept / MiB, peak / MiB);
        int result = test_result("test_large_reuse (budget set by mallopt)");
        fflush(stdout);
        _exit(result ? 1 : 0);
    }
    int status;
    if (waitpid(child, &status, 0) != child)
        hard_error("waitpid failed");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the run with the budget set by mallopt failed (status %#x)", status);
}

int main(int argc, char **argv)
{
    (void)argc;
    /* Kept across the exec of rerun_with. */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        hard_error("prctl(PR_SET_THP_DISABLE) failed");
    rerun_with("HAKMEM_HUGE_PAGES", "0", argv);
    rerun_with("HAKMEM_DECAY_MS", "60000", argv);
    test_gap_from_bigger_mapping(12 * MiB);
    test_gap_from_bigger_mapping(9 * MiB + 512 * 1024);
    replace_buffers_with_fixed_budget();
    size_t peak;
    replace_buffers("budget grown by misses", &peak);
    return test_result("test_large_reuse");
}

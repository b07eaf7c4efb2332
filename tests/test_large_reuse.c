/* Large blocks find the pages of those freed before them.  First, a block
 * grown over one cached mapping takes what it lacks from another, cut to
 * fit.  Then, replaced one at a time: once the program has shown the cache
 * is too small for what it replaces (it unmapped freed buffers, then the
 * program asked for pages again), the cache keeps more, and the steady
 * state faults in few new pages.  LIVE buffers of 5-25 MiB (large_blocks' shape), a byte written in
 * every page of each new one; the first STEPS replacements warm up, the
 * next STEPS are measured.  With the cache held to a quarter of the live
 * peak, the measured steps faulted once for every 48-50 pages written (and
 * unmapped as much); with its growth, once for every 110-210.  Huge pages
 * would fault a 2 MiB page at a time and hide what is measured: the process
 * asks the kernel for none (THP "always" included); and the growth decays
 * only after a minute, however slowly the test runs. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "harness.h"

enum { LIVE = 20, STEPS = 400 };

static long minor_faults(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

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
    *pages += (size + 4095) / 4096;
    return buffer;
}

static void write_pages(char *block, size_t size)
{
    for (size_t at = 0; at < size; at += 4096)
        block[at] = 1;
}

/* A block grown over the biggest cached mapping finds the pages it lacks
 * in another one bigger than the gap, cut to the gap's whole 2 MiB units,
 * rather than faulting them in fresh.  A live block between the two keeps
 * them from merging when freed. */
static void test_gap_from_bigger_mapping(void)
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
    char *grown = malloc(opaque_size(12 * MiB));
    if (!grown)
        hard_error("malloc(12 MiB) failed");
    write_pages(grown, 12 * MiB);
    long faults = minor_faults() - before;
    printf("12 MiB over cached 8 and 6 MiB mappings: %ld faults\n", faults);
    CHECK(faults < 512, "a 12 MiB block over cached 8 and 6 MiB mappings faulted %ld times",
          faults);
    free(grown);
    free(between);
    malloc_trim(0);
}

int main(int argc, char **argv)
{
    (void)argc;
    /* Kept across the exec of rerun_with. */
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        hard_error("prctl(PR_SET_THP_DISABLE) failed");
    rerun_with("HAKMEM_HUGE_PAGES", "0", argv);
    rerun_with("HAKMEM_DECAY_MS", "60000", argv);
    test_gap_from_bigger_mapping();
    uint32_t state = 12345;
    size_t pages = 0;
    char *live[LIVE];
    for (int i = 0; i < LIVE; i++)
        live[i] = new_buffer(&state, &pages);
    long measured_from = 0;
    size_t written_from = 0;
    for (int step = 0; step < 2 * STEPS; step++) {
        if (step == STEPS) {
            measured_from = minor_faults();
            written_from = pages;
        }
        int victim = (int)(next_random(&state) % LIVE);
        free(live[victim]);
        live[victim] = new_buffer(&state, &pages);
    }
    long faults = minor_faults() - measured_from;
    size_t written = pages - written_from;
    printf("steady state: %ld faults for %zu pages written\n", faults, written);
    CHECK((size_t)faults * 80 < written,
          "replacing buffers in steady state faulted %ld times for %zu pages written", faults,
          written);
    for (int i = 0; i < LIVE; i++)
        free(live[i]);
    return test_result("test_large_reuse");
}

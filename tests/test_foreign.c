/* Pointers that hakmem did not allocate, as the dynamic loader hands out
 * before interposition takes over: free leaves them alone, realloc copies
 * them into a new hakmem block, malloc_usable_size survives them, and hakmem
 * never touches memory it does not own while finding that out.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

#define SUPERSLAB_SIZE (2 * MiB)

static size_t page_size;

/* What the program was doing, for the report if a call crashes. */
static const char *volatile current_step = "start";

static void report_crash(int signal_number)
{
    static const char prefix[] = "FAIL: crashed with a fatal signal during: ";
    const char *step = current_step;

    (void)signal_number;
    if (write(STDERR_FILENO, prefix, sizeof(prefix) - 1) < 0 ||
        write(STDERR_FILENO, step, strlen(step)) < 0 || write(STDERR_FILENO, "\n", 1) < 0) {
        _exit(EXIT_FAILURE);
    }
    _exit(EXIT_FAILURE);
}

static void install_crash_report(void)
{
    struct sigaction action;

    memset(&action, 0, sizeof(action));
    action.sa_handler = report_crash;
    sigaction(SIGSEGV, &action, NULL);
    sigaction(SIGBUS, &action, NULL);
    sigaction(SIGABRT, &action, NULL);
}

static int overlaps(const void *block, size_t size, const void *region, size_t region_size)
{
    uintptr_t start = (uintptr_t)block, region_start = (uintptr_t)region;
    return start < region_start + region_size && region_start < start + size;
}

/* After a foreign free, new blocks must still come from hakmem's memory. */
static void check_no_allocation_inside(const char *name, const void *region, size_t region_size)
{
    enum { COUNT = 600 };
    void *blocks[COUNT];
    uint64_t rng = 99;

    for (int i = 0; i < COUNT; i++) {
        size_t size = i % 50 == 0 ? rng_range(&rng, 1025, 32 * KiB) : rng_range(&rng, 1, 1024);

        blocks[i] = malloc(size);
        if (blocks[i] == NULL) {
            hard_error("malloc(%zu) failed", size);
        }
        CHECK(!overlaps(blocks[i], size, region, region_size),
              "after free(%s), malloc(%zu) returned %p inside the foreign memory", name, size,
              blocks[i]);
    }
    for (int i = 0; i < COUNT; i++) {
        free(blocks[i]);
    }
}

/* ptr: foreign memory with at least `readable` readable bytes; it is
 * filled with a pattern that no hakmem call may change. */
static void exercise_foreign(const char *name, unsigned char *ptr, size_t readable)
{
    char step[160];
    const uint64_t key = (uint64_t)(uintptr_t)ptr;
    const size_t new_sizes[] = {1, readable / 2, readable};

    fill_pattern(ptr, readable, key);

    snprintf(step, sizeof(step), "malloc_usable_size(%s)", name);
    current_step = step;
    size_t usable = malloc_usable_size(ptr);
    printf("malloc_usable_size(%s) = %zu\n", name, usable);

    for (size_t i = 0; i < sizeof(new_sizes) / sizeof(new_sizes[0]); i++) {
        size_t new_size = new_sizes[i];

        snprintf(step, sizeof(step), "realloc(%s, %zu)", name, new_size);
        current_step = step;
        unsigned char *copy = realloc(ptr, new_size);
        CHECK(copy != NULL, "realloc(%s, %zu) returned NULL", name, new_size);
        if (copy == NULL) {
            continue;
        }
        CHECK(!overlaps(copy, new_size, ptr, readable),
              "realloc(%s, %zu) returned %p, inside the foreign block %p", name, new_size, copy,
              ptr);
        size_t damaged = pattern_mismatch(copy, new_size, key);
        CHECK(damaged == PATTERN_INTACT,
              "realloc(%s, %zu) did not copy the old contents: byte %zu differs", name, new_size,
              damaged);
        CHECK(malloc_usable_size(copy) >= new_size,
              "realloc(%s, %zu) returned a block whose usable size is %zu", name, new_size,
              malloc_usable_size(copy));
        free(copy);
    }

    snprintf(step, sizeof(step), "free(%s)", name);
    current_step = step;
    free(ptr);
    size_t damaged = pattern_mismatch(ptr, readable, key);
    CHECK(damaged == PATTERN_INTACT, "free(%s) wrote into memory it does not own (byte %zu)", name,
          damaged);

    snprintf(step, sizeof(step), "allocating after free(%s)", name);
    current_step = step;
    check_no_allocation_inside(name, ptr, readable);
    current_step = "between cases";
}

static unsigned char *map_pages(size_t size)
{
    void *pages = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (pages == MAP_FAILED) {
        hard_error("mmap(%zu) failed: %s", size, strerror(errno));
    }
    return pages;
}

/* A foreign block right before an inaccessible page: realloc may copy only
 * what is readable. */
static void test_block_before_guard_page(void)
{
    enum { TAIL = 96 };
    unsigned char *pages = map_pages(2 * page_size);
    unsigned char *ptr = pages + page_size - TAIL;

    if (mprotect(pages + page_size, page_size, PROT_NONE) != 0) {
        hard_error("mprotect failed: %s", strerror(errno));
    }
    fill_pattern(ptr, TAIL, 7);
    current_step = "realloc(block 96 bytes before a PROT_NONE page, 200)";
    unsigned char *copy = realloc(ptr, 200);
    CHECK(copy != NULL && pattern_mismatch(copy, TAIL, 7) == PATTERN_INTACT,
          "realloc(block 96 bytes before a PROT_NONE page, 200) returned %p without the 96 "
          "readable bytes",
          copy);
    free(copy);
    current_step = "free(block 96 bytes before a PROT_NONE page)";
    free(ptr);
    current_step = "between cases";
    munmap(pages, 2 * page_size);
}

/* Returns a SUPERSLAB_SIZE-aligned, SUPERSLAB_SIZE-long foreign region;
 * *mapping and *mapping_size describe what to unmap. */
static unsigned char *map_aligned_region(unsigned char **mapping, size_t *mapping_size)
{
    *mapping_size = 2 * SUPERSLAB_SIZE;
    *mapping = map_pages(*mapping_size);
    uintptr_t start = (uintptr_t)*mapping;
    return (unsigned char *)((start + SUPERSLAB_SIZE - 1) & ~(uintptr_t)(SUPERSLAB_SIZE - 1));
}

/* hakmem may find a SuperSlab header at the 2 MiB boundary below a pointer,
 * but only after its map of its own ranges says the pointer is hakmem's. */
static void test_inaccessible_superslab_boundary(void)
{
    unsigned char *mapping;
    size_t mapping_size;
    unsigned char *region = map_aligned_region(&mapping, &mapping_size);

    if (mprotect(region, page_size, PROT_NONE) != 0) {
        hard_error("mprotect failed: %s", strerror(errno));
    }
    exercise_foreign("block in a 2 MiB-aligned region whose first page is PROT_NONE",
                     region + 64 * KiB, 4096);
    munmap(mapping, mapping_size);
}

/* Readability probe that cannot fault: the kernel reports EFAULT. */
static int page_is_readable(const void *page)
{
    int pipe_ends[2];
    int readable;
    char sink[4096];

    if (pipe(pipe_ends) != 0) {
        hard_error("pipe failed: %s", strerror(errno));
    }
    readable = write(pipe_ends[1], page, page_size) == (ssize_t)page_size;
    if (readable && read(pipe_ends[0], sink, sizeof(sink)) < 0) {
        hard_error("read from pipe failed: %s", strerror(errno));
    }
    close(pipe_ends[0]);
    close(pipe_ends[1]);
    return readable;
}

/* A foreign region whose first page is a byte-for-byte copy of the first page
 * of the 2 MiB region holding a real small block: if hakmem trusted the
 * header alone it would take the foreign pointer for its own. */
static void test_lookalike_superslab_header(void)
{
    unsigned char *real_block = malloc(64);
    unsigned char *real_base =
        (unsigned char *)((uintptr_t)real_block & ~(uintptr_t)(SUPERSLAB_SIZE - 1));

    if (real_block == NULL) {
        hard_error("malloc(64) failed");
    }
    if (!page_is_readable(real_base)) {
        printf("the 2 MiB boundary below malloc(64) is not readable: no header to copy, "
               "lookalike case skipped\n");
        free(real_block);
        return;
    }
    unsigned char *mapping;
    size_t mapping_size;
    unsigned char *region = map_aligned_region(&mapping, &mapping_size);
    size_t offset = (size_t)(real_block - real_base);

    memcpy(region, real_base, page_size);
    /* The pattern must not overwrite the copied header when the block sits
     * in the first page. */
    if (offset < page_size) {
        offset = page_size;
    }
    exercise_foreign("block in a region that copies a hakmem header", region + offset, 64);
    free(real_block);
    munmap(mapping, mapping_size);
}

/* glibc's own malloc, reached past the interposition: its blocks are
 * foreign to hakmem in the same way as the loader's. */
static void test_glibc_block(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *(*glibc_malloc)(size_t) = libc != NULL ? (void *(*)(size_t))dlsym(libc, "malloc") : NULL;

    if (glibc_malloc == NULL) {
        hard_error("cannot find glibc's malloc: %s", dlerror());
    }
    if ((void *)glibc_malloc == (void *)malloc) {
        printf("malloc is glibc's: glibc block case skipped\n");
        return;
    }
    unsigned char *block = glibc_malloc(1000);
    if (block == NULL) {
        hard_error("glibc malloc(1000) failed");
    }
    exercise_foreign("block from glibc's malloc", block, 1000);
}

static unsigned char static_buffer[8192] __attribute__((aligned(64)));

int main(void)
{
    unsigned char stack_buffer[512];

    page_size = (size_t)sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IONBF, 0);
    install_crash_report();

    exercise_foreign("static buffer", static_buffer, sizeof(static_buffer));
    exercise_foreign("static buffer + 40", static_buffer + 40, 1000);
    exercise_foreign("stack buffer", stack_buffer, sizeof(stack_buffer));

    unsigned char *page = map_pages(page_size);
    exercise_foreign("mmap'd page", page, page_size);
    exercise_foreign("mmap'd page + 16", page + 16, 256);
    munmap(page, page_size);

    test_block_before_guard_page();
    test_inaccessible_superslab_boundary();
    test_lookalike_superslab_header();
    test_glibc_block();
    return test_result("test_foreign");
}

/* Pointers hakmem never handed out: a small integer, the stack, alloca, a
 * global, another allocator's block, an mmap'd page, a pointer 1 GiB past a
 * block.  free, realloc and malloc_usable_size of each abort the process with
 * hakmem's message naming the call and the address, at every hardening
 * level, and hakmem reads and writes nothing there while finding that out
 * (not even in a region whose first page copies a hakmem header).  No such
 * pointer reaches these calls from before hakmem was in place (README,
 * Hardening), so each is a fault of the program's.  NULL stays harmless.
 *
 * Every call runs in a child of its own (fork), whose stderr the parent
 * reads; foreign memory shared with the child shows whether it was touched.
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hakmem.h"

#define SUPERSLAB_SIZE (2 * MiB)
#define GiB (1024 * MiB)

static size_t page_size;

enum call { CALL_FREE, CALL_REALLOC, CALL_USABLE_SIZE, CALLS };

static const char *const call_names[CALLS] = {"free", "realloc", "malloc_usable_size"};

static const char *const messages[CALLS] = {
    "free of a pointer hakmem never handed out:",
    "realloc of a pointer hakmem never handed out:",
    "malloc_usable_size of a pointer hakmem never handed out:",
};

static void make_call(enum call call, void *ptr)
{
    switch (call) {
    case CALL_FREE:
        free(ptr);
        break;
    case CALL_REALLOC:
        free(realloc(ptr, 200));
        break;
    default:
        printf("malloc_usable_size returned %zu\n", malloc_usable_size(ptr));
        break;
    }
}

/* call(ptr) in a child: it must die of SIGABRT with hakmem's message. */
static void expect_refused(const char *name, enum call call, void *ptr)
{
    int err_pipe[2];
    char err[4096], expected[160];
    if (pipe(err_pipe) != 0) {
        hard_error("pipe: %s", strerror(errno));
    }
    pid_t pid = fork_fault_child(60);
    if (pid == 0) {
        dup2(err_pipe[1], STDERR_FILENO);
        close(err_pipe[0]);
        make_call(call, ptr);
        fprintf(stderr, "%s returned\n", call_names[call]);
        _exit(EXIT_SUCCESS);
    }
    close(err_pipe[1]);
    read_all(err_pipe[0], err, sizeof(err));
    close(err_pipe[0]);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        hard_error("waitpid: %s", strerror(errno));
    }
    snprintf(expected, sizeof(expected), "hakmem: %s 0x%016lx\n", messages[call],
             (unsigned long)(uintptr_t)ptr);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(err, expected) != NULL,
          "%s(%s %p): expected SIGABRT and %sgot status 0x%x and: %s", call_names[call], name, ptr,
          expected, status, err);
}

static void expect_all_refused(const char *name, void *ptr)
{
    for (int call = 0; call < CALLS; call++) {
        expect_refused(name, (enum call)call, ptr);
    }
}

/* The same for foreign memory the child shares: its pattern must stay. */
static void expect_refused_untouched(const char *name, unsigned char *ptr, size_t size)
{
    const uint64_t key = (uint64_t)(uintptr_t)ptr;
    fill_pattern(ptr, size, key);
    expect_all_refused(name, ptr);
    size_t damaged = pattern_mismatch(ptr, size, key);
    CHECK(damaged == PATTERN_INTACT, "hakmem wrote into %s (byte %zu)", name, damaged);
}

/* Shared with the children, so that the parent sees what they wrote. */
static unsigned char *map_shared(size_t size)
{
    void *pages = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) {
        hard_error("mmap(%zu) failed: %s", size, strerror(errno));
    }
    return pages;
}

static void test_null(void)
{
    free(NULL);
    void *block = realloc(NULL, 100);
    CHECK(block != NULL && malloc_usable_size(block) >= 100, "realloc(NULL, 100) returned %p",
          block);
    free(block);
    CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) is %zu",
          malloc_usable_size(NULL));
}

static void test_stack_and_alloca(void)
{
    unsigned char stack_buffer[512];
    unsigned char *on_alloca = alloca(opaque_size(1000));
    memset(stack_buffer, 1, sizeof(stack_buffer));
    memset(on_alloca, 2, 1000);
    expect_all_refused("a stack buffer", stack_buffer);
    expect_all_refused("an alloca block", on_alloca);
}

/* A pointer far past a hakmem block, where no hakmem chunk lies. */
static void test_past_block(const char *name, size_t size)
{
    char *block = malloc(opaque_size(size));
    if (block == NULL) {
        hard_error("malloc(%zu) failed", size);
    }
    char *past = block + GiB;
    if (hak_node_of(past) < 0) {
        expect_all_refused(name, past);
    } else {
        printf("%s lies in hakmem's memory: case skipped\n", name);
    }
    free(block);
}

/* A large block's mapping ends inside its last 2 MiB unit, which hakmem's
 * map of its ranges still gives to the block: the rest of the unit is not
 * hakmem's all the same. */
static void test_past_large_mapping(void)
{
    /* Aligned past a page, the block gets a fresh mapping of its own size,
     * never a bigger freed one kept for reuse, which may fill the unit. */
    void *aligned = NULL;
    if (posix_memalign(&aligned, 2 * page_size, opaque_size(2 * MiB + 100 * KiB)) != 0) {
        hard_error("posix_memalign(2 MiB + 100 KiB) failed");
    }
    char *block = aligned;
    char *unit = (char *)((uintptr_t)(block + 2 * MiB) & ~(uintptr_t)(SUPERSLAB_SIZE - 1));
    expect_all_refused("a pointer past a large block's mapping, in its last 2 MiB unit",
                       unit + SUPERSLAB_SIZE - page_size);
    free(block);
}

/* A foreign block right before an inaccessible page. */
static void test_block_before_guard_page(void)
{
    unsigned char *pages = map_shared(2 * page_size);
    if (mprotect(pages + page_size, page_size, PROT_NONE) != 0) {
        hard_error("mprotect failed: %s", strerror(errno));
    }
    expect_refused_untouched("a block 96 bytes before a PROT_NONE page", pages + page_size - 96,
                             96);
    munmap(pages, 2 * page_size);
}

/* A SUPERSLAB_SIZE-aligned foreign region, SUPERSLAB_SIZE long; *mapping
 * and *mapping_size describe what to unmap. */
static unsigned char *map_aligned_region(unsigned char **mapping, size_t *mapping_size)
{
    *mapping_size = 2 * SUPERSLAB_SIZE;
    *mapping = map_shared(*mapping_size);
    uintptr_t start = (uintptr_t)*mapping;
    return (unsigned char *)((start + SUPERSLAB_SIZE - 1) & ~(uintptr_t)(SUPERSLAB_SIZE - 1));
}

/* hakmem may find a header at the 2 MiB boundary below a pointer, but only
 * after its map of its own ranges says the pointer is hakmem's. */
static void test_inaccessible_superslab_boundary(void)
{
    unsigned char *mapping;
    size_t mapping_size;
    unsigned char *region = map_aligned_region(&mapping, &mapping_size);
    if (mprotect(region, page_size, PROT_NONE) != 0) {
        hard_error("mprotect failed: %s", strerror(errno));
    }
    expect_refused_untouched("a block in a 2 MiB-aligned region whose first page is PROT_NONE",
                             region + 64 * KiB, 4096);
    munmap(mapping, mapping_size);
}

/* A foreign region whose first page copies the first page of the 2 MiB
 * region holding a real small block: if hakmem trusted the header alone it
 * would take the foreign pointer for its own. */
static void test_lookalike_superslab_header(void)
{
    unsigned char *real_block = malloc(64);
    if (real_block == NULL) {
        hard_error("malloc(64) failed");
    }
    unsigned char *real_base =
        (unsigned char *)((uintptr_t)real_block & ~(uintptr_t)(SUPERSLAB_SIZE - 1));
    unsigned char *mapping;
    size_t mapping_size;
    unsigned char *region = map_aligned_region(&mapping, &mapping_size);
    memcpy(region, real_base, page_size);
    size_t offset = (size_t)(real_block - real_base);
    /* The pattern must not overwrite the copied header. */
    if (offset < page_size) {
        offset = page_size;
    }
    expect_refused_untouched("a block in a region that copies a hakmem header", region + offset,
                             64);
    free(real_block);
    munmap(mapping, mapping_size);
}

/* glibc's own malloc, reached past the interposition. */
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
    void *block = glibc_malloc(1000);
    if (block == NULL) {
        hard_error("glibc malloc(1000) failed");
    }
    expect_all_refused("a block from glibc's malloc", block);
}

static unsigned char static_buffer[8192] __attribute__((aligned(64)));

int main(void)
{
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IONBF, 0);

    test_null();
    expect_all_refused("the small integer 1", (void *)1);
    expect_all_refused("the small integer 4096", (void *)4096);
    expect_all_refused("a static buffer", static_buffer);
    expect_all_refused("a static buffer + 40", static_buffer + 40);
    test_stack_and_alloca();
    test_past_block("a pointer 1 GiB past a small block", 64);
    test_past_block("a pointer 1 GiB past an L25 block", 300 * KiB);
    test_past_block("a pointer 1 GiB past a large block", 4 * MiB);
    test_past_large_mapping();

    unsigned char *page = map_shared(page_size);
    expect_refused_untouched("an mmap'd page", page, page_size);
    expect_refused_untouched("an mmap'd page + 16", page + 16, 256);
    munmap(page, page_size);

    test_block_before_guard_page();
    test_inaccessible_superslab_boundary();
    test_lookalike_superslab_header();
    test_glibc_block();
    return test_result("test_foreign");
}

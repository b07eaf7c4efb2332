/* Heap faults a C program can commit, one per process: "heap_faults CASE
 * SIZE" commits the fault CASE on blocks of SIZE bytes under whatever
 * allocator is in place (glibc's, or one LD_PRELOADed), then carries on as
 * a program, or an exploit, would: it frees the block, allocates more of
 * the same size and uses them.  test_heap_faults.sh runs every case at
 * several sizes under several allocators and tabulates which catch what;
 * heap_faults.h has how a case ends.  "heap_faults --list" prints the
 * cases.
 *
 * The program links libc only, so that each allocator is the one preloaded.
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heap_faults.h"

/* The largest SIZE: the stack and global buffers hold that much. */
#define MAX_SIZE (1024 * 1024)

/* Every pointer and size passes through a volatile, so that the compiler
 * neither sees nor warns about the faults. */
static void *hide(void *ptr)
{
    void *volatile hidden = ptr;
    return hidden;
}

static size_t hide_size(size_t size)
{
    volatile size_t hidden = size;
    return hidden;
}

static char *must_malloc(size_t size)
{
    char *block = malloc(hide_size(size));
    if (block == NULL) {
        end_case(FAULT_SETUP_ERROR, "malloc failed");
    }
    memset(block, 'x', size);
    return block;
}

/* What follows the fault: more blocks of the size, written over whole and
 * freed, as the program goes on.  A corrupted free list hands out a wild
 * block here, and the writes to it crash. */
static void carry_on(size_t size)
{
    char *blocks[4];
    for (int i = 0; i < 4; i++) {
        blocks[i] = malloc(hide_size(size));
        if (blocks[i] != NULL) {
            memset(blocks[i], 'y', size);
        }
    }
    for (int i = 0; i < 4; i++) {
        free(blocks[i]);
    }
}

/* Bytes to write into a block and past it. */
static const char *source(size_t size)
{
    char *src = must_malloc(size + 64);
    memset(src, 'A', size + 64);
    return src;
}

/* ---- double frees ---- */

static void double_free(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    free(hide(block));
    carry_on(size);
}

/* glibc's fastbins check only the top entry. */
static void double_free_between(size_t size)
{
    char *block = must_malloc(size);
    char *other = must_malloc(size);
    free(block);
    free(other);
    free(hide(block));
    carry_on(size);
}

/* Enough frees between the two that the block left any thread cache. */
static void double_free_churn(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    char *others[64];
    for (int i = 0; i < 64; i++) {
        others[i] = must_malloc(size);
    }
    for (int i = 0; i < 64; i++) {
        free(others[i]);
    }
    free(hide(block));
    carry_on(size);
}

static void *free_there(void *block)
{
    free(block);
    return NULL;
}

static void double_free_thread(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    pthread_t thread;
    if (pthread_create(&thread, NULL, free_there, hide(block)) != 0) {
        end_case(FAULT_SETUP_ERROR, "pthread_create failed");
    }
    pthread_join(thread, NULL);
    carry_on(size);
}

/* The stale pointer frees the block after it was handed out again (or,
 * where it was not, frees it twice); the new owner's free comes second. */
static void double_free_stale(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    char *reused = must_malloc(size);
    free(hide(block));
    free(reused);
    carry_on(size);
}

static void realloc_zero_then_free(size_t size)
{
    char *block = must_malloc(size);
    char *kept = realloc(block, hide_size(0));
    if (kept == block) {
        end_case(FAULT_NOT_APPLICABLE, "realloc to 0 kept the block");
    }
    free(hide(block));
    free(kept);
    carry_on(size);
}

/* A block after it, so that realloc cannot grow it where it is. */
static char *moved_by_realloc(char *block, size_t size)
{
    char *fence = must_malloc(size);
    char *moved = realloc(block, hide_size(4 * size + 1024));
    if (moved == NULL) {
        end_case(FAULT_SETUP_ERROR, "realloc failed");
    }
    if (moved == block) {
        end_case(FAULT_NOT_APPLICABLE, "realloc did not move the block");
    }
    (void)fence;
    return moved;
}

static void realloc_moved_then_free(size_t size)
{
    char *block = must_malloc(size);
    char *moved = moved_by_realloc(block, size);
    free(hide(block));
    free(moved);
    carry_on(size);
}

static void realloc_freed(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    char *again = realloc(hide(block), hide_size(2 * size));
    if (again != NULL) {
        memset(again, 'z', 2 * size);
    }
    free(again);
    carry_on(size);
}

/* The program clears what it takes for a tcache key or a free tag, then
 * frees the block again. */
static void double_free_key_cleared(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    memset((char *)hide(block) + 8, 0, 8);
    free(hide(block));
    carry_on(size);
}

/* ---- frees of memory the allocator never handed out ---- */

static void free_small_integer(size_t size)
{
    free(hide((void *)(uintptr_t)size));
    carry_on(size);
}

static void free_stack(size_t size)
{
    char buffer[MAX_SIZE] __attribute__((aligned(16)));
    memset(buffer, 'x', size);
    free(hide(buffer));
    carry_on(size);
    __asm__ volatile("" : : "r"(buffer) : "memory");
}

static void free_alloca(size_t size)
{
    char *buffer = alloca(size);
    memset(buffer, 'x', size);
    free(hide(buffer));
    carry_on(size);
    __asm__ volatile("" : : "r"(buffer) : "memory");
}

static char global_buffer[MAX_SIZE] __attribute__((aligned(64)));

static void free_global(size_t size)
{
    memset(global_buffer, 'x', size);
    free(hide(global_buffer));
    carry_on(size);
}

static void free_far(size_t size)
{
    char *block = must_malloc(size);
    free(hide(block + ((size_t)1 << 30)));
    free(block);
    carry_on(size);
}

static void free_mmap(size_t size)
{
    char *mapped = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) {
        end_case(FAULT_SETUP_ERROR, "mmap failed");
    }
    memset(mapped, 'x', size);
    free(hide(mapped));
    carry_on(size);
}

/* ---- frees of pointers into a block, or just before it ---- */

static void free_at(size_t size, ptrdiff_t offset)
{
    char *block = must_malloc(size);
    free(hide(block + offset));
    free(block);
    carry_on(size);
}

static void free_plus_1(size_t size)
{
    free_at(size, 1);
}

static void free_plus_8(size_t size)
{
    free_at(size, 8);
}

static void free_plus_16(size_t size)
{
    free_at(size, 16);
}

static void free_middle(size_t size)
{
    free_at(size, (ptrdiff_t)(size / 2));
}

static void free_minus_8(size_t size)
{
    free_at(size, -8);
}

static void free_minus_16(size_t size)
{
    free_at(size, -16);
}

/* ---- writes before a block ----
 * The block has a neighbour allocated just before it, which the program
 * keeps; the write lands between the two. */

static void write_under(size_t size, ptrdiff_t from, int byte, size_t len)
{
    char *neighbour = must_malloc(size);
    char *block = must_malloc(size);
    memset((char *)hide(block) + from, byte, len);
    free(block);
    carry_on(size);
    (void)neighbour;
}

static void write_under_1(size_t size)
{
    write_under(size, -1, 'A', 1);
}

static void write_under_8(size_t size)
{
    write_under(size, -8, 'A', 8);
}

static void write_under_32(size_t size)
{
    write_under(size, -32, 'A', 32);
}

/* A copy to a destination 16 bytes too low. */
static void memcpy_under_16(size_t size)
{
    const char *src = source(size);
    char *neighbour = must_malloc(size);
    char *block = must_malloc(size);
    memcpy((char *)hide(block) - 16, src, size);
    free(block);
    carry_on(size);
    (void)neighbour;
}

/* Clearing a block from 8 bytes too low. */
static void memset_under_8(size_t size)
{
    write_under(size, -8, 0, size + 8);
}

/* ---- writes past the end of a block ---- */

static void write_past(size_t size, int byte, size_t len)
{
    char *block = must_malloc(size);
    char *next = must_malloc(size);
    memset((char *)hide(block) + size, byte, len);
    free(block);
    carry_on(size);
    (void)next;
}

/* The terminating NUL one past. */
static void write_past_1(size_t size)
{
    write_past(size, 0, 1);
}

static void write_past_8(size_t size)
{
    write_past(size, 'A', 8);
}

/* A copy 32 bytes too long, into the block allocated after. */
static void memcpy_over(size_t size)
{
    const char *src = source(size);
    char *block = must_malloc(size);
    char *next = must_malloc(size);
    memcpy(hide(block), src, size + 32);
    free(next);
    free(block);
    carry_on(size);
}

/* The same; the block overflowed is never freed, only its neighbour. */
static void memcpy_over_kept(size_t size)
{
    const char *src = source(size);
    char *block = must_malloc(size);
    char *next = must_malloc(size);
    memcpy(hide(block), src, size + 32);
    free(next);
    carry_on(size);
}

/* Into a neighbour that is free: the next mallocs take it. */
static void memcpy_over_free(size_t size)
{
    const char *src = source(size);
    char *block = must_malloc(size);
    char *next = must_malloc(size);
    free(next);
    memcpy(hide(block), src, size + 32);
    carry_on(size);
    free(block);
}

/* ---- writes after free ---- */

static void write_after_free(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    memset(hide(block), 'A', 8);
    carry_on(size);
}

static void write_after_free_middle(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    memset((char *)hide(block) + size / 2, 'A', size < 16 ? size / 2 : 8);
    carry_on(size);
}

/* A program clearing a buffer it has already freed. */
static void zero_after_free(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    memset(hide(block), 0, size);
    carry_on(size);
}

/* ---- realloc and malloc_usable_size of bad pointers ---- */

static void realloc_interior(size_t size)
{
    char *block = must_malloc(size);
    char *moved = realloc(hide(block + size / 2), hide_size(2 * size));
    if (moved != NULL) {
        memset(moved, 'z', 2 * size);
    }
    free(moved);
    free(block);
    carry_on(size);
}

static void realloc_stack(size_t size)
{
    char buffer[MAX_SIZE] __attribute__((aligned(16)));
    memset(buffer, 'x', size);
    char *moved = realloc(hide(buffer), hide_size(2 * size));
    if (moved != NULL) {
        memset(moved, 'z', 2 * size);
    }
    free(moved);
    carry_on(size);
    __asm__ volatile("" : : "r"(buffer) : "memory");
}

/* The program trusts the answer and fills that much. */
static void usable_size_interior(size_t size)
{
    char *block = must_malloc(size);
    char *inside = block + size / 2;
    size_t usable = malloc_usable_size(hide(inside));
    if (usable == 0) {
        end_case(FAULT_REPORTED, "malloc_usable_size: 0");
    }
    memset(inside, 'A', usable);
    free(block);
    carry_on(size);
}

/* ---- impossible sizes: the call must fail ---- */

static void impossible(void *ptr, const char *what)
{
    if (ptr == NULL && errno == ENOMEM) {
        end_case(FAULT_REPORTED, what);
    }
    say(ptr ? "succeeded: " : "wrong errno: ");
    say(what);
    say("\n");
}

static void malloc_huge(size_t size)
{
    errno = 0;
    impossible(malloc(hide_size(SIZE_MAX - size)), "malloc(SIZE_MAX - size)");
}

static void calloc_overflow(size_t size)
{
    errno = 0;
    impossible(calloc(hide_size(SIZE_MAX / size + 1), hide_size(size)), "calloc overflow");
}

static void reallocarray_overflow(size_t size)
{
    char *block = must_malloc(size);
    errno = 0;
    impossible(reallocarray(block, hide_size(SIZE_MAX / size + 1), hide_size(size)),
               "reallocarray overflow");
}

/* Three times a power of two is not one. */
static void memalign_bad(size_t size)
{
    void *ptr = NULL;
    int error = posix_memalign(&ptr, hide_size(3 * size), 64);
    if (error == EINVAL) {
        end_case(FAULT_REPORTED, "posix_memalign: EINVAL");
    }
    say(error ? "posix_memalign: wrong error\n" : "posix_memalign: succeeded\n");
}

struct fault {
    const char *name;
    void (*commit)(size_t size);
};

static const struct fault faults[] = {
    {"double_free", double_free},
    {"double_free_between", double_free_between},
    {"double_free_churn", double_free_churn},
    {"double_free_thread", double_free_thread},
    {"double_free_stale", double_free_stale},
    {"double_free_key_cleared", double_free_key_cleared},
    {"realloc_zero_then_free", realloc_zero_then_free},
    {"realloc_moved_then_free", realloc_moved_then_free},
    {"realloc_freed", realloc_freed},
    {"free_small_integer", free_small_integer},
    {"free_stack", free_stack},
    {"free_alloca", free_alloca},
    {"free_global", free_global},
    {"free_far", free_far},
    {"free_mmap", free_mmap},
    {"free_plus_1", free_plus_1},
    {"free_plus_8", free_plus_8},
    {"free_plus_16", free_plus_16},
    {"free_middle", free_middle},
    {"free_minus_8", free_minus_8},
    {"free_minus_16", free_minus_16},
    {"write_under_1", write_under_1},
    {"write_under_8", write_under_8},
    {"write_under_32", write_under_32},
    {"memcpy_under_16", memcpy_under_16},
    {"memset_under_8", memset_under_8},
    {"write_past_1", write_past_1},
    {"write_past_8", write_past_8},
    {"memcpy_over", memcpy_over},
    {"memcpy_over_kept", memcpy_over_kept},
    {"memcpy_over_free", memcpy_over_free},
    {"write_after_free", write_after_free},
    {"write_after_free_middle", write_after_free_middle},
    {"zero_after_free", zero_after_free},
    {"realloc_interior", realloc_interior},
    {"realloc_stack", realloc_stack},
    {"usable_size_interior", usable_size_interior},
    {"malloc_huge", malloc_huge},
    {"calloc_overflow", calloc_overflow},
    {"reallocarray_overflow", reallocarray_overflow},
    {"memalign_bad", memalign_bad},
};

#define FAULT_COUNT (sizeof(faults) / sizeof(faults[0]))

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < FAULT_COUNT; i++) {
            printf("%s\n", faults[i].name);
        }
        return 0;
    }
    char *end;
    size_t size = argc == 3 ? strtoul(argv[2], &end, 0) : 0;
    if (argc != 3 || *end || size == 0 || size > MAX_SIZE) {
        fprintf(stderr, "usage: heap_faults --list | heap_faults CASE SIZE (1 to 1 MiB)\n");
        return FAULT_SETUP_ERROR;
    }
    /* A corrupted heap can send an allocator into a loop: a hang is no
     * catch, and the runner sees it as SIGALRM. */
    alarm(10);
    for (size_t i = 0; i < FAULT_COUNT; i++) {
        if (!strcmp(argv[1], faults[i].name)) {
            faults[i].commit(size);
            end_case(FAULT_NOT_CAUGHT, "NOT CAUGHT");
        }
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return FAULT_SETUP_ERROR;
}

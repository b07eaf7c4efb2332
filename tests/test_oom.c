/* Out of memory: impossible requests fail with ENOMEM without harm, and under
 * an address-space limit (RLIMIT_AS) every failed allocation is NULL with
 * errno ENOMEM, and allocation works again once memory has been freed.  A
 * budget the program sets itself below the address space it has, but above
 * what it uses, lets its own mappings and threads through: address space
 * the allocator only reserved does not use it up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>

#include "harness.h"

#define LIMIT_HEADROOM (256 * MiB)

/* Blocks are chained through their first word, so that holding them all
 * costs no memory beyond theirs. */
struct chain {
    struct chain *next;
};

static void test_impossible_sizes(void)
{
    /* Neither fits in the 47-bit user address space of x86-64. */
    const size_t impossible[] = {200 * ((size_t)1 << 40), (size_t)PTRDIFF_MAX - 4095};

    for (size_t i = 0; i < sizeof(impossible) / sizeof(impossible[0]); i++) {
        size_t size = opaque_size(impossible[i]);

        errno = 0;
        void *block = malloc(size);
        int error = errno;
        CHECK(block == NULL, "malloc(%zu GiB) returned %p, expected NULL", size >> 30, block);
        CHECK(error == ENOMEM, "malloc(%zu GiB) set errno %d (%s), expected ENOMEM", size >> 30,
              error, strerror(error));
        free(block);
    }

    /* 1 TiB exceeds this machine's memory; whether the kernel grants the
     * address space depends on its overcommit policy (test_beyond_memory
     * has the default one), so either answer is right as long as it is a
     * consistent one. */
    size_t tebibyte = opaque_size((size_t)1 << 40);
    errno = 0;
    unsigned char *huge = malloc(tebibyte);
    int error = errno;
    if (huge == NULL) {
        CHECK(error == ENOMEM, "malloc(1 TiB) returned NULL with errno %d (%s), expected ENOMEM",
              error, strerror(error));
    } else {
        printf("malloc(1 TiB) succeeded (the kernel granted the address space)\n");
        huge[0] = 1;
        huge[tebibyte - 1] = 1;
        CHECK(malloc_usable_size(huge) >= tebibyte, "malloc(1 TiB): usable size %zu",
              malloc_usable_size(huge));
        free(huge);
    }

    void *after = malloc(MiB);
    CHECK(after != NULL, "malloc(1 MiB) failed after impossible requests");
    free(after);
}

/* Under the kernel's default policy (0) a request for more than memory and
 * swap together fails with ENOMEM, as glibc's malloc has it, where hakmem
 * mapped it unaccounted (MAP_NORESERVE), paid a page-map entry per 2 MiB
 * and left the program to the OOM killer at its first touch past memory.
 * (test_os_map has a mapping cut from a span that big, which succeeds.) */
static void test_beyond_memory(void)
{
    struct sysinfo info;
    if (overcommit_policy() != 0 || sysinfo(&info) != 0) {
        printf("vm.overcommit_memory is not 0: no request beyond memory\n");
        return;
    }
    size_t backed = ((size_t)info.totalram + info.totalswap) * info.mem_unit;
    size_t beyond = opaque_size(2 * backed);
    errno = 0;
    void *block = malloc(beyond);
    int error = errno;
    CHECK(block == NULL && error == ENOMEM,
          "malloc(%zu GiB), twice memory and swap: %p, errno %d (%s), expected NULL and ENOMEM",
          beyond >> 30, block, error, strerror(error));
    free(block);
}

/* Allocates blocks of `size` until one fails; returns the chain.  The
 * failure and a few retries after it must all report ENOMEM. */
static struct chain *allocate_until_failure(size_t size, size_t max_blocks, size_t *count)
{
    struct chain *head = NULL;

    *count = 0;
    while (*count < max_blocks) {
        errno = 0;
        struct chain *block = malloc(size);
        int error = errno;
        if (block == NULL) {
            CHECK(error == ENOMEM, "malloc(%zu) under RLIMIT_AS returned NULL with errno %d (%s)",
                  size, error, strerror(error));
            for (int retry = 0; retry < 3; retry++) {
                errno = 0;
                void *again = malloc(size);
                error = errno;
                CHECK(again == NULL && error == ENOMEM,
                      "malloc(%zu) retried after a failure: %p, errno %d", size, again, error);
                free(again);
            }
            return head;
        }
        block->next = head;
        head = block;
        (*count)++;
    }
    hard_error("%zu blocks of %zu bytes fit under an address-space limit of current usage + "
               "%zu MiB: RLIMIT_AS is not enforced",
               *count, size, LIMIT_HEADROOM / MiB);
    return NULL;
}

static void free_chain(struct chain *head)
{
    while (head != NULL) {
        struct chain *next = head->next;
        free(head);
        head = next;
    }
}

static void test_other_calls_when_exhausted(void)
{
    void *block;

    errno = 0;
    block = calloc(1, MiB);
    CHECK(block == NULL && errno == ENOMEM, "calloc(1, 1 MiB) with no memory left: %p, errno %d",
          block, errno);
    free(block);

    errno = 0;
    int error = posix_memalign(&block, 4096, MiB);
    CHECK(error == ENOMEM, "posix_memalign(4096, 1 MiB) with no memory left returned %d", error);
    if (error == 0) {
        free(block);
    }
    errno = 0;
    block = aligned_alloc(64 * KiB, MiB);
    CHECK(block == NULL && errno == ENOMEM,
          "aligned_alloc(64 KiB, 1 MiB) with no memory left: %p, errno %d", block, errno);
    free(block);
}

/* After the memory is freed, allocations of every kind succeed again,
 * including a single block larger than any allocated under pressure. */
static void test_recovery(void)
{
    static const size_t sizes[] = {64, 1000, 20000, 64 * KiB, 300000, MiB, 32 * MiB};

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t size = sizes[i];
        size_t count = 64 * MiB / size < 100000 ? 64 * MiB / size : 100000;
        struct chain *head = NULL;

        for (size_t n = 0; n < count; n++) {
            errno = 0;
            struct chain *block = malloc(size);
            if (block == NULL) {
                CHECK(0,
                      "malloc(%zu) failed (errno %d) after all memory was freed, with %zu "
                      "such blocks held",
                      size, errno, n);
                break;
            }
            memset(block, 0x42, size < 4096 ? size : 4096);
            block->next = head;
            head = block;
        }
        free_chain(head);
    }
}

#define BUDGET_HEADROOM (256 * MiB)

/* Address space mapped with no access at all: reserved, not used. */
static size_t reserved_bytes(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    if (maps == NULL) {
        hard_error("cannot read /proc/self/maps");
    }
    size_t bytes = 0;
    unsigned long start, end;
    char perms[8];
    char line[512];
    while (fgets(line, sizeof(line), maps)) {
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 && !strcmp(perms, "---p")) {
            bytes += end - start;
        }
    }
    fclose(maps);
    return bytes;
}

static void *no_work(void *arg)
{
    return arg;
}

/* A child's time, which a hang would pass. */
#define CHILD_SECONDS 120

/* How the child pid ended (waitpid's status). */
static int child_status(pid_t pid)
{
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        hard_error("waitpid: %s", strerror(errno));
    }
    return status;
}

/* In a child, which exits 0 when all went through, 1 at the first refusal
 * (the parent checks): what Python's resource.setrlimit(RLIMIT_AS, ...)
 * followed by an mmap, a thread and some allocations does. */
static void budget_child(size_t budget)
{
    struct rlimit limit;
    getrlimit(RLIMIT_AS, &limit);
    limit.rlim_cur = budget;
    if (setrlimit(RLIMIT_AS, &limit) != 0)
        _exit(1);
    void *own = mmap(NULL, 64 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (own == MAP_FAILED)
        _exit(1);
    pthread_t thread;
    if (pthread_create(&thread, NULL, no_work, NULL) != 0 || pthread_join(thread, NULL) != 0)
        _exit(1);
    for (int i = 0; i < 100000; i++)
        if (malloc(64) == NULL)
            _exit(1);
    _exit(0);
}

static void test_budget_below_address_space(void)
{
    free(malloc(64));
    size_t before = vsz_bytes();
    size_t budget = before - reserved_bytes() + BUDGET_HEADROOM;
    struct rlimit limit;
    getrlimit(RLIMIT_AS, &limit);
    if (budget >= before || limit.rlim_max < budget) {
        printf("no address space reserved beyond %zu MiB: the budget case is skipped\n",
               BUDGET_HEADROOM / MiB);
        return;
    }
    pid_t pid = fork_fault_child(CHILD_SECONDS);
    if (pid == 0) {
        budget_child(budget);
    }
    int status = child_status(pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "under a budget of %zu MiB, below the %zu MiB of address space the process had, its "
          "own mmap, thread or mallocs were refused",
          budget / MiB, before / MiB);
}

#define CACHED_BYTES (12 * MiB)
#define CACHED_HEADROOM (8 * MiB)

/* In a child (the limit stays), which exits as test_result has it: a large
 * block just freed stays mapped for reuse, seconds before it ages out, and
 * the 64 KiB blocks that then find no address space left under a limit
 * CACHED_HEADROOM above what the process maps get its room too, as they
 * would once it had aged.  Where it stayed, the blocks stopped at the limit
 * and a later call, after the mapping aged, found room again: an answer
 * that depended on the clock. */
/* callocs of an L25 size until one fails, each success with errno as it
 * was: where its own span's mapping failed and the retry after the trim
 * succeeded, errno kept the first failure's ENOMEM.  Returns the count. */
static size_t calloc_until_failure(struct chain **head)
{
    size_t count = 0, dirty = 0;
    for (;;) {
        errno = 0;
        struct chain *block = calloc(1, 300000);
        if (block == NULL) {
            break;
        }
        dirty += errno != 0;
        block->next = *head;
        *head = block;
        count++;
    }
    CHECK(dirty == 0, "%zu of %zu callocs of 300000 B that succeeded set errno", dirty, count);
    return count;
}

static void cached_child(bool by_calloc)
{
    unsigned char *large = malloc(CACHED_BYTES);
    if (large == NULL) {
        hard_error("malloc(%zu MiB) failed with no limit", CACHED_BYTES / MiB);
    }
    large[0] = 1;
    free(large);
    free(malloc(64 * KiB));
    struct rlimit limit;
    getrlimit(RLIMIT_AS, &limit);
    limit.rlim_cur = vsz_bytes() + CACHED_HEADROOM;
    if (setrlimit(RLIMIT_AS, &limit) != 0) {
        hard_error("setrlimit(RLIMIT_AS) failed: %s", strerror(errno));
    }
    if (by_calloc) {
        struct chain *tables = NULL;
        size_t count = calloc_until_failure(&tables);
        printf("%zu MiB cached, limit %zu MiB above use: %zu callocs of 300000 B\n",
               CACHED_BYTES / MiB, CACHED_HEADROOM / MiB, count);
        free_chain(tables);
        int result = test_result("test_oom (cached memory, calloc)");
        fflush(NULL);
        _exit(result);
    }
    size_t count;
    struct chain *mid = allocate_until_failure(64 * KiB, 4096, &count);
    printf("%zu MiB cached, limit %zu MiB above use: %zu blocks of 64 KiB\n", CACHED_BYTES / MiB,
           CACHED_HEADROOM / MiB, count);
    CHECK(count * 64 * KiB > CACHED_HEADROOM + CACHED_BYTES / 2,
          "%zu blocks of 64 KiB (%zu MiB) fit under a limit %zu MiB above use while a freed "
          "%zu MiB block stayed mapped: the cached memory was kept, not given back",
          count, count * 64 * KiB / MiB, CACHED_HEADROOM / MiB, CACHED_BYTES / MiB);
    free_chain(mid);
    int result = test_result("test_oom (cached memory)");
    fflush(NULL);
    _exit(result);
}

static void test_cached_memory_given_back(bool by_calloc)
{
    pid_t pid = fork_fault_child(CHILD_SECONDS);
    if (pid == 0) {
        cached_child(by_calloc);
    }
    int status = child_status(pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child that allocates under a limit with freed memory cached failed (status %#x)",
          status);
}

int main(void)
{
    struct rlimit limit;

    test_impossible_sizes();
    test_beyond_memory();

    if (under_valgrind()) {
        printf("under valgrind: the address-space limit part is skipped\n");
        return test_result("test_oom");
    }

    test_budget_below_address_space();
    test_cached_memory_given_back(false);
    test_cached_memory_given_back(true);

    /* Let the allocator set itself up (caches, maps) before the limit. */
    free(malloc(64));
    free(malloc(20000));
    free(malloc(300000));
    free(malloc(2 * MiB));

    size_t usage = vsz_bytes();
    limit.rlim_cur = limit.rlim_max = usage + LIMIT_HEADROOM;
    if (setrlimit(RLIMIT_AS, &limit) != 0) {
        hard_error("setrlimit(RLIMIT_AS) failed: %s", strerror(errno));
    }
    printf("address space in use %zu MiB, limit %zu MiB\n", usage / MiB,
           (size_t)limit.rlim_cur / MiB);

    size_t large_count, mid_count, small_count;
    struct chain *large = allocate_until_failure(MiB, 4096, &large_count);
    struct chain *mid = allocate_until_failure(64 * KiB, 65536, &mid_count);
    struct chain *small = allocate_until_failure(64, (size_t)64 << 20, &small_count);
    printf("under the limit: %zu blocks of 1 MiB, then %zu of 64 KiB, then %zu of 64 B\n",
           large_count, mid_count, small_count);
    CHECK(large_count >= 64,
          "only %zu blocks of 1 MiB fit in %zu MiB of address space: allocation fails "
          "spuriously under RLIMIT_AS",
          large_count, LIMIT_HEADROOM / MiB);

    test_other_calls_when_exhausted();
    free_chain(small);
    free_chain(mid);
    free_chain(large);
    test_recovery();
    return test_result("test_oom");
}

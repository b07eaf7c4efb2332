/* Helpers shared by the hakmem tests: failure reporting in the automake
 * test-harness convention, verifiable data patterns, process memory figures.
 */
#ifndef HAKMEM_TESTS_HARNESS_H
#define HAKMEM_TESTS_HARNESS_H

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Exit statuses the automake parallel test driver understands besides 0
 * (pass) and 1 (fail). */
#define EXIT_SKIP 77
#define EXIT_HARD_ERROR 99

/* Beyond this many failed checks the rest are consequences, not news. */
#define MAX_REPORTED_FAILURES 40

/* Atomic because the threaded tests check from every thread. */
static atomic_int check_failures;

static inline void check_failed(const char *file, int line, const char *fmt, ...)
{
    va_list args;

    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    if (atomic_fetch_add(&check_failures, 1) + 1 >= MAX_REPORTED_FAILURES) {
        fprintf(stderr, "too many failures, stopping\n");
        exit(EXIT_FAILURE);
    }
}

/* CHECK(condition, printf-format, args...): records a failure with the
 * message and carries on, so one run shows every broken case. */
#define CHECK(cond, ...) ((cond) ? (void)0 : check_failed(__FILE__, __LINE__, __VA_ARGS__))

/* For failures of the test's own machinery (thread creation, mmap of test
 * buffers): the result would say nothing about the allocator. */
static inline void hard_error(const char *fmt, ...)
{
    va_list args;

    fprintf(stderr, "ERROR: ");
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    exit(EXIT_HARD_ERROR);
}

static inline int test_result(const char *name)
{
    int failures = atomic_load(&check_failures);

    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return EXIT_FAILURE;
    }
    printf("%s: all checks passed\n", name);
    return EXIT_SUCCESS;
}

/* Runs this program again with name=value in its environment, unless it is
 * set already (glibc reads tunables, hakmem its options, at start-up). */
static inline void rerun_with(const char *name, const char *value, char **argv)
{
    if (getenv(name) == NULL) {
        setenv(name, value, 1);
        execv("/proc/self/exe", argv);
        hard_error("cannot run %s again", argv[0]);
    }
}

/* Forks a child to commit a fault in: the child writes no core file and is
 * killed after seconds, so that a fault neither litters nor hangs. */
static inline pid_t fork_fault_child(unsigned seconds)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        hard_error("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        alarm(seconds);
    }
    return pid;
}

/* Reads fd to its end (a child's pipe) into buffer, NUL-terminated. */
static inline size_t read_all(int fd, char *buffer, size_t size)
{
    size_t used = 0;
    while (used + 1 < size) {
        ssize_t got = read(fd, buffer + used, size - 1 - used);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            break;
        }
        used += (size_t)got;
    }
    buffer[used] = 0;
    return used;
}

/* Sizes travel through a volatile so that the compiler can neither fold
 * allocation calls nor warn about deliberately absurd sizes. */
static inline size_t opaque_size(size_t size)
{
    volatile size_t hidden = size;
    return hidden;
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t rng_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return mix64(*state);
}

/* Uniform in [lo, hi]. */
static inline size_t rng_range(uint64_t *state, size_t lo, size_t hi)
{
    return lo + (size_t)(rng_next(state) % (hi - lo + 1));
}

/* One tier of a size mix: sizes in [min, max], drawn per_mille times in a
 * thousand. */
struct size_tier {
    unsigned per_mille;
    size_t min, max;
};

/* A size from a mix of tiers whose shares add up to a thousand. */
static inline size_t tiered_size(uint64_t *rng, const struct size_tier *tiers, size_t count)
{
    unsigned roll = (unsigned)(rng_next(rng) % 1000);
    size_t i = 0;
    for (; i + 1 < count && roll >= tiers[i].per_mille; i++)
        roll -= tiers[i].per_mille;
    return rng_range(rng, tiers[i].min, tiers[i].max);
}

#define TIERED_SIZE(rng, tiers) tiered_size(rng, tiers, sizeof(tiers) / sizeof((tiers)[0]))

static inline uint64_t pattern_key(const void *ptr, size_t size, uint64_t seed)
{
    return mix64((uint64_t)(uintptr_t)ptr ^ mix64(size) ^ seed);
}

/* Byte i of a pattern is byte (i % 8) of the word mix64(key + i / 8), so a
 * prefix of a pattern can be verified after the block moved (realloc).
 * The tests are built with -fno-builtin so that the compiler cannot reason
 * away allocator calls; the explicit builtins keep these word copies inline. */
static inline void fill_pattern(void *ptr, size_t len, uint64_t key)
{
    unsigned char *bytes = ptr;
    size_t words = len / 8;

    for (size_t w = 0; w < words; w++) {
        uint64_t value = mix64(key + w);
        __builtin_memcpy(bytes + 8 * w, &value, 8);
    }
    uint64_t tail = mix64(key + words);
    for (size_t i = 8 * words; i < len; i++) {
        bytes[i] = (unsigned char)(tail >> (8 * (i % 8)));
    }
}

#define PATTERN_INTACT SIZE_MAX

/* Returns the offset of the first byte that differs from the pattern, or
 * PATTERN_INTACT. */
static inline size_t pattern_mismatch(const void *ptr, size_t len, uint64_t key)
{
    const unsigned char *bytes = ptr;
    size_t words = len / 8;

    for (size_t w = 0; w < words; w++) {
        uint64_t value = mix64(key + w);
        if (__builtin_memcmp(bytes + 8 * w, &value, 8) != 0) {
            for (size_t i = 8 * w;; i++) {
                if (bytes[i] != (unsigned char)(value >> (8 * (i % 8)))) {
                    return i;
                }
            }
        }
    }
    uint64_t tail = mix64(key + words);
    for (size_t i = 8 * words; i < len; i++) {
        if (bytes[i] != (unsigned char)(tail >> (8 * (i % 8)))) {
            return i;
        }
    }
    return PATTERN_INTACT;
}

/* Returns the offset of the first byte that is not zero, or PATTERN_INTACT. */
static inline size_t nonzero_offset(const void *ptr, size_t len)
{
    const unsigned char *bytes = ptr;

    for (size_t i = 0; i < len; i++) {
        if (bytes[i] != 0) {
            return i;
        }
    }
    return PATTERN_INTACT;
}

/* Field 0 (total program size) or 1 (resident set) of /proc/self/statm, in
 * bytes. */
static inline size_t statm_bytes(int field)
{
    unsigned long pages[2];
    FILE *statm = fopen("/proc/self/statm", "r");

    if (statm == NULL) {
        hard_error("cannot open /proc/self/statm");
    }
    if (fscanf(statm, "%lu %lu", &pages[0], &pages[1]) != 2) {
        hard_error("cannot parse /proc/self/statm");
    }
    fclose(statm);
    return pages[field] * (size_t)sysconf(_SC_PAGESIZE);
}

static inline size_t rss_bytes(void)
{
    return statm_bytes(1);
}

static inline size_t vsz_bytes(void)
{
    return statm_bytes(0);
}

/* The process's minor page faults so far. */
static inline long minor_faults(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

/* The kernel's overcommit policy (vm.overcommit_memory), or -1. */
static inline int overcommit_policy(void)
{
    FILE *file = fopen("/proc/sys/vm/overcommit_memory", "r");
    int policy = -1;
    if (file) {
        if (fscanf(file, "%d", &policy) != 1)
            policy = -1;
        fclose(file);
    }
    return policy;
}

/* Whether the kernel backs all anonymous memory with huge pages, where a
 * write faults in 2 MiB at once. */
static inline int thp_always(void)
{
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f != NULL) {
        if (fgets(mode, sizeof(mode), f) == NULL) {
            mode[0] = 0;
        }
        fclose(f);
    }
    return strstr(mode, "[always]") != NULL;
}

/* Valgrind preloads its own helpers; under it RSS and address-space limits
 * describe valgrind's bookkeeping rather than the allocator's. */
static inline int under_valgrind(void)
{
    const char *preload = getenv("LD_PRELOAD");
    return preload != NULL && strstr(preload, "vgpreload") != NULL;
}

static inline double seconds_now(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

/* A large block's head: on the 4 KiB page of the block's first byte, or
 * on the page before where the block starts a page (a large block starts
 * at its colour, a cache line of its head's page: arena/large.c). */
static inline uintptr_t large_block_head(const void *block)
{
    return ((uintptr_t)block - 1) & ~(uintptr_t)4095;
}

#endif

/* What the white-box unit tests share: checks that report and carry on, the
 * automake exit statuses, and a few helpers over memory the tests map
 * themselves.  The tests link the allocator's objects directly, so they see
 * its internal headers (src/). */
#ifndef HAKMEM_UNIT_H
#define HAKMEM_UNIT_H

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define UNIT_EXIT_SKIP 77
#define UNIT_EXIT_HARD_ERROR 99

/* After this many failures the rest are consequences, not news. */
#define UNIT_MAX_FAILURES 30

static atomic_int unit_failures;

static inline void unit_fail(const char *file, int line, const char *fmt, ...)
{
    va_list args;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    if (atomic_fetch_add(&unit_failures, 1) + 1 >= UNIT_MAX_FAILURES) {
        fprintf(stderr, "too many failures, stopping\n");
        exit(EXIT_FAILURE);
    }
}

/* CHECK(condition, printf-format, args...): records a failure and goes on. */
#define CHECK(cond, ...) ((cond) ? (void)0 : unit_fail(__FILE__, __LINE__, __VA_ARGS__))

/* The test's own machinery failed (mmap, thread creation): the run says
 * nothing about the allocator. */
static inline void unit_hard_error(const char *fmt, ...)
{
    va_list args;
    fprintf(stderr, "ERROR: ");
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    exit(UNIT_EXIT_HARD_ERROR);
}

static inline int unit_result(const char *name)
{
    int failures = atomic_load(&unit_failures);
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return EXIT_FAILURE;
    }
    printf("%s: all checks passed\n", name);
    return EXIT_SUCCESS;
}

static void unit_timed_out(int sig)
{
    static const char message[] = "FAIL: timed out (a lost block or a livelock)\n";
    (void)sig;
    ssize_t written = write(2, message, sizeof(message) - 1);
    (void)written;
    _exit(EXIT_FAILURE);
}

/* A broken allocator may loop forever on a list it corrupted: fail instead
 * of holding up the test suite.  Generous, for runs under valgrind. */
static inline void unit_watchdog(void)
{
    signal(SIGALRM, unit_timed_out);
    alarm(120);
}

/* Fresh anonymous memory, in small pages so that residency is per page. */
static inline void *unit_map(size_t size)
{
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        unit_hard_error("mmap of %zu bytes failed", size);
    madvise(mem, size, MADV_NOHUGEPAGE);
    return mem;
}

static inline bool unit_page_resident(const void *page)
{
    unsigned char vec;
    if (mincore((void *)((uintptr_t)page & ~(uintptr_t)4095), 4096, &vec) != 0)
        unit_hard_error("mincore failed");
    return vec & 1;
}

static inline void unit_thread_start(pthread_t *thread, void *(*body)(void *), void *arg)
{
    if (pthread_create(thread, NULL, body, arg) != 0)
        unit_hard_error("pthread_create failed");
}

static inline void unit_thread_join(pthread_t thread)
{
    if (pthread_join(thread, NULL) != 0)
        unit_hard_error("pthread_join failed");
}

/* A byte that depends on the address and a seed: a block written with it
 * shows whether anything else wrote over it. */
static inline unsigned char unit_pattern_byte(const void *addr, unsigned seed)
{
    uintptr_t a = (uintptr_t)addr;
    return (unsigned char)((a >> 3) ^ (a >> 11) ^ seed);
}

static inline void unit_fill(void *mem, size_t len, unsigned seed)
{
    unsigned char *bytes = mem;
    for (size_t i = 0; i < len; i++)
        bytes[i] = unit_pattern_byte(bytes + i, seed);
}

/* Offset of the first byte that is not the pattern, or len. */
static inline size_t unit_pattern_mismatch(const void *mem, size_t len, unsigned seed)
{
    const unsigned char *bytes = mem;
    for (size_t i = 0; i < len; i++)
        if (bytes[i] != unit_pattern_byte(bytes + i, seed))
            return i;
    return len;
}

/* Offset of the first byte that is not zero, or len. */
static inline size_t unit_nonzero_offset(const void *mem, size_t len)
{
    const unsigned char *bytes = mem;
    for (size_t i = 0; i < len; i++)
        if (bytes[i])
            return i;
    return len;
}

#endif

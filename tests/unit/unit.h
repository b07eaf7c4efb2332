/* What the white-box unit tests add to the shared test helpers (../harness.h):
 * a watchdog, memory the tests map themselves, and thread start-up that
 * fails hard.  The tests link the allocator's objects directly, so they see
 * its internal headers (src/). */
#ifndef HAKMEM_UNIT_H
#define HAKMEM_UNIT_H

#include "../harness.h"
#include "internal.h"
#include "front/thread_heap.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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
        hard_error("mmap of %zu bytes failed", size);
    madvise(mem, size, MADV_NOHUGEPAGE);
    return mem;
}

/* Makes a span in the HotSpanBox look freed ms milliseconds earlier (not
 * before the clock's start), so that tests of its aging need not sleep. */
static inline void unit_age_hot_span(struct hak_slab *span, uint64_t ms)
{
    span->freed_ms = span->freed_ms > ms ? span->freed_ms - ms : 0;
}

/* Sleeps ms milliseconds, all of them (a signal's wake-up sleeps on). */
static inline void unit_sleep_ms(unsigned ms)
{
    struct timespec left = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

static inline bool unit_page_resident(const void *page)
{
    unsigned char vec;
    if (mincore((void *)((uintptr_t)page & ~(uintptr_t)4095), 4096, &vec) != 0)
        hard_error("mincore failed");
    return vec & 1;
}

/* The process's address space, in bytes (/proc/self/statm). */
static inline size_t unit_address_space(void)
{
    FILE *statm = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!statm || fscanf(statm, "%lu", &pages) != 1)
        hard_error("cannot read /proc/self/statm");
    fclose(statm);
    return pages * HAK_PAGE_SIZE;
}

/* malloc, after which the caller reads hakmem's state afresh: GCC takes
 * malloc to write no memory the caller can read, and keeps what it read of
 * the thread's caches before the call (hak_tls.room, say). */
static inline void *unit_malloc(size_t size)
{
    void *block = malloc(size);
    __asm__ __volatile__("" ::: "memory");
    return block;
}

/* count blocks of size, each malloc'd in turn, then each freed: a batch a
 * cache must take in and give back whole. */
static inline void unit_malloc_free_batch(void **blocks, size_t count, size_t size)
{
    for (size_t i = 0; i < count; i++)
        if (!(blocks[i] = malloc(size)))
            hard_error("malloc(%zu) failed", size);
    for (size_t i = 0; i < count; i++)
        free(blocks[i]);
}

/* Class cls's counters, summed over the live heaps and those of the
 * threads that exited. */
static inline struct hak_class_stats unit_class_stats(unsigned cls)
{
    struct hak_class_stats totals[HAK_NUM_CLASSES] = {0};
    hak_heap_sum_stats(totals);
    return totals[cls];
}

/* Pointers in address order, for qsort and bsearch. */
static inline int unit_compare_pointers(const void *a, const void *b)
{
    uintptr_t left = *(const uintptr_t *)a, right = *(const uintptr_t *)b;
    return (left > right) - (left < right);
}

static inline void unit_thread_start(pthread_t *thread, void *(*body)(void *), void *arg)
{
    if (pthread_create(thread, NULL, body, arg) != 0)
        hard_error("pthread_create failed");
}

static inline void unit_thread_join(pthread_t thread)
{
    if (pthread_join(thread, NULL) != 0)
        hard_error("pthread_join failed");
}

/* body(arg) in a thread of its own, which is over when this returns. */
static inline void unit_thread_run(void *(*body)(void *), void *arg)
{
    pthread_t thread;
    unit_thread_start(&thread, body, arg);
    unit_thread_join(thread);
}

#endif

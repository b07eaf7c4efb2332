/* A short-lived process reads no /proc file for the allocator's sake: one
 * that mallocs blocks of every kind (small, Mid, L25, large) and starts a
 * thread that mallocs too opens no /proc/self/status, whose look at locked
 * memory (os.c) only lending needs, and lending only once spans or spare
 * SuperSlabs were freed (e886403 kept it out of a process's first
 * SuperSlab; the fault rule's question whether pages can move asks only
 * when faults would send a cache back).  The program plays open() to count
 * (the allocator's objects are linked in) and runs with HAKMEM_NUMA=off,
 * as on several nodes the topology's discovery reads the cpuset's list
 * there. */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>

#include "unit.h"

static volatile unsigned status_opens;

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list args;
        va_start(args, flags);
        mode = (mode_t)va_arg(args, int);
        va_end(args);
    }
    if (strcmp(path, "/proc/self/status") == 0)
        status_opens++;
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

/* The second thread's block, freed by the first. */
static void *allocate_in_thread(void *size)
{
    char *block = malloc((size_t)(uintptr_t)size);
    if (block)
        block[0] = 1;
    return block;
}

int main(int argc, char **argv)
{
    (void)argc;
    unit_watchdog();
    rerun_with("HAKMEM_NUMA", "off", argv);
    static const size_t sizes[] = {16, 200, 1000, 3000, 20000, 100000, 600000, 4 << 20};
    void *blocks[sizeof(sizes) / sizeof(sizes[0])];
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        blocks[i] = unit_malloc(sizes[i]);
        if (!blocks[i])
            hard_error("malloc(%zu) failed", sizes[i]);
        memset(blocks[i], 1, sizes[i]);
    }
    pthread_t thread;
    void *block = NULL;
    if (pthread_create(&thread, NULL, allocate_in_thread, (void *)(uintptr_t)64) != 0 ||
        pthread_join(thread, &block) != 0 || !block)
        hard_error("the second thread did not allocate");
    free(block);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        free(blocks[i]);
    CHECK(status_opens == 0, "a short-lived process opened /proc/self/status %u times",
          status_opens);
    return test_result("test_startup_reads");
}

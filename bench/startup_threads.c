/* The smallest process that starts a second thread and allocates in it.
 *
 * tools/startup-bench times it under each allocator next to /bin/true: a
 * single-threaded process never makes hakmem discover the NUMA topology
 * (issue 8), while this one does on a machine with several nodes, so the
 * difference between the two is what topology discovery costs a
 * short-lived process. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *allocate_once(void *unused)
{
    (void)unused;
    char *block = malloc(64);
    if (block)
        memset(block, 1, 64);
    return block;
}

int main(void)
{
    pthread_t thread;
    int error = pthread_create(&thread, NULL, allocate_once, NULL);
    if (error) {
        fprintf(stderr, "startup_threads: pthread_create: %s\n", strerror(error));
        return 1;
    }
    void *block;
    pthread_join(thread, &block);
    if (!block) {
        fprintf(stderr, "startup_threads: malloc(64) failed in the second thread\n");
        return 1;
    }
    /* Freed here, by the other thread, as a short-lived worker's result would be. */
    free(block);
    return 0;
}

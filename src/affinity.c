/* A thread that pins itself to another node's CPUs gets that node's memory
 * from its very next malloc: hakmem wraps the two calls that re-pin a thread
 * and, once the kernel has moved the thread, sends the blocks its caches
 * hold back to their home node.  Where glibc registered rseq, malloc itself
 * notices every move once the process knows its nodes (thread_heap.h); the
 * wrappers still matter for the rest: a process that has not loaded its
 * topology yet loads it now (a thread that pins itself cares where its
 * memory is), and without rseq a move is otherwise noticed only at the
 * thread's next refill. */
#include "config.h"

#if HAKMEM_HAVE_NUMA

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "front/thread_heap.h"
#include "internal.h"
#include "next_symbol.h"

typedef int sched_setaffinity_fn(pid_t, size_t, const cpu_set_t *);
typedef int pthread_setaffinity_np_fn(pthread_t, size_t, const cpu_set_t *);

static void *next_sched_setaffinity;
static void *next_pthread_setaffinity_np;

HAK_API int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask)
{
    sched_setaffinity_fn *next = hak_next_symbol(&next_sched_setaffinity, "sched_setaffinity");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    int status = next(pid, size, mask);
    if (status == 0 && (pid == 0 || pid == gettid()))
        hak_heap_follow_thread_node();
    return status;
}

HAK_API int pthread_setaffinity_np(pthread_t thread, size_t size, const cpu_set_t *mask)
{
    pthread_setaffinity_np_fn *next =
        hak_next_symbol(&next_pthread_setaffinity_np, "pthread_setaffinity_np");
    if (!next)
        return ENOSYS;
    int status = next(thread, size, mask);
    if (status == 0 && pthread_equal(thread, pthread_self()))
        hak_heap_follow_thread_node();
    return status;
}

#endif

/* A thread that pins itself to another node's CPUs gets that node's memory
 * from its very next malloc, not from its next cache refill: hakmem wraps
 * the two calls that re-pin a thread and, once the kernel has moved the
 * thread, sends the blocks its caches hold back to their home node.  The
 * fast paths stay free of any node check (issue 5).  Moves the kernel makes
 * on its own, and re-pinning another thread, are still noticed at the
 * thread's next refill. */
#include "config.h"

#if HAKMEM_HAVE_NUMA

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "../front/thread_heap.h"
#include "../internal.h"

typedef int sched_setaffinity_fn(pid_t, size_t, const cpu_set_t *);
typedef int pthread_setaffinity_np_fn(pthread_t, size_t, const cpu_set_t *);

/* The C library's own, looked up on first use (never from inside malloc). */
static sched_setaffinity_fn *next_sched_setaffinity;
static pthread_setaffinity_np_fn *next_pthread_setaffinity_np;

HAK_API int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask)
{
    if (!next_sched_setaffinity)
        next_sched_setaffinity = (sched_setaffinity_fn *)dlsym(RTLD_NEXT, "sched_setaffinity");
    int status = next_sched_setaffinity(pid, size, mask);
    if (status == 0 && (pid == 0 || pid == gettid()))
        hak_heap_follow_thread_node();
    return status;
}

HAK_API int pthread_setaffinity_np(pthread_t thread, size_t size, const cpu_set_t *mask)
{
    if (!next_pthread_setaffinity_np)
        next_pthread_setaffinity_np =
            (pthread_setaffinity_np_fn *)dlsym(RTLD_NEXT, "pthread_setaffinity_np");
    int status = next_pthread_setaffinity_np(thread, size, mask);
    if (status == 0 && pthread_equal(thread, pthread_self()))
        hak_heap_follow_thread_node();
    return status;
}

#endif

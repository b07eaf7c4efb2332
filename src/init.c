/* Process start-up and fork. */
#include <sched.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "arena/abandoned.h"
#include "arena/hot_span_box.h"
#include "arena/large.h"
#include "arena/meta.h"
#include "arena/page_arena.h"
#include "arena/page_map.h"
#include "arena/shared_pool.h"
#include "arena/superslab.h"
#include "block/block_link.h"
#include "front/thread_heap.h"
#include "fault.h"
#include "fork_locks.h"
#include "harden.h"
#include "internal.h"
#include "numa/node.h"
#include "options.h"
#include "os.h"
#include "stats.h"
#include "stats_report.h"
#include "hakmem.h"

struct hak_slab hak_empty_slab = {.kind = HAK_SLAB_INVALID, .free_node = HAK_NO_NODE};
struct hak_slab hak_invalid_slab = {.kind = HAK_SLAB_INVALID, .free_node = HAK_NO_NODE};
struct hak_slab hak_interior_slab = {.kind = HAK_SLAB_INVALID, .free_node = HAK_NO_NODE};
struct hak_heap hak_empty_heap;

enum { INIT_NONE, INIT_RUNNING, INIT_DONE };
static _Atomic int init_state HAK_START_UP = INIT_NONE;
static __thread bool initializing_here __attribute__((tls_model("initial-exec")));

/* Locks are taken in one order everywhere, so fork takes them in it too.
 * Only the nodes in use: every node's state has pages of its own, each one
 * a copy-on-write fault in the parent after each fork and another in the
 * child, for locks no thread can hold (issue 15); the locks themselves
 * share a page (fork_locks.h).
 *
 * None in a process that never started a second thread: no other thread can
 * hold one, and the one thread may, when a signal handler forks while it is
 * inside hakmem, which glibc supports there (its malloc takes no lock then);
 * taking them would wait on itself for good.  The child carries on with the
 * locks as the parent had them, the interrupted call with them.
 *
 * The C library's lock on its list of streams comes first, as glibc takes
 * it before its own malloc's locks: fork takes it after the handlers, and
 * a thread that flushes every stream holds it while it waits on a stream
 * whose holder is inside malloc (getline growing its buffer), so fork
 * holding hakmem's locks by then waited on that thread, and it on fork
 * (glibc's tst-malloc-fork-deadlock, which hung every time). */
static void fork_prepare(void)
{
    bool held = !hak_os_single_threaded();
    atomic_store_explicit(&hak_fork_locks.held, held, memory_order_relaxed);
    if (!held)
        return;
    hak_os_stdio_list_lock();
    hak_numa_count_lock();
    hak_fork_locks.nodes = hak_numa_node_count();
    hak_heap_hold_for_fork();
    hak_abandoned_lock();
    hak_shared_pool_lock_all(hak_fork_locks.nodes);
    hak_hot_span_lock_all(hak_fork_locks.nodes);
    hak_page_arena_lock_all(hak_fork_locks.nodes);
    hak_large_lock_all(hak_fork_locks.nodes);
    hak_meta_lock();
    hak_superslab_region_lock();
    hak_page_map_lock();
    hak_os_reservation_lock();
}

static void release_locks(void)
{
    hak_os_reservation_unlock();
    hak_page_map_unlock();
    hak_superslab_region_unlock();
    hak_meta_unlock();
    hak_large_unlock_all(hak_fork_locks.nodes);
    hak_page_arena_unlock_all(hak_fork_locks.nodes);
    hak_hot_span_unlock_all(hak_fork_locks.nodes);
    hak_shared_pool_unlock_all(hak_fork_locks.nodes);
    hak_abandoned_unlock();
    hak_heap_release_after_fork();
    hak_numa_count_unlock();
}

static bool fork_held_locks(void)
{
    return atomic_load_explicit(&hak_fork_locks.held, memory_order_relaxed);
}

static void fork_parent(void)
{
    if (!fork_held_locks())
        return;
    release_locks();
    hak_os_stdio_list_unlock();
}

/* A parent with one thread has no other threads' heaps to forget.  glibc
 * has made the stream list's lock free in the child already; made free
 * again, it is free whatever the C library did with the hold this
 * process's prepare handler took. */
static void fork_child(void)
{
    if (!fork_held_locks())
        return;
    hak_heap_forget_other_threads();
    release_locks();
    hak_os_stdio_list_reset();
}

static void init_once(void)
{
    if (getauxval(AT_PAGESZ) != HAK_PAGE_SIZE)
        hak_fatal("this build needs 4 KiB pages", NULL);
    hak_options_load();
    hak_stats_setup();
    hak_harden_init();
    hak_block_link_init();
    hak_numa_init();
    if (!hak_heap_setup())
        hak_fatal("cannot create the thread-exit key", NULL);
    /* May allocate: the nested call sees initializing_here and goes on. */
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void hak_init(void)
{
    if (HAK_LIKELY(atomic_load_explicit(&init_state, memory_order_acquire) == INIT_DONE) ||
        initializing_here)
        return;
    int expected = INIT_NONE;
    if (atomic_compare_exchange_strong(&init_state, &expected, INIT_RUNNING)) {
        initializing_here = true;
        init_once();
        initializing_here = false;
        atomic_store_explicit(&init_state, INIT_DONE, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&init_state, memory_order_acquire) != INIT_DONE)
        sched_yield();
}

__attribute__((constructor)) static void hak_start(void)
{
    hak_init();
}

__attribute__((destructor)) static void hak_finish(void)
{
    hak_stats_report_at_exit();
}

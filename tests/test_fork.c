/* fork() from a multi-threaded parent whose threads allocate without pause:
 * each child must be able to allocate and free across all sizes, free blocks
 * that parent threads (absent in the child) allocated, and start a thread of
 * its own.  A child that hangs on a lock held at fork time is killed by an
 * alarm and reported.  And the fork handlers copy little of the parent: the
 * child's minor faults by its first statement stay below a bound that the
 * C library's fork path and the locks of the nodes in use fit in, where
 * hakmem's state of all 64 possible nodes took over 120 (issue 15).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define WORKERS 3
#define FORKS 30
#define CHILD_TIMEOUT_SECONDS 20
/* glibc's fork path alone costs the child some 30 faults. */
#define CHILD_START_FAULTS_MAX 100

enum child_status {
    CHILD_OK = 0,
    CHILD_ALLOCATION_FAILED = 2,
    CHILD_CORRUPTION = 3,
    CHILD_THREAD_FAILED = 4,
    CHILD_TOO_MANY_FAULTS = 5,
    CHILD_BAD_MALLINFO = 6,
};

/* Blocks published by the workers: the first word holds the size, the rest
 * a pattern keyed by the address. */
static _Atomic(uint64_t *) published[WORKERS];
static atomic_int stop_requested;
/* Set while a child runs: what matters is the state at fork time, and on a
 * small machine busy workers would starve the child. */
static atomic_int workers_paused;

static const struct size_tier worker_sizes[] = {
    {800, 16, 1024},
    {150, 1025, 32 * KiB},
    {40, 32 * KiB + 1, MiB},
    {10, MiB + 1, 3 * MiB},
};

static uint64_t *make_published_block(size_t size)
{
    uint64_t *block = malloc(size);

    if (block != NULL) {
        block[0] = size;
        fill_pattern(block + 1, size - 8, (uint64_t)(uintptr_t)block);
    }
    return block;
}

/* Returns 1 if the block is intact. */
static int check_and_free_published(uint64_t *block)
{
    size_t size = (size_t)block[0];
    int intact =
        size >= 16 && size <= 3 * MiB &&
        pattern_mismatch(block + 1, size - 8, (uint64_t)(uintptr_t)block) == PATTERN_INTACT;
    free(block);
    return intact;
}

static void *run_worker(void *arg)
{
    int id = (int)(uintptr_t)arg;
    uint64_t rng = 1000 + (uint64_t)id;

    while (!atomic_load_explicit(&stop_requested, memory_order_relaxed)) {
        while (atomic_load_explicit(&workers_paused, memory_order_relaxed)) {
            usleep(500);
        }
        uint64_t *block = make_published_block(TIERED_SIZE(&rng, worker_sizes));
        if (block == NULL) {
            hard_error("worker %d: malloc failed", id);
        }
        uint64_t *previous = atomic_exchange(&published[id], block);
        if (previous != NULL) {
            CHECK(check_and_free_published(previous),
                  "worker %d: its own published block was corrupted", id);
        }
    }
    return NULL;
}

static void *run_child_thread(void *unused)
{
    (void)unused;
    for (size_t size = 8; size <= 2 * MiB; size = size * 2 + 8) {
        void *block = malloc(size);
        if (block == NULL) {
            return (void *)1;
        }
        memset(block, 0x3C, size);
        free(block);
    }
    return NULL;
}

static int child_main(void)
{
    static const size_t sizes[] = {
        1, 8, 16, 100, 1000, 1024, 5000, 32768, 40000, 300000, MiB, 2 * MiB + 1,
    };
    enum { PER_SIZE = 8 };
    void *blocks[PER_SIZE];
    struct rusage usage;

    /* Valgrind's faults are its own. */
    if (getrusage(RUSAGE_SELF, &usage) == 0 && usage.ru_minflt > CHILD_START_FAULTS_MAX &&
        !under_valgrind()) {
        return CHILD_TOO_MANY_FAULTS;
    }
    alarm(CHILD_TIMEOUT_SECONDS);
    /* The workers that allocated these do not exist in the child. */
    for (int i = 0; i < WORKERS; i++) {
        uint64_t *block = atomic_exchange(&published[i], NULL);
        if (block != NULL && !check_and_free_published(block)) {
            return CHILD_CORRUPTION;
        }
    }
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t size = sizes[s];
        /* A prefix is enough to see that blocks are distinct and usable;
         * whole multi-MiB patterns would only slow the children down. */
        size_t checked = size < 4096 ? size : 4096;
        for (int i = 0; i < PER_SIZE; i++) {
            blocks[i] = malloc(size);
            if (blocks[i] == NULL) {
                return CHILD_ALLOCATION_FAILED;
            }
            fill_pattern(blocks[i], checked, size + (uint64_t)i);
            if (size > checked) {
                ((unsigned char *)blocks[i])[size - 1] = 0xEE;
            }
        }
        for (int i = 0; i < PER_SIZE; i++) {
            if (pattern_mismatch(blocks[i], checked, size + (uint64_t)i) != PATTERN_INTACT) {
                return CHILD_CORRUPTION;
            }
            void *moved = realloc(blocks[i], size * 2 + 1);
            if (moved == NULL) {
                return CHILD_ALLOCATION_FAILED;
            }
            if (pattern_mismatch(moved, checked, size + (uint64_t)i) != PATTERN_INTACT ||
                (size > checked && ((unsigned char *)moved)[size - 1] != 0xEE)) {
                return CHILD_CORRUPTION;
            }
            free(moved);
        }
    }

    /* In the child glibc takes the parent's other threads' stacks, their
     * TLS included, into its cache of stacks, which main() keeps empty: the
     * first thread to end unmaps them.  mallinfo must read none of the
     * caches those threads left there (their heaps leave the registry at
     * the fork), or it crashes. */
    for (int i = 0; i < WORKERS + 1; i++) {
        pthread_t thread;
        void *thread_result;
        if (pthread_create(&thread, NULL, run_child_thread, NULL) != 0 ||
            pthread_join(thread, &thread_result) != 0 || thread_result != NULL) {
            return CHILD_THREAD_FAILED;
        }
    }
    struct mallinfo2 info = mallinfo2();
    if (info.uordblks > 256 * MiB || info.fordblks > 256 * MiB) {
        return CHILD_BAD_MALLINFO;
    }
    return CHILD_OK;
}

static const char *describe_child_status(int code)
{
    switch (code) {
    case CHILD_ALLOCATION_FAILED:
        return "an allocation returned NULL";
    case CHILD_CORRUPTION:
        return "a block's contents were corrupted";
    case CHILD_THREAD_FAILED:
        return "a thread in the child could not allocate";
    case CHILD_TOO_MANY_FAULTS:
        return "the fork cost the child too many minor faults before its first statement";
    case CHILD_BAD_MALLINFO:
        return "mallinfo2 in the child counted hundreds of MiB in use or free";
    default:
        return "unexpected exit status";
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    rerun_with("GLIBC_TUNABLES", "glibc.pthread.stack_cache_size=0", argv);
    pthread_t workers[WORKERS];

    for (int i = 0; i < WORKERS; i++) {
        int error = pthread_create(&workers[i], NULL, run_worker, (void *)(uintptr_t)i);
        if (error != 0) {
            hard_error("pthread_create: %s", strerror(error));
        }
    }
    fflush(stdout);

    /* Valgrind makes every fork and child many times slower. */
    int forks = under_valgrind() ? FORKS / 4 : FORKS;
    int children_ok = 0;
    for (int n = 0; n < forks; n++) {
        /* Let the workers get back into the middle of allocating. */
        usleep(2000 + 500 * (n % 8));
        pid_t child = fork();
        if (child < 0) {
            hard_error("fork failed");
        }
        if (child == 0) {
            _exit(child_main());
        }
        atomic_store(&workers_paused, 1);
        int status;
        if (waitpid(child, &status, 0) != child) {
            hard_error("waitpid failed");
        }
        atomic_store(&workers_paused, 0);
        if (WIFSIGNALED(status)) {
            CHECK(0, "fork %d: child killed by signal %d (%s)%s", n, WTERMSIG(status),
                  strsignal(WTERMSIG(status)),
                  WTERMSIG(status) == SIGALRM ? ": it hung, probably on a lock held at fork" : "");
        } else if (WEXITSTATUS(status) != CHILD_OK) {
            CHECK(0, "fork %d: child exited with %d: %s", n, WEXITSTATUS(status),
                  describe_child_status(WEXITSTATUS(status)));
        } else {
            children_ok++;
        }
    }

    atomic_store(&stop_requested, 1);
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(workers[i], NULL);
        uint64_t *block = atomic_exchange(&published[i], NULL);
        CHECK(block == NULL || check_and_free_published(block),
              "worker %d: its last published block was corrupted", i);
    }
    printf("%d of %d children of a %d-thread parent allocated and exited cleanly\n", children_ok,
           forks, WORKERS + 1);
    return test_result("test_fork");
}

/* fork() from a signal handler in a process that never started a second
 * thread, while its one thread is inside malloc, free or malloc_trim: glibc
 * supports it there (its malloc takes no lock in such a process), and a
 * program that forks a helper from a handler (a crash reporter, a
 * supervisor on SIGCHLD) must not hang on a lock its own interrupted call
 * holds.  The allocating loop runs in a child of the test, on blocks of
 * every tier, untouched, with a trim every 1024, so that most of its time
 * goes to the paths that take hakmem's locks; a profiling timer interrupts
 * it every 2 ms of its CPU time, and the handler forks a process that exits
 * at once and waits for it.  With fork taking the locks regardless, six
 * runs in six hung.  A loop still running after CHILD_TIMEOUT_SECONDS is
 * stuck: an alarm ends it, and the test fails.  The handler's children do
 * what POSIX allows after such a fork, _exit; the interrupted call goes on
 * in the parent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"

#define SLOTS 512
/* Until FORKS forks, which take some 2.5 s here, or at most MAX_SECONDS
 * on a loaded machine, where no fewer than MIN_FORKS will do. */
#define FORKS 600
#define MAX_SECONDS 10.0
#define MIN_FORKS 100
#define CHILD_TIMEOUT_SECONDS 30

enum loop_status {
    LOOP_OK = 0,
    LOOP_ALLOCATION_FAILED = 2,
    LOOP_FORK_FAILED = 3,
    LOOP_TOO_FEW_FORKS = 4,
};

static volatile sig_atomic_t forks_done;
static volatile sig_atomic_t fork_failed;

static void fork_in_handler(int signal_number)
{
    (void)signal_number;
    int saved_errno = errno;
    pid_t pid = fork();
    if (pid == 0) {
        _exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fork_failed = 1;
    } else {
        forks_done++;
    }
    errno = saved_errno;
}

/* Mostly Mid and L25 blocks and large ones, whose paths lock the page
 * arena, the HotSpanBox and the large-block lists, with small ones between. */
static const struct size_tier loop_sizes[] = {
    {30, 16, 1024},
    {30, 1025, 32 * KiB},
    {30, 32 * KiB + 1, MiB},
    {10, MiB + 1, 3 * MiB},
};

static int allocation_loop(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = fork_in_handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGPROF, &action, NULL) != 0) {
        return LOOP_FORK_FAILED;
    }
    struct itimerval every_2ms = {{0, 2000}, {0, 2000}};
    if (setitimer(ITIMER_PROF, &every_2ms, NULL) != 0) {
        return LOOP_FORK_FAILED;
    }
    static void *slots[SLOTS];
    uint64_t rng = 42;
    double start = seconds_now();
    for (long i = 1;; i++) {
        size_t slot = rng_next(&rng) % SLOTS;
        free(slots[slot]);
        size_t size = TIERED_SIZE(&rng, loop_sizes);
        slots[slot] = malloc(size);
        if (slots[slot] == NULL) {
            return LOOP_ALLOCATION_FAILED;
        }

        if (i % 1024 == 0) {
            malloc_trim(0);
        }
        if (fork_failed) {
            return LOOP_FORK_FAILED;
        }
        if (forks_done >= FORKS || (i % 256 == 0 && seconds_now() - start > MAX_SECONDS)) {
            break;
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    for (size_t slot = 0; slot < SLOTS; slot++) {
        free(slots[slot]);
    }
    printf("forks from the handler: %d\n", (int)forks_done);
    fflush(stdout);
    return forks_done >= MIN_FORKS ? LOOP_OK : LOOP_TOO_FEW_FORKS;
}

int main(void)
{
#if !HAVE_DECL___LIBC_SINGLE_THREADED
    printf("SKIP: the C library does not say whether the process is single-threaded\n");
    return EXIT_SKIP;
#endif
    pid_t pid = fork_fault_child(CHILD_TIMEOUT_SECONDS);
    if (pid == 0) {
        _exit(allocation_loop());
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        hard_error("waitpid: %s", strerror(errno));
    }
    if (WIFSIGNALED(status)) {
        CHECK(false, "the allocating process %s (after %d s: stuck in a fork from its handler?)",
              strsignal(WTERMSIG(status)), CHILD_TIMEOUT_SECONDS);
    } else {
        CHECK(WEXITSTATUS(status) != LOOP_ALLOCATION_FAILED, "malloc failed in the loop");
        CHECK(WEXITSTATUS(status) != LOOP_FORK_FAILED,
              "a fork from the handler, its child or the timer failed");
        CHECK(WEXITSTATUS(status) != LOOP_TOO_FEW_FORKS,
              "fewer than %d forks from the handler in %.0f s", MIN_FORKS, MAX_SECONDS);
        CHECK(WEXITSTATUS(status) == LOOP_OK, "the loop exited with status %d",
              WEXITSTATUS(status));
    }
    return test_result("test_fork_in_handler");
}

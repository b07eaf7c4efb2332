/* fork() while other threads use stdio: threads read a file's one long line
 * with getline (whose buffer grows by realloc while the stream's lock is
 * held), one flushes every stream again and again (holding the C library's
 * lock on its list of streams while it waits on each stream's), and others
 * fork children that exit at once.  glibc's fork takes that list lock after
 * the fork handlers have run: a handler that held the allocator's locks by
 * then waited on the flushing thread, which waited on a reader, which
 * waited on the allocator (glibc's bug 19431, which its own malloc avoids
 * by taking its locks after the list lock).  The threads run in a child of
 * the test for RUN_SECONDS; one still running after CHILD_TIMEOUT_SECONDS is
 * stuck, an alarm ends it, and the test fails.  Before hakmem's handler
 * took the list lock first, it hung in every run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define READERS 6
#define FORKERS 3
#define LINE_LENGTH 50000
#define RUN_SECONDS 3
#define CHILD_TIMEOUT_SECONDS 60

enum run_status {
    RUN_OK = 0,
    RUN_THREAD_FAILED = 3,
};

static atomic_bool stop;
static atomic_int thread_failures;
static atomic_long forks_done;
static char path[] = "/tmp/hakmem_fork_stdio.XXXXXX";

static void *read_line(void *unused)
{
    (void)unused;
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        atomic_fetch_add(&thread_failures, 1);
        return NULL;
    }
    while (!atomic_load(&stop)) {
        rewind(file);
        char *line = NULL;
        size_t allocated = 0;
        if (getline(&line, &allocated, file) != LINE_LENGTH + 1)
            atomic_fetch_add(&thread_failures, 1);
        free(line);
    }
    fclose(file);
    return NULL;
}

static void *flush_all(void *unused)
{
    (void)unused;
    while (!atomic_load(&stop))
        if (fflush(NULL) != 0)
            atomic_fetch_add(&thread_failures, 1);
    return NULL;
}

static void *fork_children(void *unused)
{
    (void)unused;
    while (!atomic_load(&stop)) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(17);
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 17)
            atomic_fetch_add(&thread_failures, 1);
        else
            atomic_fetch_add(&forks_done, 1);
    }
    return NULL;
}

/* The file of one long line, made before the threads' process starts so
 * that the test removes it whatever becomes of that. */
static bool write_file(void)
{
    int fd = mkstemp(path);
    if (fd < 0)
        return false;
    static char line[LINE_LENGTH + 1];
    memset(line, 'x', LINE_LENGTH);
    line[LINE_LENGTH] = '\n';
    bool written = write(fd, line, sizeof(line)) == (ssize_t)sizeof(line);
    close(fd);
    return written;
}

static int run(void)
{
    pthread_t threads[READERS + 1 + FORKERS];
    size_t started = 0;
    for (size_t i = 0; i < READERS + 1 + FORKERS; i++) {
        void *(*work)(void *) = i < READERS ? read_line : i == READERS ? flush_all : fork_children;
        if (pthread_create(&threads[started], NULL, work, NULL) != 0)
            break;
        started++;
    }
    sleep(RUN_SECONDS);
    atomic_store(&stop, true);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    printf("forks: %ld\n", atomic_load(&forks_done));
    fflush(stdout);
    if (started < READERS + 1 + FORKERS || atomic_load(&thread_failures) != 0)
        return RUN_THREAD_FAILED;
    return RUN_OK;
}

int main(void)
{
    if (!write_file()) {
        unlink(path);
        hard_error("cannot write %s: %s", path, strerror(errno));
    }
    pid_t pid = fork_fault_child(CHILD_TIMEOUT_SECONDS);
    if (pid == 0)
        _exit(run());
    int status;
    if (waitpid(pid, &status, 0) != pid)
        hard_error("waitpid: %s", strerror(errno));
    unlink(path);
    if (WIFSIGNALED(status)) {
        CHECK(false, "the process of readers, flusher and forkers %s (after %d s: deadlocked?)",
              strsignal(WTERMSIG(status)), CHILD_TIMEOUT_SECONDS);
    } else {
        CHECK(WEXITSTATUS(status) != RUN_THREAD_FAILED,
              "a thread did not start, a getline read a short line, a flush or a fork failed");
        CHECK(WEXITSTATUS(status) == RUN_OK || WEXITSTATUS(status) == RUN_THREAD_FAILED,
              "the process exited with status %d", WEXITSTATUS(status));
    }
    return test_result("test_fork_stdio");
}

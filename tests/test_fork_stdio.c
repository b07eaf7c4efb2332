/* fork() while other threads use stdio: threads read a file's one long line
 * with getline (whose buffer grows by realloc while the stream's lock is
 * held), one flushes every stream again and again (holding the C library's
 * lock on its list of streams while it waits on each stream's), and others
 * fork children that exit at once.  glibc's fork takes that list lock after
 * the fork handlers have run: a handler that held the allocator's locks by
 * then waited on the flushing thread, which waited on a reader, which
 * waited on the allocator (glibc's bug 19431, which its own malloc avoids
 * by taking its locks after the list lock).  The threads run in a child of
 * the test to FORKS forks; one still running after CHILD_TIMEOUT_SECONDS is
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

#include "config.h"
#include "harness.h"

#define READERS 6
#define FORKERS 3
#define LINE_LENGTH 50000
/* Until FORKS forks (some 3 s here), at most MAX_SECONDS, and no fewer
 * than MIN_FORKS: before the change every run hung within its first few. */
#define FORKS 30
#define MIN_FORKS 3
#define MAX_SECONDS 10
#define CHILD_TIMEOUT_SECONDS 60

enum run_status {
    RUN_OK = 0,
    RUN_THREAD_FAILED = 3,
    RUN_TOO_FEW_FORKS = 4,
};

static atomic_bool stop;
static atomic_int thread_failures;
static atomic_long forks_done;
static char path[4096];

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
    /* A pause between flushes, or forks would hardly ever find the list's
     * lock free: each flush holds it while it waits on the readers. */
    while (!atomic_load(&stop)) {
        if (fflush(NULL) != 0)
            atomic_fetch_add(&thread_failures, 1);
        usleep(100);
    }
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
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof(path), "%s/hakmem_fork_stdio.XXXXXX", dir && *dir ? dir : "/tmp");
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
    double start = seconds_now();
    while (atomic_load(&forks_done) < FORKS && seconds_now() - start < MAX_SECONDS)
        usleep(10000);
    atomic_store(&stop, true);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    printf("forks: %ld\n", atomic_load(&forks_done));
    fflush(stdout);
    if (started < READERS + 1 + FORKERS || atomic_load(&thread_failures) != 0)
        return RUN_THREAD_FAILED;
    return atomic_load(&forks_done) >= MIN_FORKS ? RUN_OK : RUN_TOO_FEW_FORKS;
}

int main(void)
{
#if !HAVE__IO_LIST_LOCK
    printf("SKIP: the C library has no _IO_list_lock for fork's handlers to take first\n");
    return EXIT_SKIP;
#endif
    if (!write_file()) {
        int error = errno;
        if (path[0])
            unlink(path);
        hard_error("cannot write %s: %s", path, strerror(error));
    }
    pid_t pid = fork_fault_child(CHILD_TIMEOUT_SECONDS);
    if (pid == 0)
        _exit(run());
    int status;
    pid_t waited = waitpid(pid, &status, 0);
    int error = errno;
    unlink(path);
    if (waited != pid)
        hard_error("waitpid: %s", strerror(error));
    if (WIFSIGNALED(status)) {
        CHECK(false, "the process of readers, flusher and forkers %s (after %d s: deadlocked?)",
              strsignal(WTERMSIG(status)), CHILD_TIMEOUT_SECONDS);
    } else {
        CHECK(WEXITSTATUS(status) != RUN_THREAD_FAILED,
              "a thread did not start, a getline read a short line, a flush or a fork failed");
        CHECK(WEXITSTATUS(status) != RUN_TOO_FEW_FORKS, "fewer than %d forks in %d s", MIN_FORKS,
              MAX_SECONDS);
        CHECK(WEXITSTATUS(status) == RUN_OK || WEXITSTATUS(status) == RUN_THREAD_FAILED ||
                  WEXITSTATUS(status) == RUN_TOO_FEW_FORKS,
              "the process exited with status %d", WEXITSTATUS(status));
    }
    return test_result("test_fork_stdio");
}

/* Proves that the sanitizer suite can fail: this program is built like the
 * sanitized tests, and a child of it that overruns a global array or
 * overflows a signed integer must die with the sanitizer's report.  It also
 * checks that hakmem and the sanitizer share the process as intended:
 * hak_malloc is hakmem's, malloc is the sanitizer's.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hakmem.h"
#include "../harness.h"
#include "../opaque.h"

static int global_array[8];

/* Out of the compiler's sight (TEST_OPAQUE), so that UBSan's bounds and object
 * size checks, which know the array, leave the overrun to ASan. */
static TEST_OPAQUE int element(const int *elements, size_t index)
{
    return elements[index];
}

static int overrun_global(void)
{
    return element(global_array, 8);
}

static int overflow_signed(void)
{
    int value = INT_MAX;
    return value + (int)opaque_size(1);
}

/* Runs this program with mode as argument and checks that it fails with
 * expected in its standard error. */
static void expect_report(const char *mode, const char *expected)
{
    int pipe_fds[2];
    char report[16384];
    size_t length = 0;
    ssize_t got;
    int status;

    if (pipe(pipe_fds) != 0) {
        hard_error("pipe failed");
    }
    pid_t child = fork();
    if (child < 0) {
        hard_error("fork failed");
    }
    if (child == 0) {
        dup2(pipe_fds[1], STDERR_FILENO);
        close(pipe_fds[0]);
        execl("/proc/self/exe", "sanitizer_selftest", mode, (char *)NULL);
        _exit(EXIT_HARD_ERROR);
    }
    close(pipe_fds[1]);
    while ((got = read(pipe_fds[0], report + length, sizeof(report) - 1 - length)) > 0) {
        length += (size_t)got;
    }
    report[length] = '\0';
    close(pipe_fds[0]);
    waitpid(child, &status, 0);
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0),
          "the %s child exited with status 0: the sanitizer did not stop it", mode);
    CHECK(strstr(report, expected) != NULL, "the %s child's report lacks \"%s\":\n%s", mode,
          expected, report);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "global") == 0) {
        return overrun_global();
    }
    if (argc == 2 && strcmp(argv[1], "signed") == 0) {
        return overflow_signed();
    }

    expect_report("global", "AddressSanitizer: global-buffer-overflow");
    expect_report("signed", "runtime error: signed integer overflow");

    void *hakmem_block = hak_malloc(100);
    CHECK(hakmem_block != NULL && hak_malloc_usable_size(hakmem_block) >= 100,
          "hak_malloc(100) returned %p", hakmem_block);
    hak_free(hakmem_block);
    void *sanitizer_block = malloc(100);
    CHECK(hak_node_of(sanitizer_block) < 0,
          "malloc resolves to hakmem, not to the sanitizer: the standard names are not hidden");
    free(sanitizer_block);
    return test_result("sanitizer_selftest");
}
